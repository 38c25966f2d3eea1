// Compile once, cache on disk, load with dlopen (see compiler.hpp for the cache layout and the
// guarantees). Implementation notes:
// - The key is SHA-256 (FIPS 180-4, implemented below: ~50 lines, no dependency) over a
//   length-prefixed record of everything that changes the produced code; 128 bits are kept.
// - The compiler runs without a shell (no quoting problems or injection), in a new process group
//   so that a timeout can SIGKILL the driver together with cc1plus/as/ld. Its output is read
//   through a pipe with poll(), which also implements the timeout. The group is led by a small
//   guard process (a fork of the caller that never returns to its code) which starts the compiler
//   and waits for it: when the caller dies, even by SIGKILL (a measuring child ended by its
//   supervisor while it compiles), the guard is sent SIGTERM (PR_SET_PDEATHSIG) and kills its
//   whole group, so that no compiler process outlives the process that wanted its output.
// - Installation: source and object are written to mkstemp names in the cache directory and
//   rename()d into place; rename is atomic within a filesystem, so readers see either no file or a
//   complete one. Two processes racing on one key both compile and the last rename wins; the
//   contents are equivalent and a process that already dlopened the earlier inode keeps it mapped.
#include "waco/codegen/compiler.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "waco/kernels/context.hpp"
#include "waco/kernels/file_stamp.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"

#ifndef WACO_SHIPPED_KERNELS_DIR
#define WACO_SHIPPED_KERNELS_DIR ""
#endif

extern char** environ;

namespace waco::codegen {

using kernels::Error;

namespace {

// ---------------------------------------------------------------------------------------------
// SHA-256 (FIPS 180-4).

class Sha256 {
 public:
  void update(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += n;
    while (n > 0) {
      const std::size_t take = std::min(n, std::size_t{64} - fill_);
      std::memcpy(block_.data() + fill_, p, take);
      fill_ += take;
      p += take;
      n -= take;
      if (fill_ == 64) {
        compress();
        fill_ = 0;
      }
    }
  }
  void update(const std::string& s) { update(s.data(), s.size()); }

  std::array<unsigned char, 32> finish() {
    const std::uint64_t bits = total_ * 8;
    const unsigned char pad = 0x80;
    update(&pad, 1);
    const unsigned char zero = 0;
    while (fill_ != 56) update(&zero, 1);
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    update(len, 8);
    std::array<unsigned char, 32> out{};
    for (int i = 0; i < 8; ++i)
      for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<unsigned char>(h_[i] >> (24 - 8 * b));
    return out;
  }

 private:
  static std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void compress() {
    static constexpr std::uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (std::uint32_t{block_[4 * i]} << 24) | (std::uint32_t{block_[4 * i + 1]} << 16) |
             (std::uint32_t{block_[4 * i + 2]} << 8) | std::uint32_t{block_[4 * i + 3]};
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6],
                  h = h_[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t t1 =
          h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a, h_[1] += b, h_[2] += c, h_[3] += d, h_[4] += e, h_[5] += f, h_[6] += g, h_[7] += h;
  }

