// Counter backend selection, the timing-only fallback and event-list parsing (counters.hpp).
//
// Auto tries likwid, then perf_event, then falls back to "none"; the fallback is not an error
// (ARCHITECTURE.md §7: the development machines cannot read counters) but it is announced once per
// process, with each backend's reason, so that a run never silently lacks counters. Asking for a
// specific backend that cannot work is a user error and throws with the reason.
#include "waco/kernels/counters.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>

#include "counters_backends.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"

namespace waco::kernels {
namespace {

std::atomic<bool> g_fallback_warned{false};
/// Set by hardware_counters_available() when its probe found no backend for the default events:
/// open_counters(Auto) of those events then answers "none" at once, here and in every process
/// forked after.
std::atomic<bool> g_known_unavailable{false};

class NoneCounters final : public Counters {
 public:
  std::string_view backend() const override { return "none"; }
  std::vector<std::string> events() const override { return {}; }
  void start() override {}
  CounterValues stop() override { return {}; }
};

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string known_list() {
  std::string s;
  for (const auto& e : known_events()) s += (s.empty() ? "" : ", ") + e;
  return s;
}

/// The canonical spelling of a generic event name (case-insensitive match), or throws.
std::string canonical_event(std::string_view name) {
  for (const auto& e : known_events()) {
    if (iequal(e, name)) return e;
  }
  throw Error("counters: unknown event '" + std::string(name) + "'",
              "known events: " + known_list());
}

/// Validates, canonicalizes and de-duplicates (first occurrence kept) a list of event names.
std::vector<std::string> normalize(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    std::string c = canonical_event(trim(n));
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(std::move(c));
  }
  return out;
}

[[noreturn]] void unavailable(std::string_view backend, const std::string& reason) {
  throw Error("counters: the " + std::string(backend) + " backend cannot count here: " + reason,
              "use --counters auto (falls back to timing only) or --counters none");
}

}  // namespace

std::string_view counter_backend_name(CounterBackend b) {
  switch (b) {
    case CounterBackend::Auto: return "auto";
    case CounterBackend::Likwid: return "likwid";
    case CounterBackend::Perf: return "perf";
    case CounterBackend::None: return "none";
  }
  WACO_ASSERT(false, "unhandled CounterBackend");
  return "";
}

std::optional<CounterBackend> parse_counter_backend(std::string_view name) {
  for (CounterBackend b : {CounterBackend::Auto, CounterBackend::Likwid, CounterBackend::Perf,
                           CounterBackend::None}) {
    if (name == counter_backend_name(b)) return b;
  }
  return std::nullopt;
}

const std::vector<std::string>& known_events() {
  static const std::vector<std::string> events = {
      "cycles",   "instructions",  "cache-references",      "cache-misses",
      "branches", "branch-misses", "L1-dcache-load-misses", "LLC-load-misses"};
  return events;
}

/// Comma-separated names, surrounding whitespace ignored, matched case-insensitively and returned
/// in the spelling of known_events(). Repeated names are dropped (the first occurrence keeps its
/// position). An empty or all-blank list gives an empty vector (the default set for
/// open_counters); an empty item between commas ("cycles,,instructions") is an error.
std::vector<std::string> parse_event_list(std::string_view list) {
  if (trim(list).empty()) return {};
  std::vector<std::string> items;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = list.find(',', start);
    const std::string item =
        trim(list.substr(start, comma == std::string_view::npos ? list.npos : comma - start));
    if (item.empty()) {
      throw Error("counters: empty event name in the list '" + std::string(list) + "'",
                  "separate event names with single commas; known events: " + known_list());
    }
    items.push_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return normalize(items);
}

std::unique_ptr<Counters> open_counters(CounterBackend requested,
                                        const std::vector<std::string>& events,
                                        std::ostream* warn) {
  std::vector<std::string> wanted = normalize(events);
  if (wanted.empty()) wanted = detail::default_events();
  switch (requested) {
    case CounterBackend::None:
      return detail::make_none_counters();
    case CounterBackend::Perf: {
      auto attempt = detail::try_perf_counters(wanted);
      if (!attempt.counters) unavailable("perf", attempt.reason);
      return std::move(attempt.counters);
    }
    case CounterBackend::Likwid: {
      auto attempt = detail::try_likwid_counters(wanted);
      if (!attempt.counters) unavailable("likwid", attempt.reason);
      return std::move(attempt.counters);
    }
    case CounterBackend::Auto: {
      // Known from the probe (a warning still to give asks the backends for their reasons).
      if (events.empty() && g_known_unavailable.load(std::memory_order_relaxed) &&
          (warn == nullptr || g_fallback_warned.load()))
        return detail::make_none_counters();
      auto likwid = detail::try_likwid_counters(wanted);
      if (likwid.counters) return std::move(likwid.counters);
      auto perf = detail::try_perf_counters(wanted);
      if (perf.counters) return std::move(perf.counters);
      if (warn != nullptr && !g_fallback_warned.exchange(true)) {
        *warn << "warning: hardware counters unavailable (likwid: " << likwid.reason
              << "; perf: " << perf.reason << "); timing only\n";
        warn->flush();
      }
      return detail::make_none_counters();
    }
  }
  WACO_ASSERT(false, "unhandled CounterBackend");
  return nullptr;
}

bool hardware_counters_available() {
  static const bool available = [] {
    std::fflush(nullptr);  // nothing buffered for the child to write twice
    const pid_t pid = ::fork();
    if (pid < 0) return true;  // unknown: every caller tries, as without the probe
    if (pid == 0) {
      bool none = true;
      {
        const std::unique_ptr<Counters> c = open_counters(CounterBackend::Auto);
        none = c->backend() == "none";
      }
      ::_exit(none ? 1 : 0);
    }
    // 0.6-0.8 ms on a KVM guest without a PMU (likwid has no way to count there and is not
    // loaded); where likwid loads, ~12 ms to load it and ~11.5 ms for its topology and PCI scan.
    // A probe still running after 10 s is ended and the answer taken as unknown.
    int status = 0;
    const bool ended = await_child_exit(pid, 10.0);
    if (!ended) ::kill(pid, SIGKILL);
    pid_t r;
    while ((r = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (!ended || r != pid) return true;
    const bool none = WIFEXITED(status) && WEXITSTATUS(status) == 1;
    if (none) g_known_unavailable.store(true, std::memory_order_relaxed);
    return !none;
  }();
  return available;
}

namespace detail {

const std::vector<std::string>& default_events() {
  static const std::vector<std::string> events = {"cycles", "instructions", "cache-references",
                                                  "cache-misses"};
  return events;
}

std::unique_ptr<Counters> make_none_counters() { return std::make_unique<NoneCounters>(); }

void reset_fallback_warning_for_testing() { g_fallback_warned.store(false); }

}  // namespace detail
}  // namespace waco::kernels
