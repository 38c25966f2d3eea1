// A shipped folder's bundle (compiler.hpp, build_kernel_bundle): every kernel of the folder in one
// shared object, each kernel's extern "C" names suffixed with its key and the rest of its source
// in a namespace of its own. Each kernel is compiled from a small wrapper that includes its
// `<key>.cpp` unchanged (its headers first, outside the namespace), so that the bundle's code is
// the source the folder's own `<key>.so` was compiled from, with the same compiler and flags.
#include "compiler_internal.hpp"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"

namespace waco::codegen {

using kernels::Error;
using namespace detail;

namespace {

/// The names a generated kernel's shared object exports (SourceForm::SharedObject): what the
/// loader asks a kernel for, suffixed in the bundle.
const char* const kExportedNames[] = {"waco_kernel", "waco_constant_split",
                                      "waco_stream_probe_lines"};

bool is_key(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

/// The keys of the folder's complete kernels: a <key>.cpp beside its <key>.so, sorted.
std::vector<std::string> folder_kernels(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    throw Error("cannot read the kernel folder '" + dir + "': " + errno_text(errno),
                "give a folder that precompile filled");
  std::vector<std::string> keys;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() != 36 || name.compare(32, 4, ".cpp") != 0) continue;
    const std::string key = name.substr(0, 32);
    if (is_key(key) && is_regular_file(join_path(dir, key + ".so"))) keys.push_back(key);
  }
  ::closedir(d);
  std::sort(keys.begin(), keys.end());
  return keys;
}

/// The wrapper that compiles `<source_path>` (a kernel's source, key `key`) as the bundle's part.
std::string wrapper_source(const std::string& key, const std::string& source_path,
                           const std::string& source) {
  std::string text = "// bundle.so's part for the kernel " + key + " (build_kernel_bundle)\n";
  // The source's headers before the namespace: inside it their include guards skip them.
  std::set<std::string> headers;
  std::istringstream lines(source);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t at = line.find_first_not_of(" \t");
    if (at == std::string::npos || line.compare(at, 10, "#include <") != 0) continue;
    const std::size_t end = line.find('>', at);
    if (end == std::string::npos) continue;
    const std::string header = line.substr(at + 9, end - at - 8);  // <name>
    if (headers.insert(header).second)
      text += "#if __has_include(" + header + ")\n#include " + header + "\n#endif\n";
  }
  for (const char* name : kExportedNames)
    text += std::string("#define ") + name + " " + name + "_" + key + "\n";
  std::string quoted;
  for (char c : source_path) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  text += "namespace waco_bundle_" + key + " {\n#include \"" + quoted + "\"\n}  // namespace\n";
  return text;
}

/// Removes a temporary folder and what is in it on destruction.
class TempFolder {
 public:
  explicit TempFolder(std::string path) : path_(std::move(path)) {}
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Runs `argv`, throwing the compiler's failure as compile_and_load does (`what`: what it made).
void run_compiler(const std::vector<std::string>& argv, const CompilerOptions& opts,
                  const std::string& what) {
  const ProcessResult r = run_process(argv, opts.timeout_seconds, opts.cancelled);
  if (r.cancelled)
    throw kernels::Cancelled("building the kernel bundle was stopped (asked to stop)");
  if (r.spawn_error != 0) throw_spawn_error(opts.compiler, r.spawn_error, argv);
  if (succeeded(r)) return;
  const std::string msg = "building the kernel bundle failed (" + what + "): `" +
                          command_line(argv) + "` " + describe_outcome(r, opts.timeout_seconds) +
                          "; compiler output:\n" + trim_log(r.output);
  if (machine_failure(r))
    throw BuildEnvironmentError(msg, "free space or fix the machine, then build it again");
  throw Error(msg, "the folder's kernels still load one by one");
}

}  // namespace

