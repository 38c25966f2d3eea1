// Compile once, cache on disk, load with dlopen (see compiler.hpp for the cache layout and the
// guarantees): compile_and_load, the one path from a source to a loaded kernel (the cache
// directory, the shipped folders, a compile, the install), and the loader (LoadedLibrary). The
// cache key and directory are compile_cache.cpp's, running the compiler compiler_process.cpp's.
// Installation: source and object are written to mkstemp names in the cache directory and
// rename()d into place; rename is atomic within a filesystem, so readers see either no file or a
// complete one. Two processes racing on one key both compile and the last rename wins; the
// contents are equivalent and a process that already dlopened the earlier inode keeps it mapped.
#include "waco/codegen/compiler.hpp"

#include "compiler_internal.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "waco/kernels/error.hpp"
#include "waco/kernels/memo.hpp"

namespace waco::codegen {

using kernels::Error;

using namespace detail;

namespace {

std::atomic<std::int64_t> g_compiler_invocations{0};

std::shared_ptr<LoadedLibrary> load(const std::string& path, double& seconds) {
  // A library this process opened before is shared, not opened again: dlopen of a mapped path
  // still searches the loaded objects (an adaptive plan's nominee spent ~40 us there). Kernel
  // libraries stay mapped for the life of the process anyway (RTLD_NODELETE), so holding their
  // handles here keeps nothing else alive; a path names one kernel (its cache key).
  static kernels::Memo<std::string, std::shared_ptr<LoadedLibrary>> opened(512);
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<LoadedLibrary> lib = opened.get(path, [&] { return std::make_shared<LoadedLibrary>(path); });
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return lib;
}

}  // namespace

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

LoadedLibrary::LoadedLibrary(std::shared_ptr<const LoadedLibrary> bundle, std::string suffix)
    : handle_(bundle->handle_), path_(bundle->path_), bundle_(std::move(bundle)),
      suffix_(std::move(suffix)) {}

LoadedLibrary::~LoadedLibrary() {
  if (handle_ != nullptr && bundle_ == nullptr) ::dlclose(handle_);
}

bool LoadedLibrary::has_symbol(const std::string& name) const {
  ::dlerror();
  return ::dlsym(handle_, (name + suffix_).c_str()) != nullptr;
}

void* LoadedLibrary::symbol(const std::string& name) const {
  ::dlerror();
  void* sym = ::dlsym(handle_, (name + suffix_).c_str());
  const char* msg = ::dlerror();
  if (msg != nullptr || sym == nullptr)
    throw Error("compiled kernel '" + path_ + "' has no symbol '" + name + "'" +
                    (msg ? std::string(": ") + msg : std::string()),
                "the generated source must define it as extern \"C\"");
  return sym;
}

std::int64_t compiler_invocations() { return g_compiler_invocations.load(); }

CompileResult compile_and_load(const std::string& source, const CompilerOptions& opts) {
  CompileResult result;
  // A kernel compiled ahead of time, loaded where it is (nothing compiled or copied): from the
  // folder's bundle when it holds the kernel (one dlopen for all of them, build_kernel_bundle),
  // else its own object; false when the loader refuses both (it is then looked for further, and
  // compiled at last).
  const auto load_shipped = [&](const std::string& path, const std::string& key,
                                const std::string& bundle) {
    result.bundled = false;
    if (!bundle.empty()) {
      try {
        auto view = std::make_shared<LoadedLibrary>(load(bundle, result.load_seconds), "_" + key);
        if (view->has_symbol("waco_kernel")) {
          result.library = std::move(view);
          result.bundled = true;
        }
      } catch (const Error&) {
        // A damaged bundle: the kernel's own object below.
      }
    }
    if (!result.bundled) {
      try {
        result.library = load(path, result.load_seconds);
      } catch (const Error&) {
        return false;
      }
    }
    result.cache_hit = true;
    result.shipped = true;
    result.key = key;
    result.library_path = result.bundled ? bundle : path;
    result.source_path = path.substr(0, path.size() - 3) + ".cpp";
    return true;
  };
  // By a compiler its folder records: without running this machine's compiler, or needing one.
  if (const ShippedFind found = shipped_by_recorded_compiler(source, opts);
      !found.path.empty() && load_shipped(found.path, found.key, found.bundle))
    return result;
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
  // Compiled ahead of time under this machine's compiler's key.
  if (const std::string shipped = shipped_library(result.key);
      !shipped.empty() && load_shipped(shipped, result.key, {}))
    return result;

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
  result.compile_cpu_seconds = r.cpu_seconds;
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
