// The measurement worker (measure_internal.hpp): started once by the Measurer (spawned as
// waco-measure-worker, or forked when the options carry a test hook), it holds the problem of the
// last 'L' frame and answers requests on it: refused formats at once (FormatCheck, from the
// prefix counts), every other candidate through a supervised measuring child; compare's
// screening goes on in a new child after a run overran (compare_screened). It never runs OpenMP.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <new>
#include <optional>

#include "framing.hpp"
#include "measure_internal.hpp"
#include "problem_wire.hpp"
#include "waco/codegen/compiler.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/heuristics/prefix_counts.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/counters.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process_memory.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics::detail {

namespace {

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

/// overran_screening of the candidate an 'X' frame names.
Measurement overran(const nlohmann::json& x) {
  return overran_screening(Measurement::from_json(x.at("measurement")),
                           x.at("limit_s").get<double>(), x.at("bound_s").get<double>());
}

}  // namespace

Measurement overran_screening(Measurement m, double limit, double bound) {
  set_times(m, kernels::summarize({bound}));
  m.verified = false;
  m.status = MeasureStatus::Abandoned;
  char buf[220];
  std::snprintf(buf, sizeof buf,
                "abandoned during its first runs: still running after %.3g s, the screening "
                "deadline; stored with the race bound %.3g s as its lower bound",
                limit, bound);
  m.reason = buf;
  return m;
}

namespace {

/// compare() in the worker: one child prepares, screens and times the candidates (compare_here).
/// When a run overruns its screening deadline the child ends; the overrunning candidate and the
/// ones that failed before it get their Measurements here, and a new child goes on with the
/// others, told the group's fastest probe and the probes already made. So too when the child
/// crashes or hangs while it prepares or first runs a candidate (its 'N' frame named it; each
/// candidate has the prepare and run limits of a measure() there): that candidate is Crashed or
/// Timeout alone. A child that fails in the rounds gives its one Measurement to every candidate
/// it had.
std::vector<Measurement> compare_screened(const kernels::Problem& p, const kernels::Reference& ref,
                                          const MeasureOptions& opts, int run_threads,
                                          const std::vector<Candidate>& cs,
                                          const std::vector<char>& keep, int rounds,
                                          int halving_keep) {
  std::vector<std::optional<Measurement>> out(cs.size());
  Screening screening;
  screening.probes.resize(cs.size());
  screening.prepared.resize(cs.size());
  for (;;) {
    std::vector<std::size_t> left;  // indices into cs of the candidates this child gets
    for (std::size_t i = 0; i < cs.size(); ++i)
      if (!out[i]) left.push_back(i);
    std::vector<Candidate> sub;
    std::vector<char> sub_keep;
    Screening known{screening.best_s, {}, {}};
    for (const std::size_t i : left) {
      sub.push_back(cs[i]);
      sub_keep.push_back(keep[i]);
      known.probes.push_back(screening.probes[i]);
      known.prepared.push_back(screening.prepared[i]);
    }
    const double n = static_cast<double>(sub.size());
    nlohmann::json x;
    std::vector<Measurement> done = supervise(
        opts.prepare_timeout_s * n,
        opts.run_timeout_s * n * std::max(1.0, static_cast<double>(rounds) / opts.repeats),
        [&](int child_sock) {
          return compare_here(p, ref, opts, run_threads, sub, sub_keep, rounds, halving_keep, known,
                              child_sock);
        },
        &x, opts.prepare_timeout_s + opts.run_timeout_s);
    if (x.is_null()) {
      if (done.size() != sub.size()) done.assign(sub.size(), done.front());
      for (std::size_t k = 0; k < left.size(); ++k) out[left[k]] = std::move(done[k]);
      break;
    }
    const Screening seen = Screening::from_json(x.at("screening"));
    screening.best_s = seen.best_s;
    for (std::size_t k = 0; k < left.size(); ++k) {
      screening.probes[left[k]] = seen.probes[k];
      screening.prepared[left[k]] = seen.prepared[k];
    }
    for (const nlohmann::json& f : x.at("failures"))
      out[left.at(f.at("index").get<std::size_t>())] = Measurement::from_json(f.at("measurement"));
    out[left.at(x.at("index").get<std::size_t>())] =
        x.contains("failed") ? Measurement::from_json(x.at("failed")) : overran(x);
  }
  std::vector<Measurement> ms;
  for (auto& m : out) ms.push_back(std::move(*m));
  return ms;
}

std::vector<Candidate> candidates_from_json(const nlohmann::json& j) {
  std::vector<Candidate> cs;
  for (const nlohmann::json& e : j) {
    Candidate c;
    c.implementation = e.at("implementation").get<std::string>();
    if (!e.at("schedule").is_null()) c.schedule = codegen::schedule_from_json(e.at("schedule"));
    cs.push_back(std::move(c));
  }
  return cs;
}

}  // namespace

