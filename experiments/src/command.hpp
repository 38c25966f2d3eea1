// A subcommand of `waco-hybrid`: its name, one-line summary, and a setup function that declares
// its options on a CLI11 subcommand and returns the action to run once parsing succeeded.
// Adding a subcommand = one cmd_<name>.cpp defining make_<name>_command() + one line in main.cpp.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace waco::cli {

/// Exit codes of waco-hybrid.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  ///< a user error or a failed check
inline constexpr int kExitUsage = 2;    ///< bad command line

struct Command {
  std::string name;
  std::string summary;
  /// Declares the options on `sub`; the returned action runs after a successful parse and
  /// returns the exit code. It may throw waco::kernels::Error (printed by main, exit 1).
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

Command make_info_command();
Command make_run_command();
Command make_bench_command();
Command make_generate_command();
Command make_emit_command();
Command make_signature_command();
Command make_tile_command();
Command make_features_command();
Command make_space_command();
Command make_tune_command();
Command make_collect_command();
Command make_dataset_command();
Command make_train_command();
Command make_calibrate_command();
Command make_evaluate_command();
Command make_predict_command();
Command make_report_command();
Command make_ablate_command();
Command make_db_command();
Command make_precompile_command();

}  // namespace waco::cli
