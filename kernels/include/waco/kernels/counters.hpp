// Hardware performance counters behind one interface (STYLE.md: google/benchmark's "supported"
// flag with an empty fallback). Backends: likwid (when built with likwid and the CPU/permissions
// allow), Linux perf_event (when the kernel exposes the events), and "none" (timing only).
// Selection with Auto tries likwid, then perf, then falls back to none, warning once per process.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace waco::kernels {

enum class CounterBackend { Auto, Likwid, Perf, None };

/// "auto", "likwid", "perf", "none".
std::string_view counter_backend_name(CounterBackend b);
std::optional<CounterBackend> parse_counter_backend(std::string_view name);

/// Event name -> count for one measured region.
using CounterValues = std::map<std::string, std::uint64_t>;

/// A counter session for one thread group. start()/stop() bracket the measured region.
class Counters {
 public:
  virtual ~Counters() = default;
  /// The backend actually in use ("likwid", "perf" or "none").
  virtual std::string_view backend() const = 0;
  /// The events this session counts (empty for none).
  virtual std::vector<std::string> events() const = 0;
  virtual void start() = 0;
  /// Counts since start(); empty for none.
  virtual CounterValues stop() = 0;
};

/// Opens counters for the requested backend. Auto falls back silently between backends and warns
/// once per process on `warn` when it ends at none; an explicitly requested backend that cannot
/// work throws Error with the reason. `events` are generic names (see parse_event_list); empty
/// means the default set (cycles, instructions, cache-references, cache-misses).
std::unique_ptr<Counters> open_counters(CounterBackend requested,
                                        const std::vector<std::string>& events = {},
                                        std::ostream* warn = nullptr);

/// Whether open_counters(Auto) of the default events can count on this machine, probed once a
/// process in a forked child (ask from a single-threaded process), so that the asking process
/// keeps no counter library state. Where likwid loads, the probe costs ~12 ms to load it and
/// ~11.5 ms for its topology and PCI scan, which every measuring child paid again: after a
/// "no", open_counters(Auto) of the default events answers "none" at once in this process and
/// in every process it forks after (a measuring worker asks before forking its children). true
/// when the probe could not run or answer (each caller then tries, as without it).
bool hardware_counters_available();

/// Splits a comma-separated event list and checks each name against the generic events known to
/// every backend: case-insensitive; repeats dropped keeping the first; an empty list gives {};
/// an empty item or an unknown name throws Error (the hint lists the known events).
std::vector<std::string> parse_event_list(std::string_view list);

/// The generic event names accepted by parse_event_list.
const std::vector<std::string>& known_events();

}  // namespace waco::kernels
