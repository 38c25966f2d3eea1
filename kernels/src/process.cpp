#include "waco/kernels/process.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "waco/kernels/error.hpp"
#include "waco/kernels/memo.hpp"

extern char** environ;

namespace waco::kernels {

bool await_child_exit(pid_t pid, double seconds) {
  using clock = std::chrono::steady_clock;
  const auto until = clock::now() + std::chrono::duration<double>(std::max(0.0, seconds));
  const auto ended = [pid] {
    siginfo_t info{};
    for (;;) {
      info.si_pid = 0;
      if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0)
        return info.si_pid == pid;
      if (errno != EINTR) return true;  // no such child: nothing to wait for
    }
  };
  int fd = -1;
#ifdef SYS_pidfd_open
  fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#endif
  double nap_s = 50e-6;
  bool done = ended();
  while (!done) {
    const double left = std::chrono::duration<double>(until - clock::now()).count();
    if (left <= 0) break;
    if (fd >= 0) {  // readable once the process has ended
      pollfd p{fd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::ceil(std::min(left, 1.0) * 1000.0)));
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(nap_s, left)));
      nap_s = std::min(2 * nap_s, 2e-3);
    }
    done = ended();
  }
  if (fd >= 0) ::close(fd);
  return done;
}

int run_process(const std::vector<std::string>& argv, const std::string& out_path,
                const std::string& err_path, bool live_stderr, double timeout_s,
                const volatile std::sig_atomic_t* stop) {
  WACO_ASSERT(!argv.empty(), "run_process without a program");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (!live_stderr)
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The environment with kParentPidVariable set to this process.
  const std::string parent_var = std::string(kParentPidVariable) + "=";
  std::vector<std::string> env_text;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e)
    if (std::strncmp(*e, parent_var.c_str(), parent_var.size()) != 0) env_text.emplace_back(*e);
  env_text.push_back(parent_var + std::to_string(::getpid()));
  std::vector<char*> env;
  for (std::string& e : env_text) env.push_back(e.data());
  env.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (stop != nullptr) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw Error("cannot start " + argv[0] + ": " + std::strerror(rc));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  bool forwarded = false;
  for (;;) {
    if (stop != nullptr && *stop != 0 && !forwarded) {
      ::kill(pid, SIGTERM);
      forwarded = true;
    }
    const pid_t w = ::waitpid(pid, &status, timeout_s > 0 || stop != nullptr ? WNOHANG : 0);
    if (w == pid) break;
    if (w < 0 && errno != EINTR)
      throw Error("waiting for " + argv[0] + ": " + std::strerror(errno));
    if (timeout_s > 0 && std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      throw Error(argv[0] + " did not finish within " +
                  std::to_string(static_cast<int>(timeout_s)) + " s (killed)");
    }
    // Woken as it ends; every 50 ms to forward a stop, or at the deadline.
    if (w == 0) {
      double slice = stop != nullptr ? 0.05 : 3600.0;
      if (timeout_s > 0) {
        const auto left = deadline - std::chrono::steady_clock::now();
        slice = std::min(slice, std::chrono::duration<double>(left).count());
      }
      await_child_exit(pid, std::max(slice, 0.0));
    }
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

void die_with_parent_from_environment() {
  const char* text = std::getenv(kParentPidVariable);
  if (text == nullptr) return;
  const long parent = std::strtol(text, nullptr, 10);
  ::unsetenv(kParentPidVariable);
  if (parent <= 1) return;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != static_cast<pid_t>(parent)) {
    std::fprintf(stderr, "error: the process that started this one (pid %ld) has ended\n", parent);
    std::exit(1);
  }
}

FileLock::FileLock(const std::string& path) : path_(path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot open the CPU lock " + path + ": " + std::strerror(errno));
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

bool FileLock::acquire(bool wait) {
  if (fd_ < 0) return true;
  while (::flock(fd_, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0) {
    if (!wait && errno == EWOULDBLOCK) return false;
    if (errno != EINTR) throw Error("cannot lock " + path_ + ": " + std::strerror(errno));
  }
  return true;
}

void FileLock::lock() { acquire(true); }

bool FileLock::try_lock() { return acquire(false); }

void FileLock::unlock() {
  if (fd_ >= 0) ::flock(fd_, LOCK_UN);
}

std::string shipped_dir(const std::string& name, const std::string& fallback) {
  // The module holding this function: the waco-hybrid executable, or libwaco.so inside an
  // application (whose /proc/self/exe is the application's).
  namespace fs = std::filesystem;
  // Where the module is, once a process (canonical() reads every component's link: ~0.1 ms, and
  // every plan asks for its model's folder); empty when it cannot be found.
  static const fs::path module = [] {
    Dl_info info{};
    std::error_code ec;
    if (::dladdr(reinterpret_cast<void*>(&shipped_dir), &info) == 0 || info.dli_fname == nullptr)
      return fs::path();
    fs::path m = fs::canonical(fs::path(info.dli_fname), ec);
    if (ec) m = fs::read_symlink("/proc/self/exe", ec);
    return ec ? fs::path() : m;
  }();
  // Once per process and name: the installed folders are there when the process starts or not
  // at all (two stat calls a kernel looked for, ~10 us, in every nominee of an adaptive plan).
  static Memo<std::string, std::string> found(64);
  return found.get(name + '\0' + fallback, [&] {
    std::error_code ec;
    if (!module.empty()) {
      // <prefix>/bin/x, <prefix>/lib/libwaco.so, or <prefix>/libexec/waco-hybrid/worker.
      fs::path root = module.parent_path().parent_path();
      for (int up = 0; !ec && up < 2; ++up, root = root.parent_path()) {
        const fs::path installed = root / "share" / "waco-hybrid" / name;
        if (fs::is_directory(installed, ec)) return installed.string();
      }
    }
    return fallback;
  });
}

bool executable_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

std::string find_executable(const std::string& name) {
  namespace fs = std::filesystem;
  std::string exe;
  if (name.find('/') != std::string::npos) {
    if (executable_file(name)) exe = name;
  } else if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (const char* d = path; exe.empty() && *d != '\0';) {
      const char* end = std::strchr(d, ':');
      const std::string dir(d, end != nullptr ? end : d + std::strlen(d));
      if (!dir.empty() && executable_file(dir + "/" + name)) exe = dir + "/" + name;
      d = end != nullptr ? end + 1 : d + std::strlen(d);
    }
  }
  if (exe.empty()) return {};
  std::error_code ec;
  const fs::path real = fs::canonical(exe, ec);
  return ec ? std::string() : real.string();
}

std::string self_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the running executable (/proc/self/exe): " + ec.message());
  // A rebuilt executable: the link names the old file " (deleted)"; the new one is at the path.
  std::string path = p.string();
  const std::string deleted = " (deleted)";
  if (path.size() > deleted.size() &&
      path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0)
    path.resize(path.size() - deleted.size());
  return path;
}

TempDir::TempDir(const std::string& prefix, const std::string& purpose) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw Error("cannot create a temporary folder for " + purpose + " (" + pattern +
                    "): " + std::strerror(errno),
                "set TMPDIR to a writable folder");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace waco::kernels
