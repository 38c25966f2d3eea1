// Matrix recipes: nnz estimates (estimated_nnz) and the default mixes (default_mix,
// default_tensor_mix), the dataset's policy of which matrices to make. See recipe.hpp for the
// contract and recipe_internal.hpp for the determinism of the random choices (default_mix draws
// its parameters on integer grids, with IEEE +, -, *, / and sqrt only, never a * b + c in
// doubles; only the powerlaw estimate uses std::pow, as the generator does).
#include "waco/kernels/recipe.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "io_text.hpp"
#include "recipe_internal.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/kernels/io.hpp"

namespace waco::kernels {

using namespace recipe_detail;

namespace {

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
  if (k == "powerlaw") return powerlaw_expected_nnz(s.rows, s.alpha, s.beta);
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

}  // namespace waco::kernels
