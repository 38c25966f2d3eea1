// The measuring loop of a search: reuse stored results, measure the rest in isolation, record
// each one as it comes (see tuner.hpp).
#include "waco/heuristics/tuner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

namespace {

/// Each run's median of per-round ratios appended run by run (`runs` runs of equal round
/// counts); empty when they cannot be split so.
std::vector<double> run_medians(const std::vector<double>& ratios, int runs) {
  const std::size_t k = static_cast<std::size_t>(runs);
  if (ratios.empty() || k == 0 || ratios.size() % k != 0) return {};
  const std::size_t per = ratios.size() / k;
  std::vector<double> medians;
  for (std::size_t r = 0; r < k; ++r)
    medians.push_back(kernels::median({ratios.begin() + static_cast<std::ptrdiff_t>(r * per),
                                       ratios.begin() + static_cast<std::ptrdiff_t>((r + 1) * per)}));
  return medians;
}

/// Whether a stored result stands (see measure_or_reuse).
bool reusable(const Measurement& m, const TuneOptions& opts) {
  if (m.status == MeasureStatus::Ok) return true;
  if (m.status == MeasureStatus::Abandoned) return opts.race_factor > 0 && !opts.retry_failed;
  return !opts.retry_failed;
}

}  // namespace

TuneEntry measure_or_reuse(ResultsDb& db, const MeasurementKey& key, Runner& measurer,
                           const Candidate& c, const TuneOptions& opts, const RaceBound& race) {
  WACO_ASSERT(key.repeats == measurer.options().repeats,
              "the measurement key's repeats differ from the Measurer's");
  TuneEntry e;
  e.candidate = c;
  const int threads = c.effective_threads(measurer.run_threads());
  if (auto stored = db.find_measurement(key, c, threads)) {
    if (reusable(stored->measurement, opts)) {
      e.measurement = std::move(stored->measurement);
      e.reused = true;
      return e;
    }
  }
  e.measurement = measurer.measure(c, race);
  db.record_measurement(key, c, e.measurement, opts.context);
  return e;
}

TuneResult run_candidates(ResultsDb& db, const MeasurementKey& key, Runner& measurer,
                          const std::vector<Candidate>& candidates, const TuneOptions& opts) {
  TuneResult r;
  const double t0 = kernels::now_seconds();
  double measuring_s = 0.0;
  std::unordered_set<std::string> seen;
  TuneProgress p;
  p.total = static_cast<std::int64_t>(candidates.size());
  for (const Candidate& c : candidates) {
    if (!seen.insert(c.label()).second) {  // a duplicate: counted once
      --p.total;
      continue;
    }
    if (opts.stop && *opts.stop) {
      r.complete = false;
      r.stopped_by = "interrupted";
      break;
    }
    const double elapsed = kernels::now_seconds() - t0;
    const bool out_of_time = opts.budget_seconds > 0 && elapsed >= opts.budget_seconds;
    if (out_of_time) {
      // Only stored results are still taken; the first candidate needing a measurement stops.
      const int threads = c.effective_threads(measurer.run_threads());
      const auto stored = db.find_measurement(key, c, threads);
      if (!stored || !reusable(stored->measurement, opts)) {
        r.complete = false;
        r.stopped_by = "budget-seconds";
        break;
      }
    }
    // The race bound: a factor over the best median so far (and the reference's).
    RaceBound race;
    if (opts.race_factor > 0) {
      double best = opts.race_reference_s > 0 ? opts.race_reference_s : 0.0;
      if (r.best) {
        const double b = r.entries[*r.best].measurement.median_s;
        best = best > 0 ? std::min(best, b) : b;
      }
      race.above_s = opts.race_factor * best;
      race.check = opts.race_check;
      race.check_s = opts.race_check_s;
    }
    const double m0 = kernels::now_seconds();
    TuneEntry e = measure_or_reuse(db, key, measurer, c, opts, race);
    if (e.reused) {
      ++r.reused;
    } else {
      ++r.measured;
      const double spent = kernels::now_seconds() - m0;
      measuring_s += spent;
      if (e.measurement.status == MeasureStatus::Abandoned) r.abandoned_s += spent;
    }
    ++r.status_counts[e.measurement.status];
    r.entries.push_back(std::move(e));
    const TuneEntry& last = r.entries.back();
    if (last.measurement.status == MeasureStatus::Ok &&
        (!r.best || last.measurement.median_s < r.entries[*r.best].measurement.median_s))
      r.best = r.entries.size() - 1;

    if (opts.progress) {
      p.done = static_cast<std::int64_t>(r.entries.size());
      p.measured = r.measured;
      p.reused = r.reused;
      p.elapsed_s = kernels::now_seconds() - t0;
      p.rate = measuring_s > 0 ? static_cast<double>(r.measured) / measuring_s : 0.0;
      p.eta_s = p.rate > 0 ? static_cast<double>(p.total - p.done) / p.rate : -1.0;
      if (opts.budget_seconds > 0 && p.eta_s >= 0)
        p.eta_s = std::min(p.eta_s, std::max(0.0, opts.budget_seconds - p.elapsed_s));
      p.best_median_s.reset();
      if (r.best) p.best_median_s = r.entries[*r.best].measurement.median_s;
      p.last = &last.candidate;
      p.last_measurement = &last.measurement;
      opts.progress(p);
    }
  }
  r.seconds = kernels::now_seconds() - t0;
  return r;
}

