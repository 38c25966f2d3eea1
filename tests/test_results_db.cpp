// Unit "results_db": the SQLite results database (heuristics/results_db.hpp) and the measuring
// loop on top of it (heuristics/tuner.hpp): schema creation, reopening and version checks;
// matrices, schedules and measurements round-trip; transactions roll back; a tuning run killed
// with SIGKILL midway resumes without losing or repeating a measurement.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "support/test_paths.hpp"
#include "support/edge_cases.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/heuristics/tuner.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"

using namespace waco;
using namespace waco::heuristics;
namespace fs = std::filesystem;

namespace {

/// Runs one SQL statement on the file directly (to tamper with it as another program could).
void raw_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO((err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

/// A file's tables as SQLite describes them: per table its columns (name, type, not null,
/// default, primary key) and indexes (unique, origin, columns, and an expression index's SQL), and
/// the CHECK constraints of its SQL, in a canonical order.
std::string schema_of(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  const auto rows = [&](const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const unsigned char* t = sqlite3_column_text(st, c);
        row += std::string(t ? reinterpret_cast<const char*>(t) : "NULL") + "|";
      }
      out.push_back(row);
    }
    sqlite3_finalize(st);
    return out;
  };
  std::string text;
  for (const std::string& t :
       rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")) {
    const std::string table = t.substr(0, t.size() - 1);
    text += "table " + table + "\n";
    for (const std::string& c : rows("SELECT name, type, \"notnull\", dflt_value, pk FROM "
                                     "pragma_table_info('" + table + "')"))
      text += "  column " + c + "\n";
    std::vector<std::string> indexes;
    for (const std::string& i : rows("SELECT name, \"unique\", origin FROM pragma_index_list('" +
                                     table + "')")) {
      const std::string name = i.substr(0, i.find('|'));
      std::string line = i.substr(i.find('|')) + " on";
      for (const std::string& c : rows("SELECT name FROM pragma_index_info('" + name + "')"))
        line += " " + c;
      for (const std::string& q :
           rows("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = '" + name + "'"))
        line += " " + q;
      indexes.push_back(line);
    }
    std::sort(indexes.begin(), indexes.end());
    for (const std::string& i : indexes) text += "  index " + i + "\n";
    // CHECK constraints as written (white space aside).
    for (std::string sql : rows("SELECT sql FROM sqlite_master WHERE name = '" + table + "'")) {
      sql.erase(std::remove_if(sql.begin(), sql.end(), [](char ch) { return std::isspace(ch); }),
                sql.end());
      for (std::size_t at = sql.find("CHECK("); at != std::string::npos;
           at = sql.find("CHECK(", at + 1)) {
        int depth = 0;
        std::size_t end = at + 5;
        do {
          depth += sql[end] == '(' ? 1 : sql[end] == ')' ? -1 : 0;
        } while (depth > 0 && ++end < sql.size());
        text += "  check " + sql.substr(at, end - at + 1) + "\n";
      }
    }
  }
  sqlite3_close(db);
  return text;
}

kernels::CooMatrix small_matrix() {
  std::vector<kernels::index_t> r, c;
  std::vector<float> v;
  for (int i = 0; i < 400; ++i)
    for (int k : {i, (i * 13 + 5) % 400, (i * 101 + 7) % 400}) {
      r.push_back(i);
      c.push_back(k);
      v.push_back(1.0f + static_cast<float>(k % 5));
    }
  return test::from_triplets(400, 400, r, c, v);  // sums the repeated coordinates
}

Measurement fake_ok(double median, int threads) {
  Measurement m;
  m.status = MeasureStatus::Ok;
  m.seconds = {median * 1.1, median, median * 0.9};
  m.median_s = median;
  m.min_s = median * 0.9;
  m.max_s = median * 1.1;
  m.warmup = 2;
  m.repeats = 3;
  m.threads = threads;
  m.verified = true;
  m.max_rel_error = 1e-7;
  m.conversion_s = 0.001;
  m.compile_s = 0.5;
  m.kernel_source = "/tmp/k.cpp";
  m.stored_values = 1200;
  m.wall_s = 0.7;
  return m;
}

Candidate spmv(const std::string& text) {
  return Candidate::generated(codegen::schedule_from_string(kernels::KernelKind::SpMV, text));
}

/// Eight SpMV candidates sharing one compiled kernel (chunk is a runtime parameter).
std::vector<Candidate> chunk_candidates() {
  std::vector<Candidate> v;
  for (int chunk = 1; chunk <= 128; chunk *= 2)
    v.push_back(spmv("order=i,k format=UC parallel=i threads=1 chunk=" + std::to_string(chunk)));
  return v;
}

}  // namespace

