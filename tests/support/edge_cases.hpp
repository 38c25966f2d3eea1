// Generated edge-case operands shared by every kernel test (STYLE.md item 9): empty rows, one
// dense row, a single column, sizes not divisible by split sizes, power-law rows, rectangular,
// explicit zeros, an empty matrix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "waco/kernels/sparse.hpp"

namespace waco::test {

struct NamedMatrix {
  std::string name;
  kernels::CooMatrix matrix;
};

struct NamedTensor {
  std::string name;
  kernels::CooTensor tensor;
};

/// Canonical edge-case matrices, small enough for the reference to run in milliseconds.
std::vector<NamedMatrix> edge_case_matrices();
/// Canonical edge-case 3-D tensors (empty slices, a dense fibre, one slice, odd sizes).
std::vector<NamedTensor> edge_case_tensors();

/// Builds a canonical matrix from triplets (values as given).
kernels::CooMatrix from_triplets(kernels::index_t rows, kernels::index_t cols,
                                 const std::vector<kernels::index_t>& r,
                                 const std::vector<kernels::index_t>& c,
                                 const std::vector<float>& v);

/// The values of `a` perturbed in their 30th bit (v * (1 + 2^-30 * ((e % 7) - 3))): not
/// representable in float, so a kernel that stores or sums them in single precision misses the
/// double-precision reference by ~1e-8 relative, a million times the double tolerance.
kernels::CooMatrix with_double_values(kernels::CooMatrix a);
kernels::CooTensor with_double_values(kernels::CooTensor t);

/// Tolerance of verify() for double-precision kernels (relative to the sum of |products|).
inline constexpr double kDoubleTolerance = 1e-12;

/// Values diagonal storage (the dia baseline) keeps for a, counted here independently of it: its
/// rows times the diagonals (col - row) holding a nonzero.
std::int64_t diagonal_storage_values(const kernels::CooMatrix& a);
/// Whether the dia baseline must refuse a: it would store more than kDiaMaxFill values a nonzero.
bool dia_refuses(const kernels::CooMatrix& a);

/// An n x n band (`half` entries either side of the diagonal) plus one scattered entry per row
/// off the band: small, but every thread of a row-parallel kernel has work (the measuring tests).
kernels::CooMatrix band_matrix(int n, int half);

}  // namespace waco::test
