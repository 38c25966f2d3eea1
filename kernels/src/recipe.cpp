// Matrix recipes (issue 17, "dataset"): the JSON form, the augmentations, the default mixes and the
// recipe file. See recipe.hpp for the contract.
//
// Determinism. Every random choice is a SplitMix64 stream (dense.hpp) keyed by a seed and a step
// tag. The augmentations use integer arithmetic and single IEEE operations (i * f, then floor),
// never a std distribution. default_mix draws its parameters on integer grids and with IEEE
// +, -, *, / and sqrt only (correctly rounded everywhere), and never writes a * b + c in doubles
// (GCC contracts that into an FMA under -march=native on some machines and not on others), so two
// machines agree on the mix. Only the powerlaw estimate uses std::pow, as the generator does.
#include "waco/kernels/recipe.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <utility>

#include "io_text.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/json_fields.hpp"

namespace waco::kernels {
namespace {

using u64 = std::uint64_t;
using json = nlohmann::json;

constexpr u64 kGolden = 0x9E3779B97F4A7C15ull;
// Step tags: separate the random streams of one seed.
constexpr u64 kTagSubmatrix = 0x7375626D6174ull, kTagResize = 0x726573697A65ull,
              kTagPermRows = 0x7065726D72ull, kTagPermCols = 0x7065726D63ull,
              kTagZero = 0x7A65726F76ull, kTagMix = 0x6D6978ull, kTagCycle = 0x6379636C65ull,
              kTagTensorMix = 0x746D6978ull;

const char* const kHint = "a recipe is the output of Recipe::to_json (recipe_version 1)";

// ---- randomness ------------------------------------------------------------------------------

/// The SplitMix64 sequence started from a key, with exact bounded draws.
class Stream {
 public:
  explicit Stream(u64 key) : state_(splitmix64(key)) {}
  u64 next() {
    state_ += kGolden;
    return splitmix64(state_);
  }
  /// Uniform in [0, n), n >= 1, exact (Lemire's multiply-shift with rejection).
  u64 below(u64 n) {
    using u128 = unsigned __int128;
    u128 m = static_cast<u128>(next()) * n;
    if (static_cast<u64>(m) < n) {
      const u64 threshold = (0 - n) % n;
      while (static_cast<u64>(m) < threshold) m = static_cast<u128>(next()) * n;
    }
    return static_cast<u64>(m >> 64);
  }
  /// Uniform integer in [lo, hi], lo <= hi.
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(below(static_cast<u64>(hi - lo) + 1));
  }
  /// True with probability num / den.
  bool chance(u64 num, u64 den) { return below(den) < num; }
  /// Log-uniform on [lo, hi] (0 < lo <= hi) on a grid of 16 steps per octave, by repeated IEEE
  /// multiplication (no libm).
  double log_uniform(double lo, double hi) {
    constexpr double kStep = 1.0442737824274138;  // 2^(1/16)
    u64 steps = 0;
    for (double x = lo; x * kStep <= hi; x *= kStep) ++steps;
    double x = lo;
    for (u64 k = below(steps + 1); k > 0; --k) x *= kStep;
    return x;
  }

 private:
  u64 state_;
};

u64 coordinate_key(u64 row, u64 col) { return (row << 32) ^ col; }

/// 23 random bits mapped to the midpoints (k + 0.5) / 2^22 - 1: uniform over (-1, 1), never 0.
float unit_value(u64 h) {
  const u64 k = h >> 41;
  return static_cast<float>((static_cast<double>(k) + 0.5) / 4194304.0 - 1.0);
}

/// A number for labels and messages: integers in full, others in the shortest ostream form.
std::string num(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::abs(x) < 9e15) {
    return std::to_string(static_cast<long long>(x));
  }
  std::ostringstream s;
  s << x;
  return s.str();
}

// ---- generator parameters --------------------------------------------------------------------

/// One GeneratorSpec field a kind reads (exactly one member pointer is set).
struct Param {
  const char* name;
  std::int64_t GeneratorSpec::*i64 = nullptr;
  int GeneratorSpec::*i32 = nullptr;
  double GeneratorSpec::*f64 = nullptr;
};
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

/// The parameters of a kind; Error naming `field` for an unknown kind.
const std::vector<Param>& params_of(const std::string& kind, const std::string& field) {
  const auto& table = param_table();
  const auto it = table.find(kind);
  if (it == table.end()) {
    throw Error("recipe: field '" + field + "': unknown generator kind '" + kind + "'",
                "known kinds: " + kind_names());
  }
  return it->second;
}

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

// ---- augmentation steps ----------------------------------------------------------------------

[[noreturn]] void bad_augment(const std::string& what, const std::string& hint) {
  throw Error("augment: " + what, hint);
}

