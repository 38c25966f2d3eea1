// The measuring child (measure_internal.hpp): prepares candidates (format build, compile),
// verifies them against the reference and times them, alone (measure_here, with racing) or side
// by side (compare_here, with screening under a watchdog). It runs in a process forked by
// supervise(); it talks to its worker only through frames on `sock`.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "framing.hpp"
#include "measure_internal.hpp"
#include "waco/codegen/compiler.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/heuristics/narrow.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/counters.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/implementation.hpp"
#include "waco/kernels/layout_pads.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics::detail {

using kernels::Error;
using kernels::now_seconds;

namespace {

/// A side-by-side child's memory laid out anew. A child is forked from its worker, so without
/// this every child of a request made the same allocations at the same addresses: the "fresh"
/// runs that decide a verdict timed one layout three times, and a layout that happened to suit
/// a kernel (4K aliasing between its arrays and the operands' is worth tens of percent on a
/// kernel of a microsecond) became a gain the user did not get. ash219, f64 SpMV, Intel Xeon
/// VM: tune claimed 1.25-1.34x over the csr baseline for a serial UC kernel in three tunes
/// (baseline 0.52 us, kernel 0.39 us in the decision), which `bench` timed at 0.85-0.93x of the
/// baseline in every run; the same pair under other malloc tunables in `bench` moved between
/// 1.34 and 1.94 us, the two kernels unequally. Here each child copies the small dense operands
/// and pads (kernels::LayoutPads) before each copy and each candidate's preparation (its
/// format, its output), so that every run times another layout, as every user's process has
/// its own, and a layout's luck does not repeat in all of the decision's runs. Operands above
/// kernels::kMaxLayoutBytes stay: glibc maps a large block at the same offset in its page
/// whatever its address, so a copy would change nothing.
class LayoutShuffle {
 public:
  void pad() { pads_.pad(); }

  /// p with its small dense operands copied after pads (the copies live as long as this).
  kernels::Problem moved(const kernels::Problem& p) {
    kernels::Problem q = p;
    const auto copy = [this](const kernels::DenseMatrix* m) -> const kernels::DenseMatrix* {
      if (m == nullptr || m->data.size() * kernels::dtype_size(m->dtype()) > kernels::kMaxLayoutBytes)
        return m;
      pad();
      copies_.push_back(std::make_unique<kernels::DenseMatrix>(*m));
      return copies_.back().get();
    };
    q.B = copy(p.B);
    q.C = copy(p.C);
    return q;
  }

 private:
  kernels::LayoutPads pads_;
  std::vector<std::unique_ptr<kernels::DenseMatrix>> copies_;
};

}  // namespace

Measurement failed(Measurement m, MeasureStatus st, std::string reason) {
  m.status = st;
  m.reason = std::move(reason);
  return m;
}

void set_times(Measurement& m, const kernels::TimingStats& t) {
  m.verified = true;
  m.seconds = t.seconds;
  m.median_s = t.median;
  m.min_s = t.min;
  m.max_s = t.max;
  m.status = MeasureStatus::Ok;
}

namespace {

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
      // A large operand's formats are shared (share_large_data): the csr (csf) baseline then
      // runs on the csr (csf) schedule's format, as a plan serves it, instead of a CSR of its own
      // holding the same arrays (168 MiB at 20M nonzeros, and SpMM's output beside).
      r.impl = opts.generated.storages &&
                       codegen::baseline_on_schedule_format(c.implementation, p.kind)
                   ? codegen::GeneratedKernel::baseline(c.implementation, p.kind, opts.generated)
                   : kernels::make_implementation(c.implementation, p.kind);
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
    m.environment = dynamic_cast<const codegen::BuildEnvironmentError*>(&e) != nullptr;
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
  const kernels::Verification v = kernels::verify(c.impl->output(), ref, tolerance);
  c.m.max_rel_error = v.max_rel_error;
  if (v.ok) return true;
  c.m = failed(c.m, MeasureStatus::WrongResult, std::string(when) + ": " + v.message);
  c.impl.reset();
  return false;
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

/// What compare's candidates share (shared_data, measure.hpp), set in `opts`: the formats they
/// store alike (codegen::StorageCache; candidates that differ only in their loops: chunk,
/// threads, parallel loop) and their output (GeneratedOptions::output; each run writes all of
/// it: a candidate is then run once more before its output is verified after the rounds).
/// Smaller data stays each candidate's own, so that their timings stay those of separate copies.
/// Returns whether the output is shared.
bool share_large_data(const kernels::Problem& p, MeasureOptions& opts) {
  const SharedData shared = shared_data(p);
  if (shared.formats) opts.generated.storages = std::make_shared<codegen::StorageCache>();
  if (shared.output) opts.generated.output = std::make_shared<kernels::Values>();
  return shared.output;
}

}  // namespace

}  // namespace waco::heuristics::detail

