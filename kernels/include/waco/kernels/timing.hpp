// Timing: warm-up runs, then repeated runs summarized by median, min and max.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace waco::kernels {

/// Linux's software counts of this process, every thread included (getrusage(RUSAGE_SELF): the
/// kernel's own counters behind perf's task-clock, context-switches and page-faults software
/// events), readable on every machine, KVM guests without a PMU included. An involuntary
/// context switch during a timed run means another process took a CPU from the kernel: the run
/// was disturbed.
struct SoftwareCounts {
  double cpu_s = 0.0;                     ///< user + system CPU seconds (task-clock)
  std::int64_t involuntary_switches = 0;  ///< preempted (another runnable task took the CPU)
  std::int64_t voluntary_switches = 0;    ///< blocked or yielded (e.g. a thread sleeping at a barrier)
  std::int64_t page_faults = 0;           ///< minor + major
  /// Seconds the process's threads spent runnable but waiting for a CPU (the scheduler's
  /// run_delay, /proc/self/task/*/schedstat): what other tasks took from them. Negative when
  /// not read (software_counts() does not; time_interleaved reads it around a run with an
  /// involuntary switch) or not available.
  double run_delay_s = -1.0;

  SoftwareCounts operator-(const SoftwareCounts& o) const;
  SoftwareCounts& operator+=(const SoftwareCounts& o);
};
/// The counts now (run_delay_s not read).
SoftwareCounts software_counts();
/// The process's threads' summed run_delay now (seconds); negative when /proc has no schedstat.
double process_run_delay_s();

/// Monotonic wall-clock seconds.
double now_seconds();
/// A number of seconds as text with a sensible unit ("1.23 ms").
std::string format_seconds(double s);
/// A duration for progress lines and ETAs: "42s", "3m05s", "2h07m"; "?" for a negative value.
std::string duration_text(double s);
/// CPU seconds of the calling thread: with one thread a kernel runs on the calling thread, so
/// time the machine gives to other processes does not count.
double thread_cpu_seconds();

/// A turn's settle runs (time_interleaved's `settle`) end after the first once it took at least
/// this long (TimingOptions::settle_enough_s). The second run was for kernels of microseconds,
/// whose threads run slow for a few hundred microseconds after another kernel (kDefaultSettleRuns,
/// kDefaultSettleSeconds); a run this long has absorbed that and brought its own data into the
/// caches (the last-level cache refills in about a millisecond), so a second one only costs a
/// call: a third of a side-by-side run of large operands (SpMM J=64 beyond the LLC: 0.07-0.4 s
/// calls, a 20M-nonzero tune 5-18 minutes). Measured in kernels/README.md, "Settling long kernels".
inline constexpr double kSettleEnoughSeconds = 0.01;

struct TimingOptions {
  int warmup = 2;    ///< untimed runs first
  int repeats = 10;  ///< timed runs (>= 1)
  double (*clock)() = now_seconds;  ///< what the timed runs are measured with
  /// Per function, timed runs that may be taken again because they were disturbed (an
  /// involuntary context switch of this process during the run; see `threads`); 0: keep every run.
  int retake_disturbed = 0;
  /// The threads each function runs on, when known (0: unknown, taken as 1). A run with
  /// involuntary switches counts as disturbed only when its threads waited for a CPU (run_delay)
  /// more than kMaxLostShare of their time: with every core busy, the kernel's own threads (a
  /// timer tick's work, memory reclaim) preempt a long run several times (a 15 ms SpMV on 2
  /// threads of a quiet 2-core VM: 2-5 switches a run, every run) at a cost of microseconds,
  /// while a process that competes for a core takes whole time slices. Without schedstat: the
  /// CPU seconds missing from threads x wall seconds (which counts a thread asleep at a barrier
  /// too), and without a thread count any involuntary switch disturbs.
  int threads = 0;
  /// time_interleaved with settle > 0: each turn's settle runs go on until they took at least
  /// this long (seconds, wall clock; 0: exactly `settle` runs). See kDefaultSettleSeconds.
  double settle_s = 0;
  /// time_interleaved: the least time a timed run takes (seconds; 0: one call a run). A function
  /// whose call is shorter is called back to back in each timed run, as many times as its
  /// per-call time before its first timed run (its settle runs, else its last warm-up run, else
  /// one untimed call) says it takes to last this long; the run's time divided by those calls is
  /// the sample. The count is fixed per function, so that all its samples are alike. See
  /// kDefaultMinRunSeconds.
  double min_run_s = 0;
  /// time_interleaved with settle > 0: a turn's settle runs end after one that brought their
  /// time to at least this (seconds; 0: never early), even before `settle` runs or settle_s.
  double settle_enough_s = kSettleEnoughSeconds;
};

/// The share of a run's thread time that involuntary switches may cost before the run counts as
/// disturbed (TimingOptions::threads). A process that competes for a core takes a time slice of
/// milliseconds, 10% and more of a 15 ms run and all of a short one.
inline constexpr double kMaxLostShare = 0.03;

/// Whether a timed run was disturbed: `c` its software counts (run_delay_s read around it, or
/// negative), `seconds` its wall time, `threads` the threads it ran on (0: unknown).
bool run_disturbed(const SoftwareCounts& c, double seconds, int threads);

struct TimingStats {
  std::vector<double> seconds;  ///< every timed run, in order
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
  int retaken = 0;          ///< disturbed timed runs that were taken again
  int disturbed_kept = 0;   ///< disturbed timed runs kept (no retakes left)
  SoftwareCounts counts;    ///< summed over the kept timed runs (time_interleaved only)
  int calls = 1;            ///< calls in each timed run (TimingOptions::min_run_s); seconds are per call
};

