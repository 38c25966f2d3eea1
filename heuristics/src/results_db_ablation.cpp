// The results database's ablation table (results_db.hpp): the rows of `waco-hybrid ablate`, one
// JSON object per matrix, kernel, dense size, threads and configuration, read by report. The
// table's DDL and migration are in results_db.cpp with the rest of the schema.
#include "waco/heuristics/results_db.hpp"

#include "sqlite_statement.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {

using db_detail::Statement;
using kernels::Error;

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

}  // namespace waco::heuristics
