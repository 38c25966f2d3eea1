// The side-by-side confirmation of a search's best (see tuner.hpp): the nominees and the
// references timed in the same interleaved rounds (best_entries, confirm_best, confirm_ranked).
#include "waco/heuristics/tuner.hpp"

#include <algorithm>
#include <vector>

#include "tuner_internal.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

using detail::Batch;

namespace {

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

}  // namespace waco::heuristics
