// The results database: every measurement the tuner makes, in one SQLite file, so that searches
// can be resumed, compared and mined later (issue 5, "Search and the results database").
//
// Tables (schema version kResultsSchemaVersion, stored in table `meta` and checked on open):
//   matrices(id, fingerprint, path, rows, cols, nnz, statistics JSON, added)
//   schedules(id, kernel, text, json)                 one row per canonical schedule text
//   measurements(id, matrix_id, schedule_id, kernel, implementation, dense, threads, warmup,
//                repeats, median_s, min_s, max_s, times_s JSON, verified, max_rel_error, status,
//                reason, conversion_s, compile_s, cache_hit, stored_values, kernel_source,
//                wall_s, context JSON, created, group_id)
//   provenance(matrix_id, recipe JSON, source, split)   how a dataset matrix is made again
//   groups(id, matrix_id, kernel, dense, threads, rounds, repetition, candidates, csr_spread,
//          pair_agreement, seconds, context JSON, created)   rows timed side by side (collect)
//   ablation(id, matrix_id, kernel, dense, threads, config, row JSON, created)   one pipeline
//          configuration's outcome on a matrix, or (config "side-by-side") every configuration's
//          winner timed side by side with the references (waco-hybrid ablate; read by report)
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
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/candidate.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/sparse.hpp"

struct sqlite3;

namespace waco::heuristics {

/// The schema this build reads and writes. Bump it on any change of the tables, with a migration
/// from the previous version (results_db.cpp). Version 2 admits the status 'abandoned'; version 3
/// adds the dataset tables (provenance, groups) and measurements.group_id; version 4
/// measurements.counters; version 5 the ablation table. Older files are migrated on open, in
/// place, one version at a time.
inline constexpr int kResultsSchemaVersion = 6;
/// Version of the dataset export format (ResultsDb::for_each_group).
inline constexpr int kDatasetExportVersion = 1;

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
/// row-length statistics (matrices) or the dimensions (tensors) as `statistics`. `fingerprint`:
/// the operand's kernels::fingerprint_hex when the caller has it (empty: computed here).
MatrixRecord matrix_record(const kernels::CooMatrix& a, const std::string& path,
                           const std::string& fingerprint = {});
MatrixRecord matrix_record(const kernels::CooTensor& t, const std::string& path,
                           const std::string& fingerprint = {});

/// The part of a measurement's identity that a tuning run fixes.
struct MeasurementKey {
  std::string fingerprint;  ///< the matrix
  kernels::KernelKind kernel = kernels::KernelKind::SpMV;
  int dense = 1;            ///< J, K or 1 (Problem::dense_size())
  int repeats = 10;
  /// The value type the kernel computed in; rows of older databases are single precision.
  kernels::Dtype dtype = kernels::Dtype::F32;
};

/// Where a dataset matrix came from.
struct Provenance {
  nlohmann::json recipe = nlohmann::json::object();  ///< how to make it again (kernels::Recipe)
  std::string source;  ///< e.g. "generator:rmat", "file:bcsstk13.mtx.gz"
  std::string split;   ///< "train", "validation" or "test"
};

/// The split of a matrix, stable across runs and machines: from its fingerprint, 80% "train",
/// 10% "validation", 10% "test".
std::string split_of(const std::string& fingerprint);

/// A measurement group: candidates of one matrix timed side by side in one child (Measurer::
/// compare), so that their order is not the machine's drift. Repetition 0 is the group; a
/// repetition 1 of the same candidates stores only how far its pair order agrees with it.
struct GroupRecord {
  int threads = 1;
  int rounds = 10;
  int repetition = 0;
  int candidates = 0;
  std::optional<double> csr_spread;      ///< (q75 - q25) / 2 / median of the csr rounds
  std::optional<double> pair_agreement;  ///< repetition: share of ok pairs ordered alike
  double seconds = 0.0;                  ///< wall time of the group
  nlohmann::json context = nlohmann::json::object();
};

/// One candidate of a group with its measurement.
struct GroupRow {
  Candidate candidate;
  Measurement measurement;
};

/// One stored measurement.
/// One row of the ablation table: an outcome of `waco-hybrid ablate` (its JSON is the command's
/// business; the database only keys it).
struct AblationRow {
  std::string fingerprint;
  std::string path;  ///< the matrix's path when it was recorded
  std::int64_t nnz = 0;
  std::string kernel;
  int dense = 0;
  int threads = 0;
  std::string config;
  nlohmann::json row;
  std::string created;
};

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

