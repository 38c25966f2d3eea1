// legality (sound): the candidates that are illegal by definition -- a split size above the
// variable's extent (seed 003 section 2.5 "illegal parameters") -- or that codegen::build_storage
// would refuse: the padding bound (StorageOptions::max_padding x nnz stored values or index words)
// and 32-bit index overflow. Sizes are exact, from the prefix counts (Space::storage_refusal).
#include "passes.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_legality_pass(const PassParams&) {
  return std::make_unique<SimplePass>(
      "legality",
      "Removes split sizes above the dimension and formats that build_storage would refuse "
      "(padding bound, 32-bit index overflow), with exact level sizes from the prefix counts.",
      true, [](const Space& space, std::string& note) {
        std::vector<std::shared_ptr<const Constraint>> c;
        c.push_back(std::make_shared<SplitConstraint>(
            [](const Space& s, const std::vector<int>& split) -> const char* {
              for (std::size_t v = 0; v < split.size(); ++v)
                if (split[v] > 1 && split[v] > s.extents()[v]) return "split-above-dimension";
              return nullptr;
            }));
        if (space.facts() == nullptr) {
          note = "no matrix: the padding bound is not checked";
        } else {
          c.push_back(std::make_shared<StorageConstraint>(
              [](const Space& s, const std::vector<int>& split, const std::vector<Loop>& levels,
                 const std::vector<LevelFormat>& formats) {
                return s.storage_refusal(split, levels, formats);
              }));
        }
        return c;
      });
}

}  // namespace waco::heuristics::detail
