// tune --search exhaustive: every admissible schedule in space order, up to --budget.
#include "waco/tune/searcher.hpp"
#include "waco/kernels/error.hpp"

namespace waco::tuning {

namespace {
/// Largest admissible set measured exhaustively without an explicit --budget.
constexpr std::uint64_t kExhaustiveLimit = 20000;
}  // namespace

SearchChoice search_exhaustive(const SearchRequest& r) {
  if (r.budget == 0 && r.budget_seconds <= 0 && r.admissible > kExhaustiveLimit)
    throw kernels::Error("the admissible set has " + std::to_string(r.admissible) +
                             " schedules, too many to measure all without a budget",
                         "add --budget N or --budget-seconds S, or trim more with --passes");
  const std::uint64_t cap = r.budget > 0 ? r.budget : r.admissible;
  SearchChoice c;
  r.space->for_each([&](const codegen::SuperSchedule& s) {
    c.schedules.push_back(s);
    return c.schedules.size() < cap;
  });
  return c;
}

}  // namespace waco::tuning
