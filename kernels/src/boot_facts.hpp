// Facts of this machine that stay until it boots again, kept in the user's cache (internal to
// kernels/): the sysfs cache entries (cache_sizes.cpp) and the CPU's identity lines of
// /proc/cpuinfo (context.cpp). A process's first machine identity read them fresh, ~0.3-0.4 ms
// on the 2-vCPU VMs (sysfs files and /proc/cpuinfo are made by the kernel at each read), more
// than the rest of an adaptive plan's first step; read back from the cache they cost ~0.05 ms.
//
// The file, <user_cache_dir()>/machine-facts-<host>.json (a host's own, for homes shared by
// several machines): {"format", "boot_time" (the boot's wall-clock instant: CLOCK_REALTIME less CLOCK_BOOTTIME),
// "facts": {name: value}}. A file of another boot (its instant more than a second from this
// one's), or one that does not parse, is written anew; a fact the file lacks is computed and
// added. Writing is best effort (an unwritable cache only costs the reads). Without the clocks
// nothing is kept.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace waco::kernels::detail {

/// The fact `name` as kept for this boot, else compute() (kept for the next process). A value
/// that `valid` refuses (or that throws in it) is computed again.
nlohmann::json boot_fact(const std::string& name, const std::function<nlohmann::json()>& compute,
                         const std::function<bool(const nlohmann::json&)>& valid);

}  // namespace waco::kernels::detail