TEST_CASE("results_db: a new file gets the schema, in a directory created on demand") {
  const std::string dir = test::scratch_dir("results-db-create");
  const std::string path = dir + "/deep/er/results.sqlite";
  {
    ResultsDb db(path);
    CHECK(db.schema_version() == kResultsSchemaVersion);
    CHECK(db.path() == path);
    CHECK(db.count_matrices() == 0);
    CHECK(db.count_schedules() == 0);
    CHECK(db.count_measurements() == 0);
  }
  CHECK(fs::exists(path));
  ResultsDb again(path);  // reopening an existing file
  CHECK(again.schema_version() == kResultsSchemaVersion);
}

TEST_CASE("results_db: processes opening one new file at once all get the schema") {
  // Two collects started together on a fresh --db: the one that lost the race to create the
  // schema (or to switch the file to WAL) once saw "database is locked" at once.
  const std::string dir = test::scratch_dir("results-db-race");
  for (int trial = 0; trial < 20; ++trial) {
    const std::string path = dir + "/r" + std::to_string(trial) + ".sqlite";
    int gate[2];
    REQUIRE(::pipe(gate) == 0);
    std::vector<pid_t> pids;
    for (int k = 0; k < 4; ++k) {
      const pid_t pid = fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        ::close(gate[1]);
        char c;
        while (::read(gate[0], &c, 1) > 0) {
        }  // all start when the parent closes the gate
        int code = 0;
        try {
          ResultsDb db(path);
          code = db.schema_version() == kResultsSchemaVersion ? 0 : 2;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "%s\n", e.what());
          code = 1;
        }
        ::_exit(code);
      }
      pids.push_back(pid);
    }
    ::close(gate[0]);
    ::close(gate[1]);
    for (const pid_t pid : pids) {
      int status = 0;
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      INFO("trial " << trial);
      CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
  }
}

TEST_CASE("results_db: the default path follows XDG_DATA_HOME, then HOME") {
  const char* old_xdg = std::getenv("XDG_DATA_HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "";
  setenv("XDG_DATA_HOME", "/some/data", 1);
  CHECK(default_results_path() == "/some/data/waco-hybrid/waco-results.sqlite");
  setenv("XDG_DATA_HOME", "", 1);  // empty counts as unset
  const char* home = std::getenv("HOME");
  if (home && *home)
    CHECK(default_results_path() ==
          std::string(home) + "/.local/share/waco-hybrid/waco-results.sqlite");
  if (old_xdg) setenv("XDG_DATA_HOME", saved_xdg.c_str(), 1); else unsetenv("XDG_DATA_HOME");
}

TEST_CASE("results_db: other schema versions and other files are refused with clear errors") {
  const std::string dir = test::scratch_dir("results-db-version");
  const std::string newer = dir + "/newer.sqlite";
  { ResultsDb db(newer); }
  raw_sql(newer, "UPDATE meta SET value = '99' WHERE key = 'schema_version'");
  try {
    ResultsDb db(newer);
    FAIL("a newer schema was accepted");
  } catch (const kernels::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("schema version 99") != std::string::npos);
    CHECK(what.find(std::to_string(kResultsSchemaVersion)) != std::string::npos);
    CHECK(std::string(e.hint()).find("newer") != std::string::npos);
  }

  const std::string foreign = dir + "/foreign.sqlite";
  raw_sql(foreign, "CREATE TABLE t(x)");
  CHECK_THROWS_WITH(ResultsDb(foreign),
                    Catch::Contains("not a waco-hybrid results database"));

  const std::string text = dir + "/notes.txt";
  std::ofstream(text) << "this is not a database, just a text file that is long enough to have "
                         "a header SQLite would look for..................................\n";
  CHECK_THROWS_AS(ResultsDb(text), kernels::Error);

  CHECK_THROWS_WITH(ResultsDb("/proc/no-such-dir/x.sqlite"), Catch::Contains("results database"));
}

TEST_CASE("results_db: a file of this version that lacks any column of the schema is refused") {
  // The columns the schema makes, as SQLite lists them for a new file.
  const std::string dir = test::scratch_dir("results-db-columns");
  const std::string fresh = dir + "/fresh.sqlite";
  { ResultsDb db(fresh); }
  std::vector<std::pair<std::string, std::string>> columns;
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(fresh.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT m.name, p.name FROM sqlite_master AS m, "
                                   "pragma_table_info(m.name) AS p WHERE m.type = 'table'",
                               -1, &st, nullptr) == SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW)
      columns.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                           reinterpret_cast<const char*>(sqlite3_column_text(st, 1)));
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  REQUIRE(columns.size() > 40);
  // Each one renamed in a copy: the copy is refused, naming the table and the column (meta's
  // columns are read for the version first: an error there, as the SQLite message says).
  for (const auto& [table, column] : columns) {
    INFO(table << "." << column);
    const std::string copy = dir + "/damaged.sqlite";
    fs::copy_file(fresh, copy, fs::copy_options::overwrite_existing);
    raw_sql(copy, "ALTER TABLE " + table + " RENAME COLUMN " + column + " TO renamed_column");
    if (table == "meta")
      CHECK_THROWS_WITH(ResultsDb(copy), Catch::Contains("no such column: " + column));
    else
      CHECK_THROWS_WITH(ResultsDb(copy), Catch::Contains("table '" + table + "' has no column '" +
                                                       column + "'") &&
                                           Catch::Contains("damaged or foreign"));
  }
}

