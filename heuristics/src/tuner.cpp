// The measuring loop of a search: reuse stored results, measure the rest in isolation, record
// each one as it comes (see tuner.hpp).
#include "waco/heuristics/tuner.hpp"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

namespace {

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

}  // namespace waco::heuristics
