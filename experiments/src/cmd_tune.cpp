// waco-hybrid tune: the options and the printing of `tune` (issue 5, "Search and the results
// database"); the pipeline itself is tuning::run (tune/, the library libwaco calls too). Reads the
// operand, runs the pipeline with stderr as its observer, prints the report (text or --json) and
// writes the decided schedule's drop-in header (-o).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "cli_common.hpp"
#include "command.hpp"
#include "stderr_observer.hpp"
#include "tune_report.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/shipped.hpp"
#include "waco/tune/adaptive_run.hpp"
#include "waco/tune/searcher.hpp"
#include "waco/tune/tune.hpp"

namespace waco::cli {
using namespace waco::kernels;

namespace {

struct Options {
  std::string kernel;
  std::string file;
  std::string output;  ///< -o: the decided schedule's drop-in header
  bool json = false;
  bool quiet = false;
  ReadOptions read;
  std::string cpu_lock;     ///< --cpu-lock: held from reading the file until the process exits
  tuning::TuneRequest req;  ///< everything else (tune.hpp)
  bool adaptive = false;    ///< --adaptive: an adaptive plan on calls made here (drive_adaptive)
  tuning::AdaptiveDrive drive;
};

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
                           const std::string& note, const std::string& baseline) {
  // The strategy the measured kernel was built with (the report's best.race). A decision cached
  // before it was recorded: resolved again with the updates estimated as nonzeros x dense size
  // (padding of U levels left out), which can differ from the measured kernel's.
  const std::optional<codegen::RaceStrategy> measured = codegen::parse_race_strategy(measured_race);
  const codegen::RaceStrategy race =
      measured && *measured != codegen::RaceStrategy::Auto
          ? *measured
          : codegen::resolve_race(o.req.generated.race, codegen::canonicalize(schedule),
                                  shape.output_size,
                                  static_cast<double>(shape.nnz) * static_cast<double>(shape.dense),
                                  schedule.threads > 0 ? schedule.threads : threads, o.req.dtype);
  return codegen::emit_standalone_header(schedule, race, "waco_tuned", note,
                                         o.req.generated.storage.max_padding, o.req.dtype, baseline);
}

/// Writes the decided schedule's drop-in header with what it was tuned for (tune -o).
void write_decided_source(const Options& o, const nlohmann::json& report,
                          const codegen::SuperSchedule& schedule, const OutputShape& shape,
                          int threads, bool from_cache) {
  std::string note = "tuned by waco-hybrid tune for " + report.at("kernel").get<std::string>() +
                     " on " + o.file + " (fingerprint " +
                     report.at("fingerprint").get<std::string>() + ", dense " +
                     std::to_string(report.at("dense").get<std::int64_t>()) + ", " +
                     (o.req.dtype == Dtype::F64 ? "double precision, " : "") +
                     std::to_string(report.at("threads").get<int>()) + " threads)";
  const nlohmann::json& sp = report.at("speedup_over_csr");
  if (sp.is_number()) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "\nverdict %s, speedup over the %s schedule %.3fx (%s)%s",
                  report.at("verdict").get<std::string>().c_str(),
                  report.at("kernel") == "mttkrp" ? "csf" : "csr", sp.get<double>(),
                  report.value("confirmed", false) ? "side by side" : "search timings",
                  from_cache ? ", decided earlier (tuning cache)" : "");
    note += buf;
  }
  // The hand-written csr serves the result (no gain, and it ran faster than the csr schedule):
  // a header holds generated code, so it holds the csr schedule's loop run with the baseline's
  // threads and chunks (emit_standalone_header's `baseline`).
  const std::string implementation = tuning::implementation_of(report);
  const bool baseline = !implementation.empty();
  // Why the csr baseline serves: it ran faster than the schedule, or the two tied.
  const bool tie = implementation != codegen::kDiaBaseline && references_tied(report);
  if (implementation == codegen::kDiaBaseline)
    note += "\nthe dia baseline (diagonal storage) ran fastest side by side: waco::Plan serves it; "
            "this header holds its builder and loop";
  else if (baseline)
    note += "\nno schedule beat csr, and the hand-written " + implementation + " baseline " +
            (tie ? "tied with the " + implementation +
                       " schedule side by side (a tie goes to the baseline)"
                 : "ran faster than the " + implementation + " schedule side by side") +
            ": waco::Plan serves that baseline; this header holds its loop, "
            "generated from the " +
            implementation +
            " schedule, with the baseline's threads and "
            "chunks";
  const nlohmann::json best = report.value("best", nlohmann::json());
  const std::string race = best.is_object() ? best.value("race", std::string()) : std::string();
  write_text_file(o.output, decided_source(schedule, race, shape, o, threads, note, implementation));
  if (!o.quiet)
    std::fprintf(
        stderr, "tune: wrote the %s kernel to %s\n",
        baseline
            ? ("hand-written " + implementation + " baseline's (" +
               (tie ? "it tied with the " + implementation + " schedule" : "it ran fastest") + ")")
                  .c_str()
            : "tuned",
        o.output.c_str());
}

