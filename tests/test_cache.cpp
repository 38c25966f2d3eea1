// The chain of cache-size sources (sysfs, cpuid, the measured probe): fake sysfs trees, fake
// cpuid and probe results, the probe's detection on synthetic curves, its result file, and the
// real probe once. The probe's cache directory is a scratch directory (XDG_CACHE_HOME is set by
// tests/CMakeLists.txt and again here), never the user's.
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/test_paths.hpp"
#include "waco/kernels/cache_probe.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/signature/model.hpp"

namespace fs = std::filesystem;
using namespace waco::kernels;

namespace {

constexpr std::int64_t KiB = 1024;
constexpr std::int64_t MiB = 1024 * 1024;

struct FakeEntry {
  int level;
  std::string type, size, shared;
};

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

/// A sysfs root whose cpu0 has `entries` (no cache directory at all when empty).
std::string fake_sysfs(const std::string& name, const std::vector<FakeEntry>& entries) {
  const std::string root = waco::test::scratch_dir("cache-sysfs-" + name);
  const fs::path cpu0 = fs::path(root) / "devices/system/cpu/cpu0";
  fs::create_directories(cpu0);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const fs::path dir = cpu0 / "cache" / ("index" + std::to_string(i));
    fs::create_directories(dir);
    write_file(dir / "level", std::to_string(entries[i].level) + "\n");
    write_file(dir / "type", entries[i].type + "\n");
    write_file(dir / "size", entries[i].size + "\n");
    if (!entries[i].shared.empty()) write_file(dir / "shared_cpu_list", entries[i].shared + "\n");
  }
  return root;
}

CacheSizes fake_cpuid(std::int64_t l1d, std::int64_t l2, std::int64_t l3) {
  CacheSizes c;
  c.l1d = l1d;
  c.l2 = l2;
  c.l3 = l3;
  if (l1d > 0) c.l1d_source = "cpuid";
  if (l2 > 0) c.l2_source = "cpuid";
  if (l3 > 0) c.l3_source = "cpuid";
  c.source = l3 > 0 ? "cpuid" : "none";
  return c;
}

/// A fake probe that counts its calls.
struct FakeProbe {
  CacheProbeResult result;
  int calls = 0;
  bool fail = false;
  std::function<CacheProbeResult()> fn() {
    return [this] {
      ++calls;
      if (fail) throw std::runtime_error("no memory");
      return result;
    };
  }
};

FakeProbe probe_finding(std::int64_t l1d, std::int64_t l2, std::int64_t l3) {
  FakeProbe p;
  p.result.l1d = l1d;
  p.result.l2 = l2;
  p.result.l3 = l3;
  return p;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Sets an environment variable for the life of the object (restores it afterwards).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

/// The machine of this file's tests (an EPYC Milan guest, 2 CPUs): sysfs.
std::vector<FakeEntry> milan_guest() {
  return {{1, "Data", "32K", "0"},
          {1, "Instruction", "32K", "0"},
          {2, "Unified", "512K", "0"},
          {3, "Unified", "32768K", "0-1"}};
}

/// A curve with plateaus `gbps` up to the capacities `bytes` (the last plateau beyond), from
/// 16 KiB to 256 MiB at 4 sizes an octave, each point times exp(noise * N(0, 1)).
std::vector<CacheProbePoint> synthetic_curve(const std::vector<std::int64_t>& bytes,
                                             const std::vector<double>& gbps, double noise = 0.0,
                                             unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<CacheProbePoint> curve;
  for (int i = 0; i <= 56; ++i) {
    const auto size = static_cast<std::int64_t>(16 * KiB * std::exp2(i / 4.0)) / 256 * 256;
    std::size_t level = 0;
    while (level < bytes.size() && size > bytes[level]) ++level;
    curve.push_back({size, gbps[level] * std::exp(noise * normal(rng))});
  }
  return curve;
}

CacheProbeResult detected(std::vector<CacheProbePoint> curve) {
  CacheProbeResult r;
  r.curve = std::move(curve);
  detect_cache_levels(r);
  return r;
}

}  // namespace

TEST_CASE("cache: count_cpu_list edge cases") {
  CHECK(count_cpu_list("0") == 1);
  CHECK(count_cpu_list("0-1") == 2);
  CHECK(count_cpu_list("0-1\n") == 2);
  CHECK(count_cpu_list("0-3,8,10-11") == 7);
  CHECK(count_cpu_list("0-7,64-71") == 16);
  CHECK(count_cpu_list(" 2 - 5 ") == 4);
  CHECK(count_cpu_list("5-5") == 1);
  CHECK(count_cpu_list("") == 0);
  CHECK(count_cpu_list("\n") == 0);
  CHECK(count_cpu_list("3-1") == 0);
  CHECK(count_cpu_list("a") == 0);
  CHECK(count_cpu_list("0-") == 0);
  CHECK(count_cpu_list("-1") == 0);
  CHECK(count_cpu_list("0,") == 0);
  CHECK(count_cpu_list("0,,1") == 0);
  CHECK(count_cpu_list("0-3x") == 0);
  CHECK(count_cpu_list("0 1") == 0);
  CHECK(count_cpu_list("99999999999") == 0);
}

