// The Linux perf_event backend of the counters interface, on the raw perf_event_open syscall
// (no libpfm, no perf tool).
//
// What is counted: user-space events (exclude_kernel, exclude_hv: allowed at the default
// perf_event_paranoid = 2) of the whole process. One event group (leader + members, scheduled on
// the PMU together) is opened per thread that exists at open time — OpenMP keeps a pool of worker
// threads, which a calling-thread-only counter would miss — with inherit = 1 so that threads
// created later are counted too. Each descriptor is read on its own with TOTAL_TIME_ENABLED and
// TOTAL_TIME_RUNNING (PERF_FORMAT_GROUP cannot be combined with inherit on older kernels), and the
// region's count is the difference of two readings, scaled by enabled / running when the kernel
// multiplexed the group.
//
// Unsupported is detected, with the reason: perf_event_open failing (ENOENT: no such hardware
// event, as in a VM without a virtual PMU; EACCES/EPERM: perf_event_paranoid; EOPNOTSUPP), or a
// probe loop after opening in which the group was never scheduled (time_enabled > 0 but
// time_running == 0) or counted nothing.
#include <dirent.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "counters_backends.hpp"
#include "waco/kernels/error.hpp"

namespace waco::kernels::detail {
namespace {

constexpr std::uint64_t hw_cache(std::uint64_t cache, std::uint64_t op, std::uint64_t result) {
  return cache | (op << 8) | (result << 16);
}

long perf_event_open(perf_event_attr* attr, pid_t pid, int cpu, int group_fd, unsigned long flags) {
  return syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
}

std::string paranoid_level() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  std::string level;
  if (!(in >> level)) return "unknown";
  return level;
}

std::string open_failure(const std::string& event, int err) {
  std::string why = "perf_event_open(" + event + "): " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return why + ": the kernel exposes no hardware PMU for this event (typical in a VM "
                   "without a virtual PMU)";
    case EOPNOTSUPP:
      return why + ": this PMU does not support the event";
    case EACCES:
    case EPERM:
      return why + ": not permitted (kernel.perf_event_paranoid = " + paranoid_level() +
             "; lower it or grant CAP_PERFMON)";
    case EMFILE:
    case ENFILE:
      return why + ": out of file descriptors";
    default:
      return why;
  }
}

/// One reading of a counter descriptor.
struct Reading {
  std::uint64_t value = 0, enabled = 0, running = 0;
};

bool read_counter(int fd, Reading& r) {
  std::uint64_t buf[3];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n != static_cast<ssize_t>(sizeof buf)) return false;
  r = {buf[0], buf[1], buf[2]};
  return true;
}

std::vector<pid_t> process_threads() {
  std::vector<pid_t> tids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (dirent* ent = readdir(dir)) {
    if (ent->d_name[0] == '.') continue;
    tids.push_back(static_cast<pid_t>(std::strtol(ent->d_name, nullptr, 10)));
  }
  closedir(dir);
  return tids;
}

class PerfCounters final : public Counters {
 public:
  explicit PerfCounters(std::vector<std::string> events) : events_(std::move(events)) {}
  PerfCounters(const PerfCounters&) = delete;
  PerfCounters& operator=(const PerfCounters&) = delete;
  ~PerfCounters() override {
    for (auto& g : groups_) {
      for (int fd : g) {
        if (fd >= 0) ::close(fd);
      }
    }
  }

  /// Opens one group per thread; returns the reason on failure (empty on success).
  std::string open() {
    std::vector<PerfEventConfig> configs;
    for (const auto& e : events_) {
      auto c = perf_event_config(e);
      WACO_ASSERT(c.has_value(), "perf: a validated generic event has no perf encoding");
      configs.push_back(*c);
    }
    const auto self = static_cast<pid_t>(syscall(SYS_gettid));
    std::vector<pid_t> tids = process_threads();
    // The calling thread first: its failure is the environment's answer.
    tids.erase(std::remove(tids.begin(), tids.end(), self), tids.end());
    tids.insert(tids.begin(), self);
    for (pid_t tid : tids) {
      std::vector<int> group;
      for (std::size_t e = 0; e < configs.size(); ++e) {
        perf_event_attr attr;
        std::memset(&attr, 0, sizeof attr);
        attr.size = sizeof attr;
        attr.type = configs[e].type;
        attr.config = configs[e].config;
        attr.disabled = e == 0 ? 1 : 0;  // members follow their leader
        attr.inherit = 1;
        attr.exclude_kernel = 1;
        attr.exclude_hv = 1;
        attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
        const int leader = group.empty() ? -1 : group.front();
        const long fd = perf_event_open(&attr, tid, -1, leader, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
          const int err = errno;
          for (int f : group) ::close(f);
          group.clear();
          if (err == ESRCH && tid != self) break;  // the thread exited meanwhile
          return open_failure(events_[e], err);
        }
        group.push_back(static_cast<int>(fd));
      }
      if (!group.empty()) groups_.push_back(std::move(group));
    }
    if (groups_.empty()) return "perf: no thread could be counted";
    return probe();
  }