nlohmann::json candidates_to_json(const std::vector<Candidate>& cs) {
  nlohmann::json j = nlohmann::json::array();
  for (const Candidate& c : cs)
    j.push_back({{"implementation", c.implementation},
                 {"schedule", c.schedule ? codegen::to_json(*c.schedule) : nlohmann::json(nullptr)}});
  return j;
}


nlohmann::json memory_json() {
  nlohmann::json j = {{"worker_peak_bytes", kernels::peak_rss_bytes()},
                      {"worker_rss_bytes", kernels::current_rss_bytes()},
                      {"children_peak_bytes", take_children_peak()}};
  kernels::reset_peak_rss();
  return j;
}

namespace {

/// An 'E' frame: the request failed as a whole (a malformed frame, no problem loaded, a bug).
bool send_error(int sock, const std::string& what, const std::string& hint, bool internal) {
  return write_frame(sock, 'E',
                     nlohmann::json{{"error", what}, {"hint", hint}, {"internal", internal}}.dump());
}

/// The answer to an 'M' or 'C' request on the loaded problem.
std::vector<Measurement> answer_request(const LoadedProblem& lp, FormatCheck& format_check,
                                        char type, const std::string& payload) {
  const kernels::Problem& p = lp.problem;
  const kernels::Reference& ref = lp.reference;
  const MeasureOptions& opts = lp.options;
  const int run_threads = lp.run_threads;
  const nlohmann::json j = nlohmann::json::parse(payload);
  const std::vector<Candidate> cs = candidates_from_json(j.at("candidates"));
  const int rounds = j.at("rounds").get<int>();
  RaceBound race;
  if (const auto it = j.find("race"); it != j.end()) {
    race.above_s = it->at("above_s").get<double>();
    race.check = it->at("check").get<std::string>();
    race.check_s = it->at("check_s").get<double>();
  }
  // compare()'s racing for this request (CompareOptions).
  MeasureOptions request_opts = opts;
  std::vector<char> keep(cs.size(), 0);
  int halving_keep = 0;
  if (const auto it = j.find("compare"); it != j.end()) {
    const double factor = it->at("race_factor").get<double>();
    if (factor >= 0) request_opts.compare_race_factor = factor;
    for (const nlohmann::json& k : it->at("always_timed")) keep.at(k.get<std::size_t>()) = 1;
    halving_keep = it->value("halving_keep", 0);
  }
  // Refused formats are answered here; the rest go to one child.
  std::vector<std::optional<Measurement>> answer(cs.size());
  std::vector<Candidate> todo;
  std::vector<char> todo_keep;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    if (std::optional<std::string> why = format_check.refusal(cs[i])) {
      Measurement r;  // warmup and repeats are filled in by Measurer::request
      r.threads = cs[i].effective_threads(run_threads);
      answer[i] = failed(r, MeasureStatus::Refused, std::move(*why));
    } else {
      todo.push_back(cs[i]);
      todo_keep.push_back(keep[i]);
    }
  }
  std::vector<Measurement> done;
  if (!todo.empty() && type == 'M') {
    done = supervise(opts.prepare_timeout_s, opts.run_timeout_s, [&](int child_sock) {
      return measure_here(p, ref, opts, run_threads, todo.front(), race, child_sock);
    });
    if (done.size() != 1) done.resize(1);
  } else if (!todo.empty()) {
    done = compare_screened(p, ref, request_opts, run_threads, todo, todo_keep, rounds, halving_keep);
  }
  std::vector<Measurement> m;
  std::size_t next = 0;
  for (auto& a : answer) m.push_back(a ? std::move(*a) : std::move(done[next++]));
  return m;
}

/// The machine's memory in bytes: the largest problem frame worth reading.
std::uint64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                               : kMaxFrame;
}

}  // namespace

