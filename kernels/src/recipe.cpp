// Matrix recipes (issue 17, "dataset"): the recipe value type, its JSON form and label, and the
// recipe file. See recipe.hpp for the contract; the augmentations are in recipe_augment.cpp, the
// nnz estimates and the default mixes in recipe_mix.cpp, what they share in recipe_internal.hpp.
#include "waco/kernels/recipe.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <utility>

#include "io_text.hpp"
#include "recipe_internal.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/json_fields.hpp"

namespace waco::kernels {

using namespace recipe_detail;

namespace {

using json = nlohmann::json;

const char* const kHint = "a recipe is the output of Recipe::to_json (recipe_version 1)";

// ---- generator parameters --------------------------------------------------------------------
Param p64(const char* n, std::int64_t GeneratorSpec::*m) { return {n, m, nullptr, nullptr}; }
Param p32(const char* n, int GeneratorSpec::*m) { return {n, nullptr, m, nullptr}; }
Param pf(const char* n, double GeneratorSpec::*m) { return {n, nullptr, nullptr, m}; }

using S = GeneratorSpec;

/// The parameters each kind reads (generators.cpp), besides "kind" and "seed". powerlaw and
/// smallworld also check that cols is 0 or rows; a recipe keeps cols 0 for them.
const std::map<std::string, std::vector<Param>>& param_table() {
  static const std::map<std::string, std::vector<Param>> table = {
      {"uniform", {p64("rows", &S::rows), p64("cols", &S::cols), p64("nnz", &S::nnz)}},
      {"banded",
       {p64("rows", &S::rows), p64("cols", &S::cols), p64("bandwidth", &S::bandwidth),
        pf("fill", &S::fill)}},
      {"blocks",
       {p64("rows", &S::rows), p64("cols", &S::cols), p64("block", &S::block),
        p64("blocks", &S::blocks), pf("fill", &S::fill)}},
      {"stencil2d", {p64("nx", &S::nx), p64("ny", &S::ny)}},
      {"stencil3d", {p64("nx", &S::nx), p64("ny", &S::ny), p64("nz", &S::nz)}},
      {"rmat",
       {p32("scale", &S::scale), p32("edge_factor", &S::edge_factor), pf("a", &S::a),
        pf("b", &S::b), pf("c", &S::c)}},
      {"powerlaw", {p64("rows", &S::rows), pf("alpha", &S::alpha), pf("beta", &S::beta)}},
      {"smallworld",
       {p64("rows", &S::rows), p32("neighbors", &S::neighbors), pf("rewire", &S::rewire)}},
  };
  return table;
}

std::string kind_names() {
  std::string names;
  for (const auto& g : generator_kinds()) names += (names.empty() ? "" : ", ") + g.name;
  return names;
}

}  // namespace

/// The parameters of a kind; Error naming `field` for an unknown kind.
const std::vector<Param>& recipe_detail::params_of(const std::string& kind,
                                                   const std::string& field) {
  const auto& table = param_table();
  const auto it = table.find(kind);
  if (it == table.end()) {
    throw Error("recipe: field '" + field + "': unknown generator kind '" + kind + "'",
                "known kinds: " + kind_names());
  }
  return it->second;
}

namespace {

// ---- JSON reading ----------------------------------------------------------------------------

/// One JSON object being read: every accessor names the field by its dotted path, and finish()
/// refuses the fields nobody asked for.
class Fields {
 public:
  Fields(const json& j, std::string prefix) : j_(j), prefix_(std::move(prefix)) {
    if (!j_.is_object()) {
      throw Error(prefix_.empty() ? "recipe: not a JSON object (got " + j_.dump() + ")"
                                  : "recipe: field '" + prefix_ + "' must be an object",
                  kHint);
    }
  }
  std::string path(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }
  bool has(const std::string& key) const { return j_.contains(key); }
  const json& need(const std::string& key) {
    if (!j_.contains(key)) throw Error("recipe: missing field '" + path(key) + "'", kHint);
    used_.push_back(key);
    return j_.at(key);
  }
  [[noreturn]] void bad(const std::string& key, const std::string& what) const {
    throw Error("recipe: field '" + path(key) + "' " + what, kHint);
  }
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi) {
    const json& v = need(key);
    const std::optional<std::int64_t> n = json_integer(v);
    if (!n && v.is_number_unsigned()) bad(key, "is out of range");
    if (!n) bad(key, "must be an integer (got " + v.dump() + ")");
    const std::int64_t x = *n;
    if (x < lo || x > hi) {
      bad(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                   std::to_string(x) + ")");
    }
    return x;
  }
  u64 seed(const std::string& key) {
    const json& v = need(key);
    if (const std::optional<u64> s = json_unsigned(v)) return *s;
    bad(key, "must be an integer in [0, 2^64) (got " + v.dump() + ")");
  }
  double number(const std::string& key) {
    const json& v = need(key);
    if (!v.is_number()) bad(key, "must be a number (got " + v.dump() + ")");
    return v.get<double>();
  }
  std::string string(const std::string& key) {
    const json& v = need(key);
    if (!v.is_string()) bad(key, "must be a string (got " + v.dump() + ")");
    return v.get<std::string>();
  }
  bool boolean(const std::string& key) {
    const json& v = need(key);
    if (!v.is_boolean()) bad(key, "must be true or false (got " + v.dump() + ")");
    return v.get<bool>();
  }
  /// Refuses fields not read; `why` says what the object may hold.
  void finish(const std::string& why) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (std::find(used_.begin(), used_.end(), it.key()) == used_.end()) {
        throw Error("recipe: unknown field '" + path(it.key()) + "' (" + why + ")", kHint);
      }
    }
  }

 private:
  const json& j_;
  std::string prefix_;
  std::vector<std::string> used_;
};

