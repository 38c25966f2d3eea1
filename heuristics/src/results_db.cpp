// The SQLite results database (see results_db.hpp for the tables and the guarantees). Only this
// translation unit includes <sqlite3.h>; SQLite is linked PRIVATE to waco_heuristics.
#include "waco/heuristics/results_db.hpp"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/json_fields.hpp"

namespace waco::heuristics {

using kernels::Error;
namespace fs = std::filesystem;

namespace {

constexpr int kBusyTimeoutMs = 30000;

// The measurements table under a given name: version 2 added the status 'abandoned' (racing) to
// its CHECK, version 3 the column group_id.
std::string measurements_table(const std::string& name, bool with_group) {
  return "CREATE TABLE " + name + R"sql((
  id             INTEGER PRIMARY KEY,
  matrix_id      INTEGER NOT NULL REFERENCES matrices(id),
  schedule_id    INTEGER REFERENCES schedules(id),
  kernel         TEXT NOT NULL,
  implementation TEXT NOT NULL,
  dense          INTEGER NOT NULL,
  threads        INTEGER NOT NULL,
  warmup         INTEGER NOT NULL,
  repeats        INTEGER NOT NULL,
  median_s       REAL,
  min_s          REAL,
  max_s          REAL,
  times_s        TEXT NOT NULL,
  verified       INTEGER NOT NULL,
  max_rel_error  REAL,
  status         TEXT NOT NULL CHECK(status IN
                   ('ok','refused','compile-error','wrong-result','crashed','timeout',
                    'abandoned')),
  reason         TEXT NOT NULL,
  conversion_s   REAL,
  compile_s      REAL,
  cache_hit      INTEGER NOT NULL,
  stored_values  INTEGER,
  kernel_source  TEXT NOT NULL,
  wall_s         REAL,
  context        TEXT NOT NULL,
  created        TEXT NOT NULL)sql" +
         std::string(with_group ? ",\n  group_id       INTEGER REFERENCES groups(id));\n" : ");\n");
}

// The groups table under a given name: version 6 added the column dtype, part of its identity.
std::string groups_table(const std::string& name, bool with_dtype) {
  return "CREATE TABLE " + name + R"sql((
  id             INTEGER PRIMARY KEY,
  matrix_id      INTEGER NOT NULL REFERENCES matrices(id),
  kernel         TEXT NOT NULL,
  dense          INTEGER NOT NULL,
  threads        INTEGER NOT NULL,
  rounds         INTEGER NOT NULL,
  repetition     INTEGER NOT NULL,
  candidates     INTEGER NOT NULL,
  csr_spread     REAL,
  pair_agreement REAL,
  seconds        REAL NOT NULL,
  context        TEXT NOT NULL,
  created        TEXT NOT NULL,)sql" +
         std::string(with_dtype ? R"sql(
  dtype          TEXT NOT NULL DEFAULT 'f32' CHECK(dtype IN ('f32','f64')),
  UNIQUE(matrix_id, kernel, dense, threads, repetition, dtype));
)sql"
                                : R"sql(
  UNIQUE(matrix_id, kernel, dense, threads, repetition));
)sql");
}

// Version 3: the dataset tables. A matrix's provenance (how to make it again, where it came from,
// its split) and the measurement groups (rows timed side by side in one child).
std::string dataset_tables_sql() {
  return R"sql(
CREATE TABLE provenance(
  matrix_id INTEGER PRIMARY KEY REFERENCES matrices(id),
  recipe    TEXT NOT NULL,
  source    TEXT NOT NULL,
  split     TEXT NOT NULL CHECK(split IN ('train','validation','test')));
)sql" + groups_table("groups", false);
}

// Version 4: the software counts of a side-by-side measurement (Measurement::counters).
constexpr const char* kCountersColumn = "ALTER TABLE measurements ADD COLUMN counters TEXT;\n";

// Version 5: the outcomes of `waco-hybrid ablate` (one JSON row per matrix, kernel, dense size,
// threads and configuration).
constexpr const char* kAblationTable = R"sql(
CREATE TABLE ablation(
  id        INTEGER PRIMARY KEY,
  matrix_id INTEGER NOT NULL REFERENCES matrices(id),
  kernel    TEXT NOT NULL,
  dense     INTEGER NOT NULL,
  threads   INTEGER NOT NULL,
  config    TEXT NOT NULL,
  row       TEXT NOT NULL,
  created   TEXT NOT NULL,
  UNIQUE(matrix_id, kernel, dense, threads, config));
)sql";

// Version 6: the value type a measurement or group computed in (double precision); the
// identities hold it, so that a matrix timed in both types keeps both. The groups table is
// rebuilt (SQLite cannot change a UNIQUE constraint; rows keep their ids): with foreign keys off
// when it holds rows (ResultsDb's constructor).
std::string dtype_columns_sql() {
  return R"sql(
ALTER TABLE measurements ADD COLUMN dtype TEXT NOT NULL DEFAULT 'f32' CHECK(dtype IN ('f32','f64'));
DROP INDEX measurements_identity;
CREATE UNIQUE INDEX measurements_identity ON measurements(
  matrix_id, kernel, implementation, ifnull(schedule_id, 0), dense, threads, repeats, dtype);
)sql" + groups_table("groups_v6", true) + R"sql(
INSERT INTO groups_v6(id, matrix_id, kernel, dense, threads, rounds, repetition, candidates,
  csr_spread, pair_agreement, seconds, context, created)
  SELECT id, matrix_id, kernel, dense, threads, rounds, repetition, candidates, csr_spread,
  pair_agreement, seconds, context, created FROM groups;
DROP TABLE groups;
ALTER TABLE groups_v6 RENAME TO groups;
)sql";
}

constexpr const char* kMeasurementsIndex = R"sql(
CREATE UNIQUE INDEX measurements_identity ON measurements(
  matrix_id, kernel, implementation, ifnull(schedule_id, 0), dense, threads, repeats);
)sql";

