// waco-hybrid tune: search the admissible SuperSchedules of a kernel on a matrix (issue 5,
// "Search and the results database"): exhaustively, at random (uniform over the admissible set,
// seeded), or over an explicit list (--schedules FILE). Every candidate is measured in isolation
// (heuristics/measure.hpp: verified, median of repeated runs, crashes and hangs contained), and
// every result goes to the SQLite results database as it comes, so an interrupted run resumes
// where it stopped. Reports the best schedule, its speedup over the `csr` schedule and the csr
// baseline implementation (measured the same way, in the same run), counts per status, the time
// spent, and where the tuned kernel's source is.
//
// Order matters: the Measurer forks its worker before anything here runs OpenMP (the locality
// signature of the space does), because GNU libgomp does not survive fork.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "cli_common.hpp"
#include "command.hpp"
#include "model_data.hpp"
#include "waco/learned/cost_model.hpp"
#include "searcher.hpp"
#include "tune_explain.hpp"
#include "tune_report.hpp"
#include "waco/heuristics/economy.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/heuristics/tuner.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {
using namespace waco::kernels;
using namespace waco::heuristics;

namespace {

/// --abandon-factor: a candidate whose fastest run is this many times the best median so far is
/// abandoned (see the option's help and the closing measurement in README.md).
constexpr double kDefaultAbandonFactor = 3.0;

struct Options {
  std::string kernel;
  std::string file;
  std::string search = "model";  ///< the hybrid: the model's nominees side by side
  std::string model;
  std::string index;
  bool check_recall = false;
  std::string schedules;
  std::uint64_t budget = 0;
  double budget_seconds = 0.0;
  std::string passes = "all";
  std::string db;
  std::string output;
  std::uint64_t seed = 1;
  int dense = 0;
  int threads = 0;
  int repeat = 10;
  int warmup = 2;
  int confirm = 10;
  bool confirm_given = false;  ///< --confirm was on the command line
  int confirm_rounds = 20;
  /// The decision run (FreshOptions): a gain is decided on --decide-runs fresh side-by-side
  /// children of --decide-rounds rounds that time the selection's best --decide-leaders.
  int decide_runs = 3;
  int decide_rounds = 20;
  int decide_leaders = 1;
  bool decide_always = false;  ///< --decide-always: fresh runs even without a selection gain
  DecisionRule rule;  ///< --min-gain, --verdict-level
  /// --measure-first: a model search's nominees are measured one by one (racing), then the best
  /// --confirm side by side, as every other search; default: all of them side by side at once.
  bool measure_first = false;
  double timeout = 60.0;
  double compile_timeout = 300.0;
  double tolerance = kDefaultTolerance;
  double abandon_factor = kDefaultAbandonFactor;
  bool retry_failed = false;
  bool json = false;
  bool quiet = false;
  bool explain = false;
  std::string plan_cache;     ///< --plan-cache (empty: the default folder)
  bool no_plan_cache = false; ///< --no-plan-cache
  bool refresh = false;       ///< --refresh: tune again, replacing the cached decision
  std::int64_t expected_calls = 0;
  double tuning_share = 0.1;
  codegen::GeneratedOptions generated;
  PassParams params;
  ReadOptions read;
};


nlohmann::json status_json(const std::map<MeasureStatus, std::int64_t>& counts) {
  nlohmann::json j = nlohmann::json::object();
  for (MeasureStatus s : kAllStatuses) {
    const auto it = counts.find(s);
    j[std::string(status_name(s))] = it == counts.end() ? 0 : it->second;
  }
  return j;
}

nlohmann::json entry_json(const TuneEntry& e) {
  const Measurement& m = e.measurement;
  nlohmann::json j = {{"schedule", e.candidate.label()},
                      {"status", std::string(status_name(m.status))},
                      {"threads", m.threads},
                      {"reused", e.reused}};
  if (e.candidate.schedule) j["schedule_json"] = codegen::to_json(*e.candidate.schedule);
  if (m.status == MeasureStatus::Ok) {
    j["median_s"] = m.median_s;
    j["min_s"] = m.min_s;
    j["max_s"] = m.max_s;
    j["max_rel_error"] = m.max_rel_error;
  } else {
    j["reason"] = m.reason;
  }
  if (!m.kernel_source.empty()) {
    j["kernel_source"] = m.kernel_source;
    j["kernel_source_exists"] = std::filesystem::exists(m.kernel_source);
  }
  if (m.stored_values >= 0) j["stored_values"] = m.stored_values;
  if (!m.race.empty()) j["race"] = m.race;
  return j;
}

/// Step 4 of tune: the candidates to measure, from a list (--schedules) or a search of the
/// admissible set, with the space's statistics and the search's own report.
struct CandidateChoice {
  std::vector<Candidate> candidates;
  nlohmann::json space = nullptr;        ///< tune --json's "space" (null for a list)
  nlohmann::json search_info = nullptr;  ///< the search's report
  std::string search;                    ///< the search's name, or "list"
};

CandidateChoice choose_candidates(const Options& o, KernelKind kind, int threads, const Problem& p,
                                  const Pipeline& pipeline, const Searcher& searcher,
                                  const decltype(SearchRequest::measure)& measure) {
  CandidateChoice c;
  c.search = o.search;
  std::vector<Candidate>& candidates = c.candidates;
  nlohmann::json& space_json = c.space;
  nlohmann::json& search_info = c.search_info;
  std::uint64_t admissible = 0;
  if (!o.schedules.empty()) {
    c.search = "list";
    for (const auto& sch : read_schedule_list(kind, o.schedules))
      candidates.push_back(Candidate::generated(sch));
    if (o.budget > 0 && candidates.size() > o.budget) candidates.resize(o.budget);
  } else {
    SpaceOptions so;
    so.cores = threads;
    so.max_padding = o.generated.storage.max_padding;
    const double s0 = now_seconds();
    Space space = Space::for_problem(p, so);
    const bool legality_first = !pipeline.empty() && pipeline.front() == "legality";
    const std::uint64_t legal_alone = legality_first ? 0 : legal_count(space, o.params);
    const PipelineResult pr = run_pipeline(space, pipeline, o.params);
    const std::uint64_t legal = legality_first ? pr.passes.front().out : legal_alone;
    admissible = pr.final_count;
    nlohmann::json passes = nlohmann::json::array();
    for (const PassStats& s : pr.passes) passes.push_back(s.to_json());
    space_json = {{"full_count", pr.initial_count},
                  {"legal_count", legal},
                  {"admissible_count", admissible},
                  {"pipeline", print_pipeline(pipeline)},
                  {"passes", passes}};
    if (admissible == 0)
      throw Error("the pipeline '" + print_pipeline(pipeline) + "' leaves no admissible schedule",
                  "use fewer passes (--passes), e.g. --passes legality");
    SearchRequest req;
    req.space = &space;
    req.admissible = admissible;
    req.problem = &p;
    req.budget = o.budget;
    req.budget_seconds = o.budget_seconds;
    req.seed = o.seed;
    req.model = o.model;
    req.index = o.index;
    req.check_recall = o.check_recall;
    req.quiet = o.quiet;
    req.measure = measure;
    SearchChoice choice = searcher.choose(req);
    const std::vector<codegen::SuperSchedule>& chosen = choice.schedules;
    search_info = std::move(choice.info);
    space_json["seconds"] = now_seconds() - s0;
    candidates.reserve(chosen.size());
    for (const codegen::SuperSchedule& s : chosen) candidates.push_back(Candidate::generated(s));
  }

  return c;
}

/// What the drop-in header's race strategy depends on, known from the sparse operand and the
/// dense size alone (a tuning cache hit makes no dense operands).
struct OutputShape {
  std::int64_t nnz = 0;
  std::int64_t output_size = 0;  ///< entries of the output (SDDMM: one per nonzero)
  std::int64_t dense = 1;        ///< J or K; 1 for SpMV
};

OutputShape output_shape(KernelKind kind, const Operand& op, int dense) {
  OutputShape s;
  s.nnz = op.matrix ? op.matrix->matrix.nnz() : op.tensor->tensor.nnz();
  s.dense = kind == KernelKind::SpMV ? 1 : dense;
  const std::int64_t rows = op.matrix ? op.matrix->matrix.rows : op.tensor->tensor.dims[0];
  s.output_size = codegen::kernel_spec(kind).sparse_output() ? s.nnz : rows * s.dense;
  return s;
}

/// The drop-in header of the decided schedule for -o: the race strategy the measured kernel used,
/// the schedule's format builder and the kernel in one header.
std::string decided_source(const codegen::SuperSchedule& schedule, const std::string& measured_race,
                           const OutputShape& shape, const Options& o, int threads,
                           const std::string& note) {
  // The strategy the measured kernel was built with (the report's best.race). A decision cached
  // before it was recorded: resolved again with the updates estimated as nonzeros x dense size
  // (padding of U levels left out), which can differ from the measured kernel's.
  const std::optional<codegen::RaceStrategy> measured = codegen::parse_race_strategy(measured_race);
  const codegen::RaceStrategy race =
      measured && *measured != codegen::RaceStrategy::Auto
          ? *measured
          : codegen::resolve_race(o.generated.race, codegen::canonicalize(schedule),
                                  shape.output_size,
                                  static_cast<double>(shape.nnz) * static_cast<double>(shape.dense),
                                  schedule.threads > 0 ? schedule.threads : threads);
  return codegen::emit_standalone_header(schedule, race, "waco_tuned", note,
                                         o.generated.storage.max_padding);
}

/// Writes the decided schedule's drop-in header with what it was tuned for (tune -o).
void write_decided_source(const Options& o, const nlohmann::json& report,
                          const codegen::SuperSchedule& schedule, const OutputShape& shape,
                          int threads, bool from_cache) {
  std::string note = "tuned by waco-hybrid tune for " + report.at("kernel").get<std::string>() +
                     " on " + o.file + " (fingerprint " +
                     report.at("fingerprint").get<std::string>() + ", dense " +
                     std::to_string(report.at("dense").get<std::int64_t>()) + ", " +
                     std::to_string(report.at("threads").get<int>()) + " threads)";
  const nlohmann::json& sp = report.at("speedup_over_csr");
  if (sp.is_number()) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "\nverdict %s, speedup over the %s schedule %.3fx (%s)%s",
                  report.at("verdict").get<std::string>().c_str(),
                  report.at("kernel") == "mttkrp" ? "csf" : "csr", sp.get<double>(),
                  report.at("confirmed").get<bool>() ? "side by side" : "search timings",
                  from_cache ? ", decided earlier (tuning cache)" : "");
    note += buf;
  }
  const nlohmann::json& best = report.at("best");
  const std::string race = best.is_object() ? best.value("race", std::string()) : std::string();
  write_text_file(o.output, decided_source(schedule, race, shape, o, threads, note));
  if (!o.quiet) std::fprintf(stderr, "tune: wrote the tuned kernel to %s\n", o.output.c_str());
}