TEST_CASE("cache: a normal sysfs tree is taken as it is, without cpuid or the probe") {
  const std::string root = fake_sysfs("normal", milan_guest());
  const CacheSizes sysfs = read_sysfs_cache_sizes(root);
  CHECK(sysfs.l1d == 32 * KiB);
  CHECK(sysfs.l2 == 512 * KiB);
  CHECK(sysfs.l3 == 32 * MiB);
  CHECK(sysfs.llc_sharing_cpus == 2);
  CHECK(sysfs.source == "sysfs");
  CHECK(sysfs.note.empty());
  CHECK(read_sysfs_cache_sizes(root + "/").l3 == 32 * MiB);  // a trailing slash is fine

  FakeProbe probe = probe_finding(0, 0, 8 * MiB);
  const CacheSizes c =
      resolve_cache_sizes(sysfs, fake_cpuid(32 * KiB, 512 * KiB, 256 * MiB), probe.fn(), 2);
  CHECK(probe.calls == 0);
  CHECK(c.l1d == 32 * KiB);
  CHECK(c.l2 == 512 * KiB);
  CHECK(c.l3 == 32 * MiB);
  CHECK(c.llc() == 32 * MiB);
  CHECK(c.source == "sysfs");
  CHECK(c.l1d_source == "sysfs");
  CHECK(c.l2_source == "sysfs");
  CHECK(c.l3_source == "sysfs");
  CHECK(c.llc_sharing_cpus == 2);
  CHECK(c.llc_sharing_source == "sysfs");
  CHECK(c.note.empty());

  const nlohmann::json j = c.to_json();
  CHECK(j.at("source") == "sysfs");
  CHECK(j.at("sources") == nlohmann::json{{"l1d", "sysfs"}, {"l2", "sysfs"}, {"l3", "sysfs"}});
  CHECK(j.at("llc_sharing_cpus") == 2);
  CHECK(j.at("llc_sharing_source") == "sysfs");
  CHECK(j.at("l3") == 32 * MiB);
  CHECK(j.at("note") == "");
}

TEST_CASE("cache: missing sysfs falls back to cpuid (capped when implausible), then the probe") {
  const std::string root = fake_sysfs("missing", {});
  const CacheSizes sysfs = read_sysfs_cache_sizes(root);
  CHECK(sysfs.llc() == 0);
  CHECK(sysfs.source == "none");
  CHECK(sysfs.llc_sharing_cpus == 0);
  CHECK(sysfs.note ==
        "sysfs has no cache entries under " + root + "/devices/system/cpu/cpu0/cache");
  CHECK(read_sysfs_cache_sizes(root + "/no/such/root").llc() == 0);

  SECTION("cpuid plausible: taken, no probe") {
    FakeProbe probe = probe_finding(0, 0, 8 * MiB);
    const CacheSizes c =
        resolve_cache_sizes(sysfs, fake_cpuid(32 * KiB, 512 * KiB, 32 * MiB), probe.fn(), 2);
    CHECK(probe.calls == 0);
    CHECK(c.l3 == 32 * MiB);
    CHECK(c.source == "cpuid");
    CHECK(c.l1d_source == "cpuid");
    CHECK(c.l2_source == "cpuid");
    CHECK(c.llc_sharing_cpus == 2);
    CHECK(c.llc_sharing_source == "available");
    CHECK(contains(c.note, "sysfs has no cache entries"));
  }
  SECTION("cpuid implausible (the Zen 5 guest): capped at the plausible share, no probe") {
    FakeProbe probe = probe_finding(0, 0, 16 * MiB);
    const CacheSizes c =
        resolve_cache_sizes(sysfs, fake_cpuid(48 * KiB, 1 * MiB, 508 * MiB), probe.fn(), 2);
    CHECK(probe.calls == 0);
    CHECK(c.l1d == 48 * KiB);
    CHECK(c.l2 == 1 * MiB);
    CHECK(c.l3 == 64 * MiB);
    CHECK(c.source == "cpuid");
    CHECK(c.l1d_source == "cpuid");
    CHECK(c.l2_source == "cpuid");
    CHECK(c.l3_source == "cpuid");
    CHECK(c.llc_sharing_cpus == 2);
    CHECK(c.llc_sharing_source == "available");
    CHECK(c.note == "sysfs has no cache entries under " + root +
                        "/devices/system/cpu/cpu0/cache; cpuid reported 508 MiB L3 for 2 CPUs "
                        "(254 MiB a CPU, more than the plausible 32 MiB): capped at 32 MiB a CPU "
                        "(64 MiB)");
  }
  SECTION("cpuid gives nothing: every level from the probe") {
    FakeProbe probe = probe_finding(32 * KiB, 512 * KiB, 16 * MiB);
    const CacheSizes c = resolve_cache_sizes(sysfs, fake_cpuid(0, 0, 0), probe.fn(), 4);
    CHECK(probe.calls == 1);
    CHECK(c.l1d == 32 * KiB);
    CHECK(c.l2 == 512 * KiB);
    CHECK(c.l3 == 16 * MiB);
    CHECK(c.l1d_source == "probe");
    CHECK(c.l2_source == "probe");
    CHECK(c.source == "probe");
    CHECK(c.llc_sharing_cpus == 4);
    CHECK(contains(c.note, "cpuid gave no L3: measured instead (the probe found 16 MiB)"));
    CHECK(contains(c.note, "L2 from the probe"));
  }
  SECTION("nothing anywhere: source none, l3 0") {
    FakeProbe probe;
    probe.result.note = "the bandwidth curve is flat: no cache level stands out";
    const CacheSizes c = resolve_cache_sizes(sysfs, fake_cpuid(0, 0, 0), probe.fn(), 2);
    CHECK(probe.calls == 1);
    CHECK(c.llc() == 0);
    CHECK(c.l3 == 0);
    CHECK(c.source == "none");
    CHECK(c.to_json().at("source") == "none");
    CHECK(contains(c.note, "the probe found no L3 either (the bandwidth curve is flat"));
  }
  SECTION("no probe at all") {
    const CacheSizes c = resolve_cache_sizes(sysfs, fake_cpuid(0, 0, 0), nullptr, 2);
    CHECK(c.source == "none");
  }
}

