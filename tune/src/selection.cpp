// Steps 5b-7 of a tune (pipeline.hpp): what the expected calls pay for (apply_calls_budget),
// which nominees fit side by side in memory (candidates_that_fit), and their measurement: side
// by side, or one by one and the best again (either in heats when their formats do not fit in
// one child: plan_heats), then a gain again in fresh runs (measure_and_confirm).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <string>

#include "memory_record.hpp"
#include "pipeline.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::tuning {

using namespace detail;

namespace {

/// What one side-by-side child can spend on nominees beside the two references: the csr
/// schedule and the baseline hold one format where the child shares formats (the baseline then
/// runs on the schedule's: measure_child.cpp) and one output where it shares the output (which
/// the nominees write too), and each its own otherwise.
double room_for_nominees(double budget, double format_bytes, double output_bytes,
                         const SharedData& shared) {
  return budget - (shared.formats ? 1 : 2) * format_bytes - (shared.output ? 1 : 2) * output_bytes;
}

/// The format a candidate stores, when candidates share formats (empty: its own).
std::string format_key(const Candidate* c, const SharedData& shared) {
  if (!shared.formats || !c || !c->schedule) return {};
  return codegen::StorageCache::key(codegen::canonicalize(*c->schedule));
}

std::string held_key(const codegen::SuperSchedule* held, const SharedData& shared) {
  return shared.formats && held ? codegen::StorageCache::key(codegen::canonicalize(*held))
                                : std::string();
}

}  // namespace

std::vector<std::size_t> detail::candidates_that_fit(const std::vector<Candidate>& candidates,
                                                     int wanted, double budget,
                                                     double format_bytes, double output_bytes,
                                                     const SharedData& shared,
                                                     const codegen::SuperSchedule* held) {
  budget = room_for_nominees(budget, format_bytes, output_bytes, shared);
  std::set<std::string> formats;
  if (const std::string h = held_key(held, shared); !h.empty()) formats.insert(h);
  std::vector<std::size_t> chosen;
  const std::size_t total = std::max(candidates.size(), static_cast<std::size_t>(std::max(wanted, 0)));
  for (std::size_t i = 0; i < total && chosen.size() < static_cast<std::size_t>(wanted); ++i) {
    const Candidate* c = i < candidates.size() ? &candidates[i] : nullptr;
    const std::string k = format_key(c, shared);
    const bool new_format = k.empty() || !formats.count(k);
    const double need = (shared.output ? 0.0 : output_bytes) + (new_format ? format_bytes : 0.0);
    if (need > budget && !chosen.empty()) {
      if (!c) break;  // unknown candidates all need as much
      continue;
    }
    if (!k.empty()) formats.insert(k);
    budget -= need;
    chosen.push_back(i);
  }
  if (chosen.empty()) chosen.push_back(0);
  return chosen;
}

std::vector<std::vector<std::size_t>> detail::plan_heats(
    const std::vector<Candidate>& candidates, int wanted, double budget, double format_bytes,
    double output_bytes, const SharedData& shared, const codegen::SuperSchedule* held) {
  budget = room_for_nominees(budget, format_bytes, output_bytes, shared);
  const std::string h = held_key(held, shared);
  // The candidates by the format they store, in the order the list first names each.
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::string> keys;
  const std::size_t n = std::min(candidates.size(), static_cast<std::size_t>(std::max(wanted, 0)));
  for (std::size_t i = 0; i < n; ++i) {
    const std::string k = format_key(&candidates[i], shared);
    const auto at = k.empty() ? keys.end() : std::find(keys.begin(), keys.end(), k);
    if (at != keys.end()) {
      groups[static_cast<std::size_t>(at - keys.begin())].push_back(i);
    } else {
      keys.push_back(k);
      groups.push_back({i});
    }
  }
  std::vector<std::vector<std::size_t>> heats;
  double used = 0.0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double need = (keys[g].empty() || keys[g] != h ? format_bytes : 0.0) +
                        (shared.output ? 0.0 : output_bytes * static_cast<double>(groups[g].size()));
    if (heats.empty() || (used + need > budget && !heats.back().empty())) {
      heats.emplace_back();
      used = 0.0;
    }
    heats.back().insert(heats.back().end(), groups[g].begin(), groups[g].end());
    used += need;
  }
  for (std::vector<std::size_t>& heat : heats) std::sort(heat.begin(), heat.end());
  return heats;
}