/// A tuning cache hit: the stored report, marked as such, printed as a fresh one would be.
int report_cached(const Options& o, const CachedDecision& hit, const TuningKey& key,
                  const OutputShape& shape, int threads, double t_start, double t_read) {
  nlohmann::json report = hit.report;
  report["from_cache"] = true;
  report["plan_cache"] = {{"path", hit.path}, {"saved_at", hit.saved_at}, {"key", key.to_json()}};
  report["decided_for_file"] = report.at("file");
  report["file"] = o.file;
  if (!o.output.empty()) {
    write_decided_source(o, report, hit.schedule, shape, threads, true);
    report["output"] = o.output;
  } else {
    report["output"] = nullptr;
  }
  report["read_s"] = t_read - t_start;               // reading the file
  report["cached_call_s"] = now_seconds() - t_read;  // the rest of this call
  if (!o.quiet)
    std::fprintf(stderr, "tune: from cache (%s, decided %s); --refresh tunes again\n",
                 hit.path.c_str(), hit.saved_at.c_str());
  if (o.json)
    print_json(report);
  else
    print_tune_text(report);
  return kExitOk;
}

/// Step 5b of tune, --expected-calls: what the caller's calls can pay for, from the csr time
/// just measured. Not worth it: no candidate and no confirmation are left (csr is the result).
/// Otherwise the candidates, the search's time and the side-by-side stage are cut to the budget.
std::optional<CallsBudget> apply_calls_budget(Options& o, std::vector<Candidate>& candidates,
                                              TuneOptions& to, const Measurement& cm,
                                              double spent_s) {
  if (o.expected_calls <= 0) return std::nullopt;
  if (cm.status != MeasureStatus::Ok) {
    std::fprintf(stderr, "warning: --expected-calls ignored: the csr schedule did not run (%s)\n",
                 cm.reason.c_str());
    return std::nullopt;
  }
  CallsBudgetInput in;
  in.calls = o.expected_calls;
  in.share = o.tuning_share;
  in.csr_s = cm.median_s;
  in.spent_s = spent_s;
  // A candidate costs what the csr schedule's measurement did (its compile included when it
  // was not cached). Kernels compiled earlier cost less, new ones more (0.3-0.9 s to
  // compile on the development VMs): the search's time limit below is what holds the budget,
  // overrun by at most the candidate measured when it expires.
  in.per_candidate_s = std::max(cm.wall_s, (o.warmup + o.repeat + 2) * cm.median_s);
  in.per_confirmed_s = cm.conversion_s + (o.warmup + o.confirm_rounds + 1) * cm.median_s;
  in.confirm_top = std::max(1, o.confirm);
  const CallsBudget budget = plan_calls_budget(in);
  if (!budget.worth_it) {
    candidates.clear();
    o.confirm = 0;
    if (!o.quiet) std::fprintf(stderr, "tune: %s; the result is csr\n", budget.reason.c_str());
    return budget;
  }
  if (static_cast<std::int64_t>(candidates.size()) > budget.candidates)
    candidates.resize(static_cast<std::size_t>(budget.candidates));
  to.budget_seconds = to.budget_seconds > 0 ? std::min(to.budget_seconds, budget.search_s)
                                            : budget.search_s;
  if (o.confirm > 0) o.confirm = std::min(o.confirm, budget.confirm_top);
  return budget;
}

/// The search's progress line on stderr (rewritten in place on a terminal, every 5 s otherwise).
std::function<void(const TuneProgress&)> progress_printer(std::optional<double> csr_s) {
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  auto last_print = std::make_shared<double>(-1e9);
  return [tty, csr_s, last_print](const TuneProgress& pr) {
    const double now = now_seconds();
    const bool final = pr.done == pr.total;
    if (!tty && !final && now - *last_print < 5.0) return;
    *last_print = now;
    std::string best = "none yet";
    if (pr.best_median_s) {
      best = format_seconds(*pr.best_median_s);
      if (csr_s) {
        char buf[32];
        std::snprintf(buf, sizeof buf, " (%.2fx csr)", *csr_s / *pr.best_median_s);
        best += buf;
      }
    }
    std::fprintf(stderr, "%stune: %lld/%lld done (%lld reused), %.2f/s, %s left, best %s%s",
                 tty ? "\r\033[K" : "", static_cast<long long>(pr.done),
                 static_cast<long long>(pr.total), static_cast<long long>(pr.reused), pr.rate,
                 duration_text(pr.eta_s).c_str(), best.c_str(), tty && !final ? "" : "\n");
    std::fflush(stderr);
  };
}

