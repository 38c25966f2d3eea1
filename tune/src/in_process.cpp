// A measured tune's gain checked in the calling process (in_process.hpp).
#include "waco/tune/in_process.hpp"

#include <algorithm>
#include <cmath>

#include "waco/kernels/timing.hpp"

namespace waco::tuning {

double InProcessCheck::speedup() const {
  const double m = kernels::median(ratios);
  return m > 0 ? 1.0 / m : 1.0;
}

nlohmann::json InProcessCheck::to_json() const {
  std::vector<double> sorted(ratios);
  std::sort(sorted.begin(), sorted.end());
  const auto q = [&](double p) { return sorted.empty() ? 1.0 : kernels::quantile(sorted, p); };
  return {{"held", held},
          {"speedup", speedup()},
          {"ratio_median", q(0.5)},
          {"ratio_q25", q(0.25)},
          {"ratio_q75", q(0.75)},
          {"rounds", ratios.size()},
          {"checks", checks},
          {"placements", placements},
          {"block_calls", block_calls},
          {"csr_call_s", csr_call_s},
          {"calls", calls},
          {"seconds", seconds}};
}

InProcessCheck check_in_process(const PlacedCall& chosen, const PlacedCall& csr,
                                const InProcessOptions& o) {
  const std::function<double()> clock = o.clock ? o.clock : [] { return kernels::now_seconds(); };
  InProcessCheck c;
  c.placements = std::max(1, o.placements);
  const double t0 = clock();
  // csr's call time: calls until they total block_s (at least two; the first warms).
  csr(0);
  int n = 0;
  const double e0 = clock();
  double e = e0;
  while (n < 2 || (e - e0 < o.block_s && n < o.max_block_calls)) {
    csr(0);
    ++n;
    e = clock();
  }
  c.calls = n + 1;
  const double per = (e - e0) / n;
  const int fit = per > 0 ? static_cast<int>(std::min<double>(o.max_block_calls, std::ceil(o.block_s / per)))
                          : o.max_block_calls;
  c.block_calls = std::max({o.block_calls, o.warm + 1, fit});
  const double pair_s = 2.0 * c.block_calls * per;
  const int rounds = pair_s > 0 ? std::clamp(static_cast<int>(o.max_check_s / pair_s),
                                             std::min(o.min_rounds, o.rounds), o.rounds)
                                : o.rounds;
  std::vector<double> csr_blocks;
  const auto block = [&](const PlacedCall& f, int p) {
    std::vector<double> s;
    s.reserve(static_cast<std::size_t>(c.block_calls));
    for (int i = 0; i < c.block_calls; ++i) {
      const double a = clock();
      f(p);
      const double b = clock();
      if (i >= o.warm) s.push_back(b - a);
    }
    c.calls += c.block_calls;
    return kernels::median(std::move(s));
  };
  const auto one_check = [&] {
    std::vector<double> r;
    for (int round = 0; round < rounds; ++round) {
      double mine = 0, theirs = 0;
      // Each placement's turns alternate which kernel goes first, and so do consecutive rounds.
      const int p = round % c.placements;
      if ((round / c.placements + p) % 2 == 0) {
        mine = block(chosen, p);
        theirs = block(csr, p);
      } else {
        theirs = block(csr, p);
        mine = block(chosen, p);
      }
      csr_blocks.push_back(theirs);
      if (theirs > 0) r.push_back(mine / theirs);
    }
    c.ratios.insert(c.ratios.end(), r.begin(), r.end());
    ++c.checks;
    return r.empty() ? 1.0 : kernels::median(r);
  };
  c.held = one_check() < 1.0;
  if (!c.held) {  // a doubt: a second check, decided on the two pooled
    one_check();
    c.held = kernels::median(c.ratios) < 1.0;
  }
  c.csr_call_s = kernels::median(csr_blocks);
  c.seconds = clock() - t0;
  return c;
}

}  // namespace waco::tuning
