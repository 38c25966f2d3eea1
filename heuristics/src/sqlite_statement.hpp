// Private to heuristics/src/results_db*.cpp: the SQLite plumbing the parts of the results
// database share (results_db.hpp says what the tables hold). The parts:
//   results_db.cpp               the schema, its migrations, opening the file, transactions, and
//                                the shared rows (matrices, schedules, meta)
//   results_db_measurements.cpp  tune's measurements (the cache a resumed search reads)
//   results_db_dataset.cpp       the dataset: provenance, groups, export/import, stats
//   results_db_ablation.cpp      the ablation table (waco-hybrid ablate, read by report)
// Only these files include <sqlite3.h>; SQLite is linked PRIVATE to waco_heuristics.
#pragma once

#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "waco/kernels/error.hpp"

namespace waco::heuristics::db_detail {

using kernels::Error;

/// A JSON value stored in the database (statistics, context, times, schedules, ...): a damaged
/// file is refused as an Error naming the column, not with the JSON library's exception.
inline nlohmann::json stored_json(const std::string& text, const char* column) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded())
    throw Error("the results database holds a damaged value in column '" + std::string(column) +
                    "' (not JSON)",
                "the file is damaged; choose another --db");
  return j;
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

}  // namespace waco::heuristics::db_detail
