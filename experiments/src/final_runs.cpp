// The final side-by-side run of ablate: per-run speedups, agreement, replication (final_runs.hpp).
#include "final_runs.hpp"

#include <algorithm>
#include <cmath>

#include "waco/heuristics/tuner.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {

const char* const kAgreeRule =
    "two consecutive undisturbed runs agree when every configuration's delivered speedup changed "
    "by less than 5% or stayed in its band (below 0.97x, 0.97-1.03x, above 1.03x)";

std::optional<Interval> median_interval(std::vector<double> values, double level) {
  if (values.empty()) return std::nullopt;
  const auto [lo, hi] = heuristics::median_interval(std::move(values), level);  // tune's rule
  return Interval{lo, hi, level};
}

Band band_of(double speedup) {
  if (speedup < kBelowBand) return Band::Below;
  return speedup > kAboveBand ? Band::Above : Band::Tie;
}

const char* band_name(Band b) {
  switch (b) {
    case Band::Below:
      return "below";
    case Band::Tie:
      return "tie";
    case Band::Above:
      return "above";
  }
  return "?";
}

namespace {

/// A result's median when it was timed.
std::optional<double> median_of(const nlohmann::json& results, int index) {
  if (index < 0 || static_cast<std::size_t>(index) >= results.size()) return std::nullopt;
  const nlohmann::json& r = results[static_cast<std::size_t>(index)];
  if (r.contains("error") || !r.contains("median_s") || !r.at("median_s").is_number())
    return std::nullopt;
  const double t = r.at("median_s").get<double>();
  return t > 0 && std::isfinite(t) ? std::optional<double>(t) : std::nullopt;
}

std::vector<double> rounds_of(const nlohmann::json& results, int index) {
  const nlohmann::json& r = results[static_cast<std::size_t>(index)];
  std::vector<double> t;
  if (r.contains("times_s") && r.at("times_s").is_array())
    for (const nlohmann::json& x : r.at("times_s"))
      if (x.is_number()) t.push_back(x.get<double>());
  return t;
}

std::string warning_of(const nlohmann::json& bench) {
  for (const char* key : {"busy_warning", "disturbed_warning"})
    if (bench.contains(key) && bench.at(key).is_string()) return bench.at(key).get<std::string>();
  return {};
}

}  // namespace

namespace {

/// The speedups of every configuration over the reference at `ref` (median `ref_s`).
std::map<std::string, RunSpeedup> speedups_over(const nlohmann::json& results, int ref, double ref_s,
                                                const BenchLayout& layout) {
  std::map<std::string, RunSpeedup> out;
  const std::vector<double> ref_rounds = rounds_of(results, ref);
  for (const auto& [config, index] : layout.configs) {
    const std::optional<double> t = median_of(results, index);
    if (!t) continue;
    RunSpeedup s;
    s.speedup = ref_s / *t;
    const std::vector<double> rounds = rounds_of(results, index);
    if (!rounds.empty() && rounds.size() == ref_rounds.size()) {
      std::vector<double> ratios;
      for (std::size_t k = 0; k < rounds.size(); ++k)
        if (rounds[k] > 0) ratios.push_back(ref_rounds[k] / rounds[k]);
      s.interval = median_interval(ratios);
      if (s.interval) {
        s.interval->lo = std::min(s.interval->lo, s.speedup);
        s.interval->hi = std::max(s.interval->hi, s.speedup);
      }
    }
    out[config] = s;
  }
  return out;
}

}  // namespace

