// Unit "tuning_cache": the persistent tuning cache (heuristics/tuning_cache.hpp): a stored
// decision is found under its key, a change of any key part misses, and a corrupt entry is
// reported and ignored, never trusted.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/test_paths.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/error.hpp"

namespace fs = std::filesystem;
using namespace waco;
using namespace waco::heuristics;

namespace {

TuningKey sample_key() {
  TuningKey k;
  k.content = "0123456789abcdef";
  k.kind = kernels::KernelKind::SpMM;
  k.dense = 256;
  k.threads = 2;
  k.machine = machine_identity(codegen::CompilerOptions{});
  return k;
}

codegen::SuperSchedule sample_schedule() {
  return codegen::parse_schedule(kernels::KernelKind::SpMM,
                                 "split=j:32 order=i,j1,k,j0 format=UC parallel=i threads=2 chunk=16");
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

}  // namespace

TEST_CASE("tuning cache: a stored decision is found under its key, with its report") {
  const std::string dir = test::scratch_dir("tuning-cache-hit");
  const TuningCache cache(dir + "/plans");
  const TuningKey key = sample_key();
  CHECK_FALSE(cache.find(key).hit);
  CHECK(cache.find(key).problem.empty());
  const nlohmann::json report = {{"verdict", "gain"}, {"speedup_over_csr", 1.2345678901234567}};
  const std::string path = cache.store(key, sample_schedule(), report);
  CHECK(fs::exists(path));
  const CacheLookup found = cache.find(key);
  REQUIRE(found.hit);
  CHECK(found.problem.empty());
  CHECK(found.hit->schedule == sample_schedule());
  CHECK(found.hit->report == report);
  CHECK(found.hit->path == path);
  CHECK(found.hit->saved_at.size() == 20);
  // Storing again replaces the entry.
  cache.store(key, codegen::canonicalize(*codegen::schedule_shortcut(kernels::KernelKind::SpMM, "csr")),
              report);
  CHECK(cache.find(key).hit->schedule ==
        codegen::canonicalize(*codegen::schedule_shortcut(kernels::KernelKind::SpMM, "csr")));
}

TEST_CASE("tuning cache: a change of any key part misses") {
  const std::string dir = test::scratch_dir("tuning-cache-miss");
  const TuningCache cache(dir + "/plans");
  const TuningKey key = sample_key();
  cache.store(key, sample_schedule(), nlohmann::json{{"verdict", "gain"}});
  REQUIRE(cache.find(key).hit);
  std::vector<TuningKey> changed(7, key);
  changed[0].content = "fedcba9876543210";
  changed[1].kind = kernels::KernelKind::SpMV;
  changed[2].dense = 128;
  changed[3].threads = 1;
  changed[4].machine["cpu"] = "another CPU";
  changed[5].machine["cache_bytes"]["l3"] = 12345;
  changed[6].machine["kernel_flags"].push_back("-O1");
  for (const TuningKey& k : changed) {
    CHECK(k.hash() != key.hash());
    const CacheLookup l = cache.find(k);
    CHECK_FALSE(l.hit);
    CHECK(l.problem.empty());
  }
  // The machine identity holds what a decision depends on, and no date.
  for (const char* part : {"cpu", "cache_bytes", "cache_source", "compiler", "flags",
                           "waco_version", "git_revision", "kernel_compiler", "kernel_flags"})
    CHECK(key.machine.contains(part));
  CHECK_FALSE(key.machine.contains("date"));
}

TEST_CASE("tuning cache: a corrupt entry is reported and ignored") {
  const std::string dir = test::scratch_dir("tuning-cache-corrupt");
  const TuningCache cache(dir + "/plans");
  const TuningKey key = sample_key();
  const std::string path = cache.store(key, sample_schedule(), nlohmann::json{{"verdict", "gain"}});
  const std::string good = read(path);
  nlohmann::json entry = nlohmann::json::parse(good);

  SECTION("not JSON (a truncated write)") { write(path, good.substr(0, good.size() / 2)); }
  SECTION("garbage") { write(path, "\x01\x02 not a cache entry"); }
  SECTION("another kind of file") { write(path, R"({"format": "something else"})"); }
  SECTION("a field missing") {
    entry.erase("checksum");
    write(path, entry.dump());
  }
  SECTION("the report edited (checksum mismatch)") {
    entry["report"]["verdict"] = "no-gain";
    write(path, entry.dump());
  }
  SECTION("another key's entry under this key's name") {
    TuningKey other = key;
    other.threads = 1;
    const std::string other_path = cache.store(other, sample_schedule(), nlohmann::json::object());
    fs::copy_file(other_path, path, fs::copy_options::overwrite_existing);
  }
  SECTION("the schedule replaced") {
    entry["schedule"] = "not a schedule";
    write(path, entry.dump());
  }
  // Fields of another JSON type (fuzz_tuning_cache: nlohmann's value() threw out of find()).
  SECTION("the format an object") {
    entry["format"] = nlohmann::json::object();
    write(path, entry.dump());
  }
  SECTION("the version a string") {
    entry["version"] = "1";
    write(path, entry.dump());
  }
  // What serves the decision, stored consistently (checksum matches) but not servable: a plan
  // would fail to bind it on every later tune of this key instead of tuning again.
  SECTION("an implementation that is no baseline") {
    cache.store(key, sample_schedule(), {{"verdict", "no-gain"}, {"implementation", "mkl"}});
  }
  SECTION("csf, which serves MTTKRP only, for an SpMM") {
    cache.store(key, sample_schedule(), {{"verdict", "no-gain"}, {"implementation", "csf"}});
  }
  SECTION("dia, which serves SpMV only, for an SpMM") {
    cache.store(key, sample_schedule(), {{"verdict", "gain"}, {"implementation", "dia"}});
  }
  SECTION("an implementation of another JSON type") {
    cache.store(key, sample_schedule(), {{"implementation", 3}});
  }
  SECTION("the servable implementations are hits") {
    for (const char* impl : {"csr", codegen::kGeneratedImplementation}) {
      cache.store(key, sample_schedule(), nlohmann::json{{"implementation", impl}});
      CHECK(cache.find(key).hit);
    }
    return;
  }
  SECTION("saved_at a number") {
    entry["saved_at"] = 5;
    write(path, entry.dump());
    const CacheLookup l = cache.find(key);
    REQUIRE(l.hit);  // saved_at is not checked: only shown
    CHECK(l.hit->saved_at.empty());
    return;
  }
  const CacheLookup l = cache.find(key);
  CHECK_FALSE(l.hit);
  CHECK(l.problem.find("is corrupt") != std::string::npos);
  CHECK(l.problem.find(path) != std::string::npos);
  // A store over the corrupt entry repairs it.
  cache.store(key, sample_schedule(), nlohmann::json{{"verdict", "gain"}});
  CHECK(cache.find(key).hit);
}

TEST_CASE("tuning cache: an entry of another layout version misses quietly") {
  const std::string dir = test::scratch_dir("tuning-cache-version");
  const TuningCache cache(dir + "/plans");
  const TuningKey key = sample_key();
  const std::string path = cache.store(key, sample_schedule(), nlohmann::json::object());
  nlohmann::json entry = nlohmann::json::parse(read(path));
  entry["version"] = kTuningCacheVersion + 1;
  write(path, entry.dump());
  const CacheLookup l = cache.find(key);
  CHECK_FALSE(l.hit);
  CHECK(l.problem.empty());
}

TEST_CASE("tuning cache: an unwritable folder is a clear error") {
  if (::geteuid() == 0) {
    // root writes anywhere: a path under a regular file cannot be created by anyone.
    const std::string dir = test::scratch_dir("tuning-cache-unwritable");
    write(dir + "/file", "x");
    const TuningCache cache(dir + "/file/plans");
    CHECK_THROWS_WITH(cache.store(sample_key(), sample_schedule(), nlohmann::json::object()),
                      Catch::Contains("cannot create the tuning cache directory"));
  } else {
    const std::string dir = test::scratch_dir("tuning-cache-unwritable");
    fs::create_directories(dir + "/ro");
    ::chmod((dir + "/ro").c_str(), 0500);
    const TuningCache cache(dir + "/ro");
    CHECK_THROWS_AS(cache.store(sample_key(), sample_schedule(), nlohmann::json::object()),
                    kernels::Error);
    ::chmod((dir + "/ro").c_str(), 0700);
  }
}
