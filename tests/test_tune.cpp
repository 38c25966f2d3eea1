// Unit "tune": `waco-hybrid tune` end to end on the bundled example: the JSON report (best,
// speedup_over_csr, status counts, kernel source), resuming from the results database, explicit
// schedule lists, and usage errors. Kept small (a few candidates, few repeats).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "support/cli_runner.hpp"
#include "support/test_paths.hpp"
#include "waco/kernels/context.hpp"

namespace fs = std::filesystem;

namespace {

using Result = waco::test::CliResult;

Result cli(const std::string& args) { return waco::test::run_cli(args); }

std::string example() { return waco::test::examples_dir() + "/bcsstk13.mtx.gz"; }

/// Options shared by every run: a private database and kernel cache, few repeats.
std::string common(const std::string& dir) {
  return "--db " + dir + "/results.sqlite --cache-dir " + dir + "/cache --no-plan-cache --repeat 3 --warmup 1 "
         "--confirm-rounds 4 --decide-rounds 4 --threads 2 ";
}

/// Starts `waco-hybrid ARGS` with stdout and stderr into the given files; returns its pid.
pid_t start_cli(const std::string& args, const std::string& out_path, const std::string& err_path) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    execl("/bin/sh", "sh", "-c", ("exec " + waco::test::cli_binary() + " " + args).c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

/// The file's text once it holds `text` (waiting up to 30 s; after that, whatever it holds).
std::string wait_for_text(const std::string& path, const std::string& text) {
  std::string so_far;
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(path);
    so_far.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (so_far.find(text) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return so_far;
}

/// The process's wait status and the file's text.
std::pair<int, std::string> wait_cli(pid_t pid, const std::string& err_path) {
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  std::ifstream e(err_path);
  return {st, std::string((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>())};
}

/// Runs `waco-hybrid ARGS`, waits until its stderr shows `started` (the Ctrl-C handler is installed
/// by then), then `after_ms` more, sends SIGINT and waits for it. Returns its wait status and its
/// stderr.
std::pair<int, std::string> interrupted_cli(const std::string& args, const std::string& out_path,
                                            const std::string& err_path, const std::string& started,
                                            int after_ms) {
  const pid_t pid = start_cli(args, out_path, err_path);
  wait_for_text(err_path, started);
  std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
  kill(pid, SIGINT);
  return wait_cli(pid, err_path);
}

}  // namespace

TEST_CASE("tune: a random search reports the best schedule and resumes from the database") {
  const std::string dir = waco::test::scratch_dir("tune-random");
  const std::string args =
      "tune --kernel spmv --search random --budget 3 --seed 5 --json --abandon-factor 0 "
      "--decide-runs 2 " +
      common(dir) + example();
  const Result r = cli(args);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("kernel") == "spmv");
  CHECK(j.at("search") == "random");
  CHECK(j.at("candidates") == 3);
  CHECK(j.at("considered") == 3);
  CHECK(j.at("measured") == 3);
  CHECK(j.at("reused") == 0);
  CHECK(j.at("complete") == true);
  const auto& space = j.at("space");
  CHECK(space.at("legal_count").get<std::uint64_t>() >= space.at("admissible_count").get<std::uint64_t>());
  CHECK(space.at("passes").is_array());
  std::int64_t counted = 0;
  for (const auto& [status, n] : j.at("status_counts").items()) counted += n.get<std::int64_t>();
  CHECK(counted == 3);
  CHECK(j.at("csr").at("status") == "ok");
  CHECK(j.at("csr_baseline").at("status") == "ok");
  // Two threads: how far apart two CPUs were before the references and after the decision;
  // null when this machine lets the test one CPU, or when the first probe gave up after 0.1 s
  // because another process kept a CPU busy (a test beside this one under ctest -j2), and
  // "after" null when only the second did.
  const nlohmann::json& rt = j.at("core_round_trip_ns");
  INFO(rt.dump());
  if (!rt.is_null()) {
    CHECK(rt.at("before").get<double>() > 0.0);
    CHECK((rt.at("after").is_null() || rt.at("after").get<double>() > 0.0));
  }
  REQUIRE(j.at("best").is_object());
  CHECK(j.at("best").at("median_s").get<double>() > 0.0);
  CHECK(j.at("speedup_over_csr").get<double>() > 0.0);
  // The confirmation: the search's 3 ok candidates measured again side by side.
  CHECK(j.at("confirmed") == true);
  const auto& confirm = j.at("confirm");
  CHECK(confirm.at("rounds") == 4);
  REQUIRE(confirm.at("ranking").size() == 3);
  std::set<std::size_t> ranks;
  double previous = 0.0;
  for (const auto& row : confirm.at("ranking")) {
    CHECK(row.at("status") == "ok");
    ranks.insert(row.at("search_rank").get<std::size_t>());
    CHECK(row.at("median_s").get<double>() >= previous);  // fastest first
    previous = row.at("median_s").get<double>();
    // Software counts around the side-by-side runs; disturbed ones were taken again.
    const auto& counters = row.at("counters");
    CHECK(counters.at("source") == "getrusage");
    CHECK(counters.at("retaken").get<int>() >= 0);
    CHECK(counters.at("cpu_s").get<double>() >= 0.0);
    CHECK(counters.at("page_faults").get<std::int64_t>() >= 0);
    // Hardware counters where the machine has them (KVM guests: backend "none", no values).
    const auto& hw = counters.at("hardware");
    const std::string backend = hw.at("backend");
    CHECK((backend == "none" || backend == "perf" || backend == "likwid"));
    if (backend == "none") {
      CHECK_FALSE(hw.contains("per_run"));
    } else {
      CHECK(hw.at("runs") == 3);
      CHECK(hw.at("per_run").at("cycles").get<double>() > 0);
      CHECK(hw.at("per_run").at("instructions").get<double>() > 0);
    }
  }
  CHECK(confirm.at("csr_counters").at("source") == "getrusage");
  // The economy: the time's parts and, with a gain, the calls that pay for it.
  const auto& economy = j.at("economy");
  CHECK(economy.at("total_s").get<double>() == Approx(j.at("time_s").get<double>()));
  CHECK(economy.at("measure_s").get<double>() > 0.0);
  CHECK(economy.at("confirm_s").get<double>() > 0.0);
  if (j.at("verdict") == "gain")
    CHECK(economy.at("break_even_calls").get<double>() > 0.0);
  else
    CHECK(economy.at("break_even_calls").is_null());
  CHECK(ranks == std::set<std::size_t>{1, 2, 3});
  // The verdict: the selection's winner against the faster csr reference, or, decided on fresh
  // runs, the leader fastest there.
  const auto& verdict = j.at("verdict_detail");
  CHECK(confirm.at("ranking")[0].at("ratio_to_best") == 1.0);
  const auto& decision = j.at("decision");
  const nlohmann::json* fastest = nullptr;  // the fresh runs' fastest leader
  if (decision.at("fresh") == true) {
    // The selection showed a gain: it was decided on two fresh runs of 4 rounds (--decide-rounds)
    // that timed the selection's best three (--decide-leaders: all 3 candidates here, when
    // verified) and both references again; only their rounds count. The second run is skipped
    // when the first already ruled a gain out (decision.stopped says why).
    const int runs = decision.at("runs").get<int>();
    CHECK(decision.at("runs_planned") == 2);
    if (decision.at("stopped").is_null())
      CHECK(runs == 2);
    else
      CHECK(runs == 1);
    CHECK(decision.at("rounds") == 4);
    REQUIRE(decision.at("leaders").size() >= 1);
    CHECK(decision.at("leaders").size() <= 3);
    CHECK(decision.at("leaders")[0].at("schedule") == confirm.at("ranking")[0].at("schedule"));
    // Together, the leaders' times compare; apart (the default: each leader in a child of its
    // own), their per-round ratios to the reference timed beside each do.
    const char* rank_key = decision.at("apart") == true ? "ratio_to_reference" : "median_s";
    for (const auto& l : decision.at("leaders"))
      if (l.at("status") == "ok" && (!fastest || l.at(rank_key) < fastest->at(rank_key)))
        fastest = &l;
    REQUIRE(fastest);
    CHECK(verdict.at("nominee") == fastest->at("schedule"));
    CHECK(verdict.at("rounds") == 4 * runs);
    CHECK(verdict.at("runs") == runs);
    CHECK(verdict.at("run_ratio_medians").size() == (runs > 1 ? static_cast<std::size_t>(runs) : 0u));
    CHECK(verdict.at("ratio_lo").get<double>() <= verdict.at("ratio_median").get<double>());
    CHECK(verdict.at("ratio_hi").get<double>() >= verdict.at("ratio_median").get<double>());
    CHECK(economy.at("decide_s").get<double>() > 0.0);
  } else {
    CHECK(verdict.at("nominee") == confirm.at("ranking")[0].at("schedule"));
    CHECK(verdict.at("rounds") == 4);  // the selection's rounds: no gain there, none to decide
    CHECK(economy.at("decide_s").is_null());
  }
  CHECK((decision.at("faster_reference") == "schedule" || decision.at("faster_reference") == "tie" ||
         decision.at("faster_reference") == "baseline"));
  if (j.at("verdict") == "gain") {
    REQUIRE(decision.at("fresh") == true);
    CHECK(verdict.at("ratio_hi").get<double>() < 1.0);
    CHECK(verdict.at("ratio_median").get<double>() <= 0.98);
    CHECK(j.at("speedup_interval").at("lo").get<double>() > 1.0);
    CHECK(j.at("claimed_speedup").get<double>() == Approx(verdict.at("speedup").get<double>()));
    CHECK(j.at("speedup_interval").at("hi").get<double>() >= j.at("speedup_interval").at("lo").get<double>());
    CHECK(fastest->at("schedule") == j.at("best").at("schedule"));
    for (const auto& row : confirm.at("ranking"))
      if (row.at("schedule") == j.at("best").at("schedule"))
        CHECK(row.at("search_rank") == j.at("best_search_rank"));
    // The speedups are the fresh runs' (the selection's timings chose, they do not judge);
    // apart, over the csr schedule's rounds beside the winner, which the report does not list.
    if (decision.at("apart") == false)
      CHECK(j.at("speedup_over_csr").get<double>() ==
            Approx(decision.at("csr_median_s").get<double>() /
                   fastest->at("median_s").get<double>()));
  } else {  // no gain over csr: the faster csr reference is the result
    REQUIRE((j.at("verdict") == "no-gain" || j.at("verdict") == "undecided"));
    const bool baseline = j.at("implementation") == "csr";
    CHECK(j.at("best").at("schedule") == j.at(baseline ? "csr_baseline" : "csr").at("schedule"));
    CHECK(j.at(baseline ? "speedup_over_csr_baseline" : "speedup_over_csr").get<double>() ==
          Approx(1.0));
    CHECK(j.at("claimed_speedup") == 1.0);  // the result is csr: nothing is claimed
    CHECK(j.at("speedup_interval").is_null());
  }
  CHECK(j.at("search_speedup_over_csr").get<double>() > 0.0);
  CHECK(j.at("speedup_over_csr_baseline").get<double>() > 0.0);
  if (j.at("implementation") == "generated")  // the hand-written csr has no source of its own
    CHECK(fs::exists(j.at("kernel_source").get<std::string>()));
  CHECK(j.at("time_s").get<double>() > 0.0);
  CHECK(j.at("context").contains("cpu"));
  CHECK(r.err.find("3/3 done") != std::string::npos);  // progress on stderr

  // The same command again measures nothing: everything comes from the database.
  const Result again = cli(args);
  REQUIRE(again.status == 0);
  const auto k = nlohmann::json::parse(again.out);
  CHECK(k.at("measured") == 0);
  CHECK(k.at("reused") == 3);
  // The search's order comes from the stored timings; the side-by-side winner may differ.
  CHECK(k.at("search_best").at("schedule") == j.at("search_best").at("schedule"));
  CHECK(k.at("search_best").at("median_s") == j.at("search_best").at("median_s"));
}

TEST_CASE("tune: an explicit schedule list, with failures recorded by status") {
  const std::string dir = waco::test::scratch_dir("tune-list");
  const std::string list = dir + "/schedules.txt";
  std::ofstream(list) << "# two schedules and a refused one\ncsr\n\n"
                         "order=i,k format=UC parallel=i threads=1 chunk=64\n"
                         "bcsr64x64\n";
  const Result r = cli("tune --kernel spmv --schedules " + list + " --max-padding 2 --json " +
                       common(dir) + example());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("search") == "list");
  CHECK(j.at("space").is_null());
  CHECK(j.at("candidates") == 3);
  CHECK(j.at("status_counts").at("ok") == 2);
  CHECK(j.at("status_counts").at("refused") == 1);
  REQUIRE(j.at("failures").size() == 1);
  CHECK(j.at("failures")[0].at("schedule").get<std::string>().find("split=i:64,k:64") == 0);
  CHECK_FALSE(j.at("failures")[0].at("reason").get<std::string>().empty());

  // A bad line is reported with its file and line number.
  std::ofstream(list) << "csr\norder=i,k format=XY\n";
  const Result bad = cli("tune --kernel spmv --schedules " + list + " " + common(dir) + example());
  CHECK(bad.status == 1);
  CHECK(bad.err.find("schedules.txt:2") != std::string::npos);
}

TEST_CASE("tune: Ctrl-C stops after the current candidate and the next run resumes") {
  const std::string dir = waco::test::scratch_dir("tune-interrupt");
  const std::string args = "tune --kernel spmv --search random --budget 16 --seed 9 --json " +
                           common(dir) + example();
  const std::string out_path = dir + "/out.json";
  // Let it measure a little after the search starts, then interrupt it.
  const auto [st, err] = interrupted_cli(args, out_path, dir + "/err.txt", "16 candidates", 1000);
  INFO(err);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 1);
  CHECK(err.find("interrupted") != std::string::npos);
  std::ifstream o(out_path);
  const auto first = nlohmann::json::parse(o);
  CHECK(first.at("complete") == false);
  CHECK(first.at("stopped_by") == "interrupted");
  const std::int64_t done = first.at("considered").get<std::int64_t>();
  CHECK(done < 16);

