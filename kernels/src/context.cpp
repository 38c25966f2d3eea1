// The run context recorded with every result: CPU, caches (cache_sizes.cpp), cores, compiler and
// flags as built, git revision, counter backend, date; the machine's memory and load.
#include "waco/kernels/context.hpp"

#include <omp.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>
#include <string>

#include "boot_facts.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::kernels {

std::string user_cache_dir() {
  const auto join = [](std::string dir, const char* name) {
    if (dir.back() != '/') dir += '/';
    return dir + name;
  };
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return join(xdg, "waco-hybrid");
  if (const char* home = std::getenv("HOME"); home && *home)
    return join(home, ".cache/waco-hybrid");
  return "/tmp/waco-hybrid-" + std::to_string(::getuid());
}

void scan_cpuinfo(const std::function<bool(std::string_view)>& line_done) {
  // Read as it is needed: the kernel makes /proc/cpuinfo one processor's record at a time (each
  // with that processor's current clock), and a buffered stream (8 KiB at once) had it make
  // every record for a line of the first (2-vCPU VM, the other vCPU idle: 0.13-0.20 ms against
  // 0.05-0.08 ms for the first record alone).
  const int fd = ::open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::string pending;
  char buf[1024];
  bool done = false;
  while (!done) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<std::size_t>(n));
    std::size_t from = 0;
    for (std::size_t nl; !done && (nl = pending.find('\n', from)) != std::string::npos; from = nl + 1)
      done = line_done(std::string_view(pending).substr(from, nl - from));
    pending.erase(0, from);
  }
  if (!done && !pending.empty()) line_done(pending);  // a last line without its newline
  ::close(fd);
}

std::string cpuinfo_field(const std::string& key) {
  std::string value;
  scan_cpuinfo([&](std::string_view line) {
    if (line.substr(0, key.size()) != key) return false;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return false;
    value = std::string(line.substr(colon + 1));
    value.erase(0, value.find_first_not_of(" \t"));
    return true;
  });
  return value;
}

const CpuinfoLines& cpuinfo_identity_lines() {
  // Kept for the boot in the user's cache (boot_facts.hpp): the kernel makes /proc/cpuinfo at
  // each read.
  static const CpuinfoLines lines = [] {
    const nlohmann::json kept = detail::boot_fact(
        "cpuinfo_identity",
        [] {
          CpuinfoLines l;
          scan_cpuinfo([&](std::string_view line) {
            if (l.model.empty() && line.substr(0, 10) == "model name") l.model = line;
            if (l.flags.empty() &&
                (line.substr(0, 5) == "flags" || line.substr(0, 8) == "Features"))
              l.flags = line;
            return !l.model.empty() && !l.flags.empty();
          });
          return nlohmann::json{{"model", l.model}, {"flags", l.flags}};
        },
        [](const nlohmann::json& j) {
          return j.at("model").is_string() && j.at("flags").is_string();
        });
    return CpuinfoLines{kept.at("model").get<std::string>(), kept.at("flags").get<std::string>()};
  }();
  return lines;
}

std::string cpu_model() {
  // Once a process: every tune's machine identity (tuning cache, calibration) names it. The
  // value of the first "model name" line that has one (cpuinfo_field's rule).
  static const std::string model = [] {
    const std::string& line = cpuinfo_identity_lines().model;
    const auto colon = line.find(':');
    std::string v = colon == std::string::npos ? cpuinfo_field("model name") : line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v.empty() ? std::string("unknown") : v;
  }();
  return model;
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

double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {  // "MemAvailable:   19283744 kB" (some lines have no unit)
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    const double kib = std::strtod(line.c_str() + 13, nullptr);
    if (kib > 0) return kib * 1024.0;
  }
  return physical_memory_bytes();
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

double core_round_trip_ns(int trips, int batches, double max_seconds) {
  cpu_set_t set;
  if (trips < 1 || batches < 1 || max_seconds <= 0 || sched_getaffinity(0, sizeof(set), &set) != 0)
    return -1.0;
  int cpu[2] = {-1, -1};
  for (int c = 0, found = 0; c < CPU_SETSIZE && found < 2; ++c)
    if (CPU_ISSET(c, &set)) cpu[found++] = c;
  if (cpu[1] < 0) return -1.0;
  struct alignas(64) Line {
    std::atomic<long> turn{0};  // odd: the echo's turn; even: the initiator's
  } line;
  std::atomic<bool> pinned{true};
  const auto pin = [&pinned](int c) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0) pinned = false;
  };
  const long total = static_cast<long>(trips) * batches;
  std::vector<double> per_trip;
  // Both sides go on whether or not pinning worked, so that neither waits for the other forever;
  // on CPUs other threads keep busy a round trip waits for time slices: the initiator gives up
  // after max_seconds (checking the clock every 1024 spins) and the echo stops with it.
  std::atomic<bool> gave_up{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_seconds);
  std::thread echo([&] {
    pin(cpu[1]);
    for (long i = 0; i < total; ++i) {
      while (line.turn.load(std::memory_order_acquire) != 2 * i + 1)
        if (gave_up.load(std::memory_order_relaxed)) return;
      line.turn.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::thread initiator([&] {
    pin(cpu[0]);
    long i = 0;
    unsigned spins = 0;
    for (int b = 0; b < batches; ++b) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < trips; ++k, ++i) {
        line.turn.store(2 * i + 1, std::memory_order_release);
        while (line.turn.load(std::memory_order_acquire) != 2 * i + 2)
          if ((++spins & 1023u) == 0 && std::chrono::steady_clock::now() > deadline) {
            gave_up = true;
            return;
          }
      }
      const std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
      per_trip.push_back(dt.count() / trips);
    }
  });
  initiator.join();
  echo.join();
  if (!pinned || gave_up) return -1.0;
  std::sort(per_trip.begin(), per_trip.end());
  return per_trip[per_trip.size() / 2];
}

const char* version() { return WACO_VERSION; }

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return date;
}

nlohmann::json context_json(int threads, std::string_view counter_backend) {
  const CacheSizes& c = cache_sizes();
  const std::string date = utc_timestamp();
  return nlohmann::json{
      {"cpu", cpu_model()},
      {"cores_available", available_cpus()},
      {"threads", threads},
      {"cache_bytes", {{"l1d", c.l1d}, {"l2", c.l2}, {"l3", c.l3}}},
      {"cache_source", c.to_json()},
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
