// Isolated measurement: a worker process forked early, and one measuring child per request
// (see measure.hpp for why). Messages between the processes are frames on Unix stream sockets
// (framing.hpp):
//
//   parent  --'M' {candidates: [one]}------>  worker  --fork-->  child   (a refused format: no
//   parent  --'C' {candidates, rounds}------>  worker  --fork-->  child    child, the worker
//   parent  --'O' (OpenMP probe)----------->  worker  --fork-->  child    answers for it)
//   child   --'P' (prepared)--------------->  worker             (switches from the prepare to the run limit)
//   child   --'X' {overrun, screened}------>  worker             (compare's screening: a run overran its
//                                                                 deadline; the child exits, the worker
//                                                                 forks another for the rest)
//   child   --'R' [Measurement...]--------->  worker  --'R' [Measurement...]-->  parent
#include "waco/heuristics/measure.hpp"

#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "waco/codegen/compiler.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "framing.hpp"
#include "waco/heuristics/prefix_counts.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/counters.hpp"
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
    case MeasureStatus::Abandoned: return "abandoned";
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
          {"wall_s", wall_s}, {"counters", counters}, {"race", race}};
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
  m.counters = j.value("counters", nlohmann::json());
  m.race = j.value("race", std::string());
  return m;
}

namespace {

using detail::read_frame;
using detail::ReadStatus;
using detail::write_frame;

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

/// A candidate made ready in the measuring child: its implementation built and prepared (format
/// and compile), or, when that failed, impl is null and m says why.
struct Prepared {
  std::unique_ptr<kernels::Implementation> impl;
  Measurement m;
};

Prepared prepare_candidate(const kernels::Problem& p, const MeasureOptions& opts, int run_threads,
                           const Candidate& c) {
  Prepared r;
  Measurement& m = r.m;
  codegen::GeneratedKernel* generated = nullptr;  // r.impl, when it is a generated kernel
  m.warmup = opts.warmup;
  m.repeats = opts.repeats;
  m.threads = c.effective_threads(run_threads);
  if (c.schedule) {
    const codegen::SuperSchedule& s = *c.schedule;
    if (s.kind != p.kind) {
      m = failed(m, MeasureStatus::Refused,
                 "the schedule is for " + std::string(kernels::kernel_name(s.kind)));
      return r;
    }
    const std::vector<std::string> problems = codegen::validate(s);
    if (!problems.empty()) {
      m = failed(m, MeasureStatus::Refused, "invalid schedule: " + problems.front());
      return r;
    }
    // A format build_storage refuses never gets here: the worker refused it from the prefix
    // counts (FormatCheck), so the format is built once and the kernel compiled once, both by
    // prepare() below (which also resolves the race strategy: the source depends on it).
    auto g = std::make_unique<codegen::GeneratedKernel>(s, opts.generated);
    generated = g.get();
    r.impl = std::move(g);
  } else {
    try {
      r.impl = kernels::make_implementation(c.implementation, p.kind);
    } catch (const Error& e) {
      m = failed(m, MeasureStatus::Refused, error_text(e));
      return r;
    }
  }
  try {
    r.impl->prepare(p, run_threads);
  } catch (const Error& e) {
    // For a generated kernel whose format passed FormatCheck, what remains to fail is the
    // compilation (its command and log are in the message).
    m = failed(m, generated ? MeasureStatus::CompileError : MeasureStatus::Refused,
               error_text(e));
    r.impl.reset();
    return r;
  }
  m.conversion_s = r.impl->conversion_seconds();
  if (generated) {
    m.compile_s = generated->compile_seconds();
    m.cache_hit = generated->cache_hit();
    m.threads = generated->threads();
    m.kernel_source = generated->source_path();
    m.stored_values = generated->storage().stored_values();
    m.race = codegen::race_strategy_name(generated->race());
  }
  return r;
}

/// Verifies the prepared candidate's output; on a mismatch marks it WrongResult, drops its
/// implementation and returns false.
bool verify_output(Prepared& c, const kernels::Reference& ref, double tolerance,
                   const char* when) {
  const kernels::AlignedFloats& out = c.impl->output();
  const kernels::Verification v =
      kernels::verify(out.data(), static_cast<std::int64_t>(out.size()), ref, tolerance);
  c.m.max_rel_error = v.max_rel_error;
  if (v.ok) return true;
  c.m = failed(c.m, MeasureStatus::WrongResult, std::string(when) + ": " + v.message);
  c.impl.reset();
  return false;
}

void set_times(Measurement& m, const kernels::TimingStats& t) {
  m.verified = true;
  m.seconds = t.seconds;
  m.median_s = t.median;
  m.min_s = t.min;
  m.max_s = t.max;
  m.status = MeasureStatus::Ok;
}

/// Seconds one call of fn takes.
template <class Fn>
double clocked(Fn&& fn) {
  const double t0 = now_seconds();
  fn();
  return now_seconds() - t0;
}

/// Racing's side-by-side check (RaceBound::check): the reference implementation prepared here
/// and timed alternately with the candidate, two runs each after one untimed run. Returns how
/// much slower the machine is now than when the bound was set (the reference's fastest run over
/// race.check_s, at least 1) and lowers `fastest` by the candidate's runs; nullopt when the
/// reference cannot run here.
std::optional<double> race_drift(const kernels::Problem& p, int run_threads, const RaceBound& race,
                                 kernels::Implementation& candidate, double& fastest) {
  std::unique_ptr<kernels::Implementation> ref;
  try {
    ref = kernels::make_implementation(race.check, p.kind);
    ref->prepare(p, run_threads);
  } catch (const Error&) {
    return std::nullopt;
  }
  ref->run();
  double ref_fastest = std::numeric_limits<double>::infinity();
  for (int k = 0; k < 2; ++k) {
    ref_fastest = std::min(ref_fastest, clocked([&] { ref->run(); }));
    fastest = std::min(fastest, clocked([&] { candidate.run(); }));
  }
  return std::max(1.0, ref_fastest / race.check_s);
}

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
                                      const Candidate& c, const RaceBound& race, int sock) {
  Prepared r = prepare_candidate(p, opts, run_threads, c);
  if (!r.impl) return {r.m};
  write_frame(sock, 'P', {});
  if (opts.child_hook) opts.child_hook(c);
  r.impl->run();
  if (!verify_output(r, ref, opts.tolerance, "first run")) return {r.m};
  kernels::Implementation* impl = r.impl.get();
  std::vector<double> runs, timed;  // every run after the verification; the timed ones
  double fastest = std::numeric_limits<double>::infinity();
  bool racing = race.active();
  for (int k = 0; k < opts.warmup + opts.repeats; ++k) {
    const double dt = clocked([impl] { impl->run(); });
    runs.push_back(dt);
    if (k >= opts.warmup) timed.push_back(dt);
    fastest = std::min(fastest, dt);
    if (!racing || static_cast<int>(runs.size()) < opts.race_min_runs ||
        fastest <= race.above_s || k + 1 == opts.warmup + opts.repeats)
      continue;
    racing = false;  // decided now, either way
    double drift = 1.0;
    std::string checked;
    if (!race.check.empty() && race.check_s > 0) {
      if (const std::optional<double> d = race_drift(p, run_threads, race, *impl, fastest)) {
        drift = *d;
        char buf[160];
        std::snprintf(buf, sizeof buf, "; beside %s now the machine is %.2fx slower than when "
                                       "the bound was set", race.check.c_str(), drift);
        checked = buf;
      }
    }
    if (fastest <= race.above_s * drift) continue;
    set_times(r.m, kernels::summarize(runs));
    r.m.status = MeasureStatus::Abandoned;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "abandoned after %zu runs (%zu timed): the fastest took %.3g s, more than the "
                  "race bound %.3g s",
                  runs.size(), timed.size(), fastest, race.above_s * drift);
    r.m.reason = buf + checked;
    return {r.m};
  }
  if (!verify_output(r, ref, opts.tolerance, "after timing")) return {r.m};
  set_times(r.m, kernels::summarize(timed));
  return {r.m};
}

