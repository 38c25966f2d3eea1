// Private to experiments/src/cmd_ablate.cpp and ablate_*.cpp: what the parts of `waco-hybrid
// ablate` share (its options, the configurations, the matrix and setting of a run, the child
// processes). The parts:
//   cmd_ablate.cpp           the subcommand: its options, the loop over matrices and
//                            configurations (resuming stored rows), the Spearman of the models
//                            and the summary (table or JSON)
//   ablate_configs.cpp       the configurations: the standard set (ablation_configs.def),
//                            --config and --configs
//   ablate_runs.cpp          the children (run_child, child_argv), one configuration's tune child
//                            and its row (run_config), a model's Spearman, the stored rows
//   ablate_side_by_side.cpp  the final side-by-side run: one bench child, replicated
//                            (final_runs.hpp), and its row
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "final_runs.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/process.hpp"

namespace waco::cli::ablate_detail {

inline constexpr int kRowVersion = kAblationRowVersion;

struct Config {
  std::string name;
  std::string kind;  ///< "pipeline" or "baseline"
  std::string description;
  std::vector<std::string> args;  ///< tune arguments
};

struct Options {
  std::string kernel;
  std::vector<std::string> files;
  std::string configs;             ///< comma-separated names
  std::vector<std::string> extra;  ///< --config NAME=ARGS
  std::string db;
  std::string work;  ///< per-run tune databases and outputs
  std::string cpu_lock;
  int dense = 0;
  int threads = 0;
  int bench_repeat = 20;
  int final_runs_max = 4;  ///< fresh side-by-side runs at most (at least 2)
  int final_passes = 2;    ///< passes of the final run over every matrix, apart in time
  int final_layouts = 4;   ///< bench --layouts of the final run (a small problem's kernels)
  std::string model;      ///< passed to every model search without its own
  std::string tune_args;  ///< appended to every tune child's arguments
  std::string cache_dir;  ///< the kernel compile cache of every child
  bool list = false;
  bool json = false;
  bool quiet = false;
  bool redo = false;
  bool redo_busy = false;  ///< run stored rows marked busy again
  bool roofline = false;   ///< the side-by-side runs measure the machine's peaks beside them
  kernels::ReadOptions read;
};

struct ChildResult {
  int status = 0;
  nlohmann::json out;  ///< parsed stdout (discarded when not JSON)
  std::string error;   ///< empty on success
  double seconds = 0;
};

struct MatrixRun {
  std::string file, name, fingerprint;
  std::int64_t nnz = 0;
  kernels::KernelKind kind = kernels::KernelKind::SpMV;
  int dense = 1, threads = 1;
  std::string dtype = "f32";           ///< the value type every child computes in
  std::vector<std::string> read_args;  ///< how every child reads the file (--dtype among them)
  std::string dir;  ///< work folder of this matrix
};

// ---------------------------------------------------------------------------------------------
// The configurations (ablate_configs.cpp).

/// The words of s (split at white space).
std::vector<std::string> split_words(const std::string& s);

/// The standard set: one Config a line of ablation_configs.def.
const std::vector<Config>& standard_configs();

/// Their names, comma-separated.
std::string standard_names();

/// Whether the configuration's tune arguments hold `flag`.
bool has_arg(const Config& c, const std::string& flag);

/// The word after `flag` in the configuration's tune arguments.
std::optional<std::string> arg_value(const Config& c, const std::string& flag);

/// A configuration's tune arguments as a tune of `kind` gets them: `@budget` is the model
/// searches' default budget for the kernel (tuning::default_model_budget), so that the baselines
/// measure as many schedules as the hybrid does.
std::vector<std::string> concrete_args(const std::vector<std::string>& args, kernels::KernelKind kind);

/// A configuration's tune arguments (concrete_args) with --tune-args: a stored row counts only
/// for the same.
std::vector<std::string> stored_args(const Options& o, const Config& c);

/// The configurations to run: --configs (default: the standard set) in its order, then the
/// --config ones it does not name.
std::vector<Config> chosen_configs(const Options& o);

// ---------------------------------------------------------------------------------------------
// The children (ablate_runs.cpp).

/// Runs argv holding the CPU lock, stdout to <stem>.json and stderr to <stem>.stderr.
ChildResult run_child(const std::vector<std::string>& argv, const std::string& stem,
                      kernels::FileLock& lock);

/// A speedup as the text table prints it (%5.3f).
inline std::string fmt_speedup(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%5.3f", x);
  return buf;
}

/// Canonical text of a schedule with "all cores" spelled out, to match schedules across outputs.
std::string schedule_key(kernels::KernelKind k, const std::string& text, int threads);

/// The matrix and setting every stored row names (run rows and the side-by-side row alike).
nlohmann::json matrix_fields(const MatrixRun& m);

/// `waco-hybrid COMMAND --kernel K` with the run's threads, (not for SpMV) dense size and reading
/// (value type, zeros, non-finite values), unless `own` (a configuration's tune arguments) gives
/// them itself.
std::vector<std::string> child_argv(const std::string& command, const MatrixRun& m,
                                    const std::vector<std::string>& own = {});

/// Spearman of a model's scores against the exhaustive run's verified times (per model file).
std::optional<double> model_spearman(const MatrixRun& m, const std::string& exh_db,
                                     const std::string& model, kernels::FileLock& lock);

/// The stored row of `config` for this matrix and setting. A row of the other value type (the
/// table keys rows without it) is an error, not a result to replace: one database per --dtype.
std::optional<nlohmann::json> find_row(const heuristics::ResultsDb& db, const MatrixRun& m,
                                       const std::string& config);

/// Runs configuration `c` (the `position`th) on the matrix: one tune child with a fresh database
/// of its own; its row (waco-ablation-run), failed or with the tune's claim.
nlohmann::json run_config(const Options& o, const MatrixRun& m, const Config& c,
                          std::size_t position, kernels::FileLock& lock);

// ---------------------------------------------------------------------------------------------
// The final side-by-side run (ablate_side_by_side.cpp).

/// One pass of the final side-by-side run: every distinct winner, the csr schedule and the
/// library baselines interleaved in one bench child, replicated in fresh children until two
/// consecutive undisturbed runs agree (final_runs.hpp) or --final-runs-max runs were made; the
/// matrix's side-by-side row over this pass and, given `earlier` (the stored row of the same
/// winners), its passes before it (delivered_over_passes). Null when interrupted.
nlohmann::json run_side_by_side(const Options& o, const MatrixRun& m,
                                const std::map<std::string, nlohmann::json>& rows,
                                kernels::FileLock& lock, const nlohmann::json* earlier = nullptr);

/// The passes a side-by-side row holds (a row before --final-passes: one).
int passes_of(const nlohmann::json& row);

}  // namespace waco::cli::ablate_detail
