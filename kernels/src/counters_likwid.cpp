// The likwid backend of the counters interface, on likwid's perfmon C API; the only translation
// unit that includes <likwid.h> (STYLE.md item 5). Without WACO_HAVE_LIKWID it only says so.
//
// likwid counts per hardware thread (core-wide, not per process), so a session measures all
// hardware threads and sums them: run it with the machine otherwise idle. likwid keeps global
// state, so one session may be open per process at a time.
//
// likwid is noisy when it fails (it prints to stderr, and its helper forks can flush a copy of
// our unflushed stdout). The session therefore (1) flushes stdio before calling it, (2) checks the
// cheap preconditions itself (a CPU likwid knows, MSR device files for its direct/daemon access
// modes) so that the usual failures never reach likwid, and (3) captures likwid's stderr into the
// failure reason while it initialises. Environment failures are remembered per process.
//
// liblikwid is opened on first use (dlopen), not linked: linked, its 17 MB took every process
// that loaded this library ~12 ms of relocation at start (an empty program linked to it: 12.8 ms
// from exec to exit against 0.8 ms), counters asked for or not: every CLI run, every measuring
// worker, every application linking libwaco.so.
#include "counters_backends.hpp"

#include <map>

#include "waco/kernels/error.hpp"

#ifdef WACO_HAVE_LIKWID
#include <dlfcn.h>
#include <likwid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <type_traits>
#endif