namespace {
/// The candidates of one compare() call: one slot per distinct label.
struct Batch {
  std::vector<Candidate> list;
  std::unordered_map<std::string, std::size_t> slot;  // label -> index in list
  bool has(const Candidate& c) const { return slot.count(c.label()) != 0; }
  std::size_t add(const Candidate& c) {
    const auto [it, fresh] = slot.emplace(c.label(), list.size());
    if (fresh) list.push_back(c);
    return it->second;
  }
};

/// A confirmation's order: verified ones fastest side by side first, failed ones last (stable:
/// in the order they were nominated).
void sort_ranking(std::vector<ConfirmEntry>& ranking) {
  std::stable_sort(ranking.begin(), ranking.end(), [](const ConfirmEntry& a, const ConfirmEntry& b) {
    const bool ao = a.measurement.status == MeasureStatus::Ok;
    const bool bo = b.measurement.status == MeasureStatus::Ok;
    if (ao != bo) return ao;
    return ao && a.measurement.median_s < b.measurement.median_s;
  });
}
}  // namespace

Nominated best_entries(const TuneResult& r, const ConfirmOptions& opts) {
  std::vector<std::size_t> ok;
  for (std::size_t i = 0; i < r.entries.size(); ++i)
    if (r.entries[i].measurement.status == MeasureStatus::Ok) ok.push_back(i);
  // Stable: equal medians keep the search's order.
  std::stable_sort(ok.begin(), ok.end(), [&](std::size_t a, std::size_t b) {
    return r.entries[a].measurement.median_s < r.entries[b].measurement.median_s;
  });
  // The fastest entry `always` accepts joins the nominees (one more) when it is not among them.
  const auto accepted = [&](std::size_t i) { return opts.always(r.entries[i].candidate); };
  const auto first = opts.always ? std::find_if(ok.begin(), ok.end(), accepted) : ok.end();
  Nominated n;
  for (std::size_t k = 0; k < std::min(ok.size(), static_cast<std::size_t>(opts.top)); ++k)
    n.ranks.push_back(k + 1);
  if (first != ok.end() && first - ok.begin() >= opts.top) {
    n.ranks.push_back(static_cast<std::size_t>(first - ok.begin()) + 1);
    ok[static_cast<std::size_t>(opts.top)] = *first;
    ok.resize(static_cast<std::size_t>(opts.top) + 1);
  } else if (ok.size() > static_cast<std::size_t>(opts.top)) {
    ok.resize(static_cast<std::size_t>(opts.top));
  }
  n.entries = std::move(ok);
  return n;
}