FinalRun final_run_of(const nlohmann::json& bench, const BenchLayout& layout) {
  FinalRun run;
  run.busy_reason = warning_of(bench);
  run.busy = !run.busy_reason.empty();
  if (bench.contains("core_round_trip_ns")) run.core_round_trip_ns = bench.at("core_round_trip_ns");
  const nlohmann::json& results = bench.at("results");
  run.baseline_s = median_of(results, layout.baseline);
  run.schedule_s = median_of(results, layout.schedule);
  if (!run.baseline_s && !run.schedule_s) return run;
  if (run.baseline_s)
    run.over_baseline = speedups_over(results, layout.baseline, *run.baseline_s, layout);
  if (run.schedule_s)
    run.over_schedule = speedups_over(results, layout.schedule, *run.schedule_s, layout);
  run.shortcut = layout.shortcut;
  use_reference(run, run.schedule_s && (!run.baseline_s || *run.schedule_s < *run.baseline_s));
  return run;
}

std::string reference_name(const std::string& shortcut, bool schedule) {
  return shortcut + (schedule ? " schedule" : " baseline");
}

void use_reference(FinalRun& f, bool schedule) {
  if (schedule ? !f.schedule_s : !f.baseline_s) return;  // not timed: the run keeps its own
  f.reference = reference_name(f.shortcut, schedule);
  f.speedups = schedule ? f.over_schedule : f.over_baseline;
}

namespace {

/// The agreement rule of two speedups (kAgreeRule, kPassRule): `later` changed by less than
/// kAgreeChange relative to `earlier`, or stayed in its band.
bool agree(double earlier, double later) {
  return std::abs(later / earlier - 1.0) < kAgreeChange || band_of(earlier) == band_of(later);
}

}  // namespace

std::vector<std::string> disagreeing(const FinalRun& a, const FinalRun& b) {
  std::vector<std::string> out;
  for (const auto& [config, sa] : a.speedups) {
    const auto it = b.speedups.find(config);
    if (it == b.speedups.end()) continue;
    if (!agree(sa.speedup, it->second.speedup)) out.push_back(config);
  }
  return out;  // std::map order: sorted
}

Replication replicate(int max_runs, const std::function<FinalRun(int)>& run) {
  WACO_ASSERT(max_runs >= 2, "the final side-by-side run is replicated at least twice");
  Replication r;
  const FinalRun* previous = nullptr;  // the last undisturbed run
  for (int i = 0; i < max_runs; ++i) {
    r.runs.push_back(run(i));
    previous = nullptr;
    // Pointers into r.runs are taken after the push (it may reallocate).
    for (std::size_t j = r.runs.size() - 1; j-- > 0;)
      if (!r.runs[j].busy) {
        previous = &r.runs[j];
        break;
      }
    const FinalRun& last = r.runs.back();
    if (!last.busy && previous && disagreeing(*previous, last).empty()) break;
  }
  judge(r);  // settled: the run just made agreed with the one before
  return r;
}

void judge(Replication& r) {
  std::vector<const FinalRun*> calm;
  for (const FinalRun& f : r.runs)
    if (!f.busy) calm.push_back(&f);
  r.busy = calm.size() < 2;
  r.undecided.clear();
  r.settled = !r.busy && disagreeing(*calm[calm.size() - 2], *calm.back()).empty();
  if (r.settled) return;
  if (!r.busy) {
    for (const std::string& c : disagreeing(*calm[calm.size() - 2], *calm.back()))
      r.undecided.insert(c);
  } else {
    for (const FinalRun& f : r.runs)
      for (const auto& [config, s] : f.speedups) r.undecided.insert(config);
  }
}

std::vector<std::size_t> runs_used(const Replication& r) {
  std::vector<std::size_t> used;
  for (std::size_t i = 0; i < r.runs.size(); ++i)
    if (!r.runs[i].busy) used.push_back(i);
  if (used.empty())
    for (std::size_t i = 0; i < r.runs.size(); ++i) used.push_back(i);
  return used;
}

