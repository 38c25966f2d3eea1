// The economy of tuning (issue 16, "library"): after how many calls a tuned kernel pays back the
// time it took to find it, and how much searching a caller who expects N calls can afford.
// Pure arithmetic on times measured elsewhere, so that it can be tested with made-up timings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace waco::heuristics {

/// Calls of the tuned kernel instead of csr after which tuning (search, conversion, compilation:
/// `tuning_s`) is paid back: tuning_s / (csr_s - tuned_s). None when the tuned kernel is not
/// faster per call (it never pays back) or a time is not positive.
std::optional<double> break_even_calls(double tuning_s, double csr_s, double tuned_s);

/// What a caller expecting `calls` calls can spend: `share` of the csr time of those calls.
struct CallsBudgetInput {
  std::int64_t calls = 0;        ///< expected calls of the kernel (>= 1)
  double share = 0.1;            ///< of calls x csr_s that tuning may take, in (0, 1]
  double csr_s = 0.0;            ///< one csr call, measured
  double spent_s = 0.0;          ///< tuning time already spent (reading, choice, csr measured)
  double per_candidate_s = 0.0;  ///< estimated cost of measuring one candidate in the search
  double per_confirmed_s = 0.0;  ///< estimated cost of one candidate in the side-by-side stage
  int confirm_top = 10;          ///< most candidates the side-by-side stage would take (>= 1)
};

struct CallsBudget {
  double budget_s = 0.0;      ///< share x calls x csr_s
  double left_s = 0.0;        ///< budget_s - spent_s (may be negative)
  std::int64_t candidates = 0;  ///< candidates to measure in the search (0: not worth it)
  int confirm_top = 0;        ///< candidates to take to the side-by-side stage
  double search_s = 0.0;      ///< hard limit of the search stage (left_s minus the confirmation)
  bool worth_it = false;      ///< at least one candidate and its confirmation fit the budget
  std::string reason;         ///< why not, when not
  nlohmann::json to_json() const;
};

/// The search a budget affords: the most candidates n, with a side-by-side stage of
/// min(confirm_top, n) candidates plus the two csr references, such that
/// n x per_candidate_s + (top + 2) x per_confirmed_s <= left_s; not worth it when n < 1.
CallsBudget plan_calls_budget(const CallsBudgetInput& in);

}  // namespace waco::heuristics
