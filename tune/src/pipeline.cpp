// The tune pipeline (tune.hpp): steps 1-9 of a tune, from the tuning cache to the report.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>

#include "memory_record.hpp"
#include "pipeline.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/narrow.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/openmp_team.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/shipped.hpp"
#include "waco/tune/calibration.hpp"
#include "waco/tune/searcher.hpp"

namespace waco::tuning {

using namespace detail;

namespace {

/// Throws kernels::Cancelled when the caller asked to stop (TuneRequest::cancel).
void check_cancel(const TuneRequest& o) {
  if (o.cancel && o.cancel())
    throw kernels::Cancelled("tune stopped at the caller's request; nothing more was stored");
}

/// A tuning cache hit: the stored report, marked as such.
TuneOutcome cached_outcome(const TuneRequest& o, const CachedDecision& hit, const TuningKey& key,
                           double t_run, TuneObserver& obs) {
  TuneOutcome out;
  out.report = hit.report;
  out.report["from_cache"] = true;
  out.report["dtype"] = std::string(kernels::dtype_name(key.dtype));  // older entries lack it
  out.report["plan_cache"] = {{"path", hit.path}, {"saved_at", hit.saved_at}, {"key", key.to_json()}};
  out.report["decided_for_file"] = out.report.value("file", std::string());
  out.report["file"] = o.file;
  out.report["output"] = nullptr;
  out.report["cached_call_s"] = now_seconds() - t_run;  // this call, reading the operand aside
  out.schedule = hit.schedule;
  out.implementation = implementation_of(out.report);
  out.verdict = out.report.value("verdict", std::string());
  out.from_cache = true;
  // An adaptive plan's decision (api/) has no "best": it measured on the application's calls.
  const nlohmann::json best = out.report.value("best", nlohmann::json());
  if (best.is_object()) out.kernel_source = best.value("kernel_source", std::string());
  obs.note("tune: from cache (" + hit.path + ", decided " + hit.saved_at + "); --refresh tunes again");
  return out;
}

}  // namespace

void check_request(const TuneRequest& o, bool check_model) {
  find_searcher(o.search);  // a typo fails before any work
  // A model that needs LibTorch: TorchRequired (the lite CLI runs waco-hybrid-torch instead).
  if (check_model && ranks_with_model(o)) learned::CostModel::check_backend(
      learned::model_path_or_default(o.model, o.kind, o.dtype));
  parse_pipeline(o.passes);
  // Made-up timings must not reach the user's results database or tuning cache.
  if (!o.runner.empty() && o.runner != "isolated" &&
      (o.db.empty() || (o.plan_cache.empty() && !o.no_plan_cache)))
    throw Error("a scripted runner needs a results database and a tuning cache folder of its own "
                "(or none)", "give --db and --plan-cache DIR (or --no-plan-cache): not the user's defaults");
}

std::string implementation_of(const nlohmann::json& report) {
  const nlohmann::json& i = report.is_object() ? report.value("implementation", nlohmann::json())
                                               : nlohmann::json();
  return i.is_string() && i.get<std::string>() != codegen::kGeneratedImplementation ? i.get<std::string>() : "";
}

bool ranks_with_model(const TuneRequest& o) { return o.schedules.empty() && ranks_by_model(o.search); }

TuneOutcome run(const TuneOperand& operand, const TuneRequest& request, TuneObserver& obs) {
  const double t_run = now_seconds();
  const double t_start = request.started_at > 0 ? request.started_at : t_run;
  WACO_ASSERT((operand.matrix != nullptr) != (operand.tensor != nullptr),
              "tuning::run needs a matrix or a tensor");
  check_request(request);
  // The memory record (report "memory"): the first stage is what the caller's reading of the
  // operand left (the CLI: the file parsed and canonicalized).
  MemoryRecord memory(request.reset_peak_per_stage);
  memory.stage("operand");
  // --confirm 0 with a model search: the model decides alone. Its best-predicted schedule (or
  // the dia baseline where the diagonal rule admits it, below) is the only candidate, and one
  // side-by-side run against the csr references guards it (a tuned kernel is never slower than
  // csr).
  TuneRequest o = request;
  o.params.dtype = o.dtype;  // the tile model's value size (tile-window) is the kernels'
  const KernelKind kind = o.kind;
  if (needs_tensor(kind) != (operand.tensor != nullptr))
    throw Error(std::string(kernel_name(kind)) + " needs " +
                    (needs_tensor(kind) ? "a 3-D tensor" : "a matrix"),
                needs_tensor(kind) ? "give a FROSTT .tns file" : "give a Matrix Market file");
  const bool model_search = ranks_with_model(o);
  const bool model_alone = model_search && o.confirm == 0;
  if (model_alone) {
    o.budget = 1;
    o.confirm = 1;
  }
  // A model's nominees go side by side at once (confirm_ranked): the model already ranked them,
  // and one child that prepares, screens and times them all costs a fraction of measuring each
  // in its own child first (about 8 ms each for a microsecond SpMV kernel).
  const bool side_by_side = model_search && !o.measure_first;
  const Searcher& searcher = find_searcher(o.search);
  const Pipeline pipeline = parse_pipeline(o.passes);
  const int threads = o.threads > 0 ? o.threads : available_cpus();
  const int dense = o.dense > 0 ? o.dense : default_dense_size(kind);
  // No database for a library call that names none: an in-memory one (nothing is kept).
  const std::string db_path = !o.db.empty() ? o.db : o.db_default ? default_results_path() : ":memory:";

  // 1. The tuning cache: a decision for this matrix, kernel, dense size, threads and machine is
  // returned without searching (space searches only: a --schedules list is not a decision).
  const MatrixRecord rec = operand.matrix
                               ? matrix_record(*operand.matrix, o.file, operand.fingerprint)
                               : matrix_record(*operand.tensor, o.file, operand.fingerprint);
  // The results database opens first: an unusable database is an error whether or not the
  // tuning cache holds a decision (the user asked for results there).
  ResultsDb db(db_path);
  db.record_matrix(rec);
  std::optional<TuningCache> plan_cache;
  TuningKey tuning_key;
  if (o.schedules.empty() && !o.no_plan_cache) {
    plan_cache.emplace(o.plan_cache);
    const std::int64_t dense_key = kind == KernelKind::SpMV ? 1 : dense;
    const std::string content = operand.matrix ? kernels::content_key_hex(*operand.matrix)
                                               : kernels::content_key_hex(*operand.tensor);
    tuning_key = TuningKey{content, kind, static_cast<int>(dense_key), threads,
                           machine_identity(o.generated.compiler), o.dtype};
    if (!o.refresh) {
      const CacheLookup found = plan_cache->find(tuning_key);
      if (found.hit) return cached_outcome(o, *found.hit, tuning_key, t_run, obs);
      if (!found.problem.empty()) obs.warning(found.problem);
    }
  }
  // The model to rank with (not needed for a cached decision, which says what it was made with).
  const std::optional<ModelChoice> model =
      model_search ? std::optional(resolve_model(o, obs)) : std::nullopt;

  memory.stage("fingerprint");
  check_cancel(o);
  // The dense operands (not needed for a cache hit). The reference is the worker's: it computes
  // it from the problem it reads, so that this process never holds it (SpMM with J = 16 on a
  // 4M-row matrix: 256 MB of values and as much of scales in f32).
  const DenseOperands operands =
      make_dense_operands(kind, operand.matrix, operand.tensor, dense, o.seed, o.dtype);
  const Problem p = make_problem(kind, operand.matrix, operand.tensor, operands);
  memory.stage("dense");
  check_cancel(o);

  // 2. The measurement worker (spawned: heuristics/README.md, "The measurement processes").
  MeasureOptions mo;
  mo.warmup = o.warmup;
  mo.repeats = o.repeat;
  mo.threads = threads;
  mo.tolerance = o.tolerance;
  mo.prepare_timeout_s = o.compile_timeout;
  mo.run_timeout_s = o.timeout;
  mo.layouts = o.layouts;
  mo.generated = o.generated;
  mo.cancel = o.cancel;
  const std::unique_ptr<Runner> runner = make_runner(o.runner, p, nullptr, mo);
  Runner& measurer = *runner;
  memory.stage("worker_load", &measurer);

  // 3. The measurement key (the database was opened before the tuning cache was asked).
  const MeasurementKey key{rec.fingerprint, kind, static_cast<int>(p.dense_size()), o.repeat,
                           o.dtype};
  const nlohmann::json context = context_json(threads, "none");

  // 4. The candidates.
  // Searches that learn from measurements (bandit) measure through tune's database and worker;
  // the candidates they return are then reused, not measured again.
  const auto measure_one = [&](const codegen::SuperSchedule& s) -> std::optional<double> {
    TuneOptions single;
    single.context = context;
    single.stop = o.stop;
    const TuneEntry e = measure_or_reuse(db, key, measurer, Candidate::generated(s), single);
    if (e.measurement.status != MeasureStatus::Ok) return std::nullopt;
    return e.measurement.median_s;
  };
  CandidateChoice choice =
      choose_candidates(o, kind, threads, dense, p, pipeline, searcher, measure_one, obs, nullptr,
                        operand.diagonals);
  std::vector<Candidate>& candidates = choice.candidates;
  // The dia baseline, a rule's nominee (heuristics/diagonal.hpp), after the search's. When the
  // model decides alone, the rule decides for it where it admits dia: the learned model scores
  // SuperSchedules only and cannot rank the baseline, which ran 1.2-6x faster than csr on every
  // real matrix of ../shared/data the rule admits (8 of 75; session 77) and 1.55-12.8x on 28
  // generated banded ones of 12k-26M nonzeros (experiments/README.md). Without the
  // diagonal-storage pass (--passes) the model's best stays the one nominee.
  if (choice.dia.admitted && model_alone) {
    candidates.assign(1, Candidate::baseline(codegen::kDiaBaseline));
    obs.note("tune: the model decides alone, and the diagonal rule admits the dia baseline "
             "(diagonal storage), which is the one nominee: " + choice.dia.note);
  } else if (choice.dia.admitted) {
    candidates.push_back(Candidate::baseline(codegen::kDiaBaseline));
    obs.note("tune: the dia baseline (diagonal storage) measured beside the nominees: " + choice.dia.note);
  }
  memory.stage("choice", &measurer);
  check_cancel(o);
  // What this process ran in parallel (the choice's analyses and scoring) is done: its idle
  // OpenMP threads would spin beside the measuring children for milliseconds.
  kernels::release_idle_openmp_threads();
  const nlohmann::json cache_json = tile_cache_json(o.params, threads);
  const TuneRun run{o, obs, kind, p, measurer, db, key, needs_tensor(kind) ? "csf" : "csr",
                    choice.search, side_by_side, db_path, &memory};

  // 5. The references: the csr schedule and the baseline implementation, measured alike.
  // Checked before the search: a busy machine makes every multi-threaded timing wait for
  // descheduled threads. A 50 ms sample (five 10 ms ticks a CPU) tells a machine whose other
  // processes keep a CPU busy; the default 0.2 s was 40% of a model-guided tune of a small
  // matrix (0.52 s in all on bcsstk09).
  // A model search's side-by-side run tells it from its own timed runs instead (see
  // disturbed_warning), without the 50 ms wait, a third of such a tune on a small matrix.
  std::string busy = side_by_side || !measurer.times_this_machine()
                         ? std::string()
                         : busy_machine_warning(threads, 0.05);
  if (!busy.empty()) obs.warning(busy);
  // How far apart the CPUs are now (a VM's vCPUs move on the host): reported, with the same
  // after the decision, because a short parallel kernel's speed depends on it.
  const bool probe_cpus = measurer.times_this_machine() && threads > 1;
  const double round_trip_before = probe_cpus ? core_round_trip_ns() : -1.0;
  TuneOptions to;
  to.budget_seconds = o.budget_seconds;
  to.retry_failed = o.retry_failed;
  to.stop = o.stop;
  to.context = context;
  // A model search's side-by-side run times both references with its nominees: measured alone
  // first only when --expected-calls needs the csr time to plan (or there is no nominee), they
  // would cost two more children (a sixth of such a tune on a small matrix).
  const bool references_first = !side_by_side || o.expected_calls > 0 || candidates.empty();
  TuneEntry csr_schedule{Candidate::generated(*codegen::schedule_shortcut(kind, run.shortcut)),
                         {}, false};
  TuneEntry csr_baseline{Candidate::baseline(run.shortcut), {}, false};
  if (references_first) {
    csr_schedule = measure_or_reuse(db, key, measurer, csr_schedule.candidate, to);
    csr_baseline = measure_or_reuse(db, key, measurer, csr_baseline.candidate, to);
  }
  const std::optional<double> csr_s = csr_schedule.measurement.status == MeasureStatus::Ok
                                          ? std::optional<double>(csr_schedule.measurement.median_s)
                                          : std::nullopt;
  to.race_factor = o.abandon_factor;
  to.race_reference_s = csr_s.value_or(0.0);
  if (csr_baseline.measurement.status == MeasureStatus::Ok) {  // bursts of host noise: see RaceBound
    to.race_check = run.shortcut;
    to.race_check_s = csr_baseline.measurement.median_s;
  }

  // 5b. --expected-calls: what the caller's calls can pay for, from the csr time just measured.
  const std::optional<CallsBudget> calls_budget =
      apply_calls_budget(o, obs, candidates, to, csr_schedule.measurement, now_seconds() - t_start);
  const bool not_worth_it = calls_budget && !calls_budget->worth_it;
  memory.stage("references", &measurer);

  // 6-7. The search's measurements and the side-by-side confirmation; the decision.
  const Measured measured = measure_and_confirm(run, candidates, to, csr_schedule, csr_baseline,
                                                references_first, not_worth_it, csr_s, busy);
  check_cancel(o);  // nothing is cached after a request to stop
  const TuneResult& r = measured.result;
  const Decision decision = decide(measured, csr_schedule, csr_baseline, run.shortcut, not_worth_it,
                                   o.rule);
  const TuneEntry* best = decision.best;
  memory.stage("decide", &measurer);

  // 8. The report: one JSON object, printed as it is (--json) or as text read off it (below).
  ReportInput in;
  in.rec = &rec;
  in.threads = threads;
  in.choice = &choice;
  in.measured = &measured;
  in.decision = &decision;
  in.csr_schedule = &csr_schedule;
  in.csr_baseline = &csr_baseline;
  in.calls_budget = calls_budget;
  in.busy = busy;
  in.round_trip_before_ns = round_trip_before;
  in.round_trip_after_ns = probe_cpus ? core_round_trip_ns() : -1.0;
  in.cache = cache_json;
  in.context = context;
  in.model_alone = model_alone;
  in.t_start = t_start;
  nlohmann::json report = tune_report(run, in);
  report["model"] = model ? model->to_json() : nlohmann::json();

  // 9. The decision into the tuning cache: a verdict from side-by-side timings only (not an
  // interrupted or unconfirmed run, nor a not-worth-it answer, which depends on the calls; a
  // search that --expected-calls cut short and that found a winner is a decision like another).
  // The result's schedule: the csr schedule's when the result is a hand-written baseline (the
  // csr reference, or the dia nominee; the report's "implementation" says which kernel serves
  // it).
  const bool baseline_result = best && !best->candidate.is_generated();
  const TuneEntry* scheduled = baseline_result ? &csr_schedule : best;
  report["implementation"] = baseline_result ? nlohmann::json(best->candidate.implementation)
                             : best          ? nlohmann::json(codegen::kGeneratedImplementation)
                                             : nlohmann::json(nullptr);
  if (plan_cache && (decision.verdict == "gain" || decision.verdict == "no-gain") && scheduled &&
      scheduled->candidate.schedule && r.stopped_by != "interrupted") {
    try {
      report["plan_cache"] = {
          {"path", plan_cache->store(tuning_key, *scheduled->candidate.schedule, report)}};
    } catch (const Error& e) {
      obs.warning(std::string("the decision was not cached: ") + e.what());
    }
  }
  memory.stage("report");
  report["memory"] = memory.to_json();
  TuneOutcome out;
  out.report = std::move(report);
  if (scheduled && scheduled->candidate.schedule) out.schedule = *scheduled->candidate.schedule;
  if (baseline_result) out.implementation = best->candidate.implementation;
  out.verdict = decision.verdict;
  out.interrupted = r.stopped_by == "interrupted";
  if (best) out.kernel_source = best->measurement.kernel_source;
  return out;
}

}  // namespace waco::tuning
