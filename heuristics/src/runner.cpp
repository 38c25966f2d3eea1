// make_runner (runner.hpp): the Runner a spec names.
#include "waco/heuristics/runner.hpp"

#include <algorithm>
#include <cstdio>

#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/scripted_runner.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

std::unique_ptr<Runner> make_runner(const std::string& spec, const kernels::Problem& p,
                                    const kernels::Reference* ref, MeasureOptions opts) {
  if (spec.empty() || spec == "isolated")
    return ref != nullptr ? std::make_unique<Measurer>(p, *ref, std::move(opts))
                          : std::make_unique<Measurer>(p, std::move(opts));
  const std::string scripted = "scripted:";
  if (spec.compare(0, scripted.size(), scripted) == 0)
    return std::make_unique<ScriptedRunner>(RunnerScript::load(spec.substr(scripted.size())),
                                            std::move(opts));
  throw kernels::Error("unknown runner '" + spec + "'",
                       "'isolated' (the default: measured in child processes) or scripted:FILE");
}

std::vector<HalvingDrop> halving_drops(int done, int rounds, int keep, std::size_t reference,
                                       const std::vector<std::vector<double>>& samples,
                                       const std::vector<char>& halved) {
  if (keep <= 0 || rounds < 8 || done <= 0 || done >= rounds || (4 * done) % rounds != 0)
    return {};
  const auto runs_all = [&](std::size_t i) {
    return static_cast<int>(samples[i].size()) == done;
  };
  if (reference >= samples.size() || !runs_all(reference)) return {};
  const std::vector<double>& ref = samples[reference];
  if (std::any_of(ref.begin(), ref.end(), [](double t) { return t <= 0; })) return {};
  std::vector<std::pair<double, std::size_t>> ranked;  // (median ratio, candidate)
  for (std::size_t i = 0; i < samples.size() && i < halved.size(); ++i) {
    if (!halved[i] || i == reference || !runs_all(i)) continue;
    std::vector<double> ratios(static_cast<std::size_t>(done));
    for (std::size_t k = 0; k < ratios.size(); ++k) ratios[k] = samples[i][k] / ref[k];
    ranked.emplace_back(kernels::median(std::move(ratios)), i);
  }
  const std::size_t kept = std::max(static_cast<std::size_t>(keep), (ranked.size() + 1) / 2);
  if (ranked.size() <= kept) return {};
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const double kept_ratio = ranked[kept - 1].first;
  std::vector<HalvingDrop> drops;
  for (std::size_t k = kept; k < ranked.size(); ++k)
    if (ranked[k].first > kept_ratio)  // a tie with the slowest kept stays
      drops.push_back({ranked[k].second, done, ranked[k].first, kept_ratio});
  return drops;
}

namespace {
// What SuccessiveHalving::mark's reason says, and was_halved looks for (the fresh runs' dropped
// leaders are Abandoned with a reason that begins "dropped after " too).
constexpr const char* kHalvedReason = "dropped after ";
constexpr const char* kHalvedTag = " rounds (successive halving): ";
}  // namespace

SuccessiveHalving::SuccessiveHalving(const std::vector<Candidate>& cs, const std::vector<char>& keep,
                                     const std::vector<char>& timed, int keep_n, int rounds)
    : keep_n_(keep_n), rounds_(rounds), halved_(cs.size(), 0), dropped_(cs.size()) {
  const auto reference = std::find(keep.begin(), keep.end(), char{1});
  reference_ = static_cast<std::size_t>(reference - keep.begin());
  on_ = keep_n > 0 && reference != keep.end() && timed.at(reference_);
  for (std::size_t i = 0; i < cs.size(); ++i)
    halved_[i] = timed.at(i) && cs[i].is_generated() && !keep.at(i);
}

std::vector<std::size_t> SuccessiveHalving::after_round(
    int done, const std::vector<std::vector<double>>& samples) {
  std::vector<std::size_t> stop;
  if (!on_) return stop;
  for (const HalvingDrop& d : halving_drops(done, rounds_, keep_n_, reference_, samples, halved_)) {
    dropped_[d.index] = d;
    stop.push_back(d.index);
  }
  return stop;
}

void SuccessiveHalving::mark(std::size_t i, Measurement& m) const {
  const std::optional<HalvingDrop>& d = dropped_.at(i);
  if (!d) return;
  m.status = MeasureStatus::Abandoned;
  char buf[240];
  std::snprintf(buf, sizeof buf,
                "%s%d of %d%sits median ratio to the reference %.3f, the slowest kept %.3f",
                kHalvedReason, d->after_rounds, rounds_, kHalvedTag, d->ratio, d->kept_ratio);
  m.reason = buf;
}

bool was_halved(const Measurement& m) {
  return m.status == MeasureStatus::Abandoned && m.reason.rfind(kHalvedReason, 0) == 0 &&
         m.reason.find(kHalvedTag) != std::string::npos;
}

}  // namespace waco::heuristics
