// vectorizable-inner (heuristic; seed 003 section 2.5.2, CPU-5): vector lanes should run over a
// contiguous variable, i.e. the innermost loop should be the whole or inner part (x or x0) of the
// variable that is contiguous in the dense operands (the last variable of their row-major layouts
// that A does not index: SpMM j, SDDMM k, MTTKRP j). This is the reference artifact's "j0
// innermost". It does not apply to SpMV (its only dense operands are vectors indexed by A).
#include <algorithm>

#include "passes.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_vectorizable_inner_pass(const PassParams&) {
  return std::make_unique<SimplePass>(
      "vectorizable-inner",
      "CPU-5: the innermost loop runs over the contiguous dense variable (x or x0 of the last "
      "variable of the dense layouts that A does not index); does not apply to SpMV.",
      false, [](const Space& space, std::string& note) {
        std::vector<std::shared_ptr<const Constraint>> c;
        const codegen::KernelSpec& spec = space.spec();
        std::vector<char> lanes;
        std::vector<const codegen::Access*> acc;
        for (const auto& in : spec.inputs) acc.push_back(&in);
        if (!spec.sparse_output()) acc.push_back(&spec.output);
        for (const codegen::Access* a : acc)
          if (!a->vars.empty() && !spec.is_sparse_var(a->vars.back()) &&
              std::find(lanes.begin(), lanes.end(), a->vars.back()) == lanes.end())
            lanes.push_back(a->vars.back());
        if (lanes.empty()) {
          note = "no dense variable outside the sparse operand: nothing to vectorize over";
          return c;
        }
        c.push_back(std::make_shared<NestConstraint>(
            [lanes](const Space&, const std::vector<Loop>& order, const Loop&) -> const char* {
              const Loop& last = order.back();
              const bool contiguous = last.part != Loop::Part::Outer &&
                                      std::find(lanes.begin(), lanes.end(), last.var) != lanes.end();
              return contiguous ? nullptr : "non-contiguous-innermost";
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