Confirmation confirm_best(Runner& measurer, const TuneResult& r,
                          const std::vector<Candidate>& references, const ConfirmOptions& opts) {
  WACO_ASSERT(opts.top >= 1 && opts.rounds >= 1, "confirm_best needs top >= 1 and rounds >= 1");
  const double t0 = kernels::now_seconds();
  Confirmation c;
  c.rounds = opts.rounds;
  const Nominated nominated = best_entries(r, opts);
  const std::vector<std::size_t>& ok = nominated.entries;
  const std::vector<std::size_t>& rank = nominated.ranks;

  Batch batch;
  std::vector<std::size_t> nominee_slot, reference_slot;
  for (std::size_t i : ok) nominee_slot.push_back(batch.add(r.entries[i].candidate));
  for (const Candidate& ref : references) reference_slot.push_back(batch.add(ref));
  CompareOptions co;
  co.always_timed.assign(reference_slot.begin(), reference_slot.end());
  co.halving_keep = opts.halving_keep;
  const std::vector<Measurement> ms = measurer.compare(batch.list, opts.rounds, co);

  for (std::size_t k = 0; k < ok.size(); ++k)
    c.ranking.push_back({ok[k], rank[k], ms[nominee_slot[k]]});
  sort_ranking(c.ranking);
  for (std::size_t s : reference_slot) c.references.push_back(ms[s]);
  if (!c.ranking.empty() && c.ranking.front().measurement.status == MeasureStatus::Ok) c.best = 0;
  c.seconds = kernels::now_seconds() - t0;
  return c;
}

RankedConfirmation confirm_ranked(Runner& measurer, const std::vector<Candidate>& ranked,
                                  const std::vector<Candidate>& references,
                                  const ConfirmOptions& opts, double race_factor) {
  WACO_ASSERT(opts.top >= 1 && opts.rounds >= 1, "confirm_ranked needs top >= 1 and rounds >= 1");
  const double t0 = kernels::now_seconds();
  RankedConfirmation out;
  TuneResult& r = out.result;
  Confirmation& c = out.confirmation;
  c.rounds = opts.rounds;
  Batch batch;  // a nominee that is also a reference is measured once
  std::vector<std::size_t> nominee_slot, nominee_rank, reference_slot;
  const std::size_t listed = opts.among.empty() ? ranked.size() : opts.among.size();
  for (std::size_t i = 0; i < listed; ++i) {
    const std::size_t at = opts.among.empty() ? i : opts.among[i];
    WACO_ASSERT(at < ranked.size(), "confirm_ranked: a position past the ranked list");
    const Candidate& cand = ranked[at];
    if (nominee_slot.size() == static_cast<std::size_t>(opts.top)) break;
    if (batch.has(cand)) continue;  // a duplicate in the list
    nominee_slot.push_back(batch.add(cand));
    nominee_rank.push_back(opts.among.empty() ? nominee_slot.size() : at + 1);
  }
  for (const Candidate& ref : references) reference_slot.push_back(batch.add(ref));
  CompareOptions co;
  co.race_factor = race_factor;
  co.always_timed.assign(reference_slot.begin(), reference_slot.end());
  co.halving_keep = opts.halving_keep;
  const std::vector<Measurement> ms =
      nominee_slot.empty() ? std::vector<Measurement>{} : measurer.compare(batch.list, opts.rounds, co);

  for (std::size_t k = 0; k < nominee_slot.size(); ++k) {
    const Measurement& m = ms[nominee_slot[k]];
    r.entries.push_back({batch.list[nominee_slot[k]], m, false});
    ++r.measured;
    ++r.status_counts[m.status];
    if (m.status == MeasureStatus::Ok &&
        (!r.best || m.median_s < r.entries[*r.best].measurement.median_s))
      r.best = k;
    c.ranking.push_back({k, nominee_rank[k], m});
  }
  sort_ranking(c.ranking);
  for (std::size_t s : reference_slot) c.references.push_back(ms.empty() ? Measurement{} : ms[s]);
  if (!c.ranking.empty() && c.ranking.front().measurement.status == MeasureStatus::Ok) c.best = 0;
  c.seconds = r.seconds = kernels::now_seconds() - t0;
  return out;
}

