// How well a predicted order of schedules matches the measured one (WACO section 5.2 reports
// Spearman's rho; Kendall's tau, pairwise accuracy and top-k regret say what a tuner gets out of
// the order). Torch-free; used by training (validation), `evaluate` and the reports.
//
// Conventions: `predicted` are model scores, lower = predicted faster; `measured` are seconds.
// A measured value may be a lower bound (a candidate abandoned by racing: at least that slow).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace waco::learned {

/// Ranks 1..n with ties given their average rank.
std::vector<double> average_ranks(const std::vector<double>& v);

/// Spearman's rank correlation (Pearson correlation of the average ranks). NaN when fewer than
/// two values or when either side is constant. Precondition: equal sizes.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

/// Kendall's tau-b (ties on either side handled). NaN when undefined. O(n^2): n is a group's
/// size (about 100).
double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b);

/// Pairs whose measured order is known: both exact, or one exact and faster than the other's
/// lower bound; and whose measured times differ by more than `min_gap` (relative: the slower is
/// more than (1 + min_gap) times the faster). `agree` counts those the prediction orders the
/// same way (a predicted tie counts half).
struct PairCount {
  std::int64_t agree2 = 0;  ///< twice the agreeing pairs (ties count 1)
  std::int64_t pairs = 0;
  double accuracy() const;  ///< agree2 / 2 / pairs; NaN without pairs
};
PairCount pairwise_agreement(const std::vector<double>& predicted,
                             const std::vector<double>& measured,
                             const std::vector<char>& lower_bound, double min_gap = 0.0);

/// Whether the measured order of candidates a and b is known (see PairCount) and a is faster.
bool known_faster(double ta, bool lb_a, double tb, bool lb_b, double min_gap);

/// Top-k regret: the best exact measured time among the k best-predicted candidates over the
/// best exact measured time of all, minus 1 (0 = the best was among them). +infinity when no
/// exact measurement is among the k; NaN when there is none at all.
double top_k_regret(const std::vector<double>& predicted, const std::vector<double>& measured,
                    const std::vector<char>& lower_bound, std::size_t k);

/// The median of the finite values (NaN when none).
double median_finite(std::vector<double> v);

}  // namespace waco::learned