TEST_CASE("cache: partial sysfs (L1d and L2 only) takes the L3 from the next source") {
  const std::string root = fake_sysfs(
      "partial",
      {{1, "Data", "32K", "0"}, {1, "Instruction", "32K", "0"}, {2, "Unified", "1M", ""}});
  const CacheSizes sysfs = read_sysfs_cache_sizes(root);
  CHECK(sysfs.l1d == 32 * KiB);
  CHECK(sysfs.l2 == 1 * MiB);
  CHECK(sysfs.l3 == 0);
  CHECK(sysfs.source == "sysfs");
  CHECK(sysfs.llc_sharing_cpus == 0);  // the L2 has no list
  CHECK(sysfs.note.empty());

  SECTION("from cpuid") {
    FakeProbe probe = probe_finding(0, 0, 8 * MiB);
    const CacheSizes c =
        resolve_cache_sizes(sysfs, fake_cpuid(48 * KiB, 2 * MiB, 32 * MiB), probe.fn(), 2);
    CHECK(probe.calls == 0);
    CHECK(c.l1d == 32 * KiB);  // sysfs first
    CHECK(c.l2 == 1 * MiB);
    CHECK(c.l3 == 32 * MiB);
    CHECK(c.to_json().at("sources") ==
          nlohmann::json{{"l1d", "sysfs"}, {"l2", "sysfs"}, {"l3", "cpuid"}});
    CHECK(c.source == "cpuid");
    CHECK(c.llc_sharing_cpus == 2);
    CHECK(c.llc_sharing_source == "available");
    CHECK(c.note == "sysfs gave no L3: from cpuid");
  }
  SECTION("cpuid's implausible L3 capped, sysfs's L2 kept") {
    FakeProbe probe = probe_finding(32 * KiB, 512 * KiB, 12 * MiB);
    const CacheSizes c =
        resolve_cache_sizes(sysfs, fake_cpuid(48 * KiB, 2 * MiB, 256 * MiB), probe.fn(), 2);
    CHECK(probe.calls == 0);
    CHECK(c.l2 == 1 * MiB);  // sysfs's L2 stays
    CHECK(c.l2_source == "sysfs");
    CHECK(c.l3 == 64 * MiB);
    CHECK(c.source == "cpuid");
    CHECK(contains(c.note, "cpuid reported 256 MiB L3 for 2 CPUs (128 MiB a CPU"));
  }
  SECTION("no L3 anywhere: the L2 is the last level") {
    FakeProbe probe = probe_finding(32 * KiB, 1 * MiB, 0);
    const CacheSizes c = resolve_cache_sizes(sysfs, fake_cpuid(0, 0, 0), probe.fn(), 2);
    CHECK(probe.calls == 1);
    CHECK(c.l3 == 0);
    CHECK(c.llc() == 1 * MiB);
    CHECK(c.source == "sysfs");
    CHECK(contains(c.note, "sysfs and cpuid gave no L3"));
  }
  SECTION("sysfs's list of a shared L2 applies when the L2 is the last level") {
    const std::string shared =
        fake_sysfs("shared-l2", {{1, "Data", "64K", "0"}, {2, "Unified", "4M", "0-3"}});
    FakeProbe probe;
    const CacheSizes c =
        resolve_cache_sizes(read_sysfs_cache_sizes(shared), fake_cpuid(0, 0, 0), probe.fn(), 2);
    CHECK(c.llc() == 4 * MiB);
    CHECK(c.llc_sharing_cpus == 4);
    CHECK(c.llc_sharing_source == "sysfs");
  }
}

