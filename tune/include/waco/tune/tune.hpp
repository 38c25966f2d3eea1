// The tune pipeline (waco-hybrid tune, waco::tune): for a sparse operand and a kernel, the
// decision cached for it, or the candidates a search chooses, measured side by side with the csr
// references, the winner decided on fresh runs, the report. tune/README.md gives the steps.
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/generated_kernel.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/heuristics/tuner.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/tune/observer.hpp"

namespace waco::tuning {

/// --abandon-factor: a candidate whose fastest run is this many times the best median so far is
/// abandoned (see the option's help and the closing measurement in README.md).
constexpr double kDefaultAbandonFactor = 3.0;

/// What to tune and how: `waco-hybrid tune`'s options, less the ones about printing.
struct TuneRequest {
  kernels::KernelKind kind = kernels::KernelKind::SpMV;
  std::string file;              ///< the operand's file, as reported ("" for one in memory)
  std::string search = "model";  ///< the hybrid: the model's nominees side by side
  std::string model;             ///< --model (empty: this machine's calibrated model, else the shipped one)
  /// Rank with this machine's calibrated model when `model` is empty and one is sound
  /// (calibration.hpp); false (--no-calibration) or WACO_NO_CALIBRATION: the shipped model.
  bool use_calibration = true;
  std::string index;             ///< --index (anns; empty: the user cache)
  bool check_recall = false;
  std::string schedules;         ///< --schedules FILE: a list instead of a search
  std::uint64_t budget = 0;
  /// The model's nominees (the model and exact anns searches): at most this many of one loop
  /// structure (split sizes, loop order, parallel loop; formats and chunks aside) before the
  /// next structures in the model's order, the rest of the budget filled in its order when
  /// fewer structures remain. 0: the model's order alone. Why 3: the model's 20 best were
  /// chunk and format variants of 3-6 structures (SpMV: 3), and where the model misjudged
  /// those the measurements could not rescue it; with 3, the hybrid's share of the oracle went
  /// from 0.83 to 0.94 on nine MTTKRP tensors and stayed within noise on SpMV (0.994 / 0.991)
  /// and SpMM J=64 (1.005 / 1.014; tune/README.md, "The model's nominees per loop structure").
  /// Adaptive plans do not apply it: their nominees share kernels by their own rule.
  int per_structure = 3;
  double budget_seconds = 0.0;
  std::string passes = "all";
  /// The results database. Empty: none for a library call (`db_default`), the user's default
  /// database for the CLI.
  std::string db;
  bool db_default = true;        ///< an empty `db` means the user's default database
  std::uint64_t seed = 1;
  int dense = 0;                 ///< J or K (0: the kernel's default)
  /// The value type of the kernels (the operand's values, the dense operands, the output).
  kernels::Dtype dtype = kernels::Dtype::F32;
  int threads = 0;               ///< 0: every available core
  int repeat = 10;
  int warmup = 2;
  int confirm = 10;
  bool confirm_given = false;  ///< --confirm was given (a model search then confirms that many)
  int confirm_rounds = 20;
  /// The decision run (FreshOptions): a gain is decided on --decide-runs fresh side-by-side
  /// children of --decide-rounds rounds that time the selection's best --decide-leaders.
  /// Three leaders: the selection's best of 20 is often a dynamic-chunk kernel with a heavy tail
  /// whose lucky median does not hold, while a steady kernel just behind it does (ca-HepTh SpMV,
  /// 5 tunes each: with one leader 3 of 5 returned a 1.15x kernel, with three all 5 the 1.1-2.1x
  /// static one; the exhaustive search returned no gain there). Their fastest is judged at a
  /// level raised for their number (decide.cpp).
  int decide_runs = 3;
  int decide_rounds = 20;
  int decide_leaders = 3;
  /// A leader whose per-round ratio to the fastest leader has its interval wholly above this
  /// after a fresh run is not timed in the later runs (FreshOptions::drop_ratio); <= 1: never.
  double decide_drop = 1.05;
  /// The fresh runs stop early on a clear gain: once the fastest leader's per-round ratio to
  /// each reference is at most this (its 99% interval, pooled over the runs made) and the
  /// selection run put it at most this too (FreshOptions::clear_ratio); <= 0: every run.
  double decide_clear = 0.5;
  /// A marginal gain gets this many more fresh runs (FreshOptions::extra_runs: every run's
  /// median ratio at most 1 - min_gain, but the runs do not bound it there); 0: never.
  int decide_extra_runs = 2;
  /// Side-by-side runs time each candidate of a small problem in this many memory layouts,
  /// round by round (heuristics::MeasureOptions::layouts says why); 1: one, as before.
  int layouts = 4;
  /// Successive halving of the selection's rounds (heuristics::CompareOptions::halving_keep): at
  /// a quarter, a half and three quarters of --confirm-rounds the slower half of the nominees
  /// (by their per-round ratios to the csr schedule) stop being timed, at least this many
  /// running every round; 0: every nominee runs every round. The selection only picks the
  /// leaders that the fresh runs decide on.
  int halving_keep = 6;
  bool decide_always = false;  ///< fresh runs even without a selection gain
  /// --decide-together: all leaders in one fresh child per run beside the references (before
  /// session 58). Default: each leader in children of its own beside the references
  /// (FreshOptions::apart says why and what it costs).
  bool decide_together = false;
  /// The memory one side-by-side child may hold for the formats and outputs of its candidates
  /// and references (--side-by-side-memory; 0: a quarter of the machine's). Nominees whose
  /// formats do not fit in one child are measured in heats (several children, the references
  /// in each), and the best of each heat then side by side in one more; the fresh decision
  /// runs time as many leaders as fit.
  double side_by_side_bytes = 0.0;
  heuristics::DecisionRule rule;  ///< --min-gain, --verdict-level, --max-disturbed
  /// A model search's nominees measured one by one (racing), then the best --confirm side by
  /// side, as every other search; default: all of them side by side at once.
  bool measure_first = false;
  double timeout = 60.0;
  double compile_timeout = 300.0;
  double tolerance = kernels::kDefaultTolerance;
  double abandon_factor = kDefaultAbandonFactor;
  bool retry_failed = false;
  bool explain = false;          ///< the report's "explain" (winner, runner-up, why)
  std::string plan_cache;        ///< the tuning cache's folder (empty: the default folder)
  bool no_plan_cache = false;    ///< neither read nor write the tuning cache
  bool refresh = false;          ///< tune again, replacing the cached decision
  std::int64_t expected_calls = 0;
  /// nominate among a short list: the listed schedules' other run-time split sizes
  /// (kernel_variants) are ranked for operands of at least this many nonzeros. Asking the passes
  /// about them cost ~1.2 ms more a choice on the AMD EPYC VM (cage8: 0.5 -> 1.7 ms, 350 csr
  /// calls), which small matrices, whose csr calls take microseconds, cannot pay for, and where
  /// cache blocking matters least.
  std::int64_t shortlist_splits_min_nnz = 100000;
  double tuning_share = 0.1;
  codegen::GeneratedOptions generated;
  heuristics::PassParams params;
  /// "" measures on this machine; scripted:FILE makes timings up from a script
  /// (heuristics/scripted_runner.hpp; needs an explicit db and plan cache).
  std::string runner;
  /// Set (e.g. by a SIGINT handler) to stop before the next candidate: the report says
  /// "interrupted" and the results so far are in the database.
  const volatile std::sig_atomic_t* stop = nullptr;
  /// The library caller's request to stop at once (waco::Options::interrupt): polled between
  /// the steps and about every 0.1 s while candidates are measured (from the calling thread).
  /// When it returns true, the measuring processes are killed and run() throws
  /// kernels::Cancelled: the measurement in progress is not stored, no decision is cached.
  /// Empty: never polled (the CLI uses `stop`, which finishes a report).
  std::function<bool()> cancel;
  /// When the caller's work began (the CLI: before reading the file), for the report's time_s;
  /// 0: when run() starts.
  double started_at = 0.0;
  /// The report's memory record (report "memory"): whether the tuning process's peak may be
  /// started again at each stage (kernels::reset_peak_rss), so that each stage's own peak is
  /// reported. The CLI's process is the tune's; a library caller's is the application's, whose
  /// peak is left alone (its stages then report the peak since the process began).
  bool reset_peak_per_stage = false;
};

/// The sparse operand: a canonical matrix (SpMV, SpMM, SDDMM) or 3-D tensor (MTTKRP).
struct TuneOperand {
  const kernels::CooMatrix* matrix = nullptr;
  const kernels::CooTensor* tensor = nullptr;
  std::string fingerprint;  ///< its kernels::fingerprint_hex when the caller has it (else computed)
  /// SpMV: the matrix's diagonals when the caller counted them (kernels::dia_offsets), else -1.
  std::int64_t diagonals = -1;
};

/// What a tune gives: the report (`waco-hybrid tune --json`, one JSON object), and the decided
/// schedule read off it.
struct TuneOutcome {
  nlohmann::json report;
  /// The result's schedule: the winner, the csr schedule without a gain; none when nothing ran.
  std::optional<codegen::SuperSchedule> schedule;
  /// "" when the result is schedule's generated kernel; "csr" ("csf" for MTTKRP) when no schedule
  /// beat csr and the hand-written baseline ran faster than the csr schedule side by side: the
  /// result is that baseline (codegen::bind_baseline serves it), `schedule` the csr schedule.
  std::string implementation;
  std::string verdict;          ///< gain, no-gain, undecided, not-worth-it, no-reference, ...
  bool from_cache = false;      ///< the tuning cache held the decision
  bool interrupted = false;     ///< request.stop was set: the same call again resumes
  std::string kernel_source;    ///< the measured kernel's source file ("" when none)
};

/// The result's implementation a tune report names (its "implementation": "generated" or a
/// baseline's name, TuneOutcome::implementation): "" for a generated kernel and for reports
/// from before the field.
std::string implementation_of(const nlohmann::json& report);

/// Tunes `operand` for `request`. Throws kernels::Error for a request it cannot serve (an
/// unknown search, an unreadable list, a pipeline with no admissible schedule, an unusable
/// database), kernels::Cancelled when request.cancel asked to stop; every measurement failure
/// is in the report instead.
TuneOutcome run(const TuneOperand& operand, const TuneRequest& request, TuneObserver& observer);

/// The checks run() makes before any work, for a caller that wants them before reading its
/// operand: the search's name, the pipeline, the model's backend (TorchRequired when the model
/// needs LibTorch and this build has none; `check_model` false: not checked), a scripted
/// runner's database and cache.
void check_request(const TuneRequest& request, bool check_model = true);

/// The cost model's best schedules for an operand, measured nowhere: an adaptive plan's nominees.
struct Nomination {
  std::vector<codegen::SuperSchedule> schedules;  ///< best predicted first
  /// {"space": tune --json's "space", "search", "search_info", "model": the model ranked with
  /// (ModelChoice::to_json)}
  nlohmann::json info;
  double seconds = 0.0;  ///< the space, the passes and the scoring
};

/// The best `count` admissible schedules of `request`'s model search (its passes, model, threads
/// and dense size) for `operand`; `count` 0: the search's default (default_model_budget).
/// Throws kernels::Error as run() does for a request it cannot serve; the request's search must
/// rank with the model (ranks_with_model). With `among` (a short list, e.g.
/// codegen::shipped_schedules), only the variants of its schedules the admissible set holds are
/// ranked (none admitted: none): kernel_variants, the listed split sizes alone below
/// request.shortlist_splits_min_nnz nonzeros.
Nomination nominate(const TuneOperand& operand, const TuneRequest& request, std::size_t count,
                    TuneObserver& observer,
                    const std::vector<codegen::SuperSchedule>* among = nullptr);

/// The schedules one compiled kernel of `s` runs: `threads` threads, every chunk of the same
/// kind (static, or the dynamic chunks), and each split size from a quarter to four times s's
/// that `split_choices[v]` holds (the kernel takes them at run time: one kernel, one source, for
/// every size; without vary_splits, s's sizes alone). Not canonical; s's own among them.
std::vector<codegen::SuperSchedule> kernel_variants(const codegen::SuperSchedule& s, int threads,
                                                    const std::vector<std::vector<int>>& split_choices,
                                                    bool vary_splits = true);

/// Whether `search` (with no --schedules list) ranks with the cost model: such a tune needs the
/// model file (learned::CostModel::check_backend says whether this build can run it).
bool ranks_with_model(const TuneRequest& request);

}  // namespace waco::tuning