// Every table of the current schema. Executed in one transaction when the file is new.
std::string schema_sql() {
  return R"sql(
CREATE TABLE meta(
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL);
CREATE TABLE matrices(
  id          INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  path        TEXT NOT NULL,
  rows        INTEGER NOT NULL,
  cols        INTEGER NOT NULL,
  nnz         INTEGER NOT NULL,
  statistics  TEXT NOT NULL,
  added       TEXT NOT NULL);
CREATE TABLE schedules(
  id     INTEGER PRIMARY KEY,
  kernel TEXT NOT NULL,
  text   TEXT NOT NULL,
  json   TEXT NOT NULL,
  UNIQUE(kernel, text));
)sql" + dataset_tables_sql() + measurements_table("measurements", true) + kMeasurementsIndex +
         kCountersColumn + kAblationTable + dtype_columns_sql();
}

// Version 5 -> 6: measurements.dtype.
std::string migrate_v5_to_v6_sql() {
  return dtype_columns_sql() + "UPDATE meta SET value = '6' WHERE key = 'schema_version';\n";
}

// Version 4 -> 5: the ablation table.
std::string migrate_v4_to_v5_sql() {
  return std::string(kAblationTable) + "UPDATE meta SET value = '5' WHERE key = 'schema_version';\n";
}

// Version 1 -> 2: SQLite cannot change a CHECK constraint, so the table is rebuilt and renamed
// (rows keep their ids), in one transaction with the version update.
std::string migrate_v1_to_v2_sql() {
  return measurements_table("measurements_v2", false) +
         "INSERT INTO measurements_v2 SELECT * FROM measurements;\n"
         "DROP TABLE measurements;\n"
         "ALTER TABLE measurements_v2 RENAME TO measurements;\n" +
         kMeasurementsIndex + "UPDATE meta SET value = '2' WHERE key = 'schema_version';\n";
}

// Version 3 -> 4: measurements.counters (software counts of side-by-side runs, JSON; NULL
// otherwise).
std::string migrate_v3_to_v4_sql() {
  return std::string(kCountersColumn) +
         "UPDATE meta SET value = '4' WHERE key = 'schema_version';\n";
}

// Version 2 -> 3: the dataset tables and measurements.group_id (NULL for rows measured alone).
std::string migrate_v2_to_v3_sql() {
  return dataset_tables_sql() +
         "ALTER TABLE measurements ADD COLUMN group_id INTEGER REFERENCES groups(id);\n"
         "UPDATE meta SET value = '3' WHERE key = 'schema_version';\n";
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

/// A JSON value stored in the database (statistics, context, times, schedules, ...): a damaged
/// file is refused as an Error naming the column, not with the JSON library's exception.
nlohmann::json stored_json(const std::string& text, const char* column) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded())
    throw Error("the results database holds a damaged value in column '" + std::string(column) +
                    "' (not JSON)",
                "the file is damaged; choose another --db");
  return j;
}

/// Runs f, turning the JSON library's exceptions (a stored value of the wrong type) into Error.
template <class F>
auto reading(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("the results database holds a damaged ") + what + " (" + e.what() + ")",
                "the file is damaged; choose another --db");
  }
}

/// An integer field of an export object in [lo, hi]; Error otherwise.
std::int64_t export_int(const nlohmann::json& o, const char* key, std::int64_t lo, std::int64_t hi) {
  return kernels::json_int_field(o, key, lo, hi, "dataset export object");
}

