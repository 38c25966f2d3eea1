// The Measurer (measure.hpp): the client end of the measurement worker. It spawns the worker
// program (or forks it, for a test hook), loads the problem into it in binary, and sends it one
// request per measure() or compare() call (measure_internal.hpp has the protocol).
#include "waco/heuristics/measure.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "framing.hpp"
#include "measure_internal.hpp"
#include "problem_wire.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

using kernels::Error;
using kernels::now_seconds;
using detail::read_frame;
using detail::ReadStatus;
using detail::write_frame;
using detail::from_json;
using detail::reap_child;
using detail::candidates_to_json;
using detail::worker_main;

namespace {

/// The worker's 'E' frame as an exception: an InternalError for a bug, else an Error.
[[noreturn]] void throw_worker_error(const std::string& payload) {
  const nlohmann::json j = nlohmann::json::parse(payload, nullptr, false);
  const std::string what = j.is_object() ? j.value("error", payload) : payload;
  if (j.is_object() && j.value("internal", false))
    throw kernels::InternalError("the measurement worker: " + what);
  throw Error(what, j.is_object() ? j.value("hint", std::string()) : std::string());
}

}  // namespace

Measurer::Measurer(const kernels::Problem& p, const kernels::Reference& ref, MeasureOptions opts)
    : Measurer(p, &ref, std::move(opts)) {}

Measurer::Measurer(const kernels::Problem& p, MeasureOptions opts)
    : Measurer(p, nullptr, std::move(opts)) {}

Measurer::Measurer(const kernels::Problem& p, const kernels::Reference* ref, MeasureOptions opts)
    : opts_(std::move(opts)) {
  WACO_ASSERT(opts_.repeats >= 1 && opts_.warmup >= 0 && opts_.race_min_runs >= 1,
              "Measurer needs repeats >= 1, warmup >= 0, race_min_runs >= 1");
  run_threads_ = opts_.threads > 0 ? opts_.threads : kernels::available_cpus();
  p.validate();
  // A test hook is code, which does not cross an exec: with one, the worker is a fork of this
  // process (the caller must then not have run OpenMP yet, see measure.hpp).
  const bool forked = opts_.child_hook || opts_.probe_hook;
  const std::string path = forked ? std::string("(forked)") : detail::find_measure_worker();
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw Error(std::string("cannot create the measurement socket: ") + std::strerror(errno));
  pid_t pid = -1;
  if (forked) {
    const pid_t parent = ::getpid();
    pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      worker_main(fds[1], parent, opts_.child_hook, opts_.probe_hook);
    }
  } else {
    try {
      pid = detail::spawn_worker(path, fds[1]);
    } catch (const Error&) {
      ::close(fds[0]);
      ::close(fds[1]);
      throw;
    }
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    throw Error(std::string("cannot fork the measurement worker: ") + std::strerror(errno),
                "check the process limit (ulimit -u) and free memory");
  }
  worker_ = pid;
  sock_ = fds[0];

  // Its hello: started, and speaking this build's protocol.
  char type = 0;
  std::string hello;
  const double hello_deadline = now_seconds() + 60.0;
  await_worker(hello_deadline);
  const ReadStatus st = read_frame(sock_, hello_deadline, type, hello);
  if (st != ReadStatus::Ok || type != 'H' || hello != detail::kWorkerHello) {
    const pid_t w = worker_;
    stop();
    const std::string hint = "reinstall waco-hybrid so that the program and its worker come from "
                             "one build, or set WACO_MEASURE_WORKER to a working one";
    if (st == ReadStatus::Ok)
      throw Error("the measurement worker " + path + " speaks another protocol ('" + hello +
                      "'; this program expects '" + detail::kWorkerHello + "')", hint);
    throw Error("the measurement worker " + path + " (pid " + std::to_string(w) + ") " +
                    (st == ReadStatus::Timeout ? "did not answer within 60 s of its start"
                                               : "exited before it answered"),
                hint);
  }
  load(p, ref);
}

void Measurer::load(const kernels::Problem& p, const kernels::Reference& ref) { load(p, &ref); }

void Measurer::load(const kernels::Problem& p, const kernels::Reference* ref) {
  WACO_ASSERT(sock_ >= 0, "a problem loaded into a stopped Measurer");
  p.validate();
  const auto out = static_cast<std::size_t>(p.output_size());
  WACO_ASSERT(ref == nullptr || (ref->value.size() == out && ref->scale.size() == out),
              "the reference given to the Measurer is not the problem's");
  const std::uint64_t bytes = detail::load_payload_size(p, ref, opts_, run_threads_);
  const double t0 = now_seconds();
  char type = 0;
  std::string payload;
  ReadStatus st = ReadStatus::Eof;
  // The worker validates what it reads (O(nnz)): a minute, and a second per 100 MB.
  if (detail::write_load_frame(sock_, p, ref, opts_, run_threads_)) {
    const double deadline = t0 + 60.0 + static_cast<double>(bytes) / 1e8;
    await_worker(deadline);
    st = read_frame(sock_, deadline, type, payload);
  }
  if (st == ReadStatus::Ok && type == 'K') return;
  const pid_t w = worker_;
  stop();
  if (st == ReadStatus::Ok && type == 'E') throw_worker_error(payload);
  throw Error("the measurement worker (pid " + std::to_string(w) + ") stopped while loading a "
              "problem of " + std::to_string(bytes) + " bytes",
              "it was killed from outside or ran out of memory; free memory and run again");
}

