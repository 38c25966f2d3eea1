#include "waco/learned/ranking_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::learned {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t s = 0; s < idx.size();) {
    std::size_t e = s + 1;
    while (e < idx.size() && v[idx[e]] == v[idx[s]]) ++e;
    const double rank = (static_cast<double>(s + 1) + static_cast<double>(e)) / 2.0;
    for (std::size_t q = s; q < e; ++q) r[idx[q]] = rank;
    s = e;
  }
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  WACO_ASSERT(a.size() == b.size(), "spearman: sizes differ");
  const std::size_t n = a.size();
  if (n < 2) return kNaN;
  const std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
  const double mean = (static_cast<double>(n) + 1.0) / 2.0;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa <= 0 || sbb <= 0) return kNaN;
  return sab / std::sqrt(saa * sbb);
}

double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b) {
  WACO_ASSERT(a.size() == b.size(), "kendall: sizes differ");
  const std::size_t n = a.size();
  std::int64_t concordant = 0, discordant = 0, ties_a = 0, ties_b = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0 && db == 0) continue;
      if (da == 0) ++ties_a;
      else if (db == 0) ++ties_b;
      else if ((da > 0) == (db > 0)) ++concordant;
      else ++discordant;
    }
  const double n1 = static_cast<double>(concordant + discordant + ties_a);
  const double n2 = static_cast<double>(concordant + discordant + ties_b);
  if (n1 <= 0 || n2 <= 0) return kNaN;
  return static_cast<double>(concordant - discordant) / std::sqrt(n1 * n2);
}

double PairCount::accuracy() const {
  return pairs > 0 ? static_cast<double>(agree2) / 2.0 / static_cast<double>(pairs) : kNaN;
}

bool known_faster(double ta, bool lb_a, double tb, bool lb_b, double min_gap) {
  if (lb_a) return false;  // a's time is only a lower bound: it cannot be known faster
  (void)lb_b;              // b exact or a lower bound: either way b >= tb
  return tb > ta * (1.0 + min_gap);
}

PairCount pairwise_agreement(const std::vector<double>& predicted,
                             const std::vector<double>& measured,
                             const std::vector<char>& lower_bound, double min_gap) {
  WACO_ASSERT(predicted.size() == measured.size() && measured.size() == lower_bound.size(),
              "pairwise_agreement: sizes differ");
  PairCount c;
  const std::size_t n = measured.size();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j || !known_faster(measured[i], lower_bound[i], measured[j], lower_bound[j], min_gap))
        continue;
      ++c.pairs;
      c.agree2 += predicted[i] < predicted[j] ? 2 : predicted[i] == predicted[j] ? 1 : 0;
    }
  return c;
}

double top_k_regret(const std::vector<double>& predicted, const std::vector<double>& measured,
                    const std::vector<char>& lower_bound, std::size_t k) {
  WACO_ASSERT(predicted.size() == measured.size() && measured.size() == lower_bound.size(),
              "top_k_regret: sizes differ");
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < measured.size(); ++i)
    if (!lower_bound[i]) best = std::min(best, measured[i]);
  if (!std::isfinite(best)) return kNaN;
  std::vector<std::size_t> idx(predicted.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::size_t a, std::size_t b) { return predicted[a] < predicted[b]; });
  double top = std::numeric_limits<double>::infinity();
  for (std::size_t q = 0; q < std::min(k, idx.size()); ++q)
    if (!lower_bound[idx[q]]) top = std::min(top, measured[idx[q]]);
  return std::isfinite(top) ? top / best - 1.0 : std::numeric_limits<double>::infinity();
}

double median_finite(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  return kernels::quantile(v, 0.5);
}

}  // namespace waco::learned
