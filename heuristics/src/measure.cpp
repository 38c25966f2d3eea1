// Isolated measurement: a worker process forked early, and one measuring child per candidate
// (see measure.hpp for why). Messages between the processes are frames on Unix stream sockets:
// one type byte, a 32-bit length, then the payload (JSON text). Sockets rather than pipes so that
// writes can use MSG_NOSIGNAL: a peer that died is an error value, never a SIGPIPE.
//
//   parent  --'M' candidate JSON-->  worker  --fork-->  child   (a refused format: no child,
//                                                                 the worker answers 'R' itself)
//   parent  --'O' (OpenMP probe)-->  worker  --fork-->  child
//   child   --'P' (prepared)------>  worker             (switches from the prepare to the run limit)
//   child   --'R' Measurement----->  worker  --'R' Measurement-->  parent
#include "waco/heuristics/measure.hpp"

#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "waco/codegen/compiler.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/heuristics/prefix_counts.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/implementation.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

using kernels::Error;
using kernels::now_seconds;

std::string_view status_name(MeasureStatus s) {
  switch (s) {
    case MeasureStatus::Ok: return "ok";
    case MeasureStatus::Refused: return "refused";
    case MeasureStatus::CompileError: return "compile-error";
    case MeasureStatus::WrongResult: return "wrong-result";
    case MeasureStatus::Crashed: return "crashed";
    case MeasureStatus::Timeout: return "timeout";
  }
  WACO_ASSERT(false, "unknown MeasureStatus");
  return {};
}

std::optional<MeasureStatus> parse_status(std::string_view name) {
  for (MeasureStatus s : kAllStatuses)
    if (status_name(s) == name) return s;
  return std::nullopt;
}

Candidate Candidate::generated(const codegen::SuperSchedule& s) {
  Candidate c;
  c.schedule = codegen::canonicalize(s);
  c.implementation = "generated";
  return c;
}

Candidate Candidate::baseline(std::string name) {
  Candidate c;
  c.implementation = std::move(name);
  return c;
}

std::string Candidate::label() const {
  return schedule ? codegen::to_text(*schedule) : "impl=" + implementation;
}

int Candidate::effective_threads(int run_threads) const {
  return schedule && schedule->threads > 0 ? schedule->threads : run_threads;
}

nlohmann::json Measurement::to_json() const {
  return {{"status", status_name(status)}, {"reason", reason},       {"seconds", seconds},
          {"median_s", median_s},          {"min_s", min_s},         {"max_s", max_s},
          {"warmup", warmup},              {"repeats", repeats},     {"threads", threads},
          {"verified", verified},          {"max_rel_error", max_rel_error},
          {"conversion_s", conversion_s},  {"compile_s", compile_s}, {"cache_hit", cache_hit},
          {"kernel_source", kernel_source}, {"stored_values", stored_values},
          {"wall_s", wall_s}};
}

Measurement Measurement::from_json(const nlohmann::json& j) {
  Measurement m;
  const auto st = parse_status(j.at("status").get<std::string>());
  WACO_ASSERT(st.has_value(), "unknown measurement status in a worker message");
  m.status = *st;
  m.reason = j.at("reason").get<std::string>();
  m.seconds = j.at("seconds").get<std::vector<double>>();
  m.median_s = j.at("median_s").get<double>();
  m.min_s = j.at("min_s").get<double>();
  m.max_s = j.at("max_s").get<double>();
  m.warmup = j.at("warmup").get<int>();
  m.repeats = j.at("repeats").get<int>();
  m.threads = j.at("threads").get<int>();
  m.verified = j.at("verified").get<bool>();
  m.max_rel_error = j.at("max_rel_error").get<double>();
  m.conversion_s = j.at("conversion_s").get<double>();
  m.compile_s = j.at("compile_s").get<double>();
  m.cache_hit = j.at("cache_hit").get<bool>();
  m.kernel_source = j.at("kernel_source").get<std::string>();
  m.stored_values = j.at("stored_values").get<std::int64_t>();
  m.wall_s = j.at("wall_s").get<double>();
  return m;
}

