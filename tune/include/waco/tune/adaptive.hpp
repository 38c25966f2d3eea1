// The adaptive plan's policy: which of csr and a few verified nominees serves the caller's next
// call, from the timings of the calls so far, and when to settle (tune/README.md, "Adaptive
// plans"). Pure bookkeeping: it runs no kernel and reads no clock, so that a scripted sequence of
// timings tests it (tests/test_adaptive.cpp); AdaptiveRun (adaptive_run.hpp) drives it with real calls.
//
// The shape of one exploration, for nominees 1..m (arm 0 is csr, the fallback):
//  1. verification: a nominee's first call runs it beside csr on the caller's input; csr's result
//     is returned, the nominee's compared with it; a mismatch drops the nominee for good;
//  2. rungs of successive halving: every live nominee serves `rung_calls x 2^r` timed calls of
//     rung r, one nominee's block after the other (a rotation of several kernels slowed some of
//     them 2-3x), each block after `nominee_warmup` calls that are no samples; each timed call
//     paired with the csr call before it (csr serves every other turn: it costs nothing over
//     not tuning). Once csr's calls take `warm_above_s` or more, each timed call follows
//     `warm_calls` untimed ones of the same arm, so that a kernel is timed with its own data in
//     the caches, as the caller's repeated calls of the chosen one will find it (formats that do
//     not fit in the caches together were each timed cold, unlike their steady state). After a
//     rung, the better half by median ratio to csr goes on, and a nominee whose median ratio is
//     above 1 + `drop_above` leaves at once;
//  3. judgment: the last nominee and csr on `judge_rounds` fresh pairs, not the ones that
//     selected it, judged by heuristics::judge_gain (the rule of `waco-hybrid tune`): a gain
//     settles on the nominee, anything else on csr.
//  4. rechecks of a gain: after settling on a nominee, the plan judges it again on the caller's
//     calls, as the caller runs it (blocks of consecutive calls of one kernel, csr's and the
//     chosen one's alternating, each block's first calls no samples): after `recheck_first`
//     calls served by it, then after `recheck_growth` times as many each time. A recheck whose
//     median block ratio to csr is not below 1 is followed by another at once; when the two
//     together are not below 1 either, the plan goes back to csr ("no-gain": the gain judged on
//     exploration's single alternating calls did not hold where the calls run). Once a recheck
//     holds, the speedup reported is the rechecks' (their block ratios pooled), measured as the
//     caller runs the kernel, not the judgment's.
// Exploration costs the time nominees take beyond csr's, the verification runs and what the
// caller reports (format conversion, compilation); when it would exceed the budget (a share of
// the expected calls' csr time, or with no expected calls of the calls served so far) the plan
// serves csr and waits, or with expected calls settles on csr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/heuristics/tuner.hpp"

namespace waco::tuning {

struct AdaptiveOptions {
  int rung_calls = 4;       ///< calls of each live nominee in the first rung
  int judge_rounds = 16;    ///< fresh csr/nominee pairs that decide
  double drop_above = 0.10; ///< a nominee whose median ratio to csr exceeds 1.10 leaves after a rung
  /// A nominee whose two fastest calls so far each took more than this many csr calls leaves at
  /// once (as tune --abandon-factor): a slow one costs the caller every call it serves.
  double abandon_factor = 3.0;
  /// Untimed calls of the same arm before each timed call of a pair, once csr's median call
  /// takes at least warm_above_s (smaller kernels' data stay in the caches between calls).
  int warm_calls = 1;
  double warm_above_s = 20e-6;
  /// Each block of a nominee's calls (its calls of a rung, or of the judgment) starts with this
  /// many calls that are no samples: a kernel that has not run for a while runs 2-4x slower for
  /// several calls (ca-HepTh: 15 us steady, 40-55 us on the first call of a block, decaying over
  /// ~6-8 calls, csr's calls between them or not).
  int nominee_warmup = 6;
  /// Calls the caller expects to make (0: unknown). Exploration may cost `share` of their csr
  /// time; with none, `share` of the calls served so far.
  std::int64_t expected_calls = 0;
  double share = 0.1;
  heuristics::DecisionRule rule;
  /// Rechecks of a settled gain (step 4 above; false: none). Each costs its csr calls beyond the
  /// chosen kernel's, `recheck_rounds` x a block's calls, and begins no sooner than ten times its
  /// own calls after the last.
  bool recheck = true;
  std::int64_t recheck_first = 1000;  ///< calls served by the chosen kernel before the first
  int recheck_growth = 4;             ///< the next one after this many times as many calls
  int recheck_rounds = 8;             ///< block pairs (csr's, the chosen kernel's) a recheck
  /// A block is `recheck_block_calls` calls, or more when csr's calls are short: as many as
  /// take `recheck_block_s` of csr time; its first `recheck_warm` calls are no samples.
  int recheck_block_calls = 6;
  double recheck_block_s = 50e-6;
  int recheck_warm = 2;
};

/// Where exploration's cost goes (to_json's "cost_breakdown"): the work charged beside the calls,
/// by kind. The nominees' calls beyond csr's are kept apart, by phase (selection, judgment).
enum class Cost { Choice, Format, Load, Compile, Verify, Overhead, Other };

class AdaptivePolicy {
 public:
  /// What serves one call: `arm` (0: csr), and for a verification call the nominee `verify`
  /// that runs beside csr (whose result is returned).
  struct Step {
    int arm = 0;
    int verify = 0;  ///< a nominee to verify on this call (arm is then 0), else 0
    bool warm = false;  ///< a call that warms the caches for the arm's timed call after it
    /// csr's call while the verification waits for a nominee that is not ready (its format or
    /// kernel still coming): the call has nothing to explore.
    bool waiting = false;
  };