  const Result again = cli(args);
  REQUIRE(again.status == 0);
  const auto j = nlohmann::json::parse(again.out);
  CHECK(j.at("reused") == done);
  CHECK(j.at("measured") == 16 - done);
  CHECK(j.at("complete") == true);
}

TEST_CASE("tune: --cpu-lock waits for the lock before reading the file, and holds it to the end") {
  const std::string dir = waco::test::scratch_dir("tune-cpu-lock");
  const std::string lock = dir + "/cpu.lock", out_path = dir + "/out.json", err_path = dir + "/err.txt";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = start_cli("tune --kernel spmv --search random --budget 2 --seed 3 --json --cpu-lock " + lock +
                                  " " + common(dir) + example(),
                              out_path, err_path);
  const std::string waiting = wait_for_text(err_path, "waiting for the CPU lock");
  INFO(waiting);
  CHECK(waiting.find("waiting for the CPU lock " + lock) != std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int st = 0;
  CHECK(waitpid(pid, &st, WNOHANG) == 0);  // still waiting
  CHECK(waiting.find("candidates") == std::string::npos);
  REQUIRE(::flock(fd, LOCK_UN) == 0);
  // Once it runs, it holds the lock (stopped, so that it cannot end meanwhile) until it exits.
  wait_for_text(err_path, "candidates");
  REQUIRE(kill(pid, SIGSTOP) == 0);
  CHECK(::flock(fd, LOCK_EX | LOCK_NB) != 0);
  REQUIRE(kill(pid, SIGCONT) == 0);
  const auto [status, err] = wait_cli(pid, err_path);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::ifstream o(out_path);
  const nlohmann::json report = nlohmann::json::parse(o);
  CHECK(report.at("complete") == true);
  // The wait for the lock (at least 300 ms) is no cost of the tune.
  CHECK(report.at("time_s").get<double>() < wall - 0.25);
  CHECK(report.at("economy").at("total_s").get<double>() < wall - 0.25);
  CHECK(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  ::close(fd);
}

TEST_CASE("tune: usage errors") {
  const std::string dir = waco::test::scratch_dir("tune-usage");
  CHECK(cli("tune --help").status == 0);
  CHECK(cli("tune --help").out.find("Example") != std::string::npos);
  CHECK(cli("tune --kernel spmv --search sideways " + example()).status == 2);
  CHECK(cli("tune --kernel spmv --budget 3 --budget-seconds 4 " + example()).status == 2);
  CHECK(cli("tune --kernel spmv " + common(dir)).status == 2);  // no FILE
  const Result pass = cli("tune --kernel spmv --passes legality,no-such-pass " + common(dir) + example());
  CHECK(pass.status == 1);
  CHECK(pass.err.find("no-such-pass") != std::string::npos);
  const Result db = cli("tune --kernel spmv --budget 1 --db /proc/none/r.sqlite " + example());
  CHECK(db.status == 1);
  CHECK(db.err.find("results database") != std::string::npos);
  // An unwritable --output fails before any measurement: nothing recorded.
  const Result out = cli("tune --kernel spmv --budget 2 -o /proc/none/k.cpp " + common(dir) + example());
  CHECK(out.status == 1);
  CHECK(out.err.find("/proc/none/k.cpp") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/results.sqlite"));
  CHECK(cli("tune --kernel spmv --confirm -1 " + common(dir) + example()).status == 2);
  // Usage errors are one line starting with "error:", exit 2.
  for (const std::string& bad : {"tune --kernel spmv --no-such-option " + example(),
                                 "tune --kernel spmv --cache-level l9 " + example(),
                                 std::string("tune --kernel spmv --abandon-factor")}) {
    INFO(bad);
    const Result u = cli(bad);
    CHECK(u.status == 2);
    CHECK(u.err.rfind("error: ", 0) == 0);
    CHECK(std::count(u.err.begin(), u.err.end(), '\n') == 1);
  }
}

TEST_CASE("tune: --output writes the winner's drop-in header, and --confirm 0 keeps the search's order") {
  const std::string dir = waco::test::scratch_dir("tune-output");
  const std::string kernel = dir + "/tuned.hpp";
  const Result r = cli("tune --kernel spmv --search random --budget 3 --seed 2 --json -o " + kernel +
                       " " + common(dir) + example());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("output") == kernel);
  std::ifstream in(kernel);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The schedule (canonical text form), what it was tuned for, the two calls.
  CHECK(text.rfind("// waco-hybrid drop-in kernel: spmv in float (waco_value_t) with the schedule\n//   ", 0) == 0);
  CHECK(text.find("// tuned by waco-hybrid tune for spmv on " + example()) != std::string::npos);
  CHECK(text.find("(fingerprint " + j.at("fingerprint").get<std::string>()) != std::string::npos);
  CHECK(text.find("inline Format build(") != std::string::npos);
  CHECK(text.find("inline void spmv(const Format& f") != std::string::npos);
  // It compiles on its own (tests/test_standalone.cpp runs such headers against the reference).
  std::ofstream(dir + "/use.cpp") << "#include \"tuned.hpp\"\nint main() {\n"
                                     "  const long long rowptr[] = {0, 1, 2};\n  const int col[] = {1, 0};\n"
                                     "  const float v[] = {2, 3}, x[] = {1, 10};\n  float y[2];\n"
                                     "  waco_tuned::spmv(waco_tuned::build(2, 2, rowptr, col, v), x, y);\n"
                                     "  return y[0] == 20 && y[1] == 3 ? 0 : 1;\n}\n";
  CHECK(std::system(("c++ -O1 -fopenmp -std=c++17 -o " + dir + "/use " + dir + "/use.cpp && " + dir +
                     "/use").c_str()) == 0);

  // Without the confirmation the search's best wins and nothing is measured again (no racing:
  // on a busy machine all three were abandoned against csr, leaving no search best).
  const Result plain = cli("tune --kernel spmv --search random --budget 3 --seed 2 --json --confirm 0 "
                           "--abandon-factor 0 " + common(dir) + example());
  REQUIRE(plain.status == 0);
  const auto k = nlohmann::json::parse(plain.out);
  CHECK(k.at("confirmed") == false);
  CHECK(k.at("confirm").is_null());
  CHECK(k.at("best").at("schedule") == k.at("search_best").at("schedule"));
  CHECK(k.at("best_search_rank") == 1);
  CHECK(k.at("speedup_over_csr") == k.at("search_speedup_over_csr"));
}

TEST_CASE("tune: the model deciding alone nominates the dia baseline where the diagonal rule "
          "admits it, and its own best without the diagonal-storage pass") {
  const std::string dir = waco::test::scratch_dir("tune-model-alone-dia");
  // 4000 x 4000 with five full diagonals (offsets -2..2): dia stores 1.0 values a nonzero.
  const std::string banded = dir + "/banded.mtx";
  {
    std::ofstream f(banded);
    f << "%%MatrixMarket matrix coordinate real general\n4000 4000 " << 5 * 4000 - 6 << "\n";
    for (int r = 0; r < 4000; ++r)
      for (int c = std::max(0, r - 2); c <= std::min(3999, r + 2); ++c)
        f << r + 1 << " " << c + 1 << " " << (r == c ? 6.0 : -1.0 + 0.01 * ((r + c) % 7)) << "\n";
  }
  // No racing (--abandon-factor 0): under ctest -j2 a descheduled thread made the one nominee's
  // two timed runs take milliseconds, and racing abandoned it, leaving `top` empty.
  const std::string alone_args = "tune --kernel spmv --search model --confirm 0 --abandon-factor 0 --json ";
  const Result alone = cli(alone_args + common(dir) + banded);
  INFO(alone.err);
  REQUIRE(alone.status == 0);
  const auto j = nlohmann::json::parse(alone.out);
  CHECK(j.at("model_alone") == true);
  REQUIRE(j.at("top").size() == 1);  // the one nominee, whatever the guard run decided of it
  CHECK(j.at("top").at(0).at("schedule") == "impl=dia");
  CHECK(j.at("top").at(0).at("status") == "ok");
  CHECK(alone.err.find("the diagonal rule admits the dia baseline") != std::string::npos);
  // Without the pass that admits it, the model's own best is the nominee.
  const Result plain = cli(alone_args + "--passes "
                           "legality,sparse-iteration,parallelize-one,parallelize-outer,"
                           "no-useless-partition,concordant-dense,vectorizable-inner,tile-window,"
                           "block-fill,chunk-rows,narrow-indices " + common(dir) + banded);
  INFO(plain.err);
  REQUIRE(plain.status == 0);
  const auto k = nlohmann::json::parse(plain.out);
  REQUIRE(k.at("top").size() == 1);
  CHECK(k.at("top").at(0).at("schedule") != "impl=dia");
  CHECK(k.at("implementation") != "dia");
}

TEST_CASE("tune: -o delivers the kernel that was measured, with its race strategy") {
  const std::string dir = waco::test::scratch_dir("tune-output-race");
  // A csc schedule: its parallel loop does not index the output, so the race strategy matters;
  // both strategies, forced, and auto (resolved from the stored values, as the measured kernel).
  const std::string list = dir + "/csc.txt";
  std::ofstream(list) << "order=k,i format=UC parallel=k chunk=32\n";
  for (const std::string race : {"atomic", "private", "auto"}) {
    INFO(race);
    const std::string header = dir + "/tuned-" + race + ".hpp";
    // A database per strategy: the results database does not key measurements by it.
    const std::string sub = dir + "/" + race;
    fs::create_directories(sub);
    // No racing: the csc kernel may be 3x slower than csr, and it is the kernel under test.
    const Result r = cli("tune --kernel spmv --json --confirm 0 --abandon-factor 0 --race " + race + " --schedules " +
                         list + " -o " + header + " " + common(sub) + example());
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j.at("best").at("schedule").get<std::string>().find("parallel=k") != std::string::npos);
    const std::string measured = j.at("best").at("race");
    if (race != "auto") CHECK(measured == race);
    // The header's kernel is emit --standalone's for the measured strategy, byte for byte after
    // the first comment block (what it was tuned for).
    std::ifstream in(header);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Result e = cli("emit --kernel spmv --standalone --race " + measured + " --schedule '" +
                         j.at("best").at("schedule").get<std::string>() + "'");
    REQUIRE(e.status == 0);
    const auto body = [](const std::string& t) { return t.substr(t.find("\n#")); };
    CHECK(body(text) == body(e.out));
    CHECK((text.find("omp atomic") != std::string::npos) == (measured == "atomic"));
  }
}

TEST_CASE("tune: a winner never slower than csr: every candidate slower gives csr, verdict no-gain") {
  const std::string dir = waco::test::scratch_dir("tune-guard");
  // Dense storage of a 2% dense matrix: about 50 times the work of csr, whatever the chunk.
  const std::string list = dir + "/slow.txt";
  std::ofstream(list) << "order=i,k format=UU parallel=i chunk=16\n"
                         "order=i,k format=UU parallel=i chunk=64\n";
  const Result r = cli("tune --kernel spmv --json --max-padding 100 --abandon-factor 0 --schedules " +
                       list + " " + common(dir) + example());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("confirmed") == true);
  CHECK(j.at("verdict") == "no-gain");
  // The faster csr reference: the csr schedule or the hand-written baseline.
  const bool baseline = j.at("implementation") == "csr";
  CHECK(j.at("best").at("schedule") == j.at(baseline ? "csr_baseline" : "csr").at("schedule"));
  CHECK(j.at("claimed_speedup").get<double>() == 1.0);
  if (baseline) {
    // The baseline when it ran faster, or on a tie (decide.cpp: a tie goes to the hand-written
    // csr, whichever way the median ratio leans inside the interval).
    const nlohmann::json& d = j.at("decision");
    INFO(d.dump());
    CHECK((d.value("faster_reference", "") == "tie" ||
           d.at("references").at("ratio_median").get<double>() > 1.0));
    CHECK(j.at("kernel_source").is_null());
  } else {
    CHECK(j.at("speedup_over_csr").get<double>() == Approx(1.0));
    CHECK(j.at("kernel_source") == j.at("csr").at("kernel_source"));
  }
  const auto& d = j.at("verdict_detail");
  CHECK(d.at("gain") == false);
  CHECK(d.at("ratio_median").get<double>() > 1.0);
  CHECK(d.at("nominee").get<std::string>().find("format=UU") != std::string::npos);
  CHECK(j.at("best_search_rank").is_null());
  // Reproducible from the output: every pass parameter and the cache the tile model used.
  const auto& pp = j.at("pass_params");
  for (const char* k : {"tile_window", "max_block_padding", "min_chunks_per_thread",
                        "chunk_window", "max_serial_work", "cache_level", "cache_bytes",
                        "cache_fraction"})
    CHECK(pp.contains(k));
  CHECK(j.at("abandon_factor") == 0.0);
  CHECK(j.at("cache").contains("rule"));
}