/// Ends the measuring child when an armed run is still going at its deadline: sends the parent
/// an 'X' frame (made by `report`, called on the watchdog's thread while the main thread is
/// inside the run, so it may read what the main thread left before arming) and exits. The
/// worker records the overrun and forks a new child for the candidates left.
class Watchdog {
 public:
  explicit Watchdog(int sock) : sock_(sock), thread_([this] { watch(); }) {}
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  /// Calls fn with a deadline of `seconds` from now.
  template <class Fn>
  void guard(double seconds, std::function<std::string()> report, Fn&& fn) {
    {
      std::lock_guard<std::mutex> l(mu_);
      deadline_ = now_seconds() + seconds;
      report_ = std::move(report);
      armed_ = true;
    }
    cv_.notify_all();
    fn();
    std::lock_guard<std::mutex> l(mu_);
    armed_ = false;
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(l);
        continue;
      }
      const double left = deadline_ - now_seconds();
      if (left > 0) {
        cv_.wait_for(l, std::chrono::duration<double>(left));
        continue;
      }
      write_frame(sock_, 'X', report_());
      ::_exit(4);
    }
  }

  int sock_;
  std::mutex mu_;
  std::condition_variable cv_;
  double deadline_ = 0.0;
  std::function<std::string()> report_;
  bool armed_ = false;
  bool stop_ = false;
  std::thread thread_;
};

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
std::vector<Measurement> compare_here(const kernels::Problem& p, const kernels::Reference& ref,
                                      const MeasureOptions& opts, int run_threads,
                                      const std::vector<Candidate>& cs,
                                      const std::vector<char>& keep, int rounds,
                                      Screening screening, int sock) {
  const bool racing = opts.compare_race_factor > 0;
  screening.probes.resize(cs.size());
  screening.prepared.resize(cs.size());
  std::vector<std::vector<double>>& probe = screening.probes;
  std::vector<Prepared> ready(cs.size());
  std::vector<std::function<void()>> runs(cs.size());
  std::vector<std::size_t> order;  // baselines first: they set the group's fastest
  for (std::size_t i = 0; i < cs.size(); ++i)
    if (!cs[i].is_generated()) order.push_back(i);
  for (std::size_t i = 0; i < cs.size(); ++i)
    if (cs[i].is_generated()) order.push_back(i);
  std::unique_ptr<Watchdog> dog = racing ? std::make_unique<Watchdog>(sock) : nullptr;
  std::vector<std::size_t> failed_here;  // screened candidates that failed (no rounds for them)
  // A candidate whose faster probe is above the race factor times the group's fastest: abandoned
  // with its probes as its times (a lower bound); it takes no part in the rounds.
  auto abandon = [&](std::size_t i) {
    const double fastest = *std::min_element(probe[i].begin(), probe[i].end());
    Measurement& m = ready[i].m;
    set_times(m, kernels::summarize(probe[i]));
    m.status = MeasureStatus::Abandoned;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "abandoned after 2 timed runs: the faster took %.3g s, more than %g x the group's "
                  "fastest %.3g s",
                  fastest, opts.compare_race_factor, screening.best_s);
    m.reason = buf;
    runs[i] = nullptr;
    ready[i].impl.reset();
  };
  const auto raced = [&](std::size_t i) { return racing && cs[i].is_generated() && !keep[i]; };
  auto hopeless = [&](std::size_t i) {
    return raced(i) && !probe[i].empty() &&
           *std::min_element(probe[i].begin(), probe[i].end()) >
               opts.compare_race_factor * screening.best_s;
  };
  // Screened by an earlier child of this request (see compare_screened): prepared only after the
  // screening here, for the rounds, so that a restart does not prepare them again and again.
  std::vector<std::size_t> deferred;
  for (const std::size_t i : order) {
    if (!probe[i].empty()) {
      deferred.push_back(i);
      continue;
    }
    ready[i] = prepare_candidate(p, opts, run_threads, cs[i]);
    Prepared& r = ready[i];
    if (!r.impl) {
      failed_here.push_back(i);
      continue;
    }
    if (opts.child_hook) opts.child_hook(cs[i]);
    const bool guarded = raced(i) && screening.best_s > 0;
    const double bound = opts.compare_race_factor * screening.best_s;
    const double limit = std::max(opts.compare_screen_min_s, opts.compare_screen_margin * bound);
    // The overrun report: this candidate's prepared Measurement, the probes and failures so far.
    auto report = [&, i] {
      nlohmann::json failures = nlohmann::json::array();
      for (const std::size_t f : failed_here)
        failures.push_back({{"index", f}, {"measurement", ready[f].m.to_json()}});
      return nlohmann::json{{"index", i},
                            {"limit_s", limit},
                            {"bound_s", bound},
                            {"measurement", r.m.to_json()},
                            {"failures", failures},
                            {"screening", screening.to_json()}}
          .dump();
    };
    auto run_once = [&] {
      const auto body = [&] { r.impl->run(); };
      if (!guarded) return clocked(body);
      double t = 0;
      dog->guard(limit, report, [&] { t = clocked(body); });
      return t;
    };
    run_once();
    if (!verify_output(r, ref, opts.tolerance, "first run")) {
      failed_here.push_back(i);
      continue;
    }
    runs[i] = [impl = r.impl.get()] { impl->run(); };
    if (!racing) continue;
    for (int k = 0; k < 2; ++k) probe[i].push_back(run_once());
    const double fastest = *std::min_element(probe[i].begin(), probe[i].end());
    if (screening.best_s <= 0 || fastest < screening.best_s) screening.best_s = fastest;
    screening.prepared[i] = r.m.to_json();
  }
  dog.reset();
  for (const std::size_t i : deferred) {
    if (hopeless(i)) {  // no need to prepare it again
      ready[i].m = Measurement::from_json(screening.prepared[i]);
      abandon(i);
      continue;
    }
    ready[i] = prepare_candidate(p, opts, run_threads, cs[i]);
    Prepared& r = ready[i];
    if (!r.impl) continue;
    r.impl->run();
    if (verify_output(r, ref, opts.tolerance, "first run")) runs[i] = [impl = r.impl.get()] { impl->run(); };
  }
  write_frame(sock, 'P', {});
  for (std::size_t i = 0; i < cs.size(); ++i)
    if (runs[i] && hopeless(i)) abandon(i);
  const std::vector<kernels::TimingStats> t = kernels::time_interleaved(
      runs, {opts.warmup, rounds, kernels::now_seconds, opts.retake_disturbed}, opts.settle);
  // Hardware counters where the machine exposes them (KVM guests without a PMU do not: the
  // backend is then "none"), around extra runs after the timed rounds.
  std::unique_ptr<kernels::Counters> hw;
  if (opts.hardware_counter_runs > 0) hw = kernels::open_counters(kernels::CounterBackend::Auto);
  const bool counting = hw && hw->backend() != "none";
  std::vector<std::map<std::string, double>> hardware(cs.size());
  for (std::size_t i = 0; i < cs.size() && counting; ++i) {
    if (!runs[i]) continue;
    hw->start();
    for (int k = 0; k < opts.hardware_counter_runs; ++k) runs[i]();
    for (const auto& [event, count] : hw->stop())
      hardware[i][event] = static_cast<double>(count) / opts.hardware_counter_runs;
  }
  std::vector<Measurement> out;
  out.reserve(cs.size());
  for (std::size_t i = 0; i < cs.size(); ++i) {
    Prepared& r = ready[i];
    if (runs[i] && verify_output(r, ref, opts.tolerance, "after timing")) {
      set_times(r.m, t[i]);
      const kernels::SoftwareCounts& c = t[i].counts;
      r.m.counters = {{"source", "getrusage"},
                      {"retaken", t[i].retaken},
                      {"disturbed_kept", t[i].disturbed_kept},
                      {"cpu_s", c.cpu_s},
                      {"involuntary_switches", c.involuntary_switches},
                      {"voluntary_switches", c.voluntary_switches},
                      {"page_faults", c.page_faults},
                      {"hardware", {{"backend", hw ? std::string(hw->backend()) : "none"}}}};
      if (counting)
        r.m.counters["hardware"].update({{"runs", opts.hardware_counter_runs}, {"per_run", hardware[i]}});
    }
    out.push_back(std::move(r.m));
  }
  return out;
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

