// default-schedule (a restriction, not a trimming rule; never in "all"): the storage format is
// free (splits of the sparse variables, level order, U/C levels) but the schedule is the library
// default of the csr kernel: dense variables unsplit, every dense loop inside the sparse ones,
// the outermost loop parallel, all cores, csr's chunk. waco-hybrid ablate's "format-only"
// baseline (format selection without schedule tuning, as WACO compared).
#include "passes.hpp"

namespace waco::heuristics::detail {

std::unique_ptr<Pass> make_default_schedule_pass(const PassParams&) {
  return std::make_unique<SimplePass>(
      "default-schedule",
      "Restriction for comparisons (ablate's format-only baseline), not in 'all': keeps the "
      "format free and the csr kernel's schedule: dense loops unsplit and innermost, the "
      "outermost loop parallel on all cores with csr's chunk.",
      false, [](const Space& space, std::string&) {
        const int chunk = csr_like_schedule(space.kind()).chunk;
        std::vector<std::shared_ptr<const Constraint>> c;
        c.push_back(std::make_shared<SplitConstraint>(
            [](const Space& s, const std::vector<int>& split) -> const char* {
              for (std::size_t v = 0; v < split.size(); ++v)
                if (split[v] != 1 && !s.spec().is_sparse_var(s.spec().vars[v]))
                  return "dense-split";
              return nullptr;
            }));
        c.push_back(
            std::make_shared<NestConstraint>([](const Space& s, const std::vector<Loop>& order,
                                                const Loop& parallel) -> const char* {
              bool dense_seen = false;
              for (const Loop& l : order) {
                const bool sparse = s.spec().is_sparse_var(l.var);
                if (sparse && dense_seen) return "dense-loop-outside-sparse";
                dense_seen = dense_seen || !sparse;
              }
              return parallel == order.front() ? nullptr : "parallel-not-outermost";
            }));
        c.push_back(std::make_shared<ExecutionConstraint>(
            [chunk](const Space& s, const std::vector<int>&, const Loop&, int threads,
                    int ch) -> const char* {
              if (threads != s.cores()) return "fewer-threads-than-cores";
              return ch == chunk ? nullptr : "not-default-chunk";
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
