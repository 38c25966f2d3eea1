// The statistics of a verdict (see tuner.hpp): per-round and per-run ratios, the decision rule
// (judge_gain) and its intervals (median_interval, marginal_gain_bound), and the busy machine's
// warning on a side-by-side run (disturbance, disturbed_warning).
#include "waco/heuristics/tuner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tuner_internal.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

namespace detail {

/// Each run's median of per-round ratios appended run by run (`runs` runs of equal round
/// counts); empty when they cannot be split so.
std::vector<double> run_medians(const std::vector<double>& ratios, int runs) {
  const std::size_t k = static_cast<std::size_t>(runs);
  if (ratios.empty() || k == 0 || ratios.size() % k != 0) return {};
  const std::size_t per = ratios.size() / k;
  std::vector<double> medians;
  for (std::size_t r = 0; r < k; ++r)
    medians.push_back(kernels::median({ratios.begin() + static_cast<std::ptrdiff_t>(r * per),
                                       ratios.begin() + static_cast<std::ptrdiff_t>((r + 1) * per)}));
  return medians;
}

/// The per-round ratios a/b of two measurements timed in the same rounds (pairs of the rounds'
/// times); empty when their round counts differ or a round of b is not positive: they are then
/// compared by the ratio of their medians.
std::vector<double> round_ratios(const Measurement& a, const Measurement& b) {
  if (a.seconds.size() != b.seconds.size()) return {};
  std::vector<double> ratios;
  ratios.reserve(a.seconds.size());
  for (std::size_t k = 0; k < a.seconds.size(); ++k) {
    if (b.seconds[k] <= 0) return {};
    ratios.push_back(a.seconds[k] / b.seconds[k]);
  }
  return ratios;
}

}  // namespace detail

using detail::round_ratios;
using detail::run_medians;

double marginal_gain_bound(const std::vector<double>& run_ratio_medians,
                           const std::vector<double>& noise_medians) {
  const std::size_t k = run_ratio_medians.size();
  if (k < 2) return std::numeric_limits<double>::infinity();
  // The logarithms' mean and their squared deviations from it.
  const auto squares = [](const std::vector<double>& m, double& mean) {
    mean = 0.0;
    for (const double x : m) mean += std::log(x);
    mean /= static_cast<double>(m.size());
    double ss = 0.0;
    for (const double x : m) ss += (std::log(x) - mean) * (std::log(x) - mean);
    return ss;
  };
  double mean = 0.0, noise_mean = 0.0;
  double ss = squares(run_ratio_medians, mean);
  std::size_t df = k - 1;
  if (noise_medians.size() >= 2) {
    ss += squares(noise_medians, noise_mean);
    df += noise_medians.size() - 1;
  }
  const double sd = std::sqrt(ss / static_cast<double>(df));
  // Student's t, one-sided 95%, by degrees of freedom; beyond the table the normal quantile
  // with its first Cornish-Fisher term (within 0.5% of the table's last entries).
  static constexpr double kT95[] = {6.314, 2.920, 2.353, 2.132, 2.015,
                                    1.943, 1.895, 1.860, 1.833, 1.812};
  const double t = df <= 10 ? kT95[df - 1]
                            : 1.645 * (1.0 + (1.0 + 1.645 * 1.645) / (4.0 * static_cast<double>(df)));
  return std::exp(mean + t * sd / std::sqrt(static_cast<double>(k)));
}

std::string disturbed_warning(const Confirmation& c) {
  std::vector<const Measurement*> all;
  for (const ConfirmEntry& e : c.ranking) all.push_back(&e.measurement);
  for (const Measurement& m : c.references) all.push_back(&m);
  return disturbed_warning(all);
}

Disturbance disturbance(const std::vector<const Measurement*>& ms) {
  Disturbance d;
  for (const Measurement* m : ms) {
    if (m->status != MeasureStatus::Ok) continue;
    d.runs += static_cast<std::int64_t>(m->seconds.size());
    if (!m->counters.is_object()) continue;
    d.retaken += m->counters.value("retaken", std::int64_t{0});
    d.kept += m->counters.value("disturbed_kept", std::int64_t{0});
  }
  return d;
}

std::string disturbed_warning(const std::vector<const Measurement*>& ms) {
  const Disturbance d = disturbance(ms);
  if (d.runs == 0 || (d.kept == 0 && d.retaken * 10 < d.runs)) return {};
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "the machine is busy: other processes disturbed %lld timed runs of the side-by-side "
                "measurement (%lld taken again; %lld of the %lld kept runs were disturbed): "
                "multi-threaded timings include waits for descheduled threads; compare only "
                "side-by-side ratios, or use fewer --threads",
                static_cast<long long>(d.retaken + d.kept), static_cast<long long>(d.retaken),
                static_cast<long long>(d.kept), static_cast<long long>(d.runs));
  return buf;
}

