// sparse-iteration (sound; seed 003 section 2.5.1, trimming pass 0): a compressed level can only
// be iterated once the loops of its parent levels are bound, and x0 only after x1. In a
// SuperSchedule the sparse operand's levels ARE the loop order restricted to its variables
// (ARCHITECTURE.md section 2), so every candidate satisfies this by construction and the pass
// removes nothing; it is kept as a checked invariant so that thesis pipelines compose.
#include "passes.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_sparse_iteration_pass(const PassParams&) {
  return std::make_unique<SimplePass>(
      "sparse-iteration",
      "Keeps level orders where each level's parent loops come first (thesis pass 0); holds by "
      "construction for SuperSchedules (storage follows the loop order), so it removes nothing.",
      true, [](const Space&, std::string&) {
        std::vector<std::shared_ptr<const Constraint>> c;
        c.push_back(std::make_shared<StorageConstraint>(
            [](const Space&, const std::vector<int>&, const std::vector<Loop>& levels,
               const std::vector<LevelFormat>&) -> const char* {
              for (std::size_t l = 0; l < levels.size(); ++l) {
                if (levels[l].part != Loop::Part::Inner) continue;
                bool parent_first = false;
                for (std::size_t m = 0; m < l; ++m)
                  parent_first = parent_first || (levels[m].var == levels[l].var &&
                                                  levels[m].part == Loop::Part::Outer);
                if (!parent_first) return "level-before-parent";
              }
              return nullptr;
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