/// Refuses a result of `rows` x `cols` with `entries` entries over the 32-bit limits or the
/// machine's memory (12 bytes an entry, twice over while canonicalizing).
void check_result(const std::string& step, double rows, double cols, double entries) {
  const double limit = static_cast<double>(kMaxIndex);
  if (rows > limit || cols > limit || entries > limit) {
    bad_augment(step + " would make a " + num(rows) + " x " + num(cols) + " matrix with " +
                    num(entries) + " entries, over the 32-bit limit of " + num(limit),
                "choose a smaller factor or a submatrix first");
  }
  if (entries * 24.0 > physical_memory_bytes()) {
    bad_augment(
        step + " would make " + num(entries) + " entries, more than this machine's memory holds",
        "choose a smaller factor or a submatrix first");
  }
}

/// The (row, col) offset of the window (a window fitting in rows x cols): uniform over the
/// offsets that fit, or along the diagonal (row offset = column offset) for a diagonal window.
std::pair<std::int64_t, std::int64_t> window_offset(const Augmentation& g, std::int64_t rows,
                                                    std::int64_t cols) {
  Stream s(splitmix64(g.seed ^ kTagSubmatrix));
  const std::int64_t row_room = rows - g.sub_rows, col_room = cols - g.sub_cols;
  if (g.sub_diagonal) {
    const std::int64_t r0 = s.between(0, std::min(row_room, col_room));
    return {r0, r0};
  }
  const std::int64_t r0 = s.between(0, row_room);
  return {r0, s.between(0, col_room)};
}

/// Step 1: the sub_rows x sub_cols window at a seeded offset.
CooMatrix take_submatrix(const CooMatrix& a, const Augmentation& g) {
  if (g.sub_rows < 1 || g.sub_cols < 1) {
    bad_augment("submatrix rows and cols must both be >= 1 (got " + std::to_string(g.sub_rows) +
                    " x " + std::to_string(g.sub_cols) + ")",
                "give both, or neither for no submatrix");
  }
  if (g.sub_rows > a.rows || g.sub_cols > a.cols) {
    bad_augment("submatrix " + std::to_string(g.sub_rows) + " x " + std::to_string(g.sub_cols) +
                    " does not fit in the " + std::to_string(a.rows) + " x " +
                    std::to_string(a.cols) + " matrix",
                "choose a window no larger than the matrix");
  }
  const auto [r0, c0] = window_offset(g, a.rows, a.cols);
  CooMatrix m;
  m.rows = g.sub_rows;
  m.cols = g.sub_cols;
  for (std::size_t e = 0; e < a.val.size(); ++e) {
    const std::int64_t r = a.row[e] - r0, c = a.col[e] - c0;
    if (r < 0 || r >= g.sub_rows || c < 0 || c >= g.sub_cols) continue;
    m.row.push_back(static_cast<index_t>(r));
    m.col.push_back(static_cast<index_t>(c));
    m.val.push_back(a.val[e]);
  }
  return m;  // a window of a canonical matrix is canonical
}

/// Gives every stored zero a nonzero value that depends only on its coordinate.
void fill_zero_values(CooMatrix& m) {
  for (std::size_t e = 0; e < m.val.size(); ++e) {
    if (m.val[e] != 0.0f) continue;
    const u64 key = coordinate_key(static_cast<u64>(m.row[e]), static_cast<u64>(m.col[e]));
    m.val[e] = unit_value(splitmix64(kTagZero ^ splitmix64(key)));
  }
}

/// floor(i * f): one IEEE multiplication, exact in its rounding on every platform.
std::int64_t scaled(std::int64_t i, double f) {
  return static_cast<std::int64_t>(std::floor(static_cast<double>(i) * f));
}

/// The dimension after resizing n by f: every floor(i * f) for i < n must fit, and for f >= 1 the
/// image of the last index ends at floor(n * f).
std::int64_t resized_dim(std::int64_t n, double f) {
  if (n == 0) return 0;
  return f < 1.0 ? scaled(n - 1, f) + 1 : scaled(n, f);
}

/// Step 2: WACO's resizing, i -> floor(i * f); merging for f < 1, one random cell of each
/// entry's image for f > 1 (images of distinct cells are disjoint, so nnz is kept).
CooMatrix resize_pattern(const CooMatrix& a, double f, u64 seed) {
  if (!(f > 0.0 && std::isfinite(f))) {
    bad_augment("resize factor must be positive (got " + num(f) + ")", "e.g. 0.5 or 2");
  }
  const std::int64_t rows = resized_dim(a.rows, f), cols = resized_dim(a.cols, f);
  check_result("resize by " + num(f), static_cast<double>(rows), static_cast<double>(cols),
               static_cast<double>(a.nnz()));
  CooMatrix m;
  m.rows = static_cast<index_t>(rows);
  m.cols = static_cast<index_t>(cols);
  m.row.resize(a.row.size());
  m.col.resize(a.col.size());
  m.val = a.val;
  const u64 key = splitmix64(seed ^ kTagResize);
  for (std::size_t e = 0; e < a.val.size(); ++e) {
    const std::int64_t i = a.row[e], j = a.col[e];
    std::int64_t r = scaled(i, f), c = scaled(j, f);
    if (f > 1.0) {
      // Image spans: [floor(i f), floor((i + 1) f)); a 32-bit fraction of a hash picks the cell.
      // (At least 1: for f within rounding of 1 two images could touch; nnz is then not kept.)
      const u64 span_r =
          static_cast<u64>(std::max<std::int64_t>(1, std::min(scaled(i + 1, f), rows) - r));
      const u64 span_c =
          static_cast<u64>(std::max<std::int64_t>(1, std::min(scaled(j + 1, f), cols) - c));
      const u64 h =
          splitmix64(key ^ splitmix64(coordinate_key(static_cast<u64>(i), static_cast<u64>(j))));
      r += static_cast<std::int64_t>(((h >> 32) * span_r) >> 32);
      c += static_cast<std::int64_t>(((h & 0xFFFFFFFFull) * span_c) >> 32);
    }
    m.row[e] = static_cast<index_t>(r);
    m.col[e] = static_cast<index_t>(c);
  }
  canonicalize(m);
  if (f < 1.0) fill_zero_values(m);  // merged entries that cancelled
  return m;
}

