// What a search measures and what a measurement gives back: Candidate (a SuperSchedule or a
// baseline implementation), Measurement (status, times, verification, software counts) and
// MeasureStatus, with the Measurement's JSON (the measuring processes' messages, the results
// database's `counters`). All that results_db.hpp and tuner.hpp need of measuring, without the
// Runner (runner.hpp) or the isolated Measurer (measure.hpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "waco/codegen/super_schedule.hpp"

namespace waco::heuristics {

/// How a measurement ended. Text names (status_name): ok, refused, compile-error, wrong-result,
/// crashed, timeout, abandoned. Abandoned: so much slower than the best measured so far that
/// timing stopped (racing): either verified, with the runs made until then as its times, or
/// (compare's screening, `verified` false) stopped during its first run, with the bound it
/// overran as its times. Either way its times are a lower bound.
enum class MeasureStatus { Ok, Refused, CompileError, WrongResult, Crashed, Timeout, Abandoned };

inline constexpr MeasureStatus kAllStatuses[] = {
    MeasureStatus::Ok,          MeasureStatus::Refused, MeasureStatus::CompileError,
    MeasureStatus::WrongResult, MeasureStatus::Crashed, MeasureStatus::Timeout,
    MeasureStatus::Abandoned};

/// "ok", "refused", "compile-error", "wrong-result", "crashed", "timeout", "abandoned".
std::string_view status_name(MeasureStatus s);
/// Inverse of status_name; nullopt for an unknown name.
std::optional<MeasureStatus> parse_status(std::string_view name);

/// What to measure: a generated kernel for a SuperSchedule, or a baseline implementation of
/// kernels::implementations() by name (e.g. "csr").
struct Candidate {
  std::optional<codegen::SuperSchedule> schedule;  ///< set for generated kernels (canonical)
  std::string implementation = codegen::kGeneratedImplementation;  ///< or a baseline's name

  static Candidate generated(const codegen::SuperSchedule& s);
  static Candidate baseline(std::string name);
  bool is_generated() const { return schedule.has_value(); }
  /// The schedule's text form, or "impl=<name>" for a baseline.
  std::string label() const;
  /// Threads the candidate runs on when the run's default is `run_threads` (>= 1): the
  /// schedule's own count when it fixes one, else run_threads.
  int effective_threads(int run_threads) const;
};

/// The result of one measurement. Times are meaningful only when status is Ok or Abandoned (then
/// over the runs made before timing stopped).
struct Measurement {
  MeasureStatus status = MeasureStatus::Crashed;
  std::string reason;           ///< empty when ok; otherwise what happened (message, signal...)
  std::vector<double> seconds;  ///< every timed run
  double median_s = 0.0;
  double min_s = 0.0;
  double max_s = 0.0;
  int warmup = 0;
  int repeats = 0;
  int threads = 0;              ///< threads the kernel ran on
  bool verified = false;        ///< the output matched the reference before and after timing
  double max_rel_error = -1.0;  ///< of the last verification; -1 when none ran
  double conversion_s = 0.0;    ///< format build time
  double compile_s = 0.0;       ///< 0 on a compile-cache hit
  bool cache_hit = false;
  std::string kernel_source;        ///< generated C++ source of the kernel (generated only)
  std::int64_t stored_values = -1;  ///< values the format stores (generated only)
  /// The race strategy the measured kernel was built with ("atomic" or "private"; generated
  /// only, empty when unknown: results stored before it was recorded), so that `tune -o` and
  /// waco::Plan deliver the kernel that was measured.
  std::string race;
  double wall_s = 0.0;  ///< wall time of the whole isolated measurement
  /// The failure was the machine's, not the candidate's (codegen::BuildEnvironmentError: the
  /// compiler missing or killed, the kernel cache unwritable or its disk full): the Measurer
  /// throws it as an Error instead of returning it, so that no search stores it as the
  /// candidate's result. Only in the measuring processes' messages.
  bool environment = false;
  /// Software counts around the side-by-side timed runs (compare()), null otherwise:
  /// {"source": "getrusage", "retaken": disturbed runs taken again, "disturbed_kept": disturbed
  /// runs kept when no retake was left, and over the kept runs "cpu_s",
  /// "involuntary_switches", "voluntary_switches", "page_faults", "hardware": {"backend":
  /// "likwid"|"perf"|"none", and with a backend "runs" and "per_run": event -> count per run}}.
  nlohmann::json counters;

  nlohmann::json to_json() const;
  static Measurement from_json(const nlohmann::json& j);
};

}  // namespace waco::heuristics
