// The machine's measured roofline: fp32 arithmetic peak and memory bandwidth on a given number of
// threads, for reporting what fraction of them a kernel achieves (`info --peaks`,
// `bench --roofline`). Measured, not looked up: VM guests hide the clock and the memory system.
#pragma once

#include <nlohmann/json.hpp>

namespace waco::kernels {

struct MachinePeaks {
  int threads = 1;
  /// Fused multiply-adds on 16-float vectors in 12 independent register chains per thread
  /// (GCC/Clang vector extensions: AVX-512 where the build targets it), best of 5.
  double fp32_gflops = 0.0;
  /// STREAM triad a = b + s c over three 128 MiB arrays (far beyond any cache), 12 bytes per
  /// element as STREAM counts them (write-allocate traffic not counted), best of 5.
  double bandwidth_gbs = 0.0;
  double seconds = 0.0;  ///< the measurement's wall time

  nlohmann::json to_json() const;
};

/// Measures both on `threads` OpenMP threads (about 1 s; 384 MiB of memory for the triad).
MachinePeaks measure_peaks(int threads);

}  // namespace waco::kernels
