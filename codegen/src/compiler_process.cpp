// Running the C++ compiler (compiler.hpp): the compiler runs without a shell (no quoting problems
// or injection), in a new process group so that a timeout can SIGKILL the driver together with
// cc1plus/as/ld. Its output is read through a pipe with poll(), which also implements the timeout.
// The group is led by a small guard process (a fork of the caller that never returns to its code)
// which starts the compiler and waits for it: when the caller dies, even by SIGKILL (a measuring
// child ended by its supervisor while it compiles), the guard is sent SIGTERM (PR_SET_PDEATHSIG)
// and kills its whole group, so that no compiler process outlives the process that wanted its
// output. Also here: what a run's outcome means (describe_outcome, machine_failure) and the
// compiler's version line that the cache key holds, remembered per compiler name
// (remembered_compiler_version, compiler_version).
#include "compiler_internal.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/kernels/context.hpp"
#include "waco/kernels/file_stamp.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"

extern char** environ;

namespace waco::codegen {

using namespace detail;

namespace {

/// The guard's SIGTERM handler.
void compiler_guard_on_term(int) {
  ::kill(0, SIGKILL);  // the guard's own process group: the compiler's processes and the guard
}

/// Writes errno to fd (the exec-error pipe) and exits; async-signal-safe.
[[noreturn]] void report_errno_and_exit(int fd, int err) {
  while (::write(fd, &err, sizeof err) < 0 && errno == EINTR) {
  }
  ::_exit(127);
}

/// The guard, in a child forked from run_process: everything it calls is async-signal-safe (the
/// caller may have other threads). It leads a new process group, dies with the caller's thread
/// (PR_SET_PDEATHSIG: SIGTERM, whose handler kills the group), starts the compiler with stdin from
/// /dev/null and stdout + stderr into `out_fd`, waits for it and ends as it ended (its exit
/// status, or the same signal), so that the caller sees the compiler's outcome. An exec failure's
/// errno goes to `err_fd` (close-on-exec: at a successful exec the caller reads end of file). All
/// signals are blocked on entry.
[[noreturn]] void compiler_guard(pid_t caller, char* const* argv, int out_fd, int err_fd) {
  ::setpgid(0, 0);
  struct sigaction on_term {};
  on_term.sa_handler = compiler_guard_on_term;
  ::sigemptyset(&on_term.sa_mask);
  ::sigaction(SIGTERM, &on_term, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != caller) ::_exit(127);  // the caller ended before the line above
  // The descriptors: 0 /dev/null, 1 and 2 the output pipe, 3 the exec-error pipe; no other (the
  // caller's descriptors, close-on-exec ones too, are not kept open by a process that does not exec).
  const int out = ::fcntl(out_fd, F_DUPFD, 10);
  const int err = ::fcntl(err_fd, F_DUPFD, 10);
  const int null = ::open("/dev/null", O_RDONLY);
  if (out < 0 || err < 0 || null < 0) {
    const int e = errno;
    report_errno_and_exit(err < 0 ? err_fd : err, e);
  }
  ::dup2(null, 0);
  ::dup2(out, 1);
  ::dup2(out, 2);
  ::dup2(err, 3);
  ::fcntl(3, F_SETFD, FD_CLOEXEC);
  if (::syscall(SYS_close_range, 4u, ~0u, 0u) != 0) {
    struct rlimit files {};
    ::getrlimit(RLIMIT_NOFILE, &files);
    const int limit = files.rlim_cur == RLIM_INFINITY || files.rlim_cur > 65536
                          ? 65536 : static_cast<int>(files.rlim_cur);
    for (int fd = 4; fd < limit; ++fd) ::close(fd);
  }
  const pid_t compiler = ::fork();
  if (compiler < 0) report_errno_and_exit(3, errno);
  if (compiler == 0) {
    // The compiler: default dispositions (an ignored SIGPIPE or SIGINT of the caller would stay
    // ignored across exec), no signal blocked; it dies if the guard does (even by SIGKILL).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigemptyset(&dfl.sa_mask);
    for (const int sig : {SIGPIPE, SIGINT, SIGTERM}) ::sigaction(sig, &dfl, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvp(argv[0], argv);
    report_errno_and_exit(3, errno);
  }
  for (const int fd : {0, 1, 2, 3}) ::close(fd);
  sigset_t term;
  ::sigemptyset(&term);
  ::sigaddset(&term, SIGTERM);
  ::sigprocmask(SIG_UNBLOCK, &term, nullptr);  // from here the caller's end kills the group
  int status = 0;
  while (::waitpid(compiler, &status, 0) != compiler)
    if (errno != EINTR) ::_exit(127);
  if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
  // Killed by a signal: end by the same signal (without a core file).
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  const struct rlimit no_core {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t only;
  ::sigemptyset(&only);
  ::sigaddset(&only, sig);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::kill(::getpid(), sig);
  ::_exit(128 + sig);
}

/// How often a running compiler's caller is asked whether to stop (CompilerOptions::cancelled).
constexpr int kCancelPollMs = 100;

std::string compiler_hint() {
  return "install a C++ compiler or choose another one (CompilerOptions::compiler / --compiler)";
}

}  // namespace

namespace detail {

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789_./=+:,@%^-") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::string trim_log(const std::string& log, std::size_t max_lines) {
  std::istringstream in(log);
  std::string line, out;
  std::size_t n = 0, total = 0;
  while (std::getline(in, line)) {
    ++total;
    if (n >= max_lines) continue;
    if (line.size() > 400) line = line.substr(0, 400) + " [...]";
    out += "  | " + line + "\n";
    ++n;
  }
  if (total == 0) return "  (the compiler printed nothing)\n";
  if (total > n) out += "  | ... (" + std::to_string(total - n) + " more lines)\n";
  return out;
}

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::function<bool()>& cancelled) {
  WACO_ASSERT(!argv.empty(), "run_process needs a program");
  constexpr std::size_t kMaxOutput = std::size_t{4} << 20;
  ProcessResult result;
  int fds[2] = {-1, -1}, errs[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC) != 0 || ::pipe2(errs, O_CLOEXEC) != 0) {
    const int err = errno;
    for (const int fd : {fds[0], fds[1]})
      if (fd >= 0) ::close(fd);
    throw BuildEnvironmentError("cannot create a pipe to run '" + argv[0] + "': " + errno_text(err),
                "the process may be out of file descriptors");
  }
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const pid_t caller = ::getpid();
  // No handler of the caller may run in the guard before it has its own: every signal blocked
  // across the fork (the guard unblocks what it needs).
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = ::fork();
  if (pid == 0) compiler_guard(caller, cargv.data(), fds[1], errs[1]);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ::close(fds[1]);
  ::close(errs[1]);
  if (pid < 0) {
    ::close(fds[0]);
    ::close(errs[0]);
    result.spawn_error = fork_errno;
    return result;
  }
  ::setpgid(pid, pid);  // as the guard does: the group exists before any kill(-pid) below
  // End of file at the compiler's exec; an errno when it could not start.
  int exec_errno = 0;
  ssize_t got = 0;
  do got = ::read(errs[0], &exec_errno, sizeof exec_errno);
  while (got < 0 && errno == EINTR);
  ::close(errs[0]);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    ::close(fds[0]);
    while (::waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
    }
    result.spawn_error = exec_errno != 0 ? exec_errno : ENOEXEC;
    return result;
  }

  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_seconds > 0 ? timeout_seconds : 0));
  auto remaining_ms = [&]() -> int {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return left.count() <= 0 ? 0 : static_cast<int>(std::min<long long>(left.count(), 1 << 30));
  };
  char buf[65536];
  for (;;) {
    const int wait_ms = remaining_ms();
    if (wait_ms == 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int pr = ::poll(&p, 1, cancelled ? std::min(wait_ms, kCancelPollMs) : wait_ms);
    if (cancelled && cancelled()) {
      result.cancelled = true;
      break;
    }
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) {
      if (cancelled && remaining_ms() > 0) continue;
      result.timed_out = true;
      break;
    }
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: every writer (driver and its children) has closed the pipe
    if (result.output.size() < kMaxOutput)
      result.output.append(buf, std::min<std::size_t>(static_cast<std::size_t>(n),
                                                       kMaxOutput - result.output.size()));
  }
  ::close(fds[0]);

  // The pipe is closed, or time is up; reap the process (waiting for the rest of the deadline).
  for (;;) {
    const bool kill_now = result.timed_out || result.cancelled;
    if (kill_now) ::kill(-pid, SIGKILL);
    struct rusage usage {};
    const pid_t w = ::wait4(pid, &result.status, kill_now ? 0 : WNOHANG, &usage);
    if (w == pid) {
      const auto seconds = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
      };
      result.cpu_seconds = seconds(usage.ru_utime) + seconds(usage.ru_stime);
      break;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      const int err = errno;
      throw BuildEnvironmentError("cannot wait for '" + argv[0] + "': " + errno_text(err),
                  "is SIGCHLD ignored by the host program?");
    }
    if (remaining_ms() == 0) {
      result.timed_out = true;
      continue;
    }
    kernels::await_child_exit(pid, static_cast<double>(remaining_ms()) / 1000.0);
  }
  return result;
}

