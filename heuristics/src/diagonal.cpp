#include "waco/heuristics/diagonal.hpp"

#include <algorithm>
#include <cstdio>

#include "waco/kernels/baseline_loops.hpp"

namespace waco::heuristics {

DiaAdmission dia_admission(const Space& space) {
  if (space.kind() != kernels::KernelKind::SpMV) return {false, "dia runs spmv only"};
  const MatrixFacts* facts = space.facts();
  if (facts == nullptr || facts->diagonals < 0) return {false, "no matrix: dia is not nominated"};
  const std::int64_t nnz = facts->counts.nnz();
  const std::int64_t rows = space.extent(space.spec().sparse_vars.front());
  const double per_nnz = static_cast<double>(facts->diagonals) * static_cast<double>(rows) /
                         static_cast<double>(std::max<std::int64_t>(nnz, 1));
  const bool admitted = kernels::dia_stores(rows, nnz, static_cast<std::size_t>(facts->diagonals));
  char buf[200];
  std::snprintf(buf, sizeof buf, "the nonzeros lie on %lld diagonals (%.2f stored values a nonzero): %s",
                static_cast<long long>(facts->diagonals), per_nnz,
                admitted ? "the dia baseline is nominated" : "too many for the dia baseline");
  return {admitted, buf};
}

}  // namespace waco::heuristics
