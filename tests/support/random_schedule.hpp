// Random SuperSchedules for property tests (header-only: the tests that use it link
// waco::codegen). Seeded SplitMix64, the same schedules with every standard library.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/dense.hpp"

namespace waco::test {

/// A small seeded PRNG (SplitMix64), portable across standard libraries.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() { return state = kernels::splitmix64(state); }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

struct RandomScheduleOptions {
  /// An unsplit variable is written as an x1/x0 pair (valid only up to canonicalize) with
  /// probability 1 / unit_pair_one_in; 0: never.
  int unit_pair_one_in = 0;
  /// Threads: 0, powers of two up to 8 and up to 500 (else 0..2).
  bool wide_threads = false;
  /// Each C level is N (16-bit coordinates) with probability 1/2 (the draws are made only then,
  /// so the schedules without it stay those of every seed).
  bool narrow = false;
};

/// A random schedule for kernel k: power-of-two splits (mostly up to 128, sometimes up to 2^16),
/// a random order with x1 before x0, random formats (U or C; also N with o.narrow), parallel
/// loop, threads and chunk.
inline codegen::SuperSchedule random_schedule(kernels::KernelKind k, Rng& rng,
                                              const RandomScheduleOptions& o = {}) {
  using codegen::Loop;
  const codegen::KernelSpec& spec = codegen::kernel_spec(k);
  codegen::SuperSchedule s;
  s.kind = k;
  std::vector<Loop> loops;
  for (char v : spec.vars) {
    const int r = rng.below(10);
    const int size = r < 3 ? 1 : 1 << (1 + rng.below(r < 9 ? 7 : 16));
    s.split.push_back(size);
    if (size > 1 || (o.unit_pair_one_in > 0 && rng.below(o.unit_pair_one_in) == 0)) {
      loops.push_back({v, Loop::Part::Outer});
      loops.push_back({v, Loop::Part::Inner});
    } else {
      loops.push_back({v, Loop::Part::Whole});
    }
  }
  for (std::size_t i = loops.size(); i > 1; --i)  // Fisher-Yates
    std::swap(loops[i - 1], loops[static_cast<std::size_t>(rng.below(static_cast<int>(i)))]);
  for (char v : spec.vars) {  // x1 before x0: swap the pair's positions when needed
    auto outer = std::find(loops.begin(), loops.end(), Loop{v, Loop::Part::Outer});
    auto inner = std::find(loops.begin(), loops.end(), Loop{v, Loop::Part::Inner});
    if (outer != loops.end() && inner < outer) std::iter_swap(outer, inner);
  }
  s.order = loops;
  for (std::size_t l = 0; l < s.levels().size(); ++l)
    s.formats.push_back(rng.below(2) ? codegen::LevelFormat::U : codegen::LevelFormat::C);
  if (o.narrow)
    for (codegen::LevelFormat& f : s.formats)
      if (f == codegen::LevelFormat::C && rng.below(2)) f = codegen::LevelFormat::N;
  s.parallel = loops[static_cast<std::size_t>(rng.below(static_cast<int>(loops.size())))];
  if (o.wide_threads) {
    const int t = rng.below(6);
    s.threads = t < 2 ? 0 : (t < 5 ? 1 << rng.below(4) : 1 + rng.below(500));
  } else {
    s.threads = rng.below(3);
  }
  s.chunk = 1 << rng.below(9);
  return s;
}

}  // namespace waco::test