Measurer::~Measurer() { stop(); }

void Measurer::await_worker(double deadline) {
  if (!opts_.cancel) return;
  for (;;) {
    if (opts_.cancel()) cancelled();
    const double left = deadline - now_seconds();
    if (left <= 0) return;
    pollfd pfd{sock_, POLLIN, 0};
    const int wait_ms =
        static_cast<int>(std::ceil(std::min(left, kCancelPollSeconds) * 1000.0));
    const int pr = ::poll(&pfd, 1, wait_ms);
    if (pr > 0 || (pr < 0 && errno != EINTR)) return;  // a frame, EOF or an error: read_frame's
  }
}

void Measurer::cancelled() {
  if (sock_ >= 0) {
    ::close(sock_);
    sock_ = -1;
  }
  if (worker_ > 0) {
    detail::kill_worker_tree(worker_);
    worker_ = -1;
  }
  throw kernels::Cancelled("stopped at the caller's request (the measurement worker and its "
                           "processes were ended; nothing of the measurement in progress is kept)");
}

void Measurer::stop() {
  if (sock_ >= 0) {
    ::close(sock_);  // the worker reads EOF and exits
    sock_ = -1;
  }
  if (worker_ > 0) {
    reap_child(worker_, 5.0);
    worker_ = -1;
  }
}

std::vector<Measurement> Measurer::request(char type, const std::vector<Candidate>& cs,
                                           int rounds, double limit_s, const RaceBound& race,
                                           const CompareOptions& co) {
  WACO_ASSERT(sock_ >= 0, "a measurement on a stopped Measurer");
  for (const std::size_t k : co.always_timed)
    WACO_ASSERT(k < cs.size(), "CompareOptions::always_timed names a candidate not in the list");
  const double t0 = now_seconds();
  const nlohmann::json request = {{"candidates", candidates_to_json(cs)},
                                  {"rounds", rounds},
                                  {"race",
                                   {{"above_s", race.above_s},
                                    {"check", race.check},
                                    {"check_s", race.check_s}}},
                                  {"compare",
                                   {{"race_factor", co.race_factor},
                                    {"always_timed", co.always_timed},
                                    {"halving_keep", co.halving_keep}}}};
  char type_back = 0;
  std::string payload;
  ReadStatus st = ReadStatus::Eof;
  if (write_frame(sock_, type, request.dump())) {
    await_worker(t0 + limit_s + 60.0);
    st = read_frame(sock_, t0 + limit_s + 60.0, type_back, payload);
  }
  std::vector<Measurement> ms;
  if (st == ReadStatus::Ok && type_back == 'R') ms = from_json(nlohmann::json::parse(payload));
  if (st == ReadStatus::Ok && type_back == 'E') throw_worker_error(payload);
  if (ms.size() != cs.size()) {
    const pid_t w = worker_;
    stop();
    throw Error("the measurement worker (pid " + std::to_string(w) + ") stopped answering while "
                "measuring " + cs.front().label() + (cs.size() > 1 ? " and others" : ""),
                "it was killed from outside or ran out of memory; run the command again, it "
                "resumes where it stopped");
  }
  const double wall = now_seconds() - t0;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    // The machine failed, not the candidate: no result to give (and none to store).
    if (ms[i].environment)
      throw Error("cannot measure " + cs[i].label() + " (nothing was recorded for it; a rerun "
                  "resumes once the cause is fixed): " + ms[i].reason);
  }
  for (std::size_t i = 0; i < cs.size(); ++i) {
    Measurement& m = ms[i];
    m.wall_s = wall;
    // A child that died before reporting could not say how it was to run.
    m.warmup = opts_.warmup;
    m.repeats = type == 'C' ? rounds : opts_.repeats;
    if (m.threads <= 0) m.threads = cs[i].effective_threads(run_threads_);
  }
  return ms;
}

nlohmann::json Measurer::memory() {
  if (sock_ < 0) return nullptr;
  const double deadline = now_seconds() + 60.0;
  char type = 0;
  std::string payload;
  if (!write_frame(sock_, 'S', {})) return nullptr;
  await_worker(deadline);
  if (read_frame(sock_, deadline, type, payload) != ReadStatus::Ok) return nullptr;
  if (type == 'E') throw_worker_error(payload);
  WACO_ASSERT(type == 'S', "unexpected frame from the measurement worker");
  return nlohmann::json::parse(payload);
}

Measurement Measurer::measure(const Candidate& c, const RaceBound& race) {
  return request('M', {c}, opts_.repeats, opts_.prepare_timeout_s + opts_.run_timeout_s, race)
      .front();
}

std::vector<Measurement> Measurer::compare(const std::vector<Candidate>& cs, int rounds,
                                           const CompareOptions& co) {
  WACO_ASSERT(rounds >= 1, "compare needs rounds >= 1");
  if (cs.empty()) return {};
  const double n = static_cast<double>(cs.size());
  return request('C', cs, rounds,
                 (opts_.prepare_timeout_s + opts_.run_timeout_s *
                                                std::max(1.0, double(rounds) / opts_.repeats)) * n,
                 RaceBound{}, co);
}

}  // namespace waco::heuristics