namespace waco::kernels::detail {

LikwidEventSet likwid_event_set(LikwidCpu cpu, const std::vector<std::string>& events) {
  // Event names from likwid 5.2's event tables (see /usr/share/likwid/perfgroups/<arch>).
  // counter "" = a general counter (PMCn), "L3" = AMD's L3 counters (CPMCn), else fixed.
  struct Name {
    const char* event;
    const char* counter;
  };
  static const std::map<std::string, Name> intel = {
      {"instructions", {"INSTR_RETIRED_ANY", "FIXC0"}},
      {"cycles", {"CPU_CLK_UNHALTED_CORE", "FIXC1"}},
      {"cache-references", {"L3_LAT_CACHE_REFERENCE", ""}},
      {"cache-misses", {"L3_LAT_CACHE_MISS", ""}},
      {"branches", {"BR_INST_RETIRED_ALL_BRANCHES", ""}},
      {"branch-misses", {"BR_MISP_RETIRED_ALL_BRANCHES", ""}},
      {"L1-dcache-load-misses", {"L1D_REPLACEMENT", ""}},
      {"LLC-load-misses", {"MEM_LOAD_RETIRED_L3_MISS", ""}},
  };
  static const std::map<std::string, Name> zen = {
      {"instructions", {"RETIRED_INSTRUCTIONS", ""}},
      {"cycles", {"CPU_CLOCKS_UNHALTED", ""}},
      {"cache-references", {"L3_CACHE_REQ", "L3"}},
      {"cache-misses", {"L3_MISS_REQ", "L3"}},
      {"branches", {"RETIRED_BRANCH_INSTR", ""}},
      {"branch-misses", {"RETIRED_MISP_BRANCH_INSTR", ""}},
      {"L1-dcache-load-misses", {"DATA_CACHE_REFILLS_ALL", ""}},
  };
  LikwidEventSet out;
  if (cpu == LikwidCpu::Other) {
    out.error = "no likwid event names for this CPU family (only Intel Core and AMD Zen)";
    return out;
  }
  const auto& table = cpu == LikwidCpu::IntelCore ? intel : zen;
  int pmc = 0, cpmc = 0;
  for (const auto& e : events) {
    auto it = table.find(e);
    if (it == table.end()) {
      out.error = "no likwid event for '" + e + "' on " +
                  (cpu == LikwidCpu::IntelCore ? "Intel" : "AMD Zen");
      out.set.clear();
      return out;
    }
    std::string counter = it->second.counter;
    if (counter.empty()) {
      counter = "PMC" + std::to_string(pmc++);
    } else if (counter == "L3") {
      counter = "CPMC" + std::to_string(cpmc++);
    }
    if (!out.set.empty()) out.set += ',';
    out.set += std::string(it->second.event) + ':' + counter;
  }
  return out;
}

#ifndef WACO_HAVE_LIKWID

bool likwid_compiled_in() { return false; }

std::string likwid_library_problem() { return "this build has no likwid support"; }

BackendAttempt try_likwid_counters(const std::vector<std::string>&) {
  return {nullptr, "this build has no likwid support (likwid.h or liblikwid not found when "
                   "configuring)"};
}

#else

bool likwid_compiled_in() { return true; }

namespace {

std::mutex g_mutex;
bool g_session_open = false;
std::string g_environment_failure;  ///< non-empty once likwid is known not to work here

/// The functions of liblikwid this backend calls (one list: the members below and their lookup).
#define WACO_LIKWID_FUNCTIONS(X)                                                                 \
  X(get_configuration) X(topology_init) X(topology_finalize) X(get_cpuInfo) X(get_cpuTopology) \
  X(perfmon_setVerbosity) X(perfmon_init) X(perfmon_finalize) X(perfmon_addEventSet)            \
  X(perfmon_setupCounters) X(perfmon_startCounters) X(perfmon_stopCounters) X(perfmon_getResult)

/// Those functions, from the library opened on first use.
struct LikwidApi {
#define WACO_LIKWID_MEMBER(name) decltype(&::name) name = nullptr;
  WACO_LIKWID_FUNCTIONS(WACO_LIKWID_MEMBER)
#undef WACO_LIKWID_MEMBER
};

/// Whether likwid could count here in any of its access modes: through MSRs (direct or daemon
/// access, /dev/cpu/N/msr) or through perf_event (a CPU PMU under /sys/bus/event_source/devices:
/// "cpu", or "cpu_core"/"cpu_atom" on hybrid Intel parts). With neither, it is not even loaded
/// (~12 ms of relocation, then its topology and PCI scan: on a KVM guest without a PMU, every
/// `--counters auto` paid that to hear no).
bool counting_path_exists() {
  const auto exists = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
  };
  for (const char* pmu : {"cpu", "cpu_core", "cpu_atom"})
    if (exists(std::string("/sys/bus/event_source/devices/") + pmu)) return true;
  const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
  for (long c = 0; c < std::max(1L, cpus); ++c)
    if (exists("/dev/cpu/" + std::to_string(c) + "/msr")) return true;
  return false;
}

/// Set by try_likwid_counters (under g_mutex) once the library is open; a session's methods
/// run only after that.
const LikwidApi* g_api = nullptr;

/// liblikwid opened (its soname as configured, then the file the build found) and its
/// functions looked up, once a process; null with `why` when it cannot be.
const LikwidApi* open_likwid(std::string& why) {
  static std::string failure;
  static const LikwidApi* const api = []() -> const LikwidApi* {
    void* h = nullptr;
    std::string tried;
    for (const char* name : {WACO_LIKWID_SONAME, WACO_LIKWID_PATH}) {
      if (name[0] == '\0') continue;
      h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h != nullptr) break;
      const char* e = ::dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (e != nullptr ? e : name);
    }
    if (h == nullptr) {
      failure = "cannot load liblikwid (" + tried + ")";
      return nullptr;
    }
    static LikwidApi a;
    const auto look = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(::dlsym(h, name));
      if (f == nullptr && failure.empty()) failure = std::string("liblikwid has no ") + name;
    };
#define WACO_LIKWID_LOOK(name) look(a.name, #name);
    WACO_LIKWID_FUNCTIONS(WACO_LIKWID_LOOK)
#undef WACO_LIKWID_LOOK
    return failure.empty() ? &a : nullptr;
  }();
  why = failure;
  return api;
}

/// Redirects file descriptor 2 into a temporary file while alive; text() returns what was
/// written. Flushes stdio first so that nothing of ours ends up in the capture, and so that
/// likwid's forked helpers have no buffered output to duplicate.
class StderrCapture {
 public:
  StderrCapture() {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    file_ = std::tmpfile();
    if (file_ == nullptr) return;
    saved_ = ::dup(2);
    if (saved_ < 0 || ::dup2(::fileno(file_), 2) < 0) restore();
  }
  ~StderrCapture() {
    restore();
    if (file_ != nullptr) std::fclose(file_);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  /// Restores stderr and returns the captured text, whitespace-collapsed to one line.
  std::string text() {
    restore();
    std::string out;
    if (file_ == nullptr) return out;
    std::rewind(file_);
    char buf[512];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0 && out.size() < 2000) {
      out.append(buf, n);
    }
    std::string one;
    for (char ch : out) {
      const bool space = ch == '\n' || ch == '\r' || ch == '\t' || ch == ' ';
      if (space) {
        if (!one.empty() && one.back() != ' ') one += ' ';
      } else {
        one += ch;
      }
    }
    while (!one.empty() && one.back() == ' ') one.pop_back();
    return one;
  }