std::optional<CallsBudget> detail::apply_calls_budget(TuneRequest& o, TuneObserver& obs, std::vector<Candidate>& candidates,
                                              TuneOptions& to, const Measurement& cm,
                                              double spent_s) {
  if (o.expected_calls <= 0) return std::nullopt;
  if (cm.status != MeasureStatus::Ok) {
    obs.warning("--expected-calls ignored: the csr schedule did not run (" + cm.reason + ")");
    return std::nullopt;
  }
  CallsBudgetInput in;
  in.calls = o.expected_calls;
  in.share = o.tuning_share;
  in.csr_s = cm.median_s;
  in.spent_s = spent_s;
  // A candidate costs what the csr schedule's measurement did (its compile included when it
  // was not cached). Kernels compiled earlier cost less, new ones more (0.3-0.9 s to
  // compile on the development VMs): the search's time limit below is what holds the budget,
  // overrun by at most the candidate measured when it expires.
  in.per_candidate_s = std::max(cm.wall_s, (o.warmup + o.repeat + 2) * cm.median_s);
  in.per_confirmed_s = cm.conversion_s + (o.warmup + o.confirm_rounds + 1) * cm.median_s;
  in.confirm_top = std::max(1, o.confirm);
  const CallsBudget budget = plan_calls_budget(in);
  if (!budget.worth_it) {
    candidates.clear();
    o.confirm = 0;
    obs.note("tune: " + budget.reason + "; the result is csr");
    return budget;
  }
  if (static_cast<std::int64_t>(candidates.size()) > budget.candidates)
    candidates.resize(static_cast<std::size_t>(budget.candidates));
  to.budget_seconds = to.budget_seconds > 0 ? std::min(to.budget_seconds, budget.search_s)
                                            : budget.search_s;
  if (o.confirm > 0) o.confirm = std::min(o.confirm, budget.confirm_top);
  return budget;
}

namespace {

/// What one side-by-side child holds (candidates_that_fit, plan_heats): the memory it may
/// use for formats and outputs (TuneRequest::side_by_side_bytes, else a quarter of the
/// machine's), a format's and an output's size, what the child shares.
struct ChildMemory {
  double budget = 0.0;
  double format_bytes = 0.0;
  double output_bytes = 0.0;
  SharedData shared;
  std::string budget_text;  ///< how the budget reads in a note