TEST_CASE("cache: an implausible sysfs L3 (a VM told its host's) is capped, not trusted") {
  // The Intel guest: 105 MiB L3 for 2 CPUs.
  const std::string root = fake_sysfs(
      "implausible",
      {{1, "Data", "48K", "0"}, {2, "Unified", "2048K", "0"}, {3, "Unified", "107520K", "0-1"}});
  const CacheSizes sysfs = read_sysfs_cache_sizes(root);
  CHECK(sysfs.l3 == 105 * MiB);
  CHECK(sysfs.llc_sharing_cpus == 2);
  const CacheSizes cpuid = fake_cpuid(48 * KiB, 2 * MiB, 105 * MiB);

  SECTION("the reported figure capped at the plausible share; the probe is not needed") {
    FakeProbe probe = probe_finding(48 * KiB, 2 * MiB, 24 * MiB);
    const CacheSizes c = resolve_cache_sizes(sysfs, cpuid, probe.fn(), 2);
    CHECK(probe.calls == 0);
    CHECK(c.l1d == 48 * KiB);
    CHECK(c.l2 == 2 * MiB);
    CHECK(c.l2_source == "sysfs");
    CHECK(c.l3 == 2 * kMaxPlausibleLlcPerCpu);
    CHECK(c.source == "sysfs");
    CHECK(c.llc_sharing_cpus == 2);
    CHECK(c.llc_sharing_source == "sysfs");
    CHECK(c.note ==
          "sysfs reported 105 MiB L3 for 2 CPUs (52.5 MiB a CPU, more than the plausible "
          "32 MiB); cpuid reported 105 MiB L3 for 2 CPUs (52.5 MiB a CPU, more than the "
          "plausible 32 MiB): capped at 32 MiB a CPU (64 MiB)");
  }
  SECTION("a plausible cpuid figure is taken before the probe") {
    FakeProbe probe = probe_finding(0, 0, 24 * MiB);
    const CacheSizes c =
        resolve_cache_sizes(sysfs, fake_cpuid(48 * KiB, 2 * MiB, 30 * MiB), probe.fn(), 2);
    CHECK(probe.calls == 0);
    CHECK(c.l3 == 30 * MiB);
    CHECK(c.source == "cpuid");
    CHECK(contains(c.note, "plausible 32 MiB): cpuid's 30 MiB taken instead"));
  }
  SECTION("one CPU sharing a 32 MiB L3 is plausible") {
    const std::string one = fake_sysfs("one-cpu", {{3, "Unified", "32M", "0"}});
    FakeProbe probe;
    const CacheSizes c = resolve_cache_sizes(read_sysfs_cache_sizes(one), cpuid, probe.fn(), 1);
    CHECK(probe.calls == 0);
    CHECK(c.l3 == 32 * MiB);
    CHECK(c.llc_sharing_cpus == 1);
  }
}

TEST_CASE("cache: sysfs root and user cache directory follow the environment") {
  {
    ScopedEnv root("WACO_SYSFS_ROOT", "/some/root");
    CHECK(sysfs_root() == "/some/root");
  }
  {
    ScopedEnv root("WACO_SYSFS_ROOT", "");
    CHECK(sysfs_root() == "/sys");
  }
  ScopedEnv xdg("XDG_CACHE_HOME", "/x/cache");
  ScopedEnv home("HOME", "/h/me");
  CHECK(user_cache_dir() == "/x/cache/waco-hybrid");
  CHECK(cache_probe_path() == "/x/cache/waco-hybrid/cache-probe.json");
  ::setenv("XDG_CACHE_HOME", "/x/cache/", 1);
  CHECK(user_cache_dir() == "/x/cache/waco-hybrid");
  ::setenv("XDG_CACHE_HOME", "", 1);
  CHECK(user_cache_dir() == "/h/me/.cache/waco-hybrid");
  ::unsetenv("XDG_CACHE_HOME");
  ::unsetenv("HOME");
  CHECK(user_cache_dir() == "/tmp/waco-hybrid-" + std::to_string(::getuid()));
}

