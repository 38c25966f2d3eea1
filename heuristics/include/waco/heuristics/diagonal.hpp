// The dia nominee (issue 36): the diagonal-storage SpMV baseline (kernels/baseline_loops.hpp,
// dia_spmv; served by codegen::bind_baseline) measured beside a tune's nominees when the matrix's
// nonzeros lie on few enough diagonals for it (at most kDiaMaxFill stored values a nonzero).
// The diagonal-storage pass (passes.def) admits it; the space's format masks, the cost model
// and the training data know SuperSchedules only, so the dia kernel enters as a rule's nominee,
// as the narrow twins do (narrow.hpp). Measured (2 threads, Intel Xeon VM, side by side): 2.4-2.7x
// the best library on 20-22M-nonzero stencils and banded matrices, 2.7-8x csr on cache-resident
// ones (experiments/README.md).
#pragma once

#include <cstdint>
#include <string>

#include "waco/heuristics/space.hpp"

namespace waco::heuristics {

/// Whether the dia nominee is admitted for `space` (SpMV on a matrix whose diagonals dia
/// stores: MatrixFacts::diagonals), and the reason either way.
struct DiaAdmission {
  bool admitted = false;
  std::string note;
  std::int64_t diagonals = -1;  ///< the count it decided on (-1: none, not SpMV on a matrix)
};
DiaAdmission dia_admission(const Space& space);
/// The same decision for kernel `kind` on matrix `a` (its diagonals counted here, O(nnz)),
/// without a Space: an adaptive plan's first step (tuning::AdaptiveRun).
DiaAdmission dia_admission(kernels::KernelKind kind, const kernels::CooMatrix& a);

}  // namespace waco::heuristics
