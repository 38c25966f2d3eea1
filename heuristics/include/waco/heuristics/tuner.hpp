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
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/heuristics/runner.hpp"
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
  /// Racing: a candidate is abandoned (MeasureStatus::Abandoned) once its fastest run is slower
  /// than race_factor times the best verified median so far (and race_reference_s, when set);
  /// 0 turns racing off. Abandoned results in the database are reused only while racing is on.
  double race_factor = 0.0;
  /// A median known before the search (the csr schedule's) that bounds the race from the first
  /// candidate on; <= 0 when none.
  double race_reference_s = 0.0;
  /// The baseline a candidate to abandon is first timed beside (RaceBound::check, e.g. "csr"),
  /// and its median measured before the search; empty or <= 0: no check.
  std::string race_check;
  double race_check_s = 0.0;
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
  /// Seconds the measuring children of abandoned candidates ran (measured in this run).
  double abandoned_s = 0.0;
  std::optional<std::size_t> best;  ///< entry with the smallest verified median
  bool complete = true;             ///< false when stopped by budget_seconds or `stop`
  std::string stopped_by;           ///< "budget-seconds", "interrupted" or ""
  double seconds = 0.0;             ///< wall time of this call
};

/// Gets the result of one candidate: from the database when it holds one for (key, candidate,
/// effective threads) and it is ok, or it failed and retry_failed is false, or it was abandoned
/// and racing is on (opts.race_factor > 0); otherwise measures it (racing with `race`) and
/// records it in its own transaction.
TuneEntry measure_or_reuse(ResultsDb& db, const MeasurementKey& key, Runner& measurer,
                           const Candidate& c, const TuneOptions& opts,
                           const RaceBound& race = {});

/// Runs measure_or_reuse over the candidates in order (see TuneOptions for stopping), reporting
/// progress. Duplicated candidates are measured once. Preconditions: key.repeats ==
/// measurer.options().repeats and key's matrix is recorded in db.
TuneResult run_candidates(ResultsDb& db, const MeasurementKey& key, Runner& measurer,
                          const std::vector<Candidate>& candidates, const TuneOptions& opts);

/// The confirmation stage of a search: the best candidates by their search timings, measured
/// again side by side (Measurer::compare) with reference candidates, to pick the winner from
/// timings of one moment. Separate measurements on a shared machine drift by up to 1.5x, which
/// is more than the gap between the top candidates, so the search's own order only nominates.
struct ConfirmOptions {
  int top = 10;     ///< best verified candidates of the search to measure again (>= 1)
  int rounds = 20;  ///< timed interleaved rounds (>= 1)
  /// When set, the fastest verified entry it accepts is nominated even outside the top (e.g. the
  /// csr-like schedule of the admissible set, so that the winner is never slower than it).
  std::function<bool(const Candidate&)> always;
  /// confirm_ranked: the positions in the ranked list to measure, in order, when not simply its
  /// first `top` (e.g. those whose formats fit in memory beside each other). A candidate's search
  /// rank stays its position + 1.
  std::vector<std::size_t> among;
  /// Successive halving of the rounds among the nominees (CompareOptions::halving_keep; the
  /// references are timed in every round): at least this many run every round; 0: all do.
  int halving_keep = 0;
};

struct ConfirmEntry {
  std::size_t entry = 0;        ///< index into TuneResult::entries
  std::size_t search_rank = 0;  ///< 1 = the search's best (by verified search medians)
  Measurement measurement;      ///< the side-by-side measurement
};

struct Confirmation {
  std::vector<ConfirmEntry> ranking;     ///< the nominated candidates, fastest side by side first
                                         ///< (failed ones last, in search order)
  std::vector<Measurement> references;   ///< one per reference candidate, in order
  std::optional<std::size_t> best;       ///< index into ranking: ranking[0] when it is ok
  int rounds = 0;                        ///< timed rounds of one side-by-side run
  double seconds = 0.0;                  ///< wall time of the stage
};

/// The entries confirm_best nominates: the opts.top verified entries of r with the smallest
/// search medians (equal medians in the search's order), and the fastest verified one that
/// opts.always accepts when it is not among them (one more); with their search ranks (1-based).
struct Nominated {
  std::vector<std::size_t> entries;  ///< indices into TuneResult::entries, fastest first
  std::vector<std::size_t> ranks;    ///< each one's search rank
};
Nominated best_entries(const TuneResult& r, const ConfirmOptions& opts);