/// Step 3: each entry becomes a b x b dense block of its value, emitted in canonical order.
CooMatrix expand_blocks(const CooMatrix& a, index_t b) {
  if (b < 1) bad_augment("block must be >= 1 (got " + std::to_string(b) + ")", "e.g. 2 or 4");
  const double bb = static_cast<double>(b);
  check_result("block expansion by " + std::to_string(b), a.rows * bb, a.cols * bb,
               static_cast<double>(a.nnz()) * bb * bb);
  CooMatrix m;
  m.rows = a.rows * b;
  m.cols = a.cols * b;
  const std::size_t n = a.val.size() * static_cast<std::size_t>(b) * static_cast<std::size_t>(b);
  m.row.reserve(n);
  m.col.reserve(n);
  m.val.reserve(n);
  std::size_t first = 0;
  while (first < a.val.size()) {
    std::size_t last = first;
    while (last < a.val.size() && a.row[last] == a.row[first]) ++last;
    for (index_t dr = 0; dr < b; ++dr) {
      for (std::size_t e = first; e < last; ++e) {
        for (index_t dc = 0; dc < b; ++dc) {
          m.row.push_back(a.row[e] * b + dr);
          m.col.push_back(a.col[e] * b + dc);
          m.val.push_back(a.val[e]);
        }
      }
    }
    first = last;
  }
  return m;
}

/// A uniform permutation of [0, n) (Fisher-Yates).
std::vector<index_t> random_permutation(index_t n, u64 key) {
  std::vector<index_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  Stream s(key);
  for (std::size_t i = p.size(); i > 1; --i) std::swap(p[i - 1], p[s.below(i)]);
  return p;
}

/// Step 4: row i -> prow[i], column j -> pcol[j].
CooMatrix permute_matrix(const CooMatrix& a, Permutation kind, u64 seed) {
  if (kind == Permutation::Symmetric && a.rows != a.cols) {
    bad_augment("a symmetric permutation needs a square matrix (got " + std::to_string(a.rows) +
                    " x " + std::to_string(a.cols) + ")",
                "use permute \"both\" for rectangular matrices");
  }
  const bool rows = kind != Permutation::Columns, cols = kind != Permutation::Rows;
  const std::vector<index_t> prow =
      rows ? random_permutation(a.rows, splitmix64(seed ^ kTagPermRows)) : std::vector<index_t>{};
  const std::vector<index_t> pcol =
      kind == Permutation::Symmetric ? prow
      : cols                         ? random_permutation(a.cols, splitmix64(seed ^ kTagPermCols))
                                     : std::vector<index_t>{};
  CooMatrix m = a;
  for (std::size_t e = 0; e < m.val.size(); ++e) {
    if (rows) m.row[e] = prow[static_cast<std::size_t>(m.row[e])];
    if (cols) m.col[e] = pcol[static_cast<std::size_t>(m.col[e])];
  }
  canonicalize(m);
  return m;
}

// ---- estimates -------------------------------------------------------------------------------

/// What default_mix and estimated_nnz know of a Matrix Market file without reading its entries.
struct FileInfo {
  std::int64_t rows = 0, cols = 0;
  std::int64_t nnz = 0;  ///< stored entries, doubled for a symmetric or skew-symmetric file
};

/// Reads the banner and size line of a coordinate Matrix Market file (plain or gzip).
FileInfo peek_matrix_market(const std::string& path) {
  io_detail::TextReader in(path);
  std::string_view line;
  if (!in.next_line(line)) in.fail_file("empty file", "expected a Matrix Market file");
  const std::string banner = io_detail::lower(line);
  if (banner.rfind("%%matrixmarket matrix coordinate", 0) != 0) {
    in.fail("not a sparse (coordinate) Matrix Market file", "a file recipe needs a .mtx matrix");
  }
  const bool symmetric = banner.find("symmetric") != std::string::npos;  // also skew-/hermitian
  if (!io_detail::next_content_line(in, line, '%')) in.fail_file("no size line", "");
  io_detail::Tokens t(line);
  std::string_view a, b, c;
  FileInfo info;
  if (!t.next(a) || !t.next(b) || !t.next(c) || !io_detail::parse_int64(a, info.rows) ||
      !io_detail::parse_int64(b, info.cols) || !io_detail::parse_int64(c, info.nnz)) {
    in.fail("malformed size line", "expected: rows cols entries");
  }
  if (symmetric) info.nnz *= 2;
  return info;
}

