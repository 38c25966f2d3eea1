// The kernel as data (STYLE.md item 2): index variables, the sparse operand's dimensions, and the
// dense operands and output as accesses over variables. One KernelSpec per kernel drives the
// schedule space, the storage builder and the code generator, so SpMV, SpMM, SDDMM and MTTKRP
// share one implementation.
//
//   SpMV    y(i)   += A(i,k) * x(k)
//   SpMM    C(i,j) += A(i,k) * B(k,j)              B, C row-major
//   SDDMM   D(i,j) += A(i,j) * B(i,k) * C(k,j)     B row-major; C column-major = row-major over (j,k);
//                                                  D sparse, stored at A's positions
//   MTTKRP  D(i,j) += A(i,k,l) * B(k,j) * C(l,j)   B, C, D row-major
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "waco/kernels/kernel.hpp"

namespace waco::codegen {

/// A dense tensor access: the variables of its storage order (row-major over them).
struct Access {
  std::string name;
  std::vector<char> vars;
};

struct KernelSpec {
  kernels::KernelKind kind;
  std::vector<char> vars;         ///< every index variable, in a fixed canonical order
  std::vector<char> sparse_vars;  ///< A's dimensions, in A's own order (i, k) / (i, j) / (i, k, l)
  std::vector<Access> inputs;     ///< the dense inputs, in the order of the Problem (B, C)
  Access output;                  ///< empty vars: the output is sparse, at A's positions (SDDMM)

  /// Index of v in vars, or -1.
  int var_index(char v) const;
  bool is_sparse_var(char v) const;
  bool is_output_var(char v) const;
  bool sparse_output() const { return output.vars.empty(); }
};

/// The spec of a kernel (static storage).
const KernelSpec& kernel_spec(kernels::KernelKind k);

/// The extent of every variable of the spec for a problem, in spec.vars order.
std::vector<std::int64_t> extents(const KernelSpec& spec, const kernels::Problem& p);
/// The same from the sparse operand (A, or T for MTTKRP) and the dense size (J, K; unused by
/// SpMV), for callers that hold no dense operands.
std::vector<std::int64_t> extents(const KernelSpec& spec, const kernels::CooMatrix* A,
                                  const kernels::CooTensor* T, std::int64_t dense);

}  // namespace waco::codegen
