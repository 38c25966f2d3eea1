// Timing: warm-up runs, then repeated runs summarized by median, min and max.
#pragma once

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

  SoftwareCounts operator-(const SoftwareCounts& o) const;
  SoftwareCounts& operator+=(const SoftwareCounts& o);
};
/// The counts now.
SoftwareCounts software_counts();

/// Monotonic wall-clock seconds.
double now_seconds();
/// A number of seconds as text with a sensible unit ("1.23 ms").
std::string format_seconds(double s);
/// A duration for progress lines and ETAs: "42s", "3m05s", "2h07m"; "?" for a negative value.
std::string duration_text(double s);
/// CPU seconds of the calling thread: with one thread a kernel runs on the calling thread, so
/// time the machine gives to other processes does not count.
double thread_cpu_seconds();

struct TimingOptions {
  int warmup = 2;    ///< untimed runs first
  int repeats = 10;  ///< timed runs (>= 1)
  double (*clock)() = now_seconds;  ///< what the timed runs are measured with
  /// Per function, timed runs that may be taken again because they were disturbed (an
  /// involuntary context switch of this process during the run); 0: keep every run.
  int retake_disturbed = 0;
};

struct TimingStats {
  std::vector<double> seconds;  ///< every timed run, in order
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
  int retaken = 0;          ///< disturbed timed runs that were taken again
  int disturbed_kept = 0;   ///< disturbed timed runs kept (no retakes left)
  SoftwareCounts counts;    ///< summed over the kept timed runs (time_interleaved only)
};

/// Median/min/max of samples (median of an even count is the mean of the middle two).
/// Precondition: samples is not empty.
TimingStats summarize(std::vector<double> samples);

/// The q-quantile (0 <= q <= 1) of sorted values, linear interpolation. Precondition: not empty.
double quantile(const std::vector<double>& sorted, double q);

/// Untimed runs of a function right before each of its timed runs in a side-by-side
/// comparison (time_interleaved's settle; tune's confirmation, collect and bench use it). One
/// was not enough: SpMV on a 90k-row 5-point stencil (4.7 MB of matrix), 2 threads, with 0 / 8 /
/// 19 other kernels in the rounds, the static-range kernel took 119 / 166 / 181 us at 1 settle
/// run and 128 / 125 / 126 us at 2 (3: 123-131), so a long list of nominees had reversed its
/// order with the dynamic chunk-256 kernel (154 / 173 / 179 us at 1, 159-164 us at 2).
constexpr int kDefaultSettleRuns = 2;

/// Runs fn warmup times, then repeats times timing each run.
TimingStats time_repeated(const std::function<void()>& fn, const TimingOptions& opts);

/// Times several functions side by side: opts.warmup untimed rounds, then opts.repeats timed
/// rounds; every round runs each function once, round r starting with function r % n, so that
/// machine noise (a shared host drifts by tens of percent within a second) and the cache state
/// one function leaves to the next hit all of them alike. Only ratios of such timings are
/// comparable on a noisy machine. With settle > 0, each turn first runs the function settle
/// times untimed, so that the timed run finds the caches warm with its own data, as in a loop
/// that calls one kernel many times; with 0 it finds what the previous function left. An empty
/// function is skipped: its stats stay empty. Every timed run is bracketed by software_counts();
/// a disturbed one is taken again while the function has retakes left (opts.retake_disturbed).
std::vector<TimingStats> time_interleaved(const std::vector<std::function<void()>>& fns,
                                          const TimingOptions& opts, int settle = 0);

}  // namespace waco::kernels