/// Nonzeros after an augmentation of a matrix with `nnz` entries in rows x cols (see
/// estimated_nnz): a diagonal window keeps its larger share of the rows or columns (what a banded
/// matrix keeps), a plain one its share of the cells; resizing keeps at most nnz; blocks multiply
/// by block^2.
double augmented_estimate(double nnz, double rows, double cols, const Augmentation& g) {
  if (g.has_submatrix() && rows > 0 && cols > 0) {
    const double fr = std::min(1.0, g.sub_rows / rows), fc = std::min(1.0, g.sub_cols / cols);
    nnz *= g.sub_diagonal ? std::max(fr, fc) : fr * fc;
  }
  const double b = g.block;
  return nnz * b * b;
}

/// The generator's own expected count for powerlaw (gen_powerlaw in generators.cpp).
double powerlaw_estimate(const GeneratorSpec& s) {
  const std::int64_t n = s.rows;
  const double cut = std::min(static_cast<double>(n), std::pow(s.beta / 2.0, 1.0 / s.alpha) + 1.0);
  double extra = 0.0;
  for (std::int64_t x = 1; x < static_cast<std::int64_t>(cut); ++x) {
    const double deg = std::min(static_cast<double>(n - 1), s.beta * std::pow(x, -s.alpha));
    if (deg > 1.0) extra += std::floor(deg) - 1.0;
  }
  return static_cast<double>(n) + extra;
}

/// Positions on the diagonals 0..D (D <= C - 1) of an R x C matrix: sum over d of min(R, C - d).
double upper_diagonal_positions(double R, double C, double D) {
  if (R <= 0 || C <= 0 || D < 0) return 0.0;
  const double k = C - R;  // diagonals d <= k hold R positions, the later ones C - d
  const double full = k < 0 ? 0.0 : std::min(D, k) + 1.0;
  const double a = std::max(0.0, k + 1.0);
  const double rest = a <= D ? (D - a + 1.0) * C - (a + D) * (D - a + 1.0) / 2.0 : 0.0;
  return R * full + rest;
}

/// Positions within `bandwidth` of the diagonal of a rows x cols matrix, in closed form (a loop
/// over the diagonals ran 2 * bandwidth + 1 times, whatever the matrix: a hang for a recipe file's
/// bandwidth of 2^62, which the generator refuses only when it runs).
double band_positions(double rows, double cols, double bandwidth) {
  if (rows <= 0 || cols <= 0 || bandwidth < 0) return 0.0;
  return upper_diagonal_positions(rows, cols, std::min(bandwidth, cols - 1.0)) +
         upper_diagonal_positions(cols, rows, std::min(bandwidth, rows - 1.0)) - std::min(rows, cols);
}

/// Expected (or bounding) nonzeros of a generator spec; see estimated_nnz. In double throughout:
/// a recipe file's parameters are any int64 until the generator checks them.
double generator_estimate(const GeneratorSpec& s) {
  const double rows = static_cast<double>(s.rows);
  const double cols = static_cast<double>(s.cols == 0 ? s.rows : s.cols);
  const std::string& k = s.kind;
  if (k == "uniform") return static_cast<double>(s.nnz);
  if (k == "banded") return band_positions(rows, cols, static_cast<double>(s.bandwidth)) * s.fill;
  if (k == "blocks") {
    const double b = static_cast<double>(s.block);
    return static_cast<double>(s.blocks) * b * b * s.fill;
  }
  if (k == "stencil2d") {
    const double nx = static_cast<double>(s.nx), ny = static_cast<double>(s.ny);
    return nx * ny * 5.0 - 2.0 * nx - 2.0 * ny;
  }
  if (k == "stencil3d") {
    const double nx = static_cast<double>(s.nx), ny = static_cast<double>(s.ny),
                 nz = static_cast<double>(s.nz);
    return nx * ny * nz * 7.0 - 2.0 * (nx * ny + ny * nz + nx * nz);
  }
  if (k == "rmat") return std::ldexp(static_cast<double>(s.edge_factor), s.scale);
  if (k == "powerlaw") return powerlaw_estimate(s);
  if (k == "smallworld") return rows * s.neighbors;
  params_of(k, "generator.kind");  // throws for an unknown kind
  return 0.0;
}

