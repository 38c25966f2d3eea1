// Compile generated C++ once, cache the shared object on disk, load it with dlopen
// (ARCHITECTURE.md section 6; issue 4, "Code generation").
//
// compile_and_load() turns a self-contained C++ source into a loaded shared library. The library
// is cached in a directory keyed by a SHA-256 digest (first 128 bits, hex) of the source, the
// compiler's version line, the flags, a cache format version and, when a flag asks for "native"
// code, the host CPU's identity, so a compile is paid once per machine and a second call (in this
// or any later process) only dlopens. The cache directory holds, per kernel:
//   <key>.cpp  the source (for users to read; it is also what the compiler is given),
//   <key>.so   the shared object, present only when complete,
//   <key>.log  the compiler's output, written only when a compile failed.
// Installing is safe when several processes compile the same kernel at once: each links into a
// unique temporary (<key>.so.tmp.<pid>.XXXXXX) and rename()s it into place, which is atomic on one
// filesystem, so nobody ever dlopens a partially written file.
//
// The compiler is run without a shell (execvp with an argv), in its own process group, with
// its stdout+stderr captured and a timeout that kills the whole group. The group is led by a guard
// process that dies with the calling thread (PR_SET_PDEATHSIG) and kills the group as it does, so
// that no compiler outlives a caller that was killed, even by SIGKILL (a measuring child whose
// supervisor ended it while it compiled). Any failure (non-zero exit,
// signal, timeout, compiler not found, unusable cache directory, dlopen/dlsym error) throws
// waco::kernels::Error with the full command line and the compiler's log.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "waco/kernels/error.hpp"

namespace waco::codegen {

/// The version of the cache layout and key derivation; bump it to invalidate every cached kernel.
inline constexpr int kCompilerCacheFormatVersion = 1;

/// How to compile a kernel. Every field takes part in the cache key except cache_dir and
/// timeout_seconds.
struct CompilerOptions {
  /// The C++ compiler, looked up on PATH when it has no '/'.
  std::string compiler = "c++";
  /// Flags given to the compiler before "-o <output> <source>"; must produce a shared object.
  /// With WACO_KERNEL_NO_SLP (cmake/CompilerChecks.cmake found the compiler miscompiling constant
  /// vectors with AVX-512), also -fno-tree-slp-vectorize.
  std::vector<std::string> flags = {"-O3", "-march=native", "-fopenmp", "-std=c++17", "-shared",
                                    "-fPIC"
#ifdef WACO_KERNEL_NO_SLP
                                    , "-fno-tree-slp-vectorize"
#endif
  };
  /// Where compiled kernels live; empty means default_cache_dir(). Created (mkdir -p) on demand.
  std::string cache_dir;
  /// Wall-clock limit of one compiler run, in seconds; on expiry the compiler is killed and
  /// compile_and_load throws.
  double timeout_seconds = 120.0;
  /// Asked about every 0.1 s while the compiler runs (not part of the key; unset: never): once
  /// it returns true the compiler is killed and compile_and_load throws kernels::Cancelled.
  std::function<bool()> cancelled;
};

/// Read-only folders of kernels compiled ahead of time, consulted by compile_and_load and in_cache
/// after the cache directory: a kernel whose <key>.so is in one is loaded from there, with
/// nothing compiled or copied (the key holds the compiler, flags and CPU, so a folder built for
/// another machine or compiler simply never matches). `waco-hybrid precompile` fills one at
/// build time (<build>/share/waco-hybrid/kernels, installed as <prefix>/share/waco-hybrid/kernels):
/// the schedules the tool nominates most often, so that a tune or an adaptive plan mostly never
/// waits for a compiler. $WACO_SHIPPED_KERNELS replaces the default (kernels::shipped_dir
/// ("kernels"), found beside the module): ':'-separated folders, or "none" for none.
std::vector<std::string> shipped_kernel_dirs();

/// The per-user default cache directory: $XDG_CACHE_HOME/waco-hybrid/kernels, else
/// $HOME/.cache/waco-hybrid/kernels, else /tmp/waco-hybrid-<uid>/kernels (empty variables count
/// as unset). Only computes the path; nothing is created.
std::string default_cache_dir();

/// A shared object loaded with dlopen(RTLD_NOW | RTLD_LOCAL), closed on destruction. Hold it in a
/// shared_ptr for as long as any function pointer taken from it is in use.
class LoadedLibrary {
 public:
  /// Loads `path`. Throws kernels::Error with dlerror()'s message when the loader refuses it.
  explicit LoadedLibrary(const std::string& path);
  /// One kernel of a loaded bundle (build_kernel_bundle): symbol(name) finds `name` + `suffix`
  /// in it (the bundle's names of that kernel); the bundle stays loaded while the view lives.
  LoadedLibrary(std::shared_ptr<const LoadedLibrary> bundle, std::string suffix);
  ~LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;

  /// The address of the symbol `name` (an extern "C" name). Throws kernels::Error when it is
  /// missing; never returns null.
  void* symbol(const std::string& name) const;
  /// Whether the library defines `name` (symbol() without the error).
  bool has_symbol(const std::string& name) const;
  /// The path the library was loaded from.
  const std::string& path() const noexcept { return path_; }

