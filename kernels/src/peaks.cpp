#include "waco/kernels/peaks.hpp"

#include <omp.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <vector>

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::kernels {

namespace {

constexpr long kFmaIterations = 2'000'000;
constexpr std::size_t kTriadFloats = std::size_t{1} << 25;  // 128 MiB an array
constexpr int kRepeats = 5;

/// `Chains` independent recurrences acc = acc * a + b on vectors of `Lanes` values of S; returns
/// a value that depends on every chain (so none is dropped). Inlined into a function compiled for
/// each ISA, so that the vector operations become that ISA's instructions.
template <class S, int Lanes, int Chains>
[[gnu::always_inline]] inline S fma_chains(S seed) {
  typedef S V __attribute__((vector_size(Lanes * sizeof(S))));
  V acc[Chains];
  for (int c = 0; c < Chains; ++c)
    for (int l = 0; l < Lanes; ++l) acc[c][l] = seed + S(0.001) * static_cast<S>(c * Lanes + l);
  V a, b;
  for (int l = 0; l < Lanes; ++l) {
    a[l] = S(0.999999);
    b[l] = S(1e-7);
  }
  for (long i = 0; i < kFmaIterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < Chains; ++c) acc[c] = acc[c] * a + b;  // a recurrence: not folded
  }
  S s = 0;
  for (int c = 0; c < Chains; ++c)
    for (int l = 0; l < Lanes; ++l) s += acc[c][l];
  return s;
}

// Chains per ISA: enough to cover the FMA latency (4-5 cycles) on two FMA units, few enough that
// the accumulators and the two operands stay in registers (16 vector registers below AVX-512,
// 32 with it).
[[gnu::target("avx512f")]] double probe_avx512(double seed, bool f64) {
  return f64 ? fma_chains<double, 8, 12>(seed) : fma_chains<float, 16, 12>(static_cast<float>(seed));
}
[[gnu::target("avx2,fma")]] double probe_avx2(double seed, bool f64) {
  return f64 ? fma_chains<double, 4, 10>(seed) : fma_chains<float, 8, 10>(static_cast<float>(seed));
}
double probe_sse2(double seed, bool f64) {
  return f64 ? fma_chains<double, 2, 10>(seed) : fma_chains<float, 4, 10>(static_cast<float>(seed));
}

double probe(VectorIsa isa, double seed, bool f64) {
  switch (isa) {
    case VectorIsa::Avx512: return probe_avx512(seed, f64);
    case VectorIsa::Avx2Fma: return probe_avx2(seed, f64);
    case VectorIsa::Sse2: break;
  }
  return probe_sse2(seed, f64);
}

/// Best-of-5 GFLOP/s of the probe on `threads` threads.
double arithmetic_peak(VectorIsa isa, int threads, bool f64) {
  const int lanes = isa_vector_bits(isa) / (f64 ? 64 : 32);
  const int chains = isa == VectorIsa::Avx512 ? 12 : 10;
  const double flops = 2.0 * lanes * chains * static_cast<double>(kFmaIterations) * threads;
  volatile double sink = 0;
  double best = 0;
  for (int r = 0; r < kRepeats; ++r) {
    double total = 0;
    const double s = now_seconds();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    total += probe(isa, 1.0 + omp_get_thread_num(), f64);
    const double t = now_seconds() - s;
    sink = sink + total;
    best = std::max(best, flops / t * 1e-9);
  }
  return best;
}

double cpuinfo_mhz() {
  try {
    return std::max(0.0, std::stod(cpuinfo_field("cpu MHz")));
  } catch (const std::exception&) {  // no such line, or not a number
    return 0.0;
  }
}

}  // namespace

const char* isa_name(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::Avx512: return "avx512f";
    case VectorIsa::Avx2Fma: return "avx2+fma";
    case VectorIsa::Sse2: break;
  }
  return "sse2";
}

int isa_vector_bits(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::Avx512: return 512;
    case VectorIsa::Avx2Fma: return 256;
    case VectorIsa::Sse2: break;
  }
  return 128;
}

VectorIsa widest_isa(const IsaFeatures& f) {
  if (f.avx512f) return VectorIsa::Avx512;
  if (f.avx2 && f.fma) return VectorIsa::Avx2Fma;
  return VectorIsa::Sse2;
}

IsaFeatures cpu_isa_features() {
  __builtin_cpu_init();
  IsaFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  return f;
}

std::vector<VectorIsa> supported_isas() {
  const IsaFeatures f = cpu_isa_features();
  std::vector<VectorIsa> out{VectorIsa::Sse2};
  if (f.avx2 && f.fma) out.push_back(VectorIsa::Avx2Fma);
  if (f.avx512f) out.push_back(VectorIsa::Avx512);
  return out;
}

double MachinePeaks::fma_per_cycle() const {
  if (reported_mhz <= 0) return 0.0;
  const double lanes = isa_vector_bits(isa) / 32.0;
  return fp32_gflops * 1e3 / (2.0 * lanes * threads * reported_mhz);
}

nlohmann::json MachinePeaks::to_json() const {
  nlohmann::json j = {{"threads", threads},
                      {"isa", isa_name(isa)},
                      {"vector_bits", isa_vector_bits(isa)},
                      {"fp32_gflops", fp32_gflops},
                      {"fp64_gflops", fp64_gflops},
                      {"bandwidth_gbs", bandwidth_gbs},
                      {"seconds", seconds},
                      {"method", std::string("fp32/fp64: ") + isa_name(isa) +
                                     " vector FMA chains in registers (the widest ISA the CPU "
                                     "supports, chosen at run time); bandwidth: STREAM triad over "
                                     "3 x 128 MiB, 12 bytes an element; best of 5"}};
  if (reported_mhz > 0) {
    j["reported_mhz"] = reported_mhz;
    j["fma_per_cycle_per_thread"] = fma_per_cycle();
  } else {
    j["reported_mhz"] = nullptr;
    j["fma_per_cycle_per_thread"] = nullptr;
  }
  return j;
}

MachinePeaks measure_peaks(int threads) { return measure_peaks(threads, widest_isa(cpu_isa_features())); }

MachinePeaks measure_peaks(int threads, VectorIsa isa) {
  const std::vector<VectorIsa> ok = supported_isas();
  if (std::find(ok.begin(), ok.end(), isa) == ok.end())
    throw Error(std::string("this CPU does not support ") + isa_name(isa) + " (widest: " +
                isa_name(ok.back()) + ")");
  MachinePeaks p;
  p.threads = std::max(1, threads);
  p.isa = isa;
  p.reported_mhz = cpuinfo_mhz();
  const double t0 = now_seconds();
  p.fp32_gflops = arithmetic_peak(isa, p.threads, false);
  p.fp64_gflops = arithmetic_peak(isa, p.threads, true);
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
  volatile float sink = a[static_cast<std::size_t>(n / 2)];
  (void)sink;
  p.seconds = now_seconds() - t0;
  return p;
}

}  // namespace waco::kernels
