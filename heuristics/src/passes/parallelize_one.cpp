// parallelize-one (heuristic; seed 003 section 2.5.2, CPU-1): a CPU has little parallelism, so it
// all goes to ONE loop. Fusing loops to parallelize them is not in the SuperSchedule space (one
// parallel loop by construction); what remains of the rule is to give that loop every core:
// thread counts below the core count are removed, except one thread (a serial kernel, no OpenMP
// region) for a matrix whose whole kernel is at most PassParams::max_serial_work multiply-adds
// (nonzeros x dense size): there a region's fork and join cost more than the work they share.
// Heuristic: with shared memory bandwidth fewer threads can occasionally win.
#include "passes.hpp"

namespace waco::heuristics::detail {

namespace {

/// Multiply-adds of one kernel call: nonzeros x the dense size (SpMM/MTTKRP J, SDDMM K).
double kernel_work(const Space& s) {
  if (!s.facts()) return -1.0;  // structural space: unknown
  const char v = dense_var(s.kind());
  return static_cast<double>(s.facts()->counts.nnz()) * static_cast<double>(v ? s.extent(v) : 1);
}

}  // namespace

std::unique_ptr<Pass> make_parallelize_one_pass(const PassParams& params) {
  const double max_serial = static_cast<double>(params.max_serial_work);
  return std::make_unique<SimplePass>(
      "parallelize-one",
      "CPU-1: one parallel loop, given all the cores (threads = cores), or one thread (serial, "
      "no OpenMP region) when the kernel is at most max-serial-work multiply-adds; fusion is not "
      "in the space, so only the thread count is trimmed.",
      false, [max_serial](const Space& space, std::string& note) {
        const double work = kernel_work(space);
        const bool serial = work >= 0.0 && work <= max_serial;
        if (serial)
          note = "serial kept: " + std::to_string(static_cast<long long>(work)) +
                 " multiply-adds <= max-serial-work";
        std::vector<std::shared_ptr<const Constraint>> c;
        c.push_back(std::make_shared<ExecutionConstraint>(
            [serial](const Space& s, const std::vector<int>&, const Loop&, int threads,
                     int) -> const char* {
              if (threads >= s.cores() || (serial && threads == 1)) return nullptr;
              return "fewer-threads-than-cores";
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
