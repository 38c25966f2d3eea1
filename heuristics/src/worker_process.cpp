// Finding and starting the measurement worker program (measure_internal.hpp): installed in
// <prefix>/<libexecdir>/waco-hybrid, found relative to the module that holds this code (so that a
// moved prefix still works), started with posix_spawn (no fork of the caller, whose threads and
// OpenMP state the worker must not inherit).
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "measure_internal.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"

extern char** environ;

namespace waco::heuristics::detail {

namespace fs = std::filesystem;
using kernels::Error;
using kernels::executable_file;

namespace {

constexpr const char* kProgram = "waco-measure-worker";
constexpr const char* kInstalledIn = "<prefix>/" WACO_LIBEXEC_SUBDIR;

/// The absolute path of the module (libwaco.so or an executable) that holds this code; empty
/// when the loader gives none (the main program may be named by a relative argv[0]).
std::string this_module() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&find_measure_worker), &info) == 0 ||
      info.dli_fname == nullptr || info.dli_fname[0] != '/')
    return {};
  return info.dli_fname;
}

/// The path the running program was started from (/proc/self/exe). When the file has been
/// replaced since (a rebuild or an upgrade under a long collect), the kernel names the old one
/// "<path> (deleted)": the path is still where the new build lives.
std::string running_program() {
  std::error_code ec;
  std::string p = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) return {};
  const std::string deleted = " (deleted)";
  if (p.size() > deleted.size() && p.compare(p.size() - deleted.size(), deleted.size(), deleted) == 0)
    p.resize(p.size() - deleted.size());
  return p;
}

}  // namespace

std::string find_measure_worker() {
  if (const char* env = std::getenv("WACO_MEASURE_WORKER"); env != nullptr && *env != '\0') {
    if (executable_file(env)) return env;
    throw Error(std::string("WACO_MEASURE_WORKER=") + env + " is not an executable file",
                std::string("unset it to use the installed ") + kProgram + " (in " +
                    kInstalledIn + "), or point it at one");
  }
  std::vector<fs::path> bases;
  for (const std::string& module : {this_module(), running_program()}) {
    if (module.empty()) continue;
    std::error_code ec;
    const fs::path real = fs::canonical(module, ec);  // resolves symlinks
    if (ec) continue;
    if (std::find(bases.begin(), bases.end(), real.parent_path()) == bases.end())
      bases.push_back(real.parent_path());
  }
  // As installed (from bin/ or lib/), and as in the build tree (a folder per library, the worker
  // in <build>/libexec/waco-hybrid).
  std::vector<std::string> tried;
  for (const fs::path& base : bases)
    for (const char* rel : {WACO_BIN_TO_LIBEXEC, WACO_LIB_TO_LIBEXEC, "../libexec/waco-hybrid"}) {
      const std::string p = (base / rel / kProgram).lexically_normal().string();
      if (std::find(tried.begin(), tried.end(), p) != tried.end()) continue;
      tried.push_back(p);
      if (executable_file(p)) return p;
    }
  std::string looked;
  for (const std::string& p : tried) looked += (looked.empty() ? "" : ", ") + p;
  throw Error(std::string("cannot find ") + kProgram + ", the program that measures candidates " +
                  "(looked for " + (looked.empty() ? std::string("nothing: no module path") : looked) +
                  ")",
              std::string("install waco-hybrid with `cmake --install`, which puts it in ") +
                  kInstalledIn + ", or set WACO_MEASURE_WORKER to its path");
}

std::vector<std::string> worker_environment(const char* const* env) {
  constexpr std::string_view kTunables = "GLIBC_TUNABLES=";
  constexpr std::string_view kHugePages = "glibc.malloc.hugetlb=1";
  const auto is_tunables = [&](const std::string& var) { return var.rfind(kTunables, 0) == 0; };
  std::vector<std::string> out;
  bool caller_set = false;
  for (const char* const* e = env; e != nullptr && *e != nullptr; ++e) {
    out.emplace_back(*e);
    caller_set = caller_set || (is_tunables(out.back()) &&
                                out.back().find("glibc.malloc.hugetlb=") != std::string::npos);
  }
  if (caller_set) return out;
  const auto first = std::find_if(out.begin(), out.end(), is_tunables);
  if (first == out.end())
    out.push_back(std::string(kTunables) + std::string(kHugePages));
  else
    *first += (first->size() > kTunables.size() ? ":" : "") + std::string(kHugePages);
  return out;
}

pid_t spawn_worker(const std::string& path, int sock) {
  // The socket becomes fd 3. dup2 onto itself would keep its close-on-exec flag: move it first.
  int fd = sock, moved = -1;
  if (sock == 3) {
    moved = ::fcntl(sock, F_DUPFD_CLOEXEC, 4);
    if (moved < 0)
      throw Error(std::string("cannot start the measurement worker: fcntl: ") + std::strerror(errno));
    fd = moved;
  }
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, fd, 3);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Nothing of the caller's but 0-2 and the socket, even descriptors it opened without
  // close-on-exec (this library's own all have it).
  ::posix_spawn_file_actions_addclosefrom_np(&actions, 4);
#endif
  // Its own process group from the start (worker_main sets it too, for a forked worker): Ctrl-C
  // in the terminal stops the caller, which then closes the socket, never the worker.
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  ::posix_spawnattr_setpgroup(&attr, 0);
  const std::string parent = std::to_string(::getpid());
  const char* argv[] = {path.c_str(), "--socket-fd", "3", "--parent", parent.c_str(), nullptr};
  const std::vector<std::string> env = worker_environment(environ);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (const std::string& var : env) envp.push_back(const_cast<char*>(var.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, path.c_str(), &actions, &attr,
                               const_cast<char* const*>(argv), envp.data());
  ::posix_spawnattr_destroy(&attr);
  ::posix_spawn_file_actions_destroy(&actions);
  if (moved >= 0) ::close(moved);
  if (rc != 0)
    throw Error("cannot start the measurement worker " + path + ": " + std::strerror(rc),
                rc == EAGAIN || rc == ENOMEM
                    ? "check the process limit (ulimit -u) and free memory"
                    : std::string("reinstall waco-hybrid, or set WACO_MEASURE_WORKER to a working ") +
                          kProgram);
  return pid;
}

}  // namespace waco::heuristics::detail
