// Seeded synthetic sparse matrices and tensors, for tests now and training data later. Every
// generator is deterministic in its parameters and seed (no clock, no std distributions whose
// output differs between standard libraries) and returns a canonical operand whose values are
// uniform in (-1, 1) and never exactly 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "waco/kernels/sparse.hpp"

namespace waco::kernels {

/// Parameters of every generator kind; each kind reads the fields its description names.
struct GeneratorSpec {
  std::string kind;              ///< see generator_kinds()
  std::int64_t rows = 1000;
  std::int64_t cols = 0;         ///< 0: same as rows
  std::int64_t nnz = 10000;      ///< uniform: target nonzeros
  std::int64_t bandwidth = 8;    ///< banded: nonzeros within |i - j| <= bandwidth
  std::int64_t block = 4;        ///< blocks: block edge length
  std::int64_t blocks = 100;     ///< blocks: number of dense blocks placed
  double fill = 1.0;             ///< banded/blocks: fraction of positions kept, in (0, 1]
  std::int64_t nx = 32, ny = 32, nz = 1;  ///< stencil2d (nx*ny, 5-point), stencil3d (7-point)
  int scale = 12;                ///< rmat: 2^scale vertices
  int edge_factor = 8;           ///< rmat: edges = edge_factor * 2^scale
  double a = 0.57, b = 0.19, c = 0.19;  ///< rmat quadrant probabilities (d = 1 - a - b - c)
  double alpha = 0.6;            ///< powerlaw (Boost PLOD): degree ~ beta * x^-alpha
  double beta = 2000.0;          ///< (alpha 0.5-0.7, beta 1000-3000: mean degree 5-8, hubs 20x)
  int neighbors = 6;             ///< smallworld (Boost): each vertex's ring neighbours
  double rewire = 0.05;          ///< smallworld: rewiring probability
  std::uint64_t seed = 1;
};

struct GeneratorKind {
  std::string name;
  std::string description;  ///< one line naming the parameters it reads
};

/// Every generator kind: uniform, banded, blocks, stencil2d, stencil3d, rmat, powerlaw, smallworld.
const std::vector<GeneratorKind>& generator_kinds();

/// Generates a matrix. Throws Error for an unknown kind or parameters out of range (naming them).
CooMatrix generate(const GeneratorSpec& spec);

/// The powerlaw generator's expected stored entries for `rows` vertices, `alpha` and `beta`, each
/// vertex of degree max(1, min(rows - 1, beta * x^-alpha)) with x drawn in [0, rows - 1]: what
/// the generator refuses beyond its bounds, and what recipe estimates count (parameters it
/// refuses give max(0, rows)). The sum runs term by term up to x = 2^16 and beyond by distinct
/// degrees (exactly; an integral where they are 2^16 or more: within a share of a term), so that
/// a recipe of 10^13 rows is estimated at once instead of in 10^9 terms.
double powerlaw_expected_nnz(std::int64_t rows, double alpha, double beta);

/// A real matrix scaled up (the large-operand set of issue 36): `copies` copies of the canonical
/// matrix `a` on the block diagonal, copy c's entry (i, j) at (i + c * rows, j + c * cols), values
/// kept: rows, columns and nonzeros times `copies`. Each row's pattern, the bandwidth and the
/// locality of x within a copy stay the original's; only the working set grows (so a result on
/// one is a result on the file "scaled up", not on a larger real matrix). Throws Error for copies
/// < 1, or when a dimension or the nonzeros would exceed the 32-bit limit or this machine's memory.
CooMatrix replicate_diagonal(const CooMatrix& a, std::int64_t copies);

/// A uniform random tensor of order 1 to 4 with exactly nnz distinct entries, values in (-1, 1).
CooTensor generate_tensor(const std::vector<index_t>& dims, std::int64_t nnz, std::uint64_t seed);

}  // namespace waco::kernels
