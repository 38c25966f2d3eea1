// The final side-by-side run of `waco-hybrid ablate` (issue 33): every configuration's winner, the
// library baselines and the csr schedule timed interleaved in one `bench` child, replicated in
// fresh children until two consecutive undisturbed runs agree. Pure pieces, for the tests: one
// run's delivered speedups from its bench JSON (final_run_of), the agreement rule (disagreeing),
// the replication loop with the run as a callback (replicate) and the delivered speedup with
// its interval (delivered_speedups). ablate_side_by_side.cpp runs the children and makes the
// row, cmd_ablate.cpp stores it; report_metrics.cpp reads it.
//
// Delivered speedup of a winner in one run: the median time of a csr reference (the csr
// baseline or the csr schedule; csf for MTTKRP) over the winner's median. While a pass runs,
// each run is read against its own faster reference (the stopping rule); the row's delivered
// speedups use one reference for every run of every pass, the faster over all of them
// (schedule_faster_over, then with_common_reference): a user runs one of the two, and the faster of two near-tied medians
// in each run is biased fast. Its interval in one run: the distribution-free interval of the
// median of the paired per-round ratios (bench times every kernel once per round) at
// kIntervalLevel.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace waco::cli {

/// Version of the rows ablate writes (waco-ablation-run, waco-ablation-bench). 2: run rows carry
/// the claim with its interval and the tune's busy warning; side-by-side rows carry the csr
/// schedule, the replicated runs and each winner's delivered speedup with its interval. Version 1
/// rows still load and report.
inline constexpr int kAblationRowVersion = 2;

/// The bands of a delivered speedup: below 0.97 the winner is slower than csr, above 1.03 faster,
/// between them a tie (issue 33's targets).
inline constexpr double kBelowBand = 0.97;
inline constexpr double kAboveBand = 1.03;
/// Two runs agree on a speedup that changed by less than this (relative to the earlier run).
inline constexpr double kAgreeChange = 0.05;
/// The nominal coverage of the intervals (that of tune's claims).
inline constexpr double kIntervalLevel = 0.90;

/// The agreement rule, in words (stored in the side-by-side rows and printed by the report).
extern const char* const kAgreeRule;

struct Interval {
  double lo = 0.0, hi = 0.0, level = kIntervalLevel;
  bool contains(double x) const { return lo <= x && x <= hi; }
};

/// The distribution-free interval of the median of `values`: the k-th smallest and the k-th
/// largest value, k the largest with P(Binomial(n, 1/2) < k) <= (1 - level) / 2 (at least 1:
/// below 5 values at level 0.9 it is [min, max]). Nothing for no values.
std::optional<Interval> median_interval(std::vector<double> values, double level = kIntervalLevel);

enum class Band { Below, Tie, Above };
Band band_of(double speedup);
const char* band_name(Band b);  ///< "below", "tie", "above"

/// One configuration's delivered speedup in one run.
struct RunSpeedup {
  double speedup = 0.0;
  std::optional<Interval> interval;  ///< from the paired rounds, when bench gave them
};

/// One final side-by-side run, reduced to what decides.
struct FinalRun {
  bool busy = false;  ///< its timings were disturbed (bench's busy or disturbed warning)
  std::string busy_reason;
  /// The references' kernel: csr, or csf for MTTKRP (BenchLayout::shortcut).
  std::string shortcut = "csr";
  /// The reference of `speedups`: "csr schedule" or "csr baseline" (the run's faster, unless
  /// use_reference chose another; reference_name).
  std::string reference;
  std::map<std::string, RunSpeedup> speedups;  ///< per configuration with a time
  /// The two references' medians (when timed) and the speedups over each of them.
  std::optional<double> baseline_s, schedule_s;
  std::map<std::string, RunSpeedup> over_baseline, over_schedule;
  /// bench's core_round_trip_ns (before and after its timings; null when not measured): how far
  /// apart the CPUs were, on which a short parallel kernel's speed depends.
  nlohmann::json core_round_trip_ns;
};

/// Where a bench child's results are: the two references' and each configuration's index in its
/// "results" array (-1: not timed).
struct BenchLayout {
  std::string shortcut = "csr";  ///< csr, or csf for MTTKRP
  int baseline = -1;             ///< the csr (csf) baseline
  int schedule = -1;             ///< the csr (csf) schedule, generated
  std::map<std::string, int> configs;
};

