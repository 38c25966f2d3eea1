// Measuring one candidate (a SuperSchedule or a baseline implementation) in isolation, so that a
// kernel that crashes or hangs cannot take the tuner down (issue 5, "Search and the results
// database"; ARCHITECTURE.md section 7: warm-up, median of repeats, verified).
//
// A Measurer starts one *worker* process when it is constructed: the program waco-measure-worker,
// installed in <prefix>/<libexecdir>/waco-hybrid and started with posix_spawn (found beside the
// library or executable that holds this code, or at $WACO_MEASURE_WORKER). It sends the worker
// the problem in binary (operands, dense operands, reference, options: no text); the worker keeps
// it and serves any number of requests on it, and load() replaces it without a new worker. For
// every candidate the worker first decides whether codegen::build_storage would refuse its
// format, exactly and in O(levels), from the prefix counts of the sparse operand (prefix_counts.hpp;
// computed once per problem), and answers a refusal at once. Otherwise it forks a fresh *measuring
// child* that compiles (through the on-disk compile cache), builds the format once and loads the
// kernel, verifies it against the reference, times it and sends the result back over a socket.
// The worker enforces two time limits (prepare: format + compile; run: verification + timing),
// kills a child that overruns, and turns signals, timeouts, refusals, compile errors and wrong
// results into a MeasureStatus with a reason: expected failures of a search are values, never
// exceptions (STYLE.md item 6).
//
// Why a spawned worker: GNU libgomp's thread pool does not survive fork(). A child forked after
// its parent ran an OpenMP parallel region hangs in its own first parallel region (checked with
// GCC 12.2: a two-line program hangs). The worker is a fresh program, never runs OpenMP itself,
// and forks the measuring children, so every child starts with a clean libgomp whatever the
// caller ran before or runs afterwards: a Measurer may be constructed at any time.
//
// The one exception is MeasureOptions::child_hook, a test hook: code cannot cross an exec, so a
// Measurer whose options carry one forks its worker from the caller, and must then be
// constructed before the caller runs any OpenMP parallel region.
#pragma once

#include <sys/types.h>

#include <vector>

#include "waco/heuristics/candidate.hpp"
#include "waco/heuristics/runner.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/reference.hpp"

namespace waco::heuristics {

/// What a side-by-side run (Runner::compare in the measuring child) holds once for all its
/// candidates instead of once each, where that changes no timing: data over twice the
/// last-level cache (kernels::last_level_cache_bytes: with the chain's plausibility cap, so
/// that a VM guest told its host's whole L3 shares at the size it has), of which no candidate's
/// runs leave anything in the cache for another's.
struct SharedData {
  /// The formats candidates store alike (codegen::StorageCache: candidates that differ only in
  /// their loops), when the least a format holds (a value and a coordinate a nonzero) is that
  /// large.
  bool formats = false;
  /// The output (a dense one: not SDDMM's), when it is that large.
  bool output = false;
};
SharedData shared_data(const kernels::Problem& p);

/// The memory layouts compare() times each candidate of `p` in when `layouts` are asked for
/// (MeasureOptions::layouts): kernels::layouts_for (a small problem's), one when the candidates
/// share their output. A side-by-side child holds that many formats and outputs a candidate.
int layouts_for(const kernels::Problem& p, int layouts);

/// The Runner of this machine: measures candidates of one problem, each in its own child process
/// (see the file comment). Not copyable; one measurement at a time (not thread-safe).
class Measurer : public Runner {
 public:
  /// Starts the worker (see the file comment) and loads `p` with its reference `ref` into it.
  /// Throws kernels::Error when the worker program cannot be found or started, or does not
  /// speak this build's protocol (each with a hint). `p` must be validated and `ref` its
  /// reference; both are only read here (the worker keeps its own copy).
  Measurer(const kernels::Problem& p, const kernels::Reference& ref, MeasureOptions opts);
  /// The same, with the reference computed by the worker from the problem it has read: the
  /// caller need not hold it (the output's size twice: values and scales).
  Measurer(const kernels::Problem& p, MeasureOptions opts);
  ~Measurer() override;
  Measurer(const Measurer&) = delete;
  Measurer& operator=(const Measurer&) = delete;

  /// Measures one candidate in a fresh child. Expected failures (refused, compile error, wrong
  /// result, crash, timeout) come back as the status with a reason. Throws kernels::Error only
  /// when the worker itself is gone (e.g. killed from outside), kernels::Cancelled when
  /// options().cancel asked to stop while it waited (the worker's processes are then ended). Racing (see RaceBound; a tuner
  /// passes a factor times the best median so far): a verified candidate found hopeless stops
  /// there, status Abandoned, with the runs made as its times.
  Measurement measure(const Candidate& c, const RaceBound& race = {}) override;

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
                                   const CompareOptions& co = {}) override;

  /// Replaces the worker's problem with `p` (reference `ref`): later requests measure on it, with
  /// the same worker and options. Throws kernels::Error when the worker is gone (it is then
  /// stopped), kernels::InternalError when ref is not p's.
  void load(const kernels::Problem& p, const kernels::Reference& ref);
  /// The same, with the reference computed by the worker (ref nullptr) or sent (else).
  void load(const kernels::Problem& p, const kernels::Reference* ref);

  const MeasureOptions& options() const override { return opts_; }
  /// Threads a candidate with threads = 0 runs on (options().threads resolved).
  int run_threads() const override { return run_threads_; }
  nlohmann::json memory() override;
  /// The worker's process id (for tests and diagnostics).
  pid_t worker_pid() const { return worker_; }

 private:
  /// Both public constructors: ref nullptr when the worker computes it.
  Measurer(const kernels::Problem& p, const kernels::Reference* ref, MeasureOptions opts);
  /// Closes the socket (the worker exits on EOF) and reaps the worker; idempotent.
  void stop();
  /// Waits until the worker's next frame arrives or `deadline` passes (read_frame then reads it
  /// or reports the timeout), polling options().cancel; when the caller cancels, cancelled().
  void await_worker(double deadline);
  /// Kills the worker and everything under it, stops this Measurer and throws kernels::Cancelled.
  [[noreturn]] void cancelled();
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
