// tune --search random: a uniform sample of the admissible set (--budget, default 100; with only
// --budget-seconds, a pool the time budget cuts short).
#include <algorithm>

#include "waco/tune/searcher.hpp"

namespace waco::tuning {

namespace {
/// Candidates drawn for a random search bounded only by --budget-seconds.
constexpr std::uint64_t kRandomPool = 100000;
constexpr std::uint64_t kDefaultSample = 100;
}  // namespace

SearchChoice search_random(const SearchRequest& r) {
  std::uint64_t n = r.budget;
  if (n == 0) n = r.budget_seconds > 0 ? std::min<std::uint64_t>(r.admissible, kRandomPool) : kDefaultSample;
  SearchChoice c;
  c.schedules = r.space->sample(n, r.seed);
  return c;
}

}  // namespace waco::tuning
