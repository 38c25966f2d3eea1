// The four kernels and one instance of a kernel (a Problem): the sparse operand plus its dense
// operands, with the layouts fixed by ARCHITECTURE.md section 1:
//
//   SpMV    y[i]   = A[i,k] * x[k]                 x: cols x 1
//   SpMM    C[i,j] = A[i,k] * B[k,j]               B: cols x J row-major; C row-major
//   SDDMM   D[i,j] = A[i,j] * B[i,k] * C[k,j]      B: rows x K row-major; C: K x cols col-major
//   MTTKRP  D[i,j] = A[i,k,l] * B[k,j] * C[l,j]    B: dims[1] x J, C: dims[2] x J, row-major
//
// Every implementation writes its result in one canonical flat layout so that results compare
// directly: SpMV y (rows); SpMM C row-major (rows x J); SDDMM the values of D in A's canonical
// (row-major) nonzero order (nnz); MTTKRP D row-major (dims[0] x J).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "waco/kernels/dense.hpp"
#include "waco/kernels/sparse.hpp"

namespace waco::kernels {

enum class KernelKind { SpMV, SpMM, SDDMM, MTTKRP };

inline constexpr KernelKind kAllKernels[] = {KernelKind::SpMV, KernelKind::SpMM,
                                             KernelKind::SDDMM, KernelKind::MTTKRP};

/// "spmv", "spmm", "sddmm", "mttkrp".
std::string_view kernel_name(KernelKind k);
/// Inverse of kernel_name; nullopt for an unknown name.
std::optional<KernelKind> parse_kernel(std::string_view name);
/// The dense size the WACO paper used: SpMM J=256, SDDMM K=256, MTTKRP J=16, SpMV 1.
int default_dense_size(KernelKind k);
/// True for MTTKRP (a 3-D sparse operand).
inline bool needs_tensor(KernelKind k) { return k == KernelKind::MTTKRP; }

/// A kernel instance. Non-owning: the operands must outlive the Problem.
struct Problem {
  KernelKind kind = KernelKind::SpMV;
  const CooMatrix* A = nullptr;    ///< SpMV, SpMM, SDDMM (canonical)
  const CooTensor* T = nullptr;    ///< MTTKRP (canonical, order 3)
  const DenseMatrix* B = nullptr;  ///< x for SpMV; B otherwise
  const DenseMatrix* C = nullptr;  ///< SDDMM and MTTKRP only
  /// The value type of the dense operands, the output and the kernel's stored values (set even
  /// when the dense operands are absent, as when only a format is built).
  Dtype value_type = Dtype::F32;

  /// J (SpMM, MTTKRP), K (SDDMM) or 1 (SpMV), taken from the dense operands.
  index_t dense_size() const;
  Dtype dtype() const { return value_type; }
  /// Number of values in the canonical output.
  std::int64_t output_size() const;
  /// Nonzeros of the sparse operand.
  std::int64_t nnz() const;
  /// Useful floating-point operations: 2 nnz (SpMV), 2 nnz J (SpMM), nnz (2K + 1) (SDDMM),
  /// 3 nnz J (MTTKRP).
  double flops() const;
  /// Throws InternalError unless the operands are present with matching shapes and layouts.
  void validate() const;
};

/// Dense operands owned together, as made for or read into a Problem.
struct DenseOperands {
  DenseMatrix B;
  DenseMatrix C;
};

/// Seeded dense operands of the right shapes, layouts and value type (see random_dense for the
/// generator: the same numbers in both types). `dense` is J, K or ignored for SpMV; must be >= 1.
DenseOperands make_dense_operands(KernelKind k, const CooMatrix* A, const CooTensor* T, int dense,
                                  std::uint64_t seed, Dtype dtype = Dtype::F32);

/// Throws Error when p is single precision and its sparse operand holds a finite value beyond
/// float's range (a file read in double, then computed in float). O(nnz).
void check_value_range(const Problem& p);

/// Builds a Problem over the given operands, in their value type, and validates it (and
/// check_value_range).
Problem make_problem(KernelKind k, const CooMatrix* A, const CooTensor* T,
                     const DenseOperands& operands);

}  // namespace waco::kernels
