// Backend-private declarations of the hardware-counter interface (counters.hpp). Each backend
// lives in its own translation unit: counters_perf.cpp (Linux perf_event_open, no library) and
// counters_likwid.cpp (the only file that includes <likwid.h>; without WACO_HAVE_LIKWID it only
// reports that the build has no likwid). counters.cpp does the selection and the fallback.
//
// The pure mapping functions (generic event name -> perf (type, config), generic names -> a likwid
// event set) are declared here so that the unit tests can check them on any machine, including
// ones where neither backend can count.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "waco/kernels/counters.hpp"

namespace waco::kernels::detail {

/// The default event set when the caller asks for none.
const std::vector<std::string>& default_events();

/// The outcome of trying one backend: a working session, or the reason it cannot count
/// (one line, e.g. "perf_event_open(cycles): No such file or directory: the kernel exposes no
/// hardware PMU for this event (typical in a VM without a virtual PMU)").
struct BackendAttempt {
  std::unique_ptr<Counters> counters;
  std::string reason;  ///< empty when counters is set
};

/// The timing-only session: backend() "none", no events, stop() returns an empty map.
std::unique_ptr<Counters> make_none_counters();

// ---- perf_event -----------------------------------------------------------------------------

/// perf_event_attr.type and .config of a generic event.
struct PerfEventConfig {
  std::uint32_t type = 0;
  std::uint64_t config = 0;
  bool operator==(const PerfEventConfig& o) const { return type == o.type && config == o.config; }
};

/// The perf_event encoding of a generic event name (exact spelling from known_events()):
/// PERF_TYPE_HARDWARE for cycles, instructions, cache-references, cache-misses, branches,
/// branch-misses; PERF_TYPE_HW_CACHE (cache | op << 8 | result << 16) for L1-dcache-load-misses
/// and LLC-load-misses. nullopt for any other name.
std::optional<PerfEventConfig> perf_event_config(std::string_view generic_name);

/// Opens perf counters for `events` (generic names, already validated) on every thread of the
/// process, inherited by threads created later; then runs a short probe loop and checks that the
/// counters were scheduled and counted.
BackendAttempt try_perf_counters(const std::vector<std::string>& events);

// ---- likwid ---------------------------------------------------------------------------------

/// The CPU families for which generic names have likwid event names.
enum class LikwidCpu { IntelCore, AmdZen, Other };

/// A likwid event set ("NAME:COUNTER,...") for generic events, or the reason there is none.
struct LikwidEventSet {
  std::string set;
  std::string error;  ///< non-empty when some event has no likwid name on this CPU family
};

/// Builds the likwid event string: on Intel, instructions and cycles use the fixed counters
/// FIXC0/FIXC1 and the rest PMC0, PMC1, ...; on AMD Zen everything core-local uses PMCn and the
/// L3 events (cache-references, cache-misses) the L3 counters CPMCn. Pure; testable anywhere.
LikwidEventSet likwid_event_set(LikwidCpu cpu, const std::vector<std::string>& events);

/// Opens a likwid perfmon session on all hardware threads, or says why not. Environment failures
/// (CPU unknown to likwid, no MSR access) are remembered for the rest of the process so that later
/// attempts do not re-run likwid's initialisation. likwid's own messages on stderr are captured
/// into the reason instead of being printed.
BackendAttempt try_likwid_counters(const std::vector<std::string>& events);

/// True when this build includes the likwid backend (WACO_HAVE_LIKWID).
bool likwid_compiled_in();

/// Why liblikwid cannot be opened with every function the backend calls ("" when it can; the
/// build's reason without likwid). Opens it (once a process), whether or not it could count here.
std::string likwid_library_problem();

// ---- for tests ------------------------------------------------------------------------------

/// Lets the next Auto fallback warn again (the warning is once per process otherwise).
void reset_fallback_warning_for_testing();

}  // namespace waco::kernels::detail