/// How many of `wanted` candidates fit in one side-by-side child beside the two references: at
/// most a quarter of the memory for them (each holds its output and its format, ~12 bytes per
/// nonzero); says so when that is fewer.
int side_by_side_fit(const Options& o, const Problem& p, int wanted) {
  const double per_candidate = 4.0 * static_cast<double>(p.output_size()) +
                               12.0 * static_cast<double>(p.nnz());
  const double fit = physical_memory_bytes() / 4 / per_candidate - 2;  // 2 references
  const int top = static_cast<int>(std::max(1.0, std::min<double>(wanted, fit)));
  if (!o.quiet && top < wanted)
    std::fprintf(stderr, "tune: only %d of %d side by side: more would not fit in a quarter of "
                         "this machine's memory\n", top, wanted);
  return top;
}

/// Step 7 of tune: the search's best candidates and both references measured again side by
/// side in one child (interleaved rounds). The winner and the speedups come from these
/// timings: two separate measurements of one kernel drift by up to 1.5x on a shared machine,
/// more than the gap between the top candidates. Not stored (see confirm_best).
Confirmation confirm_top(const Options& o, const Problem& p, Runner& measurer,
                         const TuneResult& r, const TuneEntry& csr_schedule,
                         const TuneEntry& csr_baseline, const std::string& shortcut) {
  const std::int64_t ok = r.status_counts.at(MeasureStatus::Ok);  // r.best: at least one
  const int top = side_by_side_fit(o, p, o.confirm);
  if (!o.quiet)
    std::fprintf(stderr, "tune: measuring the best %lld side by side with %s (%d rounds)\n",
                 static_cast<long long>(std::min<std::int64_t>(top, ok)), shortcut.c_str(),
                 o.confirm_rounds);
  // The csr-like schedules of the search (the csr schedule with any chunk and thread count):
  // the fastest of them is always nominated, so that the winner is never slower than it.
  const codegen::SuperSchedule csr_shape = csr_schedule.candidate.schedule.value();
  ConfirmOptions co{top, o.confirm_rounds, [csr_shape](const Candidate& c) {
                      if (!c.schedule) return false;
                      codegen::SuperSchedule s = *c.schedule;
                      s.threads = csr_shape.threads;
                      s.chunk = csr_shape.chunk;
                      return s == csr_shape;
                    }};
  return confirm_best(measurer, r, {csr_schedule.candidate, csr_baseline.candidate}, co);
}

/// What the steps of one tune run share.
struct TuneRun {
  const Options& o;
  KernelKind kind;
  const Problem& p;
  Runner& measurer;
  ResultsDb& db;
  MeasurementKey key;
  std::string shortcut;  ///< the references' name: csr, or csf for tensors
  std::string search;    ///< the search's name, or "list"
  bool side_by_side;     ///< a model search: its nominees are measured side by side at once
  std::string db_path;   ///< the results database (--db or the default)
};

/// Steps 6-7 of tune: what was measured, what the side-by-side run selected, and the fresh runs
/// that decide on it.
struct Measured {
  TuneResult result;
  std::optional<Confirmation> confirmation;
  std::optional<FreshTiming> fresh;
};

/// What tune decided from the search and the side-by-side run.
struct Decision {
  bool confirmed = false;
  const TuneEntry* search_best = nullptr;  ///< the fastest by the search's own timings
  const ConfirmEntry* winner = nullptr;    ///< the side-by-side winner
  const TuneEntry* best = nullptr;         ///< the result (the csr schedule without a gain)
  const Measurement* best_side = nullptr;  ///< the result's side-by-side timing
  std::optional<Measurement> confirm_csr;  ///< the references' side-by-side timings
  std::optional<Measurement> confirm_base;
  std::string verdict = "unconfirmed";
  std::optional<Verdict> judged;
  std::string verdict_reference;
  bool fresh = false;                      ///< decided on the fresh runs (else the selection's)
  std::optional<Verdict> references_judged;  ///< the csr schedule against the csr baseline
};

/// The verdict: the selection's winner against the faster csr reference, judged by `rule` on the
/// fresh runs' rounds when there are some (m.fresh), else on the selection run's (then only a
/// no-gain is final: measure_and_confirm times a gain again in fresh runs before it counts).
/// With several fresh leaders, the fastest over the fresh rounds is judged. Without a gain the
/// csr schedule is the result ("no gain over csr"): a tuned kernel is never slower than csr; so
/// too when a gain was measured on a busy machine ("undecided": the rule refuses to decide), when
/// --expected-calls says tuning does not pay, and when no candidate completed its timing.
Decision decide(const Measured& m, const TuneEntry& csr_schedule, const std::string& shortcut,
                bool not_worth_it, const DecisionRule& rule) {
  const TuneResult& r = m.result;
  Decision d;
  d.confirmed = m.confirmation && m.confirmation->best.has_value();
  d.search_best = r.best ? &r.entries[*r.best] : nullptr;
  d.winner = d.confirmed ? &m.confirmation->ranking[*m.confirmation->best] : nullptr;
  d.best = d.winner ? &r.entries[d.winner->entry] : d.search_best;
  d.best_side = d.winner ? &d.winner->measurement : nullptr;
  if (d.confirmed) {
    int runs = 1;
    const std::vector<Measurement>* refs = &m.confirmation->references;
    d.fresh = m.fresh && m.fresh->runs > 0;
    if (d.fresh) {
      runs = m.fresh->runs;
      refs = &m.fresh->references;
      if (const auto fb = m.fresh->best()) {
        d.winner = &m.confirmation->ranking[m.fresh->leaders[*fb]];
        d.best = &r.entries[d.winner->entry];
        d.best_side = &m.fresh->leader_ms[*fb];
      } else {  // every leader failed a fresh run (e.g. a wrong result on another allocation)
        d.best_side = nullptr;
      }
    }
    d.confirm_csr = (*refs)[0];
    d.confirm_base = (*refs)[1];
    // The faster reference by the paired per-round ratios, as the verdict judges (the medians
    // of the times can disagree with them when the machine drifts within the rounds).
    const Measurement* ref = nullptr;
    if (d.confirm_csr->status == MeasureStatus::Ok && d.confirm_base->status == MeasureStatus::Ok)
      d.references_judged = judge_gain(*d.confirm_csr, *d.confirm_base, rule, runs);
    if (d.confirm_csr->status == MeasureStatus::Ok &&
        (!d.references_judged || d.references_judged->ratio_median <= 1.0)) {
      ref = &*d.confirm_csr;
      d.verdict_reference = shortcut + " schedule";
    } else if (d.confirm_base->status == MeasureStatus::Ok) {
      ref = &*d.confirm_base;
      d.verdict_reference = shortcut + " baseline";
    }
    if (!ref) {
      d.verdict = "no-reference";
    } else if (!d.best_side) {
      d.verdict = "no-gain";
    } else {
      d.judged = judge_gain(*d.best_side, *ref, rule, runs);
      d.verdict = d.judged->gain ? "gain" : "no-gain";
      if (d.judged->gain && d.fresh && !m.fresh->busy.empty()) d.verdict = "undecided";
    }
    if (d.verdict != "gain" && d.verdict != "no-reference" &&
        d.confirm_csr->status == MeasureStatus::Ok) {
      d.best = &csr_schedule;
      d.best_side = &*d.confirm_csr;
    }
  }
  if (not_worth_it && csr_schedule.measurement.status == MeasureStatus::Ok) {
    d.verdict = "not-worth-it";
    d.best = &csr_schedule;
  }
  if (!r.best && r.stopped_by != "interrupted" && !r.entries.empty() &&
      csr_schedule.measurement.status == MeasureStatus::Ok) {
    d.verdict = "no-gain";
    d.best = &csr_schedule;
  }
  return d;
}

