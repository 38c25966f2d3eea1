// tune --explain (tune_explain.hpp).
#include "tune_explain.hpp"

#include <cstdio>

namespace waco::cli {

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

void print_nominee(const char* what, const nlohmann::json& n) {
  std::printf("  %-10s %s\n", what, n.at("schedule").get<std::string>().c_str());
  std::string line = "rank " + n.at("search_rank").dump() + " by search timings";
  if (n.contains("proposed_rank")) line += ", proposed #" + n.at("proposed_rank").dump();
  if (n.contains("side_by_side_median_s")) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "; side by side %.3g s", n.at("side_by_side_median_s").get<double>());
    line += buf;
    if (n.contains("speedup_over_csr")) {
      std::snprintf(buf, sizeof buf, " (%.3fx csr)", n.at("speedup_over_csr").get<double>());
      line += buf;
    }
  } else {
    line += "; " + n.at("status").get<std::string>();
  }
  std::printf("  %-10s %s\n", "", line.c_str());
  const nlohmann::json& c = n.at("counters");
  if (c.is_object())
    std::printf("  %-10s counts: %d runs retaken as disturbed, %lld involuntary switches kept, "
                "%lld page faults, %.3g CPU s\n", "", c.at("retaken").get<int>(),
                static_cast<long long>(c.at("involuntary_switches").get<std::int64_t>()),
                static_cast<long long>(c.at("page_faults").get<std::int64_t>()),
                c.at("cpu_s").get<double>());
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

void print_explanation(const nlohmann::json& e) {
  std::printf("explain:\n");
  if (e.at("winner").is_null()) {
    std::printf("  no side-by-side confirmation ran: nothing to explain\n");
  } else {
    print_nominee("winner", e.at("winner"));
    if (!e.at("runner_up").is_null()) print_nominee("runner-up", e.at("runner_up"));
  }
  if (e.contains("admissible"))
    std::printf("  space      %s admissible of %s legal schedules\n", e.at("admissible").dump().c_str(),
                e.at("legal").dump().c_str());
  for (const auto& [pass, note] : e.at("facts").items())
    std::printf("  %-10s %s\n", pass.c_str(), note.get<std::string>().c_str());
  if (!e.at("search_info").empty())
    std::printf("  search     %s %s\n", e.at("search").get<std::string>().c_str(),
                e.at("search_info").dump().c_str());
}

}  // namespace waco::cli
