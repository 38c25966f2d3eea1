// The measured cache probe: one core's read bandwidth over growing working sets, and the cache
// capacities read off that curve. The last source of kernels::cache_sizes(), used only when sysfs
// and cpuid give no plausible last-level cache (see context.hpp). Run once per machine; the result
// is kept as JSON under the user's cache directory (cache_probe()).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace waco::kernels {

/// One point of the bandwidth curve: the best read bandwidth over a working set of `bytes`.
struct CacheProbePoint {
  std::int64_t bytes = 0;
  double gbps = 0.0;  ///< 1e9 bytes per second
};

/// What the probe measured and found. Capacities are 0 when not found.
struct CacheProbeResult {
  std::vector<CacheProbePoint> curve;  ///< ascending sizes
  std::int64_t l1d = 0;
  std::int64_t l2 = 0;   ///< private L2: where bandwidth falls from the L2 plateau
  std::int64_t l3 = 0;   ///< effective last-level cache one core gets (beyond L2)
  double seconds = 0.0;  ///< wall time of the measurement (allocation included)
  int passes = 0;        ///< sweeps over all sizes
  std::string note;      ///< why a level was not found, or why the probe did not run; may be empty

  /// {"curve": [[bytes, gbps], ...], "l1d", "l2", "l3", "seconds", "passes", "note"}.
  nlohmann::json to_json() const;
  /// The inverse of to_json(). Throws Error when `j` is not such an object (a corrupt file).
  static CacheProbeResult from_json(const nlohmann::json& j);
};

struct CacheProbeOptions {
  std::int64_t min_bytes = 16 << 10;
  /// Largest working set; 0: min(256 MiB, physical memory / 8).
  std::int64_t max_bytes = 0;
  int steps_per_octave = 4;
  /// Passes continue while the next one is expected to end within this many seconds (at least
  /// kMinProbePasses, at most kMaxProbePasses passes).
  double budget_seconds = 0.8;
};

inline constexpr int kMinProbePasses = 2;
inline constexpr int kMaxProbePasses = 8;

/// Measures the bandwidth curve (single thread) and detects the levels (detect_cache_levels).
/// Never throws for a machine reason: when the buffer cannot be allocated the curve is empty and
/// `note` says why.
CacheProbeResult run_cache_probe(const CacheProbeOptions& options = {});

/// Capacities read off a bandwidth curve (ascending sizes); fills l1d, l2, l3 and appends to note
/// when a level is not found. Pure: the tests feed it synthetic curves.
void detect_cache_levels(CacheProbeResult& result);

/// The machine the cached result belongs to: {"cpu": cpu_model(), "cpus": available_cpus(),
/// "machine": /etc/machine-id, or the host name when that is absent}.
nlohmann::json cache_probe_key();

/// A measured fact of this machine kept in the user's cache (the cache probe's result; the csr
/// SpMV serial bound, serial_bound.hpp): a JSON file {"format": format, "key": key, "result":
/// result}. load_machine_fact: the result when the file is there, whole, of this format and for
/// this key; nullopt otherwise (absent, unreadable, corrupt, truncated, another format or
/// machine). store_machine_fact: written to a temporary file then renamed (directories
/// created), so that a reader never sees half a file; false when it cannot be written.
std::optional<nlohmann::json> load_machine_fact(const std::string& path, int format,
                                               const nlohmann::json& key);
bool store_machine_fact(const std::string& path, int format, const nlohmann::json& key,
                        const nlohmann::json& result);

/// <user_cache_dir()>/cache-probe.json.
std::string cache_probe_path();

/// The result stored at `path` for `key`; nullopt when the file is absent, unreadable, corrupt or
/// truncated, of another format version, or for another key.
std::optional<CacheProbeResult> load_cache_probe(const std::string& path,
                                                 const nlohmann::json& key);

/// Stores `result` for `key` at `path` (directories created; written to a temporary file then
/// renamed, so a reader never sees half a file). False when it cannot be written (not an error).
bool store_cache_probe(const std::string& path, const nlohmann::json& key,
                       const CacheProbeResult& result);

/// The probe of this machine: with use_cache, the result kept in this process, else the one
/// stored at cache_probe_path() for cache_probe_key(), else a new measurement (then stored, unless
/// it measured nothing).
/// Without use_cache, always measures anew and replaces the stored result. Thread-safe; the
/// reference stays valid for the life of the process.
const CacheProbeResult& cache_probe(bool use_cache = true);

}  // namespace waco::kernels