TEST_CASE("tune: racing abandons hopeless candidates and reports them") {
  const std::string dir = waco::test::scratch_dir("tune-racing");
  const std::string list = dir + "/mixed.txt";
  std::ofstream(list) << "csr\norder=i,k format=UU parallel=i chunk=16\n";
  // One thread: on a loaded machine a 2-thread kernel waits for a descheduled thread, whatever
  // its work, which could hide a 50-fold gap.
  std::string one = common(dir);
  one.replace(one.find("--threads 2"), 11, "--threads 1");
  const Result r = cli("tune --kernel spmv --json --max-padding 100 --schedules " + list + " " + one +
                       example());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("status_counts").at("abandoned") == 1);
  CHECK(j.at("status_counts").at("ok") == 1);
  CHECK(j.at("abandoned_s").get<double>() > 0.0);
  CHECK(j.at("abandon_factor").get<double>() > 1.0);
  // Every candidate abandoned: none completed its timing, and csr is the result.
  const std::string only = dir + "/only-slow.txt";
  std::ofstream(only) << "order=i,k format=UU parallel=i chunk=32\n";
  const Result s = cli("tune --kernel spmv --json --max-padding 100 --schedules " + only + " " +
                       one + example());
  INFO(s.err);
  REQUIRE(s.status == 0);
  const auto sj = nlohmann::json::parse(s.out);
  CHECK(sj.at("status_counts").at("abandoned") == 1);
  CHECK(sj.at("verdict") == "no-gain");
  // The faster csr reference of the side-by-side run: the csr schedule or the hand-written csr.
  CHECK(sj.at("best").at("schedule") ==
        sj.at(sj.at("implementation") == "csr" ? "csr_baseline" : "csr").at("schedule"));
  // The pass parameters and cache options given are recorded as given.
  const Result p = cli("tune --kernel spmm --budget 1 --json --min-chunks-per-thread 8 "
                       "--chunk-window 1 --cache-bytes 1048576 --cache-fraction 0.25 " +
                       common(dir) + example());
  INFO(p.err);
  REQUIRE(p.status == 0);
  const auto k = nlohmann::json::parse(p.out);
  CHECK(k.at("pass_params").at("min_chunks_per_thread") == 8);
  CHECK(k.at("pass_params").at("chunk_window") == 1);
  CHECK(k.at("pass_params").at("cache_bytes") == 1048576);
  CHECK(k.at("cache").at("per_thread_bytes") == 1048576);
}

