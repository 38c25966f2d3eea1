// The drop-in header of a plan the dia baseline serves (standalone_dia.cpp).
#pragma once

#include <string>

#include "waco/kernels/kernel.hpp"

namespace waco::codegen::detail {

/// The header (emit_standalone_header's calls, build from CSR and spmv, in namespace
/// `name_space`) over diagonal storage; `threads` 0: omp_get_max_threads().
std::string dia_standalone_header(const std::string& name_space, const std::string& note,
                                  kernels::Dtype dtype, int threads);

}  // namespace waco::codegen::detail
