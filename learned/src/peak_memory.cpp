// Peak and current resident memory from /proc/self/status (Linux), with a getrusage fallback.
#include "waco/learned/peak_memory.hpp"

#include <sys/resource.h>

#include <fstream>
#include <sstream>
#include <string>

namespace waco::learned {
namespace {

// The value in kB of a "Key:   123 kB" line of /proc/self/status, -1 when absent.
std::int64_t status_kb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0 && line.size() > key.size() &&
        line[key.size()] == ':') {
      std::istringstream is(line.substr(key.size() + 1));
      std::int64_t kb = -1;
      is >> kb;
      return kb;
    }
  }
  return -1;
}

}  // namespace

std::int64_t peak_rss_bytes() {
  const std::int64_t kb = status_kb("VmHWM");
  if (kb >= 0) return kb * 1024;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0) return static_cast<std::int64_t>(ru.ru_maxrss) * 1024;
  return 0;
}

std::int64_t current_rss_bytes() {
  const std::int64_t kb = status_kb("VmRSS");
  return kb >= 0 ? kb * 1024 : 0;
}

}  // namespace waco::learned
