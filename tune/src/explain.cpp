// tune --explain (explain.hpp).
#include "waco/tune/explain.hpp"

#include <cstdio>

namespace waco::tuning {

using heuristics::MeasureStatus;

namespace {

nlohmann::json nominee(const ExplainInput& in, const heuristics::ConfirmEntry& ce) {
  const heuristics::TuneEntry& e = in.result->entries[ce.entry];
  const std::string label = e.candidate.label();
  nlohmann::json j = {{"schedule", label}, {"search_rank", ce.search_rank}};
  // The rank in the search's own order (the cost model's, for model and anns searches).
  for (std::size_t i = 0; i < in.candidates->size(); ++i)
    if ((*in.candidates)[i].label() == label) j["proposed_rank"] = i + 1;
  if (e.measurement.status == MeasureStatus::Ok) j["search_median_s"] = e.measurement.median_s;
  const heuristics::Measurement& m = ce.measurement;
  j["status"] = std::string(heuristics::status_name(m.status));
  if (m.status == MeasureStatus::Ok) {
    j["side_by_side_median_s"] = m.median_s;
    if (in.csr_side_by_side_s) j["speedup_over_csr"] = *in.csr_side_by_side_s / m.median_s;
  } else {
    j["reason"] = m.reason;
  }
  j["counters"] = m.counters;
  if (e.measurement.stored_values >= 0) j["stored_values"] = e.measurement.stored_values;
  return j;
}

}  // namespace

nlohmann::json explain_tune(const ExplainInput& in) {
  nlohmann::json e = {{"winner", nullptr}, {"runner_up", nullptr}};
  if (in.confirmation) {
    const auto& ranking = in.confirmation->ranking;
    if (!ranking.empty()) e["winner"] = nominee(in, ranking[0]);
    if (ranking.size() > 1) e["runner_up"] = nominee(in, ranking[1]);
  }
  nlohmann::json facts = nlohmann::json::object();
  if (in.space.is_object()) {
    for (const auto& p : in.space.at("passes"))
      if (p.contains("note") && p.at("note").is_string()) facts[p.at("name").get<std::string>()] = p.at("note");
    e["admissible"] = in.space.at("admissible_count");
    e["legal"] = in.space.at("legal_count");
  }
  e["facts"] = facts;
  e["search"] = in.search;
  nlohmann::json s = nlohmann::json::object();
  if (in.search_info.is_object())
    for (const char* k : {"method", "why", "encoder", "scored", "nodes", "head_evaluations", "ef",
                          "discarded", "recall_at_10"})
      if (in.search_info.contains(k)) s[k] = in.search_info.at(k);
  e["search_info"] = s;
  return e;
}

}  // namespace waco::tuning