nlohmann::json to_json(const std::vector<Measurement>& ms) {
  nlohmann::json j = nlohmann::json::array();
  for (const Measurement& m : ms) j.push_back(m.to_json());
  return j;
}

std::vector<Measurement> from_json(const nlohmann::json& j) {
  std::vector<Measurement> ms;
  for (const nlohmann::json& e : j) ms.push_back(Measurement::from_json(e));
  return ms;
}

/// Forks a child running `body` (which returns one Measurement per candidate it was given) and
/// supervises it: the prepare limit until its 'P' frame, then the run limit until its 'R' frame.
/// When the child fails as a whole (crash, timeout), the result is one failed Measurement. An 'X'
/// frame (compare's screening: a run overran its deadline and the child exits) is stored in
/// *overrun, and the result is empty.
template <class Body>
std::vector<Measurement> supervise(double prepare_limit, double run_limit, Body body,
                                   nlohmann::json* overrun = nullptr) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    Measurement m;
    return {failed(m, MeasureStatus::Crashed,
                   std::string("socketpair failed: ") + std::strerror(errno))};
  }
  const pid_t worker = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    Measurement m;
    return {failed(m, MeasureStatus::Crashed, std::string("fork failed: ") + std::strerror(errno))};
  }
  if (child == 0) {
    ::close(fds[0]);
    if (!die_with_parent(worker)) ::_exit(3);
    std::vector<Measurement> ms;
    try {
      ms = body(fds[1]);
    } catch (const std::exception& e) {  // a bug or bad_alloc in the child: report, do not hide
      ms = {failed(Measurement{}, MeasureStatus::Crashed,
                   std::string("uncaught exception in the measuring child: ") + e.what())};
    }
    write_frame(fds[1], 'R', to_json(ms).dump());
    ::_exit(0);
  }
  ::close(fds[1]);
  const int sock = fds[0];
  double limit = prepare_limit;
  double deadline = now_seconds() + limit;
  const char* phase = "preparing (format, compile)";
  std::vector<Measurement> m;
  for (;;) {
    char type = 0;
    std::string payload;
    const ReadStatus st = read_frame(sock, deadline, type, payload);
    if (st == ReadStatus::Timeout) {
      ::kill(child, SIGKILL);
      wait_child(child, true);
      m = {failed(Measurement{}, MeasureStatus::Timeout,
                  "no result within " + format_limit(limit) + " s while " + phase +
                      "; the child was killed")};
      break;
    }
    if (st == ReadStatus::Eof) {
      const int status = reap_child(child, 10.0);
      m = {failed(Measurement{}, MeasureStatus::Crashed,
                  "the measuring child " + describe_exit(status) + " while " + phase)};
      break;
    }
    if (type == 'X' && overrun != nullptr) {
      *overrun = nlohmann::json::parse(payload);
      reap_child(child, 10.0);
      break;
    }
    if (type == 'P') {
      limit = run_limit;
      deadline = now_seconds() + limit;
      phase = "running (verification, timing)";
      continue;
    }
    WACO_ASSERT(type == 'R', "unexpected frame from the measuring child");
    m = from_json(nlohmann::json::parse(payload));
    reap_child(child, 10.0);
    break;
  }
  ::close(sock);
  return m;
}

