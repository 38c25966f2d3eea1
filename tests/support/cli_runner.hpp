// Runs the built waco-hybrid binary for end-to-end tests, capturing exit status, stdout and
// stderr separately (test processes run in parallel: every call has its own stderr file).
#pragma once

#include <string>

namespace waco::test {

struct CliResult {
  int status = -1;  ///< exit status, -1 when killed by a signal
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

/// Runs a shell command line (stderr captured apart, as run_cli does).
CliResult run_command(const std::string& command);

/// Runs `waco-hybrid <args>`; args are passed through the shell (quote them as for sh). `env`:
/// NAME=value assignments (space-separated) for this run only.
CliResult run_cli(const std::string& args, const std::string& env = {});

}  // namespace waco::test
