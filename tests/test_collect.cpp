// Unit "collect": `waco-hybrid collect` end to end on tiny generated matrices: groups with
// provenance and splits, resuming (collected matrices are skipped), the exclusion list, shards
// that partition the recipes, a second collector refused, and kill -9 midway then resume (no
// group lost beyond the one in flight, no duplicate rows).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/cli_runner.hpp"
#include "support/test_paths.hpp"
#include "waco/heuristics/collector.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

using namespace waco;
using namespace waco::heuristics;
namespace fs = std::filesystem;

namespace {

/// A small, fast collection: tiny mix recipes, few schedules and rounds, no busy waiting.
std::string collect_args(const std::string& db, int mix) {
  return "collect --kernel spmv --db " + db + " --mix " + std::to_string(mix) +
         " --max-nnz 3000 --schedules 5 --rounds 2 --warmup 0 --busy-wait 0 --threads 2"
         " --cache-dir " + std::string(WACO_BINARY_DIR) + "/test-kernel-cache";
}

nlohmann::json run_json(const std::string& args) {
  const test::CliResult r = test::run_cli(args + " --json -q");
  INFO(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

std::set<std::string> fingerprints(const nlohmann::json& j, const std::string& outcome) {
  std::set<std::string> out;
  for (const auto& item : j["items"])
    if (item["outcome"] == outcome) out.insert(item["fingerprint"].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("collect: a mix is collected as groups with provenance, and a rerun skips them") {
  const std::string db = test::scratch_dir("collect-basic") + "/d.sqlite";
  fs::remove(db);
  const nlohmann::json first = run_json(collect_args(db, 3));
  CHECK(first["outcomes"]["measured"] == 3);
  CHECK(first["measurements"].get<int>() >= 3 * 3);  // csr schedule, baseline, samples
  // Collected matrices are skipped without waiting for the CPU lock (held here meanwhile).
  const std::string cpu = db + ".cpu-lock";
  const int fd = ::open(cpu.c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  const nlohmann::json again = run_json(collect_args(db, 3) + " --cpu-lock " + cpu);
  ::close(fd);
  CHECK(again["outcomes"]["existing"] == 3);
  CHECK(again["measurements"] == 0);
  ResultsDb d(db);
  const nlohmann::json stats = d.dataset_stats();
  INFO(stats.dump(2));
  CHECK(stats["spmv"]["matrices"] == 3);
  CHECK(stats["spmv"]["groups"] == 3);
  CHECK(stats["spmv"]["sources"]["generator"] == 3);
  CHECK(d.count_measurements() == first["measurements"].get<std::int64_t>());
  for (const std::string& fp : fingerprints(first, "measured")) {
    const auto p = d.find_provenance(fp);
    REQUIRE(p);
    CHECK(p->split == split_of(fp));
    // The recipe makes the same matrix again.
    const kernels::CooMatrix a = kernels::make_matrix(kernels::Recipe::from_json(p->recipe));
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(kernels::fingerprint(a)));
    CHECK(std::string(hex) == fp);
  }
}

TEST_CASE("collect: a resume with other settings is refused unless accepted, and --mix may grow") {
  const std::string db = test::scratch_dir("collect-settings") + "/d.sqlite";
  fs::remove(db);
  const nlohmann::json first = run_json(collect_args(db, 1));
  CHECK(first["outcomes"]["measured"] == 1);
  // Another --max-nnz makes other recipes: refused before anything is measured, naming it.
  std::string other = collect_args(db, 2);
  other.replace(other.find("--max-nnz 3000"), 14, "--max-nnz 4000");
  const test::CliResult r = test::run_cli(other + " -q");
  CHECK(r.status == 1);
  CHECK(r.err.find("other settings") != std::string::npos);
  CHECK(r.err.find("max_nnz 3000 then, 4000 now") != std::string::npos);
  CHECK(r.err.find("--new-settings") != std::string::npos);
  CHECK(ResultsDb(db).count_matrices() == 1);
  // More of the same mix is a resume.
  const nlohmann::json more = run_json(collect_args(db, 2));
  CHECK(more["outcomes"]["existing"] == 1);
  CHECK(more["outcomes"]["measured"] == 1);
  // --new-settings accepts the change and records it: the next run with it is a plain resume.
  const nlohmann::json accepted = run_json(other + " --new-settings");
  CHECK(accepted["outcomes"].value("failed", 0) == 0);
  const test::CliResult after = test::run_cli(other + " -q");
  CHECK(after.status == 0);
  const std::optional<std::string> stored = ResultsDb(db).meta("collect_settings.spmv");
  REQUIRE(stored);
  CHECK(nlohmann::json::parse(*stored).at("max_nnz") == 4000);
}

TEST_CASE("collect: excluded fingerprints are never measured") {
  const std::string dir = test::scratch_dir("collect-exclude");
  fs::remove(dir + "/a.sqlite");
  fs::remove(dir + "/b.sqlite");
  const nlohmann::json first = run_json(collect_args(dir + "/a.sqlite", 2));
  const std::set<std::string> fps = fingerprints(first, "measured");
  REQUIRE(fps.size() == 2);
  std::ofstream(dir + "/exclude.txt") << "# held out\n" << *fps.begin() << "\n";
  const nlohmann::json second =
      run_json(collect_args(dir + "/b.sqlite", 2) + " --exclude " + dir + "/exclude.txt");
  CHECK(second["outcomes"]["excluded"] == 1);
  CHECK(second["outcomes"]["measured"] == 1);
  ResultsDb b(dir + "/b.sqlite");
  CHECK_FALSE(b.find_matrix(*fps.begin()));
  // An augmentation of an excluded file is excluded too (the exclusion list names the file).
  const std::string source = test::examples_dir() + "/bcsstk13.mtx.gz";
  kernels::Recipe r;
  r.source = kernels::Recipe::Source::File;
  r.path = source;
  r.augment.permute = kernels::Permutation::Symmetric;
  r.augment.seed = 3;
  kernels::write_recipes(dir + "/r.jsonl", {r});
  std::ofstream(dir + "/held-out.txt") << source << "\n";
  fs::remove(dir + "/c.sqlite");
  const nlohmann::json third = run_json(
      "collect --kernel spmv --db " + dir + "/c.sqlite --recipes " + dir + "/r.jsonl --exclude " +
      dir + "/held-out.txt --schedules 2 --rounds 2 --busy-wait 0");
  CHECK(third["outcomes"]["excluded"] == 1);
  CHECK(third["items"][0]["message"].get<std::string>().find("bcsstk13") != std::string::npos);
  // A line that is neither a fingerprint nor a file is an error naming it.
  std::ofstream(dir + "/bad.txt") << "no-such-file.mtx\n";
  const test::CliResult bad =
      test::run_cli(collect_args(dir + "/b.sqlite", 2) + " --exclude " + dir + "/bad.txt");
  CHECK(bad.status == 1);
  CHECK(bad.err.find("bad.txt:1") != std::string::npos);
}

TEST_CASE("collect: shards partition the recipes") {
  const std::string dir = test::scratch_dir("collect-shards");
  std::set<std::string> all, seen;
  for (int i = 0; i < 2; ++i) {
    const std::string db = dir + "/s" + std::to_string(i) + ".sqlite";
    fs::remove(db);
    const nlohmann::json j =
        run_json(collect_args(db, 4) + " --shard " + std::to_string(i) + "/2");
    CHECK(j["collected_here"] == 2);
    for (const std::string& fp : fingerprints(j, "measured")) CHECK(seen.insert(fp).second);
  }
  CHECK(seen.size() == 4);
  CHECK(test::run_cli(collect_args(dir + "/x.sqlite", 4) + " --shard 2/2").status == 1);
}

TEST_CASE("collect: a second collector on the same database is refused") {
  const std::string db = test::scratch_dir("collect-lock") + "/d.sqlite";
  const int fd = ::open((db + ".collect-lock").c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  const test::CliResult r = test::run_cli(collect_args(db, 1));
  ::close(fd);
  CHECK(r.status == 1);
  CHECK(r.err.find("another collect is writing") != std::string::npos);
}

TEST_CASE("collect: killed with SIGKILL midway, a rerun completes without duplicates") {
  const std::string db = test::scratch_dir("collect-kill") + "/d.sqlite";
  fs::remove(db);
  const std::string args = collect_args(db, 5) + " -q";
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // its own process group, so that the kill takes its children too
    ::setpgid(0, 0);
    const std::string cmd = "exec " + test::cli_binary() + " " + args + " >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  // Kill as soon as the first group is stored (or after 120 s).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::int64_t groups = 0;
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!fs::exists(db)) continue;
    try {
      ResultsDb d(db);
      groups = d.dataset_stats().value("spmv", nlohmann::json::object()).value("groups", 0);
    } catch (const kernels::Error&) {
      continue;  // being created
    }
    if (groups >= 1) break;
  }
  ::kill(-pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(groups >= 1);
  const nlohmann::json rest = run_json(collect_args(db, 5));
  CHECK(rest["outcomes"].value("existing", 0) >= 1);
  CHECK(rest["outcomes"].value("existing", 0) + rest["outcomes"].value("measured", 0) == 5);
  ResultsDb d(db);
  const nlohmann::json stats = d.dataset_stats();
  CHECK(stats["spmv"]["groups"] == 5);
  // Every stored row belongs to a stored group, and the unique index forbids duplicates: the rows
  // are exactly the groups' candidates.
  std::int64_t candidates = 0;
  for (const auto& item : rest["items"]) candidates += item["candidates"].get<std::int64_t>();
  CHECK(d.count_measurements() >= candidates);
}

TEST_CASE("collect: the same failure on matrix after matrix stops the run, saying why") {
  const std::string db = test::scratch_dir("collect-same-failure") + "/d.sqlite";
  fs::remove(db);
  // A broken installation: every matrix would fail alike.
  const test::CliResult r =
      test::run_cli(collect_args(db, 12) + " --json -q", "WACO_MEASURE_WORKER=/nonexistent/worker");
  INFO(r.err);
  CHECK(r.status == 1);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.at("stopped_by") == "repeated-failure");
  CHECK_FALSE(j.at("complete").get<bool>());
  CHECK(j.at("items").size() == 8);  // kSameFailuresStop, not all 12
  CHECK(j.at("stopped").get<std::string>().find("WACO_MEASURE_WORKER") != std::string::npos);
  CHECK(r.err.find("failed alike") != std::string::npos);
  CHECK(r.err.find("run the same command again") != std::string::npos);
}

TEST_CASE("collect: a program replaced under a running collect still finds its measurement worker") {
  // The build tree's layout in a scratch folder: the program, and the worker where it looks.
  const std::string dir = test::scratch_dir("collect-replaced");
  fs::remove_all(dir + "/bin");
  fs::create_directories(dir + "/bin");
  fs::create_directories(dir + "/libexec/waco-hybrid");
  fs::copy_file(test::cli_binary(), dir + "/bin/waco-hybrid");
  const fs::path worker =
      fs::path(test::cli_binary()).parent_path().parent_path() / "libexec/waco-hybrid/waco-measure-worker";
  REQUIRE(fs::exists(worker));
  fs::copy_file(worker, dir + "/libexec/waco-hybrid/waco-measure-worker",
                fs::copy_options::overwrite_existing);
  const std::string db = dir + "/d.sqlite";
  fs::remove(db);
  // As soon as the first matrix is done, the program file is replaced (a rebuild, an upgrade):
  // the running one is then "<path> (deleted)" in /proc/self/exe.
  const test::CliResult r = test::run_command(
      "cd " + dir + " && (bin/waco-hybrid " + collect_args(db, 4) + " --json > out.json 2> err.txt & "
      "pid=$!; for i in $(seq 1200); do grep -q '^\\[1/4\\]' err.txt && break; sleep 0.1; done; "
      "cp bin/waco-hybrid bin/new && mv bin/new bin/waco-hybrid; wait $pid; rc=$?; cat err.txt >&2; "
      "cat out.json; exit $rc)");
  INFO(r.err);
  CHECK(r.err.find("[1/4]") != std::string::npos);
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.at("outcomes").value("measured", 0) == 4);
  CHECK(j.at("outcomes").value("failed", 0) == 0);
}

TEST_CASE("collect: pair agreement and the repeated share") {
  CHECK(pair_agreement({1, 2, 3}, {1, 2, 3}) == Approx(1.0));
  CHECK(pair_agreement({1, 2, 3}, {3, 2, 1}) == Approx(0.0));
  CHECK(pair_agreement({1, 2, -1}, {2, 1, 5}) == Approx(0.0));  // failed ones do not count
  CHECK_FALSE(pair_agreement({1, -1}, {1, 2}));
  int repeated = 0;
  for (int i = 0; i < 2000; ++i) {
    char fp[17];
    std::snprintf(fp, sizeof fp, "%016x", i * 7919);
    repeated += repeat_group(fp, 1, 0.05);
  }
  CHECK(repeated > 50);
  CHECK(repeated < 150);
  CHECK_FALSE(repeat_group("0123456789abcdef", 1, 0.0));
  CHECK(repeat_group("0123456789abcdef", 1, 1.0));
}

TEST_CASE("collect: dataset export, import and stats round-trip a collection") {
  const std::string dir = test::scratch_dir("collect-dataset");
  for (const char* f : {"/d.sqlite", "/e.sqlite"}) fs::remove(dir + f);
  // No racing: on a loaded machine (ctest -j) racing may abandon all but one schedule of a
  // group, which leaves no pair to agree on.
  run_json(collect_args(dir + "/d.sqlite", 2) + " --repeat-share 1 --abandon-factor 0");
  test::CliResult r = test::run_cli("dataset export --db " + dir + "/d.sqlite -o " + dir + "/d.jsonl.gz");
  INFO(r.err);
  REQUIRE(r.status == 0);
  r = test::run_cli("dataset import --db " + dir + "/e.sqlite " + dir + "/d.jsonl.gz");
  REQUIRE(r.status == 0);
  r = test::run_cli("dataset export --db " + dir + "/e.sqlite -o " + dir + "/e.jsonl.gz");
  REQUIRE(r.status == 0);
  // The same groups, rows, provenance and repetitions: the exports are equal.
  const test::CliResult a = test::run_cli("dataset stats --json " + dir + "/d.jsonl.gz");
  const test::CliResult b = test::run_cli("dataset stats --json --db " + dir + "/d.sqlite");
  REQUIRE(a.status == 0);
  REQUIRE(b.status == 0);
  const nlohmann::json ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  CHECK(ja["kernels"] == jb["kernels"]);
  CHECK(ja["kernels"]["spmv"]["repeated_groups"] == 2);
  CHECK(ja["kernels"]["spmv"]["pair_agreement_mean"].is_number());
  std::ifstream da(dir + "/d.jsonl.gz", std::ios::binary), ea(dir + "/e.jsonl.gz", std::ios::binary);
  const std::string x((std::istreambuf_iterator<char>(da)), std::istreambuf_iterator<char>());
  const std::string y((std::istreambuf_iterator<char>(ea)), std::istreambuf_iterator<char>());
  CHECK(x == y);
  // Every group records how its rows were timed (the settle and the least run length).
  int timed_groups = 0;
  ResultsDb(dir + "/d.sqlite").for_each_group("spmv", [&](const nlohmann::json& g) {
    const nlohmann::json& t = g.at("context").at("timing");
    CHECK(t.at("min_run_s").get<double>() == Approx(kernels::kDefaultMinRunSeconds));
    CHECK(t.at("settle_s").get<double>() == Approx(kernels::kDefaultSettleSeconds));
    CHECK(t.at("settle_runs") == kernels::kDefaultSettleRuns);
    ++timed_groups;
  });
  CHECK(timed_groups == 2);
  // A corrupt export is an error naming the file and line.
  { std::ofstream bad(dir + "/bad.jsonl"); bad << "{\"export_version\": 1}\nnot json\n"; }
  r = test::run_cli("dataset import --db " + dir + "/e.sqlite " + dir + "/bad.jsonl");
  CHECK(r.status == 1);
  CHECK(r.err.find("bad.jsonl:1") != std::string::npos);
}

TEST_CASE("collect: dataset stats without --db reports the committed dataset") {
  const test::CliResult r = test::run_cli("dataset stats --json");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["dataset"].get<std::string>().find("export file") != std::string::npos);
  CHECK(j["kernels"]["spmv"]["matrices"].get<int>() > 0);
}

TEST_CASE("collect: --dtype f64 collects the same recipes again in double, kept apart from f32") {
  const std::string dir = test::scratch_dir("collect-dtype");
  for (const char* f : {"/d.sqlite", "/e.sqlite"}) fs::remove(dir + f);
  const std::string db = dir + "/d.sqlite";
  const nlohmann::json f32 = run_json(collect_args(db, 2));
  CHECK(f32["outcomes"]["measured"] == 2);
  const nlohmann::json f64 = run_json(collect_args(db, 2) + " --dtype f64");
  CHECK(f64["outcomes"]["measured"] == 2);  // not "existing": another value type
  CHECK(fingerprints(f64, "measured") == fingerprints(f32, "measured"));
  CHECK(run_json(collect_args(db, 2) + " --dtype f64")["outcomes"]["existing"] == 2);
  {
    ResultsDb d(db);
    const nlohmann::json stats = d.dataset_stats();
    INFO(stats.dump(2));
    CHECK(stats["spmv"]["groups"] == 2);
    CHECK(stats["spmv f64"]["groups"] == 2);
    int groups64 = 0;
    d.for_each_group("spmv", [&](const nlohmann::json& g) {
      groups64 += g.value("dtype", std::string("f32")) == "f64";
    });
    CHECK(groups64 == 2);
  }
  // Export and import keep the value type (and f32 groups carry no "dtype": exports as before).
  REQUIRE(test::run_cli("dataset export --db " + db + " -o " + dir + "/d.jsonl.gz").status == 0);
  REQUIRE(test::run_cli("dataset import --db " + dir + "/e.sqlite " + dir + "/d.jsonl.gz").status ==
          0);
  ResultsDb e(dir + "/e.sqlite");
  CHECK(e.dataset_stats()["spmv f64"]["groups"] == 2);
  CHECK(e.dataset_stats()["spmv"]["groups"] == 2);
  // Evaluating a model reads the groups of one value type.
  for (const char* dtype : {"f32", "f64"}) {
    const test::CliResult r = test::run_cli("evaluate --kernel spmv --split all --json --db " +
                                            dir + "/e.sqlite --dtype " + dtype);
    INFO(dtype << ": " << r.err);
    REQUIRE(r.status == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["summary"]["matrices"] == 2);
    CHECK(j["dtype"] == dtype);
  }
}
