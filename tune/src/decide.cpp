// The decision of a tune (pipeline.hpp): the verdict from the side-by-side and fresh runs.
#include <cstdio>

#include "pipeline.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::tuning::detail {

Decision decide(const Measured& m, const TuneEntry& csr_schedule, const TuneEntry& csr_baseline,
                const std::string& shortcut, bool not_worth_it, const DecisionRule& rule) {
  const TuneResult& r = m.result;
  Decision d;
  d.confirmed = m.confirmation && m.confirmation->best.has_value();
  d.search_best = r.best ? &r.entries[*r.best] : nullptr;
  d.winner = d.confirmed ? &m.confirmation->ranking[*m.confirmation->best] : nullptr;
  d.best = d.winner ? &r.entries[d.winner->entry] : d.search_best;
  d.best_side = d.winner ? &d.winner->measurement : nullptr;
  if (d.confirmed) {
    int runs = 1;
    const std::vector<Measurement>* refs = &m.confirmation->references;
    d.fresh = m.fresh && m.fresh->runs > 0;
    if (d.fresh) {
      runs = m.fresh->runs;
      refs = &m.fresh->references;
      if (const auto fb = m.fresh->best()) {
        d.winner = &m.confirmation->ranking[m.fresh->leaders[*fb]];
        d.best = &r.entries[d.winner->entry];
        d.best_side = &m.fresh->leader_ms[*fb];
      } else {  // every leader failed a fresh run (e.g. a wrong result on another allocation)
        d.best_side = nullptr;
      }
    }
    d.confirm_csr = (*refs)[0];
    d.confirm_base = (*refs)[1];
    // The faster reference by the paired per-round ratios, as the verdict judges (the medians
    // of the times can disagree with them when the machine drifts within the rounds).
    const Measurement* ref = nullptr;
    if (d.confirm_csr->status == MeasureStatus::Ok && d.confirm_base->status == MeasureStatus::Ok)
      d.references_judged = judge_gain(*d.confirm_csr, *d.confirm_base, rule, runs);
    if (d.confirm_csr->status == MeasureStatus::Ok &&
        (!d.references_judged || d.references_judged->ratio_median <= 1.0)) {
      ref = &*d.confirm_csr;
      d.verdict_reference = shortcut + " schedule";
    } else if (d.confirm_base->status == MeasureStatus::Ok) {
      ref = &*d.confirm_base;
      d.verdict_reference = shortcut + " baseline";
    }
    if (!ref) {
      d.verdict = "no-reference";
    } else if (!d.best_side) {
      d.verdict = "no-gain";
    } else {
      d.judged = judge_gain(*d.best_side, *ref, rule, runs);
      d.verdict = d.judged->gain ? "gain" : "no-gain";
      if (d.judged->gain && d.fresh && m.fresh->disturbed_share > rule.max_disturbed)
        d.verdict = "undecided";
    }
    // Without a gain the result is the faster reference: the hand-written baseline when it ran
    // faster than the csr schedule (by the median of the paired ratios) and a plan can serve it
    // (codegen::bind_baseline), else the csr schedule.
    if (d.verdict != "gain" && d.verdict != "no-reference") {
      if (ref == &*d.confirm_base &&
          codegen::servable_baseline(csr_baseline.candidate.implementation)) {
        d.best = &csr_baseline;
        d.best_side = &*d.confirm_base;
      } else if (d.confirm_csr->status == MeasureStatus::Ok) {
        d.best = &csr_schedule;
        d.best_side = &*d.confirm_csr;
      }
    }
  }
  if (not_worth_it && csr_schedule.measurement.status == MeasureStatus::Ok) {
    d.verdict = "not-worth-it";
    d.best = &csr_schedule;
  }
  if (!r.best && r.stopped_by != "interrupted" && !r.entries.empty() &&
      csr_schedule.measurement.status == MeasureStatus::Ok) {
    d.verdict = "no-gain";
    d.best = &csr_schedule;
  }
  return d;
}


std::string noise_warning(const Decision& d, const TuneEntry& csr_schedule,
                          const std::string& shortcut, TuneObserver& obs) {
  if (!d.confirmed || d.confirm_csr->status != MeasureStatus::Ok ||
      csr_schedule.measurement.status != MeasureStatus::Ok || !d.best || !d.best_side ||
      d.best->measurement.status != MeasureStatus::Ok)
    return {};
  const double drift = d.confirm_csr->median_s / csr_schedule.measurement.median_s;
  const double best_drift = d.best_side->median_s / d.best->measurement.median_s;
  if (drift <= 1.5 && drift >= 1 / 1.5 && best_drift <= 1.5 && best_drift >= 1 / 1.5) return {};
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "timings are unstable: the %s schedule took %s in the search and %s side by "
                "side, the best %s and %s (a loaded machine? only the side-by-side ratios "
                "are comparable; try --threads 1 or more --confirm-rounds)",
                shortcut.c_str(), format_seconds(csr_schedule.measurement.median_s).c_str(),
                format_seconds(d.confirm_csr->median_s).c_str(),
                format_seconds(d.best->measurement.median_s).c_str(),
                format_seconds(d.best_side->median_s).c_str());
  obs.warning(buf);
  return buf;
}


}  // namespace waco::tuning::detail
