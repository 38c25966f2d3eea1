// The context block every JSON result carries: machine, build and run facts, so a number can be
// traced to what produced it.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace waco::kernels {

/// Cache sizes in bytes read from sysfs (0 when unknown). llc is the largest level found.
struct CacheSizes {
  std::int64_t l1d = 0;
  std::int64_t l2 = 0;
  std::int64_t l3 = 0;
  std::int64_t llc() const;
};

/// Reads /sys/devices/system/cpu/cpu0/cache (cached after the first call).
const CacheSizes& cache_sizes();

/// CPU model name from /proc/cpuinfo ("unknown" when absent).
std::string cpu_model();

/// Logical CPUs available to this process.
int available_cpus();

/// Physical memory of the machine in bytes (sysconf); +infinity when unknown.
double physical_memory_bytes();

/// CPUs of this process's affinity set kept busy by other processes: sampled from /proc/stat
/// over `seconds` while this process sleeps (so it does not count itself). -1 when unknown.
double busy_cpus(double seconds = 0.2);

/// A warning when the machine is too busy for a measurement on `threads` threads: busy_cpus()
/// plus `threads` exceeds the available CPUs by more than half a CPU. An OpenMP team then waits
/// for descheduled threads: on the 2-CPU KVM guest this was built on, with a compiler running
/// beside it, every 2-thread SpMV took the scheduler's 8 ms time slice instead of 0.1-0.8 ms.
/// Empty when the machine is free enough or its load is unknown. Takes `seconds` to sample.
std::string busy_machine_warning(int threads, double seconds = 0.2);

/// The git revision this binary was built from (generated at build time).
const char* git_revision();

/// Version string of waco-hybrid.
const char* version();

/// {"cpu", "cores_available", "threads", "cache_bytes": {l1d,l2,l3}, "compiler", "flags",
///  "build_type", "git_revision", "counters", "date" (UTC ISO 8601), "waco_version"}.
nlohmann::json context_json(int threads, std::string_view counter_backend);

}  // namespace waco::kernels