BundleResult build_kernel_bundle(const std::string& dir, const CompilerOptions& opts, int jobs) {
  const auto t0 = std::chrono::steady_clock::now();
  BundleResult result;
  result.path = join_path(dir, kBundleLibrary);
  const std::string index_path = join_path(dir, kBundleIndex);
  const std::vector<std::string> keys = folder_kernels(dir);
  if (keys.empty()) {
    ::unlink(index_path.c_str());
    ::unlink(result.path.c_str());
    return result;
  }
  char* absolute = ::realpath(dir.c_str(), nullptr);
  if (absolute == nullptr)
    throw Error("cannot resolve the kernel folder '" + dir + "': " + errno_text(errno), "");
  const std::string folder = absolute;
  ::free(absolute);

  std::string scratch = join_path(folder, ".bundle.tmp." + std::to_string(::getpid()) + ".XXXXXX");
  if (::mkdtemp(scratch.data()) == nullptr)
    throw BuildEnvironmentError("cannot create a folder in '" + folder + "': " + errno_text(errno),
                                "make the kernel folder writable");
  const TempFolder temp(scratch);

  std::vector<std::string> object_flags;
  for (const std::string& f : opts.flags)
    if (f != "-shared") object_flags.push_back(f);
  std::vector<std::string> objects(keys.size());
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::string failure;
  bool environment = false, cancelled = false;
  const auto work = [&] {
    for (std::size_t i; (i = next++) < keys.size();) {
      {
        const std::lock_guard<std::mutex> lock(mu);
        if (!failure.empty() || cancelled) return;
      }
      try {
        const std::string& key = keys[i];
        const std::string source_path = join_path(folder, key + ".cpp");
        const std::string wrapper = join_path(temp.path(), key + ".cc");
        const std::string source = kernels::read_text_file(source_path);
        if (source.empty())
          throw Error("cannot read '" + source_path + "'", "check the kernel folder");
        write_file_atomically(wrapper, wrapper_source(key, source_path, source), 0644);
        objects[i] = join_path(temp.path(), key + ".o");
        std::vector<std::string> argv = {opts.compiler};
        argv.insert(argv.end(), object_flags.begin(), object_flags.end());
        argv.insert(argv.end(), {"-c", "-o", objects[i], wrapper});
        run_compiler(argv, opts, "the kernel " + key);
      } catch (const kernels::Cancelled&) {
        const std::lock_guard<std::mutex> lock(mu);
        cancelled = true;
      } catch (const std::exception& e) {
        const std::lock_guard<std::mutex> lock(mu);
        if (failure.empty()) {
          failure = e.what();
          environment = dynamic_cast<const BuildEnvironmentError*>(&e) != nullptr;
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (int j = 1; j < std::max(1, jobs); ++j) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (cancelled) throw kernels::Cancelled("building the kernel bundle was stopped (asked to stop)");
  if (!failure.empty()) {
    if (environment)
      throw BuildEnvironmentError(failure, "free space or fix the machine, then build it again");
    throw Error(failure, "the folder's kernels still load one by one");
  }

  std::string tmp_so;
  const int fd = make_temp(result.path + ".tmp." + std::to_string(::getpid()) + ".", tmp_so);
  ::close(fd);
  TempFileGuard guard(tmp_so);
  std::vector<std::string> argv = {opts.compiler};
  argv.insert(argv.end(), opts.flags.begin(), opts.flags.end());
  argv.insert(argv.end(), {"-o", tmp_so});
  argv.insert(argv.end(), objects.begin(), objects.end());
  run_compiler(argv, opts, "the link");
  (void)::chmod(tmp_so.c_str(), 0755);
  if (::rename(tmp_so.c_str(), result.path.c_str()) != 0)
    throw BuildEnvironmentError("cannot install '" + result.path + "': " + errno_text(errno),
                                "make the kernel folder writable");
  guard.release();
  std::string index = "# the kernels of bundle.so (build_kernel_bundle: waco-hybrid precompile "
                      "--bundle), one cache key a line\n";
  for (const std::string& key : keys) index += key + "\n";
  write_file_atomically(index_path, index, 0644);
  result.kernels = keys.size();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace waco::codegen