/// Nominates the opts.top verified entries of r with the smallest search medians and measures
/// them side by side with `references` (e.g. the csr schedule and baseline) in one call; a
/// reference that is also nominated is measured once. Nothing is stored in the database: these
/// timings compare candidates of one run, they are not repeatable values of one candidate.
Confirmation confirm_best(Runner& measurer, const TuneResult& r,
                          const std::vector<Candidate>& references, const ConfirmOptions& opts);

/// A ranked list measured side by side (confirm_ranked): the search's result and its
/// confirmation in one.
struct RankedConfirmation {
  TuneResult result;          ///< the nominees in list order, each with its side-by-side measurement
  Confirmation confirmation;  ///< search_rank = the list's rank (1 = the ranker's best)
};

/// The side-by-side search of a ranked list (a cost model's best, best first): the first
/// opts.top candidates are measured side by side with `references` in one call
/// (Measurer::compare: prepared, verified, timed in opts.rounds interleaved rounds, verified
/// again), with no separate measurement of each first. A nominee whose first two timed runs are
/// above race_factor times the group's fastest is abandoned there (0: none); the references are
/// always timed. Like confirm_best, nothing is stored: these are timings of one moment.
/// opts.always is not used (every nominee is in the list already).
RankedConfirmation confirm_ranked(Runner& measurer, const std::vector<Candidate>& ranked,
                                  const std::vector<Candidate>& references,
                                  const ConfirmOptions& opts, double race_factor);

/// The decision run (issue 33, "true-verdicts"): the selection run (confirm_best,
/// confirm_ranked) only *chooses*; a gain is decided on rounds that played no part in choosing.
/// The selection's `leaders` fastest verified nominees and the references are timed side by side
/// again in `runs` fresh children (new processes: formats built, outputs allocated and threads
/// placed anew), `rounds` timed rounds each. Why: the best of 20 near-tied kernels, picked and
/// judged on the same rounds, looks 5-10% faster than it is (the winner's curse), and one
/// process's allocations can favour one kernel for its whole life; appending fresh rounds to the
/// chosen ones (the old --replicate) kept both biases.
struct FreshOptions {
  int leaders = 1;  ///< the selection's best N verified nominees (>= 1)
  int rounds = 20;  ///< timed interleaved rounds per run (>= 1)
  int runs = 3;     ///< fresh side-by-side children (>= 1)
  /// The decision rule's min_gain, to stop before `runs` once no leader can be judged a gain:
  /// when every verified leader, against every verified reference, has had a run whose median
  /// per-round ratio exceeded 1 - stop_min_gain, judge_gain's every-run condition fails
  /// whichever leader and reference the remaining runs would put forward (the verdict is
  /// no-gain whatever they time). < 0 (the default): every run is made.
  double stop_min_gain = -1.0;
  /// Leaders that lost clearly stop before `runs`: after each run but the last, a leader whose
  /// per-round ratios to the fastest leader (the smallest median over the runs so far), pooled
  /// over those runs, have their `drop_level` interval (median_interval) wholly above drop_ratio
  /// is not timed again (Abandoned, with the ratio in its reason), so that the later
  /// runs time only the leaders still in question beside the references. The verdict's
  /// Bonferroni count stays the leaders' number (decide): which leader is judged may be chosen on
  /// any of the rounds, the test's level covers each. <= 1 (the default): every leader runs
  /// every run.
  double drop_ratio = 0.0;
  double drop_level = 0.9;
  /// A clear gain stops before `runs`: after each run but the last, when the fastest leader
  /// (best()) has, against every verified reference timed beside it, per-round ratios pooled
  /// over the runs so far whose `clear_level` interval (median_interval) lies wholly at or below
  /// clear_ratio, and the selection run (the Confirmation: another process) timed that leader at
  /// or below clear_ratio of each of them too (the median of its per-round ratios), no more runs
  /// are made (`stopped` says so). What the later runs guard against, a kernel fast or a
  /// reference slow only in the process that timed it, moved a ratio by up to ~1.7x in the
  /// measurements of tune/README.md ("Dynamic chunks and the caches"); they would also refine
  /// which of near-tied leaders is the fastest. Needs the Confirmation's references in the order
  /// of time_fresh's. <= 0 (the default): every run is made.
  double clear_ratio = 0.0;
  double clear_level = 0.99;
  /// A marginal gain gets up to this many more runs, once: after the `runs` planned runs, when
  /// the fastest leader, against a verified reference, has every run's median per-round ratio
  /// at most 1 - stop_min_gain (it may still be judged a gain) but the runs' medians do not
  /// bound it there (the one-sided 95% Student-t bound of the mean of their logarithms lies
  /// above log(1 - stop_min_gain), the deviation pooled with the references' own ratio's over
  /// the same runs: marginal_gain_bound). Why: a process favours one kernel over
  /// another by its layout for its whole life, and on kernels of a few microseconds that
  /// favour is several percent (A/A tunes of SpMM n=64 on matrices of 233-438 nonzeros, Zen 4
  /// VM: the twin's run medians against the same loops spread with a deviation of 3-5%), so
  /// three runs alike are not rare enough: 4 false gains in 300 A/A tunes, each with three run
  /// medians of 0.92-0.98 but no bound below 0.98. A gain whose runs bound it needs none; with
  /// the extra runs the every-run condition is five draws instead of three. Needs
  /// stop_min_gain >= 0; 0 (the default): no more runs.
  int extra_runs = 0;
  /// Each leader in children of its own beside the references (a run: one child per leader
  /// still timed), instead of all leaders in one child. Why: a kernel's time depends on what
  /// else the process runs between its calls. The user's process runs one kernel; `bench`
  /// checks a claim beside the two references; a child of five kernels whose data do not all
  /// fit the cores' private caches slows the references more than a leader (ca-HepTh SpMV, Zen 5
  /// VM: the csr baseline 14.4 us alone or beside one kernel, 18-22 us among five dynamic-chunk
  /// ones: scripts/bench_csr_context.sh). Apart, leaders are compared by their ratios to the
  /// references timed beside them (FreshTiming::score); the drop rule compares a leader's ratio
  /// interval with the fastest's median ratio; and with stop_min_gain a leader that can no longer
  /// be judged a gain stops (Abandoned) while another still may be: the verdict's Bonferroni count
  /// covers choosing the judged leader on any of the rounds. Costs: leaders x (1 + references)
  /// kernels timed per run instead of leaders + references.
  bool apart = false;
};