  AdaptivePolicy(int nominees, AdaptiveOptions options);

  /// Nominee k (1-based) is prepared: its format built, its kernel loaded. Until then (or
  /// failed()) the verification phase waits for it, csr serving the calls.
  void ready(int nominee);
  /// The next call's step. Calls may overlap: a verification is handed out once; every other
  /// step may be given to several calls in flight, each recorded when it ends.
  Step next();
  /// A call of `arm` took `seconds` (its kernel alone; a verification call records csr's time
  /// here and the nominee's through verified()); `warm`: the step said so (a nominee's warm
  /// call costs what it takes beyond csr, and is no sample).
  void record(int arm, double seconds, bool warm = false);
  /// The verification of `nominee`: it matched csr (its run took `seconds`, charged as cost and
  /// not timed: a first run pays for cold caches), or not (`reason`), and it leaves;
  /// `check_seconds`, copying and comparing beside it, is charged too. Both are spent either
  /// way, as a preparation step's overrun (overran): a verification does not stop the plan
  /// from timing what it verified. Without this, a nominee prepared within the budget and
  /// verified could be left untimed, the plan settling not-worth-it on the verification's cost
  /// (SpMM n=64, jagmesh7, 2,000 expected calls on the AMD EPYC Zen 5 VM: a 0.7-1.0 ms
  /// verification, mostly the fresh pages of its 291 KB output, after a 2.5-3.0 ms choice, of a
  /// 4.3 ms budget; the nominee ran 2.2-2.5x csr's speed in other runs).
  void verified(int nominee, bool ok, double seconds, const std::string& reason = {},
                double check_seconds = 0.0);
  /// A nominee that could not be prepared (its format refused, its kernel not compiled): it leaves.
  void failed(int nominee, const std::string& reason);
  /// The caller cannot afford what is left to prepare within the expected calls: settles on csr
  /// ("not-worth-it").
  void not_worth_it(const std::string& why);
  /// Settles on csr as "no-gain" without exploring: a decision made before (the tuning cache's).
  void no_gain(const std::string& why);
  /// `n` calls served by csr untimed, while the plan waited for the calls to pay for its next
  /// step (calls_until_affordable): they count as calls, raising the budget, and cost nothing.
  void skip(std::int64_t n);
  /// With no expected calls: how many more calls the budget must grow by before `more` seconds
  /// of work beyond the cost so far fit in it (0 when they fit now, or with expected calls,
  /// whose budget does not grow).
  std::int64_t calls_until_affordable(double more) const;
  /// How many calls csr serves untimed before the plan looks at its budget again, with `more`
  /// seconds of work to come: none when they fit now; else until they do
  /// (calls_until_affordable) and, with no expected calls, long enough that the next look,
  /// taken to cost `look_s` (its lock, clock and policy: charged as overhead), spends at most a
  /// tenth of what the calls add to the budget (else, on a matrix whose csr calls take a
  /// fraction of a microsecond, the looks spend it all).
  std::int64_t calls_to_wait(double more, double look_s) const;
  /// Tuning work beside the calls (choosing, converting, compiling), charged to the budget as
  /// `kind`; `what` goes to the events (none: charged silently, e.g. the per-call overhead).
  void charge(double seconds, const std::string& what, Cost kind = Cost::Other);
  /// Seconds charged as `kind` so far.
  double charged(Cost kind) const { return charged_[static_cast<int>(kind)]; }
  /// A preparation step admitted on an estimate of `estimate` seconds cost `seconds` (charged
  /// already). What it cost beyond its estimate is spent either way: it does not stop the plan
  /// from trying what it prepared (exploring stops when the rest of the cost is over the
  /// budget), while preparing more still counts it. Without this, a choice that took longer
  /// than estimated could leave a prepared nominee untried: the plan settled on csr having
  /// paid for it (SpMM n=64 on a 6k-nonzero matrix, 2,000 expected calls: 4.42 ms of a 4.35 ms
  /// budget, then csr, where a 1.6x kernel was found by the hybrid tune).
  void overran(double estimate, double seconds);

