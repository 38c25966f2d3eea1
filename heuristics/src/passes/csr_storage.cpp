// csr-storage (a restriction, not a trimming rule; never in "all"): the sparse operand stays in
// the csr format (csf for MTTKRP): its dimensions unsplit, in their own order, with the csr
// schedule's level formats. What remains free is the schedule: the dense variables' splits, the
// loop order, the parallel loop, threads and chunk. waco-hybrid ablate's "schedule-only"
// baseline (WACO's comparison of schedule-only against format+schedule co-optimization).
#include "passes.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_csr_storage_pass(const PassParams&) {
  return std::make_unique<SimplePass>(
      "csr-storage",
      "Restriction for comparisons (ablate's schedule-only baseline), not in 'all': keeps the "
      "sparse operand in csr (csf for mttkrp) storage, unsplit; the schedule stays free.",
      false, [](const Space& space, std::string&) {
        const codegen::SuperSchedule csr = csr_like_schedule(space.kind());
        std::vector<std::shared_ptr<const Constraint>> c;
        c.push_back(std::make_shared<StorageConstraint>(
            [levels = csr.levels(), formats = csr.formats](
                const Space& s, const std::vector<int>& split, const std::vector<Loop>& lv,
                const std::vector<LevelFormat>& f) -> const char* {
              for (char v : s.spec().sparse_vars)
                if (split[static_cast<std::size_t>(s.spec().var_index(v))] != 1)
                  return "sparse-split";
              return lv == levels && f == formats ? nullptr : "not-csr-storage";
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
