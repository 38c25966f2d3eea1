// parallelize-outer (heuristic; seed 003 section 2.5.2, CPU-2): OpenMP parallel inner loops pay
// the scheduling overhead per outer iteration, so only the outermost loop is parallelized.
#include "passes.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_parallelize_outer_pass(const PassParams&) {
  return std::make_unique<SimplePass>(
      "parallelize-outer",
      "CPU-2: the parallel loop is the outermost loop of the order.", false,
      [](const Space&, std::string&) {
        std::vector<std::shared_ptr<const Constraint>> c;
        c.push_back(std::make_shared<NestConstraint>(
            [](const Space&, const std::vector<Loop>& order, const Loop& parallel) -> const char* {
              return order.front() == parallel ? nullptr : "inner-parallel-loop";
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
