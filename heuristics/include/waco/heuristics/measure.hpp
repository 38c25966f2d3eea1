// Measuring one candidate (a SuperSchedule or a baseline implementation) in isolation, so that a
// kernel that crashes or hangs cannot take the tuner down (issue 5, "Search and the results
// database"; ARCHITECTURE.md section 7: warm-up, median of repeats, verified).
//
// A Measurer forks one *worker* process when it is constructed. For every candidate the worker
// first decides whether codegen::build_storage would refuse its format, exactly and in O(levels),
// from the prefix counts of the sparse operand (prefix_counts.hpp; computed once per Measurer), and
// answers a refusal at once. Otherwise it forks a fresh *measuring child* that compiles (through
// the on-disk compile cache), builds the format once and loads the kernel, verifies it against the
// reference, times it and sends the result back over a socket. The worker enforces two time limits (prepare: format + compile; run:
// verification + timing), kills a child that overruns, and turns signals, timeouts, refusals,
// compile errors and wrong results into a MeasureStatus with a reason: expected failures of a
// search are values, never exceptions (STYLE.md item 6).
//
// Why a worker and not a fork per candidate from the caller: GNU libgomp's thread pool does not
// survive fork(). A child forked after its parent ran an OpenMP parallel region hangs in its own
// first parallel region (checked with GCC 12.2: a two-line program hangs). The worker is forked
// before the caller runs any OpenMP and never runs OpenMP itself, so every measuring child starts
// with a clean libgomp, whatever the caller does afterwards. The constructor checks this with a
// probe child that runs a parallel region under a time limit, and throws InternalError when the
// probe hangs (the caller constructed the Measurer too late).
//
// The problem's operands and the reference are inherited by the worker at fork time (copy on
// write): they are needed only during construction.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/generated_kernel.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/kernels/timing.hpp"

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
  std::string implementation = "generated";        ///< "generated" or a baseline's name

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
  std::string kernel_source;    ///< generated C++ source of the kernel (generated only)
  std::int64_t stored_values = -1;  ///< values the format stores (generated only)
  /// The race strategy the measured kernel was built with ("atomic" or "private"; generated
  /// only, empty when unknown: results stored before it was recorded), so that `tune -o` and
  /// waco::Plan deliver the kernel that was measured.
  std::string race;
  double wall_s = 0.0;          ///< wall time of the whole isolated measurement
  /// Software counts around the side-by-side timed runs (compare()), null otherwise:
  /// {"source": "getrusage", "retaken": disturbed runs taken again, "disturbed_kept": disturbed
  /// runs kept when no retake was left, and over the kept runs "cpu_s",
  /// "involuntary_switches", "voluntary_switches", "page_faults", "hardware": {"backend":
  /// "likwid"|"perf"|"none", and with a backend "runs" and "per_run": event -> count per run}}.
  nlohmann::json counters;

  nlohmann::json to_json() const;
  static Measurement from_json(const nlohmann::json& j);
};

struct MeasureOptions {
  int warmup = 2;   ///< untimed runs after verification
  int repeats = 10; ///< timed runs (>= 1)
  /// Threads of baselines and of schedules whose threads field is 0 (0 = every available core).
  int threads = 0;
  double tolerance = kernels::kDefaultTolerance;
  /// Limit for building the format and compiling (a cold compile takes seconds), in seconds.
  double prepare_timeout_s = 300.0;
  /// Limit for verification, warm-up and timed runs, in seconds.
  double run_timeout_s = 60.0;
  codegen::GeneratedOptions generated;
  /// Racing (measure() with a bound): runs after the verification, warm-up included, made before
  /// a candidate may be abandoned (>= 1).
  int race_min_runs = 2;
  /// Racing in compare(): a generated candidate whose faster of two timed runs after the
  /// verification is above this factor times the fastest candidate's is abandoned (status
  /// Abandoned, those two runs as its times) and left out of the rounds; 0: time every one.
  double compare_race_factor = 0.0;
  /// Racing in compare(), before any timing: once the group has a fastest candidate (its
  /// baselines run first), every run of a generated candidate made to verify or probe it has a
  /// deadline, max(compare_screen_min_s, compare_screen_margin x compare_race_factor x the
  /// group's fastest). A run still going at its deadline ends the measuring child; the candidate
  /// is stored Abandoned with compare_race_factor x the fastest as its lower bound (never
  /// verified), and a new child goes on with the others. So a schedule a thousand times slower
  /// than csr costs a fraction of a second, not minutes. The margin allows for a cold first run.
  /// Side-by-side rounds in compare(): timed runs per candidate that are taken again when an
  /// involuntary context switch shows another process took a CPU during them.
  int retake_disturbed = 5;
  /// Side-by-side rounds in compare(): untimed runs of a candidate right before each of its timed
  /// runs (see kernels::kDefaultSettleRuns), so that it is timed with its own data in the caches.
  int settle = kernels::kDefaultSettleRuns;
  /// Side-by-side rounds in compare(): hardware counters (likwid, else Linux perf; cycles,
  /// instructions, cache references and misses) are read around this many extra runs of each
  /// candidate after the timed rounds (never around timed runs: reading them costs time), where
  /// the machine exposes them; 0: none. Measurement::counters["hardware"].
  int hardware_counter_runs = 3;
  double compare_screen_margin = 4.0;
  double compare_screen_min_s = 0.05;
  /// Test hook (fault injection): runs in the measuring child after prepare, before the first
  /// run. It may crash, hang or throw to exercise the isolation; leave empty in production.
  std::function<void(const Candidate&)> child_hook;
};