const char* source_name(Recipe::Source s) {
  switch (s) {
    case Recipe::Source::Generator:
      return "generator";
    case Recipe::Source::File:
      return "file";
    case Recipe::Source::Tensor:
      return "tensor";
  }
  return "?";
}

std::string param_list(const std::vector<Param>& ps) {
  std::string s = "kind, seed";
  for (const Param& p : ps) s += std::string(", ") + p.name;
  return s;
}

json generator_to_json(const GeneratorSpec& g) {
  json j = {{"kind", g.kind}, {"seed", g.seed}};
  for (const Param& p : params_of(g.kind, "generator.kind")) {
    if (p.i64) j[p.name] = g.*p.i64;
    if (p.i32) j[p.name] = g.*p.i32;
    if (p.f64) j[p.name] = g.*p.f64;
  }
  return j;
}

GeneratorSpec generator_from_json(const json& j) {
  Fields f(j, "generator");
  GeneratorSpec g;
  g.kind = f.string("kind");
  const std::vector<Param>& ps = params_of(g.kind, "generator.kind");
  g.seed = f.seed("seed");
  g.cols = 0;
  for (const Param& p : ps) {
    if (p.i64) g.*p.i64 = f.integer(p.name, INT64_MIN, INT64_MAX);
    if (p.i32) g.*p.i32 = static_cast<int>(f.integer(p.name, INT32_MIN, INT32_MAX));
    if (p.f64) g.*p.f64 = f.number(p.name);
  }
  f.finish(g.kind + " reads " + param_list(ps));
  return g;
}

Permutation parse_permutation(Fields& f, const std::string& key) {
  const std::string s = f.string(key);
  for (Permutation p : {Permutation::None, Permutation::Rows, Permutation::Columns,
                        Permutation::Both, Permutation::Symmetric}) {
    if (s == permutation_name(p)) return p;
  }
  f.bad(key, "must be none, rows, cols, both or symmetric (got \"" + s + "\")");
}

json augmentation_to_json(const Augmentation& a) {
  json j = {{"seed", a.seed}};
  if (a.has_submatrix()) {
    j["submatrix"] = {{"rows", a.sub_rows}, {"cols", a.sub_cols}, {"diagonal", a.sub_diagonal}};
  }
  if (a.resize != 1.0) j["resize"] = a.resize;
  if (a.block != 1) j["block"] = a.block;
  if (a.permute != Permutation::None) j["permute"] = permutation_name(a.permute);
  return j;
}