/// The stand-in for a candidate whose verification or probe run overran its deadline in
/// compare's screening: its prepared Measurement, Abandoned, the race bound as its times (a
/// lower bound: the run took more than the margin times that), not verified.
Measurement overran(const nlohmann::json& x) {
  Measurement m = Measurement::from_json(x.at("measurement"));
  const double bound = x.at("bound_s").get<double>();
  const double limit = x.at("limit_s").get<double>();
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

/// compare() in the worker: one child prepares, screens and times the candidates (compare_here).
/// When a run overruns its screening deadline the child ends; the overrunning candidate and the
/// ones that failed before it get their Measurements here, and a new child goes on with the
/// others, told the group's fastest probe and the probes already made. A child that fails as a
/// whole (crash, timeout) gives its one Measurement to every candidate it had.
std::vector<Measurement> compare_screened(const kernels::Problem& p, const kernels::Reference& ref,
                                          const MeasureOptions& opts, int run_threads,
                                          const std::vector<Candidate>& cs,
                                          const std::vector<char>& keep, int rounds) {
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
          return compare_here(p, ref, opts, run_threads, sub, sub_keep, rounds, known, child_sock);
        },
        &x);
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
    out[left.at(x.at("index").get<std::size_t>())] = overran(x);
  }
  std::vector<Measurement> ms;
  for (auto& m : out) ms.push_back(std::move(*m));
  return ms;
}

