// The machine's measured roofline: fp32 and fp64 arithmetic peaks and memory bandwidth on a given
// number of threads, for reporting what fraction of them a kernel achieves (`info --peaks`,
// `bench --roofline`). Measured, not looked up: VM guests hide the clock and the memory system.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace waco::kernels {

/// The vector instructions a peak probe runs on. The probe is compiled for each (function target
/// attributes) and the widest one the CPU and its OS support is chosen at run time, whatever the
/// build targets: a build without -march=native still measures AVX-512 where the CPU has it, and
/// a probe of 512-bit vectors never runs spilled on a CPU with sixteen 256-bit registers (what
/// `info --peaks` did before: a tenth of an AVX2 CPU's peak).
enum class VectorIsa { Sse2, Avx2Fma, Avx512 };

struct IsaFeatures {
  bool avx2 = false, fma = false, avx512f = false;
};

const char* isa_name(VectorIsa isa);  ///< "sse2", "avx2+fma", "avx512f"
int isa_vector_bits(VectorIsa isa);   ///< 128, 256, 512
/// The widest ISA of `f` (AVX2 counts only with FMA: the probe measures fused multiply-adds).
VectorIsa widest_isa(const IsaFeatures& f);
/// This CPU's features as the compiler's runtime check sees them (CPUID and the OS's XSAVE state).
IsaFeatures cpu_isa_features();
/// The ISAs this CPU runs, narrowest first.
std::vector<VectorIsa> supported_isas();

struct MachinePeaks {
  int threads = 1;
  VectorIsa isa = VectorIsa::Sse2;  ///< the vector instructions of the arithmetic probes
  /// Fused multiply-adds on full vectors in independent register chains (as many chains as the
  /// ISA's registers hold and its FMA units need to stay busy), best of 5.
  double fp32_gflops = 0.0;
  double fp64_gflops = 0.0;  ///< the same in double
  /// STREAM triad a = b + s c over three 128 MiB arrays (far beyond any cache), 12 bytes per
  /// element as STREAM counts them (write-allocate traffic not counted), best of 5.
  double bandwidth_gbs = 0.0;
  /// The clock /proc/cpuinfo reports (MHz; 0 when it reports none). A VM reports the nominal
  /// clock or none; cores boost above it.
  double reported_mhz = 0.0;
  double seconds = 0.0;  ///< the measurement's wall time

  /// fp32 vector FMAs a cycle a thread at the reported clock (what the CPU's FMA units deliver:
  /// 2 on most server cores; more means the cores ran above the reported clock). 0 without a clock.
  double fma_per_cycle() const;
  nlohmann::json to_json() const;
};

/// Measures all three on `threads` OpenMP threads with the widest supported ISA (about 0.3 s;
/// 384 MiB of memory for the triad).
MachinePeaks measure_peaks(int threads);
/// The same on a given ISA; throws kernels::Error when the CPU does not support it.
MachinePeaks measure_peaks(int threads, VectorIsa isa);

}  // namespace waco::kernels
