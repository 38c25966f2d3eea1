// The fresh runs that decide (see tuner.hpp, FreshOptions): the leaders of a confirmation and
// the references timed again in fresh measuring children, dropped or stopped early when their
// rounds already tell (time_fresh, FreshTiming).
#include "waco/heuristics/tuner.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tuner_internal.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

using detail::Batch;
using detail::round_ratios;
using detail::run_medians;

namespace {
/// Appends a further run's timed rounds to a measurement (see time_fresh). A failure in any run
/// is the measurement's.
void merge_rounds(Measurement& into, const Measurement& again) {
  if (into.status != MeasureStatus::Ok) return;
  if (again.status != MeasureStatus::Ok) {
    into = again;
    return;
  }
  into.seconds.insert(into.seconds.end(), again.seconds.begin(), again.seconds.end());
  const kernels::TimingStats s = kernels::summarize(into.seconds);
  into.median_s = s.median;
  into.min_s = s.min;
  into.max_s = s.max;
  into.repeats = static_cast<int>(into.seconds.size());
  // Software counts add up over the runs (disturbed_warning reads them).
  if (into.counters.is_object() && again.counters.is_object())
    for (const char* k : {"retaken", "disturbed_kept"})
      into.counters[k] = into.counters.value(k, std::int64_t{0}) +
                         again.counters.value(k, std::int64_t{0});
}
}  // namespace

std::optional<std::size_t> FreshTiming::best() const {
  std::optional<std::size_t> b;
  double b_score = 0.0;
  for (std::size_t i = 0; i < leader_ms.size(); ++i) {
    if (leader_ms[i].status != MeasureStatus::Ok) continue;
    const double s = score(i);
    if (!b || s < b_score) {
      b = i;
      b_score = s;
    }
  }
  return b;
}

const std::vector<Measurement>& FreshTiming::references_of(std::size_t leader) const {
  return leader_references.empty() ? references : leader_references[leader];
}

double FreshTiming::score(std::size_t leader) const {
  const Measurement& m = leader_ms[leader];
  if (leader_references.empty()) return m.median_s;
  // Apart: each leader's rounds were timed in children of their own; only its ratios to the
  // references timed beside it compare across leaders (the first reference that ran).
  for (const Measurement& ref : leader_references[leader]) {
    if (ref.status != MeasureStatus::Ok) continue;
    const std::vector<double> ratios = round_ratios(m, ref);
    if (!ratios.empty()) return kernels::median(ratios);
  }
  return std::numeric_limits<double>::infinity();
}

namespace {

/// FreshOptions::clear_ratio after a run: why the fresh runs can stop on a clear gain, else empty.
std::string clear_gain(const FreshTiming& f, const Confirmation& c, const FreshOptions& opts) {
  const std::optional<std::size_t> fastest = f.best();
  if (opts.clear_ratio <= 0 || !fastest) return {};
  const std::vector<Measurement>& refs = f.references_of(*fastest);
  const Measurement& selected = c.ranking[f.leaders[*fastest]].measurement;
  if (c.references.size() != refs.size()) return {};
  double worst_hi = 0.0, worst_selection = 0.0;
  int judged = 0;
  for (std::size_t j = 0; j < refs.size(); ++j) {
    if (refs[j].status != MeasureStatus::Ok) continue;
    const std::vector<double> fresh = round_ratios(f.leader_ms[*fastest], refs[j]);
    const std::vector<double> before = c.references[j].status == MeasureStatus::Ok
                                           ? round_ratios(selected, c.references[j])
                                           : std::vector<double>{};
    if (fresh.empty() || before.empty()) return {};
    const double hi = median_interval(fresh, opts.clear_level).second;
    const double sel = kernels::median(before);
    if (hi > opts.clear_ratio || sel > opts.clear_ratio) return {};
    worst_hi = std::max(worst_hi, hi);
    worst_selection = std::max(worst_selection, sel);
    ++judged;
  }
  if (judged == 0) return {};
  char why[240];
  std::snprintf(why, sizeof why,
                "after %d of %d runs: a clear gain: the fastest leader's per-round ratio to each "
                "reference at most %.3g (%.0f%% interval; the selection run's median at most "
                "%.3g), both at or below %.3g",
                f.runs, f.runs_planned, worst_hi, 100 * opts.clear_level, worst_selection,
                opts.clear_ratio);
  return why;
}

/// FreshOptions::extra_runs after the planned runs: why the fastest leader's gain is marginal
/// (more runs are made), else empty.
std::string marginal_gain(const FreshTiming& f, const FreshOptions& opts) {
  const std::optional<std::size_t> fastest = f.best();
  if (opts.extra_runs <= 0 || opts.stop_min_gain < 0 || !fastest || f.runs < 2) return {};
  const double most = 1.0 - opts.stop_min_gain;
  const Measurement& lead = f.leader_ms[*fastest];
  if (lead.status != MeasureStatus::Ok) return {};
  const std::vector<Measurement>& refs = f.references_of(*fastest);
  // The references timed beside each other in the same children: how much a process favours
  // one kernel over another, measured on a pair whose ratio no choice made.
  std::vector<double> noise;
  if (refs.size() >= 2 && refs[0].status == MeasureStatus::Ok && refs[1].status == MeasureStatus::Ok)
    noise = run_medians(round_ratios(refs[0], refs[1]), f.runs);
  for (const Measurement& ref : refs) {
    if (ref.status != MeasureStatus::Ok) continue;
    const std::vector<double> medians = run_medians(round_ratios(lead, ref), f.runs);
    if (medians.empty() || *std::max_element(medians.begin(), medians.end()) > most) continue;
    const double bound = marginal_gain_bound(medians, noise);
    if (bound <= most) continue;
    char why[240];
    std::snprintf(why, sizeof why,
                  "after %d runs: a marginal gain: every run's median ratio at most %.3g "
                  "(%.3g-%.3g), but their 95%% bound %.3g is not: %d more run%s",
                  f.runs, most, *std::min_element(medians.begin(), medians.end()),
                  *std::max_element(medians.begin(), medians.end()), bound, opts.extra_runs,
                  opts.extra_runs == 1 ? "" : "s");
    return why;
  }
  return {};
}

}  // namespace