  std::array<std::uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> block_{};
  std::size_t fill_ = 0;
  std::uint64_t total_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Small helpers.

std::atomic<std::int64_t> g_compiler_invocations{0};

std::string errno_text(int err) { return std::strerror(err); }

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/// A shell-readable rendering of argv (for messages only; nothing is ever run through a shell).
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

/// The first `max_lines` lines of a log, each cut at 400 characters, with a note of what was left.
std::string trim_log(const std::string& log, std::size_t max_lines = 40) {
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

/// Removes a file on destruction unless released (temporaries of a failed install).
class TempFileGuard {
 public:
  explicit TempFileGuard(std::string path) : path_(std::move(path)) {}
  ~TempFileGuard() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  void release() { path_.clear(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Creates a unique file "<prefix>XXXXXX" (mkstemp) and returns its open descriptor and name.
int make_temp(const std::string& prefix, std::string& name) {
  std::string templ = prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  const int fd = ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw BuildEnvironmentError("cannot create a temporary file '" + templ + "' in the kernel cache: " +
                    errno_text(err),
                "make the cache directory writable or choose another one (CompilerOptions::"
                "cache_dir / --cache-dir)");
  }
  name.assign(buf.data());
  return fd;
}

/// Writes `content` to `final_path` atomically: a temporary in the same directory, then rename.
void write_file_atomically(const std::string& final_path, const std::string& content, mode_t mode) {
  std::string tmp;
  const int fd = make_temp(final_path + ".tmp." + std::to_string(::getpid()) + ".", tmp);
  TempFileGuard guard(tmp);
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd);
      throw BuildEnvironmentError("cannot write '" + tmp + "': " + errno_text(err), "check free space in the cache");
    }
    done += static_cast<std::size_t>(w);
  }
  ::fchmod(fd, mode);
  if (::close(fd) != 0) {
    const int err = errno;
    throw BuildEnvironmentError("cannot write '" + tmp + "': " + errno_text(err), "check free space in the cache");
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    throw BuildEnvironmentError("cannot install '" + final_path + "': " + errno_text(err),
                "make the cache directory writable or choose another one");
  }
  guard.release();
}

/// mkdir -p with an error naming the component that failed.
void make_directories(const std::string& dir) {
  const std::string hint =
      "choose another kernel cache directory (CompilerOptions::cache_dir / --cache-dir) or "
      "remove what is in the way";
  if (dir.empty()) throw BuildEnvironmentError("the kernel cache directory is an empty path", hint);
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    const std::string prefix = dir.substr(0, pos);
    if (prefix.empty() || prefix == "/") continue;
    if (::mkdir(prefix.c_str(), 0755) == 0) continue;
    const int err = errno;
    struct stat st {};
    if (::stat(prefix.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) continue;
      throw BuildEnvironmentError("cannot create the kernel cache directory '" + dir + "': '" + prefix +
                      "' exists and is not a directory",
                  hint);
    }
    throw BuildEnvironmentError("cannot create the kernel cache directory '" + dir + "': mkdir '" + prefix +
                    "': " + errno_text(err),
                hint);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    throw BuildEnvironmentError("the kernel cache directory '" + dir + "' is not writable: " + errno_text(err),
                hint);
  }
}

// ---------------------------------------------------------------------------------------------
// Running a process without a shell.

struct ProcessResult {
  int spawn_error = 0;  ///< errno of fork or of the compiler's exec; 0 when it started
  bool timed_out = false;
  bool cancelled = false;  ///< killed because `cancelled` asked for it
  int status = 0;  ///< waitpid status
  std::string output;
};

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

/// Runs argv[0] (PATH lookup) with stdin from /dev/null and stdout+stderr captured, in its own
/// process group (led by compiler_guard, which dies with the calling thread and takes the group
/// with it); kills the group after `timeout_seconds`, or once `cancelled` (asked every
/// kCancelPollMs) returns true. Output beyond 4 MiB is discarded.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::function<bool()>& cancelled = {}) {
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
    const pid_t w = ::waitpid(pid, &result.status, kill_now ? 0 : WNOHANG);
    if (w == pid) break;
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
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return result;
}

/// "exited with status 1", "was killed by signal 11 (Segmentation fault)", "timed out ...".
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

/// Whether a failed compiler run failed for a reason of the machine, not of the source: the
/// compiler was killed by a signal it was not sent by the timeout (the OOM killer, a user), or it
/// could not write its output (its message holds the C library's text of ENOSPC, EDQUOT or
/// EFBIG: the assembler and linker print strerror).
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

std::string compiler_hint() {
  return "install a C++ compiler or choose another one (CompilerOptions::compiler / --compiler)";
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

// ---------------------------------------------------------------------------------------------
// Cache key.

/// When the flags ask for host-specific code (-march=native and friends), the same flags mean
/// different code on another CPU; a cache shared across machines (e.g. an NFS home) must not hand
/// one machine's object to another. The CPU model and feature flags from /proc/cpuinfo (or
/// uname's machine when that is absent) identify the host.
const std::string& host_identity() {
  static const std::string identity = [] {
    std::string model, flags;
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line) && (model.empty() || flags.empty())) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0))
        flags = line;
    }
    utsname u{};
    std::string machine = ::uname(&u) == 0 ? u.machine : "unknown";
    return machine + "\n" + model + "\n" + flags;
  }();
  return identity;
}

void hash_field(Sha256& h, const std::string& name, const std::string& value) {
  h.update(name + " " + std::to_string(value.size()) + "\n");
  h.update(value);
  h.update("\n", 1);
}

std::string resolve_cache_dir(const CompilerOptions& opts) {
  return opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir;
}