/// Median/min/max of samples (median of an even count is the mean of the middle two).
/// Precondition: samples is not empty.
TimingStats summarize(std::vector<double> samples);

/// The q-quantile (0 <= q <= 1) of sorted values, linear interpolation. Precondition: not empty.
double quantile(const std::vector<double>& sorted, double q);
/// The median of unsorted values, as quantile(sorted, 0.5) interpolates it, by selection (O(n));
/// 0 when there are none.
double median(std::vector<double> values);

/// Untimed runs of a function right before each of its timed runs in a side-by-side
/// comparison (time_interleaved's settle; tune's confirmation, collect and bench use it). One
/// was not enough: SpMV on a 90k-row 5-point stencil (4.7 MB of matrix), 2 threads, with 0 / 8 /
/// 19 other kernels in the rounds, the static-range kernel took 119 / 166 / 181 us at 1 settle
/// run and 128 / 125 / 126 us at 2 (3: 123-131), so a long list of nominees had reversed its
/// order with the dynamic chunk-256 kernel (154 / 173 / 179 us at 1, 159-164 us at 2).
constexpr int kDefaultSettleRuns = 2;

/// The least time a turn's settle runs take (TimingOptions::settle_s) where tune, collect and
/// bench compare kernels side by side, so that a short kernel is timed as in a loop that calls it
/// alone. Two runs were not enough: on the AMD EPYC Zen 5 VM (2 vCPUs, f64 SpMV of ca-HepTh), each
/// kernel alone in a loop (`bench` with one implementation, 3 fresh processes) took csr 14.5-14.6
/// us, the split=i:1024 UUC kernel with chunk=1 12.9, chunk=4 13.7, chunk=static 14.3-14.4; timed
/// round-robin after 2 settle runs, csr 15.8-19.6 and chunk=1 19.8-25.8 (the kernel before it
/// leaves the two threads slow for a few hundred microseconds), after 2 ms of them 14.5-17.5 and
/// 13.0-13.1. Ten tunes settling 0.5 ms gave 3 gains (two the chunk=1 kernel, claimed at 1.06-1.08x
/// its 1.13x in the loop), six settling 1 ms 5 gains (chunk=1, 1.11-1.13x), six settling 2 ms 6
/// (chunk=1 1.11-1.13x, chunk=4 1.06-1.07x against 1.07x in the loop); ten without settling 5, all
/// the static kernel claimed at 1.04-1.13x (1.02x in the loop). 1 ms tripled such a tune's time
/// (0.3 s to 0.9-1.2 s); kernels slower than half of it cost nothing more (tune/README.md,
/// session 59).
constexpr double kDefaultSettleSeconds = 0.001;

/// The least time of a timed run (TimingOptions::min_run_s) where tune, collect and bench compare
/// kernels side by side: a kernel shorter than this is timed over back-to-back calls, as a loop
/// calls it. One call timed alone carries the clock reads and the software counts read around it
/// (~100 ns on the AMD EPYC Zen 5 VM) and finds the caches as those reads left them: f64 SpMV of
/// cage5 (0.26 us a call), 3 fresh `bench` processes with csr, Eigen, the csr schedule and the
/// `threads=1` kernel that tunes had claimed at 1.19-1.23x: one call a run 250-260 / 271-300 /
/// 239-259 / 201-210 ns, runs of at least 20 us 101-110 / 120-123 / 105-121 / 105-123 ns per call
/// (alone in a loop of 1000 timed calls csr and that kernel both 180 ns, clock included). Tunes of
/// cage5, ash219 and west0479 (0.26-1 us a call, 3 each): one call a run, 3 gains in 9 (claimed
/// 1.04-1.14x); runs of at least 20 or 50 us, none in 18. The per-round ratio of csr against
/// itself (the widest of 3 processes' interquartile ranges; cage5, ash219, west0479, jagmesh7 at
/// 3.5 us): single calls 0.27, 0.05, 0.13, 0.22; runs of 20 us 0.03, 0.11, 0.01, 0.13; of 50 us
/// 0.08, 0.02, 0.05, 0.09. A run of 50 us adds 5% to a 1 ms settle (tune/README.md, session 60).
constexpr double kDefaultMinRunSeconds = 50e-6;

/// Runs fn warmup times, then repeats times timing each run.
TimingStats time_repeated(const std::function<void()>& fn, const TimingOptions& opts);

/// Times several functions side by side: opts.warmup untimed rounds, then opts.repeats timed
/// rounds; every round runs each function once, round r starting with function r % n, so that
/// machine noise (a shared host drifts by tens of percent within a second) and the cache state
/// one function leaves to the next hit all of them alike. Only ratios of such timings are
/// comparable on a noisy machine. With settle > 0, each turn first runs the function settle
/// times untimed, so that the timed run finds the caches warm with its own data, as in a loop
/// that calls one kernel many times (and, with opts.settle_s, until they took that long); with 0
/// it finds what the previous function left. An empty
/// function is skipped: its stats stay empty. Every timed run is bracketed by software_counts();
/// a disturbed one is taken again while the function has retakes left (opts.retake_disturbed).
/// A timed run of a short function calls it several times (opts.min_run_s; TimingStats::calls).
/// `after_round`, when set, is called after each timed round but the last with the timed rounds
/// done so far and every function's timed runs (one a round, in order); the functions it names
/// are not run again, their stats covering the rounds they ran (successive halving).
using AfterRound =
    std::function<std::vector<std::size_t>(int, const std::vector<std::vector<double>>&)>;
std::vector<TimingStats> time_interleaved(const std::vector<std::function<void()>>& fns,
                                          const TimingOptions& opts, int settle = 0,
                                          const AfterRound& after_round = {});

}  // namespace waco::kernels
