// Unit "faults": the measuring path under faults (issue 39, "hardening"), end to end through the
// waco-hybrid binary. Each case fails when data is lost:
// - the disk filling up under the results database and under the kernel cache, each case once per
//   way of filling it that works here: a small tmpfs (needs the right to mount), a file size limit
//   (RLIMIT_FSIZE) set by util-linux's prlimit (when installed), and the same limit set by the
//   shell's own `ulimit -f` (always there): a clean `error:`, every row stored before intact, no
//   failure stored as the candidate's, and a rerun with space completes with no row lost or
//   repeated;
// - the compiler missing, killed, or rejecting the source: the first two are the machine's
//   failures (the tune stops, nothing stored for the candidate), the last the candidate's (stored);
//   and the measuring child killed (SIGKILL) while it compiles: no compiler process outlives it;
// - SIGTERM and SIGINT to a running tune, collect and ablate: the command ends, no process of it
//   is left (this test adopts orphans: PR_SET_CHILD_SUBREAPER), nothing half-stored, and a rerun
//   completes with no row lost or repeated;
// - two collects on one database (also named through a symbolic link), and two collectors of one
//   matrix racing to store it: one group per matrix, no row lost or repeated;
// - a kernel that segfaults or spins (a compiler that plants the fault in some kernels), measured
//   alone (a schedule list: stored as the candidate's failure, reused, measured again with
//   --retry-failed in its own row) and side by side (the model's nominees: that nominee fails
//   alone, the others and the csr references are measured and the tune decides). The Measurer's
//   own cases (a hook in the child) are in test_measure.cpp.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli_runner.hpp"
#include "support/test_paths.hpp"
#include "waco/heuristics/collector.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/recipe.hpp"

namespace fs = std::filesystem;
using namespace waco;
using Result = test::CliResult;
using Clock = std::chrono::steady_clock;

namespace {

// The csr schedule's chunk=auto decides serial or parallel by timing both loops on the matrix;
// with a CPU kept busy (a test beside this one, ctest -j2) it decided serial in one tune and
// parallel in the next, which stores the csr schedule again under another row (threads 1 and 2)
// and fails every "rows kept" check here. Pinned for every command these tests start.
const bool csr_decision_pinned = ::setenv("WACO_CSR_SERIAL_NNZ", "3072", 1) == 0;

/// SIGTERM to pid `signals` times, 100 ms apart (once: stop after the current step; twice: at once).
void terminate(pid_t pid, int signals) {
  for (int i = 0; i < signals; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::kill(pid, SIGTERM);
  }
}

std::string example() { return test::examples_dir() + "/bcsstk13.mtx.gz"; }

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return {};
  try {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {  // a /proc file of a process that just ended
    return {};
  }
}

/// A tune of the example (random search, `budget` candidates), small and quick.
std::string tune_args(const std::string& db, const std::string& cache, int budget) {
  return "tune --kernel spmv --search random --budget " + std::to_string(budget) +
         " --seed 5 --json --abandon-factor 0 --db " + db + " --cache-dir " + cache +
         " --no-plan-cache --repeat 3 --warmup 1 --confirm-rounds 4 --decide-rounds 4 --threads 2 " +
         example();
}

/// A small collection (as test_collect.cpp's).
std::string collect_args(const std::string& db, int mix, const std::string& cache) {
  return "collect --kernel spmv --db " + db + " --mix " + std::to_string(mix) +
         " --max-nnz 3000 --schedules 5 --rounds 2 --warmup 0 --busy-wait 0 --threads 2"
         " --cache-dir " + cache;
}

/// Whether stderr holds an `error: ` line (warnings may come before it).
bool has_error_line(const std::string& err) {
  return err.rfind("error: ", 0) == 0 || err.find("\nerror: ") != std::string::npos;
}

std::string shared_cache() { return std::string(WACO_BINARY_DIR) + "/test-kernel-cache"; }

// ---- the results database, read through SQLite itself -------------------------------------

/// One row of `measurements`: its identity and what was measured.
struct Row {
  std::string identity;  ///< matrix, schedule, kernel, implementation, dense, threads, repeats
  std::string content;   ///< status, median, reason, created, group
};

std::vector<Row> measurement_rows(const std::string& db_path) {
  std::vector<Row> rows;
  if (!fs::exists(db_path)) return rows;
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt* s = nullptr;
  const char* sql =
      "SELECT matrix_id || '/' || ifnull(schedule_id, '-') || '/' || kernel || '/' || "
      "implementation || '/' || dense || '/' || threads || '/' || repeats, status || '/' || "
      "ifnull(median_s, '-') || '/' || reason || '/' || created || '/' || ifnull(group_id, '-') "
      "FROM measurements";
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &s, nullptr) == SQLITE_OK);
  while (sqlite3_step(s) == SQLITE_ROW)
    rows.push_back({reinterpret_cast<const char*>(sqlite3_column_text(s, 0)),
                    reinterpret_cast<const char*>(sqlite3_column_text(s, 1))});
  sqlite3_finalize(s);
  sqlite3_close(db);
  return rows;
}

/// A single-number query.
std::int64_t query_int(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt* s = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(s) == SQLITE_ROW);
  const std::int64_t v = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(db);
  return v;
}

