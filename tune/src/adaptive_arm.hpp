// The arm of an adaptive plan, shared by its run (adaptive_run.cpp) and its making
// (adaptive_arm.cpp): private to tune/.
#pragma once

#include <cstdint>

#include "waco/kernels/kernel.hpp"
#include "waco/tune/adaptive_run.hpp"

namespace waco::tuning::detail {

/// After `a.bound` is bound: whether an SDDMM arm's format stores the `nnz` nonzeros in CSR
/// order (Arm::sddmm_in_order); nothing for the other kernels.
void finish_arm(Arm& a, kernels::KernelKind kind, std::int64_t nnz);

}  // namespace waco::tuning::detail