TEST_CASE("tune: --explain names the winner, the runner-up and the facts behind the space") {
  const std::string dir = waco::test::scratch_dir("tune-explain");
  // No racing: all four complete, so that a runner-up is confirmed even on a loaded machine.
  const Result r = cli("tune --kernel spmm --dense 16 --search random --budget 4 --seed 2 --json "
                       "--abandon-factor 0 --explain " + common(dir) + example());
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& e = j.at("explain");
  REQUIRE(e.at("winner").is_object());
  CHECK(e.at("winner").at("schedule") == j.at("confirm").at("ranking")[0].at("schedule"));
  CHECK(e.at("winner").at("proposed_rank").get<int>() >= 1);
  CHECK(e.at("winner").at("counters").at("source") == "getrusage");
  CHECK(e.at("winner").at("speedup_over_csr").get<double>() > 0.0);
  REQUIRE(e.at("runner_up").is_object());
  CHECK(e.at("runner_up").at("schedule") != e.at("winner").at("schedule"));
  // The tile model's centres and register tiles drove the tile-window pass.
  CHECK(e.at("facts").at("tile-window").get<std::string>().find("model centers") !=
        std::string::npos);
  CHECK(e.at("admissible") == j.at("space").at("admissible_count"));
  // The text form prints the same.
  const Result t = cli("tune --kernel spmm --dense 16 --search random --budget 4 --seed 2 "
                       "--abandon-factor 0 --explain " + common(dir) + example());
  REQUIRE(t.status == 0);
  CHECK(t.out.find("explain:") != std::string::npos);
  CHECK(t.out.find("runner-up") != std::string::npos);
  CHECK(t.out.find("tile-window") != std::string::npos);
}