TEST_CASE("results_db: a version 1 file is migrated in place (through 2, 3, 4 and 5 to 6), keeping its rows") {
  const std::string path = test::scratch_dir("results-db-migrate") + "/v1.sqlite";
  const kernels::CooMatrix a = small_matrix();
  const MatrixRecord rec = matrix_record(a, "small.mtx");
  const MeasurementKey key{rec.fingerprint, kernels::KernelKind::SpMV, 1, 3};
  const Candidate c = spmv("order=i,k format=UC parallel=i threads=1 chunk=4");
  {
    ResultsDb db(path);
    db.record_matrix(rec);
    db.record_measurement(key, c, fake_ok(0.002, 1), nlohmann::json::object());
  }
  // Back to version 1 as an older waco-hybrid wrote it: the status CHECK without 'abandoned'.
  raw_sql(path, R"sql(
    CREATE TABLE m1(
      id INTEGER PRIMARY KEY, matrix_id INTEGER NOT NULL REFERENCES matrices(id),
      schedule_id INTEGER REFERENCES schedules(id), kernel TEXT NOT NULL,
      implementation TEXT NOT NULL, dense INTEGER NOT NULL, threads INTEGER NOT NULL,
      warmup INTEGER NOT NULL, repeats INTEGER NOT NULL, median_s REAL, min_s REAL, max_s REAL,
      times_s TEXT NOT NULL, verified INTEGER NOT NULL, max_rel_error REAL,
      status TEXT NOT NULL CHECK(status IN
        ('ok','refused','compile-error','wrong-result','crashed','timeout')),
      reason TEXT NOT NULL, conversion_s REAL, compile_s REAL, cache_hit INTEGER NOT NULL,
      stored_values INTEGER, kernel_source TEXT NOT NULL, wall_s REAL, context TEXT NOT NULL,
      created TEXT NOT NULL);
    INSERT INTO m1 SELECT id, matrix_id, schedule_id, kernel, implementation, dense, threads,
      warmup, repeats, median_s, min_s, max_s, times_s, verified, max_rel_error, status, reason,
      conversion_s, compile_s, cache_hit, stored_values, kernel_source, wall_s, context, created
      FROM measurements;
    DROP TABLE measurements;
    DROP TABLE groups;
    DROP TABLE provenance;
    DROP TABLE ablation;
    ALTER TABLE m1 RENAME TO measurements;
    CREATE UNIQUE INDEX measurements_identity ON measurements(
      matrix_id, kernel, implementation, ifnull(schedule_id, 0), dense, threads, repeats);
    UPDATE meta SET value = '1' WHERE key = 'schema_version';)sql");
  ResultsDb db(path);
  CHECK(db.schema_version() == kResultsSchemaVersion);
  // The migrations leave the tables, columns, indexes and constraints a new file is made with.
  const std::string fresh = test::scratch_dir("results-db-migrate-fresh") + "/fresh.sqlite";
  { ResultsDb made(fresh); }
  CHECK(schema_of(path) == schema_of(fresh));
  CHECK(schema_of(fresh).find("column dtype|TEXT|1|'f32'|0|") != std::string::npos);
  const auto kept = db.find_measurement(key, c, 1);
  REQUIRE(kept.has_value());
  CHECK(kept->measurement.median_s == Approx(0.002));
  Measurement abandoned = fake_ok(0.5, 1);
  abandoned.status = MeasureStatus::Abandoned;
  abandoned.reason = "abandoned after 2 runs";
  const Candidate slow = spmv("order=i,k format=UC parallel=i threads=1 chunk=8");
  db.record_measurement(key, slow, abandoned, nlohmann::json::object());
  const auto back = db.find_measurement(key, slow, 1);
  REQUIRE(back.has_value());
  CHECK(back->measurement.status == MeasureStatus::Abandoned);
  CHECK(back->measurement.median_s == Approx(0.5));  // partial timings are kept
  CHECK(db.count_measurements() == 2);
  // Version 4's software counts are stored and read back.
  Measurement counted = fake_ok(0.003, 1);
  counted.counters = {{"source", "getrusage"}, {"retaken", 2}, {"involuntary_switches", 0}};
  const Candidate third = spmv("order=i,k format=UC parallel=i threads=1 chunk=16");
  db.record_measurement(key, third, counted, nlohmann::json::object());
  const auto read = db.find_measurement(key, third, 1);
  REQUIRE(read.has_value());
  CHECK(read->measurement.counters == counted.counters);
  CHECK(db.find_measurement(key, c, 1)->measurement.counters.is_null());
  CHECK(db.count_measurements() == 3);
  // Version 6: rows of older databases are single precision; the same candidate timed in double
  // is another row, found by its own key only.
  REQUIRE(key.dtype == waco::kernels::Dtype::F32);
  MeasurementKey key64 = key;
  key64.dtype = waco::kernels::Dtype::F64;
  CHECK_FALSE(db.find_measurement(key64, c, 1).has_value());
  db.record_measurement(key64, c, fake_ok(0.004, 1), nlohmann::json::object());
  CHECK(db.find_measurement(key64, c, 1)->measurement.median_s == Approx(0.004));
  CHECK(db.find_measurement(key, c, 1)->measurement.median_s == Approx(0.002));
  CHECK(db.measurements(key64).size() == 1);
  CHECK(db.measurements(key).size() == 3);
  CHECK(db.count_measurements() == 4);
  // Opening it again changes nothing.
  ResultsDb again(path);
  CHECK(again.schema_version() == kResultsSchemaVersion);
  CHECK(again.count_measurements() == 4);
}