// Run in a fresh process by the test below (hidden: "[.]" is not listed nor run by default).
TEST_CASE("cache: (child) writes the run context", "[.]") {
  const char* out = std::getenv("WACO_TEST_CONTEXT_OUT");
  REQUIRE(out != nullptr);
  std::ofstream(out) << context_json(1, "none").dump();
}

TEST_CASE("cache: WACO_SYSFS_ROOT reaches cache_sizes() and the run context") {
  // cache_sizes() is computed once per process: a new process (this binary, the hidden test
  // above) reads the fake tree.
  const std::string root = fake_sysfs(
      "env", {{1, "Data", "48K", "0"}, {2, "Unified", "1M", "0"}, {3, "Unified", "8M", "0-3"}});
  const std::string out = waco::test::scratch_dir("cache-env-out") + "/context.json";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("WACO_SYSFS_ROOT", root.c_str(), 1);
    ::setenv("WACO_TEST_CONTEXT_OUT", out.c_str(), 1);
    ::execl("/proc/self/exe", "test_cache", "cache: (child) writes the run context", nullptr);
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j.at("cache_bytes") == nlohmann::json{{"l1d", 48 * KiB}, {"l2", MiB}, {"l3", 8 * MiB}});
  const nlohmann::json& src = j.at("cache_source");
  CHECK(src.at("source") == "sysfs");
  CHECK(src.at("llc_sharing_cpus") == 4);
  CHECK(src.at("sources").at("l3") == "sysfs");
}

TEST_CASE("cache: the machine's sysfs entries and CPU identity are kept for the boot in the "
          "user's cache, and read back only while the boot and the file hold") {
  const std::string dir = waco::test::scratch_dir("cache-boot-facts");
  const std::string xdg = dir + "/xdg";
  const std::string out = dir + "/context.json";
  // A new process (this binary's hidden test above) with the real /sys and `xdg` as its cache.
  const auto child_context = [&] {
    std::filesystem::remove(out);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::unsetenv("WACO_SYSFS_ROOT");
      ::setenv("XDG_CACHE_HOME", xdg.c_str(), 1);
      ::setenv("WACO_TEST_CONTEXT_OUT", out.c_str(), 1);
      ::execl("/proc/self/exe", "test_cache", "cache: (child) writes the run context", nullptr);
      ::_exit(127);
    }
    int status = 0;
    REQUIRE(pid > 0);
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    std::ifstream in(out);
    return nlohmann::json::parse(in);
  };
  std::string facts_file;
  const auto facts = [&] {
    for (const auto& e : std::filesystem::directory_iterator(xdg + "/waco-hybrid"))
      if (e.path().filename().string().rfind("machine-facts", 0) == 0) facts_file = e.path().string();
    REQUIRE(!facts_file.empty());
    std::ifstream in(facts_file);
    return nlohmann::json::parse(in);
  };
  // This boot's wall-clock instant, as the facts file names it (boot_facts.hpp).
  timespec real{}, since{};
  REQUIRE(::clock_gettime(CLOCK_REALTIME, &real) == 0);
  REQUIRE(::clock_gettime(CLOCK_BOOTTIME, &since) == 0);
  const double boot = static_cast<double>(real.tv_sec - since.tv_sec) +
                      1e-9 * static_cast<double>(real.tv_nsec - since.tv_nsec);
  // What the machine identity is made of (the tuning cache's key, the calibration's folder).
  const auto identity = [](const nlohmann::json& c) {
    return nlohmann::json{{"cpu", c.at("cpu")}, {"cache_bytes", c.at("cache_bytes")},
                          {"cache_source", c.at("cache_source")}};
  };
  const nlohmann::json fresh = identity(child_context());  // read from the machine, then kept
  nlohmann::json kept = facts();
  CHECK(std::abs(kept.at("boot_time").get<double>() - boot) < 0.5);
  REQUIRE(kept.at("facts").contains("sysfs_cache"));
  REQUIRE(kept.at("facts").contains("cpuinfo_identity"));
  CHECK(identity(child_context()) == fresh);  // read back: the same identity

  // The kept facts are what a process of this boot reads ...
  const auto write = [&](const std::string& text) { std::ofstream(facts_file) << text; };
  nlohmann::json planted = kept;
  planted["facts"]["cpuinfo_identity"]["model"] = "model name\t: Planted CPU";
  planted["facts"]["sysfs_cache"]["l3"] = 7 * MiB;
  write(planted.dump());
  const nlohmann::json read_back = child_context();
  CHECK(read_back.at("cpu") == "Planted CPU");
  CHECK(read_back.at("cache_bytes").at("l3") == 7 * MiB);
  // ... not a process of another boot, which reads the machine and keeps it anew;
  planted["boot_time"] = boot - 600.0;  // a boot ten minutes before this one
  write(planted.dump());
  CHECK(identity(child_context()) == fresh);
  CHECK(std::abs(facts().at("boot_time").get<double>() - boot) < 0.5);
  // a damaged file or a mistyped fact is read from the machine again.
  write("{not json");
  CHECK(identity(child_context()) == fresh);
  CHECK(facts().at("facts").contains("cpuinfo_identity"));
  kept = facts();
  kept["facts"]["sysfs_cache"] = "x";
  kept["facts"]["cpuinfo_identity"] = {{"model", 3}};
  write(kept.dump());
  CHECK(identity(child_context()) == fresh);
}