FreshTiming time_fresh(Runner& measurer, const TuneResult& r, const Confirmation& c,
                       const std::vector<Candidate>& references, const FreshOptions& opts) {
  WACO_ASSERT(opts.leaders >= 1 && opts.rounds >= 1 && opts.runs >= 1,
              "time_fresh needs leaders, rounds and runs >= 1");
  const double t0 = kernels::now_seconds();
  FreshTiming f;
  f.rounds = opts.rounds;
  f.runs_planned = opts.runs;
  f.apart = opts.apart;
  for (std::size_t k = 0; k < c.ranking.size() && f.leaders.size() < static_cast<std::size_t>(opts.leaders); ++k)
    if (c.ranking[k].measurement.status == MeasureStatus::Ok) f.leaders.push_back(k);
  if (f.leaders.empty()) return f;
  const std::size_t nl = f.leaders.size(), nr = references.size();
  std::vector<char> active(nl, 1);  // leaders still timed (drop_ratio; apart: stop_min_gain)
  CompareOptions co;
  co.race_factor = 0.0;  // the leaders were fast a moment ago: time every one
  // lost[i][j]: leader i had a run whose median ratio to reference j exceeded 1 - stop_min_gain.
  std::vector<std::vector<bool>> lost(nl, std::vector<bool>(nr, false));
  // Rounds of this run: per leader its own, and per leader the references timed beside it.
  std::vector<Measurement> run_lead(nl);
  std::vector<std::vector<Measurement>> run_refs(nl, std::vector<Measurement>(nr));
  const auto append = [](Measurement& into, const Measurement& again, bool first) {
    if (first) into = again;
    else merge_rounds(into, again);
  };
  int planned = opts.runs;
  for (int run = 0; run < planned; ++run) {
    // One child of every active leader beside the references, or (apart) one child each.
    std::vector<std::vector<std::size_t>> children;
    for (std::size_t i = 0; i < nl; ++i) {
      if (!active[i]) continue;
      if (opts.apart || children.empty()) children.emplace_back();
      children.back().push_back(i);
    }
    for (const std::vector<std::size_t>& child : children) {
      Batch batch;  // a leader that is also a reference is measured once
      std::vector<std::size_t> lead_slot, reference_slot;
      for (std::size_t i : child) lead_slot.push_back(batch.add(r.entries[c.ranking[f.leaders[i]].entry].candidate));
      for (const Candidate& ref : references) reference_slot.push_back(batch.add(ref));
      const std::vector<Measurement> ms = measurer.compare(batch.list, opts.rounds, co);
      for (std::size_t a = 0; a < child.size(); ++a) {
        run_lead[child[a]] = ms[lead_slot[a]];
        for (std::size_t j = 0; j < nr; ++j) run_refs[child[a]][j] = ms[reference_slot[j]];
      }
      // The references' rounds of every child, in order (apart: their rounds are not paired
      // with any one leader's; FreshTiming::references_of is).
      const bool first_child = run == 0 && &child == &children.front();
      if (f.references.empty()) f.references.resize(nr);
      for (std::size_t j = 0; j < nr; ++j) append(f.references[j], ms[reference_slot[j]], first_child);
      ++f.children;
    }
    if (run == 0) {
      f.leader_ms = run_lead;
      if (opts.apart) f.leader_references = run_refs;
    } else {
      for (std::size_t i = 0; i < nl; ++i) {
        if (!active[i]) continue;
        merge_rounds(f.leader_ms[i], run_lead[i]);
        if (opts.apart)
          for (std::size_t j = 0; j < nr; ++j) merge_rounds(f.leader_references[i][j], run_refs[i][j]);
      }
    }
    ++f.runs;
    if (f.runs == planned) {
      // A marginal gain gets its extra runs (once); then the checks below apply to them too.
      if (!f.extended.empty()) continue;
      f.extended = marginal_gain(f, opts);
      if (f.extended.empty()) continue;
      planned += opts.extra_runs;
      f.runs_planned = planned;
    }
    // Leaders clearly slower than the fastest so far stop here (FreshOptions::drop_ratio; a
    // dropped one is Abandoned, so best() is among those still timed).
    const std::optional<std::size_t> fastest = f.best();
    const auto drop = [&](std::size_t i, const char* why) {
      active[i] = 0;
      ++f.dropped;
      f.leader_ms[i].status = MeasureStatus::Abandoned;
      f.leader_ms[i].reason = why;
    };
    for (std::size_t i = 0; i < nl && opts.drop_ratio > 1.0 && fastest; ++i) {
      const Measurement& m = f.leader_ms[i];
      if (i == *fastest || !active[i] || m.status != MeasureStatus::Ok) continue;
      // Together: the per-round ratios to the fastest leader. Apart: the leaders ran in
      // different children, so the ratios to the references timed beside each, the leader's
      // interval against the fastest one's median (f.score).
      std::vector<double> ratios;
      if (!opts.apart) {
        ratios = round_ratios(m, f.leader_ms[*fastest]);
      } else {
        for (const Measurement& ref : f.leader_references[i])
          if (ref.status == MeasureStatus::Ok && ratios.empty()) ratios = round_ratios(m, ref);
        for (double& x : ratios) x /= f.score(*fastest);
      }
      if (ratios.empty()) continue;
      const auto [lo, hi] = median_interval(ratios, opts.drop_level);
      if (lo <= opts.drop_ratio) continue;
      char why[240];
      std::snprintf(why, sizeof why,
                    "dropped after %d of %d fresh runs: %.3g x the fastest leader's time per "
                    "round (median; %.0f%% interval %.3g-%.3g, above %.3g)",
                    f.runs, opts.runs, kernels::median(ratios), 100 * opts.drop_level, lo, hi,
                    opts.drop_ratio);
      drop(i, why);
    }
    if (const std::string why = clear_gain(f, c, opts); !why.empty()) {
      f.stopped = why;
      f.clear = true;
      break;
    }
    if (opts.stop_min_gain < 0) continue;
    // judge_gain's every-run condition on this run's rounds alone (a pair whose round counts
    // differ is judged otherwise there, by the ratio of its medians: never counted as lost).
    bool open = false;
    for (std::size_t i = 0; i < nl; ++i) {
      if (!active[i] || f.leader_ms[i].status != MeasureStatus::Ok) continue;
      for (std::size_t j = 0; j < nr; ++j) {
        if (f.references_of(i)[j].status != MeasureStatus::Ok) continue;
        if (!lost[i][j]) {
          const std::vector<double> ratios = round_ratios(run_lead[i], run_refs[i][j]);
          lost[i][j] = !ratios.empty() && kernels::median(ratios) > 1.0 - opts.stop_min_gain;
        }
        open = open || !lost[i][j];
      }
    }
    // Apart, a leader that can no longer be judged a gain needs no more children of its own
    // while another still may be (FreshOptions::apart); when none may, every leader stops here.
    for (std::size_t i = 0; i < nl && opts.apart && open; ++i) {
      if (!active[i] || f.leader_ms[i].status != MeasureStatus::Ok) continue;
      bool leader_open = false;
      for (std::size_t j = 0; j < nr; ++j)
        leader_open = leader_open || (f.references_of(i)[j].status == MeasureStatus::Ok && !lost[i][j]);
      if (leader_open) continue;
      char why[200];
      std::snprintf(why, sizeof why,
                    "stopped after %d of %d fresh runs: against each reference, a run's median "
                    "per-round ratio exceeded %.3g (a gain needs every run at most that)",
                    f.runs, opts.runs, 1.0 - opts.stop_min_gain);
      drop(i, why);
    }
    if (!open) {
      char why[200];
      std::snprintf(why, sizeof why,
                    "after %d of %d runs: each leader, against each reference, had a run whose "
                    "median per-round ratio exceeded %.3g; a gain needs every run at most that",
                    f.runs, opts.runs, 1.0 - opts.stop_min_gain);
      f.stopped = why;
      break;
    }
  }
  std::vector<const Measurement*> all;
  for (const Measurement& m : f.leader_ms) all.push_back(&m);
  for (const Measurement& m : f.references) all.push_back(&m);
  f.busy = disturbed_warning(all);
  f.disturbed_share = disturbance(all).kept_share();
  f.seconds = kernels::now_seconds() - t0;
  return f;
}

}  // namespace waco::heuristics
