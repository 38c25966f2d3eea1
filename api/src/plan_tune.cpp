// waco::tune: the decision from the tuning cache or from the tune pipeline run in this process
// (tuning::run; measurements in the isolated measuring worker), or an adaptive plan
// (tune/adaptive_run.hpp); then the format built and the kernel loaded here (plan.cpp).

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "plan_internal.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/backend.hpp"
#include "waco/tune/adaptive_run.hpp"
#include "waco/tune/observer.hpp"
#include "waco/tune/searcher.hpp"
#include "waco/tune/tune.hpp"

namespace waco {

using namespace detail;

namespace {

void take_report(Plan::Impl& impl, const nlohmann::json& report) {
  impl.report = report;
  impl.verdict = report.value("verdict", std::string("unknown"));
  // What the tune claims over the faster csr reference, on the fresh runs that decided (a plan
  // of a no-gain serves that reference); "speedup_over_csr" is over the csr schedule, which can
  // run slower than the baseline (ash219 in double: 4.4x over it, 1.25-1.34x over the
  // baseline). Reports of older versions have only the latter.
  nlohmann::json sp = report.value("claimed_speedup", nlohmann::json());
  if (!sp.is_number()) sp = report.value("speedup_over_csr", nlohmann::json());
  impl.speedup = sp.is_number() ? sp.get<double>() : 0.0;
  if (impl.verdict == "no-gain" || impl.verdict == "not-worth-it") impl.speedup = 1.0;
  const nlohmann::json& be =
      report.contains("economy") ? report["economy"].value("break_even_calls", nlohmann::json())
                                 : nlohmann::json();
  impl.break_even = be.is_number() ? be.get<double>() : -1.0;
}

// ----------------------------------------------------------------------------------------------
// Tuning in this process (tuning::run).

/// A tune's notes and warnings for the caller: Options::progress, else stderr when verbose.
class ApiObserver : public tuning::TuneObserver {
 public:
  explicit ApiObserver(const Options& o) : o_(o) {}
  void note(const std::string& line) override { say(line); }
  void warning(const std::string& line) override { say("warning: " + line); }
  void progress(const heuristics::TuneProgress& p, std::optional<double>) override {
    if (p.done != p.total && kernels::now_seconds() - last_ < 5.0) return;
    last_ = kernels::now_seconds();
    say(tuning::format("tune: %lld/%lld measured (%lld reused), %s left",
                     static_cast<long long>(p.done), static_cast<long long>(p.total),
                     static_cast<long long>(p.reused), kernels::duration_text(p.eta_s).c_str()));
  }

