// Running another program (waco-hybrid itself, for the library's tuning and for ablate's
// pipeline runs): posix_spawn, no shell, stdin from /dev/null, stdout (and stderr unless shown
// live) into files. A process started this way does not inherit the caller's OpenMP state, which
// GNU libgomp would not survive across fork.
#pragma once

#include <string>
#include <vector>

namespace waco::kernels {

/// Runs argv (argv[0] a path) with stdout into out_path and stderr into err_path (or the
/// caller's stderr when `live_stderr`); waits and returns the exit status (128 + signal when
/// killed). Throws Error when it cannot start.
int run_process(const std::vector<std::string>& argv, const std::string& out_path,
                const std::string& err_path, bool live_stderr = false);

/// The path of the running executable (/proc/self/exe); throws Error when unreadable.
std::string self_executable();

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
