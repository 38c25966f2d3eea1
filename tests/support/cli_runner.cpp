#include "support/cli_runner.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/test_paths.hpp"

namespace waco::test {

CliResult run_command(const std::string& command) {
  namespace fs = std::filesystem;
  static int calls = 0;
  const std::string err_path =
      (fs::temp_directory_path() /
       ("waco-cli-stderr-" + std::to_string(getpid()) + "-" + std::to_string(++calls)))
          .string();
  const std::string cmd = command + " 2>" + err_path;
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  fs::remove(err_path);
  return r;
}

CliResult run_cli(const std::string& args, const std::string& env) {
  return run_command((env.empty() ? std::string() : "env " + env + " ") + cli_binary() + " " + args);
}

}  // namespace waco::test