  ChildMemory(const TuneRequest& o, const Problem& p) : shared(shared_data(p)) {
    const double value = static_cast<double>(kernels::dtype_size(p.dtype()));
    // A format: a value, a coordinate and a position or some padding a nonzero (12 bytes in f32).
    format_bytes = (8.0 + value) * static_cast<double>(p.nnz());
    output_bytes = value * static_cast<double>(p.output_size());
    // A small problem's candidates are held in several layouts each (MeasureOptions::layouts).
    const double layouts = heuristics::layouts_for(p, o.layouts);
    format_bytes *= layouts;
    output_bytes *= layouts;
    budget = o.side_by_side_bytes > 0 ? o.side_by_side_bytes : physical_memory_bytes() / 4;
    budget_text = o.side_by_side_bytes > 0
                      ? format("--side-by-side-memory (%.0f MiB)", budget / 1048576.0)
                      : std::string("a quarter of this machine's memory");
  }
  std::vector<std::size_t> fit(const std::vector<Candidate>& c, int wanted,
                               const codegen::SuperSchedule* held) const {
    return candidates_that_fit(c, wanted, budget, format_bytes, output_bytes, shared, held);
  }
  std::vector<std::vector<std::size_t>> heats(const std::vector<Candidate>& c, int wanted,
                                              const codegen::SuperSchedule* held) const {
    return plan_heats(c, wanted, budget, format_bytes, output_bytes, shared, held);
  }
};

/// A side-by-side run's ranking renumbered to the combined result's entries (`entry_of`: a
/// list position, search_rank - 1, to its index there).
Confirmation renumbered(const Confirmation& c, const std::vector<std::size_t>& entry_of) {
  Confirmation out = c;
  for (ConfirmEntry& ce : out.ranking) ce.entry = entry_of.at(ce.search_rank - 1);
  return out;
}

/// The selection in heats (plan_heats): each heat's nominees side by side with the references
/// in a child of their own, ranked by their paired ratio to the heat's csr reference (the csr
/// schedule, or the baseline when the schedule failed); the best of each heat then side by side
/// in one more child (as many as fit, by that ratio), whose run is the selection run that the
/// decision reads, as when all go at once. A single finalist keeps its heat's run. The
/// result's entries are every nominee with its heat's timing (times of different children:
/// only the ratios in the heats record compare across heats). `rank_of`: each list position's
/// search rank, for the record and the returned ranking (empty: the position + 1, a model's
/// order); `race_factor`: the heats' racing (confirm_ranked).
RankedConfirmation confirm_in_heats(const TuneRun& t, const std::vector<Candidate>& candidates,
                                    const std::vector<Candidate>& references,
                                    const std::vector<std::vector<std::size_t>>& heats,
                                    const ChildMemory& mem, const codegen::SuperSchedule* held,
                                    nlohmann::json& record, std::string& busy,
                                    const std::vector<std::size_t>& rank_of = {},
                                    double race_factor = 0.0) {
  const auto rank = [&rank_of](std::size_t at) { return rank_of.empty() ? at + 1 : rank_of.at(at); };
  const TuneRequest& o = t.o;
  const double t0 = now_seconds();
  RankedConfirmation out;
  TuneResult& r = out.result;
  std::vector<std::size_t> entry_of(candidates.size(), 0);
  struct Finalist {
    std::size_t at = 0;  // list position
    std::size_t heat = 0;
    double ratio = 0.0;
  };
  std::vector<Finalist> finalists;
  std::vector<Confirmation> runs;
  nlohmann::json heats_json = nlohmann::json::array();
  for (std::size_t h = 0; h < heats.size(); ++h) {
    if (o.stop != nullptr && *o.stop != 0) {
      r.stopped_by = "interrupted";
      r.complete = false;
      break;
    }
    t.obs.note(format("tune: heat %zu of %zu: %zu nominee%s side by side with %s (%d rounds)",
                      h + 1, heats.size(), heats[h].size(), heats[h].size() == 1 ? "" : "s",
                      t.shortcut.c_str(), o.confirm_rounds));
    RankedConfirmation rc = confirm_ranked(
        t.measurer, candidates, references,
        ConfirmOptions{static_cast<int>(heats[h].size()), o.confirm_rounds, {}, heats[h],
                       o.halving_keep},
        race_factor);
    const std::vector<Measurement>& refs = rc.confirmation.references;
    const Measurement* ref = refs.size() == 2 && refs[0].status == MeasureStatus::Ok   ? &refs[0]
                             : refs.size() == 2 && refs[1].status == MeasureStatus::Ok ? &refs[1]
                                                                                       : nullptr;
    std::optional<Finalist> best;
    nlohmann::json rows = nlohmann::json::array();
    for (const ConfirmEntry& ce : rc.confirmation.ranking) {
      const std::size_t at = ce.search_rank - 1;
      const TuneEntry& e = rc.result.entries[ce.entry];
      entry_of.at(at) = r.entries.size();
      r.entries.push_back(e);
      ++r.measured;
      ++r.status_counts[e.measurement.status];
      nlohmann::json row = {{"schedule", e.candidate.label()},
                            {"search_rank", rank(at)},
                            {"status", std::string(status_name(e.measurement.status))}};
      if (e.measurement.status == MeasureStatus::Ok && ref) {
        const double ratio = judge_gain(e.measurement, *ref, o.rule).ratio_median;
        row["ratio_to_csr"] = ratio;
        if (!best || ratio < best->ratio) best = Finalist{at, runs.size(), ratio};
      }
      rows.push_back(row);
    }
    if (best) finalists.push_back(*best);
    heats_json.push_back({{"nominees", rows},
                          {"csr_median_s", ref ? nlohmann::json(ref->median_s) : nlohmann::json()},
                          {"reference", !ref ? "none" : ref == &refs[0] ? "schedule" : "baseline"},
                          {"seconds", rc.confirmation.seconds}});
    runs.push_back(std::move(rc.confirmation));
  }
  std::sort(finalists.begin(), finalists.end(),
            [](const Finalist& a, const Finalist& b) { return a.ratio < b.ratio; });
  std::vector<Candidate> listed;
  for (const Finalist& f : finalists) listed.push_back(candidates[f.at]);
  std::vector<std::size_t> among;
  if (!listed.empty())
    for (std::size_t k : mem.fit(listed, static_cast<int>(listed.size()), held))
      among.push_back(finalists[k].at);
  std::sort(among.begin(), among.end());
  nlohmann::json finals = nlohmann::json::array();
  for (std::size_t at : among) finals.push_back(candidates[at].label());
  Confirmation c;
  if (among.size() > 1) {
    t.obs.note(format("tune: the best of each heat, %zu, side by side with %s (%d rounds)",
                      among.size(), t.shortcut.c_str(), o.confirm_rounds));
    RankedConfirmation fin = confirm_ranked(
        t.measurer, candidates, references,
        ConfirmOptions{static_cast<int>(among.size()), o.confirm_rounds, {}, among, o.halving_keep},
        0.0);
    c = renumbered(fin.confirmation, entry_of);
  } else if (among.size() == 1) {
    const auto f = std::find_if(finalists.begin(), finalists.end(),
                                [&](const Finalist& x) { return x.at == among[0]; });
    c = renumbered(runs.at(f->heat), entry_of);
  } else if (!runs.empty()) {
    c = renumbered(runs.back(), entry_of);  // no nominee ran: the references' last timing
  }
  if (!c.ranking.empty() && c.ranking.front().measurement.status == MeasureStatus::Ok)
    r.best = c.ranking.front().entry;
  for (ConfirmEntry& ce : c.ranking) ce.search_rank = rank(ce.search_rank - 1);
  // The busy warning over every run of the selection: the heats' and the final's.
  std::vector<const Measurement*> all;
  const auto add = [&all](const Confirmation& run) {
    for (const ConfirmEntry& ce : run.ranking) all.push_back(&ce.measurement);
    for (const Measurement& m : run.references) all.push_back(&m);
  };
  for (const Confirmation& run : runs) add(run);
  if (among.size() > 1) add(c);
  busy = disturbed_warning(all);
  c.seconds = r.seconds = now_seconds() - t0;
  record = {{"budget_bytes", mem.budget},
            {"heats", heats_json},
            {"finalists", finals},
            {"final_run", among.size() > 1}};
  out.confirmation = std::move(c);
  return out;
}

/// Step 7 of a search that measured its candidates one by one first: its best `--confirm`
/// (by those timings) and both references measured again side by side in one child
/// (interleaved rounds), or in heats (confirm_in_heats) when their formats do not fit in one.
/// The winner and the speedups come from these timings: two separate measurements of one
/// kernel drift by up to 1.5x on a shared machine, more than the gap between the top
/// candidates. Not stored (see confirm_best). Sets m.confirmation (and m.heats), or marks
/// m.result interrupted when stopped between heats.
void confirm_top(const TuneRun& t, Measured& m, const TuneEntry& csr_schedule,
                 const TuneEntry& csr_baseline, const ChildMemory& mem,
                 const codegen::SuperSchedule* held) {
  const TuneRequest& o = t.o;
  const TuneResult& r = m.result;
  // The csr-like schedules of the search (the csr schedule with any chunk and thread count):
  // the fastest of them is always nominated, so that the winner is never slower than it.
  const codegen::SuperSchedule csr_shape = csr_schedule.candidate.schedule.value();
  ConfirmOptions co{std::max(1, o.confirm), o.confirm_rounds, [csr_shape](const Candidate& c) {
                      if (!c.schedule) return false;
                      codegen::SuperSchedule s = *c.schedule;
                      s.threads = csr_shape.threads;
                      s.chunk = csr_shape.chunk;
                      return s == csr_shape;
                    }, {}, o.halving_keep};
  const Nominated nominated = best_entries(r, co);
  std::vector<Candidate> listed;
  for (std::size_t e : nominated.entries) listed.push_back(r.entries[e].candidate);
  const std::vector<std::vector<std::size_t>> heats =
      mem.heats(listed, static_cast<int>(listed.size()), held);
  const std::vector<Candidate> references{csr_schedule.candidate, csr_baseline.candidate};
  if (heats.size() <= 1) {
    t.obs.note(format("tune: measuring the best %zu side by side with %s (%d rounds)",
                      listed.size(), t.shortcut.c_str(), o.confirm_rounds));
    m.confirmation = confirm_best(t.measurer, r, references, co);
    return;
  }
  t.obs.note(format("tune: measuring the best %zu in %zu heats side by side with %s (their "
                    "formats would not fit in one child: %s), the best of each then together",
                    listed.size(), heats.size(), t.shortcut.c_str(), mem.budget_text.c_str()));
  std::string busy;
  RankedConfirmation rc = confirm_in_heats(t, listed, references, heats, mem, held, m.heats, busy,
                                           nominated.ranks);
  if (!busy.empty()) t.obs.warning(busy);
  if (rc.result.stopped_by == "interrupted") {
    m.result.stopped_by = "interrupted";
    m.result.complete = false;
    return;
  }
  // The ranking's entries are the search's (its own timings beside the side-by-side ones).
  Confirmation c = std::move(rc.confirmation);
  for (ConfirmEntry& ce : c.ranking) {
    const auto at = std::find(nominated.ranks.begin(), nominated.ranks.end(), ce.search_rank);
    ce.entry = nominated.entries.at(static_cast<std::size_t>(at - nominated.ranks.begin()));
  }
  m.confirmation = std::move(c);
}

}  // namespace