/// The /tmp fallback is a shared directory: make sure its per-user top is ours and not a link.
void check_tmp_fallback(const std::string& dir) {
  const std::string top = "/tmp/waco-hybrid-" + std::to_string(::getuid());
  if (dir.rfind(top + "/", 0) != 0) return;
  struct stat st {};
  if (::lstat(top.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid())
    throw BuildEnvironmentError("the kernel cache directory '" + top +
                    "' is not a directory owned by this user (or is a symbolic link)",
                "set XDG_CACHE_HOME or HOME, or choose a cache directory (--cache-dir)");
}

/// Removes the temporaries "<key>.<ext>.tmp.<pid>.XXXXXX" that a process which no longer runs left
/// in the cache (a measuring child killed while compiling: its TempFileGuard never ran). Only this
/// key's, and only of pids that do not exist; a temporary of a live process is its work.
void remove_stale_temporaries(const std::string& dir, const std::string& key) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const std::string me = std::to_string(::getpid());
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(key + ".", 0) != 0) continue;
    const auto tmp = name.find(".tmp.");
    if (tmp == std::string::npos) continue;
    const auto pid_end = name.find('.', tmp + 5);
    const std::string pid = name.substr(tmp + 5, pid_end == std::string::npos ? std::string::npos
                                                                            : pid_end - tmp - 5);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid == me) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) == 0 || errno != ESRCH) continue;
    ::unlink(join_path(dir, name).c_str());
  }
  ::closedir(d);
}

std::shared_ptr<LoadedLibrary> load(const std::string& path, double& seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  auto lib = std::make_shared<LoadedLibrary>(path);
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return lib;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public API.

std::string default_cache_dir() { return join_path(kernels::user_cache_dir(), "kernels"); }

LoadedLibrary::LoadedLibrary(const std::string& path) : path_(path) {
  ::dlerror();
  // RTLD_NODELETE: a kernel library stays mapped after the last dlclose. Unmapping a library whose
  // code ran in an OpenMP parallel region crashed libgomp's pooled worker threads intermittently
  // (SIGSEGV in unmapped code, about 8 runs in 10 of a loop of prepare/run/destroy); kernels are
  // small, so keeping them mapped for the life of the process costs little.
  handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle_ == nullptr) {
    const char* msg = ::dlerror();
    throw Error("cannot load compiled kernel '" + path + "': " + (msg ? msg : "unknown dlopen error"),
                "delete the file to have it compiled again");
  }
}

LoadedLibrary::~LoadedLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

void* LoadedLibrary::symbol(const std::string& name) const {
  ::dlerror();
  void* sym = ::dlsym(handle_, name.c_str());
  const char* msg = ::dlerror();
  if (msg != nullptr || sym == nullptr)
    throw Error("compiled kernel '" + path_ + "' has no symbol '" + name + "'" +
                    (msg ? std::string(": ") + msg : std::string()),
                "the generated source must define it as extern \"C\"");
  return sym;
}

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

std::int64_t compiler_invocations() { return g_compiler_invocations.load(); }

std::string cache_key(const std::string& source, const CompilerOptions& opts) {
  Sha256 h;
  hash_field(h, "format", "waco-hybrid kernel cache v" + std::to_string(kCompilerCacheFormatVersion));
  hash_field(h, "compiler", compiler_version(opts.compiler));
  bool native = false;
  h.update("flags " + std::to_string(opts.flags.size()) + "\n");
  for (const std::string& f : opts.flags) {
    hash_field(h, "flag", f);
    native = native || f.find("native") != std::string::npos;
  }
  if (native) hash_field(h, "host", host_identity());
  hash_field(h, "source", source);
  const auto digest = h.finish();
  static const char* hex = "0123456789abcdef";
  std::string key;
  for (int i = 0; i < 16; ++i) {  // 128 bits
    key += hex[digest[i] >> 4];
    key += hex[digest[i] & 15];
  }
  return key;
}

std::vector<std::string> shipped_kernel_dirs() {
  if (const char* env = std::getenv("WACO_SHIPPED_KERNELS"); env != nullptr && *env != '\0') {
    std::vector<std::string> dirs;
    if (std::string(env) == "none") return dirs;
    std::stringstream ss(env);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) dirs.push_back(d);
    return dirs;
  }
  return {kernels::shipped_dir("kernels", WACO_SHIPPED_KERNELS_DIR)};
}