/// A prepared statement, finalized on destruction. Binds are 1-based as in SQLite.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    const int rc = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
    if (rc == SQLITE_OK) return;
    const std::string msg = sqlite3_errmsg(db);
    const std::string file = sqlite3_db_filename(db, "main");
    sqlite3_finalize(stmt_);
    // Our SQL is fixed, so a syntax error is a bug; everything else is about the file (a damaged
    // file also gives SQLITE_ERROR: "unsupported file format", a table or column missing).
    WACO_ASSERT(rc != SQLITE_ERROR || msg.find("syntax error") == std::string::npos,
                "results database: bad SQL: " + msg);
    throw Error("results database " + file + ": " + msg,
                rc == SQLITE_NOTADB  ? "the file is not an SQLite database; choose another --db"
                : rc == SQLITE_ERROR ? "the file is damaged or not a waco-hybrid results database; "
                                       "choose another --db"
                                     : "check the file and its permissions");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, std::int64_t v) {
    check(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }
  Statement& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  Statement& bind(int i, double v) {
    check(std::isfinite(v) ? sqlite3_bind_double(stmt_, i, v) : sqlite3_bind_null(stmt_, i));
    return *this;
  }
  Statement& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Statement& bind_null(int i) {
    check(sqlite3_bind_null(stmt_, i));
    return *this;
  }

  /// Steps once: true when a row is available, false when done. Throws Error on failure (e.g.
  /// the database is locked for longer than the busy timeout, or the disk is full).
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(rc);
  }

  /// Steps once, ignoring a row: true when done, false (the statement reset, ready to step
  /// again) when SQLite answered busy without waiting and `last_try` is false.
  bool step_unless_busy(bool last_try) {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) return true;
    if ((rc & 0xff) != SQLITE_BUSY || last_try) fail(rc);
    sqlite3_reset(stmt_);
    return false;
  }

  [[noreturn]] void fail(int rc) const {
    throw Error(std::string("results database: ") + sqlite3_errmsg(db_) + " (" +
                    sqlite3_db_filename(db_, "main") + ")",
                rc == SQLITE_BUSY ? "another process holds the database; try again" : "");
  }

  std::int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col, double if_null = 0.0) const {
    return sqlite3_column_type(stmt_, col) == SQLITE_NULL ? if_null
                                                          : sqlite3_column_double(stmt_, col);
  }
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }

 private:
  void check(int rc) {
    WACO_ASSERT(rc == SQLITE_OK, std::string("results database: bind failed: ") +
                                     sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

nlohmann::json row_statistics(const kernels::CooMatrix& a) {
  std::vector<std::int64_t> per_row(static_cast<std::size_t>(a.rows), 0);
  for (kernels::index_t r : a.row) ++per_row[static_cast<std::size_t>(r)];
  std::int64_t empty = 0, mx = 0, mn = a.rows > 0 ? per_row[0] : 0;
  double sum = 0, sumsq = 0;
  for (std::int64_t n : per_row) {
    empty += n == 0;
    mx = std::max(mx, n);
    mn = std::min(mn, n);
    sum += static_cast<double>(n);
    sumsq += static_cast<double>(n) * static_cast<double>(n);
  }
  const double rows = std::max(1.0, static_cast<double>(a.rows));
  const double mean = sum / rows;
  std::int64_t bandwidth = 0;
  for (std::size_t e = 0; e < a.row.size(); ++e)
    bandwidth = std::max<std::int64_t>(bandwidth, std::abs(static_cast<std::int64_t>(a.row[e]) -
                                                           static_cast<std::int64_t>(a.col[e])));
  return {{"dims", {a.rows, a.cols}},
          {"density", a.rows > 0 && a.cols > 0
                          ? static_cast<double>(a.nnz()) /
                                (static_cast<double>(a.rows) * static_cast<double>(a.cols))
                          : 0.0},
          {"row_nnz_min", mn},
          {"row_nnz_max", mx},
          {"row_nnz_mean", mean},
          {"row_nnz_stddev", std::sqrt(std::max(0.0, sumsq / rows - mean * mean))},
          {"empty_rows", empty},
          {"bandwidth", bandwidth}};
}

}  // namespace

std::string default_results_path() {
  std::string base = env("XDG_DATA_HOME");
  if (!base.empty()) return base + "/waco-hybrid/waco-results.sqlite";
  const std::string home = env("HOME");
  if (!home.empty()) return home + "/.local/share/waco-hybrid/waco-results.sqlite";
  return "/tmp/waco-hybrid-" + std::to_string(::getuid()) + "/waco-results.sqlite";
}

MatrixRecord matrix_record(const kernels::CooMatrix& a, const std::string& path,
                           const std::string& fingerprint) {
  MatrixRecord r;
  r.fingerprint = fingerprint.empty() ? kernels::fingerprint_hex(a) : fingerprint;
  r.path = path;
  r.rows = a.rows;
  r.cols = a.cols;
  r.nnz = a.nnz();
  r.statistics = row_statistics(a);
  return r;
}

MatrixRecord matrix_record(const kernels::CooTensor& t, const std::string& path,
                           const std::string& fingerprint) {
  MatrixRecord r;
  r.fingerprint = fingerprint.empty() ? kernels::fingerprint_hex(t) : fingerprint;
  r.path = path;
  r.rows = t.order() > 0 ? t.dims[0] : 0;
  r.cols = t.order() > 1 ? t.dims[1] : 0;
  r.nnz = t.nnz();
  r.statistics = {{"dims", t.dims}, {"order", t.order()}};
  return r;
}

namespace {
/// Column names of every table of a schema-version database: (table, column) pairs.
std::vector<std::pair<std::string, std::string>> columns_of(sqlite3* db) {
  std::vector<std::string> tables;
  {
    Statement t(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                    "ORDER BY name");
    while (t.step()) tables.push_back(t.text(0));
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& table : tables) {
    Statement c(db, "SELECT name FROM pragma_table_info(?1)");
    c.bind(1, table);
    while (c.step()) out.emplace_back(table, c.text(0));
  }
  return out;
}

/// Refuses a file whose tables lack a column of this schema version (a damaged or foreign file
/// that says it is of this version): the statements would fail on it later, as a bug.
void check_tables(sqlite3* db, const std::string& path) {
  static const std::vector<std::pair<std::string, std::string>> expected = [] {
    sqlite3* mem = nullptr;
    sqlite3_open(":memory:", &mem);
    sqlite3_exec(mem, schema_sql().c_str(), nullptr, nullptr, nullptr);
    auto cols = columns_of(mem);
    sqlite3_close(mem);
    return cols;
  }();
  const auto have = columns_of(db);
  for (const auto& tc : expected)
    if (std::find(have.begin(), have.end(), tc) == have.end())
      throw Error("the results database " + path + " says schema version " +
                      std::to_string(kResultsSchemaVersion) + " but its table '" + tc.first +
                      "' has no column '" + tc.second + "': a damaged or foreign file",
                  "choose another file with --db");
}
}  // namespace

// ---- ResultsDb -----------------------------------------------------------------------------

ResultsDb::ResultsDb(const std::string& path) : path_(path) {
  if (path.empty()) throw Error("the results database path is empty", "give --db FILE");
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      throw Error("cannot create the directory of the results database " + dir.string() + ": " +
                      ec.message(),
                  "choose another file with --db");
  }
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error("cannot open the results database " + path + ": " + msg,
                "check the path and its permissions, or choose another file with --db");
  }
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  try {
    // A file that is not SQLite fails at the first statement that reads it.
    std::int64_t tables = 0;
    {  // scoped: a statement left active keeps a read transaction open
      Statement probe(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table'");
      probe.step();
      tables = probe.int64(0);
    }
    // Switching a new file to WAL needs the file to itself, and SQLite answers SQLITE_BUSY at
    // once (the busy handler is not called) while another process opens it too: wait here.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
    for (Statement wal(db_, "PRAGMA journal_mode = WAL");
         !wal.step_unless_busy(std::chrono::steady_clock::now() >= deadline);)
      ::usleep(10000);
    exec("PRAGMA synchronous = NORMAL");
    exec("PRAGMA foreign_keys = ON");
    if (tables == 0) {
      exec("BEGIN IMMEDIATE");
      // Another process may have created the schema between our check and the lock.
      bool fresh = false;
      {
        Statement again(db_, "SELECT count(*) FROM sqlite_master WHERE name = 'meta'");
        again.step();
        fresh = again.int64(0) == 0;
      }
      if (fresh) {
        exec(schema_sql().c_str());
        Statement v(db_, "INSERT INTO meta(key, value) VALUES ('schema_version', ?1), "
                         "('application', 'waco-hybrid results'), ('created', ?2)");
        v.bind(1, std::to_string(kResultsSchemaVersion)).bind(2, kernels::utc_timestamp());
        v.step();
      }
      exec("COMMIT");
    }
    bool meta = false;
    {
      Statement has_meta(db_, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                              "name = 'meta'");
      has_meta.step();
      meta = has_meta.int64(0) != 0;
    }
    if (!meta)
      throw Error(path + " is an SQLite database but not a waco-hybrid results database (no "
                         "table 'meta')",
                  "choose another file with --db");
    std::string text;
    {  // finalized before a migration: an open statement locks the tables it read
      Statement ver(db_, "SELECT value FROM meta WHERE key = 'schema_version'");
      if (!ver.step())
        throw Error(path + " has no schema version: not a waco-hybrid results database",
                    "choose another file with --db");
      text = ver.text(0);
    }
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0')
      throw Error(path + " has an unreadable schema version '" + text + "'",
                  "choose another file with --db");
    version_ = static_cast<int>(v);
    // Older versions are migrated in place, one step at a time, each step once: another process
    // may have done it between our read and the lock.
    auto migrate = [&](int from, const std::string& sql) {
      if (version_ != from) return;
      exec("BEGIN IMMEDIATE");
      try {
        bool still = false;
        {
          Statement again(db_, "SELECT value FROM meta WHERE key = 'schema_version'");
          still = again.step() && again.text(0) == std::to_string(from);
        }
        if (still) exec(sql.c_str());
        exec("COMMIT");
      } catch (...) {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
      }
      version_ = from + 1;
    };
    migrate(1, migrate_v1_to_v2_sql());
    migrate(2, migrate_v2_to_v3_sql());
    migrate(3, migrate_v3_to_v4_sql());
    migrate(4, migrate_v4_to_v5_sql());
    // Version 6 rebuilds the groups table, which measurements reference: foreign keys are off
    // while it is dropped and its copy renamed (a no-op inside a transaction, so around it).
    if (version_ == 5) exec("PRAGMA foreign_keys = OFF");
    migrate(5, migrate_v5_to_v6_sql());
    exec("PRAGMA foreign_keys = ON");
    if (version_ != kResultsSchemaVersion)
      throw Error("the results database " + path + " has schema version " + text +
                      ", this waco-hybrid reads version " + std::to_string(kResultsSchemaVersion),
                  version_ > kResultsSchemaVersion
                      ? "it was written by a newer waco-hybrid: use that one, or another --db"
                      : "it was written by an older waco-hybrid: choose another --db");
    check_tables(db_, path);
  } catch (...) {  // close the handle, then let the error through unchanged
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

ResultsDb::~ResultsDb() { sqlite3_close(db_); }

void ResultsDb::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    const bool not_a_db = sqlite3_errcode(db_) == SQLITE_NOTADB;
    throw Error("results database " + path_ + ": " + msg,
                not_a_db ? "the file is not an SQLite database; choose another file with --db"
                         : "");
  }
}

