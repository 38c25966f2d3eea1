// The context block every JSON result carries: machine, build and run facts, so a number can be
// traced to what produced it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "waco/kernels/cache_sizes.hpp"

namespace waco::kernels {

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
