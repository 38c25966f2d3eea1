// concordant-dense (heuristic; seed 003 section 2.5.2, CPU-4): a variable is *recovered* at the
// position of its last loop; the order of recovery should follow the row-major layouts of the
// dense operands. The concordancy score counts the pairs (a, b), a before b in a dense operand's
// layout, recovered in that order; only orders with the best score achievable for the kernel are
// kept (e.g. SpMM: k and i before j). The sparse operand is concordant by construction.
#include <algorithm>

#include "passes.hpp"

namespace waco::heuristics::detail {

namespace {

std::vector<const codegen::Access*> dense_accesses(const codegen::KernelSpec& spec) {
  std::vector<const codegen::Access*> a;
  for (const auto& in : spec.inputs) a.push_back(&in);
  if (!spec.sparse_output()) a.push_back(&spec.output);
  return a;
}

/// Score of a recovery rank per variable (rank[v] for spec.vars index v).
int score(const codegen::KernelSpec& spec, const std::vector<int>& rank) {
  int s = 0;
  for (const codegen::Access* a : dense_accesses(spec))
    for (std::size_t x = 0; x < a->vars.size(); ++x)
      for (std::size_t y = x + 1; y < a->vars.size(); ++y)
        if (rank[static_cast<std::size_t>(spec.var_index(a->vars[x]))] <
            rank[static_cast<std::size_t>(spec.var_index(a->vars[y]))])
          ++s;
  return s;
}

int best_score(const codegen::KernelSpec& spec) {
  std::vector<int> rank(spec.vars.size());
  for (std::size_t v = 0; v < rank.size(); ++v) rank[v] = static_cast<int>(v);
  int best = 0;
  do best = std::max(best, score(spec, rank));
  while (std::next_permutation(rank.begin(), rank.end()));
  return best;
}

}  // namespace

std::unique_ptr<Pass> make_concordant_dense_pass(const PassParams&) {
  return std::make_unique<SimplePass>(
      "concordant-dense",
      "CPU-4: keeps loop orders whose variable recovery order has the best concordancy score "
      "with the row-major dense operands (e.g. SpMM: j recovered last).",
      false, [](const Space& space, std::string& note) {
        std::vector<std::shared_ptr<const Constraint>> c;
        const int best = best_score(space.spec());
        if (best == 0) {
          note = "no dense operand has two variables: every order scores 0";
          return c;
        }
        c.push_back(std::make_shared<NestConstraint>(
            [best](const Space& s, const std::vector<Loop>& order, const Loop&) -> const char* {
              std::vector<int> rank(s.spec().vars.size(), 0);
              for (std::size_t p = 0; p < order.size(); ++p)
                rank[static_cast<std::size_t>(s.spec().var_index(order[p].var))] =
                    static_cast<int>(p);
              return score(s.spec(), rank) < best ? "discordant-dense" : nullptr;
            }));
        return c;
      });
}

}  // namespace waco::heuristics::detail
