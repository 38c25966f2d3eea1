// The results database's dataset (results_db.hpp): the provenance of a matrix, the groups timed
// side by side (collect), their export and import (the dataset export format) and the dataset's
// statistics.
#include "waco/heuristics/results_db.hpp"

#include <algorithm>
#include <cmath>

#include "sqlite_statement.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/json_fields.hpp"

namespace waco::heuristics {

using db_detail::Statement;
using db_detail::stored_json;
using kernels::Error;

namespace {

/// An integer field of an export object in [lo, hi]; Error otherwise.
std::int64_t export_int(const nlohmann::json& o, const char* key, std::int64_t lo, std::int64_t hi) {
  return kernels::json_int_field(o, key, lo, hi, "dataset export object");
}

}  // namespace

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

}  // namespace waco::heuristics