/// A bench --json output reduced to a FinalRun: busy when its busy_warning or disturbed_warning
/// is set; per configuration whose result has a median and per reference timed, the reference's
/// median over its own and, when both have the same number of rounds, the interval of the
/// per-round ratios (widened to hold the ratio of medians); `speedups` over the faster reference
/// by median. No speedups without a reference time.
FinalRun final_run_of(const nlohmann::json& bench, const BenchLayout& layout);

/// "<shortcut> schedule" when `schedule`, else "<shortcut> baseline".
std::string reference_name(const std::string& shortcut, bool schedule);

/// Points f.speedups and f.reference at the speedups over one reference (the schedule when
/// `schedule`, else the baseline); a run that did not time that reference keeps its own.
void use_reference(FinalRun& f, bool schedule);

/// The configurations on which two runs disagree, sorted: timed in both, and their speedup
/// changed by kAgreeChange or more relative to `a` and moved to another band. A configuration
/// timed in one of them only is not judged.
std::vector<std::string> disagreeing(const FinalRun& a, const FinalRun& b);

struct Replication {
  std::vector<FinalRun> runs;  ///< every run, busy ones included, in order
  bool settled = false;        ///< two consecutive undisturbed runs agreed on every configuration
  bool busy = false;           ///< fewer than two undisturbed runs: no result
  /// Configurations not decided: those the last two undisturbed runs disagree on when the runs
  /// never settled; every configuration when there were not two undisturbed runs.
  std::set<std::string> undecided;
};

/// Calls run(0), run(1), ... until two consecutive undisturbed runs (busy ones are skipped over)
/// agree on every configuration, or max_runs (at least 2) calls were made.
Replication replicate(int max_runs, const std::function<FinalRun(int)>& run);

/// Sets r.settled, r.busy and r.undecided from r.runs as replicate does (settled: the last two
/// undisturbed runs agree), for runs whose speedups changed after the fact (use_reference).
void judge(Replication& r);

/// The runs a result is computed from (indices into r.runs): the undisturbed ones, or every run
/// when none is.
std::vector<std::size_t> runs_used(const Replication& r);

struct Delivered {
  double speedup = 0.0;  ///< median over the runs used of the run's speedups
  Interval interval;     ///< lowest to highest of those runs' intervals (or speedups)
  int runs = 0;          ///< runs that timed it
  bool decided = false;  ///< not busy, not undecided
  std::vector<double> per_run;
};

/// Per configuration timed in a run used.
std::map<std::string, Delivered> delivered_speedups(const Replication& r);

/// The rule that fixes one reference for a matrix's final runs, in words (stored in the rows).
extern const char* const kReferenceRule;

/// Whether the csr schedule is the faster reference over the runs used of every pass (runs_used
/// of each): the median over those runs of the schedule's median over the baseline's below 1
/// (runs that timed both); a reference only some runs timed is taken when the other never
/// was. Nothing when no run timed either.
std::optional<bool> schedule_faster_over(const std::vector<Replication>& passes);

/// The passes with every run's speedups over one reference, the schedule when `schedule` (else
/// the baseline; ablate passes schedule_faster_over(passes)), and judged again (judge) on those
/// speedups. Unchanged when `schedule` is
/// nothing (no run timed a reference).
std::vector<Replication> with_common_reference(std::vector<Replication> passes,
                                               std::optional<bool> schedule);

/// The rule that combines passes, in words (stored in the side-by-side rows).
extern const char* const kPassRule;

/// Several replications of one matrix's final run taken apart in time (ablate --final-passes:
/// pass p runs after pass p - 1 of every matrix): the machine's state drifts over minutes, and
/// two runs a second apart agree on a state that the next minutes may not share. Per
/// configuration: the median of the passes' delivered speedups (delivered_speedups of each
/// pass; the passes that are not busy, or all when every one is), the interval from the lowest
/// to the highest of theirs, the runs and per-run speedups of all of them; decided when every
/// pass used decided it and each pass's speedup is within kAgreeChange of the median or in its
/// band. One pass gives exactly delivered_speedups(pass).
std::map<std::string, Delivered> delivered_over_passes(const std::vector<Replication>& passes);

}  // namespace waco::cli