Measured detail::measure_and_confirm(const TuneRun& t, const std::vector<Candidate>& candidates,
                             TuneOptions& to, TuneEntry& csr_schedule, TuneEntry& csr_baseline,
                             bool references_first, bool not_worth_it,
                             std::optional<double> csr_s, std::string& busy) {
  const TuneRequest& o = t.o;
  const std::string kernel(kernel_name(t.kind));
  // What one measuring child holds, with the csr schedule's format among the references'.
  const ChildMemory mem(o, t.p);
  const codegen::SuperSchedule* held =
      csr_schedule.candidate.schedule ? &*csr_schedule.candidate.schedule : nullptr;
  Measured m;
  if (t.side_by_side && !not_worth_it) {
    const int wanted = static_cast<int>(std::min<std::size_t>(
        candidates.size(), o.confirm_given ? static_cast<std::size_t>(std::max(1, o.confirm))
                                           : candidates.size()));
    if (wanted == 0) return m;
    const std::vector<std::vector<std::size_t>> heats = mem.heats(candidates, wanted, held);
    const std::vector<Candidate> references{csr_schedule.candidate, csr_baseline.candidate};
    if (heats.size() > 1) {
      t.obs.note(format("tune: %s %s search: the model's best %d in %zu heats side by side with "
                        "%s (their formats would not fit in one child: %s), the best of each "
                        "then together",
                        kernel.c_str(), t.search.c_str(), wanted, heats.size(),
                        t.shortcut.c_str(), mem.budget_text.c_str()));
      RankedConfirmation rc =
          confirm_in_heats(t, candidates, references, heats, mem, held, m.heats, busy, {},
                           o.abandon_factor);
      m.result = std::move(rc.result);
      // Stopped between heats: no selection run to decide on (the report says interrupted).
      if (m.result.stopped_by != "interrupted") m.confirmation = std::move(rc.confirmation);
    } else {
      std::vector<std::size_t> chosen = heats.at(0);
      const int top = static_cast<int>(chosen.size());
      if (chosen.back() + 1 == chosen.size()) chosen.clear();  // simply the first `top`
      t.obs.note(format("tune: %s %s search: the model's best %d measured side by side with %s "
                        "(%d rounds)",
                        kernel.c_str(), t.search.c_str(), top, t.shortcut.c_str(), o.confirm_rounds));
      RankedConfirmation rc = confirm_ranked(t.measurer, candidates, references,
                                             ConfirmOptions{top, o.confirm_rounds, {}, std::move(chosen),
                                                            o.halving_keep},
                                             o.abandon_factor);
      m.result = std::move(rc.result);
      m.confirmation = std::move(rc.confirmation);
      busy = disturbed_warning(*m.confirmation);
    }
    if (!busy.empty()) t.obs.warning(busy);
  } else if (!t.side_by_side) {
    if (!not_worth_it) {
      t.obs.note(format("tune: %s %s search, %zu candidates, results in %s", kernel.c_str(),
                        t.search.c_str(), candidates.size(), t.db_path.c_str()));
      TuneObserver* obs = &t.obs;
      to.progress = [obs, csr_s](const TuneProgress& pr) { obs->progress(pr, csr_s); };
    }
    m.result = run_candidates(t.db, t.key, t.measurer, candidates, to);
    const TuneResult& r = m.result;
    if (o.confirm > 0 && r.best && r.stopped_by != "interrupted")
      confirm_top(t, m, csr_schedule, csr_baseline, mem, held);
  }
  if (t.memory) t.memory->stage("selection", &t.measurer);
  // 7b. Select on one run, decide on another: a gain in the selection run is timed again in
  // fresh side-by-side children, and only their rounds decide (FreshOptions says why). A
  // selection without a gain needs no second opinion: the selection favours its winner.
  const Decision selected = m.confirmation && m.result.stopped_by != "interrupted"
                                ? decide(m, csr_schedule, csr_baseline, t.shortcut, not_worth_it, o.rule)
                                : Decision{};
  // A no-gain whose result would be the csr schedule because the selection ran it faster than
  // the hand-written baseline is decided on fresh runs too: the selection's child (20 kernels)
  // can slow the baseline (ca-HepTh SpMV, f32, Zen 5 VM: the schedule 1.63x the baseline there,
  // 0.89x in the ablation's final runs).
  const bool schedule_over_baseline =
      selected.verdict == "no-gain" && selected.best == &csr_schedule &&
      selected.references_judged && selected.references_judged->ratio_hi < 1.0;
  if (selected.judged && (o.decide_always || schedule_over_baseline ||
                          selected.judged->ratio_median <= 1.0 - o.rule.min_gain)) {
    // Together: as many leaders as fit in one child beside the references (in the selection's
    // order). Apart, a child holds one leader beside them, as the selection's heats did.
    std::vector<Candidate> leaders;
    for (const ConfirmEntry& ce : m.confirmation->ranking)
      if (ce.measurement.status == MeasureStatus::Ok &&
          leaders.size() < static_cast<std::size_t>(o.decide_leaders))
        leaders.push_back(m.result.entries[ce.entry].candidate);
    int fit = o.decide_leaders;
    if (!leaders.empty()) fit = std::min(fit, static_cast<int>(leaders.size()));
    if (!leaders.empty() && o.decide_together) {
      const std::vector<std::size_t> fits = mem.fit(leaders, static_cast<int>(leaders.size()), held);
      std::size_t prefix = 0;
      while (prefix < fits.size() && fits[prefix] == prefix) ++prefix;
      if (prefix < leaders.size()) {
        fit = static_cast<int>(std::max<std::size_t>(1, prefix));
        t.obs.note(format("tune: %d of the selection's best %zu in the fresh runs: more would "
                          "not fit in %s", fit, leaders.size(), mem.budget_text.c_str()));
      }
    }
    t.obs.note(format("tune: deciding on fresh runs: the best %d and %s side by side again (%d "
                      "runs of %d rounds, %s)",
                      fit, t.shortcut.c_str(), o.decide_runs, o.decide_rounds,
                      o.decide_together ? "one child a run" : "each leader in a child of its own"));
    FreshOptions fo{fit, o.decide_rounds, o.decide_runs, o.rule.min_gain, o.decide_drop};
    fo.apart = !o.decide_together;
    fo.clear_ratio = o.decide_clear;
    fo.extra_runs = o.decide_extra_runs;
    m.fresh = time_fresh(t.measurer, m.result, *m.confirmation,
                         {csr_schedule.candidate, csr_baseline.candidate}, fo);
    if (m.fresh->dropped > 0)
      t.obs.note(format("tune: %d of the %zu leaders stopped after a fresh run (%s)",
                        m.fresh->dropped, m.fresh->leaders.size(),
                        fo.apart ? "more than --decide-drop x the fastest leader's time, or no "
                                   "longer able to be judged a gain"
                                 : "more than --decide-drop x the fastest leader's time"));
    if (!m.fresh->extended.empty()) t.obs.note("tune: fresh runs extended " + m.fresh->extended);
    if (!m.fresh->stopped.empty()) t.obs.note("tune: fresh runs stopped " + m.fresh->stopped);
    if (!m.fresh->busy.empty()) t.obs.warning(m.fresh->busy);
  }
  // A model search that did not measure the references first: their only timings are the
  // side-by-side ones.
  if (t.side_by_side && !references_first && m.confirmation) {
    csr_schedule.measurement = m.confirmation->references[0];
    csr_baseline.measurement = m.confirmation->references[1];
  }
  return m;
}

}  // namespace waco::tuning
