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

/// The git revision this binary was built from (generated at build time).
const char* git_revision();

/// Version string of waco-hybrid.
const char* version();

/// {"cpu", "cores_available", "threads", "cache_bytes": {l1d,l2,l3}, "compiler", "flags",
///  "build_type", "git_revision", "counters", "date" (UTC ISO 8601), "waco_version"}.
nlohmann::json context_json(int threads, std::string_view counter_backend);

}  // namespace waco::kernels