/// The text form of `tune --adaptive`'s report (drive_adaptive).
void print_adaptive_text(const nlohmann::json& r) {
  const nlohmann::json& d = r.at("drive");
  const nlohmann::json& a = r.at("adaptive");
  const auto number = [](const nlohmann::json& j, const char* fmt, const char* none) {
    char buf[64];
    if (!j.is_number()) return std::string(none);
    std::snprintf(buf, sizeof buf, fmt, j.get<double>());
    return std::string(buf);
  };
  std::printf("adaptive plan, %lld calls%s: %s, serving %s\n",
              static_cast<long long>(d.at("calls").get<std::int64_t>()),
              d.at("settled").get<bool>() ? "" : " (still exploring)",
              r.at("verdict").get<std::string>().c_str(),
              r.at("implementation").get<std::string>() != codegen::kGeneratedImplementation
                  ? ("the hand-written " + r.at("implementation").get<std::string>()).c_str()
                  : r.at("schedule").get<std::string>().c_str());
  std::printf("  speedup over csr (%s): %s\n", adaptive_speedup_basis(a),
              number(r.at("speedup_over_csr"), "%.3fx", "none").c_str());
  std::printf("  exploring: %lld calls, cost %s ms beyond csr's, break-even after %s calls\n",
              static_cast<long long>(a.value("exploring_calls", std::int64_t{0})),
              number(r.at("economy").at("cost_s").get<double>() * 1e3, "%.3f", "-").c_str(),
              number(r.at("economy").at("break_even_calls"), "%.0f", "none").c_str());
  std::printf("  wall time of the calls: %s ms", number(d.at("wall_s").get<double>() * 1e3, "%.3f", "-").c_str());
  if (d.at("csr_wall_s").is_number())
    std::printf(", csr alone %s ms (ratio %s)",
                number(d.at("csr_wall_s").get<double>() * 1e3, "%.3f", "-").c_str(),
                number(d.at("wall_ratio"), "%.3f", "-").c_str());
  std::printf("\n");
}