nlohmann::json candidates_to_json(const std::vector<Candidate>& cs) {
  nlohmann::json j = nlohmann::json::array();
  for (const Candidate& c : cs)
    j.push_back({{"implementation", c.implementation},
                 {"schedule", c.schedule ? codegen::to_json(*c.schedule) : nlohmann::json(nullptr)}});
  return j;
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
    std::vector<Measurement> m;
    if (type == 'O') {
      m = supervise(5.0, 5.0, [](int child_sock) {
        write_frame(child_sock, 'P', {});
        return std::vector<Measurement>{openmp_probe()};
      });
    } else {
      WACO_ASSERT(type == 'M' || type == 'C', "unexpected request to the measurement worker");
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
      if (const auto it = j.find("compare"); it != j.end()) {
        const double factor = it->at("race_factor").get<double>();
        if (factor >= 0) request_opts.compare_race_factor = factor;
        for (const nlohmann::json& k : it->at("always_timed")) keep.at(k.get<std::size_t>()) = 1;
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
        done = compare_screened(p, ref, request_opts, run_threads, todo, todo_keep, rounds);
      }
      std::size_t next = 0;
      for (auto& a : answer) m.push_back(a ? std::move(*a) : std::move(done[next++]));
    }
    if (!write_frame(sock, 'R', to_json(m).dump())) ::_exit(0);
  }
}

}  // namespace

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