  /// Once settled on a gain: how many calls the chosen kernel serves (without the policy)
  /// before the next recheck; 0 when none is to come (csr serves, rechecks are off, or one runs).
  std::int64_t recheck_in() const;
  /// A recheck begins: next() hands out its calls (csr's and the chosen kernel's blocks), the
  /// plan staying settled on its choice until the recheck decides. Asked when recheck_in() > 0;
  /// `served`: the calls the chosen kernel served without the policy so far (the report counts
  /// them in each recheck's "at_call").
  void start_recheck(std::int64_t served);
  /// Whether a recheck runs (settled() stays true meanwhile).
  bool rechecking() const { return phase_ == Phase::Recheck; }
  /// Whether a recheck took the plan back from a gain to csr.
  bool reverted() const { return reverted_; }

  bool settled() const { return settled_; }
  /// The arm serving calls once settled (0: csr); while exploring, the best so far.
  int choice() const;
  /// "exploring", or once settled "gain", "no-gain" (no nominee beat csr), "not-worth-it" (the
  /// budget ran out first).
  std::string verdict() const;
  /// Whether a finalist was judged against csr (a decision on side-by-side calls).
  bool judged() const { return judged_.has_value(); }
  /// The speedup over csr (1 for csr; nullopt before a judgment or without one): the rechecks'
  /// once one held (1 / the median of their pooled block ratios), else the judgment's.
  std::optional<double> speedup() const;
  /// Whether speedup() is the rechecks' figure (a recheck held), not the judgment's.
  bool speedup_from_rechecks() const { return verdict_ == "gain" && !held_ratios_.empty(); }
  std::int64_t calls() const { return calls_; }
  /// Calls that ran a nominee or a verification (the exploring ones).
  std::int64_t exploring_calls() const { return exploring_calls_; }
  /// Seconds the exploration cost beyond serving every call with csr (negative: it gained).
  double cost_seconds() const;
  /// The median csr call (0 before one).
  double csr_seconds() const;
  /// The csr calls timed so far (their median is csr_seconds()).
  std::int64_t csr_calls() const { return csr_calls_; }
  /// The budget of exploration cost now (seconds).
  double budget_seconds() const;
  /// Whether `more` seconds of work beyond the cost so far fit in the budget now.
  bool affords(double more) const { return cost_seconds() + more <= budget_seconds(); }
  /// Whether the nominees are to be taken in the short list's own order (its first entries: the
  /// committed dataset's most frequent winners) instead of the model's: with expected calls,
  /// when what is left of the budget affords reading the list and a nominee after it (`read` +
  /// `then` seconds) but not the model's choice before that nominee (`model_choice` + `then`).
  /// Without expected calls the budget grows with the calls, and the plan waits for the model's.
  bool chooses_by_list_order(double model_choice, double read, double then) const {
    return o_.expected_calls > 0 && !affords(model_choice + then) && affords(read + then);
  }
  /// The call at which it settled (0 while exploring).
  std::int64_t settled_at() const { return settled_at_; }
  /// Calls after which the tuning paid for itself: cost / (csr - choice) per call, from the
  /// judged timings (the chosen kernel's per-call time csr's judged median x the rechecks'
  /// ratio once a recheck held); nullopt without a gain.
  std::optional<double> break_even_calls() const;
  nlohmann::json to_json() const;

