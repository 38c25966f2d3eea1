// The economy of tuning: see economy.hpp.
#include "waco/heuristics/economy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "waco/kernels/error.hpp"

namespace waco::heuristics {

std::optional<double> break_even_calls(double tuning_s, double csr_s, double tuned_s) {
  if (!(tuning_s >= 0.0) || !(csr_s > 0.0) || !(tuned_s > 0.0) || tuned_s >= csr_s)
    return std::nullopt;
  return tuning_s / (csr_s - tuned_s);
}

nlohmann::json CallsBudget::to_json() const {
  return {{"budget_s", budget_s},         {"left_s", left_s},
          {"candidates", candidates},     {"confirm_top", confirm_top},
          {"search_s", search_s},         {"worth_it", worth_it},
          {"reason", reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(reason)}};
}

CallsBudget plan_calls_budget(const CallsBudgetInput& in) {
  WACO_ASSERT(in.calls >= 1 && in.share > 0.0 && in.share <= 1.0 && in.csr_s > 0.0 &&
                  in.per_candidate_s > 0.0 && in.per_confirmed_s >= 0.0 && in.confirm_top >= 1,
              "plan_calls_budget: calls >= 1, share in (0, 1], positive times, confirm_top >= 1");
  CallsBudget b;
  b.budget_s = in.share * static_cast<double>(in.calls) * in.csr_s;
  b.left_s = b.budget_s - in.spent_s;
  // The largest n with a confirmation of min(top, n) candidates that fits: try the widest
  // confirmation first, narrowing it while it crowds out the candidates it would confirm.
  for (int top = in.confirm_top; top >= 1; --top) {
    const double confirm_s = (top + 2) * in.per_confirmed_s;
    const double search_s = b.left_s - confirm_s;
    const double n = search_s > 0.0 ? std::floor(search_s / in.per_candidate_s) : 0.0;
    if (n >= top || top == 1) {
      b.candidates = static_cast<std::int64_t>(std::min(n, 1e15));
      b.confirm_top = static_cast<int>(std::min<double>(top, std::max(n, 0.0)));
      b.search_s = std::max(0.0, search_s);
      break;
    }
  }
  b.worth_it = b.candidates >= 1;
  if (!b.worth_it) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "tuning cannot pay for itself within %lld calls: %.0f%% of their csr time is "
                  "%.3g s, %.3g s of it already spent, and measuring one candidate with its "
                  "side-by-side check takes about %.3g s",
                  static_cast<long long>(in.calls), in.share * 100.0, b.budget_s, in.spent_s,
                  in.per_candidate_s + 3 * in.per_confirmed_s);
    b.reason = buf;
    b.confirm_top = 0;
  }
  return b;
}

}  // namespace waco::heuristics