TEST_CASE("cache: detection on synthetic curves") {
  SECTION("three levels and DRAM") {
    const CacheProbeResult r =
        detected(synthetic_curve({32 * KiB, 512 * KiB, 32 * MiB}, {200.0, 100.0, 40.0, 15.0}));
    CHECK(r.l1d == 32 * KiB);
    CHECK(r.l2 == 512 * KiB);
    CHECK(r.l3 == 32 * MiB);
  }
  SECTION("the same with 5% noise, several seeds") {
    for (unsigned seed = 1; seed <= 20; ++seed) {
      const CacheProbeResult r = detected(
          synthetic_curve({48 * KiB, 1 * MiB, 16 * MiB}, {150.0, 80.0, 35.0, 12.0}, 0.05, seed));
      INFO("seed " << seed << ": " << r.note);
      CHECK(r.l2 >= 768 * KiB);
      CHECK(r.l2 <= 1536 * KiB);
      CHECK(r.l3 >= 12 * MiB);
      CHECK(r.l3 <= 24 * MiB);
    }
  }
  SECTION("L1 and L2 at one rate (as on Zen 3 guests): L2 and LLC still found") {
    const CacheProbeResult r = detected(synthetic_curve({512 * KiB, 32 * MiB}, {90.0, 45.0, 15.0}));
    CHECK(r.l1d == 0);
    CHECK(r.l2 == 512 * KiB);
    CHECK(r.l3 == 32 * MiB);
  }
  SECTION("two levels: L2 is the last") {
    const CacheProbeResult r = detected(synthetic_curve({64 * KiB, 2 * MiB}, {150.0, 70.0, 20.0}));
    CHECK(r.l1d == 64 * KiB);
    CHECK(r.l2 == 2 * MiB);
    CHECK(r.l3 == 0);
    CHECK(contains(r.note, "two-level"));
  }
  SECTION("flat: nothing") {
    const CacheProbeResult r = detected(synthetic_curve({}, {20.0}, 0.03));
    CHECK(r.l1d == 0);
    CHECK(r.l2 == 0);
    CHECK(r.l3 == 0);
    CHECK(contains(r.note, "flat"));
  }
  SECTION("still falling at the largest size: no LLC") {
    std::vector<CacheProbePoint> curve =
        synthetic_curve({32 * KiB, 512 * KiB}, {200.0, 100.0, 40.0});
    for (CacheProbePoint& p : curve)
      if (p.bytes > 64 * MiB) p.gbps = 40.0 * std::pow(64.0 * MiB / p.bytes, 1.5);
    const CacheProbeResult r = detected(curve);
    CHECK(r.l2 == 512 * KiB);
    CHECK(r.l3 == 0);
    CHECK(contains(r.note, "no DRAM plateau"));
  }
  SECTION("too short") { CHECK(detected({{16 * KiB, 10.0}, {32 * KiB, 5.0}}).l2 == 0); }
  SECTION("a measured curve (EPYC Milan guest, 2 CPUs; sysfs: L2 512 KiB, L3 32 MiB)") {
    const std::vector<double> gbps = {
        93.5, 96.2, 96.2, 93.2, 90.2, 84.5, 79.3, 77.3, 76.0, 77.4, 84.2, 89.4, 88.7, 91.0, 94.1,
        91.7, 86.8, 88.0, 81.7, 76.8, 70.1, 57.6, 49.6, 47.1, 45.4, 49.0, 47.0, 45.4, 45.5, 45.1,
        43.2, 42.5, 42.5, 41.4, 39.2, 39.1, 32.1, 29.8, 35.1, 31.3, 28.5, 22.6, 18.8, 16.7, 17.1,
        16.1, 15.7, 15.8, 15.1, 15.4, 15.4, 15.4, 16.0, 15.9, 15.8, 16.3, 15.9};
    std::vector<CacheProbePoint> curve = synthetic_curve({}, {1.0});
    REQUIRE(curve.size() == gbps.size());
    for (std::size_t i = 0; i < curve.size(); ++i) curve[i].gbps = gbps[i];
    const CacheProbeResult r = detected(curve);
    CHECK(r.l2 >= 384 * KiB);
    CHECK(r.l2 <= 768 * KiB);
    CHECK(r.l3 >= 8 * MiB);
    CHECK(r.l3 <= 32 * MiB);
  }
}

