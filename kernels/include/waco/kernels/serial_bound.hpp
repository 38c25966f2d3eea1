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

// The serial loop's placement, measured on this machine. The same instructions run at different
// speeds depending on where their inner loop lies in its 64-byte lines: on an AMD EPYC Milan VM
// the serial loop with its inner loop across a line boundary (where -falign-functions=64 put it
// in every binary) took 1.5-1.9x the time of the same loop 16-48 bytes further on, on 9 matrices
// of 233-29k nonzeros, in f32 and f64 alike; on an AMD EPYC Zen 5 VM the loop padded to start a
// line ran 2x slower than unpadded (kernels/README.md, "Code alignment"). No one placement is
// known to suit every CPU, so the loop exists in kSerialLoopCopies copies, copy c after
// c x kSerialLoopCopyStep bytes of no-ops run once a call (never once a row), and the copy that
// runs is measured: the copies timed side by side on the bound's probe matrices (1-15 random
// columns a row) of 2,048 to 32,768 nonzeros, copy 0 (the placement before) unless another is
// faster by kSerialLoopMargin over the sizes (geometric mean of median time ratios); kept per
// value type in the user's cache for this machine (cache_probe.hpp's key), and measured before
// the bound, which times the chosen copy. WACO_CSR_SERIAL_COPY=c fixes it instead.
inline constexpr int kSerialLoopCopies = 4;
inline constexpr int kSerialLoopCopyStep = 16;
inline constexpr double kSerialLoopMargin = 0.05;

/// One measurement of the serial loop's copies for a value type.
struct SerialLoopProbe {
  Dtype dtype = Dtype::F32;
  /// Per copy: the geometric mean over the sizes of its median time over copy 0's (copy 0: 1).
  std::vector<double> relative;
  int copy = 0;          ///< serial_loop_copy_from(relative)
  double seconds = 0.0;  ///< wall time of the probe

  /// {"dtype", "relative": [...], "copy", "seconds"}.
  nlohmann::json to_json() const;
  /// The inverse of to_json(); throws Error when `j` is not such an object (a damaged file).
  static SerialLoopProbe from_json(const nlohmann::json& j);
};

/// The copy to run given each copy's time relative to copy 0: the fastest, when it is below
/// 1 - kSerialLoopMargin; else 0. Pure.
int serial_loop_copy_from(const std::vector<double>& relative);

/// Times the copies on `dtype` (serially: no OpenMP region). rounds: interleaved rounds a size.
SerialLoopProbe run_serial_loop_probe(Dtype dtype, int rounds = 15);

/// <user_cache_dir()>/csr-serial-loop.json.
std::string serial_loop_path();

/// The copy of the serial loop that runs for `dtype`: WACO_CSR_SERIAL_COPY when set (an Error
/// when it is not 0 to kSerialLoopCopies - 1), else this process's, else the one stored for this
/// machine, else a new probe (then stored; not an error when the file cannot be written).
/// Thread-safe; a lookup after the first is an atomic load.
int csr_spmv_serial_copy(Dtype dtype);

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
  int copy = 0;                 ///< the serial loop's copy it timed (csr_spmv_serial_copy)
  double seconds = 0.0;         ///< wall time of the probe

  /// {"threads", "dtype", "ratios": [[nnz, ratio], ...], "serial_nnz", "copy", "seconds"}.
  nlohmann::json to_json() const;
  /// The inverse of to_json(); throws Error when `j` is not such an object (a damaged file).
  static SerialBoundProbe from_json(const nlohmann::json& j);
};

/// The bound read off probe ratios (ascending sizes, not empty): where the ratio last falls
/// from >= 1 to < 1, interpolated linearly in log(size); half the smallest size when the parallel
/// loop is faster everywhere, the largest size when it is faster nowhere. Pure.
std::int64_t serial_bound_from_ratios(const std::vector<std::pair<std::int64_t, double>>& ratios);

/// A probe whose parallel loop took this many times the serial loop's time or more at the
/// largest size (131k nonzeros: ~0.1 ms of memory-bound work split over the threads, against a
/// few microseconds of fork and join) saw threads that did not run: a busy machine. Stored on
/// the AMD EPYC Milan VM after a probe beside a test run: ratios 6064 at 1k nonzeros down to 29.8
/// at 131k (a quiet probe: 3.0 down to 0.64), which ran every SpMV of up to 131k nonzeros
/// serially in every later process of that machine.
inline constexpr double kSerialProbeDisturbed = 1.5;
/// Probes taken again, at most, when one was disturbed (the least disturbed is kept).
inline constexpr int kSerialProbeRetakes = 2;

/// Whether the probe ratios (ascending sizes) show a disturbed probe (kSerialProbeDisturbed).
/// A disturbed stored probe is measured again by the next process that needs it. Pure.
bool serial_probe_disturbed(const std::vector<std::pair<std::int64_t, double>>& ratios);

/// Measures the bound on `threads` (>= 2) threads for `dtype` (OpenMP regions: not in a process
/// that forks afterwards). rounds: interleaved rounds a size.
SerialBoundProbe run_serial_bound_probe(int threads, Dtype dtype, int rounds = 21);

/// <user_cache_dir()>/csr-serial-bound.json.
std::string serial_bound_path();

/// The bound on `threads` threads for `dtype`: WACO_CSR_SERIAL_NNZ when set (an Error when it
/// is not a whole number), else this process's, else the one stored for this machine with the
/// serial loop's copy that runs (unless that probe was disturbed), else a new probe, taken again
/// up to kSerialProbeRetakes times while disturbed (then stored; not an error when the file
/// cannot be written). Thread-safe; a lookup after the first is an atomic load (threads up to 256).
/// Precondition: threads >= 2.
std::int64_t csr_spmv_serial_nnz(int threads, Dtype dtype);

/// The rule: whether an SpMV storing `nnz` entries runs serially on `threads` threads (one
/// thread, at most half the probe's smallest size, or at most the bound; the probe is never
/// asked about sizes outside its range).
bool csr_spmv_serial(std::int64_t nnz, int threads, Dtype dtype);

}  // namespace waco::kernels
