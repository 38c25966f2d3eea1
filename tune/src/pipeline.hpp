// Private to tune/src: what the steps of one tune share (pipeline.cpp runs them, choice.cpp
// chooses the candidates, selection.cpp measures them, decide.cpp decides, report.cpp writes
// the report).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/heuristics/diagonal.hpp"
#include "waco/heuristics/economy.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/heuristics/runner.hpp"
#include "waco/heuristics/tuner.hpp"
#include "waco/tune/calibration.hpp"
#include "waco/tune/searcher.hpp"
#include "waco/tune/tune.hpp"

namespace waco::tuning::detail {

class MemoryRecord;

using namespace waco::kernels;
using namespace waco::heuristics;

/// Step 4 of tune: the candidates to measure, from a list (--schedules) or a search of the
/// admissible set, with the space's statistics and the search's own report.
struct CandidateChoice {
  std::vector<Candidate> candidates;
  nlohmann::json space = nullptr;        ///< tune --json's "space" (null for a list)
  nlohmann::json search_info = nullptr;  ///< the search's report
  std::string search;                    ///< the search's name, or "list"
  /// The diagonal-storage pass's decision (a space search whose pipeline names it): run() adds
  /// the dia nominee after the search's when admitted.
  heuristics::DiaAdmission dia;
};

/// What the steps of one tune run share.
struct TuneRun {
  const TuneRequest& o;
  TuneObserver& obs;
  KernelKind kind;
  const Problem& p;
  Runner& measurer;
  ResultsDb& db;
  MeasurementKey key;
  std::string shortcut;  ///< the references' name: csr, or csf for tensors
  std::string search;    ///< the search's name, or "list"
  bool side_by_side;     ///< a model search: its nominees are measured side by side at once
  std::string db_path;   ///< the results database (--db or the default)
  MemoryRecord* memory = nullptr;  ///< the report's memory record (stages of measuring)
};

/// Steps 6-7 of tune: what was measured, what the side-by-side run selected, and the fresh runs
/// that decide on it.
struct Measured {
  TuneResult result;
  std::optional<Confirmation> confirmation;
  std::optional<FreshTiming> fresh;
  /// The selection in heats (plan_heats), when the nominees' formats did not fit in one
  /// side-by-side child: each heat's nominees with their ratio to csr, the finalists (report
  /// "confirm"."heats"); null when they went side by side at once.
  nlohmann::json heats = nullptr;
};

/// What tune decided from the search and the side-by-side run.
struct Decision {
  bool confirmed = false;
  const TuneEntry* search_best = nullptr;  ///< the fastest by the search's own timings
  const ConfirmEntry* winner = nullptr;    ///< the side-by-side winner
  const TuneEntry* best = nullptr;         ///< the result (a csr reference without a gain)
  const Measurement* best_side = nullptr;  ///< the result's side-by-side timing
  std::optional<Measurement> confirm_csr;  ///< the references' side-by-side timings
  std::optional<Measurement> confirm_base;
  std::string verdict = "unconfirmed";
  std::optional<Verdict> judged;
  std::string verdict_reference;
  bool baseline_reference = false;  ///< the faster csr reference is the baseline (confirm_base)
  bool fresh = false;                      ///< decided on the fresh runs (else the selection's)
  std::optional<Verdict> references_judged;  ///< the csr schedule against the csr baseline
};

/// The verdict: the selection's winner against the faster csr reference, judged by `rule` on the
/// fresh runs' rounds when there are some (m.fresh), else on the selection run's (then only a
/// no-gain is final: measure_and_confirm times a gain again in fresh runs before it counts).
/// With several fresh leaders, the fastest over the fresh rounds is judged. Without a gain the
/// faster csr reference is the result ("no gain over csr"): the hand-written csr (csf) baseline
/// when it ran faster side by side than the csr (csf) schedule (a plan serves it through
/// codegen::bind_baseline), else the schedule; so too when a gain was measured on a busy
/// machine ("undecided": the rule refuses to decide). The csr schedule when --expected-calls says
/// tuning does not pay, and when no candidate completed its timing.
Decision decide(const Measured& m, const TuneEntry& csr_schedule, const TuneEntry& csr_baseline,
                const std::string& shortcut, bool not_worth_it, const DecisionRule& rule);

/// Timings that moved a lot between the search and the side-by-side run mean a loaded or
/// unstable machine: the warning says so (to the observer too), so that nobody reads the
/// search's own timings as speedups. Empty when they agree.
std::string noise_warning(const Decision& d, const TuneEntry& csr_schedule,
                          const std::string& shortcut, TuneObserver& obs);

/// Which candidates, at most `wanted`, fit in `budget` bytes of one side-by-side child beside
/// the two csr references (each with a format of `format_bytes` and an output of
/// `output_bytes`): their positions, in list order. A candidate adds its output unless the
/// output is shared, and its format unless formats are shared and the csr schedule `held` or a
/// chosen candidate stores the same (codegen::StorageCache::key). One that does not fit is
/// passed over, not the end: a later one storing a format already held costs only its output.
/// Positions past the list (wanted > candidates.size()) stand for unknown candidates, a format
/// each. At least one: position 0.
std::vector<std::size_t> candidates_that_fit(const std::vector<Candidate>& candidates, int wanted,
                                             double budget, double format_bytes,
                                             double output_bytes, const SharedData& shared,
                                             const codegen::SuperSchedule* held = nullptr);

/// Heats: the first `wanted` candidates split into side-by-side children that each fit in
/// `budget` (as candidates_that_fit counts: the references with their own format and output in
/// each). Candidates storing one format (shared formats) go to the same heat, which holds it
/// once; the formats are placed in the order the list first names them, a heat taking the next
/// while it fits (a format that fits no heat alone goes alone). Positions in list order within
/// each heat. One heat holding the first `wanted` when they all fit.
std::vector<std::vector<std::size_t>> plan_heats(const std::vector<Candidate>& candidates,
                                                 int wanted, double budget, double format_bytes,
                                                 double output_bytes, const SharedData& shared,
                                                 const codegen::SuperSchedule* held = nullptr);

/// `p` needs its sparse operand only; `dense` is the size tuned for. With `among`, the search
/// ranks the schedules of that short list the space admits (admitted_variants) instead of the
/// whole admissible set: the passes add their constraints without counting what they remove.
/// `diagonals`: the matrix's diagonals when the caller counted them (SpaceOptions::diagonals).
CandidateChoice choose_candidates(const TuneRequest& o, KernelKind kind, int threads, int dense,
                                  const Problem& p, const Pipeline& pipeline, const Searcher& searcher,
                                  const decltype(SearchRequest::measure)& measure,
                                  TuneObserver& obs,
                                  const std::vector<codegen::SuperSchedule>* among = nullptr,
                                  std::int64_t diagonals = -1);

/// Step 5b of tune, --expected-calls: what the caller's calls can pay for, from the csr time
/// just measured. Not worth it: no candidate and no confirmation are left (csr is the result).
/// Otherwise the candidates, the search's time and the side-by-side stage are cut to the budget.
std::optional<CallsBudget> apply_calls_budget(TuneRequest& o, TuneObserver& obs, std::vector<Candidate>& candidates,
                                              TuneOptions& to, const Measurement& cm,
                                              double spent_s);

/// Steps 6-7 of tune: the candidates measured (side by side at once for a model search, else one
/// by one, then the best again side by side), and a gain timed again in fresh runs.
Measured measure_and_confirm(const TuneRun& t, const std::vector<Candidate>& candidates,
                             TuneOptions& to, TuneEntry& csr_schedule, TuneEntry& csr_baseline,
                             bool references_first, bool not_worth_it,
                             std::optional<double> csr_s, std::string& busy);

/// The model a ranking search of `o` uses (calibration.hpp), written into o.model so that every
/// search loads that one; a calibration that cannot be used is a warning.
ModelChoice resolve_model(TuneRequest& o, TuneObserver& obs);

/// The parts of tune's report that steps before the report computed.
struct ReportInput {
  const MatrixRecord* rec = nullptr;
  int threads = 0;
  const CandidateChoice* choice = nullptr;
  const Measured* measured = nullptr;
  const Decision* decision = nullptr;
  const TuneEntry* csr_schedule = nullptr;
  const TuneEntry* csr_baseline = nullptr;
  std::optional<CallsBudget> calls_budget;
  std::string busy;
  /// kernels::core_round_trip_ns() before the references and after the decision (-1: not
  /// measured: a runner that does not time this machine, or one CPU).
  double round_trip_before_ns = -1.0, round_trip_after_ns = -1.0;
  nlohmann::json cache = nullptr;
  nlohmann::json context = nullptr;
  bool model_alone = false;
  double t_start = 0.0;
};

/// Step 8 of tune: the report, one JSON object (tune --json prints it; the text is read off it).
nlohmann::json tune_report(const TuneRun& t, const ReportInput& in);

/// The cache the tile model assumes (the tile-window pass), with the source of its size, so
/// that a run can be reproduced from its output; the reason instead where it cannot be known.
nlohmann::json tile_cache_json(const PassParams& params, int threads);

}  // namespace waco::tuning::detail