/// Racing (Measurer::measure): when to stop timing a hopeless candidate.
struct RaceBound {
  /// A verified candidate whose fastest run, after MeasureOptions::race_min_runs runs (warm-up
  /// included), is still slower than this is a candidate to abandon; <= 0: no racing.
  double above_s = 0.0;
  /// When set (a baseline implementation's name, e.g. "csr"), a candidate to abandon is first
  /// timed side by side with that implementation, prepared in the same child: two alternating
  /// runs each. The machine's drift since the bound was set is the reference's fastest run now
  /// over check_s (its median then); the candidate is abandoned only when its fastest run is above
  /// above_s times that drift (at least 1). A burst of host noise (this kind of VM has bursts of
  /// 3-8x for a moment) then slows both alike instead of abandoning a good candidate. Without a
  /// check, or when the reference cannot run, the plain bound decides.
  std::string check;
  double check_s = 0.0;  ///< the reference's median when the bound was set (> 0 with check)

  bool active() const { return above_s > 0.0; }
};

/// Racing of one Measurer::compare call.
struct CompareOptions {
  /// The factor of MeasureOptions::compare_race_factor for this call; < 0: the Measurer's own.
  double race_factor = -1.0;
  /// Indices of candidates timed in every round however slow their first runs are, like the
  /// baselines (the caller's references, e.g. the csr schedule beside a model's nominees).
  std::vector<std::size_t> always_timed;
};

/// Measures candidates of one problem, each in its own child process (see the file comment).
/// Not copyable; one measurement at a time (not thread-safe).
class Measurer {
 public:
  /// Forks the worker and probes that OpenMP works in its children. Precondition: this process
  /// has not run an OpenMP parallel region yet (GNU libgomp); throws kernels::InternalError when
  /// the probe shows it has, kernels::Error when fork/socketpair fail. `p` must be validated and
  /// `ref` its reference; both are only read here (the worker keeps its own copy).
  Measurer(const kernels::Problem& p, const kernels::Reference& ref, MeasureOptions opts);
  ~Measurer();
  Measurer(const Measurer&) = delete;
  Measurer& operator=(const Measurer&) = delete;

  /// Measures one candidate in a fresh child. Expected failures (refused, compile error, wrong
  /// result, crash, timeout) come back as the status with a reason. Throws kernels::Error only
  /// when the worker itself is gone (e.g. killed from outside). Racing (see RaceBound; a tuner
  /// passes a factor times the best median so far): a verified candidate found hopeless stops
  /// there, status Abandoned, with the runs made as its times.
  Measurement measure(const Candidate& c, const RaceBound& race = {});

  /// Measures several candidates side by side in one fresh child: all are prepared and verified
  /// first, then timed interleaved (kernels::time_interleaved: options().warmup untimed rounds,
  /// then `rounds` timed rounds, each running every candidate once), then verified again. On this
  /// kind of machine (a shared VM whose speed drifts by tens of percent within a second, so that
  /// two separate measurements of one kernel can differ by 1.5x) only such timings can rank
  /// close candidates. One Measurement per candidate, in order (repeats = rounds); a child that
  /// crashes or overruns its limits (prepare_timeout_s and run_timeout_s, each times the number
  /// of candidates) fails them all with its reason. Throws like measure().
  /// `co`: racing for this call (see CompareOptions).
  std::vector<Measurement> compare(const std::vector<Candidate>& cs, int rounds,
                                   const CompareOptions& co = {});

  const MeasureOptions& options() const { return opts_; }
  /// Threads a candidate with threads = 0 runs on (options().threads resolved).
  int run_threads() const { return run_threads_; }
  /// The worker's process id (for tests and diagnostics).
  pid_t worker_pid() const { return worker_; }

 private:
  /// Closes the socket (the worker exits on EOF) and reaps the worker; idempotent.
  void stop();
  /// Sends one request ('M': measure cs[0]; 'C': compare) and waits up to limit_s (+ slack).
  std::vector<Measurement> request(char type, const std::vector<Candidate>& cs, int rounds,
                                   double limit_s, const RaceBound& race,
                                   const CompareOptions& co = {});

  MeasureOptions opts_;
  int run_threads_ = 1;
  pid_t worker_ = -1;
  int sock_ = -1;
};

}  // namespace waco::heuristics