 private:
  struct Arm {
    bool live = true;
    bool ready = false;
    bool verified = false;
    bool verifying = false;
    std::string left;              ///< why it left (empty while live)
    std::vector<double> ratios;    ///< paired ratios to csr of the selection rungs
    std::vector<double> seconds;   ///< its timed calls
    int rung_calls = 0;            ///< calls timed in the current rung
  };
  enum class Phase { Verify, Rungs, Judge, Settled, Recheck };

  int live_nominees() const;
  /// The nominee of the next turn (rungs: the one whose block goes on until it has its calls,
  /// then the next, ending the rung after the last; judgment: the finalist), or 0 when there is
  /// none (settled).
  int next_nominee();
  double median_ratio(const Arm& a) const;
  void end_rung();
  void judge();
  void settle(int arm, const std::string& verdict);
  /// The calls of a block of a recheck (recheck_block_calls, or more for short csr calls).
  int recheck_block() const;
  /// The fewest calls between rechecks of `block` calls a block: ten times a recheck's calls.
  std::int64_t recheck_gap(int block) const { return 20LL * o_.recheck_rounds * block; }
  Step recheck_step();
  void recheck_record(int arm, double seconds);
  void end_recheck();
  bool over_budget() const;

  AdaptiveOptions o_;
  std::vector<Arm> arms_;          ///< [0] is csr
  Phase phase_ = Phase::Verify;
  int rung_ = 0;
  int finalist_ = 0;
  int settled_arm_ = 0;
  bool settled_ = false;
  std::string verdict_ = "exploring";
  std::optional<heuristics::Verdict> judged_;
  std::int64_t calls_ = 0;
  std::int64_t exploring_calls_ = 0;
  double extra_s_ = 0.0;           ///< charged work and verification runs
  double overrun_s_ = 0.0;         ///< preparation beyond its estimates, verifications (overran)
  double charged_[static_cast<int>(Cost::Other) + 1] = {};  ///< extra_s_ by Cost
  double rungs_s_ = 0.0, judge_s_ = 0.0;        ///< the nominees' timed calls, by phase
  std::int64_t rungs_n_ = 0, judge_n_ = 0;
  std::int64_t settled_at_ = 0;
  double nominee_s_ = 0.0;         ///< time of the nominees' timed calls
  std::int64_t nominee_calls_ = 0;
  std::vector<double> csr_all_;    ///< the csr calls (the latest few thousand)
  std::int64_t csr_calls_ = 0;     ///< csr calls timed while exploring
  mutable double csr_median_ = 0.0;           ///< csr_seconds(), as last taken
  mutable std::int64_t csr_median_calls_ = -1;  ///< csr_calls_ when it was taken
  double last_csr_ = 0.0;          ///< the latest csr call, to pair the next nominee call with
  bool nominee_turn_ = false;      ///< csr serves every other exploring call
  int turn_left_ = 0;              ///< calls left in this turn (its warm ones, then the timed one)
  int turn_arm_ = 0;               ///< the arm of this turn (0: csr's turn)
  int block_arm_ = 0;              ///< the nominee whose block of calls goes on
  std::size_t next_arm_ = 1;       ///< the nominee whose calls of the rung go on (then the next)
  std::vector<double> judge_csr_, judge_nominee_;  ///< the judgment's pairs, in order
  // Rechecks: the calls handed out in the current one, its block size, each arm's timed calls
  // in it ([0] csr, [1] the chosen kernel), the ratios of a recheck that doubted (pooled with
  // the one after it), the calls until the next one, csr's calls in rechecks.
  std::int64_t recheck_pos_ = 0;
  int recheck_block_ = 0;
  std::vector<double> recheck_s_[2];
  std::vector<double> doubt_ratios_;
  std::vector<double> held_ratios_;  ///< the block ratios of the rechecks that held, pooled
  std::int64_t recheck_in_ = 0;
  std::int64_t recheck_csr_calls_ = 0;
  std::int64_t served_ = 0;  ///< start_recheck's: calls served without the policy
  bool reverted_ = false;
  nlohmann::json rechecks_ = nlohmann::json::array();
  nlohmann::json events_ = nlohmann::json::array();
};

}  // namespace waco::tuning