/// Whether an ablation row stored earlier is still there as it was: the same row, or for the
/// side-by-side row the same measured passes and runs with later passes after them (ablate
/// --final-passes adds passes to a stored row).
bool kept_or_extended(const std::string& config, const std::string& before, const std::string& after) {
  if (before == after) return true;
  if (config != "side-by-side") return false;
  const auto json_of = [](const std::string& r) { return nlohmann::json::parse(r.substr(r.find('/') + 1)); };
  const nlohmann::json b = json_of(before), a = json_of(after);
  // What was measured stays: each stored pass's bench files and time, each stored run's time,
  // state and pass. What is read from it may change: a run's reference and speedups, a pass's
  // settled and undecided, all judged again against the csr reference that was faster over every
  // pass (with_common_reference), which the new pass can turn to the other one.
  const std::map<std::string, std::vector<std::string>> measured = {
      {"passes", {"runs", "seconds", "busy"}}, {"runs", {"seconds", "busy", "core_round_trip_ns", "pass"}}};
  for (const auto& [key, fields] : measured) {
    const nlohmann::json empty = nlohmann::json::array();
    const nlohmann::json& x = b.contains(key) ? b.at(key) : empty;
    const nlohmann::json& y = a.contains(key) ? a.at(key) : empty;
    if (x.size() >= y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      for (const std::string& f : fields)
        if (x[i].value(f, nlohmann::json()) != y[i].value(f, nlohmann::json())) return false;
  }
  return true;
}

/// The ablation rows of a results database by configuration: created and row (none when the
/// database or its table does not exist yet).
std::map<std::string, std::string> ablation_rows(const std::string& db_path) {
  std::map<std::string, std::string> rows;
  if (!fs::exists(db_path)) return rows;
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT config, created || '/' || row FROM ablation", -1, &s, nullptr) ==
      SQLITE_OK) {
    while (sqlite3_step(s) == SQLITE_ROW) {
      const std::string config = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
      INFO("ablation row of " << config);
      CHECK(rows.emplace(config, reinterpret_cast<const char*>(sqlite3_column_text(s, 1))).second);
    }
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return rows;
}

std::string integrity(const std::string& db_path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, nullptr) == SQLITE_OK);
  std::string out;
  while (sqlite3_step(s) == SQLITE_ROW) out += reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

/// Groups of the first repetition whose stored measurements are not their candidates (a group
/// half stored, or holding another's rows).
std::int64_t groups_not_whole(const std::string& db_path) {
  return query_int(db_path, "SELECT count(*) FROM groups g WHERE g.repetition = 0 AND (SELECT count(*) "
                            "FROM measurements m WHERE m.group_id = g.id) != g.candidates");
}

/// No row repeated, and every row of `before` still there unchanged.
void check_kept(const std::vector<Row>& before, const std::vector<Row>& after) {
  std::map<std::string, std::string> now;
  for (const Row& r : after) {
    INFO("row " << r.identity);
    CHECK(now.emplace(r.identity, r.content).second);  // repeated
  }
  for (const Row& r : before) {
    INFO("row " << r.identity << " of the earlier run");
    REQUIRE(now.count(r.identity) == 1);  // lost
    CHECK(now.at(r.identity) == r.content);  // changed
  }
}

std::int64_t count_status(const std::vector<Row>& rows, const std::string& status) {
  std::int64_t n = 0;
  for (const Row& r : rows) n += r.content.rfind(status + "/", 0) == 0;
  return n;
}

// ---- a disk that fills up ---------------------------------------------------------------------

/// A folder whose writes can be made to fail as on a full disk, in one of three modes:
/// - "tmpfs": an 8 MiB tmpfs mounted there, filled by a file (unusable where this process may not
///   mount);
/// - "prlimit": a plain folder, the commands writing to it run with a file size limit
///   (RLIMIT_FSIZE) set by util-linux's `prlimit` (unusable when it is not installed);
/// - "ulimit": the same limit set by the shell's `ulimit -f`, which every POSIX shell has.
/// In the last two, every file the limited process writes is limited, not only those in the
/// folder: the kernel cache's case limits the compiler alone (compiler_option), so that the
/// results database stays writable as on a real disk of its own.
class FullDisk {
 public:
  static std::vector<std::string> modes() { return {"tmpfs", "prlimit", "ulimit"}; }

  FullDisk(const std::string& dir, const std::string& mode) : dir_(dir), mode_(mode) {
    fs::create_directories(dir_);
    if (mode_ == "tmpfs") {
      if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=8m") == 0) return;
      why_ = std::string("mount -t tmpfs: ") + std::strerror(errno);
      mode_.clear();
    } else if (mode_ == "prlimit") {
      if (test::run_command("command -v prlimit").status == 0) return;
      why_ = "prlimit not found";
      mode_.clear();
    }
  }
  ~FullDisk() {
    if (mode_ == "tmpfs") ::umount2(dir_.c_str(), MNT_DETACH);
  }
  FullDisk(const FullDisk&) = delete;
  FullDisk& operator=(const FullDisk&) = delete;

  bool usable() const { return !mode_.empty(); }
  const std::string& why_not() const { return why_; }
  const std::string& dir() const { return dir_; }
  /// Text a write error says on this disk (strerror of ENOSPC or EFBIG).
  std::string full_text() const { return mode_ == "tmpfs" ? "No space left" : "too large"; }