/// Steps 6-7 of tune. A model search's nominees (all, or its best --confirm) and both references
/// in one side-by-side child: the search's timings are the confirmation's. Every other search:
/// the candidates one by one (racing, progress on stderr), then its best --confirm and both
/// references again side by side. `busy` becomes the side-by-side run's own warning. When
/// --expected-calls says tuning does not pay, nothing is measured (the candidates are cleared).
/// A gain in the selection run is decided on fresh runs (time_fresh) before it counts.
Measured measure_and_confirm(const TuneRun& t, const std::vector<Candidate>& candidates,
                             TuneOptions& to, TuneEntry& csr_schedule, TuneEntry& csr_baseline,
                             bool references_first, bool not_worth_it,
                             std::optional<double> csr_s, std::string& busy) {
  const Options& o = t.o;
  const std::string kernel(kernel_name(t.kind));
  Measured m;
  if (t.side_by_side && !not_worth_it) {
    const int wanted = static_cast<int>(std::min<std::size_t>(
        candidates.size(), o.confirm_given ? static_cast<std::size_t>(std::max(1, o.confirm))
                                           : candidates.size()));
    if (wanted == 0) return m;
    const int top = side_by_side_fit(o, t.p, wanted);
    if (!o.quiet)
      std::fprintf(stderr, "tune: %s %s search: the model's best %d measured side by side with "
                           "%s (%d rounds)\n",
                   kernel.c_str(), t.search.c_str(), top, t.shortcut.c_str(), o.confirm_rounds);
    RankedConfirmation rc = confirm_ranked(
        t.measurer, candidates, {csr_schedule.candidate, csr_baseline.candidate},
        ConfirmOptions{top, o.confirm_rounds, {}}, o.abandon_factor);
    m.result = std::move(rc.result);
    m.confirmation = std::move(rc.confirmation);
    busy = disturbed_warning(*m.confirmation);
    if (!busy.empty() && !o.quiet) std::fprintf(stderr, "warning: %s\n", busy.c_str());
  } else if (!t.side_by_side) {
    if (!o.quiet && !not_worth_it) {
      std::fprintf(stderr, "tune: %s %s search, %zu candidates, results in %s\n", kernel.c_str(),
                   t.search.c_str(), candidates.size(), t.db_path.c_str());
      to.progress = progress_printer(csr_s);
    }
    m.result = run_candidates(t.db, t.key, t.measurer, candidates, to);
    const TuneResult& r = m.result;
    if (!o.quiet && ::isatty(STDERR_FILENO) != 0 && !r.entries.empty() && !r.complete)
      std::fprintf(stderr, "\n");
    if (o.confirm > 0 && r.best && r.stopped_by != "interrupted")
      m.confirmation = confirm_top(o, t.p, t.measurer, r, csr_schedule, csr_baseline, t.shortcut);
  }
  // 7b. Select on one run, decide on another: a gain in the selection run is timed again in
  // fresh side-by-side children, and only their rounds decide (FreshOptions says why). A
  // selection without a gain needs no second opinion: the selection favours its winner.
  const Decision selected = m.confirmation && m.result.stopped_by != "interrupted"
                                ? decide(m, csr_schedule, t.shortcut, not_worth_it, o.rule)
                                : Decision{};
  if (selected.judged &&
      (o.decide_always || selected.judged->ratio_median <= 1.0 - o.rule.min_gain)) {
    if (!o.quiet)
      std::fprintf(stderr, "tune: deciding on fresh runs: the best %d and %s side by side again "
                           "(%d runs of %d rounds)\n",
                   o.decide_leaders, t.shortcut.c_str(), o.decide_runs, o.decide_rounds);
    m.fresh = time_fresh(t.measurer, m.result, *m.confirmation,
                         {csr_schedule.candidate, csr_baseline.candidate},
                         FreshOptions{o.decide_leaders, o.decide_rounds, o.decide_runs});
    if (!m.fresh->busy.empty() && !o.quiet)
      std::fprintf(stderr, "warning: %s\n", m.fresh->busy.c_str());
  }
  // A model search that did not measure the references first: their only timings are the
  // side-by-side ones.
  if (t.side_by_side && !references_first && m.confirmation) {
    csr_schedule.measurement = m.confirmation->references[0];
    csr_baseline.measurement = m.confirmation->references[1];
  }
  return m;
}

/// Timings that moved a lot between the search and the side-by-side run mean a loaded or
/// unstable machine: the warning says so (printed too), so that nobody reads the search's own
/// timings as speedups. Empty when they agree.
std::string noise_warning(const Decision& d, const TuneEntry& csr_schedule,
                          const std::string& shortcut) {
  if (!d.confirmed || d.confirm_csr->status != MeasureStatus::Ok ||
      csr_schedule.measurement.status != MeasureStatus::Ok)
    return {};
  const double drift = d.confirm_csr->median_s / csr_schedule.measurement.median_s;
  const double best_drift = d.best_side->median_s / d.best->measurement.median_s;
  if (drift <= 1.5 && drift >= 1 / 1.5 && best_drift <= 1.5 && best_drift >= 1 / 1.5) return {};
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "timings are unstable: the %s schedule took %s in the search and %s side by "
                "side, the best %s and %s (a loaded machine? only the side-by-side ratios "
                "are comparable; try --threads 1 or more --confirm-rounds)",
                shortcut.c_str(), format_seconds(csr_schedule.measurement.median_s).c_str(),
                format_seconds(d.confirm_csr->median_s).c_str(),
                format_seconds(d.best->measurement.median_s).c_str(),
                format_seconds(d.best_side->median_s).c_str());
  std::fprintf(stderr, "warning: %s\n", buf);
  return buf;
}

nlohmann::json median_or_null(const Measurement* m) {
  if (!m || m->status != MeasureStatus::Ok) return nullptr;
  return m->median_s;
}

/// tune --json's "confirm": the side-by-side (selection) run, every nominee with its timing or
/// reason.
nlohmann::json confirmation_json(const Measured& m, bool side_by_side, int warmup) {
  if (!m.confirmation) return nullptr;
  const Confirmation& c = *m.confirmation;
  const Measurement* first = c.best ? &c.ranking[*c.best].measurement : nullptr;
  nlohmann::json ranking = nlohmann::json::array();
  for (const ConfirmEntry& ce : m.confirmation->ranking) {
    const Measurement& cm = ce.measurement;
    const TuneEntry& e = m.result.entries[ce.entry];
    nlohmann::json row = {{"schedule", e.candidate.label()},
                          {"search_rank", ce.search_rank},
                          {"search_median_s", e.measurement.median_s},
                          {"status", std::string(status_name(cm.status))}};
    if (cm.status == MeasureStatus::Ok) {
      row["median_s"] = cm.median_s;
      row["min_s"] = cm.min_s;
      row["max_s"] = cm.max_s;
      row["counters"] = cm.counters;
      if (first) row["ratio_to_best"] = cm.median_s / first->median_s;
    } else {
      row["reason"] = cm.reason;
    }
    ranking.push_back(row);
  }
  return {{"top", static_cast<int>(m.confirmation->ranking.size())},
          {"direct", side_by_side},
          {"rounds", m.confirmation->rounds},
          {"warmup", warmup},
          {"ranking", ranking},
          {"csr_counters", c.references[0].counters},
          {"csr_median_s", median_or_null(&c.references[0])},
          {"csr_baseline_median_s", median_or_null(&c.references[1])},
          {"seconds", m.confirmation->seconds}};
}

