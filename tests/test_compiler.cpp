// Unit "compiler": compile once, cache on disk, load with dlopen (codegen/compiler.hpp).
// Every test uses its own cache directory under the build tree's scratch area, and small sources
// so that each compile takes well under a second.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "compiler_internal.hpp"
#include "support/cli_runner.hpp"
#include "support/test_paths.hpp"
#include "waco/codegen/compiler.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/memo.hpp"

namespace fs = std::filesystem;
using waco::codegen::compile_and_load;
using waco::codegen::CompilerOptions;
using waco::codegen::compiler_invocations;
using waco::kernels::Error;

namespace {

using IntFn = int (*)(int);

const std::string kSource = R"(// test kernel
extern "C" int f(int x) { return 2 * x + 1; }
)";

CompilerOptions options_in(const std::string& dir) {
  CompilerOptions opts;
  opts.cache_dir = dir;
  return opts;
}

int call_f(const waco::codegen::CompileResult& r, int x) {
  return reinterpret_cast<IntFn>(r.library->symbol("f"))(x);
}

/// File names in `dir` (not paths), sorted.
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

int count_with(const std::vector<std::string>& names, const std::string& part) {
  int n = 0;
  for (const auto& s : names) n += s.find(part) != std::string::npos ? 1 : 0;
  return n;
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return std::string(e.what()) + "\nhint: " + e.hint();
  }
  FAIL("expected a waco::kernels::Error");
  return {};
}

}  // namespace

TEST_CASE("compiler: compiles, loads and calls, and a second compile is a cache hit") {
  const std::string dir = waco::test::scratch_dir("compiler-basic") + "/cache/nested";
  const CompilerOptions opts = options_in(dir);  // also proves mkdir -p of two missing levels

  const std::int64_t before = compiler_invocations();
  const auto first = compile_and_load(kSource, opts);
  CHECK(compiler_invocations() == before + 1);
  CHECK_FALSE(first.cache_hit);
  CHECK(first.compile_seconds > 0.0);
  // The compiler's CPU time (its processes' rusage): some, and no more than its wall time on
  // every core (plus the clock's tick).
  CHECK(first.compile_cpu_seconds > 0.0);
  CHECK(first.compile_cpu_seconds <=
        first.compile_seconds * static_cast<double>(std::thread::hardware_concurrency()) + 0.02);
  CHECK(first.key.size() == 32);
  CHECK(first.library_path == dir + "/" + first.key + ".so");
  CHECK(first.source_path == dir + "/" + first.key + ".cpp");
  CHECK(call_f(first, 20) == 41);
  {
    std::ifstream in(first.source_path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text == kSource);
  }
  CHECK(listing(dir) == std::vector<std::string>{first.key + ".cpp", first.key + ".so"});

  const auto second = compile_and_load(kSource, opts);
  CHECK(compiler_invocations() == before + 1);  // no compiler run
  CHECK(second.cache_hit);
  CHECK(second.compile_seconds == 0.0);
  CHECK(second.compile_cpu_seconds == 0.0);
  CHECK(second.key == first.key);
  CHECK(second.library_path == first.library_path);
  CHECK(call_f(second, 20) == 41);
  CHECK(call_f(second, -3) == call_f(first, -3));


  // A missing symbol is an Error naming it and the library.
  const std::string msg = message_of([&] { second.library->symbol("no_such_function"); });
  CHECK_THAT(msg, Catch::Contains("no_such_function"));
  CHECK_THAT(msg, Catch::Contains(first.library_path));
}

TEST_CASE("compiler: the library outlives the CompileResult that loaded it, and is opened once") {
  const CompilerOptions opts = options_in(waco::test::scratch_dir("compiler-lifetime"));
  std::shared_ptr<waco::codegen::LoadedLibrary> keep;
  {
    const auto r = compile_and_load(kSource, opts);
    keep = r.library;
  }
  CHECK(reinterpret_cast<IntFn>(keep->symbol("f"))(5) == 11);
  // The process keeps what it opened (kernel libraries stay mapped: RTLD_NODELETE): a second
  // load of the path shares the open library instead of asking dlopen again.
  const auto again = compile_and_load(kSource, opts);
  CHECK(again.cache_hit);
  CHECK(again.library == keep);
  CHECK(reinterpret_cast<IntFn>(again.library->symbol("f"))(5) == 11);
}