TEST_CASE("tune: the tuning cache returns a decision without searching, and a changed key, --refresh "
          "or a corrupt entry tunes again") {
  const std::string dir = waco::test::scratch_dir("tune-plan-cache");
  const std::string plans = dir + "/plans";
  // common() turns the cache off; these runs name their own.
  const std::string base = "tune --kernel spmv --search random --budget 2 --seed 3 --json --db " +
                           dir + "/results.sqlite --cache-dir " + dir +
                           "/cache --repeat 3 --warmup 1 --confirm-rounds 4 --plan-cache " + plans + " ";
  const Result first = cli(base + "--threads 2 " + example());
  INFO(first.err);
  REQUIRE(first.status == 0);
  const auto a = nlohmann::json::parse(first.out);
  if (a.at("verdict") == "undecided") {  // a gain timed on a busy machine: nothing is cached
    CHECK(a.at("plan_cache").is_null());
    WARN("the machine was busy: the tuning cache was not exercised");
    return;
  }
  REQUIRE((a.at("verdict") == "gain" || a.at("verdict") == "no-gain"));
  CHECK(a.at("from_cache") == false);
  REQUIRE(a.at("plan_cache").is_object());
  const std::string entry = a.at("plan_cache").at("path");
  CHECK(fs::exists(entry));

  // The same key: from the cache, nothing measured, the same decision; -o still writes the kernel.
  const Result second = cli(base + "--threads 2 -o " + dir + "/k.cpp " + example());
  INFO(second.err);
  REQUIRE(second.status == 0);
  const auto b = nlohmann::json::parse(second.out);
  CHECK(b.at("from_cache") == true);
  CHECK(b.at("best").at("schedule") == a.at("best").at("schedule"));
  CHECK(b.at("verdict") == a.at("verdict"));
  CHECK(b.at("plan_cache").at("path") == entry);
  CHECK(b.at("cached_call_s").get<double>() < 5.0);
  CHECK(second.err.find("from cache") != std::string::npos);
  CHECK(fs::file_size(dir + "/k.cpp") > 100);
  // Text output says so too.
  const Result text = cli("tune --kernel spmv --search random --budget 2 --db " + dir +
                          "/results.sqlite --cache-dir " + dir + "/cache --plan-cache " + plans +
                          " --threads 2 " + example());
  CHECK(text.out.find("from cache") != std::string::npos);

  // Another thread count is another key: tuned, and stored beside the first.
  const auto c = nlohmann::json::parse(cli(base + "--threads 1 " + example()).out);
  CHECK(c.at("from_cache") == false);
  CHECK(c.at("plan_cache").at("path") != entry);

  // --refresh tunes again and replaces the entry.
  const auto d = nlohmann::json::parse(cli(base + "--threads 2 --refresh " + example()).out);
  CHECK(d.at("from_cache") == false);
  CHECK(d.at("plan_cache").at("path") == entry);

  // A corrupt entry is reported, ignored and replaced.
  {
    std::ofstream out(entry, std::ios::trunc);
    out << "{\"format\": \"waco-hybrid tuning cache\", \"version\": 1, \"key\": ";
  }
  const Result corrupt = cli(base + "--threads 2 " + example());
  REQUIRE(corrupt.status == 0);
  CHECK(corrupt.err.find("is corrupt") != std::string::npos);
  CHECK(nlohmann::json::parse(corrupt.out).at("from_cache") == false);
  CHECK(nlohmann::json::parse(cli(base + "--threads 2 " + example()).out).at("from_cache") == true);

  // --no-plan-cache with --plan-cache or --refresh is a usage error.
  CHECK(cli("tune --kernel spmv --no-plan-cache --refresh " + example()).status == 2);
  CHECK(cli("tune --kernel spmv --no-plan-cache --plan-cache " + plans + " " + example()).status == 2);
}