double matrix_dim_rows(const GeneratorSpec& s) {
  const double nx = static_cast<double>(s.nx), ny = static_cast<double>(s.ny);
  if (s.kind == "stencil2d") return nx * ny;
  if (s.kind == "stencil3d") return nx * ny * static_cast<double>(s.nz);
  if (s.kind == "rmat") return std::ldexp(1.0, s.scale);
  return static_cast<double>(s.rows);
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

// ---- public: making operands -----------------------------------------------------------------

CooMatrix augment(const CooMatrix& a, const Augmentation& aug) {
  CooMatrix m = aug.has_submatrix() ? take_submatrix(a, aug) : a;
  if (aug.resize != 1.0) m = resize_pattern(m, aug.resize, aug.seed);
  if (aug.block != 1) m = expand_blocks(m, aug.block);
  if (aug.permute != Permutation::None) m = permute_matrix(m, aug.permute, aug.seed);
  WACO_ASSERT(is_canonical(m), "augment produced a non-canonical matrix");
  return m;
}

CooMatrix make_matrix(const Recipe& r) {
  CooMatrix m;
  switch (r.source) {
    case Recipe::Source::Generator:
      m = generate(r.generator);
      break;
    case Recipe::Source::File:
      if (is_tensor_path(r.path)) {
        throw Error("make_matrix: recipe '" + r.label() + "' is a tensor file (" + r.path + ")",
                    "use make_tensor for tensor recipes and .tns files");
      }
      m = read_matrix_market(r.path).matrix;
      break;
    case Recipe::Source::Tensor:
      throw Error("make_matrix: recipe '" + r.label() + "' is a tensor",
                  "use make_tensor for tensor recipes and .tns files");
  }
  return r.augment.empty() ? m : augment(m, r.augment);
}

CooTensor make_tensor(const Recipe& r) {
  const bool tensor_file = r.source == Recipe::Source::File && is_tensor_path(r.path);
  if (r.source != Recipe::Source::Tensor && !tensor_file) {
    throw Error("make_tensor: recipe '" + r.label() + "' is a matrix",
                "use make_matrix for matrix recipes");
  }
  if (tensor_file) {
    if (!r.augment.empty()) {
      throw Error("make_tensor: recipe '" + r.label() + "' augments a tensor file",
                  "augmentations apply to matrices only");
    }
    return read_frostt(r.path).tensor;
  }
  return generate_tensor(r.dims, r.nnz, r.seed);
}

std::int64_t estimated_nnz(const Recipe& r) {
  double base = 0.0, rows = 0.0, cols = 0.0;
  switch (r.source) {
    case Recipe::Source::Tensor:
      return r.nnz;
    case Recipe::Source::Generator: {
      base = generator_estimate(r.generator);
      rows = matrix_dim_rows(r.generator);
      const bool has_cols = r.generator.kind == "uniform" || r.generator.kind == "banded" ||
                            r.generator.kind == "blocks";
      cols = has_cols && r.generator.cols != 0 ? static_cast<double>(r.generator.cols) : rows;
      break;
    }
    case Recipe::Source::File: {
      const FileInfo info = peek_matrix_market(r.path);
      base = static_cast<double>(info.nnz);
      rows = static_cast<double>(info.rows);
      cols = static_cast<double>(info.cols);
      break;
    }
  }
  // Saturated: an estimate beyond int64 (or not a number) is "more than any bound" (casting it
  // was undefined behaviour); one below 0 (negative blocks, nnz or fill in a recipe file, which
  // the generator refuses when it runs) is 0.
  const double e = std::ceil(augmented_estimate(base, rows, cols, r.augment));
  if (!(e < 9.2e18)) return std::numeric_limits<std::int64_t>::max();
  return e > 0 ? static_cast<std::int64_t>(e) : 0;
}

// ---- the default mixes -----------------------------------------------------------------------

namespace {

constexpr std::int64_t kMinRows = 1000, kMaxRows = 1000000;
constexpr double kMinNnz = 10000.0, kMaxNnz = 2000000.0;
constexpr int kGeneratorSlots = 8, kFileSlots = 4;
const char* const kMixKinds[kGeneratorSlots] = {"uniform",   "banded", "blocks",   "stencil2d",
                                                "stencil3d", "rmat",   "powerlaw", "smallworld"};

/// A target nonzero count, log-uniform in [10k, 2M] clipped to the cap.
double draw_target(Stream& s, double cap) {
  const double hi = std::min(kMaxNnz, cap);
  return s.log_uniform(std::min(kMinNnz, hi), hi);
}

/// Rows for `target` nonzeros with a mean of d per row, d log-uniform in [dlo, dhi] narrowed so
/// that rows stay in [1k, 1M] where the target allows.
std::int64_t draw_rows(Stream& s, double target, double dlo, double dhi) {
  const double lo = std::max(dlo, target / static_cast<double>(kMaxRows));
  const double hi = std::max(lo, std::min(dhi, target / static_cast<double>(kMinRows)));
  const double d = s.log_uniform(lo, hi);
  return std::max<std::int64_t>(16, static_cast<std::int64_t>(target / d));
}

/// x^(k / 16) for 0 <= k <= 16, by square roots and products (correctly rounded, no libm).
double pow16(double x, int k) {
  double result = k == 16 ? x : 1.0, root = x;
  for (int bit = 8; bit >= 1; bit /= 2) {
    root = std::sqrt(root);
    if (k & bit) result *= root;
  }
  return result;
}

/// The parameters of one generator recipe of `kind` aiming at `target` nonzeros.
GeneratorSpec draw_generator(const std::string& kind, Stream& s, double target) {
  GeneratorSpec g;
  g.kind = kind;
  g.cols = 0;
  g.seed = s.below(1000000000);
  if (kind == "uniform") {
    g.rows = draw_rows(s, target, 2.0, 100.0);
    if (s.chance(1, 3)) {  // rectangular, at most 4:1 either way
      const std::int64_t ratio = s.between(-2, 2);
      g.cols = ratio >= 0 ? g.rows << ratio : std::max<std::int64_t>(16, g.rows >> -ratio);
    }
    const double cells =
        static_cast<double>(g.rows) * static_cast<double>(g.cols == 0 ? g.rows : g.cols);
    g.nnz = static_cast<std::int64_t>(std::min(target, cells / 2.0));
  } else if (kind == "banded") {
    g.rows = draw_rows(s, target, 3.0, 200.0);
    g.fill = static_cast<double>(s.between(6, 20)) / 20.0;
    const double per_row = target / static_cast<double>(g.rows) / g.fill;  // 2 * bandwidth + 1
    g.bandwidth =
        std::clamp<std::int64_t>(static_cast<std::int64_t>((per_row - 1.0) / 2.0), 0, g.rows - 1);
  } else if (kind == "blocks") {
    static const std::int64_t kEdges[] = {2, 4, 8, 16, 32};
    g.block = kEdges[s.below(5)];
    g.fill = static_cast<double>(s.between(10, 20)) / 20.0;
    g.rows = std::max(draw_rows(s, target, 4.0, 200.0), 4 * g.block);
    const std::int64_t tiles_edge = (g.rows + g.block - 1) / g.block;
    const double blocks = target / static_cast<double>(g.block * g.block) / g.fill;
    g.blocks =
        std::clamp<std::int64_t>(static_cast<std::int64_t>(blocks), 1, tiles_edge * tiles_edge / 2);
  } else if (kind == "stencil2d") {
    const double points = std::max(16.0, target / 5.0), aspect = s.log_uniform(1.0, 8.0);
    g.nx = std::max<std::int64_t>(2, static_cast<std::int64_t>(std::sqrt(points * aspect)));
    g.ny = std::max<std::int64_t>(2, static_cast<std::int64_t>(points / static_cast<double>(g.nx)));
  } else if (kind == "stencil3d") {
    const std::int64_t points = std::max<std::int64_t>(64, static_cast<std::int64_t>(target / 7.0));
    std::int64_t edge = 1;
    while ((edge + 1) * (edge + 1) * (edge + 1) <= points) ++edge;  // integer cube root
    g.nz = std::max<std::int64_t>(
        2, static_cast<std::int64_t>(static_cast<double>(edge) / s.log_uniform(1.0, 4.0)));
    const double plane = static_cast<double>(points) / static_cast<double>(g.nz);
    g.nx = std::max<std::int64_t>(
        2, static_cast<std::int64_t>(std::sqrt(plane * s.log_uniform(1.0, 4.0))));
    g.ny = std::max<std::int64_t>(2, static_cast<std::int64_t>(plane / static_cast<double>(g.nx)));
  } else if (kind == "rmat") {
    const auto edges = static_cast<std::int64_t>(target);
    int lo = 10, hi = 20;  // 1k..1M vertices, edge factor 2..64 where the target allows
    while (lo < hi && (edges >> lo) > 64) ++lo;
    while (hi > lo && (edges >> hi) < 2) --hi;
    g.scale = static_cast<int>(s.between(lo, hi));
    g.edge_factor = static_cast<int>(std::max<std::int64_t>(1, edges >> g.scale));
    g.a = static_cast<double>(s.between(45, 65)) / 100.0;
    const double d = static_cast<double>(s.between(5, 15)) / 100.0;
    const double bc = 1.0 - g.a - d;
    g.b = bc * static_cast<double>(s.between(3, 7)) / 10.0;
    g.c = bc - g.b;
  } else if (kind == "powerlaw") {
    const int k = static_cast<int>(s.between(8, 12));  // alpha = k / 16 in [0.5, 0.75]
    g.alpha = k / 16.0;
    g.rows = std::max<std::int64_t>(16, draw_rows(s, target, 4.0, 32.0));
    // Total degree ~ n + beta n^(1 - alpha) / (1 - alpha): solve for beta.
    const double n = static_cast<double>(g.rows);
    const double beta = (target - n) * ((16 - k) / 16.0) / pow16(n, 16 - k);
    g.beta = std::max(2.0, std::floor(beta));
  } else if (kind == "smallworld") {
    const auto most =
        std::clamp<std::int64_t>(static_cast<std::int64_t>(target / 2.0 / kMinRows), 2, 16);
    g.neighbors = static_cast<int>(2 * s.between(2, most));  // rows = target / neighbors >= 1k
    g.rows =
        std::max<std::int64_t>(g.neighbors + 2, static_cast<std::int64_t>(target / g.neighbors));
    g.rewire = static_cast<double>(s.between(1, 30)) / 100.0;
  }
  return g;
}

/// Shrinks a generator spec by about 1/16 of its size (fewer rows, or a smaller grid or scale).
void shrink(GeneratorSpec& g) {
  auto less = [](std::int64_t& x, std::int64_t floor) {
    x = std::max(floor, x - std::max<std::int64_t>(1, x / 16));
  };
  const std::string& k = g.kind;
  if (k == "stencil2d" || k == "stencil3d") {
    less(g.nx, 2);
    less(g.ny, 2);
  } else if (k == "rmat") {
    if (g.edge_factor > 1)
      --g.edge_factor;
    else if (g.scale > 1)
      --g.scale;
  } else if (k == "uniform") {
    less(g.nnz, 0);
  } else if (k == "blocks") {
    less(g.blocks, 0);
  } else {
    less(g.rows, k == "smallworld" ? g.neighbors + 2 : 2);
  }
}

/// Shrinks until the estimate fits the cap (each shrink lowers it; a bounded loop).
void fit_generator(Recipe& r, double cap) {
  for (int round = 0; round < 400 && static_cast<double>(estimated_nnz(r)) > cap; ++round)
    shrink(r.generator);
}

/// Entries of `a` inside the augmentation's window (all entries without a window).
std::int64_t window_entries(const CsrMatrix& a, const Augmentation& g) {
  if (!g.has_submatrix()) return a.nnz();
  const auto [r0, c0] = window_offset(g, a.rows, a.cols);
  std::int64_t n = 0;
  for (std::int64_t r = r0; r < r0 + g.sub_rows; ++r) {
    const auto first = a.colidx.begin() + a.rowptr[static_cast<std::size_t>(r)];
    const auto last = a.colidx.begin() + a.rowptr[static_cast<std::size_t>(r) + 1];
    n += std::lower_bound(first, last, c0 + g.sub_cols) - std::lower_bound(first, last, c0);
  }
  return n;
}

/// An upper bound on the nonzeros of the augmented `a`: the entries in the window (exact) times
/// block^2 (resizing only merges or moves entries, a permutation moves them).
double augmented_bound(const CsrMatrix& a, const Augmentation& g) {
  const double b = g.block;
  return static_cast<double>(window_entries(a, g)) * b * b;
}

/// A file augmentation: one main step (permutation, resize, block expansion or submatrix; small
/// files, under 10k entries, are grown by resizing up or block expansion), a permutation on top
/// one time in three. Windows lie on the diagonal (random offset along it): real matrices keep
/// most entries near it, and a window off it is often empty.
Augmentation draw_file_augmentation(Stream& s, const CsrMatrix& a) {
  Augmentation g;
  g.seed = s.below(1000000000);
  const bool square = a.rows == a.cols, small = static_cast<double>(a.nnz()) < kMinNnz;
  const Permutation perm = square ? Permutation::Symmetric : Permutation::Both;
  const u64 step = small ? 1 + s.below(2) : s.below(4);
  if (step == 0) {
    static const Permutation kKinds[] = {Permutation::Rows, Permutation::Columns,
                                         Permutation::Both};
    g.permute = square && s.chance(1, 2) ? Permutation::Symmetric : kKinds[s.below(3)];
  } else if (step == 1) {
    static const int kRatio[][2] = {{1, 4}, {1, 3}, {1, 2}, {2, 3}, {3, 2}, {2, 1}, {3, 1}, {4, 1}};
    const auto& q = kRatio[small ? 5 + s.below(3) : s.below(8)];
    g.resize = static_cast<double>(q[0]) / q[1];
    if (std::max(a.rows, a.cols) * g.resize > kMaxRows) g.resize = static_cast<double>(q[1]) / q[0];
  } else if (step == 2) {
    g.block = static_cast<index_t>(s.between(2, 4));
  } else {
    const double share = static_cast<double>(s.between(2, 6)) / 8.0;
    g.sub_rows = static_cast<index_t>(std::max(1.0, std::floor(a.rows * share)));
    g.sub_cols = static_cast<index_t>(std::max(1.0, std::floor(a.cols * share)));
    g.sub_diagonal = true;
  }
  if (step != 0 && s.chance(1, 3)) g.permute = perm;
  return g;
}

/// Shrinks (or adds) a diagonal window until augmented_bound fits the cap; each round shrinks the
/// window by the excess (at least one row and column), so the loop ends.
void fit_file_augmentation(Augmentation& g, const CsrMatrix& a, double cap) {
  for (double bound = augmented_bound(a, g); bound > cap; bound = augmented_bound(a, g)) {
    const double keep = cap / bound * 0.95;
    const index_t rows = g.has_submatrix() ? g.sub_rows : a.rows;
    const index_t cols = g.has_submatrix() ? g.sub_cols : a.cols;
    g.sub_rows =
        std::max<index_t>(1, std::min<index_t>(rows - 1, static_cast<index_t>(rows * keep)));
    g.sub_cols =
        std::max<index_t>(1, std::min<index_t>(cols - 1, static_cast<index_t>(cols * keep)));
    g.sub_diagonal = true;
    if (rows == 1 && cols == 1) break;  // a single cell: at most block^2 entries
  }
}

/// The slot order of cycle c: a seeded shuffle of 0..slots-1 (generator kinds, then file slots).
std::vector<int> cycle_order(u64 seed, std::uint64_t cycle, int slots) {
  std::vector<int> order(static_cast<std::size_t>(slots));
  std::iota(order.begin(), order.end(), 0);
  Stream s(splitmix64(seed ^ kTagCycle) ^ splitmix64(cycle));
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[s.below(i)]);
  return order;
}

void check_mix_arguments(const char* what, int count, std::int64_t max_nnz) {
  if (count < 0)
    throw Error(std::string(what) + ": count must be >= 0 (got " + std::to_string(count) + ")");
  if (max_nnz < 1000) {
    throw Error(
        std::string(what) + ": max_nnz must be >= 1000 (got " + std::to_string(max_nnz) + ")",
        "the mixes make matrices of at least 1k nonzeros");
  }
}

}  // namespace