  /// Records (replaces) the provenance of a recorded matrix.
  void record_provenance(const std::string& fingerprint, const Provenance& p);
  std::optional<Provenance> find_provenance(const std::string& fingerprint) const;

  /// Records a group and, for repetition 0, its rows (key.repeats = g.rounds), all in one
  /// transaction: a process killed meanwhile leaves no part of it. Rows store no kernel source
  /// and no context of their own (the group's context covers them; the schedule regenerates the
  /// source). Replaces an earlier group with the same identity. Returns the group's id.
  std::int64_t record_group(const MeasurementKey& key, const GroupRecord& g,
                            const std::vector<GroupRow>& rows);
  /// Whether a group (matrix, kernel, dense, threads, dtype, repetition) is stored.
  bool has_group(const MeasurementKey& key, int threads, int repetition = 0) const;
  /// Per kernel: matrices, groups, measurements by status, matrices by source and split, the
  /// median csr spread and the mean pair agreement of repetitions (`dataset stats`).
  nlohmann::json dataset_stats() const;

  /// Calls f with every group (repetition 0) of `kernel` (all kernels when empty), oldest first,
  /// as one self-contained JSON object (the dataset export format, version kDatasetExportVersion):
  /// the matrix (fingerprint, rows, cols, nnz, statistics), its provenance, the group's fields,
  /// whether it was measured twice ("repeated") and that repetition's pair agreement (null when
  /// fewer than two candidates were timed in both), and "rows": [[label, status, median_s, min_s, max_s], ...]
  /// (label: the schedule's text form, or "impl=<name>" for a baseline; times null unless timed,
  /// to six significant digits).
  void for_each_group(const std::string& kernel,
                      const std::function<void(const nlohmann::json&)>& f) const;
  /// Stores one object of the export format (the inverse of for_each_group): the matrix, its
  /// provenance, the group and its rows (and a repetition when it has a pair agreement), in one
  /// transaction, replacing a group with the same identity. Throws Error for a malformed object.
  void import_group(const nlohmann::json& g);

  /// Records (replaces) the ablation row of (matrix, kernel, dense, threads, config); the
  /// matrix must have been recorded.
  void record_ablation(const std::string& fingerprint, const std::string& kernel, int dense,
                       int threads, const std::string& config, const nlohmann::json& row);
  /// The stored row of that identity, if any.
  std::optional<nlohmann::json> find_ablation(const std::string& fingerprint,
                                              const std::string& kernel, int dense, int threads,
                                              const std::string& config) const;
  /// Every ablation row, oldest first.
  std::vector<AblationRow> ablation_rows() const;

  /// A value of table `meta` (schema_version, created, ... and what commands keep there, e.g.
  /// collect's settings per kernel), or nullopt.
  std::optional<std::string> meta(const std::string& key) const;
  /// Sets a value of table `meta` (its own transaction unless the caller holds one).
  void set_meta(const std::string& key, const std::string& value);

  /// Row counts of the three tables (for tests and reports).
  std::int64_t count_matrices() const;
  std::int64_t count_schedules() const;
  std::int64_t count_measurements() const;

 private:
  void exec(const char* sql);
  std::int64_t count(const char* table) const;
  std::int64_t matrix_id(const std::string& fingerprint) const;
  void insert_measurement(const MeasurementKey& key, const Candidate& c, const Measurement& m,
                          const nlohmann::json& context, std::optional<std::int64_t> group_id);

  std::string path_;
  sqlite3* db_ = nullptr;
  int version_ = 0;
  int tx_depth_ = 0;  ///< > 0 while a Transaction is open
};

}  // namespace waco::heuristics