TEST_CASE("tune: --expected-calls bounds the search by the calls' csr time, or returns csr") {
  const std::string dir = waco::test::scratch_dir("tune-expected-calls");
  const std::string plans = dir + "/plans";
  const std::string common_cached = "--db " + dir + "/results.sqlite --cache-dir " + dir +
                                    "/cache --repeat 3 --warmup 1 --confirm-rounds 4 --threads 2 ";
  // bcsstk13's csr SpMV takes ~20 us: 10% of 10 calls is 2 us, less than anything costs.
  const Result none = cli("tune --kernel spmv --search random --budget 5 --json --plan-cache " +
                          plans + " " + common_cached + "--expected-calls 10 " + example());
  INFO(none.err);
  REQUIRE(none.status == 0);
  const auto n = nlohmann::json::parse(none.out);
  CHECK(n.at("verdict") == "not-worth-it");
  CHECK(n.at("measured") == 0);
  CHECK(n.at("best").at("schedule") == n.at("csr").at("schedule"));
  const auto& e = n.at("economy");
  CHECK(e.at("expected_calls") == 10);
  CHECK(e.at("calls_budget").at("worth_it") == false);
  CHECK(e.at("calls_budget").at("reason").get<std::string>().find("cannot pay for itself") !=
        std::string::npos);
  CHECK(e.at("pays_off_within_expected_calls") == false);
  CHECK(none.err.find("cannot pay for itself") != std::string::npos);
  // Such a decision depends on the calls: it is not cached.
  CHECK(n.at("plan_cache").is_null());
  CHECK_FALSE(fs::exists(plans));

  // Many calls afford the whole budget of 5 candidates.
  const Result many = cli("tune --kernel spmv --search random --budget 5 --json " + common(dir) +
                          "--expected-calls 1000000000 " + example());
  INFO(many.err);
  REQUIRE(many.status == 0);
  const auto m = nlohmann::json::parse(many.out);
  CHECK(m.at("verdict") != "not-worth-it");
  CHECK(m.at("candidates") == 5);
  CHECK(m.at("economy").at("calls_budget").at("worth_it") == true);
  CHECK(m.at("economy").at("calls_budget").at("candidates").get<std::int64_t>() >= 5);
  CHECK(m.at("economy").at("pays_off_within_expected_calls").is_boolean());
}

