// The Measurer (measure.hpp): the client end of the measurement worker. It forks the worker
// (before the caller runs any OpenMP), probes OpenMP in its children, and sends it one request
// per measure() or compare() call (measure_internal.hpp has the protocol).
#include "waco/heuristics/measure.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "framing.hpp"
#include "measure_internal.hpp"
#include "waco/codegen/compiler.hpp"
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

Measurer::Measurer(const kernels::Problem& p, const kernels::Reference& ref, MeasureOptions opts)
    : opts_(std::move(opts)) {
  WACO_ASSERT(opts_.repeats >= 1 && opts_.warmup >= 0 && opts_.race_min_runs >= 1,
              "Measurer needs repeats >= 1, warmup >= 0, race_min_runs >= 1");
  run_threads_ = opts_.threads > 0 ? opts_.threads : kernels::available_cpus();
  p.validate();
  // Every measuring child is a fork of the worker, which is a fork of this process: what this
  // process has cached, each child has. A kernel's cache key holds the compiler's version line,
  // one `c++ --version` run (5-6 ms of wall time) that each child otherwise ran again, half the
  // cost of measuring a microsecond kernel. A compiler that cannot run is reported by the
  // children, candidate by candidate, as before.
  try {
    (void)codegen::cache_key({}, opts_.generated.compiler);
  } catch (const Error&) {
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw Error(std::string("cannot create the measurement socket: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(std::string("cannot fork the measurement worker: ") + std::strerror(errno),
                "check the process limit (ulimit -u) and free memory");
  }
  if (pid == 0) {
    ::close(fds[0]);
    worker_main(fds[1], parent, p, ref, opts_, run_threads_);
  }
  ::close(fds[1]);
  worker_ = pid;
  sock_ = fds[0];

  // The OpenMP probe: a child of the worker must be able to run a parallel region.
  std::string payload;
  char type = 0;
  ReadStatus st = ReadStatus::Eof;
  if (write_frame(sock_, 'O', {})) st = read_frame(sock_, now_seconds() + 60.0, type, payload);
  if (st != ReadStatus::Ok) {
    stop();
    throw Error("the measurement worker did not answer its start-up probe");
  }
  const std::vector<Measurement> answer = from_json(nlohmann::json::parse(payload));
  const Measurement probe = answer.empty() ? Measurement{} : answer.front();
  if (probe.status != MeasureStatus::Ok || probe.threads < 1) {
    stop();
    WACO_ASSERT(false, "OpenMP does not work in measuring children (" + probe.reason +
                           "): the Measurer must be constructed before this process runs any "
                           "OpenMP parallel region (GNU libgomp does not survive fork)");
  }
}

Measurer::~Measurer() { stop(); }

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
                                    {"always_timed", co.always_timed}}}};
  char type_back = 0;
  std::string payload;
  ReadStatus st = ReadStatus::Eof;
  if (write_frame(sock_, type, request.dump()))
    st = read_frame(sock_, t0 + limit_s + 60.0, type_back, payload);
  std::vector<Measurement> ms;
  if (st == ReadStatus::Ok && type_back == 'R') ms = from_json(nlohmann::json::parse(payload));
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