namespace {

// ---- framing ------------------------------------------------------------------------------

enum class ReadStatus { Ok, Eof, Timeout };

/// Writes all of buf; false when the peer is gone.
bool send_all(int fd, const char* buf, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, buf, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    buf += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool write_frame(int fd, char type, const std::string& payload) {
  char header[5];
  header[0] = type;
  const std::uint32_t len = static_cast<std::uint32_t>(payload.size());
  std::memcpy(header + 1, &len, 4);
  return send_all(fd, header, 5) && send_all(fd, payload.data(), payload.size());
}

/// Reads exactly n bytes before `deadline` (now_seconds() scale; < 0 = no deadline).
ReadStatus read_all(int fd, char* buf, std::size_t n, double deadline) {
  while (n > 0) {
    int wait_ms = -1;
    if (deadline >= 0) {
      const double left = deadline - now_seconds();
      if (left <= 0) return ReadStatus::Timeout;
      wait_ms = static_cast<int>(std::ceil(left * 1000.0));
    }
    pollfd pfd{fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, wait_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return ReadStatus::Eof;
    }
    if (pr == 0) continue;  // the deadline check above decides
    const ssize_t r = ::read(fd, buf, n);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ReadStatus::Eof;
    }
    if (r == 0) return ReadStatus::Eof;
    buf += r;
    n -= static_cast<std::size_t>(r);
  }
  return ReadStatus::Ok;
}

ReadStatus read_frame(int fd, double deadline, char& type, std::string& payload) {
  char header[5];
  ReadStatus st = read_all(fd, header, 5, deadline);
  if (st != ReadStatus::Ok) return st;
  type = header[0];
  std::uint32_t len = 0;
  std::memcpy(&len, header + 1, 4);
  payload.assign(len, '\0');
  return len == 0 ? ReadStatus::Ok : read_all(fd, payload.data(), len, deadline);
}

/// Kills the child when this process dies (Linux). False when the parent is already gone.
bool die_with_parent(pid_t expected_parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  return ::getppid() == expected_parent;
}

/// waitpid that retries on EINTR; returns the status, or -1 when there is no such child.
int wait_child(pid_t pid, bool block) {
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, block ? 0 : WNOHANG);
    if (r == pid) return status;
    if (r == 0) return -2;  // still running
    if (errno != EINTR) return -1;
  }
}

/// Waits up to `seconds` for the child to exit, then kills it; returns its wait status.
int reap_child(pid_t pid, double seconds) {
  const double until = now_seconds() + seconds;
  for (;;) {
    const int st = wait_child(pid, false);
    if (st != -2) return st;
    if (now_seconds() >= until) {
      ::kill(pid, SIGKILL);
      return wait_child(pid, true);
    }
    ::usleep(2000);
  }
}

std::string format_limit(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  return buf;
}

/// How a child that sent no result ended ("was killed by signal 11 (Segmentation fault)").
std::string describe_exit(int status) {
  if (status == -1) return "vanished";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "unknown") + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status)) +
                                " without a result";
  return "stopped abnormally (wait status " + std::to_string(status) + ")";
}

// ---- the measuring child -------------------------------------------------------------------

Measurement failed(Measurement m, MeasureStatus st, std::string reason) {
  m.status = st;
  m.reason = std::move(reason);
  return m;
}

std::string error_text(const Error& e) {
  std::string s = e.what();
  if (!e.hint().empty()) s += " (hint: " + e.hint() + ")";
  return s;
}

/// Prepares, verifies and times one candidate. Sends the 'P' frame once prepared.
Measurement measure_here(const kernels::Problem& p, const kernels::Reference& ref,
                         const MeasureOptions& opts, int run_threads, const Candidate& c,
                         int sock) {
  Measurement m;
  m.warmup = opts.warmup;
  m.repeats = opts.repeats;
  m.threads = c.effective_threads(run_threads);
  std::unique_ptr<kernels::Implementation> impl;
  codegen::GeneratedKernel* generated = nullptr;
  if (c.schedule) {
    const codegen::SuperSchedule& s = *c.schedule;
    if (s.kind != p.kind)
      return failed(m, MeasureStatus::Refused,
                    "the schedule is for " + std::string(kernels::kernel_name(s.kind)));
    const std::vector<std::string> problems = codegen::validate(s);
    if (!problems.empty())
      return failed(m, MeasureStatus::Refused, "invalid schedule: " + problems.front());
    // A format build_storage refuses never gets here: the worker refused it from the prefix
    // counts (FormatCheck), so the format is built once and the kernel compiled once, both by
    // prepare() below (which also resolves the race strategy: the source depends on it).
    auto g = std::make_unique<codegen::GeneratedKernel>(s, opts.generated);
    generated = g.get();
    impl = std::move(g);
  } else {
    try {
      impl = kernels::make_implementation(c.implementation, p.kind);
    } catch (const Error& e) {
      return failed(m, MeasureStatus::Refused, error_text(e));
    }
  }
  try {
    impl->prepare(p, run_threads);
  } catch (const Error& e) {
    // For a generated kernel whose format passed FormatCheck, what remains to fail is the
    // compilation (its command and log are in the message).
    return failed(m, generated ? MeasureStatus::CompileError : MeasureStatus::Refused,
                  error_text(e));
  }
  m.conversion_s = impl->conversion_seconds();
  if (generated) {
    m.compile_s = generated->compile_seconds();
    m.cache_hit = generated->cache_hit();
    m.threads = generated->threads();
    m.kernel_source = generated->source_path();
    m.stored_values = generated->storage().stored_values();
  }
  write_frame(sock, 'P', {});
  if (opts.child_hook) opts.child_hook(c);

  const auto check = [&](const char* when) -> std::optional<std::string> {
    const std::vector<float>& out = impl->output();
    const kernels::Verification v =
        kernels::verify(out.data(), static_cast<std::int64_t>(out.size()), ref, opts.tolerance);
    m.max_rel_error = v.max_rel_error;
    if (v.ok) return std::nullopt;
    return std::string(when) + ": " + v.message;
  };
  impl->run();
  if (auto bad = check("first run")) return failed(m, MeasureStatus::WrongResult, *bad);
  const kernels::TimingStats t =
      kernels::time_repeated([&] { impl->run(); }, {opts.warmup, opts.repeats});
  if (auto bad = check("after timing")) return failed(m, MeasureStatus::WrongResult, *bad);
  m.verified = true;
  m.seconds = t.seconds;
  m.median_s = t.median;
  m.min_s = t.min;
  m.max_s = t.max;
  m.status = MeasureStatus::Ok;
  return m;
}