Augmentation augmentation_from_json(const json& j) {
  Fields f(j, "augment");
  Augmentation a;
  a.seed = f.seed("seed");
  if (f.has("submatrix")) {
    Fields s(f.need("submatrix"), "augment.submatrix");
    a.sub_rows = static_cast<index_t>(s.integer("rows", 1, kMaxIndex));
    a.sub_cols = static_cast<index_t>(s.integer("cols", 1, kMaxIndex));
    a.sub_diagonal = s.boolean("diagonal");
    s.finish("a submatrix has rows, cols, diagonal");
  }
  if (f.has("resize")) {
    a.resize = f.number("resize");
    if (!(a.resize > 0.0 && std::isfinite(a.resize))) {
      f.bad("resize", "must be a positive factor (got " + num(a.resize) + ")");
    }
  }
  if (f.has("block")) a.block = static_cast<index_t>(f.integer("block", 1, kMaxIndex));
  if (f.has("permute")) a.permute = parse_permutation(f, "permute");
  f.finish("an augmentation has seed, submatrix, resize, block, permute");
  return a;
}

}  // namespace

// ---- public: names, augmentation, JSON -------------------------------------------------------

const char* permutation_name(Permutation p) {
  switch (p) {
    case Permutation::None:
      return "none";
    case Permutation::Rows:
      return "rows";
    case Permutation::Columns:
      return "cols";
    case Permutation::Both:
      return "both";
    case Permutation::Symmetric:
      return "symmetric";
  }
  return "?";
}

bool Augmentation::empty() const {
  return !has_submatrix() && resize == 1.0 && block == 1 && permute == Permutation::None;
}

nlohmann::json Recipe::to_json() const {
  json j = {{"recipe_version", kRecipeVersion}, {"source", source_name(source)}};
  switch (source) {
    case Source::Generator:
      j["generator"] = generator_to_json(generator);
      break;
    case Source::File:
      j["path"] = path;
      break;
    case Source::Tensor:
      j["dims"] = dims;
      j["nnz"] = nnz;
      j["seed"] = seed;
      break;
  }
  if (source != Source::Tensor && !augment.empty()) j["augment"] = augmentation_to_json(augment);
  return j;
}

Recipe Recipe::from_json(const nlohmann::json& j) {
  Fields f(j, "");
  const std::int64_t version = f.integer("recipe_version", INT64_MIN, INT64_MAX);
  if (version != kRecipeVersion) {
    f.bad("recipe_version", "is " + std::to_string(version) + "; this build reads version " +
                                std::to_string(kRecipeVersion));
  }
  Recipe r;
  const std::string source = f.string("source");
  if (source == "generator") {
    r.source = Source::Generator;
    r.generator = generator_from_json(f.need("generator"));
  } else if (source == "file") {
    r.source = Source::File;
    r.path = f.string("path");
    if (r.path.empty()) f.bad("path", "is empty");
  } else if (source == "tensor") {
    r.source = Source::Tensor;
    const json& dims = f.need("dims");
    if (!dims.is_array() || dims.empty() || dims.size() > 4) {
      f.bad("dims", "must be an array of 1 to 4 mode sizes (got " + dims.dump() + ")");
    }
    for (const json& d : dims) {
      if (!json_integer(d, 1, kMaxIndex)) {
        f.bad("dims", "must hold integers in [1, " + std::to_string(kMaxIndex) + "] (got " +
                          dims.dump() + ")");
      }
      r.dims.push_back(d.get<index_t>());
    }
    r.nnz = f.integer("nnz", 0, kMaxIndex);
    r.seed = f.seed("seed");
  } else {
    f.bad("source", "must be generator, file or tensor (got \"" + source + "\")");
  }
  if (r.source != Source::Tensor && f.has("augment"))
    r.augment = augmentation_from_json(f.need("augment"));
  const char* allowed = r.source == Source::Generator
                            ? "a generator recipe has recipe_version, source, generator, augment"
                        : r.source == Source::File
                            ? "a file recipe has recipe_version, source, path, augment"
                            : "a tensor recipe has recipe_version, source, dims, nnz, seed";
  f.finish(allowed);
  return r;
}

bool operator==(const Recipe& a, const Recipe& b) { return a.to_json() == b.to_json(); }