 private:
  void* handle_ = nullptr;
  std::string path_;
  std::shared_ptr<const LoadedLibrary> bundle_;  ///< a view's bundle (which owns handle_)
  std::string suffix_;                           ///< a view's suffix of every name
};

/// A kernel that could not be built for a reason of the machine, not of the kernel: the compiler
/// is missing, cannot run or was killed by a signal (not by the compile timeout), or the kernel
/// cache cannot be written (disk full, quota, permissions). The same source may build once the
/// cause is gone, so a search records no result for it (heuristics/README.md). A compiler that
/// rejects the source, or overruns the timeout, throws a plain kernels::Error.
class BuildEnvironmentError : public kernels::Error {
 public:
  using kernels::Error::Error;
};

/// What compile_and_load did.
struct CompileResult {
  std::shared_ptr<LoadedLibrary> library;
  bool cache_hit = false;        ///< true: <key>.so was present and only loaded
  bool shipped = false;          ///< the hit came from a shipped folder (shipped_kernel_dirs)
  /// The shipped folder's bundle served it (build_kernel_bundle; library_path is the bundle's).
  bool bundled = false;
  double compile_seconds = 0.0;  ///< wall time of the compiler run; 0 on a cache hit
  /// User + system CPU time of the compiler's processes (what the run took from the machine's
  /// cores, beside an application's calls too); 0 on a cache hit.
  double compile_cpu_seconds = 0.0;
  double load_seconds = 0.0;     ///< wall time of dlopen
  std::string key;               ///< the cache key (32 hex digits)
  std::string library_path;      ///< <cache_dir>/<key>.so, or the shipped folder's (or its bundle)
  std::string source_path;       ///< <cache_dir>/<key>.cpp (absent on a hit from a cache that
                                 ///< lost it; the .so alone is enough)
};

/// The cache key of `source` compiled with `opts` (runs `compiler --version` once per compiler
/// per process). Throws kernels::Error when the compiler cannot be run.
std::string cache_key(const std::string& source, const CompilerOptions& opts = {});

/// Whether the cache or a shipped folder holds `source` compiled with `opts` (compile_and_load
/// would only load it). A shipped folder's kernels are found without the compiler
/// (record_shipped_compiler); else throws kernels::Error when the compiler cannot be run (the
/// key names its version).
bool in_cache(const std::string& source, const CompilerOptions& opts = {});

/// Records in `dir`, a folder of kernels compiled ahead of time with `opts` (shipped_kernel_dirs;
/// `waco-hybrid precompile` fills it), the version line of the compiler that compiled them
/// (`<dir>/compilers.txt`, one line each, kept across runs). compile_and_load and in_cache then
/// find the folder's kernels by that version without running the compiler of the machine they
/// run on, nor needing one: on an application's machine with another compiler or none, and in
/// a process's first plan with an empty user cache (`c++ --version` took 15-17 ms on the Zen 5
/// VMs). The flags stay part of the key (and the CPU's identity with -march=native).
void record_shipped_compiler(const std::string& dir, const CompilerOptions& opts);

/// The shipped folder's bundle: every kernel of the folder in one shared object, so that a process
/// opens one library for all the shipped kernels it uses (a dlopen took 60-440 us on the 2-vCPU
/// VMs, most of an adaptive plan's kernel loads: codegen/README.md, "Kernels compiled ahead of
/// time"). `<dir>/bundle.so` holds the kernel of each `<key>.cpp` the folder holds beside its
/// `<key>.so`, its extern "C" names (waco_kernel, waco_constant_split, waco_stream_probe_lines)
/// suffixed with `_<key>` and the rest of its source in a namespace of its own (no two kernels'
/// names meet); `<dir>/bundle.txt` lists the keys. compile_and_load (and in_cache) look a
/// shipped kernel up there first and load it as a view of the bundle (LoadedLibrary), or from
/// its own `<key>.so` when the bundle is absent, refused by the loader or lacks it.
inline constexpr const char* kBundleLibrary = "bundle.so";
inline constexpr const char* kBundleIndex = "bundle.txt";

struct BundleResult {
  std::size_t kernels = 0;  ///< kernels in the bundle
  double seconds = 0.0;     ///< wall time of building it
  std::string path;         ///< <dir>/bundle.so
};

/// Builds `dir`'s bundle (above) with `opts`' compiler and flags (the folder's kernels were
/// compiled with them: record_shipped_compiler), `jobs` compilers at once, replacing an earlier
/// one atomically. Throws kernels::Error (BuildEnvironmentError for the machine's failures) with
/// the compiler's command line and output when a compile or the link fails; the folder's own
/// kernels are left as they were.
BundleResult build_kernel_bundle(const std::string& dir, const CompilerOptions& opts, int jobs = 1);

/// Compiles `source` to a shared object unless the cache already holds it, then loads it.
/// A cached object that the loader refuses (e.g. a system library it needs changed) is compiled
/// again once. Throws kernels::Error on any failure (BuildEnvironmentError for the machine's): the message of a compiler failure holds the
/// command line and the first lines of the compiler's output, and the full output is kept in
/// <key>.log. Thread-safe, and safe across processes sharing the cache directory.
CompileResult compile_and_load(const std::string& source, const CompilerOptions& opts = {});

/// The first line of `compiler --version`, cached per compiler name for the life of the process,
/// and across processes in <user cache>/compilers.json (remembered_compiler_version). Throws
/// kernels::Error when the compiler is missing or fails.
std::string compiler_version(const std::string& compiler);

/// The first line of `compiler --version` as `file` remembers it for that name while the name
/// finds the same binary (as exec finds it, links resolved) unchanged (device, inode, size, mtime);
/// else run, and kept there (written atomically; a file that cannot be written or read is
/// ignored). A process's first kernel otherwise ran the compiler (5-15 ms on the development VM)
/// before it could look in the kernel cache. A wrapper script whose compiler changes behind it
/// keeps its old line: the kernel cache then serves the old compiler's objects.
std::string remembered_compiler_version(const std::string& compiler, const std::string& file);

/// How many times this process ran a compiler to build a kernel (not counting --version queries).
/// Lets tests prove that a cache hit did not compile.
std::int64_t compiler_invocations();

}  // namespace waco::codegen