std::string describe_outcome(const ProcessResult& r, double timeout_seconds) {
  if (r.timed_out) {
    std::ostringstream s;
    s << "timed out after " << timeout_seconds << " s and was killed";
    return s.str();
  }
  if (WIFEXITED(r.status)) return "exited with status " + std::to_string(WEXITSTATUS(r.status));
  if (WIFSIGNALED(r.status))
    return "was killed by signal " + std::to_string(WTERMSIG(r.status)) + " (" +
           ::strsignal(WTERMSIG(r.status)) + ")";
  return "ended with wait status " + std::to_string(r.status);
}

bool machine_failure(const ProcessResult& r) {
  if (r.timed_out) return false;
  if (WIFSIGNALED(r.status)) return true;
  for (const int e : {ENOSPC, EDQUOT, EFBIG})
    if (r.output.find(::strerror(e)) != std::string::npos) return true;
  return false;
}

bool succeeded(const ProcessResult& r) {
  return r.spawn_error == 0 && !r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
}

[[noreturn]] void throw_spawn_error(const std::string& compiler, int err,
                                    const std::vector<std::string>& argv) {
  if (err == ENOENT)
    throw BuildEnvironmentError("C++ compiler '" + compiler + "' not found" +
                    (compiler.find('/') == std::string::npos ? " on PATH" : "") +
                    " (command: " + command_line(argv) + ")",
                compiler_hint());
  throw BuildEnvironmentError("cannot run C++ compiler '" + compiler + "': " + errno_text(err) +
                  " (command: " + command_line(argv) + ")",
              compiler_hint());
}

}  // namespace detail

