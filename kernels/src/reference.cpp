// Reference kernels (serial, naive, double accumulation) and verification. Deliberately simple:
// loops over the canonical COO entries, nothing clever, so that they can be trusted.
#include "waco/kernels/reference.hpp"

#include <cmath>
#include <sstream>

#include "waco/kernels/error.hpp"

namespace waco::kernels {
namespace {

Reference sized(std::int64_t n) {
  Reference r;
  r.value.assign(static_cast<std::size_t>(n), 0.0);
  r.scale.assign(static_cast<std::size_t>(n), 0.0);
  return r;
}

void add(Reference& r, std::size_t at, double term) {
  r.value[at] += term;
  r.scale[at] += std::fabs(term);
}

Reference spmv(const CooMatrix& A, const DenseMatrix& x) {
  Reference r = sized(A.rows);
  for (std::int64_t e = 0; e < A.nnz(); ++e)
    add(r, A.row[e], A.val[e] * x.at(A.col[e], 0));
  return r;
}

Reference spmm(const CooMatrix& A, const DenseMatrix& B) {
  const index_t J = B.cols;
  Reference r = sized(static_cast<std::int64_t>(A.rows) * J);
  for (std::int64_t e = 0; e < A.nnz(); ++e)
    for (index_t j = 0; j < J; ++j)
      add(r, static_cast<std::size_t>(A.row[e]) * J + j,
          A.val[e] * B.at(A.col[e], j));
  return r;
}

Reference sddmm(const CooMatrix& A, const DenseMatrix& B, const DenseMatrix& C) {
  const index_t K = B.cols;
  Reference r = sized(A.nnz());
  for (std::int64_t e = 0; e < A.nnz(); ++e)
    for (index_t k = 0; k < K; ++k)
      add(r, e, A.val[e] * B.at(A.row[e], k) * C.at(k, A.col[e]));
  return r;
}

Reference mttkrp(const CooTensor& T, const DenseMatrix& B, const DenseMatrix& C) {
  const index_t J = B.cols;
  Reference r = sized(static_cast<std::int64_t>(T.dims[0]) * J);
  for (std::int64_t e = 0; e < T.nnz(); ++e)
    for (index_t j = 0; j < J; ++j)
      add(r, static_cast<std::size_t>(T.idx[0][e]) * J + j,
          T.val[e] * B.at(T.idx[1][e], j) * C.at(T.idx[2][e], j));
  return r;
}

}  // namespace

Reference compute_reference(const Problem& p) {
  p.validate();
  switch (p.kind) {
    case KernelKind::SpMV: return spmv(*p.A, *p.B);
    case KernelKind::SpMM: return spmm(*p.A, *p.B);
    case KernelKind::SDDMM: return sddmm(*p.A, *p.B, *p.C);
    case KernelKind::MTTKRP: return mttkrp(*p.T, *p.B, *p.C);
  }
  WACO_ASSERT(false, "unknown kernel");
}

namespace {

template <class V>
Verification verify_typed(const V* out, std::int64_t size, const Reference& ref, double tolerance) {
  Verification v;
  v.tolerance = tolerance;
  if (size != static_cast<std::int64_t>(ref.value.size())) {
    v.message = "output has " + std::to_string(size) + " entries, the reference " +
                std::to_string(ref.value.size());
    return v;
  }
  // Entries whose every product is zero must come out (close to) zero: judge them against the
  // smallest normal float rather than dividing by zero.
  constexpr double kTiny = 1.1754943508222875e-38;
  for (std::int64_t i = 0; i < size; ++i) {
    const double o = out[i];
    if (!std::isfinite(o)) {
      v.max_rel_error = INFINITY;
      v.worst_index = i;
      break;
    }
    const double err = std::fabs(o - ref.value[i]) / std::max(ref.scale[i], kTiny);
    if (err > v.max_rel_error) {
      v.max_rel_error = err;
      v.worst_index = i;
    }
  }
  v.ok = v.max_rel_error <= tolerance;
  if (!v.ok) {
    std::ostringstream msg;
    msg << "entry " << v.worst_index << " is " << out[v.worst_index] << ", the reference "
        << ref.value[v.worst_index] << " (relative error " << v.max_rel_error
        << " > tolerance " << tolerance << ")";
    v.message = msg.str();
  }
  return v;
}

}  // namespace

Verification verify(const float* out, std::int64_t size, const Reference& ref, double tolerance) {
  return verify_typed(out, size, ref, tolerance);
}

Verification verify(const double* out, std::int64_t size, const Reference& ref, double tolerance) {
  return verify_typed(out, size, ref, tolerance);
}

Verification verify(const Values& out, const Reference& ref, double tolerance) {
  return with_value_type(out.dtype(), [&](auto v) {
    using V = decltype(v);
    return verify(out.data<V>(), static_cast<std::int64_t>(out.size()), ref, tolerance);
  });
}

}  // namespace waco::kernels
