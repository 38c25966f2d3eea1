// The Runner: what a search and the tune pipeline need of measuring (tuner.hpp, tune, collect).
// Two implementations: Measurer (measure.hpp), which builds, verifies and times each candidate in
// an isolated child process on this machine, and ScriptedRunner (scripted_runner.hpp), which
// makes up timings and statuses from a script and a seed, so that the pipeline's decisions can be
// tested without timing noise. MeasureOptions, RaceBound and CompareOptions are the Runner's
// vocabulary; some options only mean something to the Measurer (timeouts, settle runs,
// counters, the child hook), and say so.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "waco/codegen/generated_kernel.hpp"
#include "waco/heuristics/candidate.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

struct MeasureOptions {
  int warmup = 2;    ///< untimed runs after verification
  int repeats = 10;  ///< timed runs (>= 1)
  /// Threads of baselines and of schedules whose threads field is 0 (0 = every available core).
  int threads = 0;
  double tolerance = kernels::kDefaultTolerance;
  /// Limit for building the format and compiling (a cold compile takes seconds), in seconds.
  double prepare_timeout_s = 300.0;
  /// Limit for verification, warm-up and timed runs, in seconds.
  double run_timeout_s = 60.0;
  codegen::GeneratedOptions generated;
  /// Racing (measure() with a bound): runs after the verification, warm-up included, made before
  /// a candidate may be abandoned (>= 1).
  int race_min_runs = 2;
  /// Racing in compare(): a generated candidate whose faster of two timed runs after the
  /// verification is above this factor times the fastest candidate's is abandoned (status
  /// Abandoned, those two runs as its times) and left out of the rounds; 0: time every one.
  double compare_race_factor = 0.0;
  /// Racing in compare(), before any timing: once the group has a fastest candidate (its
  /// baselines run first), every run of a generated candidate made to verify or probe it has a
  /// deadline, max(compare_screen_min_s, compare_screen_margin x compare_race_factor x the
  /// group's fastest). A run still going at its deadline ends the measuring child; the candidate
  /// is stored Abandoned with compare_race_factor x the fastest as its lower bound (never
  /// verified), and a new child goes on with the others. So a schedule a thousand times slower
  /// than csr costs a fraction of a second, not minutes. The margin allows for a cold first run.
  /// Side-by-side rounds in compare(): timed runs per candidate that are taken again when an
  /// involuntary context switch shows another process took a CPU during them.
  int retake_disturbed = 5;
  /// Side-by-side rounds in compare(): untimed runs of a candidate right before each of its timed
  /// runs (see kernels::kDefaultSettleRuns), so that it is timed with its own data in the caches.
  int settle = kernels::kDefaultSettleRuns;
  /// ... and at least this long (seconds; kernels::kDefaultSettleSeconds): a short kernel timed
  /// right after another runs slower for a few hundred microseconds.
  double settle_s = kernels::kDefaultSettleSeconds;
  /// ... and each timed run lasts at least this long (seconds; kernels::kDefaultMinRunSeconds): a
  /// shorter kernel is timed over back-to-back calls, not one call and the clock reads around it.
  double min_run_s = kernels::kDefaultMinRunSeconds;
  /// Side-by-side rounds in compare(): hardware counters (likwid, else Linux perf; cycles,
  /// instructions, cache references and misses) are read around this many extra runs of each
  /// candidate after the timed rounds (never around timed runs: reading them costs time), where
  /// the machine exposes them; 0: none. Measurement::counters["hardware"].
  int hardware_counter_runs = 3;
  /// Side-by-side rounds in compare(): each candidate of a small problem (its format and output
  /// at most 1 MiB; no output shared) is prepared this many times, each copy after a block of
  /// random size (so at other addresses and cache sets), verified, and round k runs copy
  /// k mod layouts (its settle runs too). Why: the memory layout of a small kernel's arrays,
  /// fixed for a process's whole life, moves its time by several percent (4K aliasing, cache
  /// sets), so one run's rounds judged one draw of it: A/A tunes of SpMM n=64 on matrices of
  /// 233-438 nonzeros found the same loops 3-5% apart between processes. With several layouts a
  /// run's median is over several draws. 1: one layout, as a user's process has.
  int layouts = 1;
  double compare_screen_margin = 4.0;
  double compare_screen_min_s = 0.05;
  /// Test hook (fault injection): runs in the measuring child after prepare, before the first
  /// run. It may crash, hang or throw to exercise the isolation; leave empty in production.
  /// A Measurer with a hook forks its worker instead of spawning it (measure.hpp).
  std::function<void(const Candidate&)> child_hook;
  /// Test hook, as child_hook: runs in the measuring child right before each timed probe of
  /// compare's racing (the candidate, the probe's number from 0: 0-1 the first pair, 2-3 the
  /// second look), inside the probe's time. A sleep there is a descheduled thread.
  std::function<void(const Candidate&, int probe)> probe_hook;
  /// The caller's request to stop (the library's Options::interrupt): polled from the calling
  /// thread about every kCancelPollSeconds while a Measurer waits for its worker. When it returns
  /// true the worker and every process under it (measuring child, compiler) are killed, the call
  /// throws kernels::Cancelled and the Measurer is stopped; nothing of the request is measured.
  /// Empty: never polled. Not sent to the worker.
  std::function<bool()> cancel;
};