TEST_CASE("compiler: kernels::Memo keeps a pure function's results, bounded") {
  waco::kernels::Memo<std::string, int> memo(2);
  int made = 0;
  const auto make = [&made](int v) { return [&made, v] { ++made; return v; }; };
  CHECK(memo.get("a", make(1)) == 1);
  CHECK(memo.get("a", make(9)) == 1);  // kept: not made again
  CHECK(made == 1);
  CHECK(memo.get("b", make(2)) == 2);
  CHECK(memo.size() == 2);
  memo.keep("b", 3);  // a key kept again takes the new value, and the memo stays full
  CHECK(memo.find("b") == std::optional<int>(3));
  CHECK(memo.size() == 2);
  CHECK(memo.get("c", make(4)) == 4);  // full: emptied, then c kept
  CHECK(memo.size() == 1);
  CHECK_FALSE(memo.find("a").has_value());
  // A make that throws keeps nothing.
  CHECK_THROWS_AS(memo.get("d", []() -> int { throw Error("no"); }), Error);
  CHECK_FALSE(memo.find("d").has_value());
}

TEST_CASE("compiler: the key depends on source, flags and compiler, and on nothing else") {
  const std::string dir = waco::test::scratch_dir("compiler-key");
  CompilerOptions a = options_in(dir);
  CompilerOptions b = options_in(dir + "/elsewhere");  // cache_dir is not part of the key
  b.timeout_seconds = 5;                                // nor is the timeout
  CHECK(waco::codegen::cache_key(kSource, a) == waco::codegen::cache_key(kSource, b));
  CHECK(waco::codegen::cache_key(kSource + " ", a) != waco::codegen::cache_key(kSource, a));
  b.flags = {"-O2", "-std=c++17", "-shared", "-fPIC"};
  CHECK(waco::codegen::cache_key(kSource, b) != waco::codegen::cache_key(kSource, a));
  // Flag boundaries matter: {"-O3 -g"} is not {"-O3", "-g"}.
  CompilerOptions c = a, d = a;
  c.flags = {"-O3", "-g"};
  d.flags = {"-O3 -g"};
  CHECK(waco::codegen::cache_key(kSource, c) != waco::codegen::cache_key(kSource, d));

  // A compile with another flag set is a different cache entry: the compiler runs again.
  const auto first = compile_and_load(kSource, a);
  const std::int64_t before = compiler_invocations();
  b.cache_dir = dir;
  const auto other = compile_and_load(kSource, b);
  CHECK(compiler_invocations() == before + 1);
  CHECK_FALSE(other.cache_hit);
  CHECK(other.key != first.key);
  CHECK(call_f(other, 1) == 3);
  CHECK(count_with(listing(dir), ".so") == 2);
}

TEST_CASE("compiler: a compile error reports the command and the compiler's message") {
  const std::string dir = waco::test::scratch_dir("compiler-syntax");
  const CompilerOptions opts = options_in(dir);
  const std::string bad = "extern \"C\" int f(int x) { return x + undeclared_name_xyz; }\n";
  const std::int64_t before = compiler_invocations();
  const std::string msg = message_of([&] { compile_and_load(bad, opts); });
  CHECK(compiler_invocations() == before + 1);
  CHECK_THAT(msg, Catch::Contains("undeclared_name_xyz"));  // the compiler's diagnostic
  CHECK_THAT(msg, Catch::Contains("c++ -O3"));               // the command line ...
  std::string flags;  // the command line holds every flag, in order, then -o
  for (const std::string& f : opts.flags) flags += f + " ";
  CHECK_THAT(msg, Catch::Contains(flags + "-o "));
  CHECK_THAT(msg, Catch::Contains("exited with status"));
  const std::string key = waco::codegen::cache_key(bad, opts);
  CHECK_THAT(msg, Catch::Contains(dir + "/" + key + ".cpp"));  // ... with the source it compiled
  CHECK_THAT(msg, Catch::Contains(key + ".log"));
  // Left behind: the source and the full log; no object, no temporaries.
  CHECK(listing(dir) == std::vector<std::string>{key + ".cpp", key + ".log"});
  // A failure is not cached: the next attempt runs the compiler again (and fails again).
  CHECK_THROWS_AS(compile_and_load(bad, opts), Error);
  CHECK(compiler_invocations() == before + 2);
}

TEST_CASE("compiler: a missing compiler is a clear Error") {
  CompilerOptions opts = options_in(waco::test::scratch_dir("compiler-missing"));
  opts.compiler = "no-such-c++";
  const std::string msg = message_of([&] { compile_and_load(kSource, opts); });
  CHECK_THAT(msg, Catch::Contains("'no-such-c++' not found"));
  CHECK_THAT(msg, Catch::Contains("--compiler"));
  CHECK_THROWS_AS(waco::codegen::compiler_version("/no/such/dir/c++"), Error);
}

TEST_CASE("compiler: an unusable cache directory is a clear Error") {
  const std::string scratch = waco::test::scratch_dir("compiler-unwritable");
  const std::string file = scratch + "/not-a-dir";
  std::ofstream(file) << "a regular file in the way\n";
  SECTION("the directory itself is a file") {
    const std::string msg = message_of([&] { compile_and_load(kSource, options_in(file)); });
    CHECK_THAT(msg, Catch::Contains("cannot create the kernel cache directory '" + file + "'"));
    CHECK_THAT(msg, Catch::Contains("is not a directory"));
  }
  SECTION("a parent of the directory is a file") {
    const std::string dir = file + "/kernels";
    const std::string msg = message_of([&] { compile_and_load(kSource, options_in(dir)); });
    CHECK_THAT(msg, Catch::Contains("'" + dir + "'"));
    CHECK_THAT(msg, Catch::Contains("'" + file + "' exists and is not a directory"));
  }
}