  /// Fills the disk (tmpfs: a file as large as the space left; else the limit is set by prefix).
  void fill() {
    filling_ = true;
    if (mode_ != "tmpfs") return;
    const int fd = ::open((dir_ + "/filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    std::vector<char> block(1 << 16, 'x');
    std::size_t step = block.size();
    while (step > 0) {  // down to single bytes, so that no block is left
      if (::write(fd, block.data(), step) < 0) step /= 2;
    }
    ::close(fd);
  }
  void free() {
    filling_ = false;
    fs::remove(dir_ + "/filler");
  }
  /// What a command line writing to the disk starts with: while full in a file-size mode, a limit
  /// of `limit` bytes (SIGXFSZ ignored, so that writes fail with EFBIG); else nothing. `ulimit -f`
  /// counts blocks of 512 bytes (POSIX), rounded up here.
  std::string prefix(std::int64_t limit) const {
    if (!filling_ || mode_ == "tmpfs") return {};
    if (mode_ == "prlimit") return "trap '' XFSZ; exec prlimit --fsize=" + std::to_string(limit) + " ";
    return "trap '' XFSZ; ulimit -f " + std::to_string((limit + 511) / 512) + " && exec ";
  }
  /// A `--compiler` option for a command whose compiles write to the disk: while full in a
  /// file-size mode, a wrapper (written to `script`) that runs c++ under the limit; else nothing.
  std::string compiler_option(std::int64_t limit, const std::string& script) const {
    if (!filling_ || mode_ == "tmpfs") return {};
    std::ofstream(script) << "#!/bin/sh\n" << prefix(limit) << "c++ \"$@\"\n";
    fs::permissions(script, fs::perms::owner_all);
    return " --compiler " + script;
  }

 private:
  std::string dir_, mode_, why_;
  bool filling_ = false;
};

/// A mountpoint left by an earlier run that failed midway is taken down first.
std::string fresh_scratch(const std::string& name) {
  const std::string mp = std::string(WACO_BINARY_DIR) + "/test-scratch/" + name + "/fs";
  ::umount2(mp.c_str(), MNT_DETACH);
  return test::scratch_dir(name);
}

/// Runs `waco-hybrid args`, optionally behind a shell prefix (see FullDisk::prefix).
Result cli(const std::string& args, const std::string& prefix = {}) {
  if (prefix.empty()) return test::run_cli(args);
  return test::run_command(prefix + test::cli_binary() + " " + args);
}

// ---- processes --------------------------------------------------------------------------------

/// Makes this test process the reaper of every orphan of the processes it starts, so that a
/// process a command left behind is found among this process's children.
void adopt_orphans() { REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0); }

/// Starts `waco-hybrid args` with stdout and stderr into files; returns its pid. `own_group`: in
/// a process group of its own (as a terminal's foreground job: kill(-pid) is its Ctrl-C).
pid_t start_cli(const std::string& args, const std::string& out, const std::string& err,
                bool own_group = false) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (own_group) ::setpgid(pid, pid);
  if (pid == 0) {
    if (own_group) ::setpgid(0, 0);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execl("/bin/sh", "sh", "-c", ("exec " + test::cli_binary() + " " + args).c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

bool wait_for(const std::function<bool()>& done, double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

bool file_has(const std::string& path, const std::string& text) {
  return read_file(path).find(text) != std::string::npos;
}

/// Waits for pid to end (at most `seconds`, then kills it and fails); returns its wait status.
int wait_exit(pid_t pid, double seconds) {
  int st = 0;
  const bool ended = wait_for([&] { return ::waitpid(pid, &st, WNOHANG) == pid; }, seconds);
  if (!ended) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
  }
  INFO("the command did not end within " << seconds << " s of the signal");
  CHECK(ended);
  return st;
}

/// The command lines of this process's children other than zombies (reaped here).
std::vector<std::string> children() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  std::vector<std::string> out;
  const std::string self = std::to_string(::getpid());
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_file(e.path().string() + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state, ppid;
    rest >> state >> ppid;
    if (ppid != self || state == "Z") continue;
    std::string cmd = read_file(e.path().string() + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    out.push_back(name + ": " + cmd);
  }
  return out;
}

/// Fails when any process the command started is still running `grace` seconds after it ended.
void check_no_leftovers(double grace) {
  std::vector<std::string> left;
  wait_for([&] { return (left = children()).empty(); }, grace);
  for (const std::string& p : left) INFO("left running: " << p);
  CHECK(left.empty());
}

/// The parent of pid from /proc/<pid>/stat; 0 when it is gone.
pid_t parent_of(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string state;
  long ppid = 0;
  rest >> state >> ppid;
  return static_cast<pid_t>(ppid);
}

/// Whether pid runs (a zombie not yet reaped by whoever inherited it counts as gone).
bool running(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return false;
  const char state = close + 2 < stat.size() ? stat[close + 2] : 'X';
  return state != 'Z' && state != 'X';
}

}  // namespace

// ---- disk full ---------------------------------------------------------------------------------

namespace {

/// The results database's disk fills up during a tune, the disk filled in `mode` (FullDisk).
void database_disk_fills_up(const std::string& mode) {
  const std::string dir = fresh_scratch("faults-db-full-" + mode);
  FullDisk disk(dir + "/fs", mode);
  if (!disk.usable()) {
    WARN("cannot fill a disk by " << mode << " (" << disk.why_not() << "): skipped");
    return;
  }
  const std::string db = disk.dir() + "/r.sqlite";
  REQUIRE(csr_decision_pinned);
  const Result first = cli(tune_args(db, shared_cache(), 3));
  INFO(first.err);
  REQUIRE(first.status == 0);
  const std::vector<Row> before = measurement_rows(db);
  REQUIRE(before.size() >= 3);

  disk.fill();
  const Result full = cli(tune_args(db, shared_cache(), 8), disk.prefix(fs::file_size(db)));
  INFO(full.err);
  CHECK(full.status == 1);
  CHECK(has_error_line(full.err));
  CHECK(full.err.find("full") != std::string::npos);
  CHECK(full.err.find("internal") == std::string::npos);
  CHECK(integrity(db) == "ok");
  check_kept(before, measurement_rows(db));

  disk.free();
  const Result again = cli(tune_args(db, shared_cache(), 8));
  INFO(again.err);
  REQUIRE(again.status == 0);
  const auto j = nlohmann::json::parse(again.out);
  CHECK(j.at("complete") == true);
  CHECK(j.at("considered") == 8);
  const std::vector<Row> after = measurement_rows(db);
  check_kept(before, after);
  CHECK(integrity(db) == "ok");
  CHECK(count_status(after, "compile-error") == 0);
}

}  // namespace

TEST_CASE("faults: the results database's disk fills up during a tune") {
  for (const std::string& mode : FullDisk::modes())
    DYNAMIC_SECTION("disk filled by " << mode) { database_disk_fills_up(mode); }
}

namespace {

/// The kernel cache's disk fills up during a tune, the disk filled in `mode` (FullDisk).
void cache_disk_fills_up(const std::string& mode) {
  const std::string dir = fresh_scratch("faults-cache-full-" + mode);
  FullDisk disk(dir + "/fs", mode);
  if (!disk.usable()) {
    WARN("cannot fill a disk by " << mode << " (" << disk.why_not() << "): skipped");
    return;
  }
  const std::string db = dir + "/r.sqlite";
  const std::string cache = disk.dir() + "/kernels";
  disk.fill();
  const Result full = cli(tune_args(db, cache, 3) + disk.compiler_option(4096, dir + "/limited-cc"));
  INFO(full.err);
  // The machine's failure, not the candidates': the tune stops, and nothing is stored as their
  // result (a compile-error row would be reused by every later tune, the schedule lost).
  CHECK(full.status == 1);
  CHECK(has_error_line(full.err));
  CHECK(full.err.find(disk.full_text()) != std::string::npos);
  const std::vector<Row> before = measurement_rows(db);
  CHECK(count_status(before, "compile-error") == 0);
  // Nothing half-written is left in the cache: no temporary, no object without its source.
  if (fs::exists(cache))
    for (const auto& e : fs::directory_iterator(cache)) {
      INFO(e.path());
      CHECK(e.path().string().find(".tmp.") == std::string::npos);
    }

  disk.free();
  const Result again = cli(tune_args(db, cache, 3));
  INFO(again.err);
  REQUIRE(again.status == 0);
  const auto j = nlohmann::json::parse(again.out);
  CHECK(j.at("measured") == 3);
  CHECK(j.at("status_counts").value("compile-error", 0) == 0);
  const std::vector<Row> after = measurement_rows(db);
  check_kept(before, after);
  CHECK(count_status(after, "compile-error") == 0);
}

}  // namespace

TEST_CASE("faults: the kernel cache's disk fills up during a tune") {
  for (const std::string& mode : FullDisk::modes())
    DYNAMIC_SECTION("disk filled by " << mode) { cache_disk_fills_up(mode); }
}

// ---- the compiler ------------------------------------------------------------------------------

TEST_CASE("faults: a missing or killed compiler stops the tune and stores nothing for it") {
  const std::string dir = test::scratch_dir("faults-compiler");
  const std::string db = dir + "/r.sqlite";
  const std::string killed = dir + "/killed-cc";
  // Answers --version (the cache key needs it) as the real compiler, and is killed compiling.
  std::ofstream(killed) << "#!/bin/sh\ncase \"$*\" in *--version*) exec c++ \"$@\";; esac\n"
                           "kill -KILL $$\n";
  fs::permissions(killed, fs::perms::owner_all);

  const Result missing =
      cli(tune_args(db, dir + "/cache", 3) + " --compiler " + dir + "/no-such-compiler");
  INFO(missing.err);
  CHECK(missing.status == 1);
  CHECK(has_error_line(missing.err));
  CHECK(missing.err.find("not found") != std::string::npos);
  CHECK(count_status(measurement_rows(db), "compile-error") == 0);

  const Result dead = cli(tune_args(db, dir + "/cache", 3) + " --compiler " + killed);
  INFO(dead.err);
  CHECK(dead.status == 1);
  CHECK(has_error_line(dead.err));
  CHECK(dead.err.find("signal 9") != std::string::npos);
  const std::vector<Row> before = measurement_rows(db);
  CHECK(count_status(before, "compile-error") == 0);

  // With the compiler back, everything is measured (nothing was stored as a failure).
  const Result again = cli(tune_args(db, dir + "/cache", 3));
  INFO(again.err);
  REQUIRE(again.status == 0);
  const auto j = nlohmann::json::parse(again.out);
  CHECK(j.at("measured") == 3);
  CHECK(j.at("status_counts").value("ok", 0) == 3);
  check_kept(before, measurement_rows(db));
}

TEST_CASE("faults: a missing compiler fails a collect's matrices and stores none of them") {
  const std::string dir = test::scratch_dir("faults-collect-compiler");
  const std::string db = dir + "/d.sqlite";
  const Result missing = test::run_cli(collect_args(db, 2, dir + "/cache") + " --json -q --compiler " +
                                       dir + "/no-such-compiler");
  INFO(missing.err);
  CHECK(missing.status == 1);
  const auto j = nlohmann::json::parse(missing.out);
  CHECK(j.at("outcomes").value("failed", 0) == 2);
  CHECK(j.at("items")[0].at("message").get<std::string>().find("not found") != std::string::npos);
  CHECK(query_int(db, "SELECT count(*) FROM groups") == 0);
  CHECK(query_int(db, "SELECT count(*) FROM measurements") == 0);
  // With the compiler back, both are collected (a failed matrix was not stored as collected).
  const Result again = test::run_cli(collect_args(db, 2, dir + "/cache") + " --json -q");
  INFO(again.err);
  REQUIRE(again.status == 0);
  CHECK(nlohmann::json::parse(again.out).at("outcomes").value("measured", 0) == 2);
  CHECK(count_status(measurement_rows(db), "compile-error") == 0);
}

TEST_CASE("faults: a compiler that rejects the source is the candidate's failure and stored") {
  const std::string dir = test::scratch_dir("faults-compiler-rejects");
  const std::string db = dir + "/r.sqlite";
  const std::string rejects = dir + "/rejecting-cc";
  std::ofstream(rejects) << "#!/bin/sh\ncase \"$*\" in *--version*) exec c++ \"$@\";; esac\n"
                            "echo 'kernel.cpp:1:1: error: injected' >&2\nexit 1\n";
  fs::permissions(rejects, fs::perms::owner_all);
  const Result r = cli(tune_args(db, dir + "/cache", 3) + " --compiler " + rejects);
  INFO(r.err);
  CHECK(r.err.find("internal") == std::string::npos);
  CHECK(count_status(measurement_rows(db), "compile-error") >= 3);
}

TEST_CASE("faults: the measuring child killed while it compiles takes the compiler with it") {
  adopt_orphans();
  const std::string dir = test::scratch_dir("faults-compiler-orphan");
  fs::remove_all(dir + "/cache");  // a cold cache: the tune compiles
  fs::remove(dir + "/slowed");
  fs::remove(dir + "/compiler.pids");
  // A compiler whose first compile is slow: the driver (this script) waits for a child of its own,
  // as gcc's driver waits for cc1plus, and says both pids; later compiles are the real compiler's.
  const std::string slow = dir + "/slow-cc";
  std::ofstream(slow) << "#!/bin/sh\ncase \"$*\" in *--version*) exec c++ \"$@\";; esac\n"
                         "if [ ! -e " << dir << "/slowed ]; then\n"
                         "  : > " << dir << "/slowed\n"
                         "  sleep 60 &\n"
                         "  echo \"$$ $!\" > " << dir << "/compiler.pids.tmp\n"
                         "  mv " << dir << "/compiler.pids.tmp " << dir << "/compiler.pids\n"
                         "  wait\n"
                         "fi\n"
                         "exec c++ \"$@\"\n";
  fs::permissions(slow, fs::perms::owner_all);
  const pid_t tune = start_cli(tune_args(dir + "/r.sqlite", dir + "/cache", 2) + " --compiler " + slow,
                               dir + "/out.json", dir + "/err.txt");
  REQUIRE(wait_for([&] { return fs::exists(dir + "/compiler.pids"); }, 120));
  pid_t driver = 0, cc1 = 0;
  std::istringstream(read_file(dir + "/compiler.pids")) >> driver >> cc1;
  REQUIRE(driver > 0);
  REQUIRE(cc1 > 0);
  // The measuring child is the compiler's ancestor whose parent is the measuring worker, a child
  // of the tune (tune -> worker -> measuring child -> ... -> the compiler's driver).
  pid_t child = driver;
  while (child > 1 && parent_of(parent_of(child)) != tune) child = parent_of(child);
  INFO("compiler driver " << driver << ", its child " << cc1 << ", measuring child " << child);
  REQUIRE(child > 1);
  REQUIRE(running(driver));
  REQUIRE(::kill(child, SIGKILL) == 0);
  const bool gone = wait_for([&] { return !running(driver) && !running(cc1); }, 5.0);
  CHECK(gone);
  if (!gone) {  // the failure's leftovers, ended here
    ::kill(cc1, SIGKILL);
    ::kill(driver, SIGKILL);
  }
  // The tune goes on (the candidate crashed; later compiles are the real compiler's) and ends
  // with nothing of it left running.
  const int st = wait_exit(tune, 120);
  INFO(read_file(dir + "/err.txt"));
  CHECK(WIFEXITED(st));
  CHECK_FALSE(file_has(dir + "/err.txt", "internal"));
  check_no_leftovers(5.0);
}

// ---- kernels that crash or spin ---------------------------------------------------------------

namespace {

/// A compiler (written to `path`) that compiles as c++ but plants a fault at the entry of some
/// generated kernels: a segfault (a store through a null pointer) or an endless loop. Which ones:
/// a kernel whose schedule line (the source's second line) matches `crash_pattern` or
/// `spin_pattern` (grep -e), or, for an empty pattern, the first (crash) and the second (spin)
/// kernel it compiles that is not csr's template (`order=i,k format=UC parallel=i threads=0 chunk=1`).
/// Each fault leaves a file `<path>.crash` or `<path>.spin` holding the kernel's schedule line.
void write_faulty_compiler(const std::string& path, const std::string& crash_pattern,
                           const std::string& spin_pattern) {
  const std::string crash = "volatile int* volatile bad = 0; *bad = 1;";
  const std::string spin = "for (volatile int spin = 1; spin;) {}";
  std::ofstream f(path);
  f << "#!/bin/sh\n"
       "case \"$*\" in *--version*) exec c++ \"$@\";; esac\n"
       "src=\n"
       "for a in \"$@\"; do case \"$a\" in *.cpp) src=$a;; esac; done\n"
       "[ -n \"$src\" ] || exec c++ \"$@\"\n"
       "line=$(sed -n 2p \"$src\")\n"
       "fault=\n";
  if (crash_pattern.empty()) {
    // mkdir as an atomic test-and-set: one kernel each.
    f << "case \"$line\" in *'order=i,k format=UC parallel=i threads=0 chunk=1 '*) exec c++ \"$@\";; esac\n"
         "if mkdir " << path << ".first 2>/dev/null; then fault=crash\n"
         "elif mkdir " << path << ".second 2>/dev/null; then fault=spin\n"
         "else exec c++ \"$@\"; fi\n";
  } else {
    f << "if printf '%s\\n' \"$line\" | grep -q -e '" << crash_pattern << "'; then fault=crash\n"
         "elif printf '%s\\n' \"$line\" | grep -q -e '" << spin_pattern << "'; then fault=spin\n"
         "else exec c++ \"$@\"; fi\n";
  }
  f << "case $fault in crash) stmt='" << crash << "';; *) stmt='" << spin << "';; esac\n"
       "printf '%s\\n' \"$line\" > " << path << ".$fault\n"
       "copy=" << path << "-$$.cpp\n"
       // The entry point's line (extern "C", maybe an attribute: WACO_SCALAR_ROW_SUM).
       "sed \"s|^extern \\\"C\\\" .*int waco_kernel(const WacoArgs\\\\* a) {|& $stmt|\" \"$src\" > \"$copy\"\n"
       "grep -q -F \"$stmt\" \"$copy\" || { echo 'faulty-cc: no entry point found' >&2; exit 1; }\n"
       "for a do shift; if [ \"$a\" = \"$src\" ]; then set -- \"$@\" \"$copy\"; else set -- \"$@\" \"$a\"; fi; done\n"
       "c++ \"$@\"; rc=$?; rm -f \"$copy\"; exit $rc\n";
  f.close();
  fs::permissions(path, fs::perms::owner_all);
}

/// The tune's options of the crash and spin tests beside `tune_args`'s (no search given).
std::string fault_tune_args(const std::string& db, const std::string& cache) {
  return "tune --kernel spmv --json --db " + db + " --cache-dir " + cache +
         " --no-plan-cache --repeat 3 --warmup 1 --confirm-rounds 4 --decide-rounds 4 --threads 2 " +
         example();
}

}  // namespace

TEST_CASE("faults: a kernel that crashes or spins is its candidate's failure, stored, and the tune goes on") {
  adopt_orphans();
  const std::string dir = test::scratch_dir("faults-kernel-crash");
  fs::remove_all(dir + "/cache");
  const std::string db = dir + "/r.sqlite";
  const std::string faulty = dir + "/faulty-cc";
  // Each schedule measured alone first (a list: measure-first), the segfaulting dcsr and the
  // spinning split kernel among them.
  write_faulty_compiler(faulty, "format=CC parallel=i threads=0", "format=UUC parallel=i1");
  std::ofstream(dir + "/list.txt") << "csr\norder=i,k format=UC parallel=i chunk=16\n"
                                      "order=i,k format=CC parallel=i\n"
                                      "split=i:4 order=i1,i0,k format=UUC parallel=i1\nbcsr4x4\n";
  const std::string args = fault_tune_args(db, dir + "/cache") + " --schedules " + dir +
                           "/list.txt --timeout 3 --abandon-factor 0";
  REQUIRE(csr_decision_pinned);
  const Result first = cli(args + " --compiler " + faulty);
  INFO(first.err);
  REQUIRE(first.status == 0);
  CHECK(fs::exists(faulty + ".crash"));
  CHECK(fs::exists(faulty + ".spin"));
  check_no_leftovers(5.0);  // the spinning child was killed
  const auto j = nlohmann::json::parse(first.out);
  CHECK(j.at("complete") == true);
  CHECK(j.at("considered") == 5);
  CHECK(j.at("status_counts").at("crashed") == 1);
  CHECK(j.at("status_counts").at("timeout") == 1);
  CHECK(j.at("status_counts").at("ok") == 3);
  CHECK(j.at("implementation").is_string());  // a decision: a winner or csr
  const std::vector<Row> before = measurement_rows(db);
  // Stored: the five schedules and the csr baseline, one row each, the two faults with theirs.
  CHECK(before.size() == 6);
  CHECK(count_status(before, "crashed") == 1);
  CHECK(count_status(before, "timeout") == 1);
  for (const Row& r : before) {
    INFO(r.identity << ": " << r.content);
    if (r.content.rfind("crashed/", 0) == 0) CHECK(r.content.find("signal 11") != std::string::npos);
    if (r.content.rfind("timeout/", 0) == 0) CHECK(r.content.find("no result within 3 s") != std::string::npos);
  }
  check_kept({}, before);

  // Again: the failures stand (reused, nothing measured, no row added or changed).
  const Result again = cli(args + " --compiler " + faulty);
  INFO(again.err);
  REQUIRE(again.status == 0);
  const auto k = nlohmann::json::parse(again.out);
  CHECK(k.at("reused") == 5);
  CHECK(k.at("measured") == 0);
  const std::vector<Row> kept = measurement_rows(db);
  CHECK(kept.size() == before.size());
  check_kept(before, kept);

  // With a sound compiler (and a fresh kernel cache: the faulty kernels are cached under the
  // same compiler identity) and --retry-failed, the two are measured again in their rows.
  const Result mended = cli(fault_tune_args(db, dir + "/cache-sound") + " --schedules " + dir +
                            "/list.txt --timeout 3 --abandon-factor 0 --retry-failed");
  INFO(mended.err);
  REQUIRE(mended.status == 0);
  const auto m = nlohmann::json::parse(mended.out);
  CHECK(m.at("status_counts").at("ok") == 5);
  const std::vector<Row> after = measurement_rows(db);
  CHECK(after.size() == before.size());
  check_kept({}, after);
  CHECK(count_status(after, "ok") == 6);
  std::set<std::string> ids_before, ids_after;
  for (const Row& r : before) ids_before.insert(r.identity);
  for (const Row& r : after) ids_after.insert(r.identity);
  CHECK(ids_before == ids_after);
}

TEST_CASE("faults: a nominee that crashes or spins side by side fails alone, and the tune decides") {
  // The model's nominees are measured in one child (side by side). A kernel that segfaults or
  // spins on its first run ends that child; the candidate it was on fails alone and another
  // child goes on with the rest (before, every nominee and both csr references got the crash,
  // and the tune decided nothing). Without racing (--abandon-factor 0) the spin is ended after
  // a measure()'s limits, --compile-timeout + --timeout; with racing, the screening ends it first.
  adopt_orphans();
  const std::string dir = test::scratch_dir("faults-nominee-crash");
  fs::remove_all(dir + "/cache");
  const std::string faulty = dir + "/faulty-cc";
  fs::remove(faulty + ".first");
  fs::remove(faulty + ".second");
  write_faulty_compiler(faulty, "", "");
  const auto t0 = Clock::now();
  const Result r = cli(fault_tune_args(dir + "/r.sqlite", dir + "/cache") +
                       " --search model --budget 8 --abandon-factor 0 --timeout 3 --compile-timeout 30"
                       " --compiler " + faulty);
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(fs::exists(faulty + ".crash"));  // the nominees had two kernels besides csr's
  REQUIRE(fs::exists(faulty + ".spin"));
  check_no_leftovers(5.0);
  CHECK(took < 8 * 30.0);  // the spin did not hold the whole child's prepare limit
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("complete") == true);
  const auto& counts = j.at("status_counts");
  const std::int64_t crashed = counts.at("crashed"), timed_out = counts.at("timeout"),
                     ok = counts.at("ok");
  CHECK(crashed >= 1);
  CHECK(timed_out >= 1);
  CHECK(ok >= 1);
  CHECK(crashed + timed_out < j.at("considered").get<std::int64_t>());
  for (const auto& e : j.at("confirm").at("ranking")) {
    const std::string status = e.at("status");
    if (status != "crashed" && status != "timeout") continue;
    INFO(e.dump());
    CHECK(e.at("reason").get<std::string>().find("first running it") != std::string::npos);
  }
  CHECK(j.at("csr").at("status") == "ok");
  CHECK(j.at("csr_baseline").at("status") == "ok");
  CHECK(j.at("verdict") != "unconfirmed");
  CHECK(j.at("implementation").is_string());
}

// ---- signals -------------------------------------------------------------------------------------

TEST_CASE("faults: SIGTERM to a tune ends it and its children and a rerun completes") {
  adopt_orphans();
  const std::string dir = test::scratch_dir("faults-tune-term");
  const std::string db = dir + "/r.sqlite";
  const std::string args = tune_args(db, dir + "/cache", 12);  // a cold cache: compiles run
  for (const int signals : {1, 2}) {  // one: stops at a safe point; two: at once
    INFO(signals << " SIGTERM");
    fs::remove_all(dir + "/cache");
    const pid_t pid = start_cli(args, dir + "/out.json", dir + "/err.txt");
    REQUIRE(wait_for([&] { return file_has(dir + "/err.txt", "12 candidates"); }, 120));
    // Within the search: on a Zen 5 VM the 12 cold compiles and measurements took 1.2 s in all,
    // and a signal 1.5 s in arrived after them.
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const std::vector<Row> before = measurement_rows(db);
    terminate(pid, signals);
    const int st = wait_exit(pid, 60);
    INFO(read_file(dir + "/err.txt"));
    if (signals == 1) {
      REQUIRE(WIFEXITED(st));
      CHECK(WEXITSTATUS(st) == 1);
      CHECK(file_has(dir + "/err.txt", "interrupted"));
      const auto j = nlohmann::json::parse(read_file(dir + "/out.json"));
      CHECK(j.at("complete") == false);
    }
    check_no_leftovers(5.0);
    CHECK(integrity(db) == "ok");
    check_kept(before, measurement_rows(db));
  }
  const std::vector<Row> before = measurement_rows(db);
  const Result again = cli(args);
  INFO(again.err);
  REQUIRE(again.status == 0);
  const auto j = nlohmann::json::parse(again.out);
  CHECK(j.at("complete") == true);
  CHECK(j.at("reused").get<std::int64_t>() + j.at("measured").get<std::int64_t>() == 12);
  check_kept(before, measurement_rows(db));
  // The temporaries of the compiles that the kill cut short are gone: the rerun compiled those
  // kernels and removed what the dead processes left.
  for (const auto& e : fs::directory_iterator(dir + "/cache")) {
    INFO(e.path());
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  }
  // Every candidate has its one row: a third run measures nothing and adds no row.
  const std::vector<Row> complete = measurement_rows(db);
  const Result third = cli(args);
  INFO(third.err);
  REQUIRE(third.status == 0);
  const auto k = nlohmann::json::parse(third.out);
  CHECK(k.at("reused") == 12);
  CHECK(k.at("measured") == 0);
  const std::vector<Row> rows = measurement_rows(db);
  CHECK(rows.size() == complete.size());
  check_kept(complete, rows);
}

TEST_CASE("faults: SIGTERM or SIGINT to a collect ends it and its children and a rerun completes") {
  adopt_orphans();
  // SIGTERM and SIGINT to the collect, and SIGINT to its whole process group (a terminal's
  // Ctrl-C, which reaches the collecting child too).
  for (const int variant : {0, 1, 2}) {
    const int sig = variant == 0 ? SIGTERM : SIGINT;
    const bool group = variant == 2;
    INFO("signal " << sig << (group ? " to the process group" : ""));
    const std::string dir = test::scratch_dir("faults-collect-" + std::to_string(variant));
    const std::string db = dir + "/d.sqlite";
    // A cold kernel cache: each matrix compiles its kernels (seconds), so that the signal, sent
    // once the first matrix is stored, comes during the second (with a warm cache a matrix took
    // 0.1 s and the run could end first).
    const std::string args = collect_args(db, 3, dir + "/cache") + " --json";
    const pid_t pid = start_cli(args, dir + "/out.json", dir + "/err.txt", group);
    REQUIRE(wait_for([&] { return file_has(dir + "/err.txt", "[1/3]"); }, 120));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::vector<Row> before = measurement_rows(db);
    const auto t0 = Clock::now();
    ::kill(group ? -pid : pid, sig);
    const int st = wait_exit(pid, 60);
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    INFO(read_file(dir + "/err.txt"));
    REQUIRE(WIFEXITED(st));  // not killed by the signal: it stopped
    CHECK(WEXITSTATUS(st) == 1);
    CHECK(took < 10.0);  // the matrix being collected is ended, not finished
    CHECK(file_has(dir + "/err.txt", "interrupted"));
    check_no_leftovers(5.0);
    const auto j = nlohmann::json::parse(read_file(dir + "/out.json"));
    CHECK(j.at("complete") == false);
    const int stored = j.at("outcomes").value("measured", 0);
    CHECK(j.at("outcomes").value("failed", 0) == 0);  // the interrupted matrix is no failure
    CHECK(query_int(db, "SELECT count(*) FROM groups WHERE repetition = 0") == stored);
    CHECK(groups_not_whole(db) == 0);  // nothing half-stored
    CHECK(integrity(db) == "ok");
    check_kept(before, measurement_rows(db));

    const std::vector<Row> kept = measurement_rows(db);
    const Result again = test::run_cli(args);
    INFO(again.err);
    REQUIRE(again.status == 0);
    const auto k = nlohmann::json::parse(again.out);
    CHECK(k.at("outcomes").value("existing", 0) == stored);
    CHECK(k.at("outcomes").value("measured", 0) == 3 - stored);
    CHECK(query_int(db, "SELECT count(*) FROM groups WHERE repetition = 0") == 3);
    CHECK(groups_not_whole(db) == 0);
    check_kept(kept, measurement_rows(db));
  }
}

TEST_CASE("faults: SIGTERM to an ablate ends it and its tunes and a rerun completes") {
  adopt_orphans();
  const std::string dir = test::scratch_dir("faults-ablate");
  const std::string args =
      "ablate --kernel spmv --configs a,b --config \"a=--search random --budget 4 --seed 1\" "
      "--config \"b=--search random --budget 4 --seed 2\" --db " + dir + "/a.sqlite --work " + dir +
      "/work --cache-dir " + dir + "/cache --tune-args \"--repeat 3 --warmup 1 --confirm-rounds 4 "
      "--decide-rounds 4\" --bench-repeat 5 --final-runs-max 2 --threads 2 --json " + example();
  fs::remove(dir + "/a.sqlite");
  std::map<std::string, std::string> stored;  // the ablation rows so far, by configuration
  for (const int signals : {1, 2}) {  // one: the tune stops at a safe point; two: all at once
    INFO(signals << " SIGTERM");
    fs::remove_all(dir + "/cache");
    const pid_t pid = start_cli(args, dir + "/out.json", dir + "/err.txt");
    // Wait for a tune child to be measuring.
    const std::string self = std::to_string(pid);
    REQUIRE(wait_for([&] {
      for (const auto& e : fs::directory_iterator("/proc")) {
        if (e.path().filename().string().find_first_not_of("0123456789") != std::string::npos)
          continue;
        const std::string stat = read_file(e.path().string() + "/stat");
        const auto close = stat.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(stat.substr(close + 2));
        std::string state, ppid;
        rest >> state >> ppid;
        if (ppid == self && read_file(e.path().string() + "/cmdline").find("tune") != std::string::npos)
          return true;
      }
      return false;
    }, 120));
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const auto t0 = Clock::now();
    terminate(pid, signals);
    const int st = wait_exit(pid, 60);
    INFO(read_file(dir + "/err.txt"));
    if (signals == 1) {
      REQUIRE(WIFEXITED(st));
      CHECK(WEXITSTATUS(st) == 1);
      CHECK(file_has(dir + "/err.txt", "interrupted"));
      // The tune got the signal too and stopped after its candidate: not the whole search.
      CHECK(std::chrono::duration<double>(Clock::now() - t0).count() < 30.0);
    }
    check_no_leftovers(5.0);
    // What the interrupted run stored stays (a configuration finished before the signal has its
    // row, and none is half-written); the next run adds to it.
    if (fs::exists(dir + "/a.sqlite")) CHECK(integrity(dir + "/a.sqlite") == "ok");
    const std::map<std::string, std::string> now = ablation_rows(dir + "/a.sqlite");
    for (const auto& [config, row] : stored) {
      INFO("the ablation row of " << config << " stored before the signal");
      REQUIRE(now.count(config) == 1);
      CHECK(kept_or_extended(config, row, now.at(config)));
    }
    stored = now;
  }
  const Result again = test::run_cli(args);
  INFO(again.err);
  REQUIRE(again.status == 0);
  const auto j = nlohmann::json::parse(again.out);
  REQUIRE(j.at("matrices").size() == 1);
  CHECK(j.at("matrices")[0].at("runs").contains("a"));
  CHECK(j.at("matrices")[0].at("runs").contains("b"));
  // One row per configuration and one of the final side-by-side runs, the ones stored before the
  // signals unchanged (reused, not redone; a side-by-side row of one pass gains its second).
  const std::map<std::string, std::string> rows = ablation_rows(dir + "/a.sqlite");
  CHECK(rows.size() == 3);
  CHECK(rows.count("a") == 1);
  CHECK(rows.count("b") == 1);
  CHECK(rows.count("side-by-side") == 1);
  for (const auto& [config, row] : stored) {
    INFO("the ablation row of " << config << " stored before the rerun");
    REQUIRE(rows.count(config) == 1);
    CHECK(kept_or_extended(config, row, rows.at(config)));
  }
}

// ---- two collectors ------------------------------------------------------------------------------

TEST_CASE("faults: two collects on one database (also named through a symbolic link)") {
  const std::string dir = test::scratch_dir("faults-two-collects");
  const std::string db = dir + "/d.sqlite";
  fs::create_symlink(db, dir + "/link.sqlite");
  for (const std::string& second : {db, dir + "/link.sqlite"}) {
    INFO("the second collect writes " << second);
    fs::remove(db);
    // A cold kernel cache, so that the first collect still runs when the second starts.
    fs::remove_all(dir + "/cache");
    const std::string a = collect_args(db, 3, dir + "/cache") + " --json -q";
    const std::string b = collect_args(second, 3, dir + "/cache") + " --json -q";
    const pid_t pa = start_cli(a, dir + "/a.json", dir + "/a.err");
    const pid_t pb = start_cli(b, dir + "/b.json", dir + "/b.err");
    int sa = 0, sb = 0;
    REQUIRE(::waitpid(pa, &sa, 0) == pa);
    REQUIRE(::waitpid(pb, &sb, 0) == pb);
    INFO(read_file(dir + "/a.err") << read_file(dir + "/b.err"));
    REQUIRE(WIFEXITED(sa));
    REQUIRE(WIFEXITED(sb));
    // One collects, the other is refused at once (or, started last, finds all collected).
    const int refused = (WEXITSTATUS(sa) == 1) + (WEXITSTATUS(sb) == 1);
    CHECK(refused <= 1);
    const bool one_refused =
        read_file(dir + "/a.err").find("another collect is writing") != std::string::npos ||
        read_file(dir + "/b.err").find("another collect is writing") != std::string::npos;
    const auto all_existing = [&](const std::string& out) {
      const auto j = nlohmann::json::parse(read_file(out), nullptr, false);
      return j.is_object() && j.at("outcomes").value("existing", 0) == 3;
    };
    CHECK((one_refused || all_existing(dir + "/a.json") || all_existing(dir + "/b.json")));
    CHECK(query_int(db, "SELECT count(*) FROM groups WHERE repetition = 0") == 3);
    CHECK(query_int(db, "SELECT count(*) FROM (SELECT matrix_id FROM groups WHERE repetition = 0 "
                        "GROUP BY matrix_id HAVING count(*) > 1)") == 0);
    // Every group holds its rows (none replaced by another group's).
    CHECK(groups_not_whole(db) == 0);
    const std::vector<Row> rows = measurement_rows(db);
    check_kept({}, rows);
  }
}

TEST_CASE("faults: two collectors of one matrix racing store one group") {
  const std::string dir = test::scratch_dir("faults-collect-race");
  const std::string db = dir + "/d.sqlite";
  { heuristics::ResultsDb create(db); }
  const kernels::Recipe recipe = kernels::default_mix(1, 1, {}, 3000).front();
  heuristics::CollectOptions co;
  co.schedules = 5;
  co.measure.repeats = 2;
  co.measure.warmup = 0;
  co.measure.threads = 2;
  co.busy_wait_s = 0;
  co.measure.generated.compiler.cache_dir = shared_cache();
  // Two processes (a collector needs a process that has not run OpenMP) at once.
  std::vector<pid_t> pids;
  for (int k = 0; k < 2; ++k) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const heuristics::CollectOutcome r = heuristics::collect_one(db, recipe, co);
      ::_exit(r.kind == heuristics::CollectOutcome::Kind::Measured   ? 10
              : r.kind == heuristics::CollectOutcome::Kind::Existing ? 11
                                                                     : 12);
    }
    pids.push_back(pid);
  }
  std::multiset<int> outcomes;
  for (const pid_t pid : pids) {
    int st = 0;
    REQUIRE(::waitpid(pid, &st, 0) == pid);
    REQUIRE(WIFEXITED(st));
    outcomes.insert(WEXITSTATUS(st));
  }
  CHECK(outcomes.count(10) == 1);  // one stored
  CHECK(outcomes.count(11) == 1);  // one found it stored (before or after measuring)
  CHECK(query_int(db, "SELECT count(*) FROM groups WHERE repetition = 0") == 1);
  CHECK(groups_not_whole(db) == 0);
  check_kept({}, measurement_rows(db));
}
