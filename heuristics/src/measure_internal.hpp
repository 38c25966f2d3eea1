// Private to heuristics/src: what the layers of isolated measurement share (measure.hpp says
// why the processes exist). One file per layer:
//   measure_child.cpp    the measuring child: prepare, verify, time (measure_here, compare_here)
//   supervisor.cpp       forks a child per request and holds it to its limits (supervise)
//   worker.cpp           the worker's request loop, refusals, compare's screening (worker_main)
//   worker_process.cpp   finds and spawns the worker program (find_measure_worker, spawn_worker)
//   measure_worker_main.cpp  that program, waco-measure-worker: a main over worker_main
//   problem_wire.cpp     the problem in binary ('L' frames)
//   measurer.cpp         the client, Measurer (measure.hpp)
//
// The processes:
//
//   caller (tuner, collect, libwaco; may have run OpenMP, may hold any threads)
//     |  posix_spawn of <libexec>/waco-hybrid/waco-measure-worker, the socket as fd 3, every
//     |  other descriptor closed (a fork of the caller only when MeasureOptions::child_hook is
//     |  set: a test hook is code, and code does not cross an exec)
//     v
//   worker (a fresh process image: its libgomp has no threads; it never runs OpenMP)
//     |  fork, one per request (or more: compare's screening)
//     v
//   measuring child (compiles, builds the format, runs the kernels with OpenMP, times, exits)
//
// Messages between the processes are frames on Unix stream sockets (framing.hpp):
//
//   worker  --'H' "waco-measure-worker N"--->  parent  (hello: started, protocol N)
//   parent  --'L' options, problem, ref----->  worker  (binary, problem_wire.hpp; replaces the
//   worker  --'K'--------------------------->  parent   loaded problem; 'E' when malformed)
//   parent  --'M' {candidates: [one]}------->  worker  --fork-->  child   (a refused format: no
//   parent  --'C' {candidates, rounds}------>  worker  --fork-->  child    child, the worker
//                                                                          answers for it)
//   child   --'P' (prepared)---------------->  worker             (switches from the prepare to the run limit)
//   child   --'X' {overrun, screened}------->  worker             (compare's screening: a run overran its
//                                                                  deadline; the child exits, the worker
//                                                                  forks another for the rest)
//   child   --'N' {index, screened}--------->  worker             (compare: the candidate it prepares and
//                                                                  first runs now; should the child crash
//                                                                  or hang before the next, that one fails
//                                                                  alone and another child goes on)
//   child   --'R' [Measurement...]---------->  worker  --'R' [Measurement...]-->  parent
//   worker  --'E' {error, hint, internal}--->  parent  (a request failed as a whole: malformed,
//                                                       no problem loaded, a bug)
//   child   --'S' peak bytes---------------->  worker  (its peak resident memory, before its 'R')
//   parent  --'S'--------------------------->  worker  --'S' {worker_peak_bytes, ...}-->  parent
//                                                       (memory since the last 'S': memory_json)
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/heuristics/measure.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics::detail {

// ---- measure_child.cpp ----------------------------------------------------------------------

/// m with status st and that reason.
Measurement failed(Measurement m, MeasureStatus st, std::string reason);
/// Verified, Ok, with t's runs as its times.
void set_times(Measurement& m, const kernels::TimingStats& t);

/// What earlier children of one compare request found out before a run overran (see
/// MeasureOptions::compare_screen_margin): the group's fastest probe and, per candidate, the
/// probe runs of those already screened (their first run is made again here, to verify).
struct Screening {
  double best_s = 0.0;
  std::vector<std::vector<double>> probes;
  std::vector<nlohmann::json> prepared;  ///< per screened survivor: its prepared Measurement

  nlohmann::json to_json() const {
    return {{"best_s", best_s}, {"probes", probes}, {"prepared", prepared}};
  }
  static Screening from_json(const nlohmann::json& j) {
    return {j.at("best_s").get<double>(), j.at("probes").get<std::vector<std::vector<double>>>(),
            j.at("prepared").get<std::vector<nlohmann::json>>()};
  }
};

/// Prepares, verifies and times one candidate (opts.warmup untimed runs, then opts.repeats timed
/// ones). Sends the 'P' frame once prepared.
///
/// Every run after the verification is clocked. Racing (race.active()): once opts.race_min_runs
/// runs after the verification have been made and even the fastest of them took longer than
/// race.above_s, the candidate is timed beside race.check (when set) to tell a hopeless candidate
/// from a slow moment of the machine; if it is still above the bound scaled by the drift, timing
/// stops: Abandoned, with the runs made as its times. Otherwise it is timed in full, without
/// racing again. The fastest run, not the median: one slow run cannot abandon a candidate.
std::vector<Measurement> measure_here(const kernels::Problem& p, const kernels::Reference& ref,
                                      const MeasureOptions& opts, int run_threads,
                                      const Candidate& c, const RaceBound& race, int sock);

/// Prepares and verifies every candidate, then times them side by side (time_interleaved:
/// opts.warmup untimed and `rounds` timed rounds; each timed run follows opts.settle untimed runs
/// of the same candidate, so that it finds its own data in the caches as in the search's back-to-back
/// runs, rather than the previous candidate's), then verifies again. One Measurement per
/// candidate, in order. Sends the 'P' frame once all are prepared and screened.
///
/// Racing (opts.compare_race_factor): every verified candidate is run twice more, timed; one
/// whose faster run is above the factor times the fastest candidate's is abandoned there, with
/// those runs as its times (a lower bound), and does not take part in the rounds. Baselines go
/// first and always take part (they are the group's reference), and so does every candidate
/// marked in `keep` (the caller's references, e.g. the csr schedule). Once the group has a fastest
/// candidate, each later run before the rounds has a deadline (screening, see
/// MeasureOptions::compare_screen_margin); one that overruns it ends this child with an 'X' frame
/// that carries the screening so far and the overrunning candidate's prepared Measurement.
/// Before each candidate's preparation and first runs, an 'N' frame names it and carries the
/// screening and failures so far, so that a crash or a hang there is that candidate's alone
/// (supervise, compare_screened); one in the rounds after the 'P' frame is every candidate's.
/// `halving_keep` (CompareOptions::halving_keep): successive halving of the rounds among the
/// generated candidates not in `keep`, by their per-round ratios to the first one in `keep`.
std::vector<Measurement> compare_here(const kernels::Problem& p, const kernels::Reference& ref,
                                      const MeasureOptions& opts, int run_threads,
                                      const std::vector<Candidate>& cs,
                                      const std::vector<char>& keep, int rounds, int halving_keep,
                                      Screening screening, int sock);

// ---- supervisor.cpp -------------------------------------------------------------------------

/// Kills the child when this process dies (Linux). False when the parent is already gone.
bool die_with_parent(pid_t expected_parent);
/// Waits up to `seconds` for the child to exit, then kills it; returns its wait status.
int reap_child(pid_t pid, double seconds);
/// Kills the worker `worker` (a child of this process, leader of its own process group) and every
/// process under it at once: its group (the worker and its measuring child) is stopped first so
/// that nothing new starts, then the descendants in other groups (a compiler runs in a group of
/// its own) are killed with their groups, then the worker's group; the worker is reaped.
void kill_worker_tree(pid_t worker);

/// Measurements as a JSON array and back (the 'R' frames' payload).
nlohmann::json to_json(const std::vector<Measurement>& ms);
std::vector<Measurement> from_json(const nlohmann::json& j);

/// Forks a child running `body` (which returns one Measurement per candidate it was given) and
/// supervises it: the prepare limit until its 'P' frame, then the run limit until its 'R' frame.
/// When the child fails as a whole (crash, timeout), the result is one failed Measurement. An 'X'
/// frame (compare's screening: a run overran its deadline and the child exits) is stored in
/// *overrun, and the result is empty. compare's 'N' frames (the candidate the child prepares and
/// first runs now) each give the child `step_limit` seconds (when > 0) until the next frame; a
/// crash or timeout after one and before the 'P' frame is that candidate's: the 'N' frame's
/// payload, with the failed Measurement as "failed", is stored in *overrun, and the result is
/// empty.
std::vector<Measurement> supervise(double prepare_limit, double run_limit,
                                   const std::function<std::vector<Measurement>(int)>& body,
                                   nlohmann::json* overrun = nullptr, double step_limit = 0.0);

/// The largest peak resident memory a measuring child of this process reported ('S' frames)
/// since the last call, in bytes (0: none); starts again from 0.
std::int64_t take_children_peak();

// ---- worker.cpp -----------------------------------------------------------------------------

/// The payload of the worker's 'S' answer: {"worker_peak_bytes", "worker_rss_bytes",
/// "children_peak_bytes"}, the worker's own peak since the last 'S' request (or its start) and
/// its resident memory now, and the largest peak of the measuring children it forked meanwhile.
/// Starts both peaks again.
nlohmann::json memory_json();

/// The stand-in for a candidate whose verification or probe run overran its deadline `limit` in
/// compare's screening: its prepared Measurement m, Abandoned, the race bound as its times (a
/// lower bound: the run took more than the margin times that), not verified.
/// The deadline of a screened run of compare's racing: max(compare_screen_min_s,
/// compare_screen_margin x `bound`), bound being the race factor x the group's fastest.
inline double screening_limit(const MeasureOptions& o, double bound) {
  return std::max(o.compare_screen_min_s, o.compare_screen_margin * bound);
}

Measurement overran_screening(Measurement m, double limit, double bound);

/// The candidates of a request (the 'M' and 'C' frames' payload).
nlohmann::json candidates_to_json(const std::vector<Candidate>& cs);

/// The 'H' frame's payload: the worker's name and protocol version (both ends must agree).
inline constexpr const char* kWorkerHello = "waco-measure-worker 2";  // 2: 'S' frames

/// The worker's loop: says hello, then answers frames on `sock` until EOF and exits; dies with
/// `parent`. `child_hook` and `probe_hook` (a fork of the caller only) become every loaded
/// problem's MeasureOptions hooks of those names.
[[noreturn]] void worker_main(int sock, pid_t parent,
                              std::function<void(const Candidate&)> child_hook = {},
                              std::function<void(const Candidate&, int)> probe_hook = {});

// ---- worker_process.cpp ---------------------------------------------------------------------

/// The worker program's path: $WACO_MEASURE_WORKER when set, else waco-measure-worker in the
/// libexec folder beside the module that holds this code (libwaco.so, or the executable) or the
/// running executable, as installed or as in the build tree. Throws kernels::Error naming where
/// it looked, with a hint.
std::string find_measure_worker();

/// The worker's environment: `env` (NAME=VALUE strings, as `environ`), with glibc's malloc told
/// to back its large blocks with transparent huge pages (`glibc.malloc.hugetlb=1` added to
/// GLIBC_TUNABLES) unless the caller set that tunable itself (then as the caller set it). The
/// worker and every measuring child it forks hold the operand, the reference and the formats:
/// where the kernel's THP mode is `madvise` (Debian's default), each 4 KiB page of them was a
/// fault on first touch, which costs ~10 us on some VMs (tune/README.md, "Huge pages in the
/// measuring processes"). Elsewhere the tunable changes nothing (THP `always` or `never`, a
/// libc without it).
std::vector<std::string> worker_environment(const char* const* env);

/// Starts `path` with posix_spawn, `sock` as its fd 3 and no other descriptor of this process
/// but 0-2, in worker_environment(environ); returns its pid. Throws kernels::Error when it
/// cannot start.
pid_t spawn_worker(const std::string& path, int sock);

}  // namespace waco::heuristics::detail