TEST_CASE("results_db: ablation rows are keyed by matrix, kernel, dense, threads and configuration") {
  const std::string path = test::scratch_dir("results-db-ablation") + "/a.sqlite";
  ResultsDb db(path);
  const MatrixRecord rec = matrix_record(small_matrix(), "small.mtx");
  db.record_matrix(rec);
  CHECK_FALSE(db.find_ablation(rec.fingerprint, "spmv", 1, 2, "hybrid").has_value());
  db.record_ablation(rec.fingerprint, "spmv", 1, 2, "hybrid", {{"winner", "csr"}});
  db.record_ablation(rec.fingerprint, "spmv", 1, 2, "exhaustive", {{"winner", "dcsr"}});
  db.record_ablation(rec.fingerprint, "spmv", 1, 1, "hybrid", {{"winner", "csc"}});
  db.record_ablation(rec.fingerprint, "spmv", 1, 2, "hybrid", {{"winner", "bcsr4x4"}});  // replaces
  const auto found = db.find_ablation(rec.fingerprint, "spmv", 1, 2, "hybrid");
  REQUIRE(found.has_value());
  CHECK(found->at("winner") == "bcsr4x4");
  const std::vector<AblationRow> rows = db.ablation_rows();
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].path == "small.mtx");
  CHECK(rows[0].nnz == rec.nnz);
  CHECK(rows[0].config == "exhaustive");  // a replaced row counts as the newest
  CHECK(rows[1].threads == 1);
  CHECK(rows[2].row.at("winner") == "bcsr4x4");
  // A damaged row is missing for find_ablation (ablate measures it again) and an error for readers.
  raw_sql(path, "UPDATE ablation SET row = '{broken' WHERE config = 'exhaustive'");
  ResultsDb again(path);
  CHECK_FALSE(again.find_ablation(rec.fingerprint, "spmv", 1, 2, "exhaustive").has_value());
  CHECK_THROWS_WITH(again.ablation_rows(), Catch::Contains("not JSON"));
}

