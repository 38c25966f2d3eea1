// The results database's measurements (results_db.hpp): tune's cache, one row per candidate
// measured under a key (matrix, kernel, dense size, repeats, value type), read back when a search
// is resumed or compared.
#include "waco/heuristics/results_db.hpp"

#include "sqlite_statement.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {

using db_detail::Statement;
using db_detail::stored_json;
using kernels::Error;

namespace {

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

}  // namespace

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

}  // namespace waco::heuristics
