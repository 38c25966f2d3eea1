// The run context recorded with every result: CPU, caches (sysfs), cores, compiler and flags as
// built, git revision, counter backend, date.
#include "waco/kernels/context.hpp"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>
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

namespace {

/// Busy and total jiffies of each CPU in `set`, from /proc/stat; empty when unreadable.
std::vector<std::pair<double, double>> cpu_jiffies(const cpu_set_t& set) {
  std::ifstream in("/proc/stat");
  std::vector<std::pair<double, double>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 3, "cpu") != 0 || line.size() < 4 || !std::isdigit(line[3])) continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    fields >> cpu;
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set)) continue;
    // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
    double v[8] = {0, 0, 0, 0, 0, 0, 0, 0}, total = 0;
    for (double& x : v) {
      fields >> x;
      total += x;
    }
    out.emplace_back(total - v[3] - v[4], total);
  }
  return out;
}

}  // namespace

double busy_cpus(double seconds) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1.0;
  const auto before = cpu_jiffies(set);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const auto after = cpu_jiffies(set);
  if (before.empty() || before.size() != after.size()) return -1.0;
  double busy = 0.0;
  for (std::size_t i = 0; i < before.size(); ++i) {
    const double dt = after[i].second - before[i].second;
    if (dt > 0) busy += (after[i].first - before[i].first) / dt;
  }
  return busy;
}

std::string busy_machine_warning(int threads, double seconds) {
  const double busy = busy_cpus(seconds);
  const int cpus = available_cpus();
  if (busy < 0 || busy + threads <= cpus + 0.5) return {};
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "the machine is busy (other processes keep %.1f of this run's %d CPUs busy, and "
                "it runs %d threads): multi-threaded timings will include waits for descheduled "
                "threads; compare only side-by-side ratios, or use fewer --threads",
                busy, cpus, threads);
  return buf;
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