 private:
  void restore() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      ::dup2(saved_, 2);
      ::close(saved_);
      saved_ = -1;
    }
  }
  std::FILE* file_ = nullptr;
  int saved_ = -1;
};

std::string with_output(std::string reason, const std::string& captured) {
  if (!captured.empty()) reason += " (likwid said: " + captured + ")";
  return reason;
}

bool is_executable(const char* path) { return path != nullptr && ::access(path, X_OK) == 0; }

/// Checks likwid's access path before perfmon_init so that the common failures do not go through
/// likwid at all. Returns the reason it cannot work, or "".
std::string access_precheck(int cpu) {
  Configuration_t config = g_api->get_configuration();
  const int mode = config != nullptr ? static_cast<int>(config->daemonMode) : ACCESSMODE_DIRECT;
  if (mode == ACCESSMODE_PERF) return {};  // likwid goes through perf_event: let it try
  const std::string msr = "/dev/cpu/" + std::to_string(cpu) + "/msr";
  struct stat st;
  if (::stat(msr.c_str(), &st) != 0) {
    return "cannot access MSRs: " + msr + " does not exist (load the msr kernel module; in a VM "
           "the hypervisor must expose the PMU)";
  }
  if (mode == ACCESSMODE_DAEMON && ::geteuid() != 0) {
    const char* daemon = config->daemonPath;
    if (!is_executable(daemon)) {
      return std::string("the access daemon ") + (daemon != nullptr ? daemon : "(unset)") +
             " is missing or not executable";
    }
  } else if (mode == ACCESSMODE_DIRECT && ::access(msr.c_str(), R_OK | W_OK) != 0) {
    return "cannot access MSRs: " + msr + ": " + std::strerror(errno) +
           " (direct access needs root or the likwid access daemon)";
  }
  return {};
}

LikwidCpu cpu_family(CpuInfo_t info) {
  if (info == nullptr) return LikwidCpu::Other;
  if (info->isIntel && info->family == 6) return LikwidCpu::IntelCore;
  if (!info->isIntel && (info->family == 0x17 || info->family == 0x19)) return LikwidCpu::AmdZen;
  return LikwidCpu::Other;
}

class LikwidCounters final : public Counters {
 public:
  LikwidCounters(std::vector<std::string> events, int group, int threads)
      : events_(std::move(events)), group_(group), threads_(threads) {}
  LikwidCounters(const LikwidCounters&) = delete;
  LikwidCounters& operator=(const LikwidCounters&) = delete;
  ~LikwidCounters() override {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (running_) g_api->perfmon_stopCounters();
    g_api->perfmon_finalize();
    g_session_open = false;
  }

  std::string_view backend() const override { return "likwid"; }
  std::vector<std::string> events() const override { return events_; }

  void start() override {
    const int rc = g_api->perfmon_startCounters();
    if (rc != 0) throw Error("counters: likwid could not start its counters (code " +
                             std::to_string(rc) + ")");
    running_ = true;
  }

  CounterValues stop() override {
    WACO_ASSERT(running_, "likwid counters stopped without start()");
    const int rc = g_api->perfmon_stopCounters();
    running_ = false;
    if (rc != 0) throw Error("counters: likwid could not stop its counters (code " +
                             std::to_string(rc) + ")");
    CounterValues out;
    for (std::size_t e = 0; e < events_.size(); ++e) {
      double total = 0.0;
      for (int t = 0; t < threads_; ++t) total += g_api->perfmon_getResult(group_, static_cast<int>(e), t);
      out[events_[e]] = static_cast<std::uint64_t>(total + 0.5);
    }
    return out;
  }