struct FreshTiming {
  std::vector<std::size_t> leaders;      ///< positions in Confirmation::ranking, best first
  std::vector<Measurement> leader_ms;    ///< per leader: every run's rounds, appended in run order
  /// Per reference candidate, likewise: every child's rounds in order (apart: not paired with
  /// any one leader's rounds; judge a leader against references_of(it)).
  std::vector<Measurement> references;
  /// Apart (FreshOptions::apart): per leader, the references timed in its own children, paired
  /// round by round with leader_ms; empty otherwise.
  std::vector<std::vector<Measurement>> leader_references;
  bool apart = false;
  int runs = 0;                          ///< runs made (each `rounds` rounds)
  int children = 0;                      ///< side-by-side children made (apart: per leader a run)
  int runs_planned = 0;                  ///< FreshOptions::runs, plus extra_runs when made
  /// Why more runs than FreshOptions::runs were planned (FreshOptions::extra_runs: a marginal
  /// gain), else empty.
  std::string extended;
  int rounds = 0;
  /// Why fewer runs than planned were made (FreshOptions::stop_min_gain: no leader can be a
  /// gain; FreshOptions::clear_ratio: a clear gain), else empty.
  std::string stopped;
  /// The runs stopped on a clear gain (FreshOptions::clear_ratio).
  bool clear = false;
  /// Leaders dropped before the last run (FreshOptions::drop_ratio): their leader_ms are
  /// Abandoned and hold the rounds of the runs they were timed in.
  int dropped = 0;
  double seconds = 0.0;                  ///< wall time of the runs
  std::string busy;                      ///< disturbed_warning of these runs (empty: quiet)
  double disturbed_share = 0.0;          ///< disturbance(...).kept_share() of these runs
  /// The verified leader with the smallest score(): the fastest in the fresh rounds.
  std::optional<std::size_t> best() const;
  /// The references timed beside leader `i` round by round (its judge: leader_ms[i] against them).
  const std::vector<Measurement>& references_of(std::size_t leader) const;
  /// How fast a leader ran: together, its median time; apart, the median of its per-round ratios
  /// to the first reference that ran beside it (infinity when none did).
  double score(std::size_t leader) const;
};

/// Times the leaders of a confirmation and `references` again (see FreshOptions). A leader or
/// reference that fails any run takes that failure. Nothing is stored. `r` holds the entries
/// c.ranking indexes. Empty (no runs) when no nominee is verified.
FreshTiming time_fresh(Runner& measurer, const TuneResult& r, const Confirmation& c,
                       const std::vector<Candidate>& references, const FreshOptions& opts);

