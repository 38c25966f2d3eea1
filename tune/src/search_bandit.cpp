// tune --search bandit: the search the 2020 thesis proposed (seed 003, section 2.6) instead of a
// learned model: a multi-armed bandit whose arms are the partition strategies (split patterns:
// which variables are split) of the admissible set, played by Thompson sampling. Every arm starts
// with the same prior over its log run time; each pull draws a value per arm from its posterior,
// plays the arm with the smallest draw (fastest expected), measures one of its not yet measured
// schedules, chosen uniformly, and updates the arm. So the measurements concentrate on the
// partition strategies that were fast so far, while strategies never tried keep a wide prior and
// get explored. It measures as it goes (SearchRequest::measure): --budget pulls (default 20),
// --budget-seconds bounds them too. The schedules it measured are returned fastest first; tune
// reuses their measurements and confirms the best side by side as for every search.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "waco/tune/searcher.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::tuning {

namespace {

constexpr std::uint64_t kDefaultPulls = 20;
/// Admissible sets up to this size are split into arms whole; larger ones from a uniform sample.
constexpr std::uint64_t kArmPool = 200000;
/// The prior's standard deviation in log run time (e.g. a factor of e^1.5 ~ 4.5 either way) and
/// the observation noise assumed per measurement.
constexpr double kPriorSd = 1.5;
constexpr double kNoiseSd = 0.3;

struct Arm {
  std::string pattern;                            ///< e.g. "i,k" split, or "none"
  std::vector<codegen::SuperSchedule> schedules;  ///< not yet measured, in a random order
  int pulls = 0;
  double sum = 0.0;  ///< of the observed log times
};

/// SplitMix64-based uniform doubles and normal draws (Box-Muller): reproducible everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return kernels::splitmix64(state_++); }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }

 private:
  std::uint64_t state_;
};

std::string pattern_of(const codegen::SuperSchedule& s) {
  const codegen::KernelSpec& spec = codegen::kernel_spec(s.kind);
  std::string p;
  for (std::size_t v = 0; v < spec.vars.size(); ++v)
    if (s.split[v] != 1) p += (p.empty() ? "" : ",") + std::string(1, spec.vars[v]);
  return p.empty() ? "none" : p;
}

}  // namespace

SearchChoice search_bandit(const SearchRequest& r) {
  if (!r.measure)
    throw kernels::Error("the bandit search measures as it goes, and this caller cannot measure",
                         "use it through waco-hybrid tune");
  const double t0 = kernels::now_seconds();
  const std::uint64_t pulls = r.budget > 0 ? r.budget : kDefaultPulls;
  Rng rng(r.seed);
  const std::vector<codegen::SuperSchedule> pool =
      r.admissible <= kArmPool ? r.space->materialize(kArmPool) : r.space->sample(kArmPool, r.seed);
  std::map<std::string, std::size_t> index;
  std::vector<Arm> arms;
  for (const codegen::SuperSchedule& s : pool) {
    const std::string p = pattern_of(s);
    auto [it, fresh] = index.emplace(p, arms.size());
    if (fresh) arms.push_back(Arm{p, {}, 0, 0.0});
    arms[it->second].schedules.push_back(s);
  }
  for (Arm& a : arms)  // a uniform order to draw from (Fisher-Yates)
    for (std::size_t i = a.schedules.size(); i > 1; --i)
      std::swap(a.schedules[i - 1], a.schedules[rng.next() % i]);

  std::vector<std::pair<double, codegen::SuperSchedule>> measured;
  double worst = 0.0;  // the slowest log time seen: a failed schedule counts one unit above it
  bool any = false;
  int failed = 0;
  std::string stopped_by;
  for (std::uint64_t pull = 0; pull < pulls; ++pull) {
    if (r.budget_seconds > 0 && kernels::now_seconds() - t0 > r.budget_seconds) {
      stopped_by = "budget-seconds";
      break;
    }
    // The prior's mean is the mean of everything observed so far (0 before the first).
    double total = 0.0;
    int n = 0;
    for (const Arm& a : arms) {
      total += a.sum;
      n += a.pulls;
    }
    const double prior_mean = n > 0 ? total / n : 0.0;
    std::optional<std::size_t> pick;
    double best_draw = 0.0;
    for (std::size_t i = 0; i < arms.size(); ++i) {
      const Arm& a = arms[i];
      if (a.schedules.empty()) continue;
      // Normal-normal posterior of the arm's mean log time.
      const double precision = 1.0 / (kPriorSd * kPriorSd) + a.pulls / (kNoiseSd * kNoiseSd);
      const double mean =
          (prior_mean / (kPriorSd * kPriorSd) + a.sum / (kNoiseSd * kNoiseSd)) / precision;
      const double draw = mean + rng.normal() / std::sqrt(precision);
      if (!pick || draw < best_draw) {
        pick = i;
        best_draw = draw;
      }
    }
    if (!pick) break;  // every admissible schedule measured
    Arm& arm = arms[*pick];
    const codegen::SuperSchedule s = arm.schedules.back();
    arm.schedules.pop_back();
    const std::optional<double> t = r.measure(s);
    double y = 0.0;
    if (t && *t > 0) {
      y = std::log(*t);
      worst = any ? std::max(worst, y) : y;
      any = true;
      measured.emplace_back(*t, s);
    } else {
      ++failed;
      y = (any ? worst : 0.0) + 1.0;
      measured.emplace_back(HUGE_VAL, s);
    }
    ++arm.pulls;
    arm.sum += y;
  }
  std::stable_sort(measured.begin(), measured.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  SearchChoice c;
  for (const auto& [t, s] : measured) c.schedules.push_back(s);
  nlohmann::json arms_json = nlohmann::json::array();
  for (const Arm& a : arms) {
    nlohmann::json j = {{"split", a.pattern}, {"pulls", a.pulls}};
    if (a.pulls > 0) j["mean_log_s"] = a.sum / a.pulls;
    arms_json.push_back(j);
  }
  c.info = {
      {"method", "thompson-sampling"},
      {"arms", arms_json},
      {"pool", pool.size()},
      {"pulls", measured.size()},
      {"failed", failed},
      {"stopped_by", stopped_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(stopped_by)},
      {"seconds", kernels::now_seconds() - t0}};
  r.observer->note(format("tune: bandit measured %zu schedules over %zu partition strategies",
                          measured.size(), arms.size()));
  return c;
}

}  // namespace waco::tuning
