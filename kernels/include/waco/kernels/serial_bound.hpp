// The csr SpMV rule's serial bound, measured on this machine: an SpMV of at most this many
// nonzeros runs its rows serially, without an OpenMP region where no matrix is at hand to time
// (the dia baseline, chunk=auto of dcsr and csc, the drop-in header). The csr baseline,
// the csr schedule and the csr a plan serves decide on the matrix instead (csr_spmv_serial_for,
// baseline_loops.hpp), within the same range and under the same WACO_CSR_SERIAL_NNZ.
//
// Where a parallel region stops paying is a property of the machine, not of the code: an empty
// two-thread region (fork, join) took ~3 us on an AMD EPYC Zen 5 KVM guest, where the serial
// loop was faster up to 11-22k nonzeros in f32 (~3.3k in f64), against the fixed bound of 3,072
// measured on the generic AMD EPYC VM of sessions 39-43. So the bound is measured: the
// baseline's own serial and parallel loops, interleaved, each timed call after two of its own,
// on synthetic matrices of 1,024 to 131,072 nonzeros (rows of 1-15 random columns; ~30 ms),
// read off where the median parallel/serial time ratio last crosses 1, and kept per thread count
// and value type in the user's cache beside the cache probe's result, for this machine
// (cache_probe.hpp's key). kernels/README.md, "The serial bound", has the measurements.
// WACO_CSR_SERIAL_NNZ=N fixes it instead (tests; a user who wants the rule of another machine).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/kernels/values.hpp"

namespace waco::kernels {

/// The probe's smallest and largest sizes (nonzeros, doubling). An SpMV of at most half the
/// smallest runs serially and one above the largest in parallel without the probe being asked.
inline constexpr std::int64_t kSerialProbeMinNnz = 1024;
inline constexpr std::int64_t kSerialProbeMaxNnz = 131072;

/// One measurement of the bound for a thread count and value type.
struct SerialBoundProbe {
  int threads = 0;
  Dtype dtype = Dtype::F32;
  /// Per size (nonzeros, ascending): the median over interleaved rounds of the parallel loop's
  /// time over the serial loop's.
  std::vector<std::pair<std::int64_t, double>> ratios;
  std::int64_t serial_nnz = 0;  ///< serial_bound_from_ratios(ratios)
  double seconds = 0.0;         ///< wall time of the probe

  /// {"threads", "dtype", "ratios": [[nnz, ratio], ...], "serial_nnz", "seconds"}.
  nlohmann::json to_json() const;
  /// The inverse of to_json(); throws Error when `j` is not such an object (a damaged file).
  static SerialBoundProbe from_json(const nlohmann::json& j);
};

/// The bound read off probe ratios (ascending sizes, not empty): where the ratio last falls
/// from >= 1 to < 1, interpolated linearly in log(size); half the smallest size when the parallel
/// loop is faster everywhere, the largest size when it is faster nowhere. Pure.
std::int64_t serial_bound_from_ratios(const std::vector<std::pair<std::int64_t, double>>& ratios);

/// Measures the bound on `threads` (>= 2) threads for `dtype` (OpenMP regions: not in a process
/// that forks afterwards). rounds: interleaved rounds a size.
SerialBoundProbe run_serial_bound_probe(int threads, Dtype dtype, int rounds = 21);

/// <user_cache_dir()>/csr-serial-bound.json.
std::string serial_bound_path();

/// The bound on `threads` threads for `dtype`: WACO_CSR_SERIAL_NNZ when set (an Error when it
/// is not a whole number), else this process's, else the one stored for this machine, else a new
/// probe (then stored; not an error when the file cannot be written). Thread-safe; a lookup
/// after the first is an atomic load (threads up to 256). Precondition: threads >= 2.
std::int64_t csr_spmv_serial_nnz(int threads, Dtype dtype);

/// The rule: whether an SpMV storing `nnz` entries runs serially on `threads` threads (one
/// thread, at most half the probe's smallest size, or at most the bound; the probe is never
/// asked about sizes outside its range).
bool csr_spmv_serial(std::int64_t nnz, int threads, Dtype dtype);

}  // namespace waco::kernels
