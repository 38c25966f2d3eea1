// waco-hybrid: the command-line driver. main() is a dispatch table over the subcommands; it is the
// only place that catches user errors and turns them into "error: ..." lines and exit codes.
//
// Built twice (experiments/CMakeLists.txt): waco-hybrid with the lite learned library, which
// never loads LibTorch, and waco-hybrid-torch with the LibTorch one. When a command in the lite
// build needs LibTorch (learned::TorchRequired: training, WACONet), main runs the same command
// line again as waco-hybrid-torch from the same folder (execv: same process, arguments and
// streams). Commands that need it throw before they write a result or start a child process.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "command.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"
#include "waco/learned/backend.hpp"

namespace {

/// The LibTorch build beside this executable, or "" when there is none.
std::string torch_companion() {
  const std::filesystem::path c =
      std::filesystem::path(waco::kernels::self_executable()).parent_path() / "waco-hybrid-torch";
  return ::access(c.c_str(), X_OK) == 0 ? c.string() : std::string();
}

/// Runs argv again as waco-hybrid-torch; returns only when that is impossible (the error printed).
int run_with_torch(char** argv, const waco::learned::TorchRequired& why) {
  // (The LibTorch build never throws it; if it did, running itself again would loop.)
  const std::string companion = waco::learned::built_with_torch() ? "" : torch_companion();
  if (!companion.empty()) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    ::execv(companion.c_str(), argv);
    std::cerr << "error: " << why.what() << "; running " << companion
              << " failed: " << std::strerror(errno) << "\n";
    return waco::cli::kExitFailure;
  }
  std::cerr << "error: " << why.what()
            << " (hint: this installation has no waco-hybrid-torch beside waco-hybrid; build "
               "with libtorch-dev installed, scripts/setup.sh does)\n";
  return waco::cli::kExitFailure;
}

/// A usage error as one line, as every other error (CLI11's own message has no "error:" prefix
/// and adds the whole usage text), naming the --help to read; exit code 2.
int usage_error(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::App* sub = nullptr;
  for (const CLI::App* s : app.get_subcommands()) sub = s;
  std::cerr << "error: " << e.what() << " (hint: run '" << app.get_name()
            << (sub ? " " + sub->get_name() : std::string()) << " --help')\n";
  return waco::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace waco::cli;
  // Started by another waco-hybrid (ablate) or the library: end with it.
  waco::kernels::die_with_parent_from_environment();
  const std::vector<Command> commands = {
      make_info_command(),
      make_run_command(),
      make_bench_command(),
      make_generate_command(),
      make_emit_command(),
      make_signature_command(),
      make_tile_command(),
      make_features_command(),
      make_space_command(),
      make_tune_command(),
      make_collect_command(),
      make_dataset_command(),
      make_db_command(),
      make_train_command(),
      make_calibrate_command(),
      make_evaluate_command(),
      make_predict_command(),
      make_ablate_command(),
      make_report_command(),
      make_precompile_command(),
  };

  CLI::App app{
      "waco-hybrid: finds the sparse format and loop schedule that run a sparse kernel\n"
      "(SpMV, SpMM, SDDMM, MTTKRP) fastest on this CPU.\n\n"
      "Examples:\n"
      "  waco-hybrid info examples/bcsstk13.mtx.gz\n"
      "  waco-hybrid run --kernel spmm --impl csr --check examples/bcsstk13.mtx.gz\n"
      "  waco-hybrid bench --kernel spmv --impl csr,eigen,rsb examples/bcsstk13.mtx.gz\n",
      "waco-hybrid"};
  app.set_version_flag("--version", std::string("waco-hybrid ") + waco::kernels::version() +
                                        " (" + waco::kernels::git_revision() + ")");
  app.require_subcommand(1);
  app.fallthrough(false);

  // Only the command named first declares its options: declaring every command's (CLI11 option
  // objects, validators, help text) cost ~2 ms of each run, the measuring children's included.
  // The others stay listed, for the top-level --help; a first argument that names no command (an
  // option, a typo) has them all declared, so that help and errors are as they were.
  const bool named = argc > 1 && std::any_of(commands.begin(), commands.end(),
                                             [&](const Command& c) { return c.name == argv[1]; });
  std::function<int()> action;
  for (const Command& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.summary);
    if (named && c.name != argv[1]) continue;
    auto run = std::make_shared<std::function<int()>>(c.setup(*sub));
    sub->callback([run, &action] { action = *run; });
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e);
  }

  try {
    return action ? action() : kExitUsage;
  } catch (const waco::learned::TorchRequired& e) {
    return run_with_torch(argv, e);
  } catch (const CLI::ParseError& e) {  // a combination of options a command refused
    return usage_error(app, e);
  } catch (const waco::kernels::Error& e) {
    std::cerr << "error: " << e.what();
    if (!e.hint().empty()) std::cerr << " (hint: " << e.hint() << ")";
    std::cerr << "\n";
    return kExitFailure;
  } catch (const waco::kernels::InternalError& e) {
    std::cerr << "error: internal error (this is a bug in waco-hybrid): " << e.what() << "\n";
    return kExitFailure;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory\n";
    return kExitFailure;
  } catch (const std::exception& e) {  // e.g. a JSON access a command did not guard
    std::cerr << "error: internal error (this is a bug in waco-hybrid): " << e.what() << "\n";
    return kExitFailure;
  }
}
