#include "waco/heuristics/diagonal.hpp"

#include <algorithm>
#include <cstdio>

#include "waco/kernels/baseline_loops.hpp"

namespace waco::heuristics {

namespace {

DiaAdmission admission(std::int64_t rows, std::int64_t nnz, std::int64_t diagonals) {
  const double per_nnz = static_cast<double>(diagonals) * static_cast<double>(rows) /
                         static_cast<double>(std::max<std::int64_t>(nnz, 1));
  const bool admitted = kernels::dia_stores(rows, nnz, static_cast<std::size_t>(diagonals));
  char buf[200];
  std::snprintf(buf, sizeof buf, "the nonzeros lie on %lld diagonals (%.2f stored values a nonzero): %s",
                static_cast<long long>(diagonals), per_nnz,
                admitted ? "the dia baseline is nominated" : "too many for the dia baseline");
  return {admitted, buf, diagonals};
}

}  // namespace

DiaAdmission dia_admission(const Space& space) {
  if (space.kind() != kernels::KernelKind::SpMV) return {false, "dia runs spmv only"};
  const MatrixFacts* facts = space.facts();
  if (facts == nullptr || facts->diagonals < 0) return {false, "no matrix: dia is not nominated"};
  return admission(space.extent(space.spec().sparse_vars.front()), facts->counts.nnz(),
                   facts->diagonals);
}

DiaAdmission dia_admission(kernels::KernelKind kind, const kernels::CooMatrix& a) {
  if (kind != kernels::KernelKind::SpMV) return {false, "dia runs spmv only"};
  return admission(a.rows, a.nnz(), static_cast<std::int64_t>(kernels::dia_offsets(a).size()));
}

}  // namespace waco::heuristics
