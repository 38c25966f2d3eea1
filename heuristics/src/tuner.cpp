// The measuring loop of a search: reuse stored results, measure the rest in isolation, record
// each one as it comes (see tuner.hpp).
#include "waco/heuristics/tuner.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

TuneEntry measure_or_reuse(ResultsDb& db, const MeasurementKey& key, Measurer& measurer,
                           const Candidate& c, const TuneOptions& opts) {
  WACO_ASSERT(key.repeats == measurer.options().repeats,
              "the measurement key's repeats differ from the Measurer's");
  TuneEntry e;
  e.candidate = c;
  const int threads = c.effective_threads(measurer.run_threads());
  if (auto stored = db.find_measurement(key, c, threads)) {
    if (stored->measurement.status == MeasureStatus::Ok || !opts.retry_failed) {
      e.measurement = std::move(stored->measurement);
      e.reused = true;
      return e;
    }
  }
  e.measurement = measurer.measure(c);
  db.record_measurement(key, c, e.measurement, opts.context);
  return e;
}

TuneResult run_candidates(ResultsDb& db, const MeasurementKey& key, Measurer& measurer,
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
      if (!stored || (opts.retry_failed && stored->measurement.status != MeasureStatus::Ok)) {
        r.complete = false;
        r.stopped_by = "budget-seconds";
        break;
      }
    }
    const double m0 = kernels::now_seconds();
    TuneEntry e = measure_or_reuse(db, key, measurer, c, opts);
    if (e.reused) {
      ++r.reused;
    } else {
      ++r.measured;
      measuring_s += kernels::now_seconds() - m0;
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

Confirmation confirm_best(Measurer& measurer, const TuneResult& r,
                          const std::vector<Candidate>& references, const ConfirmOptions& opts) {
  WACO_ASSERT(opts.top >= 1 && opts.rounds >= 1, "confirm_best needs top >= 1 and rounds >= 1");
  const double t0 = kernels::now_seconds();
  Confirmation c;
  c.rounds = opts.rounds;
  std::vector<std::size_t> ok;
  for (std::size_t i = 0; i < r.entries.size(); ++i)
    if (r.entries[i].measurement.status == MeasureStatus::Ok) ok.push_back(i);
  // Stable: equal medians keep the search's order.
  std::stable_sort(ok.begin(), ok.end(), [&](std::size_t a, std::size_t b) {
    return r.entries[a].measurement.median_s < r.entries[b].measurement.median_s;
  });
  if (ok.size() > static_cast<std::size_t>(opts.top)) ok.resize(static_cast<std::size_t>(opts.top));

  std::vector<Candidate> batch;
  std::unordered_map<std::string, std::size_t> slot;  // label -> index in batch
  const auto add = [&](const Candidate& cand) {
    const auto [it, fresh] = slot.emplace(cand.label(), batch.size());
    if (fresh) batch.push_back(cand);
    return it->second;
  };
  std::vector<std::size_t> nominee_slot, reference_slot;
  for (std::size_t i : ok) nominee_slot.push_back(add(r.entries[i].candidate));
  for (const Candidate& ref : references) reference_slot.push_back(add(ref));
  const std::vector<Measurement> ms = measurer.compare(batch, opts.rounds);

  for (std::size_t k = 0; k < ok.size(); ++k)
    c.ranking.push_back({ok[k], k + 1, ms[nominee_slot[k]]});
  std::stable_sort(c.ranking.begin(), c.ranking.end(),
                   [](const ConfirmEntry& a, const ConfirmEntry& b) {
                     const bool ao = a.measurement.status == MeasureStatus::Ok;
                     const bool bo = b.measurement.status == MeasureStatus::Ok;
                     if (ao != bo) return ao;
                     return ao && a.measurement.median_s < b.measurement.median_s;
                   });
  for (std::size_t s : reference_slot) c.references.push_back(ms[s]);
  if (!c.ranking.empty() && c.ranking.front().measurement.status == MeasureStatus::Ok) c.best = 0;
  c.seconds = kernels::now_seconds() - t0;
  return c;
}

}  // namespace waco::heuristics