  std::string_view backend() const override { return "perf"; }
  std::vector<std::string> events() const override { return events_; }

  void start() override {
    base_ = read_all();
    for (auto& g : groups_) ::ioctl(g.front(), PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
  }

  CounterValues stop() override {
    for (auto& g : groups_) ::ioctl(g.front(), PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
    const auto now = read_all();
    CounterValues out;
    for (std::size_t e = 0; e < events_.size(); ++e) {
      double total = 0.0;
      bool enabled = false, ran = false;
      for (std::size_t g = 0; g < groups_.size(); ++g) {
        const Reading& a = base_.empty() ? Reading{} : base_[g][e];
        const Reading& b = now[g][e];
        const std::uint64_t value = b.value - a.value;
        const std::uint64_t en = b.enabled - a.enabled;
        const std::uint64_t run = b.running - a.running;
        if (en > 0) enabled = true;
        if (run == 0) continue;
        ran = true;
        total += run < en ? static_cast<double>(value) * static_cast<double>(en) /
                                static_cast<double>(run)
                          : static_cast<double>(value);
      }
      // An event that was enabled but never on the PMU has no count: leave it out rather than
      // report a false zero.
      if (enabled && !ran) continue;
      out[events_[e]] = static_cast<std::uint64_t>(total + 0.5);
    }
    return out;
  }

 private:
  std::vector<std::vector<Reading>> read_all() const {
    std::vector<std::vector<Reading>> r(groups_.size());
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      r[g].resize(groups_[g].size());
      for (std::size_t e = 0; e < groups_[g].size(); ++e) {
        // A failed read leaves zeros; a thread's descriptor stays readable after it exits.
        read_counter(groups_[g][e], r[g][e]);
      }
    }
    return r;
  }

  /// Counts a short loop and checks that the counters were scheduled and moved.
  std::string probe() {
    start();
    volatile std::uint64_t sink = 0;
    for (std::uint64_t i = 0; i < 200000; ++i) sink = sink + i * i;
    const CounterValues v = stop();
    base_.clear();
    for (const auto& e : events_) {
      if (v.count(e) == 0) {
        return "perf: '" + e + "' was never scheduled on the PMU (time_running = 0; too many "
               "events for the available counters, or the PMU is taken)";
      }
    }
    for (const char* busy : {"instructions", "cycles"}) {
      auto it = v.find(busy);
      if (it != v.end() && it->second == 0) {
        return std::string("perf: '") + busy + "' read 0 over a 200000-iteration probe loop";
      }
    }
    return {};
  }

  std::vector<std::string> events_;
  std::vector<std::vector<int>> groups_;  ///< per thread: leader first
  std::vector<std::vector<Reading>> base_;
};

}  // namespace

std::optional<PerfEventConfig> perf_event_config(std::string_view name) {
  struct Entry {
    const char* name;
    PerfEventConfig config;
  };
  static const Entry table[] = {
      {"cycles", {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES}},
      {"instructions", {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS}},
      {"cache-references", {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES}},
      {"cache-misses", {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES}},
      {"branches", {PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS}},
      {"branch-misses", {PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES}},
      {"L1-dcache-load-misses",
       {PERF_TYPE_HW_CACHE, hw_cache(PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ,
                                     PERF_COUNT_HW_CACHE_RESULT_MISS)}},
      {"LLC-load-misses",
       {PERF_TYPE_HW_CACHE, hw_cache(PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_READ,
                                     PERF_COUNT_HW_CACHE_RESULT_MISS)}},
  };
  for (const auto& e : table) {
    if (name == e.name) return e.config;
  }
  return std::nullopt;
}

BackendAttempt try_perf_counters(const std::vector<std::string>& events) {
  auto counters = std::make_unique<PerfCounters>(events);
  std::string reason = counters->open();
  if (!reason.empty()) return {nullptr, std::move(reason)};
  return {std::move(counters), {}};
}

}  // namespace waco::kernels::detail
