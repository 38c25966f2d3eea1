// Timing: warm-up runs, then repeated runs summarized by median, min and max.
#pragma once

#include <functional>
#include <vector>

namespace waco::kernels {

struct TimingOptions {
  int warmup = 2;    ///< untimed runs first
  int repeats = 10;  ///< timed runs (>= 1)
};

struct TimingStats {
  std::vector<double> seconds;  ///< every timed run, in order
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
};

/// Monotonic wall-clock seconds.
double now_seconds();

/// Median/min/max of samples (median of an even count is the mean of the middle two).
/// Precondition: samples is not empty.
TimingStats summarize(std::vector<double> samples);

/// Runs fn warmup times, then repeats times timing each run.
TimingStats time_repeated(const std::function<void()>& fn, const TimingOptions& opts);

}  // namespace waco::kernels
