// waco-hybrid ablate (issue 21): runs matrices through named configurations of the pipeline (the
// standard set is ablation_configs.def; --config adds more), then times every configuration's
// winner side by side with the library baselines, interleaved in one run, so that the
// configurations can be compared with each other (separate runs drift by tens of percent on a
// shared machine). Each configuration is one `waco-hybrid tune` child process with its own fresh
// database (no configuration reuses another's measurements; kernels compiled earlier are reused
// from the compile cache by all); the side-by-side run is one `waco-hybrid bench` child with the
// csr schedule and the library baselines beside the winners, repeated in fresh children until
// two consecutive undisturbed runs agree (final_runs.hpp: each winner's delivered speedup over
// the faster csr reference, with its interval), in --final-passes passes apart in time (the later
// passes after every matrix's first). Each configuration's row keeps the tune's claim
// (speedup and interval) beside it, and the tune's busy warning. Results go to the results
// database's ablation table, one row per matrix and configuration and one "side-by-side" row per
// matrix; a run that stops resumes where it stopped. `waco-hybrid report` turns them into
// tables and plots.
//
// This file holds the subcommand: its options, the loop over matrices and configurations
// (resuming stored rows) and the summary; the configurations are ablate_configs.cpp's, the tune
// and predict children ablate_runs.cpp's, the side-by-side run ablate_side_by_side.cpp's (what
// they share: ablate_internal.hpp).
//
// Children, not calls: the tune pipeline is not a library call yet (issue 34, tune-library).
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ablate_internal.hpp"
#include "cli_common.hpp"
#include "command.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {
using namespace waco::kernels;
using heuristics::ResultsDb;
using namespace ablate_detail;