/// How often MeasureOptions::cancel is polled while waiting (seconds).
inline constexpr double kCancelPollSeconds = 0.1;

/// Racing (Measurer::measure): when to stop timing a hopeless candidate.
struct RaceBound {
  /// A verified candidate whose fastest run, after MeasureOptions::race_min_runs runs (warm-up
  /// included), is still slower than this is a candidate to abandon; <= 0: no racing.
  double above_s = 0.0;
  /// When set (a baseline implementation's name, e.g. "csr"), a candidate to abandon is first
  /// timed side by side with that implementation, prepared in the same child: two alternating
  /// runs each. The machine's drift since the bound was set is the reference's fastest run now
  /// over check_s (its median then); the candidate is abandoned only when its fastest run is above
  /// above_s times that drift (at least 1). A burst of host noise (this kind of VM has bursts of
  /// 3-8x for a moment) then slows both alike instead of abandoning a good candidate. Without a
  /// check, or when the reference cannot run, the plain bound decides.
  std::string check;
  double check_s = 0.0;  ///< the reference's median when the bound was set (> 0 with check)

  bool active() const { return above_s > 0.0; }
};

/// Racing of one Measurer::compare call.
struct CompareOptions {
  /// The factor of MeasureOptions::compare_race_factor for this call; < 0: the Measurer's own.
  double race_factor = -1.0;
  /// Indices of candidates timed in every round however slow their first runs are, like the
  /// baselines (the caller's references, e.g. the csr schedule beside a model's nominees).
  std::vector<std::size_t> always_timed;
  /// Successive halving of the rounds (halving_drops): at a quarter, a half and three quarters
  /// of them, the slower half of the generated candidates not in always_timed stop being timed,
  /// keeping at least this many; each one stopped is Abandoned with its rounds so far as its
  /// times (SuccessiveHalving). Only the leaders of a selection need every round. 0: none.
  int halving_keep = 0;
};

/// A candidate that successive halving stopped (halving_drops).
struct HalvingDrop {
  std::size_t index = 0;    ///< the candidate's position in the compared list
  int after_rounds = 0;     ///< timed rounds it ran
  double ratio = 0.0;       ///< its median per-round ratio to the reference
  double kept_ratio = 0.0;  ///< the slowest kept candidate's
};

/// The candidates to stop after `done` of `rounds` timed rounds (CompareOptions::halving_keep):
/// at a quarter, a half and three quarters of the rounds (none when rounds < 8), the candidates
/// marked in `halved` that ran every round so far are ranked by the median of their per-round
/// time ratios to candidate `reference` (which must have run every round too), and all but the
/// faster half (at least `keep`; ties kept) are returned. `samples`: each candidate's timed
/// runs, one a round. The ratio cancels the machine's drift between rounds, as the verdict's does.
std::vector<HalvingDrop> halving_drops(int done, int rounds, int keep, std::size_t reference,
                                       const std::vector<std::vector<double>>& samples,
                                       const std::vector<char>& halved);