/// Runs an OpenMP parallel region on two threads (the probe); reports the team size.
Measurement openmp_probe() {
  int team = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    team = omp_get_num_threads();
  }
  Measurement m;
  m.status = MeasureStatus::Ok;
  m.threads = team;
  return m;
}

// ---- the worker ----------------------------------------------------------------------------

/// The refusal check of generated candidates, in the worker before any child is forked: exact
/// (check_format mirrors codegen::build_storage's size checks) and O(levels) per candidate, from
/// the prefix counts of the sparse operand, computed on first use (serial: no OpenMP in the
/// worker). A refused format costs neither a child, a build nor a compile.
class FormatCheck {
 public:
  FormatCheck(const kernels::Problem& p, const MeasureOptions& opts) : p_(p), opts_(opts) {}

  /// build_storage's refusal message for the candidate's format, or nullopt when it is built
  /// (or when the candidate is not a valid schedule of this problem: the child says why).
  std::optional<std::string> refusal(const Candidate& c) {
    if (!c.schedule || c.schedule->kind != p_.kind || !codegen::validate(*c.schedule).empty())
      return std::nullopt;
    if (kernels::needs_tensor(p_.kind) && (p_.T == nullptr || p_.T->order() != 3))
      return std::nullopt;
    if (!counts_) {
      counts_ = PrefixCounts::compute(p_);
      extents_ = codegen::extents(codegen::kernel_spec(p_.kind), p_);
    }
    const codegen::SuperSchedule& s = *c.schedule;
    const std::vector<codegen::Loop> levels = s.levels();
    const double bound = opts_.generated.storage.max_padding;
    const FormatVerdict v = check_format(*counts_, codegen::kernel_spec(p_.kind), extents_,
                                         s.split, levels, s.formats, bound);
    if (v.refusal == nullptr) return std::nullopt;
    return describe_refusal(v, levels, s.formats, counts_->nnz(), bound);
  }

 private:
  const kernels::Problem& p_;
  const MeasureOptions& opts_;
  std::optional<PrefixCounts> counts_;
  std::vector<std::int64_t> extents_;
};

/// Forks a child running `body` and supervises it: the prepare limit until its 'P' frame, then
/// the run limit until its 'R' frame.
template <class Body>
Measurement supervise(double prepare_limit, double run_limit, Body body) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    Measurement m;
    return failed(m, MeasureStatus::Crashed,
                  std::string("socketpair failed: ") + std::strerror(errno));
  }
  const pid_t worker = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    Measurement m;
    return failed(m, MeasureStatus::Crashed, std::string("fork failed: ") + std::strerror(errno));
  }
  if (child == 0) {
    ::close(fds[0]);
    if (!die_with_parent(worker)) ::_exit(3);
    Measurement m;
    try {
      m = body(fds[1]);
    } catch (const std::exception& e) {  // a bug or bad_alloc in the child: report, do not hide
      m = failed(Measurement{}, MeasureStatus::Crashed,
                 std::string("uncaught exception in the measuring child: ") + e.what());
    }
    write_frame(fds[1], 'R', m.to_json().dump());
    ::_exit(0);
  }
  ::close(fds[1]);
  const int sock = fds[0];
  double limit = prepare_limit;
  double deadline = now_seconds() + limit;
  const char* phase = "preparing (format, compile)";
  Measurement m;
  for (;;) {
    char type = 0;
    std::string payload;
    const ReadStatus st = read_frame(sock, deadline, type, payload);
    if (st == ReadStatus::Timeout) {
      ::kill(child, SIGKILL);
      wait_child(child, true);
      m = failed(Measurement{}, MeasureStatus::Timeout,
                 "no result within " + format_limit(limit) + " s while " + phase +
                     "; the child was killed");
      break;
    }
    if (st == ReadStatus::Eof) {
      const int status = reap_child(child, 10.0);
      m = failed(Measurement{}, MeasureStatus::Crashed,
                 "the measuring child " + describe_exit(status) + " while " + phase);
      break;
    }
    if (type == 'P') {
      limit = run_limit;
      deadline = now_seconds() + limit;
      phase = "running (verification, timing)";
      continue;
    }
    WACO_ASSERT(type == 'R', "unexpected frame from the measuring child");
    m = Measurement::from_json(nlohmann::json::parse(payload));
    reap_child(child, 10.0);
    break;
  }
  ::close(sock);
  return m;
}