namespace waco::heuristics {

SharedData shared_data(const kernels::Problem& p) {
  const std::int64_t llc = kernels::last_level_cache_bytes();
  if (llc <= 0) return {};
  const auto large = [llc](double bytes) { return bytes > 2.0 * static_cast<double>(llc); };
  const double value = static_cast<double>(kernels::dtype_size(p.dtype()));
  SharedData s;
  s.formats = large(static_cast<double>(p.nnz()) * (4 + value));
  s.output = !codegen::kernel_spec(p.kind).sparse_output() &&
             large(static_cast<double>(p.output_size()) * value);
  return s;
}

int layouts_for(const kernels::Problem& p, int layouts) {
  return shared_data(p).output ? 1 : kernels::layouts_for(p, layouts);
}

}  // namespace waco::heuristics

namespace waco::heuristics::detail {

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

std::vector<Measurement> compare_here(const kernels::Problem& given, const kernels::Reference& ref,
                                      const MeasureOptions& opts, int run_threads,
                                      const std::vector<Candidate>& cs,
                                      const std::vector<char>& keep, int rounds, int halving_keep,
                                      Screening screening, int sock) {
  LayoutShuffle layout;
  const kernels::Problem p = layout.moved(given);
  MeasureOptions shared = opts;
  const bool shared_output = share_large_data(p, shared);
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
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "abandoned after %zu timed runs%s: the fastest took %.3g s, more than %g x the "
                  "group's fastest %.3g s",
                  probe[i].size(), probe[i].size() > 2 ? " (two, then two after the others)" : "",
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
  // The 'N' frame before a candidate's preparation and first runs: what a new child needs to go
  // on without it, should this child crash or hang there (compare_screened, supervise). It is
  // screening.to_json() with each screened candidate's Measurement dumped once, not before every
  // candidate (for 22 candidates that took 2.5 ms of a 30 ms child).
  std::vector<std::string> prepared_text(cs.size());
  for (std::size_t i = 0; i < cs.size(); ++i) prepared_text[i] = screening.prepared[i].dump();
  const auto now_on = [&](std::size_t i) {
    nlohmann::json failures = nlohmann::json::array();
    for (const std::size_t f : failed_here)
      failures.push_back({{"index", f}, {"measurement", ready[f].m.to_json()}});
    std::string prepared = "[";
    for (std::size_t k = 0; k < prepared_text.size(); ++k)
      prepared += (k > 0 ? "," : "") + prepared_text[k];
    write_frame(sock, 'N',
                "{\"index\":" + std::to_string(i) + ",\"failures\":" + failures.dump() +
                    ",\"screening\":{\"best_s\":" + nlohmann::json(screening.best_s).dump() +
                    ",\"probes\":" + nlohmann::json(screening.probes).dump() +
                    ",\"prepared\":" + prepared + "]}}");
  };
  // One run of candidate i (`probe` >= 0: a timed probe, the test hook's number), under the
  // watchdog once the group has a fastest: past its deadline the child reports the overrun
  // (this candidate's prepared Measurement, the probes and failures so far) and ends.
  const auto run_once = [&](std::size_t i, int probe_no) {
    Prepared& r = ready[i];
    const auto body = [&] {
      if (probe_no >= 0 && opts.probe_hook) opts.probe_hook(cs[i], probe_no);
      r.impl->run();
    };
    if (!raced(i) || screening.best_s <= 0) return clocked(body);
    const double bound = opts.compare_race_factor * screening.best_s;
    const double limit = screening_limit(opts, bound);
    const auto report = [&, i, bound, limit] {
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
    double t = 0;
    dog->guard(limit, report, [&] { t = clocked(body); });
    return t;
  };
  // Screened by an earlier child of this request (see compare_screened): prepared only after the
  // screening here, for the rounds, so that a restart does not prepare them again and again.
  std::vector<std::size_t> deferred;
  for (const std::size_t i : order) {
    if (!probe[i].empty()) {
      deferred.push_back(i);
      continue;
    }
    now_on(i);
    layout.pad();
    ready[i] = prepare_candidate(p, shared, run_threads, cs[i]);
    Prepared& r = ready[i];
    if (!r.impl) {
      failed_here.push_back(i);
      continue;
    }
    if (opts.child_hook) opts.child_hook(cs[i]);
    run_once(i, -1);
    if (!verify_output(r, ref, opts.tolerance, "first run")) {
      failed_here.push_back(i);
      continue;
    }
    runs[i] = [impl = r.impl.get()] { impl->run(); };
    if (!racing) continue;
    for (int k = 0; k < 2; ++k) probe[i].push_back(run_once(i, k));
    const double fastest = *std::min_element(probe[i].begin(), probe[i].end());
    if (screening.best_s <= 0 || fastest < screening.best_s) screening.best_s = fastest;
    screening.prepared[i] = r.m.to_json();
    prepared_text[i] = screening.prepared[i].dump();
  }
  // A second look before abandoning: a candidate of this child whose two probes were both above
  // the race factor x the group's fastest is probed twice more, after every other candidate, and
  // abandoned only if those are too. A thread descheduled through both first probes (another
  // process on a 2-core machine) would otherwise lose the candidate for good, and a lone nominee
  // (the model deciding alone) the tune its answer.
  if (racing)
    for (const std::size_t i : order) {
      if (!runs[i] || probe[i].size() != 2 || !hopeless(i)) continue;
      now_on(i);
      for (int k = 2; k < 4; ++k) probe[i].push_back(run_once(i, k));
      screening.prepared[i] = ready[i].m.to_json();
      prepared_text[i] = screening.prepared[i].dump();
    }
  dog.reset();
  for (const std::size_t i : deferred) {
    if (hopeless(i)) {  // no need to prepare it again
      ready[i].m = Measurement::from_json(screening.prepared[i]);
      abandon(i);
      continue;
    }
    now_on(i);
    layout.pad();
    ready[i] = prepare_candidate(p, shared, run_threads, cs[i]);
    Prepared& r = ready[i];
    if (!r.impl) continue;
    r.impl->run();
    if (verify_output(r, ref, opts.tolerance, "first run")) runs[i] = [impl = r.impl.get()] { impl->run(); };
  }
  write_frame(sock, 'P', {});
  for (std::size_t i = 0; i < cs.size(); ++i)
    if (runs[i] && hopeless(i)) abandon(i);
  // More layouts of each candidate still timed (MeasureOptions::layouts): round k runs copy
  // k mod their number. A copy that computes a wrong result fails its candidate.
  std::vector<std::vector<Prepared>> copies(cs.size());
  kernels::LayoutRotation rotation;
  if (heuristics::layouts_for(p, opts.layouts) > 1)
    for (const std::size_t i : order) {
      if (!runs[i]) continue;
      std::vector<kernels::Implementation*> impls{ready[i].impl.get()};
      for (int k = 1; k < opts.layouts && runs[i]; ++k) {
        layout.pad();
        Prepared q = prepare_candidate(p, shared, run_threads, cs[i]);
        if (!q.impl) break;  // (not prepared twice: it keeps the layouts it has)
        q.impl->run();
        if (!verify_output(q, ref, opts.tolerance, "first run in another layout")) {
          ready[i].m = std::move(q.m);
          runs[i] = nullptr;
          break;
        }
        impls.push_back(q.impl.get());
        copies[i].push_back(std::move(q));
      }
      if (runs[i] && impls.size() > 1) runs[i] = rotation.runner(std::move(impls));
    }
  std::vector<char> timed(cs.size(), 0);
  for (std::size_t i = 0; i < cs.size(); ++i) timed[i] = runs[i] != nullptr;
  SuccessiveHalving halving(cs, keep, timed, halving_keep, rounds);
  const std::vector<kernels::TimingStats> t = kernels::time_interleaved(
      runs,
      {opts.warmup, rounds, kernels::now_seconds, opts.retake_disturbed, run_threads, opts.settle_s,
       opts.min_run_s},
      opts.settle,
      kernels::AfterRound([&halving, &rotation](int done, const auto& samples) {
        rotation.after_round(done);
        return halving.on() ? halving.after_round(done, samples) : std::vector<std::size_t>{};
      }));
  rotation.reset();  // the counter runs below: the first copies, as verified
  // Hardware counters where the machine exposes them (KVM guests without a PMU do not: the
  // backend is then "none"), around extra runs after the timed rounds.
  std::unique_ptr<kernels::Counters> hw;
  if (opts.hardware_counter_runs > 0) hw = kernels::open_counters(kernels::CounterBackend::Auto);
  const bool counting = hw && hw->backend() != "none";
  std::vector<std::map<std::string, double>> hardware(cs.size());
  for (std::size_t i = 0; i < cs.size() && counting; ++i) {
    if (!runs[i] || halving.stopped(i)) continue;
    hw->start();
    for (int k = 0; k < opts.hardware_counter_runs; ++k) runs[i]();
    for (const auto& [event, count] : hw->stop())
      hardware[i][event] = static_cast<double>(count) / opts.hardware_counter_runs;
  }
  std::vector<Measurement> out;
  out.reserve(cs.size());
  for (std::size_t i = 0; i < cs.size(); ++i) {
    Prepared& r = ready[i];
    if (runs[i] && shared_output) runs[i]();  // its own output, not the last candidate's
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
                      {"layouts", copies[i].size() + 1},
                      {"hardware", {{"backend", hw ? std::string(hw->backend()) : "none"}}}};
      if (counting && !halving.stopped(i))
        r.m.counters["hardware"].update({{"runs", opts.hardware_counter_runs}, {"per_run", hardware[i]}});
      halving.mark(i, r.m);
    }
    out.push_back(std::move(r.m));
  }
  return out;
}

}  // namespace waco::heuristics::detail
