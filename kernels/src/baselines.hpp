// Factories of the baseline implementations (private to waco_kernels; the registry in
// implementations.cpp is the public way to reach them).
#pragma once

#include <memory>

#include "waco/kernels/implementation.hpp"

namespace waco::kernels::detail {

/// csr: CSR rows in parallel, OpenMP dynamic (chunk 128 SpMV, 32 SpMM/SDDMM); TACO's default.
std::unique_ptr<Implementation> make_csr();
/// csf: MTTKRP over CSF (compressed i, k, l), slices in parallel, dynamic chunk 32.
std::unique_ptr<Implementation> make_csf();
/// eigen: Eigen::SparseMatrix<float, RowMajor> times a vector / row-major dense matrix.
std::unique_ptr<Implementation> make_eigen();
/// True when this build has librsb.
bool have_rsb();
/// rsb (tuned = false) and rsb-tuned (tuned = true: librsb's own autotuner, time reported as
/// tuning_seconds). Throws Error when built without librsb.
std::unique_ptr<Implementation> make_rsb(bool tuned);

}  // namespace waco::kernels::detail