[[noreturn]] void worker_main(int sock, pid_t parent, const kernels::Problem& p,
                              const kernels::Reference& ref, const MeasureOptions& opts,
                              int run_threads) {
  if (!die_with_parent(parent)) ::_exit(3);
  // Out of the terminal's process group: Ctrl-C stops the tuner (which then closes the socket),
  // never a measuring child in a way that would be recorded as a crash.
  ::setpgid(0, 0);
  // Default dispositions and no blocked signals: a handler the caller installed (a test
  // framework's crash reporter, the tuner's Ctrl-C flag) must not run in a measuring child.
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  FormatCheck format_check(p, opts);
  for (;;) {
    char type = 0;
    std::string payload;
    if (read_frame(sock, -1.0, type, payload) != ReadStatus::Ok) ::_exit(0);
    Measurement m;
    if (type == 'O') {
      m = supervise(5.0, 5.0, [](int child_sock) {
        write_frame(child_sock, 'P', {});
        return openmp_probe();
      });
    } else {
      WACO_ASSERT(type == 'M', "unexpected request to the measurement worker");
      const nlohmann::json j = nlohmann::json::parse(payload);
      Candidate c;
      c.implementation = j.at("implementation").get<std::string>();
      if (!j.at("schedule").is_null()) c.schedule = codegen::schedule_from_json(j.at("schedule"));
      if (std::optional<std::string> why = format_check.refusal(c)) {
        m.warmup = opts.warmup;
        m.repeats = opts.repeats;
        m.threads = c.effective_threads(run_threads);
        m = failed(m, MeasureStatus::Refused, std::move(*why));
      } else {
        m = supervise(opts.prepare_timeout_s, opts.run_timeout_s, [&](int child_sock) {
          return measure_here(p, ref, opts, run_threads, c, child_sock);
        });
      }
    }
    if (!write_frame(sock, 'R', m.to_json().dump())) ::_exit(0);
  }
}

}  // namespace

Measurer::Measurer(const kernels::Problem& p, const kernels::Reference& ref, MeasureOptions opts)
    : opts_(std::move(opts)) {
  WACO_ASSERT(opts_.repeats >= 1 && opts_.warmup >= 0, "Measurer needs repeats >= 1, warmup >= 0");
  run_threads_ = opts_.threads > 0 ? opts_.threads : kernels::available_cpus();
  p.validate();
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
  const Measurement probe = Measurement::from_json(nlohmann::json::parse(payload));
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

Measurement Measurer::measure(const Candidate& c) {
  WACO_ASSERT(sock_ >= 0, "measure() on a stopped Measurer");
  const double t0 = now_seconds();
  const nlohmann::json request = {
      {"implementation", c.implementation},
      {"schedule", c.schedule ? codegen::to_json(*c.schedule) : nlohmann::json(nullptr)}};
  char type = 0;
  std::string payload;
  ReadStatus st = ReadStatus::Eof;
  if (write_frame(sock_, 'M', request.dump()))
    st = read_frame(sock_, t0 + opts_.prepare_timeout_s + opts_.run_timeout_s + 60.0, type,
                    payload);
  if (st != ReadStatus::Ok || type != 'R') {
    const pid_t w = worker_;
    stop();
    throw Error("the measurement worker (pid " + std::to_string(w) + ") stopped answering while "
                "measuring " + c.label(),
                "it was killed from outside or ran out of memory; run the command again, it "
                "resumes where it stopped");
  }
  Measurement m = Measurement::from_json(nlohmann::json::parse(payload));
  m.wall_s = now_seconds() - t0;
  // A child that died before reporting could not say how it was to run.
  m.warmup = opts_.warmup;
  m.repeats = opts_.repeats;
  if (m.threads <= 0) m.threads = c.effective_threads(run_threads_);
  return m;
}

}  // namespace waco::heuristics