/// One side-by-side run's successive halving, as both runners' compare() do it: among the
/// candidates `timed` in the rounds, the generated ones not in `keep` (always timed), against
/// the first candidate in `keep`; off when `keep_n` is 0 or no timed candidate is kept.
class SuccessiveHalving {
 public:
  SuccessiveHalving(const std::vector<Candidate>& cs, const std::vector<char>& keep,
                    const std::vector<char>& timed, int keep_n, int rounds);
  bool on() const { return on_; }
  /// After `done` timed rounds (`samples`: every candidate's timed runs): the candidates to stop
  /// now (halving_drops), remembered.
  std::vector<std::size_t> after_round(int done, const std::vector<std::vector<double>>& samples);
  bool stopped(std::size_t i) const { return dropped_.at(i).has_value(); }
  /// Candidate i's Measurement, timed over the rounds it ran, made Abandoned with the reason when
  /// halving stopped it (was_halved then holds).
  void mark(std::size_t i, Measurement& m) const;

 private:
  bool on_ = false;
  int keep_n_ = 0;
  int rounds_ = 0;
  std::size_t reference_ = 0;
  std::vector<char> halved_;
  std::vector<std::optional<HalvingDrop>> dropped_;
};

/// Whether successive halving stopped the candidate of this Measurement (SuccessiveHalving::mark).
bool was_halved(const Measurement& m);

/// Measures candidates of one problem: one at a time (measure, with racing) or side by side
/// (compare, interleaved rounds). Expected failures (refused, compile error, wrong result, crash,
/// timeout, abandoned) come back as a Measurement's status with a reason, never as exceptions.
/// One measurement at a time (not thread-safe).
class Runner {
 public:
  virtual ~Runner() = default;

  /// Measures one candidate: verified, options().warmup untimed runs, then options().repeats
  /// timed ones. Racing (see RaceBound; a tuner passes a factor times the best median so far): a
  /// verified candidate found hopeless stops there, status Abandoned, with the runs made as its
  /// times.
  virtual Measurement measure(const Candidate& c, const RaceBound& race = {}) = 0;

  /// Measures several candidates side by side: all prepared and verified first, then timed in
  /// `rounds` interleaved rounds (each running every candidate once), then verified again. One
  /// Measurement per candidate, in order (repeats = rounds), with software counts in `counters`
  /// (its "retaken" and "disturbed_kept" say whether other processes disturbed the rounds).
  /// `co`: racing for this call (see CompareOptions; MeasureOptions::compare_race_factor).
  virtual std::vector<Measurement> compare(const std::vector<Candidate>& cs, int rounds,
                                           const CompareOptions& co = {}) = 0;

  virtual const MeasureOptions& options() const = 0;
  /// Threads a candidate with threads = 0 runs on (options().threads resolved).
  virtual int run_threads() const = 0;
  /// Whether the timings come from this machine, so that its load matters to them (false for a
  /// ScriptedRunner: tune then skips its busy-machine check).
  virtual bool times_this_machine() const { return true; }
  /// The measuring processes' resident memory since the last call (or the start), for the
  /// memory record of a tune: {"worker_peak_bytes", "worker_rss_bytes", "children_peak_bytes"}
  /// (the worker's peak and its size now, the largest peak of a measuring child); null when the
  /// runner has no such process (a ScriptedRunner) or the worker did not answer.
  virtual nlohmann::json memory() { return nullptr; }
};

/// The Runner named by `spec`: "" or "isolated" a Measurer (measure.hpp: it forks its worker
/// now, so the same precondition holds: this process has not run OpenMP yet), "scripted:FILE" a
/// ScriptedRunner reading the script FILE (scripted_runner.hpp). kernels::Error for another spec
/// or a bad script. ref: the problem's reference, or nullptr for the worker to compute it.
std::unique_ptr<Runner> make_runner(const std::string& spec, const kernels::Problem& p,
                                    const kernels::Reference* ref, MeasureOptions opts);

}  // namespace waco::heuristics
