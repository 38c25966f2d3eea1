// The results database: every measurement the tuner makes, in one SQLite file, so that searches
// can be resumed, compared and mined later (issue 5, "Search and the results database").
//
// Tables (schema version kResultsSchemaVersion, stored in table `meta` and checked on open):
//   matrices(id, fingerprint, path, rows, cols, nnz, statistics JSON, added)
//   schedules(id, kernel, text, json)                 one row per canonical schedule text
//   measurements(id, matrix_id, schedule_id, kernel, implementation, dense, threads, warmup,
//                repeats, median_s, min_s, max_s, times_s JSON, verified, max_rel_error, status,
//                reason, conversion_s, compile_s, cache_hit, stored_values, kernel_source,
//                wall_s, context JSON, created)
// median_s/min_s/max_s are set for status ok and abandoned (then over the runs made before timing
// stopped), NULL otherwise.
// A measurement is identified by (matrix, kernel, implementation, schedule, dense size, threads,
// repeats): a unique index makes recording the same key twice replace the row, so a resumed run
// can never count a candidate twice. Baseline implementations have no schedule (NULL).
//
// The file is opened in WAL mode with a busy timeout, so a reader (or a second tuner) does not
// block a writer for long; each record_* call is its own transaction unless the caller holds a
// Transaction, and a killed process loses at most the transaction in flight.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/sparse.hpp"

struct sqlite3;

namespace waco::heuristics {

/// The schema this build reads and writes. Bump it on any change of the tables, with a migration
/// from the previous version (results_db.cpp). Version 2 admits the status 'abandoned'; a
/// version 1 file is migrated on open.
inline constexpr int kResultsSchemaVersion = 2;

/// The default database file: $XDG_DATA_HOME/waco-hybrid/waco-results.sqlite, else
/// $HOME/.local/share/waco-hybrid/waco-results.sqlite, else /tmp/waco-hybrid-<uid>/... (empty
/// variables count as unset). Only computes the path; ResultsDb creates it on demand.
std::string default_results_path();

/// A sparse operand as stored in `matrices`.
struct MatrixRecord {
  std::string fingerprint;  ///< 16 hex digits (kernels::fingerprint)
  std::string path;         ///< the file it was last read from
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t nnz = 0;
  nlohmann::json statistics = nlohmann::json::object();  ///< e.g. row-length statistics, dims
};

/// A matrix record for a matrix or a 3-D tensor (rows, cols = the first two dimensions), with
/// row-length statistics (matrices) or the dimensions (tensors) as `statistics`.
MatrixRecord matrix_record(const kernels::CooMatrix& a, const std::string& path);
MatrixRecord matrix_record(const kernels::CooTensor& t, const std::string& path);

/// The part of a measurement's identity that a tuning run fixes.
struct MeasurementKey {
  std::string fingerprint;  ///< the matrix
  kernels::KernelKind kernel = kernels::KernelKind::SpMV;
  int dense = 1;            ///< J, K or 1 (Problem::dense_size())
  int repeats = 10;
};

/// One stored measurement.
struct StoredMeasurement {
  Candidate candidate;
  Measurement measurement;
  nlohmann::json context;
  std::string created;  ///< UTC, ISO 8601
};

class ResultsDb {
 public:
  /// Opens (creating the file and its directory when missing) the database at `path`.
  /// Throws kernels::Error when the file cannot be opened or created, is not a waco-hybrid
  /// results database, or has a schema version other than kResultsSchemaVersion (naming both)
  /// that it cannot migrate (version 1 is migrated in place).
  explicit ResultsDb(const std::string& path);
  ~ResultsDb();
  ResultsDb(const ResultsDb&) = delete;
  ResultsDb& operator=(const ResultsDb&) = delete;

  const std::string& path() const { return path_; }
  /// The schema version found in (or written to) the file.
  int schema_version() const { return version_; }

  /// An explicit transaction (BEGIN IMMEDIATE): commit() makes it durable; destroying it
  /// uncommitted rolls it back. record_* calls inside it join it.
  class Transaction {
   public:
    explicit Transaction(ResultsDb& db);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

   private:
    ResultsDb* db_;
    bool done_ = false;
  };

  /// Inserts or updates a matrix (keyed by fingerprint); returns its id.
  std::int64_t record_matrix(const MatrixRecord& m);
  /// The stored matrix with this fingerprint, if any.
  std::optional<MatrixRecord> find_matrix(const std::string& fingerprint) const;

  /// Inserts a schedule (canonical text) unless present; returns its id.
  std::int64_t record_schedule(const codegen::SuperSchedule& s);

  /// Records one measurement of `c` under `key` (the matrix must have been recorded), replacing
  /// an earlier one with the same key, candidate and thread count. `context` is the run's context
  /// block (kernels::context_json).
  void record_measurement(const MeasurementKey& key, const Candidate& c, const Measurement& m,
                          const nlohmann::json& context);

  /// Every measurement stored under `key`, oldest first.
  std::vector<StoredMeasurement> measurements(const MeasurementKey& key) const;
  /// The stored measurement of `c` on `threads` threads under `key`, if any.
  std::optional<StoredMeasurement> find_measurement(const MeasurementKey& key, const Candidate& c,
                                                    int threads) const;

  /// Row counts of the three tables (for tests and reports).
  std::int64_t count_matrices() const;
  std::int64_t count_schedules() const;
  std::int64_t count_measurements() const;

 private:
  void exec(const char* sql);
  std::int64_t count(const char* table) const;

  std::string path_;
  sqlite3* db_ = nullptr;
  int version_ = 0;
  int tx_depth_ = 0;  ///< > 0 while a Transaction is open
};

}  // namespace waco::heuristics
