// Steps 5b-7 of a tune (pipeline.hpp): what the expected calls pay for (apply_calls_budget),
// which nominees fit side by side in memory (candidates_that_fit), and their measurement: side
// by side, or one by one and the best again, then a gain again in fresh runs
// (measure_and_confirm).
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

std::vector<std::size_t> detail::candidates_that_fit(const std::vector<Candidate>& candidates,
                                                     int wanted, double budget,
                                                     double format_bytes, double output_bytes,
                                                     const SharedData& shared,
                                                     const codegen::SuperSchedule* held) {
  budget -= 2 * (format_bytes + output_bytes);  // the references, each with its own
  if (shared.output) budget -= output_bytes;    // one output for every candidate
  const auto key = [](const codegen::SuperSchedule& s) {
    return codegen::StorageCache::key(codegen::canonicalize(s));
  };
  std::set<std::string> formats;
  if (shared.formats && held) formats.insert(key(*held));
  std::vector<std::size_t> chosen;
  const std::size_t total = std::max(candidates.size(), static_cast<std::size_t>(std::max(wanted, 0)));
  for (std::size_t i = 0; i < total && chosen.size() < static_cast<std::size_t>(wanted); ++i) {
    const Candidate* c = i < candidates.size() ? &candidates[i] : nullptr;
    const std::string k = shared.formats && c && c->schedule ? key(*c->schedule) : std::string();
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

/// Which of `candidates` (at most `wanted`; unknown ones past the list count as a format each)
/// fit in one side-by-side child beside the two references, the csr schedule `held` among them
/// (candidates_that_fit): at most a quarter of the memory for them; says so when that is fewer.
std::vector<std::size_t> side_by_side_fit(const Problem& p, const std::vector<Candidate>& candidates,
                                          int wanted, TuneObserver& obs,
                                          const codegen::SuperSchedule* held = nullptr) {
  const double value = static_cast<double>(kernels::dtype_size(p.dtype()));
  // A format: a value, a coordinate and a position or some padding a nonzero (12 bytes in f32).
  const double format_bytes = (8.0 + value) * static_cast<double>(p.nnz());
  const double output_bytes = value * static_cast<double>(p.output_size());
  std::vector<std::size_t> chosen = candidates_that_fit(
      candidates, wanted, physical_memory_bytes() / 4, format_bytes, output_bytes, shared_data(p), held);
  const int top = static_cast<int>(chosen.size());
  if (top < wanted)
    obs.note(format("tune: only %d of %d side by side: more would not fit in a quarter of this "
                    "machine's memory", top, wanted));
  else if (!chosen.empty() && chosen.back() + 1 != chosen.size())
    obs.note(format("tune: %d of the first %zu side by side: the rest would not fit in a "
                    "quarter of this machine's memory beside them", top, chosen.back() + 1));
  return chosen;
}

/// Step 7 of tune: the search's best candidates and both references measured again side by
/// side in one child (interleaved rounds). The winner and the speedups come from these
/// timings: two separate measurements of one kernel drift by up to 1.5x on a shared machine,
/// more than the gap between the top candidates. Not stored (see confirm_best).
Confirmation confirm_top(const TuneRequest& o, TuneObserver& obs, const Problem& p, Runner& measurer,
                         const TuneResult& r, const TuneEntry& csr_schedule,
                         const TuneEntry& csr_baseline, const std::string& shortcut) {
  const std::int64_t ok = r.status_counts.at(MeasureStatus::Ok);  // r.best: at least one
  const int top = static_cast<int>(side_by_side_fit(p, {}, o.confirm, obs).size());
  obs.note(format("tune: measuring the best %lld side by side with %s (%d rounds)",
                  static_cast<long long>(std::min<std::int64_t>(top, ok)), shortcut.c_str(),
                  o.confirm_rounds));
  // The csr-like schedules of the search (the csr schedule with any chunk and thread count):
  // the fastest of them is always nominated, so that the winner is never slower than it.
  const codegen::SuperSchedule csr_shape = csr_schedule.candidate.schedule.value();
  ConfirmOptions co{top, o.confirm_rounds, [csr_shape](const Candidate& c) {
                      if (!c.schedule) return false;
                      codegen::SuperSchedule s = *c.schedule;
                      s.threads = csr_shape.threads;
                      s.chunk = csr_shape.chunk;
                      return s == csr_shape;
                    }, {}};
  return confirm_best(measurer, r, {csr_schedule.candidate, csr_baseline.candidate}, co);
}

}  // namespace

Measured detail::measure_and_confirm(const TuneRun& t, const std::vector<Candidate>& candidates,
                             TuneOptions& to, TuneEntry& csr_schedule, TuneEntry& csr_baseline,
                             bool references_first, bool not_worth_it,
                             std::optional<double> csr_s, std::string& busy) {
  const TuneRequest& o = t.o;
  const std::string kernel(kernel_name(t.kind));
  Measured m;
  if (t.side_by_side && !not_worth_it) {
    const int wanted = static_cast<int>(std::min<std::size_t>(
        candidates.size(), o.confirm_given ? static_cast<std::size_t>(std::max(1, o.confirm))
                                           : candidates.size()));
    if (wanted == 0) return m;
    const codegen::SuperSchedule* held =
        csr_schedule.candidate.schedule ? &*csr_schedule.candidate.schedule : nullptr;
    std::vector<std::size_t> chosen = side_by_side_fit(t.p, candidates, wanted, t.obs, held);
    const int top = static_cast<int>(chosen.size());
    if (chosen.back() + 1 == chosen.size()) chosen.clear();  // simply the first `top`
    t.obs.note(format("tune: %s %s search: the model's best %d measured side by side with %s "
                      "(%d rounds)",
                      kernel.c_str(), t.search.c_str(), top, t.shortcut.c_str(), o.confirm_rounds));
    RankedConfirmation rc = confirm_ranked(
        t.measurer, candidates, {csr_schedule.candidate, csr_baseline.candidate},
        ConfirmOptions{top, o.confirm_rounds, {}, std::move(chosen)}, o.abandon_factor);
    m.result = std::move(rc.result);
    m.confirmation = std::move(rc.confirmation);
    busy = disturbed_warning(*m.confirmation);
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
      m.confirmation =
          confirm_top(o, t.obs, t.p, t.measurer, r, csr_schedule, csr_baseline, t.shortcut);
  }
  if (t.memory) t.memory->stage("selection", &t.measurer);
  // 7b. Select on one run, decide on another: a gain in the selection run is timed again in
  // fresh side-by-side children, and only their rounds decide (FreshOptions says why). A
  // selection without a gain needs no second opinion: the selection favours its winner.
  const Decision selected = m.confirmation && m.result.stopped_by != "interrupted"
                                ? decide(m, csr_schedule, csr_baseline, t.shortcut, not_worth_it, o.rule)
                                : Decision{};
  if (selected.judged &&
      (o.decide_always || selected.judged->ratio_median <= 1.0 - o.rule.min_gain)) {
    t.obs.note(format("tune: deciding on fresh runs: the best %d and %s side by side again (%d "
                      "runs of %d rounds)",
                      o.decide_leaders, t.shortcut.c_str(), o.decide_runs, o.decide_rounds));
    m.fresh = time_fresh(t.measurer, m.result, *m.confirmation,
                         {csr_schedule.candidate, csr_baseline.candidate},
                         FreshOptions{o.decide_leaders, o.decide_rounds, o.decide_runs});
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
