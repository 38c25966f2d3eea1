// Private to codegen/src/compiler.cpp, compile_cache.cpp, compiler_process.cpp and
// kernel_bundle.cpp: what the parts of compiling a kernel share (compiler.hpp is the public
// header). The parts:
//   compiler_process.cpp  running the compiler without a shell (its guard process, timeout and
//                         cancelling), what its outcome means, and its remembered version line
//   compile_cache.cpp     the cache key (SHA-256), the cache directory and its atomic installs,
//                         the shipped folders (cache_key, default_cache_dir, shipped_kernel_dirs,
//                         in_cache)
//   compiler.cpp          compile_and_load, and loading with dlopen (LoadedLibrary)
//   kernel_bundle.cpp     a shipped folder's bundle of all its kernels (build_kernel_bundle)
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "waco/codegen/compiler.hpp"

namespace waco::codegen::detail {

// ---------------------------------------------------------------------------------------------
// Small helpers.

inline std::string errno_text(int err) { return std::strerror(err); }

inline std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

/// Whether `path` is a regular file (links followed).
bool is_regular_file(const std::string& path);

/// A shell-readable rendering of argv (for messages only; nothing is ever run through a shell).
std::string command_line(const std::vector<std::string>& argv);

/// The first `max_lines` lines of a log, each cut at 400 characters, with a note of what was left.
std::string trim_log(const std::string& log, std::size_t max_lines = 40);

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
int make_temp(const std::string& prefix, std::string& name);

/// Writes `content` to `final_path` atomically: a temporary in the same directory, then rename.
void write_file_atomically(const std::string& final_path, const std::string& content, mode_t mode);

/// mkdir -p with an error naming the component that failed.
void make_directories(const std::string& dir);

/// Whether this CPU has the SHA extensions (SHA-NI) the cache key's SHA-256 uses when it can.
bool sha_ni_available();
/// SHA-256 of `data` in hex, as the cache key computes it; `accelerated` false: the portable
/// code alone (tests compare the two).
std::string sha256_hex(const std::string& data, bool accelerated = true);

// ---------------------------------------------------------------------------------------------
// Running a process without a shell.

struct ProcessResult {
  int spawn_error = 0;  ///< errno of fork or of the compiler's exec; 0 when it started
  bool timed_out = false;
  bool cancelled = false;  ///< killed because `cancelled` asked for it
  int status = 0;  ///< waitpid status
  /// User + system CPU time of the compiler's processes (the guard's rusage from wait4: the
  /// guard has reaped the driver, which reaped cc1plus, as and ld); 0 when it did not start.
  double cpu_seconds = 0.0;
  std::string output;
};

/// Runs argv[0] (PATH lookup) with stdin from /dev/null and stdout+stderr captured, in its own
/// process group (led by compiler_guard, which dies with the calling thread and takes the group
/// with it); kills the group after `timeout_seconds`, or once `cancelled` (asked every
/// kCancelPollMs) returns true. Output beyond 4 MiB is discarded.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::function<bool()>& cancelled = {});

/// "exited with status 1", "was killed by signal 11 (Segmentation fault)", "timed out ...".
std::string describe_outcome(const ProcessResult& r, double timeout_seconds);

/// Whether a failed compiler run failed for a reason of the machine, not of the source: the
/// compiler was killed by a signal it was not sent by the timeout (the OOM killer, a user), or it
/// could not write its output (its message holds the C library's text of ENOSPC, EDQUOT or
/// EFBIG: the assembler and linker print strerror).
bool machine_failure(const ProcessResult& r);

/// Whether the process started, was not timed out and exited with status 0.
bool succeeded(const ProcessResult& r);

/// Throws the BuildEnvironmentError of a compiler that could not be started (`err`: its errno).
[[noreturn]] void throw_spawn_error(const std::string& compiler, int err,
                                    const std::vector<std::string>& argv);

// ---------------------------------------------------------------------------------------------
// The cache directory.

/// CompilerOptions::cache_dir, else default_cache_dir().
std::string resolve_cache_dir(const CompilerOptions& opts);

/// The /tmp fallback is a shared directory: make sure its per-user top is ours and not a link.
void check_tmp_fallback(const std::string& dir);

/// Removes the temporaries "<key>.<ext>.tmp.<pid>.XXXXXX" that a process which no longer runs left
/// in the cache (a measuring child killed while compiling: its TempFileGuard never ran). This
/// key's, and the first time this process compiles into `dir` every key's (a kernel whose compile
/// a kill cut short may never be compiled again: a rerun that reuses its measurement); only of
/// pids that do not exist: a temporary of a live process is its work.
void remove_stale_temporaries(const std::string& dir, const std::string& key);

/// <dir>/<key>.so of the first shipped folder holding the key, or "".
std::string shipped_library(const std::string& key);
/// A shipped folder's kernel of `source` under one of the compiler versions the folder records
/// (record_shipped_compiler), without running the compiler: its path and key, or empty; and the
/// folder's bundle when that lists the key (build_kernel_bundle; the kernel's own <key>.so is
/// then not looked at).
struct ShippedFind {
  std::string path, key, bundle;
};
ShippedFind shipped_by_recorded_compiler(const std::string& source, const CompilerOptions& opts);

}  // namespace waco::codegen::detail
