// Private to tune/src/adaptive_run.cpp, adaptive_estimates.cpp and adaptive_calls.cpp: what the
// parts of an adaptive plan's run time (adaptive_run.hpp) share. The parts:
//   adaptive_run.cpp        its making, and the preparation steps (the tuning cache asked, the
//                           diagonals counted, the nominees chosen, a nominee's format and kernel,
//                           the background compile)
//   adaptive_estimates.cpp  the next step due and what it is taken to cost against the budget
//                           (maybe_prepare)
//   adaptive_calls.cpp      the calls (served, timed, verified), settling, the decision stored,
//                           the report
#pragma once

#include <atomic>
#include <cstdint>

#include "waco/tune/tune.hpp"

namespace waco::tuning::detail {

/// At most this many calls are served quietly (csr, untimed) before the budget is asked again.
constexpr std::int64_t kMaxQuietCalls = 4096;

// adaptive_estimates.cpp (documented there).
extern std::atomic<bool> g_chose;
extern std::atomic<bool> g_loaded;

// adaptive_run.cpp: the operand's nonzeros.
std::int64_t operand_nnz(const TuneOperand& o);

}  // namespace waco::tuning::detail