std::vector<Recipe> default_mix(int count, std::uint64_t seed,
                                const std::vector<std::string>& real_files, std::int64_t max_nnz) {
  check_mix_arguments("default_mix", count, max_nnz);
  const int slots = kGeneratorSlots + (real_files.empty() ? 0 : kFileSlots);
  const double cap = static_cast<double>(max_nnz);
  const auto stream = [&](int k) {
    return Stream(splitmix64(seed ^ kTagMix) ^ splitmix64(static_cast<u64>(k)));
  };
  std::vector<Recipe> out(static_cast<std::size_t>(count));
  std::vector<std::vector<int>> by_file(real_files.size());  // recipe indices of each file
  std::vector<int> order;
  for (int k = 0; k < count; ++k) {
    const auto cycle = static_cast<std::uint64_t>(k / slots);
    if (k % slots == 0) order = cycle_order(seed, cycle, slots);
    const int slot = order[static_cast<std::size_t>(k % slots)];
    Recipe& r = out[static_cast<std::size_t>(k)];
    if (slot >= kGeneratorSlots) {  // file slots use the files in turn
      const std::uint64_t use =
          cycle * kFileSlots + static_cast<std::uint64_t>(slot - kGeneratorSlots);
      const std::size_t f = static_cast<std::size_t>(use % real_files.size());
      r.source = Recipe::Source::File;
      r.path = real_files[f];
      by_file[f].push_back(k);
      continue;
    }
    Stream s = stream(k);
    r.source = Recipe::Source::Generator;
    r.generator = draw_generator(kMixKinds[slot], s, draw_target(s, cap));
    if (s.chance(1, 8)) {  // a permuted variant: the same structure, its locality destroyed
      const bool square = r.generator.cols == 0 || r.generator.cols == r.generator.rows;
      r.augment.permute = square ? Permutation::Symmetric : Permutation::Both;
      r.augment.seed = s.below(1000000000);
    }
    fit_generator(r, cap);
  }
  // File recipes: one file loaded at a time, each of its augmentations fitted to the cap exactly.
  for (std::size_t f = 0; f < real_files.size(); ++f) {
    if (by_file[f].empty()) continue;
    const CsrMatrix a = to_csr(read_matrix_market(real_files[f]).matrix);
    for (int k : by_file[f]) {
      Stream s = stream(k);
      Augmentation& g = out[static_cast<std::size_t>(k)].augment;
      g = draw_file_augmentation(s, a);
      fit_file_augmentation(g, a, cap);
    }
  }
  return out;
}

