// diagonal-storage (heuristic, storage; issue 36): admits the dia baseline (diagonal storage,
// kernels/baseline_loops.hpp) as a nominee of tune beside the search's for SpMV on a matrix whose
// diagonals store at most kDiaMaxFill values a nonzero (heuristics/diagonal.hpp). The enumerated
// space holds SuperSchedules only, so this pass removes nothing from its count; its note says
// whether the nominee is admitted, and why.
#include "passes.hpp"
#include "waco/heuristics/diagonal.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_diagonal_storage_pass(const PassParams&) {
  return std::make_unique<SimplePass>(
      "diagonal-storage",
      "Admits the dia baseline (SpMV over diagonal storage) as a nominee beside the search's when "
      "the matrix's diagonals store at most 2 values a nonzero; the enumerated space is unchanged.",
      false, [](const Space& space, std::string& note) {
        note = dia_admission(space).note;
        return std::vector<std::shared_ptr<const Constraint>>{};
      });
}

}  // namespace waco::heuristics::detail