namespace {

namespace fs = std::filesystem;

/// A delivered speedup for the text table: "1.234", "1.234?" when the runs never agreed on it,
/// "busy" when the row has no two undisturbed runs.
std::string delivered_text(const nlohmann::json& bench, const std::string& config) {
  const nlohmann::json& c = bench.at("configs").value(config, nlohmann::json::object());
  const nlohmann::json d = c.value("delivered", nlohmann::json());
  if (!d.is_object()) return "   -  ";
  if (bench.value("busy", false)) return "  busy";
  return fmt_speedup(d.at("speedup").get<double>()) + (d.value("decided", false) ? " " : "?");
}

int run_ablate(const Options& o) {
  if (o.list) {
    for (const Config& c : standard_configs()) {
      std::string args;
      for (const std::string& a : c.args) args += (args.empty() ? "" : " ") + a;
      std::printf("%-20s %-9s %s\n%-30s tune %s\n", c.name.c_str(), c.kind.c_str(),
                  c.description.c_str(), "", args.c_str());
    }
    return kExitOk;
  }
  if (o.kernel.empty()) throw Error("--kernel is required", "give --kernel spmv|spmm|sddmm|mttkrp");
  if (o.files.empty()) throw Error("no matrix given", "give one or more matrix files");
  const KernelKind kind = kernel_from_option(o.kernel);
  const std::vector<Config> configs = chosen_configs(o);
  const int threads = resolve_threads(o.threads);
  const int dense =
      kind == KernelKind::SpMV ? 1 : (o.dense > 0 ? o.dense : default_dense_size(kind));
  const std::string db_path = o.db.empty() ? heuristics::default_results_path() : o.db;
  const std::string work = o.work.empty() ? db_path + ".ablate" : o.work;
  for (const std::string& f : o.files)
    if (!fs::exists(f)) throw Error("no such file: " + f);
  ResultsDb db(db_path);
  fs::create_directories(work);
  kernels::FileLock lock(o.cpu_lock);
  InterruptGuard interrupt_guard;
  const volatile std::sig_atomic_t& interrupted = interrupt_flag();

  const std::size_t units =
      o.files.size() * (configs.size() + static_cast<std::size_t>(o.final_passes));
  std::size_t done_units = 0, run_units = 0;
  double run_seconds = 0;
  const std::string kname(kernel_name(kind));
  nlohmann::json summary = nlohmann::json::array();
  // Each matrix's run and configuration rows, for the later passes of the final run.
  std::vector<std::pair<MatrixRun, std::map<std::string, nlohmann::json>>> done_matrices;
  if (!o.quiet)
    std::fprintf(stderr,
                 "ablate: %s, %zu matrices x %zu configurations + side by side, %d threads, "
                 "results in %s (work files in %s)\n",
                 kname.c_str(), o.files.size(), configs.size(), threads, db_path.c_str(),
                 work.c_str());
  for (std::size_t fi = 0; fi < o.files.size(); ++fi) {
    MatrixRun m;
    m.file = o.files[fi];
    m.name = fs::path(m.file).filename().string();
    m.kind = kind;
    m.dense = dense;
    m.threads = threads;
    m.dtype = std::string(kernels::dtype_name(o.read.dtype));
    m.read_args = read_option_args(o.read);
    {
      const Operand op = load_operand(m.file, o.read, kind);
      const heuristics::MatrixRecord rec =
          op.matrix ? heuristics::matrix_record(op.matrix->matrix, m.file)
                    : heuristics::matrix_record(op.tensor->tensor, m.file);
      m.fingerprint = rec.fingerprint;
      m.nnz = rec.nnz;
      db.record_matrix(rec);
    }
    m.dir = work + "/" + m.fingerprint + "-" + kname + "-" + std::to_string(dense) + "-t" +
            std::to_string(threads) + (o.read.dtype == kernels::Dtype::F32 ? "" : "-" + m.dtype);
    fs::create_directories(m.dir);
    std::map<std::string, nlohmann::json> rows;
    bool changed = false;
    for (std::size_t ci = 0; ci < configs.size(); ++ci) {
      const Config& c = configs[ci];
      if (interrupted) break;
      std::optional<nlohmann::json> have = find_row(db, m, c.name);
      if (o.redo) have.reset();
      if (have && have->value("status", "") == "ok" &&
          have->value("tune_args", nlohmann::json()) == nlohmann::json(stored_args(o, c)) &&
          !(o.redo_busy && have->value("busy", false))) {
        rows[c.name] = *have;
        ++done_units;
        continue;
      }
      const double t0 = now_seconds();
      nlohmann::json row = run_config(o, m, c, ci, lock);
      if (interrupted) break;  // the child was interrupted too: not a result
      rows[c.name] = row;
      changed = true;
      run_seconds += now_seconds() - t0;
      ++run_units;
      ++done_units;
      db.record_ablation(m.fingerprint, kname, dense, threads, c.name, row);
      if (!o.quiet) {
        const double eta =
            run_units ? run_seconds / run_units * static_cast<double>(units - done_units) : 0;
        std::fprintf(stderr, "ablate: [%zu/%zu] %s %-20s %6.1f s  %s  (%zu/%zu done, %s left)\n",
                     fi + 1, o.files.size(), m.name.c_str(), c.name.c_str(), now_seconds() - t0,
                     row.value("status", "") == "ok"
                         ? ("winner " + row.at("winner").dump()).c_str()
                         : ("failed: " + row.value("error", std::string())).c_str(),
                     done_units, units, duration_text(eta).c_str());
      }
    }
    if (interrupted) break;
    // Spearman of each model the configurations used, against the exhaustive timings.
    const auto exh = std::find_if(configs.begin(), configs.end(),
                                  [](const Config& c) { return c.name == "exhaustive"; });
    if (exh != configs.end()) {
      std::map<std::string, std::optional<double>> by_model;
      for (auto& [name, row] : rows) {
        if (!row.value("uses_model", false) || row.value("status", "") != "ok" ||
            !row.at("spearman").is_null())
          continue;
        const Config& c = *std::find_if(configs.begin(), configs.end(),
                                        [&](const Config& x) { return x.name == name; });
        const std::string model = arg_value(c, "--model").value_or(o.model);
        if (!by_model.count(model))
          by_model[model] = model_spearman(m, m.dir + "/exhaustive.sqlite", model, lock);
        if (by_model[model]) {
          row["spearman"] = *by_model[model];
          db.record_ablation(m.fingerprint, kname, dense, threads, name, row);
        }
      }
    }
    // The side-by-side run, unless one of exactly these configurations' winners is stored by
    // this version of ablate (an older row has no csr schedule and no replication: timed again).
    std::optional<nlohmann::json> bench = find_row(db, m, "side-by-side");
    if (changed || o.redo) bench.reset();
    std::set<std::string> want, have;
    for (const auto& [name, row] : rows) want.insert(name);
    if (bench && bench->contains("configs"))
      for (const auto& [name, t] : bench->at("configs").items()) have.insert(name);
    if (!bench || want != have || bench->value("version", 0) < kRowVersion ||
        (o.redo_busy && bench->value("busy", false))) {
      const double t0 = now_seconds();
      bench = run_side_by_side(o, m, rows, lock);
      if (interrupted || bench->is_null()) break;
      db.record_ablation(m.fingerprint, kname, dense, threads, "side-by-side", *bench);
      run_seconds += now_seconds() - t0;
      ++run_units;
      if (!o.quiet) {
        const std::string undecided = bench->at("undecided").empty()
                                          ? std::string()
                                          : ", undecided: " + bench->at("undecided").dump();
        std::fprintf(stderr,
                     "ablate: [%zu/%zu] %s side by side: %zu schedules + %zu baselines, %d runs "
                     "(%s)%s, %.1f s\n",
                     fi + 1, o.files.size(), m.name.c_str(),
                     bench->value("distinct_schedules", 0ul), bench->at("baselines").size(),
                     bench->value("final_runs", 0),
                     bench->value("busy", false) ? "busy: no two undisturbed runs"
                     : bench->value("settled", false) ? "the last two agree"
                                                      : "never agreed",
                     undecided.c_str(), now_seconds() - t0);
      }
    }
    ++done_units;
    nlohmann::json line = {
        {"file", m.file}, {"fingerprint", m.fingerprint}, {"side_by_side", *bench}, {"runs", rows}};
    summary.push_back(line);
    done_matrices.emplace_back(m, rows);
  }
  // The later passes of the final run, each over every matrix after the one before: two runs of a
  // matrix a second apart share the machine's state of that moment, which drifts over minutes
  // (final_runs.hpp, delivered_over_passes).
  for (int pass = 2; pass <= o.final_passes && !interrupted; ++pass) {
    for (std::size_t k = 0; k < done_matrices.size() && !interrupted; ++k) {
      const auto& [m, rows] = done_matrices[k];
      nlohmann::json& bench = summary[k]["side_by_side"];
      if (passes_of(bench) >= pass) {
        ++done_units;
        continue;
      }
      const double t0 = now_seconds();
      nlohmann::json row = run_side_by_side(o, m, rows, lock, &bench);
      if (interrupted || row.is_null()) break;
      db.record_ablation(m.fingerprint, kname, dense, threads, "side-by-side", row);
      bench = std::move(row);
      run_seconds += now_seconds() - t0;
      ++run_units;
      ++done_units;
      if (!o.quiet) {
        const double eta =
            run_units ? run_seconds / run_units * static_cast<double>(units - done_units) : 0;
        std::fprintf(stderr,
                     "ablate: pass %d of %d: [%zu/%zu] %s side by side: %d runs in all%s, %.1f s "
                     "(%zu/%zu done, %s left)\n",
                     pass, o.final_passes, k + 1, done_matrices.size(), m.name.c_str(),
                     bench.value("final_runs", 0),
                     bench.at("undecided").empty()
                         ? ""
                         : (", undecided: " + bench.at("undecided").dump()).c_str(),
                     now_seconds() - t0, done_units, units, duration_text(eta).c_str());
      }
    }
  }
  if (interrupted) {
    std::fprintf(stderr,
                 "ablate: interrupted; run the same command again to resume (results so far "
                 "are in %s)\n",
                 db_path.c_str());
    return kExitFailure;
  }
  if (o.json) {
    print_json({{"kernel", kname},
                {"dense", dense},
                {"threads", threads},
                {"dtype", std::string(kernels::dtype_name(o.read.dtype))},
                {"db", db_path},
                {"matrices", summary}});
    return kExitOk;
  }
  std::printf(
      "%s %s, dense %d, %d threads: delivered speedup of each configuration's winner over the faster "
      "%s reference (baseline or schedule, whichever was faster over the final runs), side by side, "
      "median of the final runs (? = the runs "
      "never agreed on it; busy = no two undisturbed runs)\n%-28s",
      kname.c_str(), std::string(kernels::dtype_name(o.read.dtype)).c_str(), dense, threads,
      kind == KernelKind::MTTKRP ? "csf" : "csr", "matrix");
  for (const Config& c : configs)
    std::printf(" %*s", static_cast<int>(std::max<std::size_t>(6, c.name.size())), c.name.c_str());
  std::printf("\n");
  for (const nlohmann::json& line : summary) {
    std::string f = fs::path(line.at("file").get<std::string>()).filename().string();
    if (f.size() > 28) f = f.substr(0, 25) + "...";
    std::printf("%-28s", f.c_str());
    for (const Config& c : configs)
      std::printf(" %*s", static_cast<int>(std::max<std::size_t>(6, c.name.size())),
                  delivered_text(line.at("side_by_side"), c.name).c_str());
    std::printf("\n");
  }
  std::printf("(waco-hybrid report --db %s -o report.html draws the plots and tables)\n",
              db_path.c_str());
  return kExitOk;
}

}  // namespace

