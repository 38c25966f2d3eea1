// parallelize-one (heuristic; seed 003 section 2.5.2, CPU-1): a CPU has little parallelism, so it
// all goes to ONE loop. Fusing loops to parallelize them is not in the SuperSchedule space (one
// parallel loop by construction); what remains of the rule is to give that loop every core:
// thread counts below the core count are removed. Heuristic: with shared memory bandwidth fewer
// threads can occasionally win.
#include "passes.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_parallelize_one_pass(const PassParams&) {
  return std::make_unique<SimplePass>(
      "parallelize-one",
      "CPU-1: one parallel loop, given all the cores (threads = cores); fusion is not in the "
      "space, so only the thread count is trimmed.",
      false, [](const Space&, std::string&) {
        std::vector<std::shared_ptr<const Constraint>> c;
        c.push_back(std::make_shared<ExecutionConstraint>(
            [](const Space& s, const std::vector<int>&, const Loop&, int threads,
               int) -> const char* {
              return threads < s.cores() ? "fewer-threads-than-cores" : nullptr;
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