std::vector<Recipe> default_tensor_mix(int count, std::uint64_t seed, std::int64_t max_nnz) {
  check_mix_arguments("default_tensor_mix", count, max_nnz);
  const double cap = static_cast<double>(max_nnz);
  std::vector<Recipe> out;
  for (int k = 0; k < count; ++k) {
    Stream s(splitmix64(seed ^ kTagTensorMix) ^ splitmix64(static_cast<u64>(k)));
    Recipe r;
    r.source = Recipe::Source::Tensor;
    r.seed = s.below(1000000000);
    r.nnz = static_cast<std::int64_t>(draw_target(s, cap));
    std::vector<double> d = {
        s.log_uniform(100.0, 200000.0), s.log_uniform(100.0, 200000.0),
        s.chance(1, 2) ? s.log_uniform(16.0, 2000.0) : s.log_uniform(100.0, 200000.0)};
    // Density at most 1%: double the smallest long mode until the cells are 100 x nnz.
    for (int round = 0; round < 64 && d[0] * d[1] * d[2] < 100.0 * static_cast<double>(r.nnz);
         ++round) {
      auto smallest = std::min_element(d.begin(), d.end() - 1);
      if (*smallest >= 200000.0) break;
      *smallest = std::min(200000.0, *smallest * 2.0);
    }
    for (double x : d) r.dims.push_back(static_cast<index_t>(x));
    const double cells = static_cast<double>(r.dims[0]) * r.dims[1] * r.dims[2];
    r.nnz = std::min<std::int64_t>(r.nnz, static_cast<std::int64_t>(cells / 100.0));
    out.push_back(std::move(r));
  }
  return out;
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