Command make_ablate_command() {
  return {
      "ablate",
      "Run matrices through configurations of the pipeline and baselines; compare side by side",
      [](CLI::App& sub) -> std::function<int()> {
        auto o = std::make_shared<Options>();
        sub.add_option("--kernel", o->kernel, "Kernel: spmv, spmm, sddmm or mttkrp")
            ->check(CLI::IsMember({"spmv", "spmm", "sddmm", "mttkrp"}));
        sub.add_option("FILES", o->files, "Matrix Market (or FROSTT for mttkrp) files");
        sub.add_option("--configs", o->configs,
                       "Comma-separated configurations (default: the standard set, " +
                           standard_names() + "; see --list-configs)");
        sub.add_option("--config", o->extra,
                       "Define a configuration: NAME=TUNE-ARGUMENTS (repeatable), e.g. "
                       "\"waconet=--search anns --model m.model\"")
            ->allow_extra_args(false);  // FILES may follow: one value per occurrence
        sub.add_flag("--list-configs", o->list,
                     "List the standard configurations and their tune arguments");
        sub.add_option("--db", o->db,
                       "Results database (default: " + heuristics::default_results_path() + ")");
        sub.add_option("--work", o->work,
                       "Folder for each run's tune database and output (default: the database's "
                       "path + .ablate)");
        sub.add_option("--model", o->model,
                       "Cost model for the model searches without their own --model (default: the "
                       "shipped one)");
        sub.add_option("--dense", o->dense, "Dense size: J for spmm and mttkrp, K for sddmm")
            ->check(CLI::Range(1, 1 << 20));
        add_threads_option(sub, o->threads);
        sub.add_option("--bench-repeat", o->bench_repeat,
                       "Interleaved timed rounds of the side-by-side run")
            ->check(CLI::Range(3, 100000))
            ->capture_default_str();
        sub.add_option("--final-runs-max", o->final_runs_max,
                       "Fresh side-by-side runs at most: the final run is repeated until two "
                       "consecutive undisturbed runs agree (at least 2 runs)")
            ->check(CLI::Range(2, 100))
            ->capture_default_str();
        sub.add_option("--final-passes", o->final_passes,
                       "Passes of the final side-by-side run over every matrix: pass p of a "
                       "matrix runs after pass p - 1 of every matrix, and its delivered speedup is "
                       "the median of the passes'")
            ->check(CLI::Range(1, 20))
            ->capture_default_str();
        sub.add_option("--final-layouts", o->final_layouts,
                       "Memory layouts of each kernel of a small problem in the final side-by-side "
                       "run (bench --layouts): the delivered speedup over several draws of the "
                       "layout, as tune's side-by-side runs time it, not one process's; 1: one")
            ->check(CLI::Range(1, 64))
            ->capture_default_str();
        sub.add_option(
            "--tune-args", o->tune_args,
            "More tune arguments for every configuration, e.g. \"--repeat 5 --confirm-rounds 10\"");
        sub.add_option("--cache-dir", o->cache_dir,
                       "Kernel compile cache of every child (default: tune's)");
        add_cpu_lock_option(sub, o->cpu_lock, "around every measuring child");
        sub.add_flag("--redo", o->redo, "Run every configuration again, replacing stored rows");
        sub.add_flag("--redo-busy", o->redo_busy,
                     "Run the stored rows marked busy again (a tune or side-by-side run that other "
                     "processes disturbed)");
        sub.add_flag("--roofline", o->roofline,
                     "The side-by-side runs measure the machine's peak and STREAM bandwidth beside "
                     "them (bench --roofline, about 0.5 s a run): report gives each "
                     "implementation's share of STREAM");
        sub.add_flag("--json", o->json, "Print JSON (every row)");
        sub.add_flag("--quiet,-q", o->quiet, "No progress on stderr");
        add_read_options(sub, o->read);
        add_dtype_option(sub, o->read.dtype);
        sub.footer(
            "Each configuration is one `waco-hybrid tune --json` child with a fresh database of\n"
            "its own (in --work); then every configuration's winner, the csr schedule and the\n"
            "library baselines (csr, eigen, rsb-tuned where they exist) are timed side by side,\n"
            "interleaved, in one `bench` child: only those timings compare configurations. That\n"
            "run is repeated in fresh children until two consecutive undisturbed runs agree\n"
            "(every winner's speedup over the faster of csr and the csr schedule changed by\n"
            "less than 5% or kept its band: below 0.97x, 0.97-1.03x, above 1.03x), at most\n"
            "--final-runs-max; a winner they never agree on is 'undecided', a matrix without two\n"
            "undisturbed runs 'busy' (report leaves it out). That is one pass: --final-passes\n"
            "passes run apart in time (pass p of a matrix after pass p - 1 of every matrix), and\n"
            "the delivered speedup is the median of the passes' ('undecided' where a pass is\n"
            "more than 5% from it and in another band). Rows go to the results database\n"
            "(table ablation); a stopped run resumes, skipping what is stored. Spearman: each\n"
            "model's scores against the exhaustive run's timings.\n"
            "Kernels compiled by an earlier configuration are reused from the compile cache.\n\n"
            "Examples:\n"
            "  waco-hybrid ablate --kernel spmv --db abl.sqlite A.mtx B.mtx\n"
            "  waco-hybrid ablate --kernel spmv --db abl.sqlite --final-passes 3 A.mtx B.mtx"
            "   # adds a pass to stored rows\n"
            "  waco-hybrid ablate --kernel spmm --configs exhaustive,hybrid,random,bandit --db "
            "abl.sqlite A.mtx\n"
            "  waco-hybrid ablate --kernel spmv --config \"hybrid-1t=--search anns --threads 1\" "
            "A.mtx\n"
            "  waco-hybrid ablate --kernel spmm --dense 64 --dtype f64 --db abl-f64.sqlite A.mtx"
            "   # one database per value type\n"
            "  waco-hybrid ablate --list-configs\n"
            "  waco-hybrid report --db abl.sqlite -o report.html\n");
        return [o] { return run_ablate(*o); };
      }};
}

}  // namespace waco::cli