/// The busy-machine warning of a side-by-side run, from its own timed runs: a run during which
/// the measuring child was preempted (an involuntary context switch: another process took a
/// CPU) was disturbed. Empty when none was kept and under a tenth were taken again.
std::string disturbed_warning(const Confirmation& c);
/// The same over any measurements of one or more side-by-side runs.
std::string disturbed_warning(const std::vector<const Measurement*>& ms);

/// The software counts behind disturbed_warning, summed over the verified measurements: timed
/// runs kept, runs taken again because another process preempted the child (the retake is a
/// clean run), and kept runs that were disturbed all the same (out of retakes).
struct Disturbance {
  std::int64_t runs = 0, retaken = 0, kept = 0;
  /// The disturbed share of the kept runs (0 when none were timed).
  double kept_share() const { return runs > 0 ? static_cast<double>(kept) / static_cast<double>(runs) : 0.0; }
};
Disturbance disturbance(const std::vector<const Measurement*>& ms);

/// The decision rule: whether `winner` beats `reference`, both timed in the same interleaved
/// rounds (round k of one is paired with round k of the other, so that the per-round ratios
/// winner / reference cancel the machine's drift). The median ratio has a distribution-free
/// confidence interval from the order statistics of the ratios (binomial, `level` two-sided),
/// widened to hold each run's own median ratio when the rounds come from several runs (one
/// process can favour a kernel for its whole life: the runs' disagreement is noise too). A gain
/// is a ratio interval wholly below 1 *and* a median ratio at most 1 - min_gain, pooled and in
/// every run: significant and worth reporting. Calibrated with A/A runs (the same kernel twice,
/// the csr schedule against the csr baseline; scripts/bench_verdict.sh): see heuristics/README.md.
struct DecisionRule {
  double min_gain = 0.02;  ///< smallest gain worth reporting (0.02: 2% less time)
  double level = 0.90;     ///< two-sided level of the ratio interval
  /// A gain decided on runs of which more than this share of the kept rounds were disturbed is
  /// "undecided" (retaken runs do not count: the retake is clean). A few disturbed rounds move
  /// a median of paired ratios little; a busy machine's many do.
  double max_disturbed = 0.10;
};

struct Verdict {
  bool gain = false;
  double speedup = 0.0;       ///< 1 / ratio_median (unpaired: reference median / winner median)
  double speedup_lo = 0.0;    ///< the speedup's interval: 1 / ratio_hi ..
  double speedup_hi = 0.0;    ///< .. 1 / ratio_lo
  double ratio_median = 0.0;  ///< median of the per-round ratios winner / reference
  double ratio_lo = 0.0;      ///< its interval (order statistics, widened by the runs' medians)
  double ratio_hi = 0.0;
  double ratio_q25 = 0.0;     ///< the ratios' quartiles
  double ratio_q75 = 0.0;
  double spread = 0.0;        ///< (ratio_q75 - ratio_q25) / 2
  int rounds = 0;             ///< paired rounds (0: unpaired, medians only, no interval)
  int runs = 1;               ///< runs the rounds came from
  std::vector<double> run_ratio_medians;  ///< each run's median ratio (runs > 1)
  double min_gain = 0.0;      ///< the rule's
  double level = 0.0;
  nlohmann::json to_json() const;
};

/// The verdict of `winner` against `reference` (both Ok, timed side by side, `runs` runs of
/// equal round counts appended in order). When their round counts differ, the ratio of medians
/// is used and the interval is that point.
Verdict judge_gain(const Measurement& winner, const Measurement& reference,
                   const DecisionRule& rule = {}, int runs = 1);

/// The one-sided 95% upper bound of exp(mean log m) for the runs' median ratios m (Student's t;
/// infinity for fewer than two runs): above 1 - min_gain, the runs do not show a gain of
/// min_gain beyond the process-to-process noise. The noise's deviation is pooled from m's own
/// spread and, when given, that of `noise_medians` (another pair's run medians from the same
/// runs, e.g. the two references', about their own mean): three runs alone can agree closely
/// by chance.
double marginal_gain_bound(const std::vector<double>& run_ratio_medians,
                           const std::vector<double>& noise_medians = {});

/// The distribution-free confidence interval of the median of `values` (any order) at `level`
/// two-sided: [x_(l), x_(n+1-l)] with l the largest count whose binomial(n, 1/2) tail is at most
/// (1 - level) / 2; the whole range for n too small to have one.
std::pair<double, double> median_interval(std::vector<double> values, double level);

}  // namespace waco::heuristics