TEST_CASE("compiler: the timeout kills the compiler and reports it") {
  const std::string dir = waco::test::scratch_dir("compiler-timeout");
  CompilerOptions opts = options_in(dir);
  opts.timeout_seconds = 0.02;  // far below any real compile of an OpenMP shared object
  const std::string msg = message_of([&] { compile_and_load(kSource + "// timeout\n", opts); });
  CHECK_THAT(msg, Catch::Contains("timed out"));
  CHECK_THAT(msg, Catch::Contains("c++ -O3"));
  CHECK(count_with(listing(dir), ".so") == 0);
  CHECK(count_with(listing(dir), ".tmp.") == 0);
}

TEST_CASE("compiler: two processes compiling the same new kernel both succeed") {
  const std::string dir = waco::test::scratch_dir("compiler-race");
  const std::string source = kSource + "// race\n";
  int go[2];
  REQUIRE(::pipe(go) == 0);
  std::vector<pid_t> children;
  for (int c = 0; c < 2; ++c) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Child: wait for the start signal, compile, verify, report through the exit status
      // (10 = compiled, 11 = cache hit, 1 = failure). Never returns into Catch.
      ::close(go[1]);
      char byte;
      const bool started = ::read(go[0], &byte, 1) == 1;
      int code = 1;
      try {
        const auto r = compile_and_load(source, options_in(dir));
        if (started && reinterpret_cast<IntFn>(r.library->symbol("f"))(7) == 15)
          code = r.cache_hit ? 11 : 10;
      } catch (const Error& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  ::close(go[0]);
  REQUIRE(::write(go[1], "xx", 2) == 2);  // release both at once
  ::close(go[1]);
  int compiled = 0;
  for (const pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    CHECK((code == 10 || code == 11));
    compiled += code == 10 ? 1 : 0;
  }
  INFO("processes that ran the compiler: " << compiled);
  CHECK(compiled >= 1);
  const auto names = listing(dir);
  const std::string key = waco::codegen::cache_key(source, options_in(dir));
  CHECK(names == std::vector<std::string>{key + ".cpp", key + ".so"});  // no temporaries
  const auto again = compile_and_load(source, options_in(dir));
  CHECK(again.cache_hit);
}

TEST_CASE("compiler: two threads compiling the same new kernel both succeed") {
  const std::string dir = waco::test::scratch_dir("compiler-threads");
  const std::string source = kSource + "// threads\n";
  int results[2] = {0, 0};
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      const CompilerOptions opts = options_in(dir);  // separate option objects
      try {
        const auto r = compile_and_load(source, opts);
        results[t] = reinterpret_cast<IntFn>(r.library->symbol("f"))(t);
      } catch (const Error& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(errors[0].empty());
  CHECK(errors[1].empty());
  CHECK(results[0] == 1);
  CHECK(results[1] == 3);
  const std::string key = waco::codegen::cache_key(source, options_in(dir));
  CHECK(listing(dir) == std::vector<std::string>{key + ".cpp", key + ".so"});
}

TEST_CASE("compiler: a damaged cached object is rebuilt") {
  const std::string dir = waco::test::scratch_dir("compiler-damaged");
  const std::string source = kSource + "// damaged\n";
  // Kernel libraries stay mapped once loaded (RTLD_NODELETE), so the damaged object must be one
  // this process never loaded: plant garbage under the key the source will have.
  fs::create_directories(dir);
  const std::string path = dir + "/" + waco::codegen::cache_key(source, options_in(dir)) + ".so";
  std::ofstream(path) << "not an ELF file";
  const std::int64_t before = compiler_invocations();
  const auto second = compile_and_load(source, options_in(dir + "/"));  // trailing slash is fine
  CHECK(compiler_invocations() == before + 1);
  CHECK_FALSE(second.cache_hit);
  CHECK(call_f(second, 2) == 5);
}

TEST_CASE("compiler: temporaries of a process that died compiling are removed, a live one's kept") {
  const std::string dir = waco::test::scratch_dir("compiler-stale");
  const std::string source = kSource + "// stale\n";
  const std::string key = waco::codegen::cache_key(source, options_in(dir));
  // A pid that no longer runs: a child that has exited and been reaped.
  const pid_t dead = fork();
  REQUIRE(dead >= 0);
  if (dead == 0) _exit(0);
  REQUIRE(waitpid(dead, nullptr, 0) == dead);
  const std::string pid = std::to_string(dead), live = std::to_string(getppid());
  for (const std::string& name : {key + ".so.tmp." + pid + ".AbCdEf", key + ".cpp.tmp." + pid + ".GhIjKl",
                                  key + ".so.tmp." + live + ".MnOpQr", "other.so.tmp." + pid + ".StUvWx"})
    std::ofstream(dir + "/" + name) << "half";
  std::ofstream(dir + "/notes.tmp." + pid + ".txt") << "not a kernel's";
  const auto r = compile_and_load(source, options_in(dir));
  CHECK(call_f(r, 2) == 5);
  const std::vector<std::string> names = listing(dir);
  // The first compile of this process into the folder removes every kernel's (a kill may have cut
  // short a compile that nothing repeats): this key's and the other's.
  CHECK(count_with(names, key + ".so.tmp." + pid) == 0);
  CHECK(count_with(names, key + ".cpp.tmp." + pid) == 0);
  CHECK(count_with(names, "other.so.tmp.") == 0);
  CHECK(count_with(names, ".tmp." + live) == 1);    // a live process's work
  CHECK(count_with(names, "notes.tmp.") == 1);       // not a kernel's file
  // Later compiles list only their own key's: another dead one stays until its key compiles.
  std::ofstream(dir + "/later.so.tmp." + pid + ".YzAbCd") << "half";
  std::ofstream(dir + "/" + key + ".so.tmp." + pid + ".EfGhIj") << "half";
  const auto again = compile_and_load(kSource + "// stale, again\n", options_in(dir));
  CHECK(call_f(again, 2) == 5);
  CHECK(count_with(listing(dir), "later.so.tmp.") == 1);
  CHECK(count_with(listing(dir), key + ".so.tmp." + pid) == 1);  // not the key compiled
}

TEST_CASE("compiler: default cache directory follows XDG_CACHE_HOME, then HOME") {
  const char* old_xdg = std::getenv("XDG_CACHE_HOME");
  const char* old_home = std::getenv("HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "", saved_home = old_home ? old_home : "";
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  ::setenv("HOME", "/h/me", 1);
  CHECK(waco::codegen::default_cache_dir() == "/x/cache/waco-hybrid/kernels");
  ::setenv("XDG_CACHE_HOME", "", 1);
  CHECK(waco::codegen::default_cache_dir() == "/h/me/.cache/waco-hybrid/kernels");
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("HOME");
  CHECK(waco::codegen::default_cache_dir() ==
        "/tmp/waco-hybrid-" + std::to_string(::getuid()) + "/kernels");
  if (old_xdg) ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  if (old_home) ::setenv("HOME", saved_home.c_str(), 1);
}

TEST_CASE("compiler: compiler_version is the first line of --version and is stable") {
  const std::string v = waco::codegen::compiler_version("c++");
  CHECK_FALSE(v.empty());
  CHECK(v.find('\n') == std::string::npos);
  CHECK(v.find_first_of("0123456789") != std::string::npos);
  CHECK(waco::codegen::compiler_version("c++") == v);
}

// Kernels compiled ahead of time (issue 35): a shipped folder is a compile cache of its own that
// compile_and_load reads before running the compiler, and never writes.
namespace {

/// Sets an environment variable for the life of the object (the previous value restored).
class EnvVar {
 public:
  EnvVar(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvVar() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("compiler: a kernel in a shipped folder is loaded from it without compiling", "[compiler]") {
  const std::string shipped = waco::test::scratch_dir("compiler-shipped");
  const std::string cache = waco::test::scratch_dir("compiler-shipped-cache");
  const std::string source = kSource + "// shipped variant\n";
  {
    EnvVar none("WACO_SHIPPED_KERNELS", "none");
    REQUIRE_FALSE(compile_and_load(source, options_in(shipped)).cache_hit);  // fills the folder
    CHECK_FALSE(waco::codegen::in_cache(source, options_in(cache)));
  }
  EnvVar env("WACO_SHIPPED_KERNELS", "/nonexistent/folder:" + shipped);
  CHECK(waco::codegen::shipped_kernel_dirs() ==
        std::vector<std::string>{"/nonexistent/folder", shipped});
  CHECK(waco::codegen::in_cache(source, options_in(cache)));
  const std::int64_t before = compiler_invocations();
  const auto r = compile_and_load(source, options_in(cache));
  CHECK(compiler_invocations() == before);
  CHECK(r.cache_hit);
  CHECK(r.shipped);
  CHECK(r.library_path.rfind(shipped, 0) == 0);
  CHECK(call_f(r, 20) == 41);
  CHECK(listing(cache).empty());  // nothing copied into the user's cache

  // "none" turns them off: the same source is compiled into the cache.
  EnvVar none("WACO_SHIPPED_KERNELS", "none");
  CHECK(waco::codegen::shipped_kernel_dirs().empty());
  const auto own = compile_and_load(source, options_in(cache));
  CHECK_FALSE(own.cache_hit);
  CHECK_FALSE(own.shipped);
  CHECK(compiler_invocations() == before + 1);
}

TEST_CASE("compiler: a shipped folder's kernels are found by the compiler it records, with no "
          "compiler on the machine", "[compiler]") {
  const std::string shipped = waco::test::scratch_dir("compiler-shipped-recorded");
  const std::string cache = waco::test::scratch_dir("compiler-shipped-recorded-cache");
  const std::string source = kSource + "// recorded variant\n";
  {
    EnvVar none("WACO_SHIPPED_KERNELS", "none");
    REQUIRE_FALSE(compile_and_load(source, options_in(shipped)).cache_hit);  // fills the folder
    waco::codegen::record_shipped_compiler(shipped, options_in(shipped));
    waco::codegen::record_shipped_compiler(shipped, options_in(shipped));  // recorded once
  }
  std::ifstream recorded(shipped + "/compilers.txt");
  std::string line, more;
  REQUIRE(std::getline(recorded, line));
  CHECK(line == waco::codegen::compiler_version("c++"));
  CHECK_FALSE(std::getline(recorded, more));

  // This "machine" has no compiler: no key of its own, but the folder's kernel is found and
  // loaded by the recorded one.
  EnvVar env("WACO_SHIPPED_KERNELS", shipped);
  CompilerOptions none = options_in(cache);
  none.compiler = "/nonexistent/bin/c++";
  CHECK_THROWS_AS(waco::codegen::cache_key(source, none), waco::codegen::BuildEnvironmentError);
  CHECK(waco::codegen::in_cache(source, none));
  const std::int64_t before = compiler_invocations();
  const auto r = compile_and_load(source, none);
  CHECK(compiler_invocations() == before);
  CHECK(r.cache_hit);
  CHECK(r.shipped);
  CHECK(r.library_path.rfind(shipped, 0) == 0);
  CHECK(call_f(r, 20) == 41);
  CHECK(listing(cache).empty());

  // The flags stay part of the key: other flags are not this folder's kernel, and without a
  // compiler that is a clear error of the machine.
  CompilerOptions other = none;
  other.flags.push_back("-DWACO_OTHER_FLAGS");
  CHECK_THROWS_AS(waco::codegen::in_cache(source, other), waco::codegen::BuildEnvironmentError);
  CHECK_THROWS_AS(compile_and_load(source, other), waco::codegen::BuildEnvironmentError);
  // A source the folder does not hold is not found either.
  CHECK_THROWS_AS(compile_and_load(kSource + "// not shipped\n", none),
                  waco::codegen::BuildEnvironmentError);
}

TEST_CASE("compiler: a shipped folder's bundle serves its kernels from one library, each kernel's "
          "names its own", "[compiler]") {
  const std::string shipped = waco::test::scratch_dir("compiler-bundle");
  const std::string cache = waco::test::scratch_dir("compiler-bundle-cache");
  // Two kernels whose helpers share names (an external inline function with other bodies, which
  // one library of both would merge), one with a header: each keeps its own in the bundle.
  const std::string a = R"(// bundle kernel a
inline __attribute__((noinline)) int helper(int x) { return 2 * x; }
extern "C" const long long waco_constant_split[4] = {1, 2, 3, 4};
extern "C" int waco_kernel(int x) { return helper(x) + 1; }
)";
  const std::string b = R"(// bundle kernel b
#include <cstdlib>
inline __attribute__((noinline)) int helper(int x) { return 3 * x; }
extern "C" int waco_kernel(int x) { return std::abs(helper(x)); }
)";
  {
    EnvVar none("WACO_SHIPPED_KERNELS", "none");
    REQUIRE_FALSE(compile_and_load(a, options_in(shipped)).cache_hit);  // fills the folder
    REQUIRE_FALSE(compile_and_load(b, options_in(shipped)).cache_hit);
    waco::codegen::record_shipped_compiler(shipped, options_in(shipped));
    const auto made = waco::codegen::build_kernel_bundle(shipped, options_in(shipped), 2);
    CHECK(made.kernels == 2);
    CHECK(made.path == shipped + "/bundle.so");
  }
  const std::vector<std::string> files = listing(shipped);
  CHECK(std::count_if(files.begin(), files.end(),
                      [](const std::string& f) { return f.rfind(".bundle.tmp", 0) == 0; }) == 0);

  EnvVar env("WACO_SHIPPED_KERNELS", shipped);
  const std::int64_t before = compiler_invocations();
  CHECK(waco::codegen::in_cache(a, options_in(cache)));
  const auto ra = compile_and_load(a, options_in(cache));
  const auto rb = compile_and_load(b, options_in(cache));
  CHECK(compiler_invocations() == before);
  for (const auto* r : {&ra, &rb}) {
    CHECK(r->shipped);
    CHECK(r->bundled);
    CHECK(r->library_path == shipped + "/bundle.so");
    CHECK(r->source_path == shipped + "/" + r->key + ".cpp");
  }
  CHECK(reinterpret_cast<IntFn>(ra.library->symbol("waco_kernel"))(5) == 11);
  CHECK(reinterpret_cast<IntFn>(rb.library->symbol("waco_kernel"))(-5) == 15);
  CHECK(static_cast<const long long*>(ra.library->symbol("waco_constant_split"))[3] == 4);
  CHECK_FALSE(rb.library->has_symbol("waco_constant_split"));
  CHECK(listing(cache).empty());

  // A bundle the loader refuses, or one that lacks a key its list names: the kernel's own object.
  const std::string bad = waco::test::scratch_dir("compiler-bundle-bad");
  const std::string c = a + "// kernel c\n";
  const std::string d = a + "// kernel d\n";
  std::string key_c, key_d;
  {
    EnvVar none("WACO_SHIPPED_KERNELS", "none");
    key_c = compile_and_load(c, options_in(bad)).key;
    waco::codegen::record_shipped_compiler(bad, options_in(bad));
    REQUIRE(waco::codegen::build_kernel_bundle(bad, options_in(bad)).kernels == 1);
    key_d = compile_and_load(d, options_in(bad)).key;  // after the bundle
    std::ofstream(bad + "/bundle.txt", std::ios::app) << key_d << "\n";
  }
  EnvVar bad_env("WACO_SHIPPED_KERNELS", bad);
  const std::int64_t filled = compiler_invocations();
  const auto rc = compile_and_load(c, options_in(cache));
  CHECK(rc.bundled);
  CHECK(compiler_invocations() == filled);
  const auto rd = compile_and_load(d, options_in(cache));
  CHECK(rd.shipped);
  CHECK_FALSE(rd.bundled);
  CHECK(rd.library_path == bad + "/" + key_d + ".so");
  CHECK(reinterpret_cast<IntFn>(rd.library->symbol("waco_kernel"))(5) == 11);
  CHECK(compiler_invocations() == filled);
  const std::string damaged = waco::test::scratch_dir("compiler-bundle-damaged");
  const std::string e = a + "// kernel e\n";
  {
    EnvVar none("WACO_SHIPPED_KERNELS", "none");
    const std::string key_e = compile_and_load(e, options_in(damaged)).key;
    waco::codegen::record_shipped_compiler(damaged, options_in(damaged));
    std::ofstream(damaged + "/bundle.so") << "not an ELF file";
    std::ofstream(damaged + "/bundle.txt") << key_e << "\n";
  }
  EnvVar damaged_env("WACO_SHIPPED_KERNELS", damaged);
  const std::int64_t refilled = compiler_invocations();
  const auto re = compile_and_load(e, options_in(cache));
  CHECK(re.shipped);
  CHECK_FALSE(re.bundled);
  CHECK(reinterpret_cast<IntFn>(re.library->symbol("waco_kernel"))(5) == 11);
  CHECK(compiler_invocations() == refilled);

  // A folder without kernels has no bundle; a compile error names the kernel and the command.
  const std::string empty = waco::test::scratch_dir("compiler-bundle-empty");
  CHECK(waco::codegen::build_kernel_bundle(empty, options_in(empty)).kernels == 0);
  CHECK_FALSE(std::filesystem::exists(empty + "/bundle.so"));
  const std::string broken = waco::test::scratch_dir("compiler-bundle-broken");
  {
    EnvVar none("WACO_SHIPPED_KERNELS", "none");
    const std::string key_f = compile_and_load(a + "// kernel f\n", options_in(broken)).key;
    std::ofstream(broken + "/" + key_f + ".cpp") << "this is not C++\n";
  }
  const std::string msg =
      message_of([&] { waco::codegen::build_kernel_bundle(broken, options_in(broken)); });
  CHECK_THAT(msg, Catch::Contains("building the kernel bundle failed"));
  CHECK_THAT(msg, Catch::Contains("-c"));
  CHECK_FALSE(std::filesystem::exists(broken + "/bundle.so"));
}

TEST_CASE("compiler: a damaged shipped kernel is compiled again into the cache", "[compiler]") {
  const std::string shipped = waco::test::scratch_dir("compiler-shipped-bad");
  const std::string cache = waco::test::scratch_dir("compiler-shipped-bad-cache");
  const std::string source = kSource + "// damaged shipped variant\n";
  // The key without compiling (a path this process loaded once is never read again by dlopen).
  const std::string key = waco::codegen::cache_key(source, options_in(shipped));
  {
    std::ofstream f(shipped + "/" + key + ".so");
    f << "not an ELF file";
  }
  EnvVar env("WACO_SHIPPED_KERNELS", shipped);
  const std::int64_t before = compiler_invocations();
  const auto r = compile_and_load(source, options_in(cache));
  CHECK_FALSE(r.shipped);
  CHECK_FALSE(r.cache_hit);
  CHECK(compiler_invocations() == before + 1);
  CHECK(r.library_path.rfind(cache, 0) == 0);
  CHECK(call_f(r, 1) == 3);
}

TEST_CASE("compiler: a compile is stopped when its caller asks, and nothing is installed",
          "[compiler]") {
  const std::string dir = waco::test::scratch_dir("compiler-cancel");
  CompilerOptions opts = options_in(dir);
  opts.timeout_seconds = 60;
  const auto t0 = std::chrono::steady_clock::now();
  int asked = 0;
  opts.cancelled = [&] { return ++asked > 0; };  // at the first question (<= 0.1 s in)
  const std::int64_t before = compiler_invocations();
  CHECK_THROWS_AS(compile_and_load(kSource + "// cancelled\n", opts), waco::kernels::Cancelled);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(compiler_invocations() == before + 1);
  CHECK(asked == 1);
  CHECK(took < 2.0);
  CHECK(count_with(listing(dir), ".so") == 0);
  CHECK(count_with(listing(dir), ".tmp.") == 0);
  // Never asking to stop changes nothing.
  opts.cancelled = [] { return false; };
  const auto r = compile_and_load(kSource + "// cancelled\n", opts);
  CHECK(call_f(r, 3) == 7);
}

TEST_CASE("compiler: the version line is remembered per compiler binary until the binary changes") {
  const std::string dir = waco::test::scratch_dir("compiler-version-file");
  const std::string fake = dir + "/fake-c++", calls = dir + "/calls", file = dir + "/compilers.json";
  const auto write_fake = [&](const std::string& version) {
    {
      std::ofstream f(fake);
      f << "#!/bin/sh\necho called >> '" << calls << "'\necho '" << version << "'\n";
    }
    ::chmod(fake.c_str(), 0755);
  };
  const auto runs = [&] {
    std::ifstream f(calls);
    int n = 0;
    for (std::string line; std::getline(f, line);) ++n;
    return n;
  };
  using waco::codegen::remembered_compiler_version;
  write_fake("fake c++ 1.0");
  CHECK(remembered_compiler_version(fake, file) == "fake c++ 1.0");
  CHECK(runs() == 1);
  CHECK(remembered_compiler_version(fake, file) == "fake c++ 1.0");  // from the file
  CHECK(runs() == 1);
  // By name on PATH: an entry of that name (a compiler's line names how it was called), kept
  // while the name finds the same binary.
  const char* old_path = std::getenv("PATH");
  const std::string saved_path = old_path ? old_path : "";
  ::setenv("PATH", (dir + ":" + saved_path).c_str(), 1);
  CHECK(remembered_compiler_version("fake-c++", file) == "fake c++ 1.0");
  CHECK(runs() == 2);
  CHECK(remembered_compiler_version("fake-c++", file) == "fake c++ 1.0");
  CHECK(runs() == 2);
  ::setenv("PATH", saved_path.c_str(), 1);
  // A changed binary is asked again; a file that is not ours is ignored and replaced.
  write_fake("fake c++ 2.0.1");
  CHECK(remembered_compiler_version(fake, file) == "fake c++ 2.0.1");
  CHECK(runs() == 3);
  std::ofstream(file) << "{not json";
  CHECK(remembered_compiler_version(fake, file) == "fake c++ 2.0.1");
  CHECK(runs() == 4);
  CHECK(remembered_compiler_version(fake, file) == "fake c++ 2.0.1");
  CHECK(runs() == 4);
  // A file that cannot be written: the line all the same.
  CHECK(remembered_compiler_version(fake, dir + "/calls/x.json") == "fake c++ 2.0.1");
  CHECK_THROWS_AS(remembered_compiler_version(dir + "/missing-c++", file), Error);
}

#if defined(__x86_64__)
namespace {

/// The loops of `library`'s waco_kernel functions (the kernel and its outlined OpenMP bodies) as
/// objdump disassembles them: [first byte, one past the backward jump's last byte) of every
/// backward jump's target range. Nothing when objdump cannot be run.
std::optional<std::vector<std::pair<std::uint64_t, std::uint64_t>>> kernel_loops(
    const std::string& library) {
  const waco::test::CliResult r = waco::test::run_command("objdump -d --no-show-raw-insn '" + library + "'");
  if (r.status != 0 || r.out.empty()) return std::nullopt;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> loops;
  std::istringstream lines(r.out);
  std::string line;
  bool in_kernel = false;
  bool jump_back = false;  // the previous instruction jumped back to jump_target: a loop's end
  std::uint64_t jump_target = 0;
  while (std::getline(lines, line)) {
    if (line.find(">:") != std::string::npos) {  // "0000000000001140 <waco_kernel._omp_fn.0>:"
      in_kernel = line.find("<waco_kernel") != std::string::npos;
      jump_back = false;
      continue;
    }
    const std::size_t colon = line.find(":\t");
    if (!in_kernel || colon == std::string::npos) continue;
    const std::uint64_t address = std::stoull(line.substr(0, colon), nullptr, 16);
    if (jump_back) loops.emplace_back(jump_target, address);
    jump_back = false;
    // "    1209:\tjg     11f0 <waco_kernel._omp_fn.0+0xb0>": a jump (j*) to a lower address.
    const std::string insn = line.substr(colon + 2);
    if (insn.empty() || insn[0] != 'j') continue;
    const std::size_t space = insn.find_first_of(" \t");
    if (space == std::string::npos) continue;
    const std::size_t target_at = insn.find_first_not_of(" \t", space);
    if (target_at == std::string::npos || !std::isxdigit(static_cast<unsigned char>(insn[target_at])))
      continue;
    const std::uint64_t target = std::stoull(insn.substr(target_at), nullptr, 16);
    if (target < address) {
      jump_back = true;
      jump_target = target;
    }
  }
  return loops;
}

}  // namespace

TEST_CASE("compiler: a generated row sum's loops of at most 32 bytes do not cross a 64-byte line",
          "[compiler]") {
  // WACO_SCALAR_ROW_SUM's align-loops=32 (codegen/README.md, "Loop alignment of the row sums"):
  // SpMV's row sums (27 bytes in float and double with -march=native on x86-64) start on a
  // 32-byte boundary, so a row never runs its loop across two 64-byte lines, which on the AMD
  // EPYC Milan VM cost the generated csr schedule 1.13-1.15x the csr baseline's time on large
  // matrices.
  const std::string dir = waco::test::scratch_dir("compiler-loop-alignment");
  const CompilerOptions opts = options_in(dir);
  using waco::kernels::Dtype;
  using waco::kernels::KernelKind;
  int short_loops = 0;
  for (const char* text : {"csr", "order=i,k format=UC parallel=i threads=1 chunk=1",
                           "split=i:1024 order=i1,i0,k format=UUC parallel=i1 chunk=static",
                           "order=i,k format=CC parallel=i chunk=static"}) {
    for (const Dtype dtype : {Dtype::F32, Dtype::F64}) {
      const auto s = waco::codegen::schedule_from_string(KernelKind::SpMV, text);
      const auto r = compile_and_load(
          waco::codegen::emit_kernel_source(s, waco::codegen::RaceStrategy::Atomic,
                                            waco::codegen::SourceForm::SharedObject, dtype),
          opts);
      const auto loops = kernel_loops(r.library_path);
      if (!loops) {
        WARN("objdump could not be run: the loops' placement is not checked");
        return;
      }
      INFO(text << (dtype == Dtype::F32 ? " in float" : " in double") << ", " << r.library_path);
      for (const auto& [begin, end] : *loops) {
        if (end - begin > 32) continue;
        ++short_loops;
        INFO("loop [0x" << std::hex << begin << ", 0x" << end << ")");
        CHECK(begin / 64 == (end - 1) / 64);
      }
    }
  }
  // With GCC 12 on the AMD EPYC Milan VM every kernel's row sum is one (27 bytes); another
  // compiler or CPU may lay them out longer, and then there is nothing to check.
  if (short_loops == 0) WARN("no loop of at most 32 bytes in the row-sum kernels: nothing checked");
}
#endif  // __x86_64__: objdump's x86 jumps, the row sums' size

TEST_CASE(
    "compiler: the cache key's SHA-256 is FIPS 180-4's with and without the SHA extensions") {
  using waco::codegen::detail::sha256_hex;
  for (const bool accelerated : {false, true}) {
    INFO("accelerated " << accelerated);
    CHECK(sha256_hex("", accelerated) ==
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc", accelerated) ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", accelerated) ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(sha256_hex(std::string(1000000, 'a'), accelerated) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
  // Every length across a few blocks, and bytes of every value: both ways alike.
  std::string s;
  for (int n = 0; n < 300; ++n) {
    CHECK(sha256_hex(s, true) == sha256_hex(s, false));
    s += static_cast<char>((n * 131 + 7) & 255);
  }
  if (!waco::codegen::detail::sha_ni_available())
    WARN("this CPU has no SHA extensions: the accelerated path was the portable one");
#if defined(__x86_64__)
  // The CPUID check agrees with the kernel's reading of the CPU (its "sha_ni" and "sse4_1"
  // flags in /proc/cpuinfo), where there is one.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    const auto has = [&](const std::string& f) {
      return (line + " ").find(" " + f + " ") != std::string::npos;
    };
    CHECK(waco::codegen::detail::sha_ni_available() == (has("sha_ni") && has("sse4_1")));
    break;
  }
#endif
}
