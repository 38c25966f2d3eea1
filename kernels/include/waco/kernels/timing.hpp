// Timing: warm-up runs, then repeated runs summarized by median, min and max.
#pragma once

#include <functional>
#include <vector>

namespace waco::kernels {

/// Monotonic wall-clock seconds.
double now_seconds();
/// CPU seconds of the calling thread: with one thread a kernel runs on the calling thread, so
/// time the machine gives to other processes does not count.
double thread_cpu_seconds();

struct TimingOptions {
  int warmup = 2;    ///< untimed runs first
  int repeats = 10;  ///< timed runs (>= 1)
  double (*clock)() = now_seconds;  ///< what the timed runs are measured with
};

struct TimingStats {
  std::vector<double> seconds;  ///< every timed run, in order
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
};

/// Median/min/max of samples (median of an even count is the mean of the middle two).
/// Precondition: samples is not empty.
TimingStats summarize(std::vector<double> samples);

/// The q-quantile (0 <= q <= 1) of sorted values, linear interpolation. Precondition: not empty.
double quantile(const std::vector<double>& sorted, double q);

/// Runs fn warmup times, then repeats times timing each run.
TimingStats time_repeated(const std::function<void()>& fn, const TimingOptions& opts);

/// Times several functions side by side: opts.warmup untimed rounds, then opts.repeats timed
/// rounds; every round runs each function once, round r starting with function r % n, so that
/// machine noise (a shared host drifts by tens of percent within a second) and the cache state
/// one function leaves to the next hit all of them alike. Only ratios of such timings are
/// comparable on a noisy machine. With settle > 0, each turn first runs the function settle
/// times untimed, so that the timed run finds the caches warm with its own data, as in a loop
/// that calls one kernel many times; with 0 it finds what the previous function left. An empty
/// function is skipped: its stats stay empty.
std::vector<TimingStats> time_interleaved(const std::vector<std::function<void()>>& fns,
                                          const TimingOptions& opts, int settle = 0);

}  // namespace waco::kernels