TEST_CASE("cache: the probe's result file") {
  const std::string dir = waco::test::scratch_dir("cache-probe-file");
  const std::string path = dir + "/sub/cache-probe.json";
  const nlohmann::json key{{"cpu", "Test CPU"}, {"cpus", 2}, {"machine", "abc"}};
  CacheProbeResult r;
  r.curve = {{16 * KiB, 100.5}, {32 * KiB, 90.25}, {64 * KiB, 40.0}};
  r.l1d = 32 * KiB;
  r.l2 = 512 * KiB;
  r.l3 = 16 * MiB;
  r.seconds = 0.75;
  r.passes = 4;
  r.note = "a note";

  CHECK_FALSE(load_cache_probe(path, key).has_value());  // absent
  REQUIRE(store_cache_probe(path, key, r));              // creates sub/
  const auto back = load_cache_probe(path, key);
  REQUIRE(back.has_value());
  CHECK(back->to_json() == r.to_json());
  CHECK(back->curve.size() == 3);
  CHECK(back->curve[1].gbps == 90.25);
  CHECK(back->l3 == 16 * MiB);
  for (const auto& e : fs::directory_iterator(dir + "/sub"))  // no temporary file left
    CHECK(e.path().filename() == "cache-probe.json");

  SECTION("another machine's key is ignored") {
    nlohmann::json other = key;
    other["cpus"] = 4;
    CHECK_FALSE(load_cache_probe(path, other).has_value());
    other = key;
    other["machine"] = "xyz";
    CHECK_FALSE(load_cache_probe(path, other).has_value());
  }
  SECTION("a corrupt file is ignored, then replaced") {
    write_file(path, "{not json");
    CHECK_FALSE(load_cache_probe(path, key).has_value());
    write_file(path, "");
    CHECK_FALSE(load_cache_probe(path, key).has_value());
    write_file(path, "[1, 2]");
    CHECK_FALSE(load_cache_probe(path, key).has_value());
    REQUIRE(store_cache_probe(path, key, r));
    CHECK(load_cache_probe(path, key).has_value());
  }
  SECTION("a truncated file is ignored") {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string whole = text.str();
    write_file(path, whole.substr(0, whole.size() / 2));
    CHECK_FALSE(load_cache_probe(path, key).has_value());
  }
  SECTION("a well-formed file of bad values is ignored") {
    nlohmann::json j{{"format", 1}, {"key", key}, {"result", r.to_json()}};
    j["result"]["curve"] = {{64 * KiB, 1.0}, {32 * KiB, 2.0}};  // not ascending
    write_file(path, j.dump());
    CHECK_FALSE(load_cache_probe(path, key).has_value());
    j["result"] = r.to_json();
    j["result"].erase("l2");
    write_file(path, j.dump());
    CHECK_FALSE(load_cache_probe(path, key).has_value());
    j["result"] = r.to_json();
    j["format"] = 99;
    write_file(path, j.dump());
    CHECK_FALSE(load_cache_probe(path, key).has_value());
    CHECK_THROWS_AS(CacheProbeResult::from_json(nlohmann::json::array()), Error);
  }
  SECTION("a hostile file: integers out of range or not integers are refused, never converted") {
    // Each field replaced in a valid file; the reader once converted them unchecked
    // (get<int64_t>() of 1e300 is undefined; 4.5 passes became 4; 2^63 - 1 bytes of L3 passed).
    const nlohmann::json big = 1e300;
    const nlohmann::json wrap = std::uint64_t{18446744073709551615u};
    const nlohmann::json huge = std::int64_t{9223372036854775807};
    const std::vector<std::pair<std::string, nlohmann::json>> fields = {
        {"l1d", big},      {"l2", wrap},        {"l3", huge},    {"l3", -1},
        {"l3", 16.0 * MiB}, {"passes", 4.5},     {"passes", big}, {"passes", 3000000000LL},
        {"passes", -1},    {"passes", 9},       {"seconds", -1}, {"seconds", "0.75"},
        {"note", 5}};
    for (const auto& [field, value] : fields) {
      INFO(field << " = " << value.dump());
      nlohmann::json result = r.to_json();
      result[field] = value;
      CHECK_THROWS_AS(CacheProbeResult::from_json(result), Error);
      write_file(path, nlohmann::json{{"format", 1}, {"key", key}, {"result", result}}.dump());
      CHECK_FALSE(load_cache_probe(path, key).has_value());
    }
    for (const nlohmann::json& point :
         {nlohmann::json{big, 1.0}, nlohmann::json{wrap, 1.0}, nlohmann::json{16.0 * KiB, 1.0},
          nlohmann::json{0, 1.0}, nlohmann::json{std::int64_t{1} << 41, 1.0},
          nlohmann::json{16 * KiB, "fast"}, nlohmann::json{16 * KiB, -1.0}}) {
      INFO("curve point " << point.dump());
      nlohmann::json result = r.to_json();
      result["curve"] = nlohmann::json::array({point});
      CHECK_THROWS_AS(CacheProbeResult::from_json(result), Error);
    }
    for (const nlohmann::json& format : {nlohmann::json(1e300), nlohmann::json(1.0),
                                         nlohmann::json("1"), nlohmann::json(wrap)}) {
      INFO("format " << format.dump());
      write_file(path, nlohmann::json{{"format", format}, {"key", key}, {"result", r.to_json()}}.dump());
      CHECK_FALSE(load_cache_probe(path, key).has_value());
    }
    // The limits themselves are read: 1 TiB sizes and capacities, 0 to kMaxProbePasses passes.
    nlohmann::json result = r.to_json();
    result["curve"] = {{16 * KiB, 1.0}, {std::int64_t{1} << 40, 0.5}};
    result["l3"] = std::int64_t{1} << 40;
    result["passes"] = kMaxProbePasses;
    CHECK(CacheProbeResult::from_json(result).l3 == std::int64_t{1} << 40);
    result["passes"] = 0;
    CHECK(CacheProbeResult::from_json(result).passes == 0);
    try {
      result["l2"] = big;
      CacheProbeResult::from_json(result);
      FAIL("l2 = 1e300 read");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("'l2' must be an integer in [0, 1099511627776]"));
    }
  }
  SECTION("an unwritable directory is not an error") {
    write_file(dir + "/file", "x");
    CHECK_FALSE(store_cache_probe(dir + "/file/cache-probe.json", key, r));
  }
}