TEST_CASE("results_db: matrices, schedules and measurements round-trip") {
  const std::string path = test::scratch_dir("results-db-roundtrip") + "/r.sqlite";
  ResultsDb db(path);
  const kernels::CooMatrix a = small_matrix();
  const MatrixRecord rec = matrix_record(a, "small.mtx");
  CHECK(rec.fingerprint.size() == 16);
  CHECK(rec.nnz == a.nnz());
  CHECK(rec.statistics.at("row_nnz_max").get<int>() >= 1);
  const std::int64_t id = db.record_matrix(rec);
  CHECK(db.record_matrix(rec) == id);  // keyed by fingerprint
  CHECK(db.count_matrices() == 1);
  const auto found = db.find_matrix(rec.fingerprint);
  REQUIRE(found.has_value());
  CHECK(found->rows == 400);
  CHECK(found->nnz == a.nnz());
  CHECK(found->statistics == rec.statistics);
  CHECK_FALSE(db.find_matrix("0000000000000000").has_value());

  const Candidate bcsr = spmv("bcsr4x4");
  CHECK(db.record_schedule(*bcsr.schedule) == db.record_schedule(*bcsr.schedule));
  CHECK(db.count_schedules() == 1);

  const MeasurementKey key{rec.fingerprint, kernels::KernelKind::SpMV, 1, 3};
  const nlohmann::json ctx = kernels::context_json(2, "none");
  db.record_measurement(key, bcsr, fake_ok(0.002, 2), ctx);
  Measurement refused;
  refused.status = MeasureStatus::Refused;
  refused.reason = "stores 40 x nnz values, above the bound of 20 x nnz";
  refused.threads = 2;
  refused.repeats = 3;
  const Candidate big = spmv("bcsr64x64");
  db.record_measurement(key, big, refused, ctx);
  db.record_measurement(key, Candidate::baseline("csr"), fake_ok(0.003, 2), ctx);
  CHECK(db.count_measurements() == 3);
  CHECK(db.count_schedules() == 2);

  const std::vector<StoredMeasurement> all = db.measurements(key);
  REQUIRE(all.size() == 3);
  CHECK(all[0].candidate.schedule == bcsr.schedule);
  CHECK(all[0].measurement.to_json() == fake_ok(0.002, 2).to_json());
  CHECK(all[0].context == ctx);
  CHECK_FALSE(all[0].created.empty());
  CHECK(all[1].measurement.status == MeasureStatus::Refused);
  CHECK(all[1].measurement.reason == refused.reason);
  CHECK(all[1].measurement.max_rel_error == -1.0);
  CHECK_FALSE(all[2].candidate.schedule.has_value());
  CHECK(all[2].candidate.implementation == "csr");

  // The same identity replaces; another thread count or repeat count is another measurement.
  db.record_measurement(key, bcsr, fake_ok(0.001, 2), ctx);
  CHECK(db.count_measurements() == 3);
  auto again = db.find_measurement(key, bcsr, 2);
  REQUIRE(again.has_value());
  CHECK(again->measurement.median_s == 0.001);
  CHECK_FALSE(db.find_measurement(key, bcsr, 1).has_value());
  db.record_measurement(key, bcsr, fake_ok(0.004, 1), ctx);
  CHECK(db.count_measurements() == 4);
  MeasurementKey other = key;
  other.repeats = 50;
  CHECK(db.measurements(other).empty());
  other = key;
  other.dense = 256;
  CHECK(db.measurements(other).empty());
  CHECK(db.find_measurement(key, Candidate::baseline("csr"), 2).has_value());
  CHECK_FALSE(db.find_measurement(key, Candidate::baseline("eigen"), 2).has_value());

  // Another process (or a reopened handle) sees what was committed.
  ResultsDb second(path);
  CHECK(second.count_measurements() == 4);
}

TEST_CASE("results_db: an uncommitted transaction rolls back") {
  const std::string path = test::scratch_dir("results-db-tx") + "/r.sqlite";
  ResultsDb db(path);
  const MatrixRecord rec = matrix_record(small_matrix(), "m.mtx");
  db.record_matrix(rec);
  const MeasurementKey key{rec.fingerprint, kernels::KernelKind::SpMV, 1, 3};
  {
    ResultsDb::Transaction tx(db);
    db.record_measurement(key, spmv("csr"), fake_ok(0.001, 2), nlohmann::json::object());
    db.record_measurement(key, spmv("dcsr"), fake_ok(0.001, 2), nlohmann::json::object());
    CHECK(db.count_measurements() == 2);  // visible inside the transaction
  }
  CHECK(db.count_measurements() == 0);
  {
    ResultsDb::Transaction tx(db);
    db.record_measurement(key, spmv("csr"), fake_ok(0.001, 2), nlohmann::json::object());
    tx.commit();
  }
  CHECK(ResultsDb(path).count_measurements() == 1);
}

