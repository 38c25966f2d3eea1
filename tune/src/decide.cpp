// The decision of a tune (pipeline.hpp): the verdict from the side-by-side and fresh runs.
#include <cstdio>

#include "pipeline.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::tuning::detail {

namespace {

/// The faster csr reference of a side-by-side run (`refs`: the csr schedule's and the
/// baseline's timings over `runs` runs) by the paired per-round ratios, as the verdict judges
/// (the medians of the times can disagree with them when the machine drifts within the rounds):
/// sets d.confirm_csr, d.confirm_base, d.references_judged and d.verdict_reference; returns the
/// faster one's timing (null when neither ran).
const Measurement* faster_reference(Decision& d, const std::vector<Measurement>& refs, int runs,
                                    const std::string& shortcut, const DecisionRule& rule) {
  d.confirm_csr = refs[0];
  d.confirm_base = refs[1];
  const bool csr_ok = d.confirm_csr->status == MeasureStatus::Ok;
  const bool base_ok = d.confirm_base->status == MeasureStatus::Ok;
  if (csr_ok && base_ok)
    d.references_judged = judge_gain(*d.confirm_csr, *d.confirm_base, rule, runs);
  if (csr_ok && (!d.references_judged || d.references_judged->ratio_median <= 1.0)) {
    d.verdict_reference = shortcut + " schedule";
    return &*d.confirm_csr;
  }
  if (!base_ok) return nullptr;
  d.verdict_reference = shortcut + " baseline";
  d.baseline_reference = true;
  return &*d.confirm_base;
}

/// The result without a gain: the baseline (a baseline a plan can serve:
/// codegen::bind_baseline) unless the csr schedule ran faster by the rule's interval (a tie goes
/// to the baseline: the csr schedule ran slower than it in 127 of 300 A/A tunes and faster in 68,
/// scripts/bench_verdict.sh, and needs no compiled kernel), else the csr schedule when it ran.
void reference_result(Decision& d, const Measurement* ref, const TuneEntry& csr_schedule,
                      const TuneEntry& csr_baseline) {
  const bool schedule_faster = ref && ref == &*d.confirm_csr &&
                               (!d.references_judged || d.references_judged->ratio_hi < 1.0);
  if (!schedule_faster && d.confirm_base && d.confirm_base->status == MeasureStatus::Ok &&
      codegen::servable_baseline(csr_baseline.candidate.implementation)) {
    d.best = &csr_baseline;
    d.best_side = &*d.confirm_base;
  } else if (d.confirm_csr && d.confirm_csr->status == MeasureStatus::Ok) {
    d.best = &csr_schedule;
    d.best_side = &*d.confirm_csr;
  }
}

}  // namespace

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
      if (const auto fb = m.fresh->best()) {
        runs = m.fresh->runs;
        refs = &m.fresh->references_of(*fb);  // timed beside it, round by round
        d.winner = &m.confirmation->ranking[m.fresh->leaders[*fb]];
        d.best = &r.entries[d.winner->entry];
        d.best_side = &m.fresh->leader_ms[*fb];
      } else {  // every leader failed a fresh run (e.g. a wrong result on another allocation)
        runs = m.fresh->children;  // the references' rounds of every child
        refs = &m.fresh->references;
        d.best_side = nullptr;
      }
    }
    const Measurement* ref = faster_reference(d, *refs, runs, shortcut, rule);
    if (!ref) {
      d.verdict = "no-reference";
    } else if (!d.best_side) {
      d.verdict = "no-gain";
    } else {
      // The fastest of several leaders is judged on the rounds that found it the fastest: the
      // interval's level is raised for their number (Bonferroni), so that k equal kernels report
      // a gain no more often than one does.
      DecisionRule judged_rule = rule;
      if (d.fresh && m.fresh->leaders.size() > 1)
        judged_rule.level = 1.0 - (1.0 - rule.level) / static_cast<double>(m.fresh->leaders.size());
      d.judged = judge_gain(*d.best_side, *ref, judged_rule, runs);
      d.verdict = d.judged->gain ? "gain" : "no-gain";
      if (d.judged->gain && d.fresh && m.fresh->disturbed_share > rule.max_disturbed)
        d.verdict = "undecided";
    }
    // Without a gain the result is a reference: the hand-written baseline unless the csr
    // schedule ran faster than it by the rule's interval (reference_result).
    if (d.verdict != "gain" && d.verdict != "no-reference")
      reference_result(d, ref, csr_schedule, csr_baseline);
  }
  if (not_worth_it && csr_schedule.measurement.status == MeasureStatus::Ok) {
    d.verdict = "not-worth-it";
    d.best = &csr_schedule;
  }
  if (!r.best && r.stopped_by != "interrupted" && !r.entries.empty() &&
      csr_schedule.measurement.status == MeasureStatus::Ok) {
    d.verdict = "no-gain";
    d.best = &csr_schedule;
    // No candidate completed its timing, but a side-by-side run timed the references beside
    // them (every nominee abandoned or failed): the faster of the two, as above.
    if (m.confirmation && !d.confirmed && m.confirmation->references.size() == 2)
      reference_result(d, faster_reference(d, m.confirmation->references, 1, shortcut, rule),
                       csr_schedule, csr_baseline);
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
  // (The best's times only when it is not the csr schedule itself: a no-gain's result.)
  char best[96] = "";
  if (d.best != &csr_schedule)
    std::snprintf(best, sizeof best, ", the best %s and %s",
                  format_seconds(d.best->measurement.median_s).c_str(),
                  format_seconds(d.best_side->median_s).c_str());
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "timings are unstable: the %s schedule took %s in the search and %s side by "
                "side%s (a loaded machine? only the side-by-side ratios are comparable; try "
                "--threads 1 or more --confirm-rounds)",
                shortcut.c_str(), format_seconds(csr_schedule.measurement.median_s).c_str(),
                format_seconds(d.confirm_csr->median_s).c_str(), best);
  obs.warning(buf);
  return buf;
}


}  // namespace waco::tuning::detail
