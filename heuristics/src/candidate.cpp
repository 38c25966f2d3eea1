// Candidate, Measurement and MeasureStatus (candidate.hpp): names, labels and the
// Measurement's JSON.
#include "waco/heuristics/candidate.hpp"

#include "waco/kernels/error.hpp"

namespace waco::heuristics {

std::string_view status_name(MeasureStatus s) {
  switch (s) {
    case MeasureStatus::Ok: return "ok";
    case MeasureStatus::Refused: return "refused";
    case MeasureStatus::CompileError: return "compile-error";
    case MeasureStatus::WrongResult: return "wrong-result";
    case MeasureStatus::Crashed: return "crashed";
    case MeasureStatus::Timeout: return "timeout";
    case MeasureStatus::Abandoned: return "abandoned";
  }
  WACO_ASSERT(false, "unknown MeasureStatus");
  return {};
}

std::optional<MeasureStatus> parse_status(std::string_view name) {
  for (MeasureStatus s : kAllStatuses)
    if (status_name(s) == name) return s;
  return std::nullopt;
}

Candidate Candidate::generated(const codegen::SuperSchedule& s) {
  Candidate c;
  c.schedule = codegen::canonicalize(s);
  c.implementation = codegen::kGeneratedImplementation;
  return c;
}

Candidate Candidate::baseline(std::string name) {
  Candidate c;
  c.implementation = std::move(name);
  return c;
}

std::string Candidate::label() const {
  return schedule ? codegen::to_text(*schedule) : "impl=" + implementation;
}

int Candidate::effective_threads(int run_threads) const {
  return schedule && schedule->threads > 0 ? schedule->threads : run_threads;
}

nlohmann::json Measurement::to_json() const {
  return {{"status", status_name(status)}, {"reason", reason},       {"seconds", seconds},
          {"median_s", median_s},          {"min_s", min_s},         {"max_s", max_s},
          {"warmup", warmup},              {"repeats", repeats},     {"threads", threads},
          {"verified", verified},          {"max_rel_error", max_rel_error},
          {"conversion_s", conversion_s},  {"compile_s", compile_s}, {"cache_hit", cache_hit},
          {"kernel_source", kernel_source}, {"stored_values", stored_values},
          {"wall_s", wall_s}, {"counters", counters}, {"race", race}, {"environment", environment}};
}

Measurement Measurement::from_json(const nlohmann::json& j) {
  Measurement m;
  const auto st = parse_status(j.at("status").get<std::string>());
  WACO_ASSERT(st.has_value(), "unknown measurement status in a worker message");
  m.status = *st;
  m.reason = j.at("reason").get<std::string>();
  m.seconds = j.at("seconds").get<std::vector<double>>();
  m.median_s = j.at("median_s").get<double>();
  m.min_s = j.at("min_s").get<double>();
  m.max_s = j.at("max_s").get<double>();
  m.warmup = j.at("warmup").get<int>();
  m.repeats = j.at("repeats").get<int>();
  m.threads = j.at("threads").get<int>();
  m.verified = j.at("verified").get<bool>();
  m.max_rel_error = j.at("max_rel_error").get<double>();
  m.conversion_s = j.at("conversion_s").get<double>();
  m.compile_s = j.at("compile_s").get<double>();
  m.cache_hit = j.at("cache_hit").get<bool>();
  m.kernel_source = j.at("kernel_source").get<std::string>();
  m.stored_values = j.at("stored_values").get<std::int64_t>();
  m.wall_s = j.at("wall_s").get<double>();
  m.environment = j.value("environment", false);
  m.counters = j.value("counters", nlohmann::json());
  m.race = j.value("race", std::string());
  return m;
}

}  // namespace waco::heuristics
