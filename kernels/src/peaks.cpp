#include "waco/kernels/peaks.hpp"

#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "waco/kernels/timing.hpp"

namespace waco::kernels {

namespace {

typedef float v16 __attribute__((vector_size(64)));
constexpr int kChains = 12;
constexpr long kFmaIterations = 4'000'000;
constexpr std::size_t kTriadFloats = std::size_t{1} << 25;  // 128 MiB an array
constexpr int kRepeats = 5;

/// One thread's FMA chains; returns a value that depends on every chain (so none is dropped).
float fma_chains(float seed) {
  v16 acc[kChains];
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < 16; ++l) acc[c][l] = seed + 0.001f * static_cast<float>(c * 16 + l);
  v16 a, b;
  for (int l = 0; l < 16; ++l) {
    a[l] = 0.999999f;
    b[l] = 1e-7f;
  }
  for (long i = 0; i < kFmaIterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;  // a recurrence: not folded
  }
  float s = 0;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < 16; ++l) s += acc[c][l];
  return s;
}

}  // namespace

nlohmann::json MachinePeaks::to_json() const {
  return {{"threads", threads},
          {"fp32_gflops", fp32_gflops},
          {"bandwidth_gbs", bandwidth_gbs},
          {"seconds", seconds},
          {"method", "fp32: 16-float vector FMA chains in registers; bandwidth: STREAM triad over "
                     "3 x 128 MiB, 12 bytes an element; best of 5"}};
}

MachinePeaks measure_peaks(int threads) {
  MachinePeaks p;
  p.threads = std::max(1, threads);
  const double t0 = now_seconds();
  volatile float sink = 0;
  const double flops = 2.0 * 16 * kChains * static_cast<double>(kFmaIterations) * p.threads;
  for (int r = 0; r < kRepeats; ++r) {
    float total = 0;
    const double s = now_seconds();
#pragma omp parallel num_threads(p.threads) reduction(+ : total)
    total += fma_chains(1.0f + static_cast<float>(omp_get_thread_num()));
    const double t = now_seconds() - s;
    sink = sink + total;
    p.fp32_gflops = std::max(p.fp32_gflops, flops / t * 1e-9);
  }
  std::unique_ptr<float[]> a(new float[kTriadFloats]), b(new float[kTriadFloats]),
      c(new float[kTriadFloats]);
  const long n = static_cast<long>(kTriadFloats);
#pragma omp parallel for num_threads(p.threads) schedule(static)
  for (long i = 0; i < n; ++i) {  // first touch by the threads that stream them
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  const float scalar = 3.0f;
  for (int r = 0; r < kRepeats; ++r) {
    const double s = now_seconds();
#pragma omp parallel for num_threads(p.threads) schedule(static)
    for (long i = 0; i < n; ++i) a[i] = b[i] + scalar * c[i];
    const double t = now_seconds() - s;
    p.bandwidth_gbs = std::max(p.bandwidth_gbs, 12.0 * static_cast<double>(n) / t * 1e-9);
  }
  sink = sink + a[static_cast<std::size_t>(n / 2)];
  p.seconds = now_seconds() - t0;
  return p;
}

}  // namespace waco::kernels