TEST_CASE("cache: the real probe, once, kept in the (scratch) user cache") {
  const std::string xdg = waco::test::scratch_dir("cache-xdg");
  ScopedEnv env("XDG_CACHE_HOME", xdg);
  const auto t0 = std::chrono::steady_clock::now();
  const CacheProbeResult& r = cache_probe(true);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.to_json().dump());
  CHECK(wall < 3.0);  // about 1 s; loose, the machine is noisy
  CHECK(r.seconds <= wall);
  CHECK(r.passes >= kMinProbePasses);
  REQUIRE(r.curve.size() >= 40);
  CHECK(r.curve.front().bytes == 16 * KiB);
  for (const CacheProbePoint& p : r.curve) CHECK(p.gbps > 0.1);
  // Plausible or absent. Loose: under load (tests run in parallel) the bandwidth curve's knees
  // move; one run found a dip at 38 KiB and took it for the L2.
  CHECK((r.l2 == 0 || (r.l2 >= 16 * KiB && r.l2 <= 64 * MiB)));
  CHECK((r.l3 == 0 || r.l3 > r.l2));
  // Stored for this machine, and read back from the process's memo.
  const auto stored = load_cache_probe(xdg + "/waco-hybrid/cache-probe.json", cache_probe_key());
  REQUIRE(stored.has_value());
  CHECK(stored->to_json() == r.to_json());
  CHECK(&cache_probe(true) == &r);
}

TEST_CASE("cache: this machine's chain and the tile model's capacity name the source") {
  ScopedEnv env("XDG_CACHE_HOME", waco::test::scratch_dir("cache-xdg-chain"));
  const CacheSizes& c = cache_sizes();
  INFO(c.to_json().dump());
  CHECK((c.source == "sysfs" || c.source == "cpuid" || c.source == "probe" || c.source == "none"));
  if (c.source == "sysfs") CHECK(c.llc_sharing_cpus >= 1);
  using waco::signature::cache_capacity;
  CHECK(cache_capacity("llc-core", 2, 4096).source == "given");
  if (c.llc() > 0) {
    const waco::signature::CacheCapacity core = cache_capacity("llc-core", 2, 0);
    CHECK(core.source == c.source);
    CHECK(core.divisor == c.llc_sharing_cpus);
    CHECK(contains(core.rule, "per-core share of the last-level cache (" + c.source));
    CHECK(cache_capacity("l3", 2, 0).source == c.source);
  }
  if (c.l2 > 0) CHECK(cache_capacity("l2", 2, 0).source == c.l2_source);
}
