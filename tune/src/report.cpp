// The report of a tune (pipeline.hpp): one JSON object, `waco-hybrid tune --json`.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "pipeline.hpp"
#include "waco/kernels/error.hpp"
#include "waco/signature/model.hpp"
#include "waco/tune/explain.hpp"

namespace waco::tuning::detail {

namespace {

nlohmann::json status_json(const std::map<MeasureStatus, std::int64_t>& counts) {
  nlohmann::json j = nlohmann::json::object();
  for (MeasureStatus s : kAllStatuses) {
    const auto it = counts.find(s);
    j[std::string(status_name(s))] = it == counts.end() ? 0 : it->second;
  }
  return j;
}

nlohmann::json entry_json(const TuneEntry& e) {
  const Measurement& m = e.measurement;
  nlohmann::json j = {{"schedule", e.candidate.label()},
                      {"status", std::string(status_name(m.status))},
                      {"threads", m.threads},
                      {"reused", e.reused}};
  if (e.candidate.schedule) j["schedule_json"] = codegen::to_json(*e.candidate.schedule);
  if (m.status == MeasureStatus::Ok) {
    j["median_s"] = m.median_s;
    j["min_s"] = m.min_s;
    j["max_s"] = m.max_s;
    j["max_rel_error"] = m.max_rel_error;
  } else {
    j["reason"] = m.reason;
  }
  if (!m.kernel_source.empty()) {
    j["kernel_source"] = m.kernel_source;
    j["kernel_source_exists"] = std::filesystem::exists(m.kernel_source);
  }
  if (m.stored_values >= 0) j["stored_values"] = m.stored_values;
  if (!m.race.empty()) j["race"] = m.race;
  return j;
}


nlohmann::json median_or_null(const Measurement* m) {
  if (!m || m->status != MeasureStatus::Ok) return nullptr;
  return m->median_s;
}

/// tune --json's "confirm": the side-by-side (selection) run, every nominee with its timing or
/// reason; "halved": the nominees successive halving stopped (those of the heats included when
/// the search's entries are the selection's own measurements).
nlohmann::json confirmation_json(const Measured& m, bool side_by_side, const TuneRequest& o) {
  if (!m.confirmation) return nullptr;
  const Confirmation& c = *m.confirmation;
  const Measurement* first = c.best ? &c.ranking[*c.best].measurement : nullptr;
  nlohmann::json ranking = nlohmann::json::array();
  for (const ConfirmEntry& ce : m.confirmation->ranking) {
    const Measurement& cm = ce.measurement;
    const TuneEntry& e = m.result.entries[ce.entry];
    nlohmann::json row = {{"schedule", e.candidate.label()},
                          {"search_rank", ce.search_rank},
                          {"search_median_s", e.measurement.median_s},
                          {"status", std::string(status_name(cm.status))}};
    if (cm.status == MeasureStatus::Ok) {
      row["median_s"] = cm.median_s;
      row["min_s"] = cm.min_s;
      row["max_s"] = cm.max_s;
      row["counters"] = cm.counters;
      if (first) row["ratio_to_best"] = cm.median_s / first->median_s;
    } else {
      row["reason"] = cm.reason;
    }
    ranking.push_back(row);
  }
  std::int64_t halved = 0;
  if (side_by_side)
    for (const TuneEntry& e : m.result.entries) halved += was_halved(e.measurement);
  else
    for (const ConfirmEntry& ce : c.ranking) halved += was_halved(ce.measurement);
  nlohmann::json j = {{"top", static_cast<int>(m.confirmation->ranking.size())},
                      {"direct", side_by_side},
                      {"rounds", m.confirmation->rounds},
                      {"warmup", o.warmup},
                      {"halving_keep", o.halving_keep},
                      {"halved", halved},
                      {"ranking", ranking},
                      {"csr_counters", c.references[0].counters},
                      {"csr_median_s", median_or_null(&c.references[0])},
                      {"csr_baseline_median_s", median_or_null(&c.references[1])},
                      {"seconds", m.confirmation->seconds}};
  if (!m.heats.is_null()) j["heats"] = m.heats;  // the selection ran in heats
  return j;
}

/// tune --json's "decision": the fresh runs that decided (null when the selection run showed no
/// gain, so that nothing was timed again), and how the two csr references compared.
nlohmann::json decision_json(const Measured& m, const Decision& d) {
  nlohmann::json j = {{"fresh", d.fresh},
                      {"references",
                       d.references_judged ? d.references_judged->to_json() : nlohmann::json()}};
  if (d.references_judged) {
    const Verdict& v = *d.references_judged;  // csr schedule / csr baseline
    j["faster_reference"] = v.ratio_hi < 1.0   ? "schedule"
                            : v.ratio_lo > 1.0 ? "baseline"
                                               : "tie";
  }
  if (!m.fresh) return j;
  const FreshTiming& f = *m.fresh;
  nlohmann::json leaders = nlohmann::json::array();
  for (std::size_t i = 0; i < f.leaders.size(); ++i) {
    const ConfirmEntry& ce = m.confirmation->ranking[f.leaders[i]];
    const Measurement& fm = f.leader_ms[i];
    nlohmann::json row = {{"schedule", m.result.entries[ce.entry].candidate.label()},
                          {"selection_median_s", ce.measurement.median_s},
                          {"status", std::string(status_name(fm.status))}};
    if (fm.status == MeasureStatus::Ok || fm.status == MeasureStatus::Abandoned) {
      row["median_s"] = fm.median_s;  // a dropped leader's: over the runs it was timed in
      // Apart, the leaders ran in children of their own, so their times do not compare: the
      // median of the per-round ratios to the csr reference timed beside each ranks them.
      if (const double ratio = f.apart ? f.score(i) : NAN; std::isfinite(ratio))
        row["ratio_to_reference"] = ratio;
    }
    if (fm.status != MeasureStatus::Ok) row["reason"] = fm.reason;
    leaders.push_back(row);
  }
  j.update({{"runs", f.runs},
            {"runs_planned", f.runs_planned},
            {"stopped", f.stopped.empty() ? nlohmann::json() : nlohmann::json(f.stopped)},
            {"extended", f.extended.empty() ? nlohmann::json() : nlohmann::json(f.extended)},
            {"clear", f.clear},
            {"dropped", f.dropped},
            {"rounds", f.rounds},
            {"apart", f.apart},
            {"children", f.children},
            {"leaders", leaders},
            {"csr_median_s", median_or_null(&f.references[0])},
            {"csr_baseline_median_s", median_or_null(&f.references[1])},
            {"busy_warning", f.busy.empty() ? nlohmann::json() : nlohmann::json(f.busy)},
            {"disturbed_share", f.disturbed_share},
            {"seconds", f.seconds}});
  return j;
}

/// tune --json's "economy": where tune's time went, and after how many calls of the tuned
/// kernel instead of csr that time is paid back (side-by-side times; none without a gain).
nlohmann::json economy_json(const TuneRequest& o, const Measured& m, const Decision& d,
                            const nlohmann::json& space_json,
                            const std::optional<CallsBudget>& calls_budget, double total_s) {
  nlohmann::json economy = {
      {"choice_s", space_json.is_null() ? nlohmann::json(nullptr) : space_json.at("seconds")},
      {"measure_s", m.result.seconds},
      {"confirm_s",
       m.confirmation ? nlohmann::json(m.confirmation->seconds) : nlohmann::json(nullptr)},
      {"decide_s", m.fresh ? nlohmann::json(m.fresh->seconds) : nlohmann::json(nullptr)},
      {"total_s", total_s},
      {"break_even_calls", nullptr}};
  // Against the faster csr reference, the one the verdict judged (a plan of a no-gain serves
  // it; the csr schedule can run slower than the baseline), at the claimed speedup (the
  // medians of the times can disagree with the paired ratios that judged).
  std::optional<double> break_even;
  const std::optional<Measurement>& ref = d.baseline_reference ? d.confirm_base : d.confirm_csr;
  if (d.confirmed && d.verdict == "gain" && d.judged && ref && ref->status == MeasureStatus::Ok)
    break_even = break_even_calls(total_s, ref->median_s, ref->median_s / d.judged->speedup);
  if (break_even) economy["break_even_calls"] = *break_even;
  const bool expected = o.expected_calls > 0;
  economy["expected_calls"] = expected ? nlohmann::json(o.expected_calls) : nlohmann::json();
  economy["tuning_share"] = expected ? nlohmann::json(o.tuning_share) : nlohmann::json();
  economy["calls_budget"] = calls_budget ? calls_budget->to_json() : nlohmann::json(nullptr);
  economy["pays_off_within_expected_calls"] =
      expected ? nlohmann::json(break_even && *break_even <= static_cast<double>(o.expected_calls))
               : nlohmann::json(nullptr);
  return economy;
}

}  // namespace

/// Step 8 of tune: the report, one JSON object (tune --json prints it; the text is read off it).
nlohmann::json tune_report(const TuneRun& t, const ReportInput& in) {
  const TuneRequest& o = t.o;
  const TuneResult& r = in.measured->result;
  const Decision& d = *in.decision;
  const TuneEntry& csr_schedule = *in.csr_schedule;
  const TuneEntry& csr_baseline = *in.csr_baseline;
  const std::string noise = noise_warning(d, csr_schedule, t.shortcut, t.obs);
  // The result is a csr reference (no gain): the csr schedule or the hand-written baseline.
  const bool reference_result = d.best == &csr_schedule || d.best == &csr_baseline;
  const auto speedup = [&](const TuneEntry& base,
                           const std::optional<Measurement>& again) -> nlohmann::json {
    if (d.confirmed && again->status == MeasureStatus::Ok)
      return again->median_s / d.best_side->median_s;
    if (!d.best || base.measurement.status != MeasureStatus::Ok) return nullptr;
    return base.measurement.median_s / d.best->measurement.median_s;
  };
  const auto search_speedup = [&](const TuneEntry& base) -> nlohmann::json {
    if (!d.search_best || base.measurement.status != MeasureStatus::Ok) return nullptr;
    return base.measurement.median_s / d.search_best->measurement.median_s;
  };
  nlohmann::json verdict_json = nullptr;
  if (d.judged) {
    verdict_json = d.judged->to_json();
    verdict_json["reference"] = d.verdict_reference;
    verdict_json["nominee"] = r.entries[d.winner->entry].candidate.label();
  }
  // The result, with the race strategy of the kernel that was timed side by side when the
  // search's entry (reused from the database) does not know it.
  nlohmann::json best_json = d.best ? entry_json(*d.best) : nlohmann::json(nullptr);
  if (d.best && !best_json.contains("race") && d.best_side && !d.best_side->race.empty())
    best_json["race"] = d.best_side->race;
  std::vector<const TuneEntry*> ranked;
  for (const TuneEntry& e : r.entries)
    if (e.measurement.status == MeasureStatus::Ok) ranked.push_back(&e);
  std::sort(ranked.begin(), ranked.end(), [](const TuneEntry* a, const TuneEntry* b) {
    return a->measurement.median_s < b->measurement.median_s;
  });
  nlohmann::json top = nlohmann::json::array();
  for (std::size_t i = 0; i < std::min<std::size_t>(5, ranked.size()); ++i)
    top.push_back(entry_json(*ranked[i]));
  nlohmann::json failures = nlohmann::json::array();
  for (const TuneEntry& e : r.entries)
    if (e.measurement.status != MeasureStatus::Ok && failures.size() < 10)
      failures.push_back(entry_json(e));
  const double total_s = now_seconds() - in.t_start;
  nlohmann::json explanation = nullptr;
  if (o.explain) {
    ExplainInput ei;
    ei.search = t.search;
    ei.candidates = &in.choice->candidates;
    ei.result = &r;
    ei.confirmation = in.measured->confirmation ? &*in.measured->confirmation : nullptr;
    if (d.confirmed && d.confirm_csr->status == MeasureStatus::Ok)
      ei.csr_side_by_side_s = d.confirm_csr->median_s;
    ei.space = in.choice->space;
    ei.search_info = in.choice->search_info;
    explanation = explain_tune(ei);
  }
  const auto null_unless = [](bool given, auto value) {
    return given ? nlohmann::json(value) : nlohmann::json(nullptr);
  };
  return nlohmann::json{{"kernel", std::string(kernel_name(t.kind))},
      {"file", o.file},
      {"fingerprint", in.rec->fingerprint},
      {"nnz", t.p.nnz()},
      {"dense", t.p.dense_size()},
      {"dtype", std::string(kernels::dtype_name(t.p.dtype()))},
      {"threads", in.threads},
      {"search", t.search},
      {"search_info", in.choice->search_info},
      {"seed", o.seed},
      {"budget", null_unless(o.budget > 0, o.budget)},
      {"budget_seconds", null_unless(o.budget_seconds > 0, o.budget_seconds)},
      {"warmup", o.warmup},
      {"repeats", o.repeat},
      {"space", in.choice->space},
      {"candidates", in.choice->candidates.size()},
      {"considered", r.entries.size()},
      {"measured", r.measured},
      {"reused", r.reused},
      {"complete", r.complete},
      {"stopped_by", null_unless(!r.stopped_by.empty(), r.stopped_by)},
      {"status_counts", status_json(r.status_counts)},
      {"best", best_json},
      {"best_search_rank",
       d.winner && !reference_result
           ? nlohmann::json(d.winner->search_rank)
           : (d.best == d.search_best && d.best ? nlohmann::json(1) : nlohmann::json(nullptr))},
      {"verdict", d.verdict},
      {"verdict_detail", verdict_json},
      // What the tune claims for its result over the faster csr reference: the winner's
      // speedup on the fresh runs with its interval for a gain; 1 (nothing) when the result is
      // a csr reference; null when nothing was confirmed side by side.
      {"claimed_speedup", d.verdict == "gain" && d.judged ? nlohmann::json(d.judged->speedup)
                          : reference_result            ? nlohmann::json(1.0)
                                                        : nlohmann::json(nullptr)},
      {"speedup_interval", d.verdict == "gain" && d.judged
                                ? nlohmann::json{{"lo", d.judged->speedup_lo},
                                                     {"hi", d.judged->speedup_hi},
                                                     {"level", d.judged->level},
                                                     {"reference", d.verdict_reference}}
                                    : nlohmann::json(nullptr)},
      {"search_best", d.search_best ? entry_json(*d.search_best) : nlohmann::json(nullptr)},
      {"kernel_source", null_unless(d.best && !d.best->measurement.kernel_source.empty(),
                                    d.best ? d.best->measurement.kernel_source : "")},
      {"csr", entry_json(csr_schedule)},
      {"csr_baseline", entry_json(csr_baseline)},
      {"speedup_over_csr", speedup(csr_schedule, d.confirm_csr)},
      {"speedup_over_csr_baseline", speedup(csr_baseline, d.confirm_base)},
      {"confirmed", d.confirmed},
      {"confirm", confirmation_json(*in.measured, t.side_by_side, o)},
      {"decision", d.confirmed ? decision_json(*in.measured, d) : nlohmann::json(nullptr)},
      {"noise_warning", null_unless(!noise.empty(), noise)},
      {"busy_warning", null_unless(!in.busy.empty(), in.busy)},
      {"core_round_trip_ns",
       null_unless(in.round_trip_before_ns > 0,
                   nlohmann::json{{"before", in.round_trip_before_ns},
                                  {"after", null_unless(in.round_trip_after_ns > 0,
                                                        in.round_trip_after_ns)}})},
      {"abandon_factor", o.abandon_factor},
      {"abandoned_s", r.abandoned_s},
      {"pass_params", o.params.to_json()},
      {"cache", in.cache},
      {"search_speedup_over_csr", search_speedup(csr_schedule)},
      {"search_speedup_over_csr_baseline", search_speedup(csr_baseline)},
      {"top", top},
      {"failures", failures},
      {"search_s", r.seconds},
      {"time_s", total_s},
      {"economy", economy_json(o, *in.measured, d, in.choice->space, in.calls_budget, total_s)},
      {"model_alone", in.model_alone},
      {"from_cache", false},
      {"plan_cache", nullptr},
      {"explain", explanation},
      {"db", t.db_path},
      {"output", nullptr},  // the CLI's -o
      {"context", in.context}};
}

/// The cache the tile model assumes (the tile-window pass), with the source of its size, so
/// that a run can be reproduced from its output; the reason instead where it cannot be known.
nlohmann::json tile_cache_json(const PassParams& params, int threads) {
  try {
    return signature::cache_capacity(params.cache_level, threads, params.cache_bytes,
                                     params.cache_fraction)
        .to_json();
  } catch (const Error& e) {  // only the tile-window pass needs it; say why it is absent
    return {{"error", e.what()}};
  }
}


}  // namespace waco::tuning::detail