TEST_CASE("tune: --adaptive runs the library's adaptive plan on calls of its own") {
  const std::string dir = waco::test::scratch_dir("tune-adaptive");
  const std::string caches = "--plan-cache " + dir + "/plans --cache-dir " + dir + "/cache --threads 2 ";
  // 10 calls of a ~20 us SpMV: 10% of their csr time cannot pay for choosing (as waco::tune with
  // Options::adaptive and expected_calls 10 answers: test_api).
  const Result few = cli("tune --kernel spmv --adaptive --expected-calls 10 --json " + caches + example());
  INFO(few.err);
  REQUIRE(few.status == 0);
  const auto f = nlohmann::json::parse(few.out);
  CHECK(f.at("mode") == "adaptive");
  CHECK(f.at("verdict") == "not-worth-it");
  CHECK(f.at("implementation") == "csr");
  CHECK(f.at("drive").at("calls") == 10);
  CHECK(f.at("drive").at("settled") == true);
  CHECK(f.at("drive").at("csr_wall_s").get<double>() > 0);
  CHECK(f.at("economy").at("expected_calls") == 10);
  CHECK_FALSE(fs::exists(dir + "/plans"));  // a not-worth-it answer depends on the calls

  // Calls enough to choose among the shipped kernels and try them: whatever it settles on is
  // stored as a tune's decision, which the next tune (measured) returns from the cache.
  const Result many = cli("tune --kernel spmv --adaptive --expected-calls 100000000 --calls 6000 "
                          "--nominees 2 --no-compare --json " + caches + example());
  INFO(many.err);
  REQUIRE(many.status == 0);
  const auto m = nlohmann::json::parse(many.out);
  CHECK(m.at("drive").at("calls") == 6000);
  CHECK(m.at("drive").at("csr_wall_s").is_null());
  CHECK_FALSE(m.at("drive").contains("check"));  // --no-compare: neither csr alone nor a check
  CHECK(m.at("adaptive").at("nominees") == 2);
  CHECK(m.at("adaptive").at("nomination").is_object());
  const std::string verdict = m.at("verdict");
  CHECK((verdict == "gain" || verdict == "no-gain" || verdict == "exploring"));
  if (verdict != "exploring") {
    CHECK(m.at("plan_cache").at("path").is_string());
    const Result again = cli("tune --kernel spmv " + caches + example());
    INFO(again.err);
    CHECK(again.status == 0);
    CHECK(again.out.find("decided by an adaptive plan") != std::string::npos);
    CHECK(again.out.find(m.at("schedule").get<std::string>()) != std::string::npos);
  }

  // With the comparison: csr alone on as many calls, and a gain judged again on 48 fresh pairs
  // of the chosen kernel and csr (drive.check); no check without a gain.
  const Result compared = cli("tune --kernel spmv --adaptive --expected-calls 100000000 --calls 3000 "
                              "--nominees 2 --no-plan-cache --json " + example());
  INFO(compared.err);
  REQUIRE(compared.status == 0);
  const nlohmann::json drive = nlohmann::json::parse(compared.out).at("drive");
  CHECK(drive.at("wall_ratio").get<double>() > 0);
  if (nlohmann::json::parse(compared.out).at("verdict") == "gain") {
    CHECK(drive.at("check").at("rounds") == 48);
    CHECK(drive.at("check").at("speedup_lo").get<double>() <= drive.at("check").at("speedup_hi").get<double>());
  } else {
    CHECK_FALSE(drive.contains("check"));
  }

  // What an adaptive plan cannot do, said before any work.
  const Result random = cli("tune --kernel spmv --adaptive --search random " + caches + example());
  CHECK(random.status != 0);
  CHECK(random.err.find("rank with the model") != std::string::npos);
  CHECK(cli("tune --kernel spmv --adaptive --schedules x.txt " + caches + example()).status != 0);
  CHECK(cli("tune --kernel spmv --nominees 2 " + caches + example()).status != 0);
}

