// Running another program (waco-hybrid itself, for the library's tuning and for ablate's
// pipeline runs): posix_spawn, no shell, stdin from /dev/null, stdout (and stderr unless shown
// live) into files. A process started this way does not inherit the caller's OpenMP state, which
// GNU libgomp would not survive across fork.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <string>
#include <vector>

namespace waco::kernels {

/// Runs argv (argv[0] a path, or a program name looked up in PATH) with stdout into out_path and
/// stderr into err_path (or the caller's stderr when `live_stderr`); waits and returns the exit
/// status (128 + signal when killed). With timeout_s > 0, a child still running then is killed
/// and Error thrown ("... did not finish within N s"). Throws Error when it cannot start.
/// The child is told the caller's pid (kParentPidVariable in its environment): a waco-hybrid
/// child ends when the caller does (die_with_parent_from_environment), so that no tune goes on
/// alone after an ablate or a program using the library was killed.
/// With `stop` (a SIGINT/SIGTERM handler's flag), the child runs in its own process group, so that
/// a terminal's Ctrl-C reaches the caller only, and once *stop is non-zero the child is sent one
/// SIGTERM (a waco-hybrid child then stops at its next safe point); the wait goes on.
int run_process(const std::vector<std::string>& argv, const std::string& out_path,
                const std::string& err_path, bool live_stderr = false, double timeout_s = 0.0,
                const volatile std::sig_atomic_t* stop = nullptr);

/// Waits until the child `pid` has ended or `seconds` have passed, whichever comes first, without
/// reaping it (the caller then takes its status with waitpid or wait4); true when it has ended
/// (or is no child of this process: waitpid will say so). Woken as the child ends where the
/// kernel has process file descriptors (pidfd_open, Linux 5.3); elsewhere it looks every 50 us at
/// first, then at most every 2 ms. (A sleep of 2-5 ms between looks cost each measuring child of
/// a tune 2-3 ms after its last frame: 4 children, a tenth of a small matrix's tune.)
bool await_child_exit(pid_t pid, double seconds);

/// The environment variable run_process sets for its child: the caller's pid.
inline constexpr const char* kParentPidVariable = "WACO_PARENT_PID";

/// When kParentPidVariable is set (this process was started by run_process): dies with SIGKILL
/// when that parent ends (PR_SET_PDEATHSIG), or exits at once (status 1, an error line) when it
/// has already ended. The variable is removed from the environment. waco-hybrid's main calls it.
void die_with_parent_from_environment();

/// The path of the running executable (/proc/self/exe); throws Error when unreadable.
std::string self_executable();

/// Whether `path` is a regular file this process may execute.
bool executable_file(const std::string& path);

/// The program `name` as exec finds it (`name` itself when it holds a '/', else the first
/// executable file of that name in PATH's folders), links resolved; empty when there is none.
std::string find_executable(const std::string& name);

/// What the tool ships under `name` (models, dataset, kernels) where the module holding this
/// code was installed: <prefix>/share/waco-hybrid/<name> for <prefix>/bin/waco-hybrid,
/// <prefix>/lib/libwaco.so or <prefix>/libexec/waco-hybrid/waco-measure-worker (found with dladdr, so a moved prefix still finds it; inside an
/// application linking libwaco.so it is the library's prefix, not the application's), when that
/// folder exists; else `fallback` (e.g. the source tree's copy, for a build tree). Looked for
/// once per process and name.
std::string shipped_dir(const std::string& name, const std::string& fallback);

/// An exclusive advisory lock on a file (flock), e.g. the CPU lock that measuring programs share
/// (`collect --cpu-lock`, `ablate --cpu-lock`) so that two timing runs never share the cores. An
/// empty path makes a lock that does nothing. The file is created when missing.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  /// Waits for the lock; Error on failure.
  void lock();
  /// Takes the lock if no other process holds it (true; also for an empty path), else false at
  /// once; Error on failure.
  bool try_lock();
  void unlock();
  /// Keeps the lock until the process exits (the descriptor is never closed).
  void hold_until_exit() { fd_ = -1; }

 private:
  /// flock(LOCK_EX), waiting or not (then false when another process holds it); EINTR retried.
  bool acquire(bool wait);
  std::string path_;
  int fd_ = -1;
};

/// A private temporary folder ($TMPDIR or /tmp, "<prefix>-XXXXXX"), removed with its contents on
/// destruction. Throws Error (hint: set TMPDIR) when it cannot be made; `purpose` completes
/// "cannot create a temporary folder for ...".
class TempDir {
 public:
  TempDir(const std::string& prefix, const std::string& purpose);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace waco::kernels