namespace {

std::string generator_label(const GeneratorSpec& g) {
  const std::string seed = " seed=" + std::to_string(g.seed);
  const std::string& k = g.kind;
  const std::string shape =
      " " + std::to_string(g.rows) + "x" + std::to_string(g.cols == 0 ? g.rows : g.cols);
  if (k == "uniform") return k + shape + " nnz=" + std::to_string(g.nnz) + seed;
  if (k == "banded")
    return k + shape + " bw=" + std::to_string(g.bandwidth) + " fill=" + num(g.fill) + seed;
  if (k == "blocks") {
    return k + shape + " block=" + std::to_string(g.block) + " blocks=" + std::to_string(g.blocks) +
           " fill=" + num(g.fill) + seed;
  }
  if (k == "stencil2d") return k + " " + std::to_string(g.nx) + "x" + std::to_string(g.ny) + seed;
  if (k == "stencil3d") {
    return k + " " + std::to_string(g.nx) + "x" + std::to_string(g.ny) + "x" +
           std::to_string(g.nz) + seed;
  }
  if (k == "rmat") {
    const GeneratorSpec graph500;  // a, b, c shown only when they differ from its defaults
    const bool abc = g.a != graph500.a || g.b != graph500.b || g.c != graph500.c;
    return k + " scale=" + std::to_string(g.scale) + " ef=" + std::to_string(g.edge_factor) +
           (abc ? " a=" + num(g.a) + " b=" + num(g.b) + " c=" + num(g.c) : "") + seed;
  }
  if (k == "powerlaw") {
    return k + " n=" + std::to_string(g.rows) + " alpha=" + num(g.alpha) + " beta=" + num(g.beta) +
           seed;
  }
  if (k == "smallworld") {
    return k + " n=" + std::to_string(g.rows) + " k=" + std::to_string(g.neighbors) +
           " p=" + num(g.rewire) + seed;
  }
  return k + seed;
}

std::string augmentation_label(const Augmentation& a) {
  std::string s;
  if (a.has_submatrix()) {
    s += " sub=" + std::to_string(a.sub_rows) + "x" + std::to_string(a.sub_cols) +
         (a.sub_diagonal ? "diag" : "");
  }
  if (a.resize != 1.0) s += " resize=" + num(a.resize);
  if (a.block != 1) s += " block=" + std::to_string(a.block);
  if (a.permute != Permutation::None) s += std::string(" permute=") + permutation_name(a.permute);
  return s.substr(s.empty() ? 0 : 1) + " seed=" + std::to_string(a.seed);
}

/// The file name without its directories and .mtx / .mtx.gz ending.
std::string file_stem(const std::string& path) {
  std::string s =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  for (const char* ext : {".gz", ".mtx", ".tns"}) {
    const std::string e = ext;
    if (s.size() > e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0)
      s.resize(s.size() - e.size());
  }
  return s;
}

}  // namespace

std::string Recipe::label() const {
  switch (source) {
    case Source::Generator:
      return generator_label(generator) +
             (augment.empty() ? "" : " + " + augmentation_label(augment));
    case Source::File:
      return file_stem(path) + (augment.empty() ? "" : " " + augmentation_label(augment));
    case Source::Tensor: {
      std::string shape;
      for (index_t d : dims) shape += (shape.empty() ? "" : "x") + std::to_string(d);
      return "tensor " + shape + " nnz=" + std::to_string(nnz) + " seed=" + std::to_string(seed);
    }
  }
  return "?";
}

// ---- recipe files and shards -----------------------------------------------------------------

std::vector<Recipe> read_recipes(const std::string& path) {
  io_detail::TextReader in(path);
  std::vector<Recipe> out;
  std::string_view line;
  while (io_detail::next_content_line(in, line, '#')) {
    json j;
    try {
      j = json::parse(line.begin(), line.end());
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond a double
      in.fail(std::string("not a JSON object: ") + e.what(),
              "one recipe per line, as write_recipes writes");
    }
    try {
      out.push_back(Recipe::from_json(j));
    } catch (const Error& e) {
      in.fail(e.what(), e.hint());
    }
  }
  return out;
}

void write_recipes(const std::string& path, const std::vector<Recipe>& recipes) {
  io_detail::OutputFile out(path);
  out.write("# waco-hybrid recipes (recipe_version " + std::to_string(kRecipeVersion) +
            "): one JSON object per line\n");
  for (const Recipe& r : recipes) {
    out.write(r.to_json().dump());
    out.put('\n');
    out.maybe_flush();
  }
  out.commit();
}

std::vector<std::size_t> shard_indices(std::size_t count, int i, int n) {
  if (n < 1 || i < 0 || i >= n) {
    throw Error("shard " + std::to_string(i) + "/" + std::to_string(n) + ": expected 0 <= i < n",
                "shards are numbered 0 to n - 1");
  }
  std::vector<std::size_t> out;
  for (std::size_t k = static_cast<std::size_t>(i); k < count; k += static_cast<std::size_t>(n))
    out.push_back(k);
  return out;
}

}  // namespace waco::kernels
