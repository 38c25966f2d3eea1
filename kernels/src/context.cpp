// The run context recorded with every result: CPU, caches (sysfs), cores, compiler and flags as
// built, git revision, counter backend, date.
#include "waco/kernels/context.hpp"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <fstream>
#include <limits>
#include <string>

namespace waco::kernels {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// "32768K", "1M", "512" -> bytes; 0 when unparsable.
std::int64_t parse_size(const std::string& s) {
  std::size_t pos = 0;
  std::int64_t v = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos])))
    v = v * 10 + (s[pos++] - '0');
  if (pos == 0) return 0;
  if (pos < s.size()) {
    const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(s[pos])));
    if (unit == 'K') v <<= 10;
    else if (unit == 'M') v <<= 20;
    else if (unit == 'G') v <<= 30;
  }
  return v;
}

CacheSizes read_cache_sizes() {
  CacheSizes c;
  const std::string base = "/sys/devices/system/cpu/cpu0/cache/index";
  for (int i = 0; i < 16; ++i) {
    const std::string dir = base + std::to_string(i) + "/";
    const std::string level = read_first_line(dir + "level");
    if (level.empty()) break;
    const std::string type = read_first_line(dir + "type");
    const std::int64_t size = parse_size(read_first_line(dir + "size"));
    if (level == "1" && type == "Data") c.l1d = size;
    else if (level == "2") c.l2 = size;
    else if (level == "3") c.l3 = size;
  }
  return c;
}

}  // namespace

std::int64_t CacheSizes::llc() const { return std::max({l1d, l2, l3}); }

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = read_cache_sizes();
  return sizes;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        return v;
      }
    }
  }
  return "unknown";
}

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return omp_get_num_procs();
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(pages) * static_cast<double>(page);
}

const char* version() { return WACO_VERSION; }

nlohmann::json context_json(int threads, std::string_view counter_backend) {
  const CacheSizes& c = cache_sizes();
  char date[32];
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return nlohmann::json{
      {"cpu", cpu_model()},
      {"cores_available", available_cpus()},
      {"threads", threads},
      {"cache_bytes", {{"l1d", c.l1d}, {"l2", c.l2}, {"l3", c.l3}}},
      {"compiler", WACO_COMPILER},
      {"flags", WACO_FLAGS},
      {"build_type", WACO_BUILD_TYPE},
      {"git_revision", git_revision()},
      {"counters", std::string(counter_backend)},
      {"date", date},
      {"waco_version", WACO_VERSION},
  };
}

}  // namespace waco::kernels