TEST_CASE("results_db: a killed tuning run resumes without losing or repeating work") {
  const std::string dir = test::scratch_dir("results-db-resume");
  const std::string path = dir + "/r.sqlite";
  const kernels::CooMatrix a = small_matrix();
  const auto ops = kernels::make_dense_operands(kernels::KernelKind::SpMV, &a, nullptr, 1, 3);
  const kernels::Problem p = kernels::make_problem(kernels::KernelKind::SpMV, &a, nullptr, ops);
  const kernels::Reference ref = kernels::compute_reference(p);
  const MatrixRecord rec = matrix_record(a, "small.mtx");
  MeasureOptions mo;
  mo.warmup = 1;
  mo.repeats = 3;
  mo.threads = 1;
  mo.generated.compiler.cache_dir = dir + "/cache";
  const MeasurementKey key{rec.fingerprint, kernels::KernelKind::SpMV, 1, mo.repeats};
  const std::vector<Candidate> candidates = chunk_candidates();

  // A first run, in a child process, slowed down so that it is killed midway.
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 0;
    try {
      ResultsDb db(path);
      db.record_matrix(rec);
      MeasureOptions slow = mo;
      slow.child_hook = [](const Candidate&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
      };
      Measurer m(p, ref, slow);
      run_candidates(db, key, m, candidates, {});
      code = 10;  // finished: the parent was too slow to kill it
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 11;
    }
    _exit(code);
  }
  std::int64_t before_kill = 0;
  for (int i = 0; i < 6000; ++i) {  // up to 60 s (the first candidate compiles)
    if (fs::exists(path)) {
      try {
        before_kill = ResultsDb(path).count_measurements();
      } catch (const kernels::Error&) {
        before_kill = 0;  // the child is still creating the schema
      }
    }
    if (before_kill >= 3) break;
    usleep(10000);
  }
  kill(pid, SIGKILL);
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  REQUIRE(WIFSIGNALED(st));
  const std::int64_t after_kill = ResultsDb(path).count_measurements();
  INFO("measured before the kill: " << after_kill);
  REQUIRE(after_kill >= 3);
  REQUIRE(after_kill < static_cast<std::int64_t>(candidates.size()));

  // Resume: what is stored is reused, the rest is measured, nothing twice.
  ResultsDb db(path);
  Measurer m(p, ref, mo);
  std::vector<std::int64_t> progress_done;
  TuneOptions to;
  to.progress = [&](const TuneProgress& pr) {
    progress_done.push_back(pr.done);
    CHECK(pr.total == static_cast<std::int64_t>(candidates.size()));
  };
  const TuneResult r = run_candidates(db, key, m, candidates, to);
  CHECK(r.reused == after_kill);
  CHECK(r.measured == static_cast<std::int64_t>(candidates.size()) - after_kill);
  CHECK(r.complete);
  CHECK(r.entries.size() == candidates.size());
  CHECK(progress_done.size() == candidates.size());
  CHECK(progress_done.back() == static_cast<std::int64_t>(candidates.size()));
  CHECK(db.count_measurements() == static_cast<std::int64_t>(candidates.size()));
  std::set<std::string> labels;
  for (const StoredMeasurement& s : db.measurements(key)) labels.insert(s.candidate.label());
  CHECK(labels.size() == candidates.size());
  REQUIRE(r.best.has_value());
  CHECK(r.status_counts.at(MeasureStatus::Ok) == static_cast<std::int64_t>(candidates.size()));

  // A third run measures nothing.
  const TuneResult again = run_candidates(db, key, m, candidates, {});
  CHECK(again.measured == 0);
  CHECK(again.reused == static_cast<std::int64_t>(candidates.size()));
  CHECK(db.count_measurements() == static_cast<std::int64_t>(candidates.size()));
}

TEST_CASE("results_db: failed candidates are recorded, retried on request, and budgets stop") {
  const std::string dir = test::scratch_dir("results-db-failures");
  const std::string path = dir + "/r.sqlite";
  const kernels::CooMatrix a = small_matrix();
  const auto ops = kernels::make_dense_operands(kernels::KernelKind::SpMV, &a, nullptr, 1, 3);
  const kernels::Problem p = kernels::make_problem(kernels::KernelKind::SpMV, &a, nullptr, ops);
  const kernels::Reference ref = kernels::compute_reference(p);
  ResultsDb db(path);
  const MatrixRecord rec = matrix_record(a, "small.mtx");
  db.record_matrix(rec);
  MeasureOptions mo;
  mo.warmup = 0;
  mo.repeats = 2;
  mo.threads = 1;
  mo.generated.compiler.cache_dir = dir + "/cache";
  mo.child_hook = [](const Candidate& c) {
    if (c.schedule && c.schedule->chunk == 4) raise(SIGABRT);
  };
  const MeasurementKey key{rec.fingerprint, kernels::KernelKind::SpMV, 1, mo.repeats};
  const std::vector<Candidate> candidates = chunk_candidates();
  {
    Measurer m(p, ref, mo);
    std::vector<Candidate> with_dup = candidates;
    with_dup.push_back(candidates[0]);  // duplicates are measured once
    const TuneResult r = run_candidates(db, key, m, with_dup, {});
    CHECK(r.measured == 8);
    CHECK(r.status_counts.at(MeasureStatus::Crashed) == 1);
    CHECK(r.status_counts.at(MeasureStatus::Ok) == 7);
    const auto crashed = db.find_measurement(key, candidates[2], 1);
    REQUIRE(crashed.has_value());
    CHECK(crashed->measurement.status == MeasureStatus::Crashed);
    CHECK(crashed->measurement.reason.find("signal 6") != std::string::npos);
  }
  {
    mo.child_hook = nullptr;  // "fixed": a retry measures the crashed one only
    Measurer m(p, ref, mo);
    TuneOptions to;
    to.retry_failed = true;
    const TuneResult r = run_candidates(db, key, m, candidates, to);
    CHECK(r.measured == 1);
    CHECK(r.reused == 7);
    CHECK(r.status_counts.at(MeasureStatus::Ok) == 8);
    CHECK(db.count_measurements() == 8);

    // A stop flag already raised: nothing is considered.
    volatile std::sig_atomic_t stop = 1;
    TuneOptions stopped;
    stopped.stop = &stop;
    const TuneResult s = run_candidates(db, key, m, candidates, stopped);
    CHECK(s.entries.empty());
    CHECK_FALSE(s.complete);
    CHECK(s.stopped_by == "interrupted");

    // A tiny time budget: stored results are still taken, new measurements are not started.
    std::vector<Candidate> more = candidates;
    more.push_back(spmv("order=i,k format=UC parallel=i threads=1 chunk=256"));
    TuneOptions budget;
    budget.budget_seconds = 1e-9;
    const TuneResult b = run_candidates(db, key, m, more, budget);
    CHECK(b.reused == 8);
    CHECK(b.measured == 0);
    CHECK_FALSE(b.complete);
    CHECK(b.stopped_by == "budget-seconds");
  }
}