[[noreturn]] void worker_main(int sock, pid_t parent,
                              std::function<void(const Candidate&)> child_hook,
                              std::function<void(const Candidate&, int)> probe_hook) {
  if (!die_with_parent(parent)) ::_exit(3);
  // The socket came through exec as fd 3, without close-on-exec: set it again, so that no program
  // a measuring child runs (the compiler) holds the caller's connection.
  ::fcntl(sock, F_SETFD, FD_CLOEXEC);
  // Out of the terminal's process group: Ctrl-C stops the tuner (which then closes the socket),
  // never a measuring child in a way that would be recorded as a crash.
  ::setpgid(0, 0);
  // Default dispositions and no blocked signals: a handler the caller installed (a test
  // framework's crash reporter, the tuner's Ctrl-C flag) or a signal it ignored must not carry
  // over into a measuring child (an exec keeps ignored signals and the mask).
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (!write_frame(sock, 'H', kWorkerHello)) ::_exit(0);
  std::unique_ptr<LoadedProblem> current;
  std::optional<FormatCheck> format_check;
  for (;;) {
    char type = 0;
    std::uint64_t length = 0;
    if (read_header(sock, -1.0, type, length) != ReadStatus::Ok) ::_exit(0);
    if (type == 'L') {
      if (length > physical_memory()) {
        send_error(sock, "a problem frame of " + std::to_string(length) + " bytes, more than "
                   "this machine's memory", "", true);
        ::_exit(2);  // the stream is out of step: the Measurer sees the error, then EOF
      }
      // A new problem replaces the loaded one (the old one's memory goes first).
      format_check.reset();
      current.reset();
      FrameSource in(sock, length);
      try {
        current = read_load(in);
      } catch (const WireError& e) {
        try {
          in.drain();
        } catch (const WireTruncated&) {
          ::_exit(0);
        }
        if (!send_error(sock, std::string("malformed problem frame: ") + e.what(),
                        "the program that started the worker and the worker are from different "
                        "builds, or the frame was damaged; reinstall waco-hybrid",
                        false))
          ::_exit(0);
        continue;
      } catch (const WireTruncated&) {
        ::_exit(0);  // the peer is gone
      } catch (const std::bad_alloc&) {
        send_error(sock, "the measurement worker ran out of memory loading a problem of " +
                   std::to_string(length) + " bytes", "free memory, or tune a smaller operand",
                   false);
        ::_exit(2);
      }
      current->options.child_hook = child_hook;
      current->options.probe_hook = probe_hook;
      format_check.emplace(current->problem, current->options);
      // Every measuring child is a fork of this process: what it has cached, each child has. A
      // kernel's cache key holds the compiler's version line, one `c++ --version` run (5-6 ms)
      // that each child would otherwise run again, half the cost of measuring a microsecond
      // kernel. A compiler that cannot run is reported by the children, candidate by candidate.
      try {
        (void)codegen::cache_key({}, current->options.generated.compiler);
      } catch (const kernels::Error&) {
      }
      // Likewise the last-level cache size each child's shared_data asks for (16 sysfs files).
      (void)kernels::last_level_cache_bytes();
      if (!write_frame(sock, 'K', {})) ::_exit(0);
      // After the answer, while the tuner goes on (its choice): whether hardware counters can
      // count here, asked once (kernels::hardware_counters_available: 0.6-0.8 ms where likwid
      // has no way to count, ~12 + 11.5 ms where it loads and scans), which every measuring child
      // asked again before its counted runs; a child forked after a "no" inherits it. (Probing from
      // the worker's start instead, beside the tuner's load and choice, slowed both.)
      if (current->options.hardware_counter_runs > 0) kernels::hardware_counters_available();
      continue;
    }
    if (length > kMaxFrame) {
      send_error(sock, "a request of " + std::to_string(length) + " bytes", "", true);
      ::_exit(2);
    }
    std::string payload(static_cast<std::size_t>(length), '\0');
    if (length > 0 && read_bytes(sock, payload.data(), payload.size(), -1.0) != ReadStatus::Ok)
      ::_exit(0);
    bool sent = false;
    if (type == 'S') {
      sent = write_frame(sock, 'S', memory_json().dump());
    } else if (type != 'M' && type != 'C') {
      sent = send_error(sock, std::string("unknown request '") + type + "' to the measurement worker",
                        "", true);
    } else if (!current) {
      sent = send_error(sock, "a measurement request before any problem was loaded", "", true);
    } else {
      try {
        sent = write_frame(sock, 'R',
                           to_json(answer_request(*current, *format_check, type, payload)).dump());
      } catch (const std::exception& e) {  // a malformed request or a bug: say so, keep serving
        sent = send_error(sock, std::string("the measurement worker failed a request: ") + e.what(),
                          "", true);
      }
    }
    if (!sent) ::_exit(0);
  }
}

}  // namespace waco::heuristics::detail