ResultsDb::Transaction::Transaction(ResultsDb& db) : db_(&db) {
  WACO_ASSERT(db.tx_depth_ == 0, "nested results-database transactions");
  db.exec("BEGIN IMMEDIATE");
  ++db.tx_depth_;
}

ResultsDb::Transaction::~Transaction() {
  if (done_) return;
  --db_->tx_depth_;
  sqlite3_exec(db_->db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void ResultsDb::Transaction::commit() {
  WACO_ASSERT(!done_, "transaction committed twice");
  db_->exec("COMMIT");
  done_ = true;
  --db_->tx_depth_;
}

std::int64_t ResultsDb::record_matrix(const MatrixRecord& m) {
  Statement s(db_,
              "INSERT INTO matrices(fingerprint, path, rows, cols, nnz, statistics, added) "
              "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(fingerprint) DO UPDATE SET "
              "path = excluded.path, statistics = excluded.statistics RETURNING id");
  s.bind(1, m.fingerprint).bind(2, m.path).bind(3, m.rows).bind(4, m.cols).bind(5, m.nnz);
  s.bind(6, m.statistics.dump()).bind(7, kernels::utc_timestamp());
  WACO_ASSERT(s.step(), "INSERT ... RETURNING gave no row");
  const std::int64_t id = s.int64(0);
  while (s.step()) {
  }
  return id;
}

std::optional<MatrixRecord> ResultsDb::find_matrix(const std::string& fingerprint) const {
  Statement s(db_, "SELECT fingerprint, path, rows, cols, nnz, statistics FROM matrices WHERE "
                   "fingerprint = ?1");
  s.bind(1, fingerprint);
  if (!s.step()) return std::nullopt;
  MatrixRecord m;
  m.fingerprint = s.text(0);
  m.path = s.text(1);
  m.rows = s.int64(2);
  m.cols = s.int64(3);
  m.nnz = s.int64(4);
  m.statistics = stored_json(s.text(5), "matrices.statistics");
  return m;
}

std::int64_t ResultsDb::record_schedule(const codegen::SuperSchedule& sched) {
  const codegen::SuperSchedule c = codegen::canonicalize(sched);
  Statement s(db_, "INSERT INTO schedules(kernel, text, json) VALUES (?1, ?2, ?3) "
                   "ON CONFLICT(kernel, text) DO UPDATE SET json = json RETURNING id");
  s.bind(1, std::string(kernels::kernel_name(c.kind)))
      .bind(2, codegen::to_text(c))
      .bind(3, codegen::to_json(c).dump());
  WACO_ASSERT(s.step(), "INSERT ... RETURNING gave no row");
  const std::int64_t id = s.int64(0);
  while (s.step()) {
  }
  return id;
}

std::int64_t ResultsDb::matrix_id(const std::string& fingerprint) const {
  Statement s(db_, "SELECT id FROM matrices WHERE fingerprint = ?1");
  s.bind(1, fingerprint);
  if (!s.step()) WACO_ASSERT(false, "matrix " + fingerprint + " used before record_matrix");
  return s.int64(0);
}

void ResultsDb::record_measurement(const MeasurementKey& key, const Candidate& c,
                                   const Measurement& m, const nlohmann::json& context) {
  std::optional<Transaction> tx;
  if (tx_depth_ == 0) tx.emplace(*this);
  insert_measurement(key, c, m, context, std::nullopt);
  if (tx) tx->commit();
}

void ResultsDb::insert_measurement(const MeasurementKey& key, const Candidate& c,
                                   const Measurement& m, const nlohmann::json& context,
                                   std::optional<std::int64_t> group_id) {
  const std::int64_t matrix = matrix_id(key.fingerprint);
  std::optional<std::int64_t> schedule_id;
  if (c.schedule) schedule_id = record_schedule(*c.schedule);
  Statement s(db_,
              "INSERT OR REPLACE INTO measurements(matrix_id, schedule_id, kernel, implementation, "
              "dense, threads, warmup, repeats, median_s, min_s, max_s, times_s, verified, "
              "max_rel_error, status, reason, conversion_s, compile_s, cache_hit, stored_values, "
              "kernel_source, wall_s, context, created, group_id, counters, dtype) VALUES (?1, ?2, "
              "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, "
              "?21, ?22, ?23, ?24, ?25, ?26, ?27)");
  const bool timed = m.status == MeasureStatus::Ok || m.status == MeasureStatus::Abandoned;
  s.bind(1, matrix);
  if (schedule_id) s.bind(2, *schedule_id); else s.bind_null(2);
  s.bind(3, std::string(kernels::kernel_name(key.kernel))).bind(4, c.implementation);
  s.bind(5, key.dense).bind(6, m.threads).bind(7, m.warmup).bind(8, key.repeats);
  if (timed) s.bind(9, m.median_s).bind(10, m.min_s).bind(11, m.max_s);
  else s.bind_null(9).bind_null(10).bind_null(11);
  s.bind(12, nlohmann::json(m.seconds).dump()).bind(13, m.verified ? 1 : 0);
  if (m.max_rel_error >= 0) s.bind(14, m.max_rel_error); else s.bind_null(14);
  s.bind(15, std::string(status_name(m.status))).bind(16, m.reason);
  s.bind(17, m.conversion_s).bind(18, m.compile_s).bind(19, m.cache_hit ? 1 : 0);
  if (m.stored_values >= 0) s.bind(20, m.stored_values); else s.bind_null(20);
  s.bind(21, m.kernel_source).bind(22, m.wall_s).bind(23, context.dump()).bind(24, kernels::utc_timestamp());
  if (group_id) s.bind(25, *group_id); else s.bind_null(25);
  if (m.counters.is_null()) s.bind_null(26); else s.bind(26, m.counters.dump());
  s.bind(27, std::string(kernels::dtype_name(key.dtype)));
  s.step();
}

std::string split_of(const std::string& fingerprint) {
  // The fingerprint's last hex digits are already a hash of the content: map them to 0..99.
  const std::uint64_t h = kernels::splitmix64(std::strtoull(fingerprint.c_str(), nullptr, 16));
  const std::uint64_t bucket = h % 100;
  return bucket < 80 ? "train" : bucket < 90 ? "validation" : "test";
}

void ResultsDb::record_provenance(const std::string& fingerprint, const Provenance& p) {
  WACO_ASSERT(p.split == "train" || p.split == "validation" || p.split == "test",
              "unknown split '" + p.split + "'");
  Statement s(db_, "INSERT OR REPLACE INTO provenance(matrix_id, recipe, source, split) VALUES "
                   "(?1, ?2, ?3, ?4)");
  s.bind(1, matrix_id(fingerprint)).bind(2, p.recipe.dump()).bind(3, p.source).bind(4, p.split);
  s.step();
}

std::optional<Provenance> ResultsDb::find_provenance(const std::string& fingerprint) const {
  Statement s(db_, "SELECT p.recipe, p.source, p.split FROM provenance p JOIN matrices x ON "
                   "x.id = p.matrix_id WHERE x.fingerprint = ?1");
  s.bind(1, fingerprint);
  if (!s.step()) return std::nullopt;
  return Provenance{stored_json(s.text(0), "provenance.recipe"), s.text(1), s.text(2)};
}

std::int64_t ResultsDb::record_group(const MeasurementKey& key, const GroupRecord& g,
                                     const std::vector<GroupRow>& rows) {
  WACO_ASSERT(key.repeats == g.rounds, "a group's rows are keyed by its rounds");
  std::optional<Transaction> tx;
  if (tx_depth_ == 0) tx.emplace(*this);
  const std::int64_t matrix = matrix_id(key.fingerprint);
  const std::string kernel(kernels::kernel_name(key.kernel));
  std::optional<std::int64_t> earlier;  // an earlier group with this identity goes, with its rows
  {
    Statement old(db_, "SELECT id FROM groups WHERE matrix_id = ?1 AND kernel = ?2 AND dense = ?3 "
                       "AND threads = ?4 AND repetition = ?5 AND dtype = ?6");
    old.bind(1, matrix).bind(2, kernel).bind(3, key.dense).bind(4, g.threads).bind(5, g.repetition);
    old.bind(6, std::string(kernels::dtype_name(key.dtype)));
    if (old.step()) earlier = old.int64(0);
  }
  if (earlier) {
    Statement rows_gone(db_, "DELETE FROM measurements WHERE group_id = ?1");
    rows_gone.bind(1, *earlier).step();
    Statement group_gone(db_, "DELETE FROM groups WHERE id = ?1");
    group_gone.bind(1, *earlier).step();
  }
  std::int64_t id = 0;
  {
    Statement s(db_, "INSERT INTO groups(matrix_id, kernel, dense, threads, rounds, "
                     "repetition, candidates, csr_spread, pair_agreement, seconds, context, "
                     "created, dtype) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
                     "?13) RETURNING id");
    s.bind(1, matrix).bind(2, kernel).bind(3, key.dense).bind(4, g.threads).bind(5, g.rounds);
    s.bind(6, g.repetition).bind(7, g.candidates);
    if (g.csr_spread) s.bind(8, *g.csr_spread); else s.bind_null(8);
    if (g.pair_agreement) s.bind(9, *g.pair_agreement); else s.bind_null(9);
    s.bind(10, g.seconds).bind(11, g.context.dump()).bind(12, kernels::utc_timestamp());
    s.bind(13, std::string(kernels::dtype_name(key.dtype)));
    WACO_ASSERT(s.step(), "INSERT ... RETURNING gave no row");
    id = s.int64(0);
    while (s.step()) {
    }
  }
  if (g.repetition == 0) {
    for (const GroupRow& r : rows) {
      Measurement m = r.measurement;
      m.kernel_source.clear();
      insert_measurement(key, r.candidate, m, nlohmann::json::object(), id);
    }
  }
  if (tx) tx->commit();
  return id;
}

bool ResultsDb::has_group(const MeasurementKey& key, int threads, int repetition) const {
  Statement s(db_, "SELECT count(*) FROM groups g JOIN matrices x ON x.id = g.matrix_id WHERE "
                   "x.fingerprint = ?1 AND g.kernel = ?2 AND g.dense = ?3 AND g.threads = ?4 AND "
                   "g.repetition = ?5 AND g.dtype = ?6");
  s.bind(1, key.fingerprint).bind(2, std::string(kernels::kernel_name(key.kernel)));
  s.bind(3, key.dense).bind(4, threads).bind(5, repetition);
  s.bind(6, std::string(kernels::dtype_name(key.dtype)));
  s.step();
  return s.int64(0) > 0;
}

nlohmann::json ResultsDb::dataset_stats() const {
  // Per kernel and value type: "spmv", and "spmv f64" for groups timed in double.
  const auto label_of = [](const std::string& t) {
    return "(" + t + "kernel || CASE WHEN " + t + "dtype = 'f64' THEN ' f64' ELSE '' END)";
  };
  const std::string label = label_of(""), glabel = label_of("g.");
  nlohmann::json out = nlohmann::json::object();
  {
    Statement s(db_, ("SELECT " + label + ", count(DISTINCT matrix_id), count(*), "
                      "sum(repetition = 1), avg(CASE WHEN repetition = 1 THEN pair_agreement END) "
                      "FROM groups GROUP BY 1 ORDER BY 1").c_str());
    while (s.step()) {
      nlohmann::json& k = out[s.text(0)];
      k["matrices"] = s.int64(1);
      k["groups"] = s.int64(2) - s.int64(3);
      k["repeated_groups"] = s.int64(3);
      k["pair_agreement_mean"] = s.is_null(4) ? nlohmann::json() : nlohmann::json(s.real(4));
      k["statuses"] = nlohmann::json::object();
      k["sources"] = nlohmann::json::object();
      k["splits"] = nlohmann::json::object();
    }
  }
  {
    Statement s(db_, ("SELECT " + label + ", status, count(*) FROM measurements WHERE group_id "
                      "IS NOT NULL GROUP BY 1, status").c_str());
    while (s.step()) out[s.text(0)]["statuses"][s.text(1)] = s.int64(2);
  }
  {
    Statement s(db_, ("SELECT " + glabel + ", p.source, p.split, count(DISTINCT g.matrix_id) "
                      "FROM groups g JOIN provenance p ON p.matrix_id = g.matrix_id WHERE "
                      "g.repetition = 0 GROUP BY 1, p.source, p.split").c_str());
    while (s.step()) {
      nlohmann::json& k = out[s.text(0)];
      // A kernel the first query did not list (a damaged file's table and index disagree).
      for (const char* part : {"statuses", "sources", "splits"})
        if (!k[part].is_object()) k[part] = nlohmann::json::object();
      const std::string source = s.text(1).substr(0, s.text(1).find(':'));
      k["sources"][source] = k["sources"].value(source, std::int64_t{0}) + s.int64(3);
      k["splits"][s.text(2)] = k["splits"].value(s.text(2), std::int64_t{0}) + s.int64(3);
    }
  }
  for (auto& [kernel, k] : out.items()) {  // the median csr spread, from the sorted values
    Statement s(db_, ("SELECT csr_spread FROM groups WHERE " + label + " = ?1 AND repetition = 0 "
                      "AND csr_spread IS NOT NULL ORDER BY csr_spread").c_str());
    s.bind(1, kernel);
    std::vector<double> v;
    while (s.step()) v.push_back(s.real(0));
    k["csr_spread_median"] = v.empty() ? nlohmann::json() : nlohmann::json(v[v.size() / 2]);
  }
  return out;
}

namespace {

constexpr const char* kSelectMeasurement =
    "SELECT m.implementation, s.json, m.threads, m.warmup, m.repeats, m.median_s, m.min_s, "
    "m.max_s, m.times_s, m.verified, m.max_rel_error, m.status, m.reason, m.conversion_s, "
    "m.compile_s, m.cache_hit, m.stored_values, m.kernel_source, m.wall_s, m.context, m.created, "
    "m.counters "
    "FROM measurements m JOIN matrices x ON x.id = m.matrix_id "
    "LEFT JOIN schedules s ON s.id = m.schedule_id "
    "WHERE x.fingerprint = ?1 AND m.kernel = ?2 AND m.dense = ?3 AND m.repeats = ?4 "
    "AND m.dtype = ?8 ";

StoredMeasurement read_measurement(const Statement& s) {
  StoredMeasurement r;
  r.candidate.implementation = s.text(0);
  if (!s.is_null(1))
    r.candidate.schedule = reading("schedule", [&] {
      return codegen::schedule_from_json(stored_json(s.text(1), "schedules.json"));
    });
  Measurement& m = r.measurement;
  m.threads = static_cast<int>(s.int64(2));
  m.warmup = static_cast<int>(s.int64(3));
  m.repeats = static_cast<int>(s.int64(4));
  m.median_s = s.real(5);
  m.min_s = s.real(6);
  m.max_s = s.real(7);
  m.seconds = reading("measurement time list", [&] {
    return stored_json(s.text(8), "measurements.times_s").get<std::vector<double>>();
  });
  m.verified = s.int64(9) != 0;
  m.max_rel_error = s.real(10, -1.0);
  const auto st = parse_status(s.text(11));
  if (!st)
    throw Error("the results database holds an unknown measurement status '" + s.text(11) + "'",
                "the file is damaged; choose another --db");
  m.status = *st;
  m.reason = s.text(12);
  m.conversion_s = s.real(13);
  m.compile_s = s.real(14);
  m.cache_hit = s.int64(15) != 0;
  m.stored_values = s.is_null(16) ? -1 : s.int64(16);
  m.kernel_source = s.text(17);
  m.wall_s = s.real(18);
  r.context = stored_json(s.text(19), "measurements.context");
  r.created = s.text(20);
  if (!s.is_null(21)) m.counters = stored_json(s.text(21), "measurements.counters");
  return r;
}

}  // namespace

std::vector<StoredMeasurement> ResultsDb::measurements(const MeasurementKey& key) const {
  Statement s(db_, (std::string(kSelectMeasurement) + "ORDER BY m.id").c_str());
  s.bind(1, key.fingerprint).bind(2, std::string(kernels::kernel_name(key.kernel)));
  s.bind(3, key.dense).bind(4, key.repeats).bind(8, std::string(kernels::dtype_name(key.dtype)));
  std::vector<StoredMeasurement> out;
  while (s.step()) out.push_back(read_measurement(s));
  return out;
}

std::optional<StoredMeasurement> ResultsDb::find_measurement(const MeasurementKey& key,
                                                             const Candidate& c,
                                                             int threads) const {
  Statement s(db_, (std::string(kSelectMeasurement) +
                    "AND m.implementation = ?5 AND m.threads = ?6 AND "
                    "ifnull(s.text, '') = ?7")
                       .c_str());
  s.bind(1, key.fingerprint).bind(2, std::string(kernels::kernel_name(key.kernel)));
  s.bind(3, key.dense).bind(4, key.repeats).bind(5, c.implementation).bind(6, threads);
  s.bind(8, std::string(kernels::dtype_name(key.dtype)));
  s.bind(7, c.schedule ? codegen::to_text(codegen::canonicalize(*c.schedule)) : std::string());
  if (!s.step()) return std::nullopt;
  return read_measurement(s);
}

void ResultsDb::for_each_group(const std::string& kernel,
                               const std::function<void(const nlohmann::json&)>& f) const {
  Statement g(db_,
              "SELECT g.id, g.kernel, g.dense, g.threads, g.rounds, g.candidates, g.csr_spread, "
              "g.seconds, g.context, x.fingerprint, x.rows, x.cols, x.nnz, x.statistics, x.path, "
              "p.recipe, p.source, p.split, (SELECT r.pair_agreement FROM groups r WHERE "
              "r.matrix_id = g.matrix_id AND r.kernel = g.kernel AND r.dense = g.dense AND "
              "r.threads = g.threads AND r.dtype = g.dtype AND r.repetition = 1), "
              "EXISTS(SELECT 1 FROM groups r WHERE r.matrix_id = g.matrix_id AND r.kernel = "
              "g.kernel AND r.dense = g.dense AND r.threads = g.threads AND r.dtype = g.dtype AND "
              "r.repetition = 1), g.dtype "
              "FROM groups g JOIN matrices x ON x.id = g.matrix_id "
              "LEFT JOIN provenance p ON p.matrix_id = g.matrix_id "
              "WHERE g.repetition = 0 AND (?1 = '' OR g.kernel = ?1) ORDER BY g.id");
  g.bind(1, kernel);
  while (g.step()) {
    nlohmann::json j = {
        {"export_version", kDatasetExportVersion},
        {"kernel", g.text(1)},
        {"dense", g.int64(2)},
        {"threads", g.int64(3)},
        {"rounds", g.int64(4)},
        {"candidates", g.int64(5)},
        {"csr_spread", g.is_null(6) ? nlohmann::json() : nlohmann::json(g.real(6))},
        {"seconds", g.real(7)},
        {"context", stored_json(g.text(8), "groups.context")},
        {"matrix",
         {{"fingerprint", g.text(9)}, {"rows", g.int64(10)}, {"cols", g.int64(11)},
          {"nnz", g.int64(12)}, {"statistics", stored_json(g.text(13), "matrices.statistics")},
          {"path", g.text(14)}}},
        {"recipe", g.is_null(15) ? nlohmann::json() : stored_json(g.text(15), "provenance.recipe")},
        {"source", g.is_null(16) ? nlohmann::json() : nlohmann::json(g.text(16))},
        {"split", g.is_null(17) ? nlohmann::json() : nlohmann::json(g.text(17))},
        {"repeated", g.int64(19) != 0},
        {"pair_agreement", g.is_null(18) ? nlohmann::json() : nlohmann::json(g.real(18))},
        {"rows", nlohmann::json::array()}};
    // Single precision is what a group without "dtype" holds (exports before double precision
    // stay byte for byte what they were).
    if (g.text(20) != "f32") j["dtype"] = g.text(20);
    Statement r(db_, "SELECT m.implementation, s.text, m.status, m.median_s, m.min_s, m.max_s "
                     "FROM measurements m LEFT JOIN schedules s ON s.id = m.schedule_id "
                     "WHERE m.group_id = ?1 ORDER BY m.id");
    r.bind(1, g.int64(0));
    while (r.step()) {
      // Six significant digits (0.1 ps of a 1 us kernel, far below the 1-5% noise of the
      // groups' own csr timings): the export's full doubles were random digits that made the
      // SpMV dataset 5.4 MB compressed instead of 2.9 MB. Idempotent, so export -> import ->
      // export is stable.
      auto time = [&](int col) {
        if (r.is_null(col)) return nlohmann::json();
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6g", r.real(col));
        return nlohmann::json(std::strtod(buf, nullptr));
      };
      j["rows"].push_back({r.is_null(1) ? "impl=" + r.text(0) : r.text(1), r.text(2), time(3),
                           time(4), time(5)});
    }
    f(j);
  }
}

void ResultsDb::import_group(const nlohmann::json& g) {
  try {
    if (export_int(g, "export_version", 0, 1 << 30) != kDatasetExportVersion)
      throw Error("dataset export version " + g.at("export_version").dump() +
                  ", this waco-hybrid reads version " + std::to_string(kDatasetExportVersion));
    const auto kind = kernels::parse_kernel(g.at("kernel").get<std::string>());
    if (!kind) throw Error("unknown kernel " + g.at("kernel").dump());
    const nlohmann::json& mx = g.at("matrix");
    MatrixRecord m;
    m.fingerprint = mx.at("fingerprint");
    m.path = mx.at("path");
    constexpr std::int64_t kBig = std::int64_t{1} << 62;
    m.rows = export_int(mx, "rows", 0, kBig);
    m.cols = export_int(mx, "cols", 0, kBig);
    m.nnz = export_int(mx, "nnz", 0, kBig);
    m.statistics = mx.at("statistics");
    GroupRecord rec;
    rec.threads = static_cast<int>(export_int(g, "threads", 1, 1 << 20));
    rec.rounds = static_cast<int>(export_int(g, "rounds", 1, 1 << 30));
    rec.candidates = static_cast<int>(export_int(g, "candidates", 0, 1 << 30));
    if (!g.at("csr_spread").is_null()) rec.csr_spread = g.at("csr_spread").get<double>();
    rec.seconds = g.at("seconds");
    rec.context = g.at("context");
    const std::string dtype_text = g.value("dtype", std::string("f32"));
    const std::optional<kernels::Dtype> dtype = kernels::parse_dtype(dtype_text);
    if (!dtype || dtype_text != kernels::dtype_name(*dtype))
      throw Error("unknown value type \"" + dtype_text + "\" (f32 or f64)");
    const MeasurementKey key{m.fingerprint, *kind, static_cast<int>(export_int(g, "dense", 1, 1 << 30)),
                             rec.rounds, *dtype};
    std::vector<GroupRow> rows;
    for (const nlohmann::json& r : g.at("rows")) {
      const std::string label = r.at(0);
      GroupRow row;
      row.candidate = label.rfind("impl=", 0) == 0
                          ? Candidate::baseline(label.substr(5))
                          : Candidate::generated(codegen::schedule_from_string(*kind, label));
      const auto st = parse_status(r.at(1).get<std::string>());
      if (!st) throw Error("unknown status " + r.at(1).dump());
      row.measurement.status = *st;
      row.measurement.threads = rec.threads;
      row.measurement.repeats = rec.rounds;
      if (!r.at(2).is_null()) {
        row.measurement.median_s = r.at(2);
        row.measurement.min_s = r.at(3);
        row.measurement.max_s = r.at(4);
        row.measurement.verified = *st == MeasureStatus::Ok;
      }
      rows.push_back(std::move(row));
    }
    std::optional<Transaction> tx;
    if (tx_depth_ == 0) tx.emplace(*this);
    record_matrix(m);
    if (!g.at("recipe").is_null()) {
      const std::string split = g.at("split");
      if (split != "train" && split != "validation" && split != "test")
        throw Error("dataset export object: unknown split '" + split + "'");
      record_provenance(m.fingerprint, {g.at("recipe"), g.at("source"), split});
    }
    record_group(key, rec, rows);
    // "repeated" (absent in the first exports: then a repetition had an agreement): a
    // repetition's agreement is null when fewer than two candidates were timed in both.
    if (g.value("repeated", !g.at("pair_agreement").is_null())) {
      GroupRecord rep = rec;
      rep.repetition = 1;
      if (!g.at("pair_agreement").is_null())
        rep.pair_agreement = g.at("pair_agreement").get<double>();
      record_group(key, rep, {});
    }
    if (tx) tx->commit();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed dataset export object: ") + e.what(),
                "files written by 'waco-hybrid dataset export' have one object per line");
  }
}

std::int64_t ResultsDb::count(const char* table) const {
  Statement s(db_, (std::string("SELECT count(*) FROM ") + table).c_str());
  s.step();
  return s.int64(0);
}

void ResultsDb::record_ablation(const std::string& fingerprint, const std::string& kernel,
                                int dense, int threads, const std::string& config,
                                const nlohmann::json& row) {
  Statement s(db_, "INSERT OR REPLACE INTO ablation(matrix_id, kernel, dense, threads, config, "
                   "row, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  s.bind(1, matrix_id(fingerprint)).bind(2, kernel).bind(3, dense).bind(4, threads);
  s.bind(5, config).bind(6, row.dump()).bind(7, kernels::utc_timestamp());
  s.step();
}

std::optional<nlohmann::json> ResultsDb::find_ablation(const std::string& fingerprint,
                                                       const std::string& kernel, int dense,
                                                       int threads,
                                                       const std::string& config) const {
  Statement s(db_, "SELECT a.row FROM ablation a JOIN matrices x ON x.id = a.matrix_id WHERE "
                   "x.fingerprint = ?1 AND a.kernel = ?2 AND a.dense = ?3 AND a.threads = ?4 AND "
                   "a.config = ?5");
  s.bind(1, fingerprint).bind(2, kernel).bind(3, dense).bind(4, threads).bind(5, config);
  if (!s.step()) return std::nullopt;
  nlohmann::json row = nlohmann::json::parse(s.text(0), nullptr, false);
  if (row.is_discarded()) return std::nullopt;  // damaged: measured again, and replaced
  return row;
}

std::vector<AblationRow> ResultsDb::ablation_rows() const {
  Statement s(db_, "SELECT x.fingerprint, x.path, x.nnz, a.kernel, a.dense, a.threads, a.config, "
                   "a.row, a.created FROM ablation a JOIN matrices x ON x.id = a.matrix_id ORDER "
                   "BY a.id");
  std::vector<AblationRow> rows;
  while (s.step()) {
    AblationRow r;
    r.fingerprint = s.text(0);
    r.path = s.text(1);
    r.nnz = s.int64(2);
    r.kernel = s.text(3);
    r.dense = static_cast<int>(s.int64(4));
    r.threads = static_cast<int>(s.int64(5));
    r.config = s.text(6);
    r.row = nlohmann::json::parse(s.text(7), nullptr, false);
    if (r.row.is_discarded())
      throw Error("results database " + path_ + ": the ablation row of " + r.config + " on " +
                      r.path + " is not JSON",
                  "run waco-hybrid ablate again for that matrix (it replaces the row)");
    r.created = s.text(8);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::optional<std::string> ResultsDb::meta(const std::string& key) const {
  Statement q(db_, "SELECT value FROM meta WHERE key = ?1");
  q.bind(1, key);
  if (!q.step()) return std::nullopt;
  return q.text(0);
}

void ResultsDb::set_meta(const std::string& key, const std::string& value) {
  Statement q(db_, "INSERT INTO meta(key, value) VALUES (?1, ?2) "
                   "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  q.bind(1, key).bind(2, value);
  q.step();
}

std::int64_t ResultsDb::count_matrices() const { return count("matrices"); }
std::int64_t ResultsDb::count_schedules() const { return count("schedules"); }
std::int64_t ResultsDb::count_measurements() const { return count("measurements"); }

}  // namespace waco::heuristics
