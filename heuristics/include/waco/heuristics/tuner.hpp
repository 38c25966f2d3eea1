// The measuring loop of a search (issue 5, "Search and the results database"): measure a list of
// candidates one at a time in isolation (Measurer), record each result in the results database
// as it comes (one transaction per candidate), and reuse what the database already holds, so an
// interrupted search (Ctrl-C, kill, a crash of the machine) resumes without repeating or losing
// work. Which candidates to try (exhaustive, random, a list from a file) is the caller's choice;
// this file only decides how they are measured and recorded.
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/results_db.hpp"

namespace waco::heuristics {

/// Where a search stands, given to the progress callback after every candidate.
struct TuneProgress {
  std::int64_t done = 0;      ///< candidates considered so far (measured or reused)
  std::int64_t total = 0;     ///< candidates in the list
  std::int64_t measured = 0;  ///< of done, measured in this run
  std::int64_t reused = 0;    ///< of done, taken from the database
  double elapsed_s = 0.0;
  double rate = 0.0;          ///< candidates measured per second in this run (0 before the first)
  double eta_s = -1.0;        ///< estimated seconds left; -1 when unknown
  std::optional<double> best_median_s;  ///< best verified median so far
  const Candidate* last = nullptr;
  const Measurement* last_measurement = nullptr;
};

struct TuneOptions {
  /// Stop starting new measurements after this many seconds (<= 0: no limit). Reused results
  /// cost nothing and are always taken.
  double budget_seconds = 0.0;
  /// Measure again candidates whose stored status is not ok (e.g. after raising a timeout).
  bool retry_failed = false;
  /// Called after every candidate; may be empty.
  std::function<void(const TuneProgress&)> progress;
  /// When set and non-zero (e.g. by a SIGINT handler), stop before the next candidate.
  const volatile std::sig_atomic_t* stop = nullptr;
  /// The context block stored with every new measurement.
  nlohmann::json context = nlohmann::json::object();
};

struct TuneEntry {
  Candidate candidate;
  Measurement measurement;
  bool reused = false;  ///< taken from the database, not measured now
};

struct TuneResult {
  std::vector<TuneEntry> entries;  ///< the candidates considered, in list order
  std::int64_t measured = 0;
  std::int64_t reused = 0;
  std::map<MeasureStatus, std::int64_t> status_counts;  ///< over entries
  std::optional<std::size_t> best;  ///< entry with the smallest verified median
  bool complete = true;             ///< false when stopped by budget_seconds or `stop`
  std::string stopped_by;           ///< "budget-seconds", "interrupted" or ""
  double seconds = 0.0;             ///< wall time of this call
};

/// Gets the result of one candidate: from the database when it holds one for (key, candidate,
/// effective threads) and it is ok or retry_failed is false; otherwise measures it and records it
/// in its own transaction.
TuneEntry measure_or_reuse(ResultsDb& db, const MeasurementKey& key, Measurer& measurer,
                           const Candidate& c, const TuneOptions& opts);

/// Runs measure_or_reuse over the candidates in order (see TuneOptions for stopping), reporting
/// progress. Duplicated candidates are measured once. Preconditions: key.repeats ==
/// measurer.options().repeats and key's matrix is recorded in db.
TuneResult run_candidates(ResultsDb& db, const MeasurementKey& key, Measurer& measurer,
                          const std::vector<Candidate>& candidates, const TuneOptions& opts);

/// The confirmation stage of a search: the best candidates by their search timings, measured
/// again side by side (Measurer::compare) with reference candidates, to pick the winner from
/// timings of one moment. Separate measurements on a shared machine drift by up to 1.5x, which
/// is more than the gap between the top candidates, so the search's own order only nominates.
struct ConfirmOptions {
  int top = 10;     ///< best verified candidates of the search to measure again (>= 1)
  int rounds = 20;  ///< timed interleaved rounds (>= 1)
};

struct ConfirmEntry {
  std::size_t entry = 0;        ///< index into TuneResult::entries
  std::size_t search_rank = 0;  ///< 1 = the search's best
  Measurement measurement;      ///< the side-by-side measurement
};

struct Confirmation {
  std::vector<ConfirmEntry> ranking;     ///< the nominated candidates, fastest side by side first
                                         ///< (failed ones last, in search order)
  std::vector<Measurement> references;   ///< one per reference candidate, in order
  std::optional<std::size_t> best;       ///< index into ranking: ranking[0] when it is ok
  int rounds = 0;
  double seconds = 0.0;                  ///< wall time of the stage
};

/// Nominates the opts.top verified entries of r with the smallest search medians and measures
/// them side by side with `references` (e.g. the csr schedule and baseline) in one call; a
/// reference that is also nominated is measured once. Nothing is stored in the database: these
/// timings compare candidates of one run, they are not repeatable values of one candidate.
Confirmation confirm_best(Measurer& measurer, const TuneResult& r,
                          const std::vector<Candidate>& references, const ConfirmOptions& opts);

}  // namespace waco::heuristics