/// tune --json's "decision": the fresh runs that decided (null when the selection run showed no
/// gain, so that nothing was timed again), and how the two csr references compared.
nlohmann::json decision_json(const Measured& m, const Decision& d) {
  nlohmann::json j = {{"fresh", d.fresh},
                      {"references",
                       d.references_judged ? d.references_judged->to_json() : nlohmann::json()}};
  if (d.references_judged) {
    const Verdict& v = *d.references_judged;  // csr schedule / csr baseline
    j["faster_reference"] = v.ratio_hi < 1.0   ? "schedule"
                            : v.ratio_lo > 1.0 ? "baseline"
                                               : "tie";
  }
  if (!m.fresh) return j;
  const FreshTiming& f = *m.fresh;
  nlohmann::json leaders = nlohmann::json::array();
  for (std::size_t i = 0; i < f.leaders.size(); ++i) {
    const ConfirmEntry& ce = m.confirmation->ranking[f.leaders[i]];
    const Measurement& fm = f.leader_ms[i];
    nlohmann::json row = {{"schedule", m.result.entries[ce.entry].candidate.label()},
                          {"selection_median_s", ce.measurement.median_s},
                          {"status", std::string(status_name(fm.status))}};
    if (fm.status == MeasureStatus::Ok)
      row["median_s"] = fm.median_s;
    else
      row["reason"] = fm.reason;
    leaders.push_back(row);
  }
  j.update({{"runs", f.runs},
            {"rounds", f.rounds},
            {"leaders", leaders},
            {"csr_median_s", median_or_null(&f.references[0])},
            {"csr_baseline_median_s", median_or_null(&f.references[1])},
            {"busy_warning", f.busy.empty() ? nlohmann::json() : nlohmann::json(f.busy)},
            {"seconds", f.seconds}});
  return j;
}

/// tune --json's "economy": where tune's time went, and after how many calls of the tuned
/// kernel instead of csr that time is paid back (side-by-side times; none without a gain).
nlohmann::json economy_json(const Options& o, const Measured& m, const Decision& d,
                            const nlohmann::json& space_json,
                            const std::optional<CallsBudget>& calls_budget, double total_s) {
  nlohmann::json economy = {
      {"choice_s", space_json.is_null() ? nlohmann::json(nullptr) : space_json.at("seconds")},
      {"measure_s", m.result.seconds},
      {"confirm_s",
       m.confirmation ? nlohmann::json(m.confirmation->seconds) : nlohmann::json(nullptr)},
      {"decide_s", m.fresh ? nlohmann::json(m.fresh->seconds) : nlohmann::json(nullptr)},
      {"total_s", total_s},
      {"break_even_calls", nullptr}};
  std::optional<double> break_even;
  if (d.confirmed && d.verdict == "gain" && d.confirm_csr->status == MeasureStatus::Ok)
    break_even = break_even_calls(total_s, d.confirm_csr->median_s, d.best_side->median_s);
  if (break_even) economy["break_even_calls"] = *break_even;
  const bool expected = o.expected_calls > 0;
  economy["expected_calls"] = expected ? nlohmann::json(o.expected_calls) : nlohmann::json();
  economy["tuning_share"] = expected ? nlohmann::json(o.tuning_share) : nlohmann::json();
  economy["calls_budget"] = calls_budget ? calls_budget->to_json() : nlohmann::json(nullptr);
  economy["pays_off_within_expected_calls"] =
      expected ? nlohmann::json(break_even && *break_even <= static_cast<double>(o.expected_calls))
               : nlohmann::json(nullptr);
  return economy;
}

/// The parts of tune's report that steps before the report computed.
struct ReportInput {
  const MatrixRecord* rec = nullptr;
  int threads = 0;
  const CandidateChoice* choice = nullptr;
  const Measured* measured = nullptr;
  const Decision* decision = nullptr;
  const TuneEntry* csr_schedule = nullptr;
  const TuneEntry* csr_baseline = nullptr;
  std::optional<CallsBudget> calls_budget;
  std::string busy;
  nlohmann::json cache = nullptr;
  nlohmann::json context = nullptr;
  bool model_alone = false;
  double t_start = 0.0;
};

/// Step 8 of tune: the report, one JSON object (tune --json prints it; the text is read off it).
nlohmann::json tune_report(const TuneRun& t, const ReportInput& in) {
  const Options& o = t.o;
  const TuneResult& r = in.measured->result;
  const Decision& d = *in.decision;
  const TuneEntry& csr_schedule = *in.csr_schedule;
  const TuneEntry& csr_baseline = *in.csr_baseline;
  const std::string noise = noise_warning(d, csr_schedule, t.shortcut);
  const auto speedup = [&](const TuneEntry& base,
                           const std::optional<Measurement>& again) -> nlohmann::json {
    if (d.confirmed && again->status == MeasureStatus::Ok)
      return again->median_s / d.best_side->median_s;
    if (!d.best || base.measurement.status != MeasureStatus::Ok) return nullptr;
    return base.measurement.median_s / d.best->measurement.median_s;
  };
  const auto search_speedup = [&](const TuneEntry& base) -> nlohmann::json {
    if (!d.search_best || base.measurement.status != MeasureStatus::Ok) return nullptr;
    return base.measurement.median_s / d.search_best->measurement.median_s;
  };
  nlohmann::json verdict_json = nullptr;
  if (d.judged) {
    verdict_json = d.judged->to_json();
    verdict_json["reference"] = d.verdict_reference;
    verdict_json["nominee"] = r.entries[d.winner->entry].candidate.label();
  }
  // The result, with the race strategy of the kernel that was timed side by side when the
  // search's entry (reused from the database) does not know it.
  nlohmann::json best_json = d.best ? entry_json(*d.best) : nlohmann::json(nullptr);
  if (d.best && !best_json.contains("race") && d.best_side && !d.best_side->race.empty())
    best_json["race"] = d.best_side->race;
  std::vector<const TuneEntry*> ranked;
  for (const TuneEntry& e : r.entries)
    if (e.measurement.status == MeasureStatus::Ok) ranked.push_back(&e);
  std::sort(ranked.begin(), ranked.end(), [](const TuneEntry* a, const TuneEntry* b) {
    return a->measurement.median_s < b->measurement.median_s;
  });
  nlohmann::json top = nlohmann::json::array();
  for (std::size_t i = 0; i < std::min<std::size_t>(5, ranked.size()); ++i)
    top.push_back(entry_json(*ranked[i]));
  nlohmann::json failures = nlohmann::json::array();
  for (const TuneEntry& e : r.entries)
    if (e.measurement.status != MeasureStatus::Ok && failures.size() < 10)
      failures.push_back(entry_json(e));
  const double total_s = now_seconds() - in.t_start;
  nlohmann::json explanation = nullptr;
  if (o.explain) {
    ExplainInput ei;
    ei.search = t.search;
    ei.candidates = &in.choice->candidates;
    ei.result = &r;
    ei.confirmation = in.measured->confirmation ? &*in.measured->confirmation : nullptr;
    if (d.confirmed && d.confirm_csr->status == MeasureStatus::Ok)
      ei.csr_side_by_side_s = d.confirm_csr->median_s;
    ei.space = in.choice->space;
    ei.search_info = in.choice->search_info;
    explanation = explain_tune(ei);
  }
  const auto null_unless = [](bool given, auto value) {
    return given ? nlohmann::json(value) : nlohmann::json(nullptr);
  };
  return nlohmann::json{{"kernel", std::string(kernel_name(t.kind))},
      {"file", o.file},
      {"fingerprint", in.rec->fingerprint},
      {"nnz", t.p.nnz()},
      {"dense", t.p.dense_size()},
      {"threads", in.threads},
      {"search", t.search},
      {"search_info", in.choice->search_info},
      {"seed", o.seed},
      {"budget", null_unless(o.budget > 0, o.budget)},
      {"budget_seconds", null_unless(o.budget_seconds > 0, o.budget_seconds)},
      {"warmup", o.warmup},
      {"repeats", o.repeat},
      {"space", in.choice->space},
      {"candidates", in.choice->candidates.size()},
      {"considered", r.entries.size()},
      {"measured", r.measured},
      {"reused", r.reused},
      {"complete", r.complete},
      {"stopped_by", null_unless(!r.stopped_by.empty(), r.stopped_by)},
      {"status_counts", status_json(r.status_counts)},
      {"best", best_json},
      {"best_search_rank",
       d.winner && d.best != &csr_schedule
           ? nlohmann::json(d.winner->search_rank)
           : (d.best == d.search_best && d.best ? nlohmann::json(1) : nlohmann::json(nullptr))},
      {"verdict", d.verdict},
      {"verdict_detail", verdict_json},
      // What the tune claims for its result over the faster csr reference: the winner's
      // speedup on the fresh runs with its interval for a gain; 1 (nothing) when the result is
      // the csr schedule; null when nothing was confirmed side by side.
      {"claimed_speedup", d.verdict == "gain" && d.judged ? nlohmann::json(d.judged->speedup)
                          : d.best == &csr_schedule     ? nlohmann::json(1.0)
                                                        : nlohmann::json(nullptr)},
      {"speedup_interval", d.verdict == "gain" && d.judged
                                ? nlohmann::json{{"lo", d.judged->speedup_lo},
                                                     {"hi", d.judged->speedup_hi},
                                                     {"level", d.judged->level},
                                                     {"reference", d.verdict_reference}}
                                    : nlohmann::json(nullptr)},
      {"search_best", d.search_best ? entry_json(*d.search_best) : nlohmann::json(nullptr)},
      {"kernel_source", null_unless(d.best && !d.best->measurement.kernel_source.empty(),
                                    d.best ? d.best->measurement.kernel_source : "")},
      {"csr", entry_json(csr_schedule)},
      {"csr_baseline", entry_json(csr_baseline)},
      {"speedup_over_csr", speedup(csr_schedule, d.confirm_csr)},
      {"speedup_over_csr_baseline", speedup(csr_baseline, d.confirm_base)},
      {"confirmed", d.confirmed},
      {"confirm", confirmation_json(*in.measured, t.side_by_side, o.warmup)},
      {"decision", d.confirmed ? decision_json(*in.measured, d) : nlohmann::json(nullptr)},
      {"noise_warning", null_unless(!noise.empty(), noise)},
      {"busy_warning", null_unless(!in.busy.empty(), in.busy)},
      {"abandon_factor", o.abandon_factor},
      {"abandoned_s", r.abandoned_s},
      {"pass_params", o.params.to_json()},
      {"cache", in.cache},
      {"search_speedup_over_csr", search_speedup(csr_schedule)},
      {"search_speedup_over_csr_baseline", search_speedup(csr_baseline)},
      {"top", top},
      {"failures", failures},
      {"search_s", r.seconds},
      {"time_s", total_s},
      {"economy", economy_json(o, *in.measured, d, in.choice->space, in.calls_budget, total_s)},
      {"model_alone", in.model_alone},
      {"from_cache", false},
      {"plan_cache", nullptr},
      {"explain", explanation},
      {"db", t.db_path},
      {"output", null_unless(!o.output.empty(), o.output)},
      {"context", in.context}};
}