 private:
  void say(const std::string& line) {
    if (o_.progress)
      o_.progress(line);
    else if (o_.verbose)
      std::fprintf(stderr, "%s\n", line.c_str());
  }
  const Options& o_;
  double last_ = -1e9;
};

/// Whether tune() gives an adaptive plan (Options::adaptive: unset, unless a setting only a
/// measured tune has is given).
bool wants_adaptive(const Options& o) {
  if (o.adaptive) return *o.adaptive;
  return tuning::ranks_by_model(o.search) && o.budget == 0 && o.budget_seconds == 0.0 &&
         o.confirm < 0 && o.results_db.empty() && o.schedules.empty() && !o.measure_first &&
         !o.explain && !o.check_recall;
}

/// An adaptive plan (Options::adaptive): csr serves at once, the model's nominees are prepared in
/// the background and tried on the caller's calls (tune/adaptive_run.hpp).
Plan adaptive_plan(const Matrix& A, Kernel k, const Options& o, const tuning::TuneRequest& request,
                   double t0) {
  if (!tuning::ranks_with_model(request))
    throw Error("an adaptive plan tries the cost model's nominees: Options::search must be a "
                "search that ranks with the model (\"model\" or \"anns\"), not \"" + o.search + "\"",
                "leave Options::search at \"model\", or set Options::adaptive = false");
  if (o.nominees < 1) throw Error("Options::nominees must be at least 1");
  // The fingerprint (the tuning cache's key) is computed when the plan first asks the cache, a
  // step paid for by the calls like the others: a short solve never pays for it.
  auto matrix = std::make_shared<const Matrix>(A);
  tuning::AdaptiveSetup setup = tuning::adaptive_setup(
      api::arrays(A), matrix, request, o.nominees, [matrix] { return matrix->fingerprint(); });
  // csr (csf) serves first, and whenever no nominee beats it: the hand-written baseline, compiled
  // into the library (nothing to compile or load), the reference a tune's verdict judges by.
  std::shared_ptr<Plan::Impl> impl = bind_reference(A, k, o);
  impl->matrix = std::move(matrix);
  impl->adaptive = std::make_shared<tuning::AdaptiveRun>(impl->arm, std::move(setup));
  impl->tuning_s = kernels::now_seconds() - t0;
  return Plan::Impl::wrap(std::move(impl));
}

codegen::SuperSchedule decided_schedule(const tuning::TuneOutcome& out) {
  if (!out.schedule)
    throw Error("the tune found no schedule that runs correctly, not even csr (verdict " +
                    out.verdict + ")",
                "run the same tune with the waco-hybrid CLI to see the failures");
  return *out.schedule;
}

}  // namespace

Plan tune(const Matrix& A, Kernel k, const Options& o) {
  return api::translate_errors([&] {
    const double t0 = kernels::now_seconds();
    check_operand(A, k);
    const int threads = resolved_threads(o);
    const int dense = resolved_dense(o, k);
    if (o.tuning_share <= 0 || o.tuning_share > 1)
      throw Error("Options::tuning_share must be in (0, 1]");
    // Every setting is checked before the tuning cache is asked.
    const tuning::TuneRequest request = tune_request(o, k, threads, dense, A.impl().dtype);
    const auto torch_required = [](const learned::TorchRequired& e) {
      return Error(std::string("this model needs LibTorch, which libwaco never loads: ") + e.what(),
                   "use a model with the stats or signature encoder (the shipped ones), or tune "
                   "with the waco-hybrid-torch program and load its plan (Plan::load)");
    };
    // An adaptive plan serves csr at once: it asks the tuning cache itself, once its calls pay
    // for that (tune/adaptive_run.hpp).
    if (wants_adaptive(o)) {
      try {
        return adaptive_plan(A, k, o, request, t0);
      } catch (const learned::TorchRequired& e) {
        throw torch_required(e);
      }
    }
    // The tuning cache first, here: a hit builds the plan without starting the CLI (a list of
    // schedules is measured, never a decision: tuning::run does not ask the cache for one).
    if (o.use_cache && !o.refresh && o.schedules.empty()) {
      const heuristics::TuningCache cache(o.cache_dir);
      const heuristics::TuningKey key{A.impl().content_key(), kind_of(k), dense, threads,
                                      heuristics::machine_identity(generated_options(o).compiler),
                                      A.impl().dtype};
      const heuristics::CacheLookup found = cache.find(key);
      if (found.hit) {
        std::shared_ptr<Plan::Impl> impl = bind_plan(
            A, k, found.hit->schedule, o, tuning::implementation_of(found.hit->report));
        take_report(*impl, found.hit->report);
        check_here(*impl, A, k, o);
        impl->from_cache = true;
        impl->tuning_s = kernels::now_seconds() - t0;
        return Plan::Impl::wrap(std::move(impl));
      }
      // A corrupt entry: tuning::run reports it (a warning) and replaces it.
    }
    // The pipeline in this process: the tuning cache was asked above; --expected-calls plans
    // from the measuring worker's csr time (tuning::run).
    ApiObserver observer(o);
    const tuning::TuneOperand operand = api::operand(A);
    tuning::TuneOutcome outcome;
    try {
      outcome = tuning::run(operand, request, observer);
    } catch (const learned::TorchRequired& e) {
      throw torch_required(e);
    }
    const nlohmann::json& report = outcome.report;
    std::shared_ptr<Plan::Impl> impl =
        bind_plan(A, k, decided_schedule(outcome), o, outcome.implementation);
    take_report(*impl, report);
    check_here(*impl, A, k, o);
    impl->from_cache = outcome.from_cache;
    impl->tuning_s = kernels::now_seconds() - t0;
    return Plan::Impl::wrap(std::move(impl));
  });
}

}  // namespace waco
