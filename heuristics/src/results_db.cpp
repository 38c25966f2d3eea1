// The SQLite results database (see results_db.hpp for the tables and the guarantees): the schema
// and its migrations, opening (and migrating) the file, transactions, and the rows the other parts
// share (matrices, schedules, meta). The other parts: results_db_measurements.cpp,
// results_db_dataset.cpp, results_db_ablation.cpp; their SQLite plumbing: sqlite_statement.hpp.
#include "waco/heuristics/results_db.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "sqlite_statement.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {

using db_detail::Statement;
using db_detail::stored_json;
using kernels::Error;
namespace fs = std::filesystem;

namespace {

constexpr int kBusyTimeoutMs = 30000;

// Version 6's column of measurements and groups: the value type.
constexpr const char* kDtypeColumn =
    "dtype TEXT NOT NULL DEFAULT 'f32' CHECK(dtype IN ('f32','f64'))";

// The measurements table under a given name: version 2 added the status 'abandoned' (racing) to
// its CHECK, version 3 the column group_id; `current`: with version 4's and 6's columns too (a new
// file's table, as the migrations leave it).
std::string measurements_table(const std::string& name, bool with_group, bool current = false) {
  std::string table = "CREATE TABLE " + name + R"sql((
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
  created        TEXT NOT NULL)sql";
  if (with_group) table += ",\n  group_id       INTEGER REFERENCES groups(id)";
  if (current) table += ",\n  counters       TEXT,\n  " + std::string(kDtypeColumn);
  return table + ");\n";
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
// its split) and the measurement groups (rows timed side by side in one child); `current`: the
// groups table as version 6 has it.
std::string dataset_tables_sql(bool current = false) {
  return R"sql(
CREATE TABLE provenance(
  matrix_id INTEGER PRIMARY KEY REFERENCES matrices(id),
  recipe    TEXT NOT NULL,
  source    TEXT NOT NULL,
  split     TEXT NOT NULL CHECK(split IN ('train','validation','test')));
)sql" + groups_table("groups", current);
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
constexpr const char* kMeasurementsIndexV6 = R"sql(
CREATE UNIQUE INDEX measurements_identity ON measurements(
  matrix_id, kernel, implementation, ifnull(schedule_id, 0), dense, threads, repeats, dtype);
)sql";

std::string dtype_columns_sql() {
  return "ALTER TABLE measurements ADD COLUMN " + std::string(kDtypeColumn) +
         ";\nDROP INDEX measurements_identity;" + kMeasurementsIndexV6 +
         groups_table("groups_v6", true) + R"sql(
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

// Every table of the current schema, made directly (the tables, columns and indexes that the
// migrations make of a version 1 file: tests/test_results_db.cpp). Executed in one transaction
// when the file is new.
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
)sql" + dataset_tables_sql(true) + measurements_table("measurements", true, true) +
         kMeasurementsIndexV6 + kAblationTable;
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
  std::vector<std::pair<std::string, std::string>> out;
  Statement c(db, "SELECT m.name, p.name FROM sqlite_master AS m, pragma_table_info(m.name) AS p "
                  "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'");
  while (c.step()) out.emplace_back(c.text(0), c.text(1));
  return out;
}

std::string trimmed(const std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\n") - a + 1);
}

std::string first_word(const std::string& s) {
  const std::string t = trimmed(s);
  return t.substr(0, t.find_first_of(" \t\n(,"));
}

/// The (table, column) pairs schema_sql() makes, read off its text rather than from a database
/// it is executed in (that took ~2.5 ms, most of a process's first open of an existing file):
/// its CREATE TABLE t(column ..., ..., table constraints) statements, in the one style written
/// above (no ';' or unbalanced parentheses in a statement's quotes; a schema that alters or
/// drops tables is refused here). tests/test_results_db.cpp checks the pairs against a file the
/// schema made.
std::vector<std::pair<std::string, std::string>> schema_columns() {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string sql = schema_sql();
  std::size_t from = 0;
  for (std::size_t end; (end = sql.find(';', from)) != std::string::npos; from = end + 1) {
    const std::string st = trimmed(sql.substr(from, end - from));
    WACO_ASSERT(st.rfind("ALTER", 0) != 0 && st.rfind("DROP", 0) != 0,
                "schema_sql alters or drops a table: schema_columns reads CREATE TABLE only");
    if (st.rfind("CREATE TABLE ", 0) != 0) continue;
    const std::size_t open = st.find('('), close = st.rfind(')');
    WACO_ASSERT(open != std::string::npos && close > open, "schema: CREATE TABLE without columns");
    const std::string table = trimmed(st.substr(13, open - 13));  // after "CREATE TABLE "
    int depth = 0;
    std::size_t item = open + 1;
    for (std::size_t k = open + 1; k <= close; ++k) {
      if (st[k] == '(') ++depth;
      if (st[k] == ')' && k < close) --depth;
      if ((st[k] == ',' && depth == 0) || k == close) {
        const std::string word = first_word(st.substr(item, k - item));
        if (word != "PRIMARY" && word != "UNIQUE" && word != "FOREIGN" && word != "CHECK" &&
            word != "CONSTRAINT")
          out.emplace_back(table, word);
        item = k + 1;
      }
    }
  }
  return out;
}

/// Refuses a file whose tables lack a column of this schema version (a damaged or foreign file
/// that says it is of this version): the statements would fail on it later, as a bug.
void check_tables(sqlite3* db, const std::string& path) {
  static const std::vector<std::pair<std::string, std::string>> expected = schema_columns();
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

std::int64_t ResultsDb::count(const char* table) const {
  Statement s(db_, (std::string("SELECT count(*) FROM ") + table).c_str());
  s.step();
  return s.int64(0);
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