int run_tune(const Options& given) {
  Options o = given;
  o.req.kind = kernel_from_option(o.kernel);
  o.req.file = o.file;
  o.req.reset_peak_per_stage = true;  // this process is the tune's: per-stage peaks in "memory"
  o.req.threads = resolve_threads(o.req.threads);
  o.req.dtype = o.read.dtype;
  const KernelKind kind = o.req.kind;
  // Made-up timings must not reach the user's results database or tuning cache (a usage error).
  if (!o.req.runner.empty() && o.req.runner != "isolated" &&
      (o.req.db.empty() || (o.req.plan_cache.empty() && !o.req.no_plan_cache)))
    throw CLI::ValidationError("--runner", "a scripted runner needs --db and --plan-cache DIR "
                                           "(or --no-plan-cache): not the user's defaults");
  // Before reading the file: a typo fails before any work; a model that needs LibTorch throws
  // TorchRequired, and main.cpp runs waco-hybrid-torch.
  tuning::check_request(o.req);
  if (!o.output.empty()) check_writable(o.output);  // before the search, not after it

  hold_cpu_lock(o.cpu_lock, o.quiet);
  // The tune's time (the report's time_s, the economy's cost) starts here: the wait for the CPU
  // lock is no cost of tuning.
  const double t_start = now_seconds();
  o.req.started_at = t_start;
  const Operand op = load_operand(o.file, o.read, kind);
  const double t_read = now_seconds();
  const int dense = o.req.dense > 0 ? o.req.dense : default_dense_size(kind);
  const OutputShape shape = output_shape(kind, op, dense);

  StderrObserver observer(o.quiet);
  InterruptGuard interrupt_guard;
  o.req.stop = &interrupt_flag();
  const tuning::TuneOperand operand{op.matrix ? &op.matrix->matrix : nullptr,
                                    op.tensor ? &op.tensor->tensor : nullptr, {}};
  if (o.adaptive) {
    nlohmann::json report;
    try {
      report = tuning::drive_adaptive(operand, o.req, o.drive, observer);
    } catch (const kernels::Cancelled&) {
      observer.finish();
      std::fprintf(stderr, "tune: interrupted; no report (a decision the adaptive plan settled "
                           "on before is in the tuning cache)\n");
      return kExitFailure;
    }
    observer.finish();
    report["file"] = o.file;
    if (o.json)
      print_json(report);
    else
      print_adaptive_text(report);
    return kExitOk;
  }
  tuning::TuneOutcome outcome = tuning::run(operand, o.req, observer);
  observer.finish();
  nlohmann::json& report = outcome.report;
  if (outcome.from_cache) report["read_s"] = t_read - t_start;  // reading the file

  // The decided schedule's drop-in header, with what it was tuned for, where the user asked.
  if (!o.output.empty() && !outcome.interrupted) {
    if (!outcome.schedule ||
        (!outcome.from_cache && outcome.kernel_source.empty() && outcome.implementation.empty()))
      throw Error("no schedule was measured successfully, so nothing was written to " + o.output,
                  "see the status counts and reasons in the output (--json: failures)");
    write_decided_source(o, report, *outcome.schedule, shape, o.req.threads, outcome.from_cache);
    report["output"] = o.output;
  }
  if (o.json)
    print_json(report);
  else
    print_tune_text(report);
  if (outcome.interrupted) {
    std::fprintf(stderr, "tune: interrupted; run the same command again to resume (results so far "
                         "are in %s)\n", report.value("db", std::string()).c_str());
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
            for (const tuning::Searcher& s : tuning::searchers())
              search_help += (search_help.empty() ? "" : "; ") + s.name + ": " + s.summary;
            sub.add_option("--search", o->req.search, search_help)
                ->check(CLI::IsMember(tuning::searcher_names()))
                ->capture_default_str();
            sub.add_option("--model", o->req.model,
                           "Cost model of --search model (default: this machine's calibrated "
                           "model when `waco-hybrid calibrate` made one, else the shipped model "
                           "of the kernel, " + learned::models_dir() + ")");
            sub.add_flag("--no-calibration", [o](std::int64_t) { o->req.use_calibration = false; },
                         "Rank with the shipped model even when this machine has a calibrated "
                         "one (also: WACO_NO_CALIBRATION=1)");
            sub.add_option("--index", o->req.index,
                           "HNSW graph of --search anns: loaded from FILE (and FILE.json), or "
                           "built and kept there (default: the user cache, per model)");
            sub.add_flag("--explain", o->req.explain,
                         "Say why the winner won: its and the runner-up's ranks (the model's, "
                         "for model and anns searches), times, speedups and software counts, the "
                         "signature facts of the passes, the search's own report");
            sub.add_flag("--check-recall", o->req.check_recall,
                         "--search anns: also score every graph node this matrix admits and "
                         "report recall_at_10 of the walk against it (search_info)");
            sub.add_option("--schedules", o->req.schedules,
                           "Search this list instead of the space: one schedule per line (text "
                           "form or shortcut), # comments");
            auto* budget = sub.add_option("--budget", o->req.budget,
                                          "Candidates to consider (model and anns default: 20, random: 100)")
                               ->check(CLI::PositiveNumber);
            sub.add_option("--per-structure", o->req.per_structure,
                           "The model's nominees (model, exact anns): at most N of one loop "
                           "structure (splits, order, parallel loop; formats and chunks aside) "
                           "before the next structures in the model's order (0: its order alone; "
                           "adaptive plans keep their own rule)")
                ->check(setting_range(tuning::settings::kPerStructure))
                ->capture_default_str();
            sub.add_option("--budget-seconds", o->req.budget_seconds,
                           "Stop starting measurements after this many seconds")
                ->check(CLI::PositiveNumber)
                ->excludes(budget);
            sub.add_option("--passes", o->req.passes,
                           "Trimming pipeline defining the admissible set: pass names separated "
                           "by commas, 'all' or 'none' (see waco-hybrid space --list-passes)")
                ->capture_default_str();
            sub.add_option("--output,-o", o->output,
                           "Write the winner's drop-in header to FILE (as emit --standalone: the "
                           "kernel and its format builder from CSR arrays, self-contained; two "
                           "calls, waco_tuned::build then waco_tuned::spmv/spmm/...), with what it "
                           "was tuned for in a comment");
            sub.add_option("--db", o->req.db,
                           "Results database (default: " + heuristics::default_results_path() +
                               "): every candidate timed on its own (by the searches that measure "
                               "one at a time, and the csr references); the side-by-side and "
                               "fresh runs that rank and decide are in the JSON report only");
            sub.add_option("--seed", o->req.seed, "Seed of the random sample and the dense operands")
                ->capture_default_str();
            sub.add_option("--dense", o->req.dense,
                           "Dense size: J for spmm and mttkrp, K for sddmm (defaults: spmm 256, mttkrp 16, sddmm 256)")
                ->check(CLI::Range(1, 1 << 20));
            add_threads_option(sub, o->req.threads);
            sub.add_option("--repeat", o->req.repeat, "Timed runs per candidate (median reported)")
                ->check(setting_range(tuning::settings::kRepeat))
                ->capture_default_str();
            sub.add_option("--warmup", o->req.warmup, "Untimed runs per candidate after verification")
                ->check(setting_range(tuning::settings::kWarmup))
                ->capture_default_str();
            auto* confirm = sub.add_option(
                "--confirm", o->req.confirm,
                "Measure the search's best N again side by side with the csr references and "
                "pick the winner from those timings (0: trust the search's timings). With "
                "--search model or anns the model's nominees (--budget, default 20, MTTKRP 40) "
                "are measured side by side at once, no separate measurement first: N caps them; "
                "0: the model decides alone (its best, or the dia baseline where the diagonal "
                "rule admits it: the model cannot score it), guarded by one side-by-side run "
                "against csr")
                ->check(CLI::Range(0, 1000))
                ->capture_default_str();
            sub.add_flag("--measure-first", o->req.measure_first,
                         "--search model or anns: measure the model's nominees one by one first "
                         "(racing, stored in --db), then the best --confirm side by side, as the "
                         "other searches do");
            sub.add_option("--confirm-rounds", o->req.confirm_rounds,
                           "Interleaved timed rounds of the side-by-side measurement")
                ->check(setting_range(tuning::settings::kConfirmRounds))
                ->capture_default_str();
            sub.add_option("--decide-runs", o->req.decide_runs,
                           "A gain in the side-by-side (selection) run is decided on this many "
                           "fresh side-by-side children that time the best --decide-leaders and "
                           "both references again; only their rounds count (the selection's "
                           "winner looks faster on the rounds that chose it)")
                ->check(setting_range(tuning::settings::kDecideRuns))
                ->capture_default_str();
            sub.add_option("--decide-extra-runs", o->req.decide_extra_runs,
                           "A marginal gain gets this many more fresh runs: every run put the "
                           "winner at most 1 - --min-gain of the csr reference's time, but the "
                           "runs' spread leaves their 95% bound above it (a process can favour a "
                           "kernel of a few microseconds by several percent); 0: never")
                ->check(setting_range(tuning::settings::kDecideExtraRuns))
                ->capture_default_str();
            sub.add_option("--layouts", o->req.layouts,
                           "Side-by-side runs time each candidate of a small problem (format "
                           "and output up to 1 MiB) in this many memory layouts, a round each "
                           "in turn: a small kernel's layout moves its time by several percent "
                           "for a process's whole life; 1: one layout")
                ->check(setting_range(tuning::settings::kLayouts))
                ->capture_default_str();
            sub.add_option("--decide-rounds", o->req.decide_rounds,
                           "Timed interleaved rounds of each fresh decision run")
                ->check(setting_range(tuning::settings::kDecideRounds))
                ->capture_default_str();
            sub.add_option("--decide-leaders", o->req.decide_leaders,
                           "Nominees of the selection timed in the fresh decision runs (the "
                           "fastest of them there is judged, its interval's level raised for "
                           "their number: 1 - (1 - --verdict-level) / N)")
                ->check(setting_range(tuning::settings::kDecideLeaders))
                ->capture_default_str();
            sub.add_option("--decide-drop", o->req.decide_drop,
                           "A leader whose per-round ratio to the fastest leader has its "
                           "interval wholly above this after a fresh decision run is not timed "
                           "in the later runs (its status abandoned); <= 1: every leader runs "
                           "every run")
                ->check(setting_range(tuning::settings::kDecideDrop))
                ->capture_default_str();
            sub.add_option("--decide-clear", o->req.decide_clear,
                           "The fresh decision runs stop early on a clear gain: once the "
                           "fastest leader's per-round ratio to each csr reference is at most "
                           "this (its 99% interval over the runs made) and the selection run "
                           "put it at most this too; 0: every run is made")
                ->check(setting_range(tuning::settings::kDecideClear))
                ->capture_default_str();
            sub.add_option("--halving-keep", o->req.halving_keep,
                           "Successive halving of the selection's rounds: at a quarter, a half "
                           "and three quarters of --confirm-rounds the slower half of the "
                           "nominees (by their per-round ratios to the csr schedule) stop being "
                           "timed (abandoned), at least this many running every round; 0: every "
                           "nominee runs every round")
                ->check(setting_range(tuning::settings::kHalvingKeep))
                ->capture_default_str();
            sub.add_flag("--decide-together", o->req.decide_together,
                         "Time all fresh decision leaders in one child a run beside the csr "
                         "references (before session 58; default: each leader in children of "
                         "its own beside them, as a user's process runs one kernel)");
            sub.add_flag("--decide-always", o->req.decide_always,
                         "Time the fresh decision runs even when the selection shows no gain "
                         "(the A/A calibration of scripts/bench_verdict.sh; the references' "
                         "comparison then comes from fresh rounds too)");
            sub.add_option("--min-gain", o->req.rule.min_gain,
                           "Smallest gain reported: the winner's median per-round time ratio to "
                           "the faster csr reference must be at most 1 - this, and the ratio's "
                           "interval (--verdict-level) wholly below 1")
                ->check(setting_range(tuning::settings::kMinGain))
                ->capture_default_str();
            sub.add_option("--verdict-level", o->req.rule.level,
                           "Two-sided confidence level of the ratio's interval")
                ->check(setting_range(tuning::settings::kVerdictLevel))
                ->capture_default_str();
            sub.add_option("--max-disturbed", o->req.rule.max_disturbed,
                           "A gain whose fresh decision runs kept more than this share of "
                           "disturbed rounds (another process preempted them; retaken runs are "
                           "clean and do not count) is verdict undecided")
                ->check(setting_range(tuning::settings::kMaxDisturbed))
                ->capture_default_str();
            sub.add_option("--side-by-side-memory", o->req.side_by_side_bytes,
                           "Memory one side-by-side child may hold for its kernels' formats and "
                           "outputs, K/M/G suffixes binary (default: a quarter of this "
                           "machine's): nominees whose formats do not fit in one child are "
                           "measured in heats, the references in each, then the best of each "
                           "heat side by side")
                ->transform(CLI::AsSizeValue(false))
                ->check(CLI::Range(0.0, static_cast<double>(tuning::settings::kSideBySideMemory.hi)));
            add_limit_options(sub, o->req.timeout, o->req.compile_timeout);
            sub.add_option("--tolerance", o->req.tolerance, "Max |out - ref| / sum|products| per entry")
                ->check(CLI::PositiveNumber)
                ->capture_default_str();
            sub.add_option("--expected-calls", o->req.expected_calls,
                           "Calls of the kernel the caller expects to make: tuning spends at most "
                           "--tuning-share of their csr time (measured first), choosing how many "
                           "candidates to measure from that; when even one cannot pay for itself it "
                           "says so and returns csr (verdict not-worth-it)")
                ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 62));
            auto* adaptive = sub.add_flag(
                "--adaptive", o->adaptive,
                "Instead of measuring before returning, run the adaptive plan waco::tune gives "
                "with Options::adaptive on calls made here, as an application would: csr "
                "serves at once, the model's --nominees best are tried on the calls and the "
                "plan settles (or not, for want of calls). Makes --calls calls (default: "
                "--expected-calls; without it, until the plan settles), then as many csr "
                "calls to compare; reports what the library's plan would (its report_json)");
            sub.add_option("--nominees", o->drive.nominees,
                           "--adaptive: the model's best schedules tried on the calls")
                ->check(CLI::Range(1, 64))
                ->capture_default_str()
                ->needs(adaptive);
            sub.add_option("--calls", o->drive.calls,
                           "--adaptive: calls to make (default: --expected-calls, else until the "
                           "plan settles, at most " + std::to_string(o->drive.max_calls) + ")")
                ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
                ->needs(adaptive);
            sub.add_flag("--no-compare", [o](std::int64_t) { o->drive.compare = false; },
                         "--adaptive: do not time csr alone on as many calls afterwards, nor a gain "
                         "again on fresh pairs (drive.check)")
                ->needs(adaptive);
            // Hidden (tests, ablations): the nominees in the short list's order, never the model's
            // (SpMV's default), or the model's choice (the others').
            sub.add_flag_callback(
                   "--prior-choice", [o] { o->drive.choice = tuning::NomineeChoice::List; },
                   "--adaptive: nominate the shipped short list's first schedules (its most "
                   "frequent winners) instead of the model's choice")
                ->needs(adaptive)
                ->group("");
            sub.add_flag_callback(
                   "--model-choice", [o] { o->drive.choice = tuning::NomineeChoice::Model; },
                   "--adaptive: nominate by the model's choice (SpMV's plans take the short "
                   "list's order by default)")
                ->needs(adaptive)
                ->excludes("--prior-choice")
                ->group("");
            sub.add_option("--tuning-share", o->req.tuning_share,
                           "Share of the expected calls' csr time that tuning may take")
                ->check(CLI::Range(1e-6, 1.0))
                ->capture_default_str();
            auto* no_cache = sub.add_flag(
                "--no-plan-cache", o->req.no_plan_cache,
                "Neither read nor write the tuning cache");
            sub.add_option("--plan-cache", o->req.plan_cache,
                           "Tuning cache folder: a decision is kept per matrix content, kernel, "
                           "dense size, threads and machine (CPU, caches, compilers, version) and "
                           "returned by the next tune without searching (default: " +
                               heuristics::default_tuning_cache_dir() + ")")
                ->excludes(no_cache);
            sub.add_flag("--refresh", o->req.refresh,
                         "Tune again even when the tuning cache holds a decision, and replace it")
                ->excludes(no_cache);
            sub.add_flag("--retry-failed", o->req.retry_failed,
                         "Measure again candidates stored with a status other than ok");
            sub.add_flag("--json", o->json,
                         "Print JSON (verdict; claimed_speedup: a gain's, over the faster csr "
                         "reference, its interval in speedup_interval; speedup_over_csr: over the csr "
                         "schedule, speedup_over_csr_baseline: over the hand-written csr; best, "
                         "status_counts, kernel_source, context)");
            sub.add_flag("--quiet,-q", o->quiet, "No progress on stderr");
            add_cpu_lock_option(sub, o->cpu_lock, "from reading the file until the tune ends");
            add_codegen_options(sub, o->req.generated);
            sub.add_option("--abandon-factor", o->req.abandon_factor,
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
            add_pass_options(sub, o->req.params);
            add_read_options(sub, o->read);
            add_dtype_option(sub, o->read.dtype);
            // Hidden (group ""): tests run the pipeline on scripted timings (experiments/README.md).
            sub.add_option("--runner", o->req.runner,
                           "scripted:FILE: timings and statuses from a script, not measured")
                ->group("");
            sub.footer(
                "Without --search, tune runs the hybrid (--search model): the cost model ranks\n"
                "the admissible schedules and its best 20 (--budget; 40 for MTTKRP) are measured\n"
                "side by side, interleaved, in one child with the csr schedule and the csr\n"
                "baseline. Other searches measure their candidates one by one first, then their\n"
                "best --confirm and the fastest csr-like schedule go side by side. That run only\n"
                "selects: when its winner looks at least --min-gain faster than the faster csr\n"
                "reference, the winner (--decide-leaders) and both references are timed again in\n"
                "--decide-runs fresh children (--decide-rounds rounds each), and only those\n"
                "rounds decide (the best of 20 near-tied kernels looks faster on the rounds that\n"
                "chose it). A gain needs the median per-round time ratio to the faster reference\n"
                "at most 1 - --min-gain and its interval (order statistics at --verdict-level,\n"
                "widened to every run's own median) wholly below 1; speedup_interval gives it.\n"
                "Otherwise tune says \"no gain over csr\" and returns the faster csr reference\n"
                "(verdict no-gain, exit 0): the csr schedule, or the hand-written csr baseline\n"
                "when it ran faster side by side (\"implementation\": \"csr\"; waco::Plan serves it,\n"
                "-o writes its loop with its threads and chunks); a gain timed on a busy machine\n"
                "(over --max-disturbed of the fresh rounds disturbed) is verdict undecided, csr\n"
                "returned. On a shared machine two separate measurements of one kernel can differ\n"
                "by 1.5x: only side-by-side ratios rank. Racing: a candidate whose fastest run is\n"
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
                "  waco-hybrid tune --kernel spmv --dtype f64 -o tuned_double.hpp A.mtx   # in double\n"
                "  waco-hybrid tune --kernel spmv --search random --budget-seconds 600 --db r.sqlite A.mtx\n"
                "  waco-hybrid tune --kernel spmv --schedules mine.txt examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid tune --kernel spmm --dense 64 --cpu-lock /tmp/cpu.lock A.mtx   # builds beside it: flock -s /tmp/cpu.lock make\n"
                "  waco-hybrid tune --kernel spmv --search model --expected-calls 5000 examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid tune --kernel spmv --search model --refresh examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid tune --kernel spmm --dense 64 --adaptive --expected-calls 2000 A.mtx   # as waco::tune with Options::adaptive\n"
                "  waco-hybrid tune --kernel sddmm --search exhaustive --abandon-factor 0 A.mtx\n"
                "  waco-hybrid tune --kernel spmm --budget 20 --cache-bytes 4M --tile-window 1 A.mtx\n");
            // What a tune measures before returning, which an adaptive plan never does.
            for (const char* name : {"--schedules", "--output", "--db", "--measure-first",
                                     "--budget", "--budget-seconds", "--confirm", "--explain"})
              adaptive->excludes(sub.get_option(name));
            return [o, confirm] {
              o->req.confirm_given = confirm->count() > 0;
              return run_tune(*o);
            };
          }};
}

}  // namespace waco::cli

