#include "waco/kernels/kernel.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "waco/kernels/error.hpp"

namespace waco::kernels {

std::string_view kernel_name(KernelKind k) {
  switch (k) {
    case KernelKind::SpMV: return "spmv";
    case KernelKind::SpMM: return "spmm";
    case KernelKind::SDDMM: return "sddmm";
    case KernelKind::MTTKRP: return "mttkrp";
  }
  return "?";
}

std::optional<KernelKind> parse_kernel(std::string_view name) {
  for (KernelKind k : kAllKernels)
    if (kernel_name(k) == name) return k;
  return std::nullopt;
}

int default_dense_size(KernelKind k) {
  switch (k) {
    case KernelKind::SpMV: return 1;
    case KernelKind::SpMM: return 256;
    case KernelKind::SDDMM: return 256;
    case KernelKind::MTTKRP: return 16;
  }
  return 1;
}

index_t Problem::dense_size() const {
  switch (kind) {
    case KernelKind::SpMV: return 1;
    case KernelKind::SpMM: return B->cols;
    case KernelKind::SDDMM: return B->cols;
    case KernelKind::MTTKRP: return B->cols;
  }
  return 1;
}

std::int64_t Problem::nnz() const { return needs_tensor(kind) ? T->nnz() : A->nnz(); }

std::int64_t Problem::output_size() const {
  switch (kind) {
    case KernelKind::SpMV: return A->rows;
    case KernelKind::SpMM: return static_cast<std::int64_t>(A->rows) * dense_size();
    case KernelKind::SDDMM: return A->nnz();
    case KernelKind::MTTKRP: return static_cast<std::int64_t>(T->dims[0]) * dense_size();
  }
  return 0;
}

double Problem::flops() const {
  const double nz = static_cast<double>(nnz());
  const double n = dense_size();
  switch (kind) {
    case KernelKind::SpMV: return 2.0 * nz;
    case KernelKind::SpMM: return 2.0 * nz * n;
    case KernelKind::SDDMM: return nz * (2.0 * n + 1.0);
    case KernelKind::MTTKRP: return 3.0 * nz * n;
  }
  return 0.0;
}

void Problem::validate() const {
  const std::string k(kernel_name(kind));
  WACO_ASSERT(B != nullptr, k + ": missing dense operand B");
  WACO_ASSERT(B->dtype() == value_type && (C == nullptr || C->dtype() == value_type),
              k + ": the dense operands are not of the problem's value type");
  if (needs_tensor(kind)) {
    WACO_ASSERT(T != nullptr && T->order() == 3, k + ": needs a 3-D sparse tensor");
    WACO_ASSERT(C != nullptr, k + ": missing dense operand C");
    WACO_ASSERT(B->rows == T->dims[1] && C->rows == T->dims[2] && B->cols == C->cols,
                k + ": dense operand shapes do not match the tensor");
    WACO_ASSERT(B->layout == Layout::RowMajor && C->layout == Layout::RowMajor,
                k + ": B and C must be row-major");
    return;
  }
  WACO_ASSERT(A != nullptr, k + ": needs a sparse matrix");
  switch (kind) {
    case KernelKind::SpMV:
      WACO_ASSERT(B->rows == A->cols && B->cols == 1, "spmv: x must be cols x 1");
      break;
    case KernelKind::SpMM:
      WACO_ASSERT(B->rows == A->cols && B->layout == Layout::RowMajor,
                  "spmm: B must be cols x J row-major");
      break;
    case KernelKind::SDDMM:
      WACO_ASSERT(C != nullptr, "sddmm: missing dense operand C");
      WACO_ASSERT(B->rows == A->rows && B->layout == Layout::RowMajor,
                  "sddmm: B must be rows x K row-major");
      WACO_ASSERT(C->rows == B->cols && C->cols == A->cols && C->layout == Layout::ColMajor,
                  "sddmm: C must be K x cols column-major");
      break;
    case KernelKind::MTTKRP: break;
  }
}

DenseOperands make_dense_operands(KernelKind k, const CooMatrix* A, const CooTensor* T,
                                  int dense, std::uint64_t seed, Dtype dtype) {
  if (dense < 1)
    throw Error("dense size must be at least 1 (got " + std::to_string(dense) + ")",
                "use --dense N with N >= 1");
  if (needs_tensor(k)) {
    WACO_ASSERT(T != nullptr, "mttkrp needs a tensor");
    if (T->order() != 3)
      throw Error("mttkrp needs a 3-D tensor (got order " + std::to_string(T->order()) + ")",
                  "give a .tns file with three index columns");
  } else {
    WACO_ASSERT(A != nullptr, std::string(kernel_name(k)) + " needs a matrix");
  }
  DenseOperands d;
  switch (k) {
    case KernelKind::SpMV: d.B = random_dense(A->cols, 1, Layout::RowMajor, seed, "x", dtype); break;
    case KernelKind::SpMM: d.B = random_dense(A->cols, dense, Layout::RowMajor, seed, "B", dtype); break;
    case KernelKind::SDDMM:
      d.B = random_dense(A->rows, dense, Layout::RowMajor, seed, "B", dtype);
      d.C = random_dense(dense, A->cols, Layout::ColMajor, seed, "C", dtype);
      break;
    case KernelKind::MTTKRP:
      d.B = random_dense(T->dims[1], dense, Layout::RowMajor, seed, "B", dtype);
      d.C = random_dense(T->dims[2], dense, Layout::RowMajor, seed, "C", dtype);
      break;
  }
  return d;
}

void check_value_range(const Problem& p) {
  if (p.value_type != Dtype::F32) return;
  const std::vector<double>& v = needs_tensor(p.kind) ? p.T->val : p.A->val;
  constexpr double kMax = std::numeric_limits<float>::max();
  for (double x : v)
    if (std::fabs(x) > kMax && std::isfinite(x))
      throw Error("the sparse operand holds the value " + std::to_string(x) +
                      ", outside the single-precision range (|v| > 3.4e38)",
                  "compute in double precision (dtype f64), or rescale the operand");
}

Problem make_problem(KernelKind k, const CooMatrix* A, const CooTensor* T,
                     const DenseOperands& operands) {
  Problem p;
  p.kind = k;
  p.A = A;
  p.T = T;
  p.B = &operands.B;
  p.C = (k == KernelKind::SDDMM || k == KernelKind::MTTKRP) ? &operands.C : nullptr;
  p.value_type = operands.B.dtype();
  check_value_range(p);
  p.validate();
  return p;
}

}  // namespace waco::kernels