namespace {

nlohmann::json stamp_json(const kernels::FileStamp& s) {
  return {{"dev", static_cast<std::uint64_t>(s.dev)}, {"ino", static_cast<std::uint64_t>(s.ino)},
          {"size", static_cast<std::int64_t>(s.size)}, {"mtime_ns", s.mtime_ns}};
}

/// The first line of `compiler --version`, run.
std::string run_compiler_version(const std::string& compiler) {
  if (compiler.empty()) throw BuildEnvironmentError("the C++ compiler name is empty", compiler_hint());
  const std::vector<std::string> argv = {compiler, "--version"};
  constexpr double kVersionTimeout = 30.0;
  const ProcessResult r = run_process(argv, kVersionTimeout);
  if (r.spawn_error != 0) throw_spawn_error(compiler, r.spawn_error, argv);
  if (!succeeded(r))
    throw BuildEnvironmentError("`" + command_line(argv) + "` " + describe_outcome(r, kVersionTimeout) +
                    "; its output:\n" + trim_log(r.output),
                compiler_hint());
  std::string line = r.output.substr(0, r.output.find('\n'));
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  if (line.empty())
    throw BuildEnvironmentError("`" + command_line(argv) + "` printed no version line", compiler_hint());
  return line;
}

}  // namespace

std::string remembered_compiler_version(const std::string& compiler, const std::string& file) {
  const std::string exe = kernels::find_executable(compiler);
  const std::optional<kernels::FileStamp> stamp =
      exe.empty() ? std::nullopt : kernels::file_stamp(exe);
  if (!stamp) return run_compiler_version(compiler);  // its error, or a version not kept
  // Per name as given (the line names it: `g++ --version` and `c++ --version` of one binary
  // differ), valid while the name finds the same unchanged binary.
  nlohmann::json known = nlohmann::json::parse(kernels::read_text_file(file), nullptr, false);
  if (!known.is_object()) known = nlohmann::json::object();  // none yet, or not ours: replaced
  const nlohmann::json entry = known.value(compiler, nlohmann::json());
  const nlohmann::json version = entry.is_object() ? entry.value("version", nlohmann::json()) : nullptr;
  if (entry.is_object() && entry.value("binary", nlohmann::json()) == exe &&
      entry.value("stamp", nlohmann::json()) == stamp_json(*stamp) && version.is_string() &&
      !version.get<std::string>().empty())
    return version.get<std::string>();
  const std::string line = run_compiler_version(compiler);
  known[compiler] = {{"binary", exe}, {"stamp", stamp_json(*stamp)}, {"version", line}};
  try {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
    kernels::write_text_file(file, known.dump(1) + "\n");
  } catch (const kernels::Error&) {
    // Not kept: the next process asks the compiler again.
  }
  return line;
}

std::string compiler_version(const std::string& compiler) {
  static std::mutex mutex;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(compiler); it != cache.end()) return it->second;
  const std::string line =
      remembered_compiler_version(compiler, join_path(kernels::user_cache_dir(), "compilers.json"));
  cache.emplace(compiler, line);
  return line;
}

}  // namespace waco::codegen