/// The cache the tile model assumes (the tile-window pass), with the source of its size, so
/// that a run can be reproduced from its output; the reason instead where it cannot be known.
nlohmann::json tile_cache_json(const PassParams& params, int threads) {
  try {
    return signature::cache_capacity(params.cache_level, threads, params.cache_bytes,
                                     params.cache_fraction)
        .to_json();
  } catch (const Error& e) {  // only the tile-window pass needs it; say why it is absent
    return {{"error", e.what()}};
  }
}

int run_tune(const Options& given) {
  const double t_start = now_seconds();
  // --confirm 0 with a model search: the model decides alone. Its best-predicted schedule is the
  // only candidate, and one side-by-side run against the csr references guards it (a tuned
  // kernel is never slower than csr).
  Options o = given;
  const bool model_search = o.schedules.empty() && ranks_by_model(o.search);
  const bool model_alone = model_search && o.confirm == 0;
  if (model_alone) {
    o.budget = 1;
    o.confirm = 1;
  }
  // A model's nominees go side by side at once (confirm_ranked): the model already ranked them,
  // and one child that prepares, screens and times them all costs a fraction of measuring each
  // in its own child first (about 8 ms each for a microsecond SpMV kernel).
  const bool side_by_side = model_search && !o.measure_first;
  const KernelKind kind = kernel_from_option(o.kernel);
  const Searcher& searcher = find_searcher(o.search);  // early: a typo fails before any work
  // Early too: a model that needs LibTorch makes the lite build run waco-hybrid-torch (main.cpp)
  // before the measurement worker starts.
  if (model_search) learned::CostModel::check_backend(model_path_or_default(o.model, kind));
  const Pipeline pipeline = parse_pipeline(o.passes);  // early: a typo fails before any work
  const int threads = resolve_threads(o.threads);
  const int dense = o.dense > 0 ? o.dense : default_dense_size(kind);
  const std::string db_path = o.db.empty() ? default_results_path() : o.db;
  if (!o.output.empty()) check_writable(o.output);  // before the search, not after it

  // 1. The problem and its reference.
  const Operand op = load_operand(o.file, o.read, kind);
  const double t_read = now_seconds();
  const OutputShape shape = output_shape(kind, op, dense);

  // The tuning cache: a decision for this matrix, kernel, dense size, threads and machine is
  // returned without searching (space searches only: a --schedules list is not a decision).
  const MatrixRecord rec = op.matrix ? matrix_record(op.matrix->matrix, o.file)
                                     : matrix_record(op.tensor->tensor, o.file);
  // The results database opens first: an unusable --db is an error whether or not the tuning
  // cache holds a decision (the user asked for results there).
  ResultsDb db(db_path);
  db.record_matrix(rec);
  std::optional<TuningCache> plan_cache;
  TuningKey tuning_key;
  if (o.schedules.empty() && !o.no_plan_cache) {
    plan_cache.emplace(o.plan_cache);
    tuning_key = TuningKey{rec.fingerprint, kind, static_cast<int>(shape.dense), threads,
                           machine_identity(o.generated.compiler)};
    if (!o.refresh) {
      const CacheLookup found = plan_cache->find(tuning_key);
      if (found.hit)
        return report_cached(o, *found.hit, tuning_key, shape, threads, t_start, t_read);
      if (!found.problem.empty()) std::fprintf(stderr, "warning: %s\n", found.problem.c_str());
    }
  }

  // The dense operands (not needed for a cache hit) and the reference.
  const DenseOperands operands = dense_operands(kind, op, dense, o.seed, "");
  const Problem p = make_problem(kind, op.matrix ? &op.matrix->matrix : nullptr,
                                 op.tensor ? &op.tensor->tensor : nullptr, operands);
  WACO_ASSERT(p.dense_size() == shape.dense && p.output_size() == shape.output_size,
              "the output shape known before the dense operands is not the problem's");
  const Reference ref = compute_reference(p);

  // 2. The measurement worker (spawned: any time, before or after OpenMP runs here).
  MeasureOptions mo;
  mo.warmup = o.warmup;
  mo.repeats = o.repeat;
  mo.threads = threads;
  mo.tolerance = o.tolerance;
  mo.prepare_timeout_s = o.compile_timeout;
  mo.run_timeout_s = o.timeout;
  mo.generated = o.generated;
  Measurer measurer(p, ref, mo);

  // 3. The measurement key (the database was opened before the tuning cache was asked).
  const MeasurementKey key{rec.fingerprint, kind, static_cast<int>(p.dense_size()), o.repeat};
  const nlohmann::json context = context_json(threads, "none");

  // 4. The candidates.
  // Searches that learn from measurements (bandit) measure through tune's database and worker;
  // the candidates they return are then reused, not measured again.
  const auto measure_one = [&](const codegen::SuperSchedule& s) -> std::optional<double> {
    TuneOptions single;
    single.context = context;
    single.stop = &interrupt_flag();
    const TuneEntry e = measure_or_reuse(db, key, measurer, Candidate::generated(s), single);
    if (e.measurement.status != MeasureStatus::Ok) return std::nullopt;
    return e.measurement.median_s;
  };
  CandidateChoice choice = choose_candidates(o, kind, threads, p, pipeline, searcher, measure_one);
  std::vector<Candidate>& candidates = choice.candidates;
  const nlohmann::json cache_json = tile_cache_json(o.params, threads);
  const TuneRun run{o, kind, p, measurer, db, key, needs_tensor(kind) ? "csf" : "csr",
                    choice.search, side_by_side, db_path};

  // 5. The references: the csr schedule and the baseline implementation, measured alike.
  // Checked before the search: a busy machine makes every multi-threaded timing wait for
  // descheduled threads. A 50 ms sample (five 10 ms ticks a CPU) tells a machine whose other
  // processes keep a CPU busy; the default 0.2 s was 40% of a model-guided tune of a small
  // matrix (0.52 s in all on bcsstk09).
  // A model search's side-by-side run tells it from its own timed runs instead (see
  // disturbed_warning), without the 50 ms wait, a third of such a tune on a small matrix.
  std::string busy = side_by_side ? std::string() : busy_machine_warning(threads, 0.05);
  if (!busy.empty() && !o.quiet) std::fprintf(stderr, "warning: %s\n", busy.c_str());
  InterruptGuard interrupt_guard;
  TuneOptions to;
  to.budget_seconds = o.budget_seconds;
  to.retry_failed = o.retry_failed;
  to.stop = &interrupt_flag();
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
      apply_calls_budget(o, candidates, to, csr_schedule.measurement, now_seconds() - t_start);
  const bool not_worth_it = calls_budget && !calls_budget->worth_it;

  // 6-7. The search's measurements and the side-by-side confirmation; the decision.
  const Measured measured = measure_and_confirm(run, candidates, to, csr_schedule, csr_baseline,
                                                references_first, not_worth_it, csr_s, busy);
  const TuneResult& r = measured.result;
  const Decision decision = decide(measured, csr_schedule, run.shortcut, not_worth_it, o.rule);
  const TuneEntry* best = decision.best;

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
  in.cache = cache_json;
  in.context = context;
  in.model_alone = model_alone;
  in.t_start = t_start;
  nlohmann::json report = tune_report(run, in);

  // 9. The decided schedule's drop-in header, with what it was tuned for, where the user asked.
  if (!o.output.empty() && r.stopped_by != "interrupted") {
    if (!best || best->measurement.kernel_source.empty())
      throw Error("no schedule was measured successfully, so nothing was written to " + o.output,
                  "see the status counts and reasons in the output (--json: failures)");
    write_decided_source(o, report, *best->candidate.schedule, shape, threads, false);
  }

  // 10. The decision into the tuning cache: a verdict from side-by-side timings only (not an
  // interrupted or unconfirmed run, nor a not-worth-it answer, which depends on the calls; a
  // search that --expected-calls cut short and that found a winner is a decision like another).
  if (plan_cache && (decision.verdict == "gain" || decision.verdict == "no-gain") && best &&
      best->candidate.schedule && r.stopped_by != "interrupted") {
    try {
      report["plan_cache"] = {{"path", plan_cache->store(tuning_key, *best->candidate.schedule, report)}};
    } catch (const Error& e) {
      std::fprintf(stderr, "warning: the decision was not cached: %s\n", e.what());
    }
  }
  if (o.json)
    print_json(report);
  else
    print_tune_text(report);
  if (r.stopped_by == "interrupted") {
    std::fprintf(stderr, "tune: interrupted; run the same command again to resume (results so far "
                         "are in %s)\n", db_path.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

Command make_tune_command() {
  return {"tune", "Search the schedule space: measure candidates, keep results in a database",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            add_kernel_option(sub, o->kernel);
            sub.add_option("FILE", o->file,
                           "Matrix Market (.mtx[.gz]) or, for mttkrp, FROSTT (.tns[.gz])")
                ->required();
            std::string search_help;
            for (const Searcher& s : searchers())
              search_help += (search_help.empty() ? "" : "; ") + s.name + ": " + s.summary;
            sub.add_option("--search", o->search, search_help)
                ->check(CLI::IsMember(searcher_names()))
                ->capture_default_str();
            sub.add_option("--model", o->model,
                           "Cost model of --search model (default: the shipped model of the "
                           "kernel, " + models_dir() + ")");
            sub.add_option("--index", o->index,
                           "HNSW graph of --search anns: loaded from FILE (and FILE.json), or "
                           "built and kept there (default: the user cache, per model)");
            sub.add_flag("--explain", o->explain,
                         "Say why the winner won: its and the runner-up's ranks (the model's, "
                         "for model and anns searches), times, speedups and software counts, the "
                         "signature facts of the passes, the search's own report");
            sub.add_flag("--check-recall", o->check_recall,
                         "--search anns: also score every graph node this matrix admits and "
                         "report recall_at_10 of the walk against it (search_info)");
            sub.add_option("--schedules", o->schedules,
                           "Search this list instead of the space: one schedule per line (text "
                           "form or shortcut), # comments");
            auto* budget = sub.add_option("--budget", o->budget,
                                          "Candidates to consider (model and anns default: 20, random: 100)")
                               ->check(CLI::PositiveNumber);
            sub.add_option("--budget-seconds", o->budget_seconds,
                           "Stop starting measurements after this many seconds")
                ->check(CLI::PositiveNumber)
                ->excludes(budget);
            sub.add_option("--passes", o->passes,
                           "Trimming pipeline defining the admissible set: pass names separated "
                           "by commas, 'all' or 'none' (see waco-hybrid space --list-passes)")
                ->capture_default_str();
            sub.add_option("--output,-o", o->output,
                           "Write the winner's drop-in header to FILE (as emit --standalone: the "
                           "kernel and its format builder from CSR arrays, self-contained; two "
                           "calls, waco_tuned::build then waco_tuned::spmv/spmm/...), with what it "
                           "was tuned for in a comment");
            sub.add_option("--db", o->db,
                           "Results database (default: " + default_results_path() + ")");
            sub.add_option("--seed", o->seed, "Seed of the random sample and the dense operands")
                ->capture_default_str();
            sub.add_option("--dense", o->dense,
                           "Dense size: J for spmm and mttkrp, K for sddmm (defaults: spmm 256, mttkrp 16, sddmm 256)")
                ->check(CLI::Range(1, 1 << 20));
            add_threads_option(sub, o->threads);
            sub.add_option("--repeat", o->repeat, "Timed runs per candidate (median reported)")
                ->check(CLI::Range(1, 1000000))
                ->capture_default_str();
            sub.add_option("--warmup", o->warmup, "Untimed runs per candidate after verification")
                ->check(CLI::Range(0, 1000000))
                ->capture_default_str();
            auto* confirm = sub.add_option(
                "--confirm", o->confirm,
                "Measure the search's best N again side by side with the csr references and "
                "pick the winner from those timings (0: trust the search's timings). With "
                "--search model or anns the model's nominees (--budget, default 20) are measured "
                "side by side at once, no separate measurement first: N caps them; 0: the model "
                "decides alone, its best guarded by one side-by-side run against csr")
                ->check(CLI::Range(0, 1000))
                ->capture_default_str();
            sub.add_flag("--measure-first", o->measure_first,
                         "--search model or anns: measure the model's nominees one by one first "
                         "(racing, stored in --db), then the best --confirm side by side, as the "
                         "other searches do");
            sub.add_option("--confirm-rounds", o->confirm_rounds,
                           "Interleaved timed rounds of the side-by-side measurement")
                ->check(CLI::Range(1, 1000000))
                ->capture_default_str();
            sub.add_option("--decide-runs", o->decide_runs,
                           "A gain in the side-by-side (selection) run is decided on this many "
                           "fresh side-by-side children that time the best --decide-leaders and "
                           "both references again; only their rounds count (the selection's "
                           "winner looks faster on the rounds that chose it)")
                ->check(CLI::Range(1, 100))
                ->capture_default_str();
            sub.add_option("--decide-rounds", o->decide_rounds,
                           "Timed interleaved rounds of each fresh decision run")
                ->check(CLI::Range(1, 1000000))
                ->capture_default_str();
            sub.add_option("--decide-leaders", o->decide_leaders,
                           "Nominees of the selection timed in the fresh decision runs (the "
                           "fastest of them there is judged)")
                ->check(CLI::Range(1, 1000))
                ->capture_default_str();
            sub.add_flag("--decide-always", o->decide_always,
                         "Time the fresh decision runs even when the selection shows no gain "
                         "(the A/A calibration of scripts/bench_verdict.sh; the references' "
                         "comparison then comes from fresh rounds too)");
            sub.add_option("--min-gain", o->rule.min_gain,
                           "Smallest gain reported: the winner's median per-round time ratio to "
                           "the faster csr reference must be at most 1 - this, and the ratio's "
                           "interval (--verdict-level) wholly below 1")
                ->check(CLI::Range(0.0, 0.9))
                ->capture_default_str();
            sub.add_option("--verdict-level", o->rule.level,
                           "Two-sided confidence level of the ratio's interval")
                ->check(CLI::Range(0.5, 0.999))
                ->capture_default_str();
            add_limit_options(sub, o->timeout, o->compile_timeout);
            sub.add_option("--tolerance", o->tolerance, "Max |out - ref| / sum|products| per entry")
                ->check(CLI::PositiveNumber)
                ->capture_default_str();
            sub.add_option("--expected-calls", o->expected_calls,
                           "Calls of the kernel the caller expects to make: tuning spends at most "
                           "--tuning-share of their csr time (measured first), choosing how many "
                           "candidates to measure from that; when even one cannot pay for itself it "
                           "says so and returns csr (verdict not-worth-it)")
                ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 62));
            sub.add_option("--tuning-share", o->tuning_share,
                           "Share of the expected calls' csr time that tuning may take")
                ->check(CLI::Range(1e-6, 1.0))
                ->capture_default_str();
            auto* no_cache = sub.add_flag(
                "--no-plan-cache", o->no_plan_cache,
                "Neither read nor write the tuning cache");
            sub.add_option("--plan-cache", o->plan_cache,
                           "Tuning cache folder: a decision is kept per matrix fingerprint, kernel, "
                           "dense size, threads and machine (CPU, caches, compilers, version) and "
                           "returned by the next tune without searching (default: " +
                               default_tuning_cache_dir() + ")")
                ->excludes(no_cache);
            sub.add_flag("--refresh", o->refresh,
                         "Tune again even when the tuning cache holds a decision, and replace it")
                ->excludes(no_cache);
            sub.add_flag("--retry-failed", o->retry_failed,
                         "Measure again candidates stored with a status other than ok");
            sub.add_flag("--json", o->json, "Print JSON (speedup_over_csr, best, status_counts, "
                                            "kernel_source, context)");
            sub.add_flag("--quiet,-q", o->quiet, "No progress on stderr");
            add_codegen_options(sub, o->generated);
            sub.add_option("--abandon-factor", o->abandon_factor,
                           "Racing: stop timing a candidate once its fastest run (after 2, "
                           "warm-up included) is this many times the best median so far, also "
                           "when timed beside the csr baseline (whose drift scales the bound); it "
                           "is recorded as abandoned with those runs (0: time every candidate "
                           "fully)")
                ->check(CLI::Validator(
                    [](const std::string& text) -> std::string {
                      const double f = std::strtod(text.c_str(), nullptr);
                      return f == 0.0 || f >= 1.0 ? "" : "must be 0 (off) or at least 1";
                    },
                    "0 or >= 1"))
                ->capture_default_str();
            add_pass_options(sub, o->params);
            add_read_options(sub, o->read);
            sub.footer(
                "Without --search, tune runs the hybrid (--search model): the cost model ranks\n"
                "the admissible schedules and its best 20 (--budget) are measured side by side,\n"
                "interleaved, in one child with the csr schedule and the csr baseline. Other\n"
                "searches measure their candidates one by one first, then their best --confirm\n"
                "and the fastest csr-like schedule go side by side. That run only selects: when\n"
                "its winner looks at least --min-gain faster than the faster csr reference, the\n"
                "winner (--decide-leaders) and both references are timed again in --decide-runs\n"
                "fresh children (--decide-rounds rounds each), and only those rounds decide (the\n"
                "best of 20 near-tied kernels looks faster on the rounds that chose it). A gain\n"
                "needs the median per-round time ratio to the faster reference at most\n"
                "1 - --min-gain and its interval (order statistics at --verdict-level, widened to\n"
                "every run's own median) wholly below 1; speedup_interval gives it. Otherwise tune\n"
                "says \"no gain over csr\" and returns the csr schedule (verdict no-gain, exit 0);\n"
                "a gain timed on a busy machine is verdict undecided, csr returned. On a shared\n"
                "machine two separate measurements of one kernel can differ by 1.5x: only\n"
                "side-by-side ratios rank. Racing: a candidate whose fastest run is\n"
                "--abandon-factor times the best median so far (from the csr schedule's on), also\n"
                "beside the csr baseline run at that moment, stops there, as abandoned.\n"
                "Each candidate is built, compiled (cached), verified against the reference and\n"
                "timed in a child process; one that crashes, hangs (--timeout) or computes a wrong\n"
                "result is recorded with that status and its reason. Results are stored as they\n"
                "come; a run stopped by Ctrl-C or kill resumes on the next call without measuring\n"
                "again what the database holds for this matrix, kernel, dense size, thread count\n"
                "and --repeat. The speedups compare medians measured in the same run.\n"
                "The decision (winner or csr) is kept in the tuning cache; the next tune of the\n"
                "same matrix, kernel, dense size and threads on this machine prints it \"from\n"
                "cache\" (--json: from_cache) without searching. --expected-calls N bounds the\n"
                "tuning time by --tuning-share of N csr calls; every run reports break_even_calls.\n\n"
                "Examples:\n"
                "  waco-hybrid tune --kernel spmv examples/bcsstk13.mtx.gz   # the hybrid: model, side by side, fresh decision\n"
                "  waco-hybrid tune --kernel spmv --search random --budget 50 examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid tune --kernel spmv --search anns --passes legality --check-recall --json "
                "examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid tune --kernel spmv --search model examples/bcsstk13.mtx.gz   # learned model, best 20 side by side\n"
                "  waco-hybrid tune --kernel spmm --search exhaustive --passes all --json A.mtx\n"
                "  waco-hybrid tune --kernel spmm --search exhaustive -o tuned_kernel.hpp A.mtx\n"
                "  waco-hybrid tune --kernel spmv --search random --budget-seconds 600 --db r.sqlite A.mtx\n"
                "  waco-hybrid tune --kernel spmv --schedules mine.txt examples/bcsstk13.mtx.gz\n"                "  waco-hybrid tune --kernel spmv --search model --expected-calls 5000 examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid tune --kernel spmv --search model --refresh examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid tune --kernel sddmm --search exhaustive --abandon-factor 0 A.mtx\n"
                "  waco-hybrid tune --kernel spmm --budget 20 --cache-bytes 4M --tile-window 1 A.mtx\n");
            return [o, confirm] {
              o->confirm_given = confirm->count() > 0;
              return run_tune(*o);
            };
          }};
}

}  // namespace waco::cli
