// Unit "process": waiting for a child to end (kernels/process.hpp, await_child_exit), which the
// measuring worker, run_process, the compiler runs and the counters probe share.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "waco/kernels/process.hpp"
#include "waco/kernels/timing.hpp"

using namespace waco::kernels;

namespace {
/// A child that sleeps `seconds`, then exits with status 7.
pid_t sleeper(double seconds) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::usleep(static_cast<useconds_t>(seconds * 1e6));
    ::_exit(7);
  }
  return pid;
}
}  // namespace

TEST_CASE("process: await_child_exit returns when the child ends, and leaves it to be reaped") {
  const pid_t pid = sleeper(0.05);
  const double t0 = now_seconds();
  CHECK(await_child_exit(pid, 30.0));
  CHECK(now_seconds() - t0 < 20.0);  // not the limit: woken by the end
  int status = 0;
  REQUIRE(::waitpid(pid, &status, WNOHANG) == pid);  // ended, not yet reaped by the wait
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
}

TEST_CASE("process: await_child_exit gives up at its limit and leaves the child running") {
  const pid_t pid = sleeper(30.0);
  const double t0 = now_seconds();
  CHECK_FALSE(await_child_exit(pid, 0.1));
  const double waited = now_seconds() - t0;
  CHECK(waited >= 0.09);
  CHECK(waited < 10.0);
  int status = 0;
  CHECK(::waitpid(pid, &status, WNOHANG) == 0);  // still running
  ::kill(pid, SIGKILL);
  CHECK(await_child_exit(pid, 30.0));
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  // A process that is no child of this one: nothing to wait for.
  CHECK(await_child_exit(pid, 30.0));
  CHECK(await_child_exit(1, 30.0));
}