TEST_CASE("tune: SpMV's adaptive plans take the short list's order and keep its no-gain where "
          "SpMM's keep none") {
  const std::string dir = waco::test::scratch_dir("tune-adaptive-prior");
  const std::string shipped = dir + "/shipped";
  {
    std::ofstream f(dir + "/list.txt");
    // Chunks of one row, dynamically scheduled: 3-4x slower than csr on the example (2 threads),
    // so that the list's order finds no gain.
    f << "csr\norder=i,k format=UC parallel=i threads=2 chunk=1\n"
      << "order=i,k format=CC parallel=i threads=2 chunk=1\n";
  }
  const Result pre = cli("precompile --kernel spmv --list " + dir + "/list.txt --out " + shipped + " -q");
  INFO(pre.err);
  REQUIRE(pre.status == 0);
  const auto tune_args = [&](const std::string& plans) {
    return "tune --kernel spmv --adaptive --expected-calls 100000000 --calls 4000 "
           "--nominees 2 --no-compare --threads 2 --json --plan-cache " +
           plans + " --cache-dir " + dir + "/cache " + example();
  };
  const std::string args = tune_args(dir + "/plans");
  const Result r = waco::test::run_cli(args, "WACO_SHIPPED_KERNELS=" + shipped);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const nlohmann::json& a = j.at("adaptive");
  CHECK(a.at("nomination").at("search") == "prior");
  // The list's order, csr's own schedule left out (it can only tie), with the plan's threads.
  REQUIRE(a.at("arms").size() == 3);
  CHECK(a.at("arms").at(1).at("schedule") == "order=i,k format=UC parallel=i threads=2 chunk=1");
  CHECK(a.at("arms").at(2).at("schedule") == "order=i,k format=CC parallel=i threads=2 chunk=1");
  {  // csr serial on this matrix (chunk=auto's rule, pinned): the list still runs on the plan's
     // threads, not csr's one (against a serial csr, a nominee on two threads can gain: its
     // decision goes to a tuning cache of its own, not the one checked below); --prior-choice
     // is SpMV's default
    const Result serial = waco::test::run_cli(
        tune_args(dir + "/plans-serial") + " --prior-choice",
        "WACO_SHIPPED_KERNELS=" + shipped + " WACO_CSR_SERIAL_NNZ=1000000000");
    INFO(serial.err);
    REQUIRE(serial.status == 0);
    const nlohmann::json js = nlohmann::json::parse(serial.out);
    CHECK(js.at("adaptive").at("nomination").at("search") == "prior");
    const nlohmann::json& arms = js.at("adaptive").at("arms");
    REQUIRE(arms.size() == 3);
    CHECK(arms.at(1).at("schedule") == "order=i,k format=UC parallel=i threads=2 chunk=1");
    CHECK(arms.at(2).at("schedule") == "order=i,k format=CC parallel=i threads=2 chunk=1");
  }
  // SpMV's way to choose: its no-gain is the plan's decision, kept in the tuning cache.
  CHECK(j.at("verdict") == "no-gain");
  REQUIRE(j.at("plan_cache").at("path").is_string());
  CHECK(fs::exists(j.at("plan_cache").at("path").get<std::string>()));
  // --model-choice: the model ranks the list.
  const Result model = waco::test::run_cli(
      "tune --kernel spmv --adaptive --model-choice --expected-calls 100000000 --calls 50 "
      "--nominees 2 --no-compare --no-plan-cache --json --cache-dir " + dir + "/cache " + example(),
      "WACO_SHIPPED_KERNELS=" + shipped);
  INFO(model.err);
  REQUIRE(model.status == 0);
  const nlohmann::json mj = nlohmann::json::parse(model.out);
  const nlohmann::json& mn = mj.at("adaptive").at("nomination");
  CHECK(mn.at("search") == "model");
  CHECK(mn.at("search_info").at("shortlist") == true);  // the model ranked the short list
  CHECK(cli("tune --kernel spmv --adaptive --model-choice --prior-choice " + example()).status != 0);
  // The list's order reads the list only as far as its nominees need, and a damaged line (here
  // the second) is left out, the lines after it kept (the model's choice too parses the rest
  // without it).
  {
    std::vector<std::string> lines;
    {
      std::ifstream in(shipped + "/spmv.txt");
      for (std::string line; std::getline(in, line);) lines.push_back(line);
    }
    REQUIRE(lines.size() == 4);  // the header comment, csr, UC chunk=1, CC chunk=1
    lines.insert(lines.begin() + 2, "order=i,k format=XY parallel=i  # damaged");
    {
      std::ofstream out(shipped + "/spmv.txt");
      for (const std::string& line : lines) out << line << "\n";
    }
    const auto read = [&](int nominees) {
      const Result d = waco::test::run_cli(
          "tune --kernel spmv --adaptive --expected-calls 100000000 --calls 50 --nominees " +
              std::to_string(nominees) +
              " --no-compare --no-plan-cache --threads 2 --json --cache-dir " + dir + "/cache " +
              example(),
          "WACO_SHIPPED_KERNELS=" + shipped);
      INFO(d.err);
      REQUIRE(d.status == 0);
      return nlohmann::json::parse(d.out).at("adaptive");
    };
    const nlohmann::json one = read(1);
    CHECK(one.at("nomination").at("shortlist") == 4);
    // csr and the damaged line (both left out), then the first nominee; not the last line
    CHECK(one.at("nomination").at("read") == 3);
    REQUIRE(one.at("arms").size() == 2);
    CHECK(one.at("arms").at(1).at("schedule") ==
          "order=i,k format=UC parallel=i threads=2 chunk=1");
    const nlohmann::json two = read(2);
    CHECK(two.at("nomination").at("read") == 4);
    REQUIRE(two.at("arms").size() == 3);
    CHECK(two.at("arms").at(2).at("schedule") ==
          "order=i,k format=CC parallel=i threads=2 chunk=1");
    const Result m = waco::test::run_cli(
        "tune --kernel spmv --adaptive --model-choice --expected-calls 100000000 --calls 50 "
        "--nominees 2 --no-compare --no-plan-cache --json --cache-dir " +
            dir + "/cache " + example(),
        "WACO_SHIPPED_KERNELS=" + shipped);
    INFO(m.err);
    REQUIRE(m.status == 0);
    CHECK(nlohmann::json::parse(m.out)
              .at("adaptive")
              .at("nomination")
              .at("search_info")
              .at("shortlist") == true);
  }
  // SpMM's plans choose by the model: a no-gain of its list's order (--prior-choice) is no
  // verdict on the model's nominees, and is not kept. Each kernel here runs ~10x csr's time
  // (the dense loop outermost: A read once a column of C).
  {
    std::ofstream f(dir + "/spmm.txt");
    f << "order=j,i,k format=UC parallel=j threads=2 chunk=1\n"
      << "order=j,i,k format=UC parallel=j threads=2 chunk=static\n";
  }
  const Result pre_mm = cli("precompile --kernel spmm --list " + dir + "/spmm.txt --out " + shipped +
                            "-mm -q");
  INFO(pre_mm.err);
  REQUIRE(pre_mm.status == 0);
  const Result mm = waco::test::run_cli(
      "tune --kernel spmm --dense 16 --adaptive --prior-choice --expected-calls 100000000 "
      "--calls 2000 --nominees 2 --no-compare --threads 2 --json --plan-cache " + dir +
          "/plans-mm --cache-dir " + dir + "/cache " + example(),
      "WACO_SHIPPED_KERNELS=" + shipped + "-mm");
  INFO(mm.err);
  REQUIRE(mm.status == 0);
  const auto jm = nlohmann::json::parse(mm.out);
  CHECK(jm.at("adaptive").at("nomination").at("search") == "prior");
  CHECK(jm.at("verdict") == "no-gain");
  CHECK(jm.at("plan_cache").at("skipped").get<std::string>().find("short list's order") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/plans-mm"));
  // Without a short list (the tests' WACO_SHIPPED_KERNELS=none) the model ranks, whatever the flag.
  const Result none = cli("tune --kernel spmv --adaptive --prior-choice --expected-calls 100000000 "
                          "--calls 50 --no-compare --no-plan-cache --json " + example());
  INFO(none.err);
  REQUIRE(none.status == 0);
  CHECK(nlohmann::json::parse(none.out).at("adaptive").at("nomination").at("search") == "model");
}

TEST_CASE("tune: Ctrl-C ends tune --adaptive with a line saying so, status 1") {
  const std::string dir = waco::test::scratch_dir("tune-adaptive-interrupt");
  const std::string args = "tune --kernel spmv --adaptive --calls 100000000000 --no-plan-cache "
                           "--threads 2 --cache-dir " + dir + "/cache " + example();
  // The first progress line comes after a second of calls.
  const auto [st, err] = interrupted_cli(args, dir + "/out.txt", dir + "/err.txt", "tune: adaptive:", 0);
  INFO(err);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 1);
  CHECK(err.find("tune: interrupted") != std::string::npos);
  CHECK(err.find("internal error") == std::string::npos);
}
