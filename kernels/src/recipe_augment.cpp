// Matrix recipes: the augmentations (submatrix window, resizing, block expansion, permutation;
// augment) and making a recipe's operand (make_matrix, make_tensor). See recipe.hpp for the
// contract and recipe_internal.hpp for the determinism of the random choices.
#include "waco/kernels/recipe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "recipe_internal.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"

namespace waco::kernels {

using namespace recipe_detail;

namespace {

u64 coordinate_key(u64 row, u64 col) { return (row << 32) ^ col; }

/// 23 random bits mapped to the midpoints (k + 0.5) / 2^22 - 1: uniform over (-1, 1), never 0.
float unit_value(u64 h) {
  const u64 k = h >> 41;
  return static_cast<float>((static_cast<double>(k) + 0.5) / 4194304.0 - 1.0);
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

}  // namespace

/// The (row, col) offset of the window (a window fitting in rows x cols): uniform over the
/// offsets that fit, or along the diagonal (row offset = column offset) for a diagonal window.
std::pair<std::int64_t, std::int64_t> recipe_detail::window_offset(const Augmentation& g,
                                                                   std::int64_t rows,
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

namespace {

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

}  // namespace

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

}  // namespace waco::kernels
