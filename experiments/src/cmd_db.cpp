// waco-hybrid db merge OUT IN...: the measurement groups of shard databases (or export files)
// collected on several machines (`collect --shard i/N`, the Slurm array job) into one database.
// A group is identified by (matrix fingerprint, kernel, dense size, threads, value type): one
// already in OUT with the same rows is a duplicate and skipped; one with other rows is a
// conflict, reported, and the group kept is the first one merged (--prefer last: the last one).
// Only collect's groups are merged (with their matrices, provenance and repetitions); tune's
// loose measurements and ablation rows stay in their databases.
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <tuple>

#include "waco/learned/shipped.hpp"
#include "cli_common.hpp"
#include "command.hpp"
#include "dataset_files.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/error.hpp"

namespace waco::cli {
namespace {

using heuristics::ResultsDb;
using kernels::Error;
namespace fs = std::filesystem;

struct Options {
  std::string output;
  std::vector<std::string> inputs;
  std::string prefer = "first";
  bool json = false;
};

using Identity = std::tuple<std::string, std::string, std::int64_t, std::int64_t, std::string>;

Identity identity_of(const nlohmann::json& g) {
  return {g.at("matrix").at("fingerprint").get<std::string>(), g.at("kernel").get<std::string>(),
          g.at("dense").get<std::int64_t>(), g.at("threads").get<std::int64_t>(),
          g.value("dtype", std::string("f32"))};
}

/// What decides whether two groups are the same measurement (not when or where it was taken).
nlohmann::json measured_part(const nlohmann::json& g) {
  return {g.at("rounds"), g.at("rows"), g.value("pair_agreement", nlohmann::json())};
}

bool is_export_file(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  for (const char* ext : {".jsonl.gz", ".jsonl"})
    if (name.size() > std::string(ext).size() &&
        name.compare(name.size() - std::string(ext).size(), std::string::npos, ext) == 0)
      return true;
  return false;
}

void for_each_input_group(const std::string& in,
                          const std::function<void(const nlohmann::json&)>& f) {
  if (!fs::exists(in)) throw Error("no such file: " + in);
  if (is_export_file(in)) {
    learned::for_each_export_group(in, f);
    return;
  }
  ResultsDb db(in);
  db.for_each_group("", f);
}

int merge(const Options& o) {
  for (const std::string& in : o.inputs) {
    if (!fs::exists(in)) throw Error("no such file: " + in, "give shard databases or export files");
    std::error_code ec;
    if (fs::exists(o.output) && fs::equivalent(in, o.output, ec))
      throw Error("the output " + o.output + " is also an input", "merge into a new file");
  }
  ResultsDb out(o.output);
  // What OUT holds already, by identity (where each came from, for conflict reports).
  std::map<Identity, std::pair<nlohmann::json, std::string>> held;
  out.for_each_group("", [&](const nlohmann::json& g) {
    held[identity_of(g)] = {measured_part(g), o.output};
  });
  std::int64_t added = 0, duplicates = 0, replaced = 0;
  nlohmann::json conflicts = nlohmann::json::array();
  nlohmann::json per_input = nlohmann::json::array();
  for (const std::string& in : o.inputs) {
    std::int64_t groups = 0;
    ResultsDb::Transaction tx(out);
    for_each_input_group(in, [&](const nlohmann::json& g) {
      ++groups;
      const Identity id = identity_of(g);
      const nlohmann::json part = measured_part(g);
      const auto it = held.find(id);
      if (it == held.end()) {
        out.import_group(g);
        held[id] = {part, in};
        ++added;
        return;
      }
      if (it->second.first == part) {
        ++duplicates;
        return;
      }
      const bool take = o.prefer == "last";
      conflicts.push_back({{"fingerprint", std::get<0>(id)},
                           {"kernel", std::get<1>(id)},
                           {"dense", std::get<2>(id)},
                           {"threads", std::get<3>(id)},
                           {"kept_from", take ? in : it->second.second},
                           {"other_from", take ? it->second.second : in}});
      if (take) {
        out.import_group(g);
        it->second = {part, in};
        ++replaced;
      }
    });
    tx.commit();
    per_input.push_back({{"input", in}, {"groups", groups}});
  }
  const nlohmann::json report = {
      {"output", o.output},       {"inputs", per_input},           {"added", added},
      {"duplicates", duplicates}, {"conflicts", conflicts.size()}, {"replaced", replaced},
      {"prefer", o.prefer},       {"conflict_list", conflicts},    {"groups", held.size()}};
  if (o.json) {
    print_json(report);
    return kExitOk;
  }
  std::printf(
      "merged %zu input(s) into %s: %lld groups added, %lld duplicates skipped, %zu "
      "conflicts (kept the %s), %zu groups in all\n",
      o.inputs.size(), o.output.c_str(), static_cast<long long>(added),
      static_cast<long long>(duplicates), conflicts.size(),
      o.prefer == "last" ? "last one" : "first one", held.size());
  for (std::size_t i = 0; i < conflicts.size() && i < 10; ++i) {
    const nlohmann::json& c = conflicts[i];
    std::printf("  conflict: %s %s dense %lld threads %lld: kept %s, not %s\n",
                c["kernel"].get<std::string>().c_str(), c["fingerprint"].get<std::string>().c_str(),
                static_cast<long long>(c["dense"].get<std::int64_t>()),
                static_cast<long long>(c["threads"].get<std::int64_t>()),
                c["kept_from"].get<std::string>().c_str(),
                c["other_from"].get<std::string>().c_str());
  }
  if (conflicts.size() > 10)
    std::printf("  (%zu more: --json lists them)\n", conflicts.size() - 10);
  return kExitOk;
}

}  // namespace

Command make_db_command() {
  return {
      "db", "Results database maintenance: merge shard databases",
      [](CLI::App& sub) -> std::function<int()> {
        auto o = std::make_shared<Options>();
        sub.require_subcommand(1);
        CLI::App* m = sub.add_subcommand(
            "merge", "Merge the measurement groups of shard databases or export files into OUT");
        m->add_option("OUT", o->output, "The merged database (created, or added to)")->required();
        m->add_option("IN", o->inputs, "Shard databases (.sqlite) or export files (.jsonl.gz)")
            ->required();
        m->add_option("--prefer", o->prefer,
                      "Which of two conflicting groups to keep: the first merged or the last")
            ->check(CLI::IsMember({"first", "last"}))
            ->capture_default_str();
        m->add_flag("--json", o->json, "Print JSON (counts and every conflict)");
        sub.footer(
            "A group (matrix fingerprint, kernel, dense size, threads, dtype) already in OUT with the\n"
            "same rows is a duplicate; with other rows a conflict, reported. Only collect's\n"
            "groups are merged.\n\n"
            "Examples:\n"
            "  waco-hybrid db merge all.sqlite shard-0.sqlite shard-1.sqlite\n"
            "  waco-hybrid db merge --json all.sqlite shard-*.jsonl.gz\n");
        return [o] { return merge(*o); };
      }};
}

}  // namespace waco::cli
