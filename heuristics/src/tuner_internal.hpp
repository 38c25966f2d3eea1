// Private to heuristics/src/tuner*.cpp: what the parts of tuner.hpp share. The parts:
//   tuner.cpp          the measuring loop of a search (measure_or_reuse, run_candidates)
//   tuner_confirm.cpp  the side-by-side confirmation of its best (best_entries, confirm_best,
//                      confirm_ranked)
//   tuner_fresh.cpp    the fresh runs that decide (time_fresh, FreshTiming)
//   tuner_verdict.cpp  the statistics of a verdict: per-round and per-run ratios (round_ratios,
//                      run_medians), judge_gain, median_interval, marginal_gain_bound, the
//                      busy machine's warning (disturbance, disturbed_warning)
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "waco/heuristics/candidate.hpp"

namespace waco::heuristics::detail {

/// The candidates of one compare() call: one slot per distinct label.
struct Batch {
  std::vector<Candidate> list;
  std::unordered_map<std::string, std::size_t> slot;  // label -> index in list
  bool has(const Candidate& c) const { return slot.count(c.label()) != 0; }
  std::size_t add(const Candidate& c) {
    const auto [it, fresh] = slot.emplace(c.label(), list.size());
    if (fresh) list.push_back(c);
    return it->second;
  }
};

// tuner_verdict.cpp (each documented there).
std::vector<double> run_medians(const std::vector<double>& ratios, int runs);
std::vector<double> round_ratios(const Measurement& a, const Measurement& b);

}  // namespace waco::heuristics::detail
