// A measured tune's gain checked where the kernel runs: the chosen kernel against csr in the
// calling process, in blocks of consecutive calls (tune/README.md, "The gain in the caller's
// process"). The measuring processes decide a tune's verdict on fresh rounds in fresh children;
// a user's process can see the same two kernels differently (session 77: -24% to +57% on the
// gains of the SpMV ablation). libwaco runs this check on a measured plan before tune() returns,
// so that Plan::speedup() is the figure of the process that calls the kernel, and a gain that
// does not hold there serves csr. The rule is the adaptive plan's recheck (adaptive.hpp, step 4).
#pragma once

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

namespace waco::tuning {

struct InProcessOptions {
  int rounds = 12;          ///< block pairs (the chosen kernel's, csr's) of one check
  /// Operand placements the rounds go round (round r runs both blocks on placement r %
  /// placements): where the dense operands lie can change a kernel's speed (SpMM on G51,
  /// csr: 29-66 us by where B and C were allocated), so a check on one allocation speaks for
  /// that one only.
  int placements = 1;
  double block_s = 2e-3;    ///< a block is as many calls as take this long on csr ...
  int block_calls = 4;      ///< ... and at least this many
  int warm = 1;             ///< calls at the start of each block that are no samples
  int max_block_calls = 1 << 16;
  /// Fewer rounds (down to min_rounds) when a check of `rounds` would take longer than this
  /// (long calls: a 20M-nonzero SpMV's csr call takes ~30 ms).
  double max_check_s = 1.0;
  int min_rounds = 4;
  /// What the calls are timed with (a scripted clock in tests).
  std::function<double()> clock;
};

/// What the check measured. Each round's ratio is the chosen kernel's block median over csr's.
struct InProcessCheck {
  std::vector<double> ratios;  ///< every round's, of every check, in order
  int checks = 0;              ///< 1, or 2 when the first was not below 1
  int placements = 1;
  int block_calls = 0;
  double csr_call_s = 0.0;     ///< csr's median call in the blocks
  double seconds = 0.0;        ///< the check's wall time, calls and clock included
  std::int64_t calls = 0;      ///< kernel calls made (both kernels, the estimate's included)
  /// The gain holds here: the first check's median ratio is below 1, or a second check follows
  /// and the two checks' ratios pooled are.
  bool held = false;

  /// 1 / the median ratio (of every round of every check).
  double speedup() const;
  nlohmann::json to_json() const;
};

/// One call of a kernel on the operands of placement `p` (0 <= p < placements).
using PlacedCall = std::function<void(int p)>;

/// Times `chosen` and `csr` alternately in blocks: csr's call time is estimated first from
/// calls totalling ~block_s (placement 0), then `rounds` pairs of blocks, both of a round on
/// one placement, which kernel goes first alternating; a second check of as many rounds
/// when the first's median ratio is not below 1.
InProcessCheck check_in_process(const PlacedCall& chosen, const PlacedCall& csr,
                                const InProcessOptions& o = {});

}  // namespace waco::tuning
