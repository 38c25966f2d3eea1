// The context block every JSON result carries: machine, build and run facts, so a number can be
// traced to what produced it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

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

/// The per-user cache directory of waco-hybrid: $XDG_CACHE_HOME/waco-hybrid, else
/// $HOME/.cache/waco-hybrid, else /tmp/waco-hybrid-<uid> (empty variables count as unset). Only
/// computes the path; nothing is created.
std::string user_cache_dir();

/// CPU model name from /proc/cpuinfo ("unknown" when absent).
std::string cpu_model();
/// The value of the first /proc/cpuinfo line that starts with `key` (after its colon, leading
/// blanks dropped); empty when there is none.
std::string cpuinfo_field(const std::string& key);
/// Each line of /proc/cpuinfo in turn (no newline) until `line_done` returns true; the file is
/// read only as far as that (nothing when it cannot be opened).
void scan_cpuinfo(const std::function<bool(std::string_view)>& line_done);
/// The CPU's lines of /proc/cpuinfo that name it, whole: the first "model name" line and the
/// first "flags" (x86) or "Features" (Arm) line (empty when absent). Read once a process: the
/// machine identity (cpu_model) and the kernel cache's host identity both name the CPU by them.
struct CpuinfoLines {
  std::string model;
  std::string flags;
};
const CpuinfoLines& cpuinfo_identity_lines();

/// Logical CPUs available to this process.
int available_cpus();

/// Ends the idle threads of the calling thread's OpenMP thread pool (omp_pause_resource_all,
/// soft: the next parallel region starts them again, ~0.1 ms); nothing inside a parallel region.
/// GNU libgomp keeps a region's threads spinning after it ends (GOMP_SPINCOUNT, 300,000 pauses
/// by default), on the cores that a tune's measuring children then time kernels on: a tune calls
/// it once its own parallel work (the choice) is done.
void release_idle_openmp_threads();

/// Starts the calling thread's OpenMP team of `threads` (once per thread and team size; again
/// after release_idle_openmp_threads) and moves each new thread that the scheduler placed on
/// the calling thread's CPU to another CPU it may run on: its affinity narrowed, then at once
/// given back (it is not pinned). Returns the seconds it took (0 when already placed).
/// Why: a new worker is woken onto the CPU of the thread that starts the region (wake-affine
/// placement), where that thread spins at the region's barrier, and runs only when the
/// scheduler moves it: on a 2-vCPU AMD EPYC Zen 5 guest the first two or three parallel regions
/// of 10 of 12 fresh processes took ~4-8 ms each (8-22 ms in all, against 2 ms with this; the
/// regions after it 3-6 us). Kernels timed, judged or probed on such regions ran 20-30x slower
/// than they run (an adaptive plan abandoned a 1.4x dia kernel; csr's serial-or-parallel
/// probe decided serial where parallel is 2.9x faster, serial_bound.cpp).
double place_openmp_team(int threads);

/// Physical memory of the machine in bytes (sysconf); +infinity when unknown.
double physical_memory_bytes();
/// Memory available to a new allocation now without swapping (/proc/meminfo MemAvailable), in
/// bytes; physical_memory_bytes() when the kernel does not say.
double available_memory_bytes();

/// CPUs of this process's affinity set kept busy by other processes: sampled from /proc/stat
/// over `seconds` while this process sleeps (so it does not count itself). -1 when unknown.
double busy_cpus(double seconds = 0.2);

/// A warning when the machine is too busy for a measurement on `threads` threads: busy_cpus()
/// plus `threads` exceeds the available CPUs by more than half a CPU. An OpenMP team then waits
/// for descheduled threads: on the 2-CPU KVM guest this was built on, with a compiler running
/// beside it, every 2-thread SpMV took the scheduler's 8 ms time slice instead of 0.1-0.8 ms.
/// Empty when the machine is free enough or its load is unknown. Takes `seconds` to sample.
std::string busy_machine_warning(int threads, double seconds = 0.2);

/// How long a cache line takes to go from one CPU to another and back: two threads pinned to the
/// first two CPUs of this process's affinity set hand a counter back and forth `trips` times a
/// batch; the median of `batches` batches' time per round trip, in nanoseconds (~5 ms at 500 ns).
/// -1 with fewer than two CPUs, when a thread cannot be pinned, or when it took longer than
/// `max_seconds` (other threads keep those CPUs busy). The caller's own affinity is left alone. A VM's two vCPUs are not always placed alike on the host: on the AMD EPYC Zen 5
/// VM this took 413-1252 ns most of the time and 92-152 ns at times, and a 3.5 us SpMV with two
/// threads and dynamic chunks (jagmesh7) ran at 3.2-4.6 us then, 5.3-6.7 us otherwise, while the
/// serial csr beside it stayed at 3.5 (tune/README.md, session 60). So a short parallel
/// kernel's speed, and a verdict about it, holds for the state it was measured in: tune, bench
/// and collect record this next to their timings.
double core_round_trip_ns(int trips = 2000, int batches = 5, double max_seconds = 0.1);

/// The git revision this binary was built from (generated at build time).
const char* git_revision();

/// Version string of waco-hybrid.
const char* version();
/// The current time as UTC ISO 8601 ("2026-11-25T22:38:58Z"): how results, the tuning cache and
/// every context block date things.
std::string utc_timestamp();

/// {"cpu", "cores_available", "threads", "cache_bytes": {l1d,l2,l3}, "cache_source" (the
///  CacheSizes::to_json() of cache_sizes()), "compiler", "flags", "build_type", "git_revision",
///  "counters", "date" (UTC ISO 8601), "waco_version"}.
nlohmann::json context_json(int threads, std::string_view counter_backend);

}  // namespace waco::kernels
