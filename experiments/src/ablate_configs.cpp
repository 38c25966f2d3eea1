// The configurations of `waco-hybrid ablate`: the standard set (ablation_configs.def, one line a
// configuration: its tune arguments), the user's --config NAME=ARGS and the choice of --configs.
#include "ablate_internal.hpp"
#include "cli_common.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "waco/kernels/error.hpp"
#include "waco/tune/searcher.hpp"

namespace waco::cli {
using namespace waco::kernels;

namespace ablate_detail {

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

const std::vector<Config>& standard_configs() {
  static const std::vector<Config> all = {
#define WACO_ABLATION(name, kind, description, args) \
  Config{name, kind, description, split_words(args)},
#include "ablation_configs.def"
#undef WACO_ABLATION
  };
  return all;
}

std::string standard_names() {
  std::string s;
  for (const Config& c : standard_configs()) s += (s.empty() ? "" : ",") + c.name;
  return s;
}

bool has_arg(const Config& c, const std::string& flag) {
  return std::find(c.args.begin(), c.args.end(), flag) != c.args.end();
}

std::optional<std::string> arg_value(const Config& c, const std::string& flag) {
  for (std::size_t i = 0; i + 1 < c.args.size(); ++i)
    if (c.args[i] == flag) return c.args[i + 1];
  return std::nullopt;
}

std::vector<std::string> concrete_args(const std::vector<std::string>& args, KernelKind kind) {
  std::vector<std::string> a = args;
  for (std::string& w : a)
    if (w == "@budget") w = std::to_string(tuning::default_model_budget(kind));
  return a;
}

std::vector<std::string> stored_args(const Options& o, const Config& c) {
  std::vector<std::string> a = concrete_args(c.args, kernel_from_option(o.kernel));
  for (const std::string& w : split_words(o.tune_args)) a.push_back(w);
  return a;
}

std::vector<Config> chosen_configs(const Options& o) {
  std::map<std::string, Config> known;
  for (const Config& c : standard_configs()) known[c.name] = c;
  std::vector<std::string> order;
  for (const std::string& e : o.extra) {
    const std::size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--config '" + e + "' is not NAME=TUNE-ARGUMENTS",
                  "e.g. --config \"anns-1thread=--search anns --threads 1\"");
    Config c{e.substr(0, eq), "pipeline", "user configuration: " + e.substr(eq + 1),
             split_words(e.substr(eq + 1))};
    if (c.name == "side-by-side" || c.name.find_first_of(" ,/") != std::string::npos)
      throw Error("configuration name '" + c.name + "' is reserved or has a space, comma or slash");
    if (known.count(c.name) && !std::count(order.begin(), order.end(), c.name))
      throw Error("--config " + c.name + " redefines a standard configuration",
                  "choose another name (standard: " + standard_names() + ")");
    known[c.name] = c;
    order.push_back(c.name);
  }
  std::vector<Config> out;
  std::set<std::string> seen;
  const std::string list = o.configs.empty() ? standard_names() : o.configs;
  std::istringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    if (name.empty()) continue;
    const auto it = known.find(name);
    if (it == known.end())
      throw Error("unknown ablation configuration '" + name + "'",
                  "standard: " + standard_names() + "; add your own with --config NAME=ARGS");
    if (seen.insert(name).second) out.push_back(it->second);
  }
  for (const std::string& name : order)  // --config ones not named in --configs run too
    if (seen.insert(name).second) out.push_back(known[name]);
  if (out.empty()) throw Error("no ablation configuration to run", "give --configs");
  return out;
}

}  // namespace ablate_detail

}  // namespace waco::cli