namespace {

/// <dir>/<key>.so of the first shipped folder holding the key, or "".
std::string shipped_library(const std::string& key) {
  for (const std::string& dir : shipped_kernel_dirs()) {
    const std::string path = join_path(dir, key + ".so");
    if (is_regular_file(path)) return path;
  }
  return {};
}

}  // namespace

bool in_cache(const std::string& source, const CompilerOptions& opts) {
  const std::string key = cache_key(source, opts);
  return is_regular_file(join_path(resolve_cache_dir(opts), key + ".so")) ||
         !shipped_library(key).empty();
}

CompileResult compile_and_load(const std::string& source, const CompilerOptions& opts) {
  CompileResult result;
  const std::string dir = resolve_cache_dir(opts);
  result.key = cache_key(source, opts);
  result.library_path = join_path(dir, result.key + ".so");
  result.source_path = join_path(dir, result.key + ".cpp");

  // Cache hit: the object is only ever present complete (it is renamed into place).
  if (is_regular_file(result.library_path)) {
    check_tmp_fallback(dir);
    try {
      result.library = load(result.library_path, result.load_seconds);
      result.cache_hit = true;
      return result;
    } catch (const Error&) {
      // A cached object the loader refuses (say, a library it links was upgraded or the file was
      // damaged outside our control) is rebuilt below; if the rebuilt one fails too, that error
      // is thrown.
    }
  }
  // Compiled ahead of time: loaded where it is (a refused one is compiled below, as above).
  if (const std::string shipped = shipped_library(result.key); !shipped.empty()) {
    try {
      result.library = load(shipped, result.load_seconds);
      result.cache_hit = true;
      result.shipped = true;
      result.library_path = shipped;
      result.source_path = shipped.substr(0, shipped.size() - 3) + ".cpp";
      return result;
    } catch (const Error&) {
    }
  }

  make_directories(dir);
  check_tmp_fallback(dir);
  remove_stale_temporaries(dir, result.key);
  write_file_atomically(result.source_path, source, 0644);

  std::string tmp_so;
  const int fd = make_temp(result.library_path + ".tmp." + std::to_string(::getpid()) + ".", tmp_so);
  ::close(fd);
  TempFileGuard guard(tmp_so);

  std::vector<std::string> argv;
  argv.push_back(opts.compiler);
  argv.insert(argv.end(), opts.flags.begin(), opts.flags.end());
  argv.push_back("-o");
  argv.push_back(tmp_so);
  argv.push_back(result.source_path);

  ++g_compiler_invocations;
  const auto t0 = std::chrono::steady_clock::now();
  const ProcessResult r = run_process(argv, opts.timeout_seconds, opts.cancelled);
  if (r.cancelled) throw kernels::Cancelled("compiling a kernel was stopped (asked to stop)");
  result.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.spawn_error != 0) throw_spawn_error(opts.compiler, r.spawn_error, argv);
  if (!succeeded(r)) {
    const std::string log_path = join_path(dir, result.key + ".log");
    std::string log_note = "the full log is " + log_path;
    try {
      write_file_atomically(log_path, "$ " + command_line(argv) + "\n" + r.output, 0644);
    } catch (const Error& e) {
      log_note = std::string("the log could not be saved: ") + e.what();
    }
    const std::string what = "compiling a kernel failed: `" + command_line(argv) + "` " +
                             describe_outcome(r, opts.timeout_seconds) + "; compiler output:\n" +
                             trim_log(r.output) + "(" + log_note + ")";
    const std::string hint = r.timed_out ? "raise the compile timeout or simplify the kernel"
                                         : "the generated source is " + result.source_path;
    if (machine_failure(r)) throw BuildEnvironmentError(what, hint);
    throw Error(what, hint);
  }
  // mkstemp made the file 0600 and the linker may keep that; a cache shared by a group must be
  // readable. Failing to widen it is harmless for this user, so the result is not checked.
  (void)::chmod(tmp_so.c_str(), 0755);
  if (::rename(tmp_so.c_str(), result.library_path.c_str()) != 0) {
    const int err = errno;
    throw BuildEnvironmentError("cannot install compiled kernel '" + result.library_path + "': " + errno_text(err),
                "make the cache directory writable or choose another one");
  }
  guard.release();
  ::unlink(join_path(dir, result.key + ".log").c_str());  // a stale log of an earlier failure
  result.library = load(result.library_path, result.load_seconds);
  return result;
}

}  // namespace waco::codegen