TEST_CASE("results_db: groups and provenance are stored in one transaction each, with stats") {
  const std::string path = test::scratch_dir("results-db-groups") + "/g.sqlite";
  const kernels::CooMatrix a = small_matrix();
  const MatrixRecord rec = matrix_record(a, "small.mtx");
  const MeasurementKey key{rec.fingerprint, kernels::KernelKind::SpMV, 1, 5};
  ResultsDb db(path);
  db.record_matrix(rec);
  CHECK_FALSE(db.has_group(key, 2));
  const std::string split = split_of(rec.fingerprint);
  CHECK(split_of(rec.fingerprint) == split);  // stable
  db.record_provenance(rec.fingerprint, {{{"source", "generator"}, {"seed", 3}}, "generator:rmat", split});
  const auto prov = db.find_provenance(rec.fingerprint);
  REQUIRE(prov);
  CHECK(prov->recipe["seed"] == 3);
  CHECK(prov->source == "generator:rmat");

  std::vector<GroupRow> rows;
  for (const Candidate& c : chunk_candidates()) rows.push_back({c, fake_ok(0.001, 2)});
  rows.push_back({Candidate::baseline("csr"), fake_ok(0.002, 2)});
  Measurement refused;
  refused.status = MeasureStatus::Refused;
  refused.reason = "padding";
  refused.threads = 2;
  rows.push_back({spmv("split=i:4,k:4 order=i1,k1,i0,k0 format=UUUU parallel=i1"), refused});
  GroupRecord g;
  g.threads = 2;
  g.rounds = 5;
  g.candidates = static_cast<int>(rows.size());
  g.csr_spread = 0.03;
  db.record_group(key, g, rows);
  CHECK(db.has_group(key, 2));
  CHECK_FALSE(db.has_group(key, 1));
  CHECK(db.count_measurements() == static_cast<std::int64_t>(rows.size()));
  // Rows keep no kernel source of their own; they are found like any measurement.
  const auto back = db.find_measurement(key, rows[0].candidate, 2);
  REQUIRE(back);
  CHECK(back->measurement.kernel_source.empty());
  // A repetition stores its agreement, not rows; recording a group again replaces it.
  GroupRecord rep = g;
  rep.repetition = 1;
  rep.pair_agreement = 0.9;
  db.record_group(key, rep, rows);
  db.record_group(key, g, rows);
  CHECK(db.count_measurements() == static_cast<std::int64_t>(rows.size()));
  const nlohmann::json stats = db.dataset_stats();
  INFO(stats.dump(2));
  CHECK(stats["spmv"]["matrices"] == 1);
  CHECK(stats["spmv"]["groups"] == 1);
  CHECK(stats["spmv"]["repeated_groups"] == 1);
  CHECK(stats["spmv"]["pair_agreement_mean"].get<double>() == Approx(0.9));
  CHECK(stats["spmv"]["statuses"]["ok"] == 9);
  CHECK(stats["spmv"]["statuses"]["refused"] == 1);
  CHECK(stats["spmv"]["sources"]["generator"] == 1);
  CHECK(stats["spmv"]["splits"][split] == 1);
  CHECK(stats["spmv"]["csr_spread_median"].get<double>() == Approx(0.03));
  // The split is spread over all three values.
  std::map<std::string, int> seen;
  for (int i = 0; i < 1000; ++i) {
    char fp[17];
    std::snprintf(fp, sizeof fp, "%016llx", static_cast<unsigned long long>(kernels::splitmix64(i)));
    ++seen[split_of(fp)];
  }
  CHECK(seen["train"] > 700);
  CHECK(seen["validation"] > 50);
  CHECK(seen["test"] > 50);
}