std::pair<double, double> median_interval(std::vector<double> values, double level) {
  WACO_ASSERT(!values.empty() && level > 0 && level < 1, "median_interval needs values and 0 < level < 1");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  // The largest l with P(Binomial(n, 1/2) <= l - 1) <= alpha / 2: then x_(l) <= median <=
  // x_(n+1-l) holds with probability at least `level` for any continuous distribution.
  const double alpha_half = (1 - level) / 2;
  const double dn = static_cast<double>(n);
  double tail = 0.0;
  std::size_t l = 0;
  for (std::size_t j = 0; j < n / 2; ++j) {  // after this step tail = P(B <= j)
    const double dj = static_cast<double>(j);  // P(B = j), in logs: no underflow for large n
    tail += std::exp(std::lgamma(dn + 1) - std::lgamma(dj + 1) - std::lgamma(dn - dj + 1) -
                     dn * std::log(2.0));
    if (tail > alpha_half) break;
    l = j + 1;
  }
  if (l == 0) return {values.front(), values.back()};
  return {values[l - 1], values[n - l]};
}

Verdict judge_gain(const Measurement& winner, const Measurement& reference,
                   const DecisionRule& rule, int runs) {
  WACO_ASSERT(winner.status == MeasureStatus::Ok && reference.status == MeasureStatus::Ok,
              "judge_gain needs two verified measurements");
  WACO_ASSERT(runs >= 1, "judge_gain needs runs >= 1");
  Verdict v;
  v.min_gain = rule.min_gain;
  v.level = rule.level;
  std::vector<double> ratios = round_ratios(winner, reference);
  if (ratios.empty()) {
    v.ratio_median = v.ratio_q25 = v.ratio_q75 = winner.median_s / reference.median_s;
    v.ratio_lo = v.ratio_hi = v.ratio_median;
  } else {
    const std::size_t n = ratios.size();
    if (runs > 1) {
      v.run_ratio_medians = run_medians(ratios, runs);
      if (!v.run_ratio_medians.empty()) v.runs = runs;
    }
    const auto [lo, hi] = median_interval(ratios, rule.level);
    std::sort(ratios.begin(), ratios.end());
    v.rounds = static_cast<int>(n);
    v.ratio_median = kernels::quantile(ratios, 0.5);
    v.ratio_q25 = kernels::quantile(ratios, 0.25);
    v.ratio_q75 = kernels::quantile(ratios, 0.75);
    v.spread = (v.ratio_q75 - v.ratio_q25) / 2;
    v.ratio_lo = lo;
    v.ratio_hi = hi;
    for (const double m : v.run_ratio_medians) {
      v.ratio_lo = std::min(v.ratio_lo, m);
      v.ratio_hi = std::max(v.ratio_hi, m);
    }
  }
  // The speedup claimed is the paired one (1 / the median ratio), the point its interval is
  // about: the ratio of the medians can fall outside it when the machine drifts in the rounds.
  v.speedup = 1.0 / v.ratio_median;
  v.speedup_lo = 1.0 / v.ratio_hi;
  v.speedup_hi = 1.0 / v.ratio_lo;
  // Worth reporting in every run, not only pooled: one process can favour a kernel by a few
  // percent for its whole life (A/A runs on the development VM: a run's median ratio of two
  // copies of one kernel has a standard deviation of 1.4-1.6%), and only the runs tell it.
  double worst = v.ratio_median;
  for (const double m : v.run_ratio_medians) worst = std::max(worst, m);
  v.gain = v.rounds > 0 && v.ratio_hi < 1.0 && worst <= 1.0 - rule.min_gain;
  return v;
}

nlohmann::json Verdict::to_json() const {
  return {{"gain", gain},
          {"speedup", speedup},
          {"speedup_lo", speedup_lo},
          {"speedup_hi", speedup_hi},
          {"ratio_median", ratio_median},
          {"ratio_lo", ratio_lo},
          {"ratio_hi", ratio_hi},
          {"ratio_q25", ratio_q25},
          {"ratio_q75", ratio_q75},
          {"spread", spread},
          {"rounds", rounds},
          {"runs", runs},
          {"run_ratio_medians", run_ratio_medians},
          {"min_gain", min_gain},
          {"level", level}};
}

}  // namespace waco::heuristics
