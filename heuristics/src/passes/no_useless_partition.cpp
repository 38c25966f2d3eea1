// no-useless-partition (heuristic; seed 003 section 2.5.2, CPU-3): when x1 is directly followed by
// x0 and neither is the parallel loop, the loops visit x in the same order as one loop over x, so
// the split buys nothing in the iteration. It is heuristic here, not sound: the split still
// changes the storage (two levels instead of one, e.g. C over C is not a CSR level) and so the
// generated code.
#include "passes.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_no_useless_partition_pass(const PassParams&) {
  return std::make_unique<SimplePass>(
      "no-useless-partition",
      "CPU-3: removes orders where x1 is directly followed by x0 and neither is parallel (the "
      "split does not change the iteration).",
      false, [](const Space&, std::string&) {
        std::vector<std::shared_ptr<const Constraint>> c;
        c.push_back(std::make_shared<NestConstraint>(
            [](const Space&, const std::vector<Loop>& order, const Loop& parallel) -> const char* {
              for (std::size_t i = 0; i + 1 < order.size(); ++i)
                if (order[i].part == Loop::Part::Outer && order[i + 1].part == Loop::Part::Inner &&
                    order[i].var == order[i + 1].var && order[i] != parallel &&
                    order[i + 1] != parallel)
                  return "adjacent-split-pair";
              return nullptr;
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
