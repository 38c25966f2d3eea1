// Peak and current resident memory from /proc/self/status (Linux), with a getrusage fallback.
#include "waco/kernels/process_memory.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace waco::kernels {
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

bool reset_peak_rss() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

}  // namespace waco::kernels