 private:
  std::vector<std::string> events_;
  int group_;
  int threads_;
  bool running_ = false;
};

/// Initialises topology and perfmon; returns the environment failure or "".
std::string init_perfmon(std::vector<int>& cpus, LikwidCpu& family) {
  StderrCapture capture;
  g_api->perfmon_setVerbosity(0);
  if (g_api->topology_init() != 0) {
    return with_output("topology_init failed: this CPU is not supported by likwid",
                       capture.text());
  }
  family = cpu_family(g_api->get_cpuInfo());
  CpuTopology_t topo = g_api->get_cpuTopology();
  if (topo == nullptr || topo->numHWThreads == 0) {
    g_api->topology_finalize();
    return with_output("likwid found no hardware threads", capture.text());
  }
  for (std::uint32_t t = 0; t < topo->numHWThreads; ++t) {
    cpus.push_back(static_cast<int>(topo->threadPool[t].apicId));
  }
  std::string pre = access_precheck(cpus.front());
  if (!pre.empty()) {
    g_api->topology_finalize();
    return with_output(pre, capture.text());
  }
  const int rc = g_api->perfmon_init(static_cast<int>(cpus.size()), cpus.data());
  if (rc != 0) {
    g_api->topology_finalize();
    return with_output("perfmon_init failed: " + std::string(std::strerror(rc < 0 ? -rc : rc)),
                       capture.text());
  }
  return {};
}

}  // namespace

std::string likwid_library_problem() {
  std::string why;
  open_likwid(why);
  return why;
}

BackendAttempt try_likwid_counters(const std::vector<std::string>& events) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_environment_failure.empty()) return {nullptr, g_environment_failure};
  if (g_session_open) return {nullptr, "another likwid counter session is open in this process"};
  if (g_api == nullptr) {
    if (!counting_path_exists()) {
      g_environment_failure =
          "cannot access MSRs: no /dev/cpu/N/msr (load the msr kernel module; in a VM the "
          "hypervisor must expose the PMU), and the kernel has no CPU PMU for likwid's perf mode";
      return {nullptr, g_environment_failure};
    }
    std::string why;
    g_api = open_likwid(why);
    if (g_api == nullptr) {
      g_environment_failure = why;
      return {nullptr, why};
    }
  }
  std::vector<int> cpus;
  LikwidCpu family = LikwidCpu::Other;
  std::string failure = init_perfmon(cpus, family);
  if (!failure.empty()) {
    g_environment_failure = failure;
    return {nullptr, failure};
  }
  const LikwidEventSet set = likwid_event_set(family, events);
  const auto give_up = [](std::string reason) {
    g_api->perfmon_finalize();
    return BackendAttempt{nullptr, std::move(reason)};
  };
  if (!set.error.empty()) return give_up(set.error);
  StderrCapture capture;
  const int group = g_api->perfmon_addEventSet(set.set.c_str());
  if (group < 0) {
    return give_up(with_output("likwid rejected the event set " + set.set, capture.text()));
  }
  if (g_api->perfmon_setupCounters(group) != 0) {
    return give_up(with_output("likwid could not set up the counters for " + set.set,
                               capture.text()));
  }
  if (g_api->perfmon_startCounters() != 0) {
    return give_up(with_output("likwid could not start the counters", capture.text()));
  }
  volatile std::uint64_t sink = 0;
  for (std::uint64_t i = 0; i < 200000; ++i) sink = sink + i * i;
  if (g_api->perfmon_stopCounters() != 0) {
    return give_up(with_output("likwid could not stop the counters", capture.text()));
  }
  // likwid counts whole hardware threads, so the probe loop must show up in some event.
  double probe = 0.0;
  for (std::size_t e = 0; e < events.size(); ++e) {
    for (std::size_t t = 0; t < cpus.size(); ++t) {
      probe += g_api->perfmon_getResult(group, static_cast<int>(e), static_cast<int>(t));
    }
  }
  if (!(probe > 0.0)) {
    return give_up(with_output("likwid counters read 0 over a probe loop", capture.text()));
  }
  g_session_open = true;
  return {std::make_unique<LikwidCounters>(events, group, static_cast<int>(cpus.size())), {}};
}

#endif  // WACO_HAVE_LIKWID

}  // namespace waco::kernels::detail