std::map<std::string, Delivered> delivered_speedups(const Replication& r) {
  std::map<std::string, Delivered> out;
  for (std::size_t i : runs_used(r))
    for (const auto& [config, s] : r.runs[i].speedups) {
      Delivered& d = out[config];
      const Interval own = s.interval.value_or(Interval{s.speedup, s.speedup, kIntervalLevel});
      d.interval.lo = d.per_run.empty() ? own.lo : std::min(d.interval.lo, own.lo);
      d.interval.hi = d.per_run.empty() ? own.hi : std::max(d.interval.hi, own.hi);
      d.per_run.push_back(s.speedup);
    }
  for (auto& [config, d] : out) {
    std::vector<double> v = d.per_run;
    std::sort(v.begin(), v.end());
    d.speedup = kernels::quantile(v, 0.5);
    d.runs = static_cast<int>(v.size());
    d.decided = !r.busy && !r.undecided.count(config);
    d.interval.lo = std::min(d.interval.lo, d.speedup);
    d.interval.hi = std::max(d.interval.hi, d.speedup);
  }
  return out;
}

const char* const kReferenceRule =
    "every final run's speedups are over one reference, the faster of the csr baseline and the "
    "csr schedule over all of them (the median of their per-run ratio below 1: the schedule)";

std::optional<bool> schedule_faster_over(const std::vector<Replication>& passes) {
  std::vector<double> ratios;
  bool baseline = false, schedule = false;
  for (const Replication& r : passes)
    for (std::size_t i : runs_used(r)) {
      const FinalRun& f = r.runs[i];
      baseline = baseline || f.baseline_s;
      schedule = schedule || f.schedule_s;
      if (f.baseline_s && f.schedule_s) ratios.push_back(*f.schedule_s / *f.baseline_s);
    }
  if (ratios.empty()) {
    if (baseline == schedule) return std::nullopt;  // neither, or never in one run: no choice
    return schedule;
  }
  std::sort(ratios.begin(), ratios.end());
  return kernels::quantile(ratios, 0.5) < 1.0;
}

std::vector<Replication> with_common_reference(std::vector<Replication> passes,
                                               std::optional<bool> schedule) {
  if (!schedule) return passes;
  for (Replication& r : passes) {
    for (FinalRun& f : r.runs) use_reference(f, *schedule);
    judge(r);
  }
  return passes;
}

const char* const kPassRule =
    "a configuration's delivered speedup is the median of the passes' (each the median of its "
    "undisturbed runs); it is decided when every pass decided it and each pass's speedup is "
    "within 5% of that median or in its band";

std::map<std::string, Delivered> delivered_over_passes(const std::vector<Replication>& passes) {
  std::vector<const Replication*> used;
  for (const Replication& r : passes)
    if (!r.busy) used.push_back(&r);
  if (used.empty())
    for (const Replication& r : passes) used.push_back(&r);
  if (used.size() == 1) return delivered_speedups(*used.front());
  std::map<std::string, std::vector<Delivered>> by_config;
  for (const Replication* r : used)
    for (auto& [config, d] : delivered_speedups(*r)) by_config[config].push_back(std::move(d));
  std::map<std::string, Delivered> out;
  for (const auto& [config, each] : by_config) {
    Delivered& d = out[config];
    std::vector<double> speedups;
    d.decided = each.size() == used.size();  // a pass that did not time it cannot agree
    for (const Delivered& p : each) {
      speedups.push_back(p.speedup);
      d.interval.lo = d.per_run.empty() ? p.interval.lo : std::min(d.interval.lo, p.interval.lo);
      d.interval.hi = d.per_run.empty() ? p.interval.hi : std::max(d.interval.hi, p.interval.hi);
      d.per_run.insert(d.per_run.end(), p.per_run.begin(), p.per_run.end());
      d.runs += p.runs;
      d.decided = d.decided && p.decided;
    }
    std::sort(speedups.begin(), speedups.end());
    d.speedup = kernels::quantile(speedups, 0.5);
    for (double s : speedups) d.decided = d.decided && agree(d.speedup, s);
    d.interval.lo = std::min(d.interval.lo, d.speedup);
    d.interval.hi = std::max(d.interval.hi, d.speedup);
  }
  return out;
}

}  // namespace waco::cli
