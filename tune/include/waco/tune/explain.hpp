// tune --explain: why the winner won. For the winner and the runner-up of the side-by-side
// confirmation: the rank the search gave it (for model and anns searches, the cost model's
// rank), its search and side-by-side times, its speedup over csr, and the software counts of its
// runs; the signature facts that shaped the admissible set (the trimming passes' notes: the
// data-movement model's tiles, register tiles) and what the search reported of itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/tuner.hpp"

namespace waco::tuning {

struct ExplainInput {
  std::string search;                                  ///< the search's name
  const std::vector<heuristics::Candidate>* candidates = nullptr;  ///< in the search's order
  const heuristics::TuneResult* result = nullptr;
  const heuristics::Confirmation* confirmation = nullptr;  ///< null without a confirmation
  std::optional<double> csr_side_by_side_s;           ///< the csr schedule in the same rounds
  nlohmann::json space;                                ///< tune's "space" block (passes, counts)
  nlohmann::json search_info;
};

/// The explanation as JSON: {"winner", "runner_up" (null when there is none), "facts" (pass name
/// -> note, for passes with a note), "admissible", "legal", "search"}.
nlohmann::json explain_tune(const ExplainInput& in);

}  // namespace waco::tuning