namespace {
/// The per-round ratios a/b of two measurements timed in the same rounds (pairs of the rounds'
/// times); empty when their round counts differ or a round of b is not positive: they are then
/// compared by the ratio of their medians.
std::vector<double> round_ratios(const Measurement& a, const Measurement& b) {
  if (a.seconds.size() != b.seconds.size()) return {};
  std::vector<double> ratios;
  ratios.reserve(a.seconds.size());
  for (std::size_t k = 0; k < a.seconds.size(); ++k) {
    if (b.seconds[k] <= 0) return {};
    ratios.push_back(a.seconds[k] / b.seconds[k]);
  }
  return ratios;
}

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

double marginal_gain_bound(const std::vector<double>& run_ratio_medians,
                           const std::vector<double>& noise_medians) {
  const std::size_t k = run_ratio_medians.size();
  if (k < 2) return std::numeric_limits<double>::infinity();
  // The logarithms' mean and their squared deviations from it.
  const auto squares = [](const std::vector<double>& m, double& mean) {
    mean = 0.0;
    for (const double x : m) mean += std::log(x);
    mean /= static_cast<double>(m.size());
    double ss = 0.0;
    for (const double x : m) ss += (std::log(x) - mean) * (std::log(x) - mean);
    return ss;
  };
  double mean = 0.0, noise_mean = 0.0;
  double ss = squares(run_ratio_medians, mean);
  std::size_t df = k - 1;
  if (noise_medians.size() >= 2) {
    ss += squares(noise_medians, noise_mean);
    df += noise_medians.size() - 1;
  }
  const double sd = std::sqrt(ss / static_cast<double>(df));
  // Student's t, one-sided 95%, by degrees of freedom; beyond the table the normal quantile
  // with its first Cornish-Fisher term (within 0.5% of the table's last entries).
  static constexpr double kT95[] = {6.314, 2.920, 2.353, 2.132, 2.015,
                                    1.943, 1.895, 1.860, 1.833, 1.812};
  const double t = df <= 10 ? kT95[df - 1]
                            : 1.645 * (1.0 + (1.0 + 1.645 * 1.645) / (4.0 * static_cast<double>(df)));
  return std::exp(mean + t * sd / std::sqrt(static_cast<double>(k)));
}

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

std::string disturbed_warning(const Confirmation& c) {
  std::vector<const Measurement*> all;
  for (const ConfirmEntry& e : c.ranking) all.push_back(&e.measurement);
  for (const Measurement& m : c.references) all.push_back(&m);
  return disturbed_warning(all);
}

Disturbance disturbance(const std::vector<const Measurement*>& ms) {
  Disturbance d;
  for (const Measurement* m : ms) {
    if (m->status != MeasureStatus::Ok) continue;
    d.runs += static_cast<std::int64_t>(m->seconds.size());
    if (!m->counters.is_object()) continue;
    d.retaken += m->counters.value("retaken", std::int64_t{0});
    d.kept += m->counters.value("disturbed_kept", std::int64_t{0});
  }
  return d;
}

std::string disturbed_warning(const std::vector<const Measurement*>& ms) {
  const Disturbance d = disturbance(ms);
  if (d.runs == 0 || (d.kept == 0 && d.retaken * 10 < d.runs)) return {};
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "the machine is busy: other processes disturbed %lld timed runs of the side-by-side "
                "measurement (%lld taken again; %lld of the %lld kept runs were disturbed): "
                "multi-threaded timings include waits for descheduled threads; compare only "
                "side-by-side ratios, or use fewer --threads",
                static_cast<long long>(d.retaken + d.kept), static_cast<long long>(d.retaken),
                static_cast<long long>(d.kept), static_cast<long long>(d.runs));
  return buf;
}

