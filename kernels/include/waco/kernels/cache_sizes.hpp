// The machine's cache sizes as the tile model and the decisions about data larger than the cache
// read them: sysfs, CPUID (glibc), the measured probe, and the rules that choose among them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "waco/kernels/cache_probe.hpp"

namespace waco::kernels {

/// Largest last-level cache a CPU is believed to have to itself. A source whose LLC size divided
/// by the CPUs sharing it (the available CPUs when the source does not say) exceeds this is not
/// trusted blindly: the figure is capped at this share (see resolve_cache_sizes for why capped
/// rather than measured). The largest real per-core L3 shares are about 12 MiB (3D
/// V-Cache desktop parts: 96-128 MiB over 8 cores); 32-48 MiB a core occur only on frequency-
/// optimized EPYC "F"/"X" parts with very few cores per CCD, and a 2-CPU guest given one of
/// those is rare. A VM guest, however, is told the host's whole L3 (CPUID: 256 MiB on an EPYC
/// Milan host, 508 MiB on Zen 5; sysfs: 105 MiB on an Intel host) while it has 2 vCPUs: 50-250 MiB
/// a CPU, which the tile model would take as license for tiles that no cache holds.
inline constexpr std::int64_t kMaxPlausibleLlcPerCpu = std::int64_t{32} << 20;

/// Cache sizes in bytes (0 when unknown), each from the first source of the chain that gives it:
/// "sysfs" (<WACO_SYSFS_ROOT or /sys>/devices/system/cpu/cpu0/cache), "cpuid" (glibc's sysconf
/// _SC_LEVEL*_CACHE_SIZE, CPUID on x86), "probe" (measured, cache_probe.hpp). See
/// resolve_cache_sizes() for the rules.
struct CacheSizes {
  std::int64_t l1d = 0;
  std::int64_t l2 = 0;
  std::int64_t l3 = 0;
  /// CPUs sharing the last-level cache: sysfs shared_cpu_list of the largest non-instruction
  /// level when it applies to the LLC figure, else the available CPUs. 0 only in a raw source
  /// that does not say (read_sysfs_cache_sizes without lists, read_cpuid_cache_sizes).
  int llc_sharing_cpus = 0;
  /// Where llc_sharing_cpus came from: "sysfs" or "available" (the available CPUs).
  std::string llc_sharing_source = "available";
  /// Source of the LLC figure, llc() (what the tile model uses): "sysfs", "cpuid", "probe" or
  /// "none" (no level known).
  std::string source = "none";
  /// Source of each level: "sysfs", "cpuid", "probe" or "none".
  std::string l1d_source = "none";
  std::string l2_source = "none";
  std::string l3_source = "none";
  /// In words: why a source was passed over or a level filled from the next one; may be empty.
  std::string note;
  /// The largest level found (l3, else l2, else l1d; 0 when none).
  std::int64_t llc() const;
  /// {"l1d", "l2", "l3", "source", "sources": {"l1d", "l2", "l3"}, "llc_sharing_cpus",
  ///  "llc_sharing_source", "note"}.
  nlohmann::json to_json() const;
};

/// A byte count for people: "32 MiB", "1.5 MiB", "48 KiB" (4 significant digits).
std::string bytes_text(std::int64_t bytes);

/// Number of CPUs in a sysfs CPU list such as "0-3,8,10-11" (a trailing newline is fine); 0 when
/// it is empty or does not parse.
int count_cpu_list(const std::string& list);

/// Reads <sysfs_root>/devices/system/cpu/cpu0/cache/index*/{level,type,size,shared_cpu_list}.
/// Levels without an entry are 0; llc_sharing_cpus is the shared_cpu_list count of the largest
/// non-instruction level (0 without one); sources are "sysfs" for the levels found; note says
/// when the directory has no cache entries. Never throws.
CacheSizes read_sysfs_cache_sizes(const std::string& sysfs_root);

/// The sysfs root of this process: $WACO_SYSFS_ROOT when set and not empty, else "/sys".
std::string sysfs_root();

/// glibc's sysconf(_SC_LEVEL1_DCACHE_SIZE / _SC_LEVEL2_CACHE_SIZE / _SC_LEVEL3_CACHE_SIZE)
/// (CPUID on x86). Says nothing about sharing (llc_sharing_cpus 0).
CacheSizes read_cpuid_cache_sizes();

/// The chain. Each level comes from the first of `sysfs`, `cpuid` that gives it (size > 0); the
/// note says when sysfs lacked a level that cpuid gave. The L3 of a source is taken as it is when
/// plausible: its size / the CPUs sharing it (sysfs's count for sysfs's L3, else `cpus`) is at
/// most kMaxPlausibleLlcPerCpu. When every reported L3 is implausible, the first is capped at
/// kMaxPlausibleLlcPerCpu a CPU, with its source: measured, the tile model chose better tiles at
/// such capacities than at the probe's smaller effective one (context.cpp). When no source
/// reports an L3 at all, `probe` is called (once; an exception counts as finding nothing): its L3
/// is taken, and its L1d/L2 fill levels still missing; when it finds none, l3 stays 0 and the LLC
/// is the largest level left (source "none" when there is no level). The note says what each
/// source reported and what was done with it.
CacheSizes resolve_cache_sizes(const CacheSizes& sysfs, const CacheSizes& cpuid,
                               const std::function<CacheProbeResult()>& probe, int cpus);

/// The chain of this machine: read_sysfs_cache_sizes(sysfs_root()), read_cpuid_cache_sizes(),
/// cache_probe() (run only when needed; its result is kept per machine), available_cpus().
/// Computed on the first call (thread-safe).
const CacheSizes& cache_sizes();

/// The last-level cache of this machine as the decisions about data larger than the cache read
/// it (heuristics::shared_data, the narrow-indices pass, the generated kernels' streaming stores
/// of the output): sysfs (WACO_SYSFS_ROOT), else CPUID, at most kMaxPlausibleLlcPerCpu a CPU (a
/// VM guest is told its host's whole 105-508 MiB L3), without the measured probe; the whole
/// cache in bytes, not the tile model's share of it; 0 when neither source tells.
std::int64_t last_level_cache_bytes();

}  // namespace waco::kernels