TEST_CASE("results_db: a killed group leaves nothing behind") {
  const std::string path = test::scratch_dir("results-db-group-kill") + "/k.sqlite";
  const kernels::CooMatrix a = small_matrix();
  const MatrixRecord rec = matrix_record(a, "small.mtx");
  const MeasurementKey key{rec.fingerprint, kernels::KernelKind::SpMV, 1, 5};
  { ResultsDb db(path); db.record_matrix(rec); }
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // open a group's transaction, write part of it, then die without committing
    ResultsDb db(path);
    ResultsDb::Transaction tx(db);
    GroupRecord g;
    g.rounds = 5;
    std::vector<GroupRow> rows;
    for (const Candidate& c : chunk_candidates()) rows.push_back({c, fake_ok(0.001, 1)});
    db.record_group(key, g, rows);
    ::kill(::getpid(), SIGKILL);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  ResultsDb db(path);
  CHECK_FALSE(db.has_group(key, 1));
  CHECK(db.count_measurements() == 0);
}

TEST_CASE("results_db: a version 5 file with groups is migrated to 6, groups and rows kept f32") {
  const std::string path = test::scratch_dir("results-db-v5") + "/g.sqlite";
  fs::remove(path);
  const kernels::CooMatrix a = small_matrix();
  const MatrixRecord rec = matrix_record(a, "small.mtx");
  const MeasurementKey key{rec.fingerprint, kernels::KernelKind::SpMV, 1, 5};
  std::vector<GroupRow> rows;
  for (const Candidate& c : chunk_candidates()) rows.push_back({c, fake_ok(0.001, 2)});
  GroupRecord g;
  g.threads = 2;
  g.rounds = 5;
  g.candidates = static_cast<int>(rows.size());
  {
    ResultsDb db(path);
    db.record_matrix(rec);
    db.record_group(key, g, rows);
  }
  // Back to version 5: groups without dtype (the old UNIQUE), measurements without dtype.
  raw_sql(path, R"sql(
    PRAGMA foreign_keys = OFF;
    CREATE TABLE g5(
      id INTEGER PRIMARY KEY, matrix_id INTEGER NOT NULL REFERENCES matrices(id),
      kernel TEXT NOT NULL, dense INTEGER NOT NULL, threads INTEGER NOT NULL,
      rounds INTEGER NOT NULL, repetition INTEGER NOT NULL, candidates INTEGER NOT NULL,
      csr_spread REAL, pair_agreement REAL, seconds REAL NOT NULL, context TEXT NOT NULL,
      created TEXT NOT NULL, UNIQUE(matrix_id, kernel, dense, threads, repetition));
    INSERT INTO g5 SELECT id, matrix_id, kernel, dense, threads, rounds, repetition, candidates,
      csr_spread, pair_agreement, seconds, context, created FROM groups;
    DROP TABLE groups;
    ALTER TABLE g5 RENAME TO groups;
    DROP INDEX measurements_identity;
    ALTER TABLE measurements DROP COLUMN dtype;
    CREATE UNIQUE INDEX measurements_identity ON measurements(
      matrix_id, kernel, implementation, ifnull(schedule_id, 0), dense, threads, repeats);
    UPDATE meta SET value = '5' WHERE key = 'schema_version';)sql");
  ResultsDb db(path);
  CHECK(db.schema_version() == kResultsSchemaVersion);
  CHECK(db.has_group(key, 2));
  MeasurementKey key64 = key;
  key64.dtype = kernels::Dtype::F64;
  CHECK_FALSE(db.has_group(key64, 2));
  CHECK(db.measurements(key).size() == rows.size());
  // The rows still belong to their group (the export finds them through it), and a group in
  // double beside it is another group.
  std::size_t exported = 0;
  db.for_each_group("spmv", [&](const nlohmann::json& j) {
    CHECK_FALSE(j.contains("dtype"));
    exported += j.at("rows").size();
  });
  CHECK(exported == rows.size());
  db.record_group(key64, g, rows);
  CHECK(db.has_group(key64, 2));
  CHECK(db.count_measurements() == static_cast<std::int64_t>(2 * rows.size()));
  CHECK(db.dataset_stats()["spmv f64"]["groups"] == 1);
  CHECK(db.dataset_stats()["spmv"]["groups"] == 1);
}