std::pair<double, double> median_interval(std::vector<double> values, double level) {
  WACO_ASSERT(!values.empty() && level > 0 && level < 1, "median_interval needs values and 0 < level < 1");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  // The largest l with P(Binomial(n, 1/2) <= l - 1) <= alpha / 2: then x_(l) <= median <=
  // x_(n+1-l) holds with probability at least `level` for any continuous distribution.
  const double alpha_half = (1 - level) / 2;
  const double dn = static_cast<double>(n);
  double tail = 0.0;
  std::size_t l = 0;
  for (std::size_t j = 0; j < n / 2; ++j) {  // after this step tail = P(B <= j)
    const double dj = static_cast<double>(j);  // P(B = j), in logs: no underflow for large n
    tail += std::exp(std::lgamma(dn + 1) - std::lgamma(dj + 1) - std::lgamma(dn - dj + 1) -
                     dn * std::log(2.0));
    if (tail > alpha_half) break;
    l = j + 1;
  }
  if (l == 0) return {values.front(), values.back()};
  return {values[l - 1], values[n - l]};
}

Verdict judge_gain(const Measurement& winner, const Measurement& reference,
                   const DecisionRule& rule, int runs) {
  WACO_ASSERT(winner.status == MeasureStatus::Ok && reference.status == MeasureStatus::Ok,
              "judge_gain needs two verified measurements");
  WACO_ASSERT(runs >= 1, "judge_gain needs runs >= 1");
  Verdict v;
  v.min_gain = rule.min_gain;
  v.level = rule.level;
  std::vector<double> ratios = round_ratios(winner, reference);
  if (ratios.empty()) {
    v.ratio_median = v.ratio_q25 = v.ratio_q75 = winner.median_s / reference.median_s;
    v.ratio_lo = v.ratio_hi = v.ratio_median;
  } else {
    const std::size_t n = ratios.size();
    if (runs > 1) {
      v.run_ratio_medians = run_medians(ratios, runs);
      if (!v.run_ratio_medians.empty()) v.runs = runs;
    }
    const auto [lo, hi] = median_interval(ratios, rule.level);
    std::sort(ratios.begin(), ratios.end());
    v.rounds = static_cast<int>(n);
    v.ratio_median = kernels::quantile(ratios, 0.5);
    v.ratio_q25 = kernels::quantile(ratios, 0.25);
    v.ratio_q75 = kernels::quantile(ratios, 0.75);
    v.spread = (v.ratio_q75 - v.ratio_q25) / 2;
    v.ratio_lo = lo;
    v.ratio_hi = hi;
    for (const double m : v.run_ratio_medians) {
      v.ratio_lo = std::min(v.ratio_lo, m);
      v.ratio_hi = std::max(v.ratio_hi, m);
    }
  }
  // The speedup claimed is the paired one (1 / the median ratio), the point its interval is
  // about: the ratio of the medians can fall outside it when the machine drifts in the rounds.
  v.speedup = 1.0 / v.ratio_median;
  v.speedup_lo = 1.0 / v.ratio_hi;
  v.speedup_hi = 1.0 / v.ratio_lo;
  // Worth reporting in every run, not only pooled: one process can favour a kernel by a few
  // percent for its whole life (A/A runs on the development VM: a run's median ratio of two
  // copies of one kernel has a standard deviation of 1.4-1.6%), and only the runs tell it.
  double worst = v.ratio_median;
  for (const double m : v.run_ratio_medians) worst = std::max(worst, m);
  v.gain = v.rounds > 0 && v.ratio_hi < 1.0 && worst <= 1.0 - rule.min_gain;
  return v;
}

nlohmann::json Verdict::to_json() const {
  return {{"gain", gain},
          {"speedup", speedup},
          {"speedup_lo", speedup_lo},
          {"speedup_hi", speedup_hi},
          {"ratio_median", ratio_median},
          {"ratio_lo", ratio_lo},
          {"ratio_hi", ratio_hi},
          {"ratio_q25", ratio_q25},
          {"ratio_q75", ratio_q75},
          {"spread", spread},
          {"rounds", rounds},
          {"runs", runs},
          {"run_ratio_medians", run_ratio_medians},
          {"min_gain", min_gain},
          {"level", level}};
}

}  // namespace waco::heuristics
