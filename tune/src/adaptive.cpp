// The adaptive plan's policy (adaptive.hpp).
#include "waco/tune/adaptive.hpp"

#include <algorithm>
#include <cmath>

#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::tuning {

namespace {

constexpr std::size_t kCsrWindow = 1024;

/// Medians by selection (kernels::median, O(n)): asked on every call while a plan explores, of
/// windows of up to kCsrWindow times.
using kernels::median;

}  // namespace

AdaptivePolicy::AdaptivePolicy(int nominees, AdaptiveOptions options) : o_(options) {
  WACO_ASSERT(nominees >= 0 && o_.rung_calls >= 1 && o_.judge_rounds >= 1 && o_.share > 0,
              "AdaptivePolicy: nominees >= 0, rung_calls and judge_rounds >= 1, share > 0");
  arms_.resize(static_cast<std::size_t>(nominees) + 1);
  arms_[0].verified = arms_[0].ready = true;
  if (nominees == 0) settle(0, "no-gain");
}

int AdaptivePolicy::live_nominees() const {
  int n = 0;
  for (std::size_t k = 1; k < arms_.size(); ++k) n += arms_[k].live;
  return n;
}

double AdaptivePolicy::median_ratio(const Arm& a) const { return median(a.ratios); }

double AdaptivePolicy::csr_seconds() const {
  // Asked several times on every call while exploring: the median of the window is taken again
  // only when a csr call was recorded since, and then, past 64 calls, once the window has grown
  // by a sixteenth.
  const std::int64_t n = static_cast<std::int64_t>(csr_all_.size());
  if (csr_calls_ != csr_median_calls_ && (n < 64 || csr_calls_ - csr_median_calls_ >= n / 16)) {
    csr_median_ = median(csr_all_);
    csr_median_calls_ = csr_calls_;
  }
  return csr_median_;
}

double AdaptivePolicy::cost_seconds() const {
  return extra_s_ + nominee_s_ - static_cast<double>(nominee_calls_) * csr_seconds();
}

double AdaptivePolicy::budget_seconds() const {
  const std::int64_t calls = o_.expected_calls > 0 ? o_.expected_calls : calls_;
  return o_.share * static_cast<double>(calls) * csr_seconds();
}

bool AdaptivePolicy::over_budget() const {
  return !csr_all_.empty() && cost_seconds() - overrun_s_ > budget_seconds();
}

void AdaptivePolicy::overran(double estimate, double seconds) {
  if (seconds > estimate) overrun_s_ += seconds - estimate;
}

void AdaptivePolicy::skip(std::int64_t n) { calls_ += n; }

std::int64_t AdaptivePolicy::calls_until_affordable(double more) const {
  const double per_call = o_.share * csr_seconds();
  if (o_.expected_calls > 0 || per_call <= 0) return 0;
  const double short_s = cost_seconds() + more - budget_seconds();
  return short_s <= 0 ? 0 : static_cast<std::int64_t>(std::ceil(short_s / per_call));
}

std::int64_t AdaptivePolicy::calls_to_wait(double more, double look_s) const {
  // Waits only until the cost was paid let each look (~0.2-1 us) spend what the calls since the
  // last one had added, and the csr median's own drift moves a budget of ~10^5 calls by more
  // than a call adds: ash219 (438 nonzeros, 0.25 us csr calls) looked every ~25 calls and was
  // still exploring after 200,000-300,000 calls, the looks 2.8-3.5 ms of a 5.0 ms budget, its
  // calls 3-6% slower than a csr plan's.
  constexpr double kLooksPerBudget = 10.0;
  const std::int64_t short_calls = calls_until_affordable(more);
  const double per_call = o_.share * csr_seconds();
  if (short_calls == 0 || o_.expected_calls > 0 || per_call <= 0 || look_s <= 0) return short_calls;
  return std::max(short_calls, static_cast<std::int64_t>(std::ceil(kLooksPerBudget * look_s / per_call)));
}

void AdaptivePolicy::ready(int nominee) {
  Arm& a = arms_.at(static_cast<std::size_t>(nominee));
  WACO_ASSERT(nominee > 0, "AdaptivePolicy::ready: csr is always ready");
  a.ready = true;
}

AdaptivePolicy::Step AdaptivePolicy::next() {
  ++calls_;
  if (settled_) return phase_ == Phase::Recheck ? recheck_step() : Step{choice(), 0};
  if (over_budget()) {
    // With expected calls, what is spent is spent: the rest of the calls cannot pay for more.
    // Without, exploring resumes when the calls served have raised the budget.
    if (o_.expected_calls > 0) settle(0, "not-worth-it");
    return {choice(), 0};
  }
  if (phase_ == Phase::Verify) {
    bool waiting = false;
    for (std::size_t k = 1; k < arms_.size(); ++k) {
      Arm& a = arms_[k];
      if (!a.live || a.verified) continue;
      if (a.ready && !a.verifying) {
        a.verifying = true;
        ++exploring_calls_;
        return {0, static_cast<int>(k)};
      }
      waiting = true;  // not prepared yet, or its verification is in flight
    }
    if (waiting) return {0, 0, false, true};
    if (live_nominees() == 0) {
      settle(0, "no-gain");
      return {0, 0};
    }
    phase_ = Phase::Rungs;
    nominee_turn_ = true;  // csr's turn first: the nominee's first call pairs with a fresh one
  }
  // Turns: csr's, then a nominee's, and so on; each nominee call that counts is paired with the
  // csr call that counts before it. Once csr's calls are long enough for the caches to matter,
  // a turn is `warm_calls` untimed calls of its arm, then the one that counts.
  if (turn_left_ == 0) {
    nominee_turn_ = !nominee_turn_ && last_csr_ > 0.0;
    turn_arm_ = 0;
    if (nominee_turn_) {
      const int k = next_nominee();
      if (settled_ || k == 0) {
        nominee_turn_ = false;
        return {choice(), 0};
      }
      turn_arm_ = k;
    }
    turn_left_ = 1 + (csr_seconds() >= o_.warm_above_s ? o_.warm_calls : 0);
    if (turn_arm_ != 0 && turn_arm_ != block_arm_) {
      block_arm_ = turn_arm_;  // a new block: its first calls warm it up
      turn_left_ = std::max(turn_left_, 1 + o_.nominee_warmup);
    }
  } else if (turn_arm_ != 0) {
    // The turn's nominee left, or the judgment began without it, during its warm calls.
    const Arm& t = arms_[static_cast<std::size_t>(turn_arm_)];
    if (!t.live || (phase_ == Phase::Judge && turn_arm_ != finalist_)) {
      turn_left_ = 0;
      nominee_turn_ = false;
      return {0, 0, true};
    }
  }
  --turn_left_;
  if (turn_arm_ != 0) ++exploring_calls_;
  return {turn_arm_, 0, turn_left_ > 0};
}

int AdaptivePolicy::next_nominee() {
  for (int pass = 0; pass < 2 && phase_ == Phase::Rungs; ++pass) {
    const int target = o_.rung_calls << rung_;
    const std::size_t m = arms_.size() - 1;
    for (std::size_t q = 0; q < m; ++q) {
      const std::size_t k = 1 + (next_arm_ - 1 + q) % m;
      if (arms_[k].live && arms_[k].rung_calls < target) {
        next_arm_ = k;  // it serves its calls of the rung before the next one starts
        return static_cast<int>(k);
      }
    }
    end_rung();  // every live nominee has its calls of this rung
  }
  return phase_ == Phase::Judge ? finalist_ : 0;
}

void AdaptivePolicy::record(int arm, double seconds, bool warm) {
  if (settled_) {  // what a settled plan's calls take is the caller's, not tuning's: but a recheck's
    if (phase_ == Phase::Recheck && !warm && (arm == 0 || arm == settled_arm_)) recheck_record(arm, seconds);
    return;
  }
  Arm& a = arms_.at(static_cast<std::size_t>(arm));
  if (warm && arm == 0) return;  // csr's calls cost nothing over not tuning
  if (arm == 0) {
    // A bounded window: with no expected calls, csr may serve millions of calls while the
    // budget grows.
    if (csr_all_.size() >= kCsrWindow) csr_all_.erase(csr_all_.begin(), csr_all_.begin() + kCsrWindow / 2);
    csr_all_.push_back(seconds);
    ++csr_calls_;
    last_csr_ = seconds;
    if (phase_ == Phase::Judge) judge_csr_.push_back(seconds);
    return;
  }
  // What a nominee's call takes beyond csr's is exploration's cost; a warm call is no sample.
  nominee_s_ += seconds;
  ++nominee_calls_;
  if (phase_ == Phase::Judge && arm == finalist_) {
    judge_s_ += seconds;
    ++judge_n_;
  } else {
    rungs_s_ += seconds;
    ++rungs_n_;
  }
  if (warm) return;
  a.seconds.push_back(seconds);
  if (!a.live) return;
  if (a.seconds.size() >= 2 && o_.abandon_factor > 0) {
    std::vector<double> two(a.seconds);
    std::partial_sort(two.begin(), two.begin() + 2, two.end());
    const double csr = csr_seconds();
    if (csr > 0 && two[1] > o_.abandon_factor * csr) {
      a.live = false;
      a.left = "abandoned: its two fastest calls took " + std::to_string(two[1] / csr) +
               "x csr's median or more";
      events_.push_back({{"nominee", arm}, {"left", a.left}});
      if (arm == finalist_ && phase_ == Phase::Judge) settle(0, "no-gain");
      else if (phase_ == Phase::Rungs && live_nominees() == 0) settle(0, "no-gain");
      return;
    }
  }
  if (phase_ == Phase::Judge && arm == finalist_) {
    // A pair is this call and the csr call before it; a nominee call with no csr call since the
    // last pair (overlapping callers) is not one.
    if (judge_csr_.size() > judge_nominee_.size()) {
      const double c = judge_csr_.back();
      judge_csr_.resize(judge_nominee_.size());
      judge_csr_.push_back(c);
      judge_nominee_.push_back(seconds);
    }
    if (static_cast<int>(judge_nominee_.size()) >= o_.judge_rounds) judge();
    return;
  }
  if (phase_ == Phase::Rungs && last_csr_ > 0.0) {
    a.ratios.push_back(seconds / last_csr_);
    ++a.rung_calls;
  }
}

void AdaptivePolicy::verified(int nominee, bool ok, double seconds, const std::string& reason,
                              double check_seconds) {
  Arm& a = arms_.at(static_cast<std::size_t>(nominee));
  extra_s_ += seconds + check_seconds;
  charged_[static_cast<int>(Cost::Verify)] += seconds + check_seconds;
  overrun_s_ += seconds + check_seconds;  // spent either way (verified's comment)
  a.verifying = false;
  if (ok) {
    a.verified = true;
    return;
  }
  if (a.live) {
    a.live = false;
    a.left = "verification: " + reason;
    events_.push_back({{"nominee", nominee}, {"left", a.left}});
  }
}

void AdaptivePolicy::failed(int nominee, const std::string& reason) {
  Arm& a = arms_.at(static_cast<std::size_t>(nominee));
  if (!a.live) return;
  a.live = false;
  a.left = reason;
  events_.push_back({{"nominee", nominee}, {"left", reason}});
}

void AdaptivePolicy::not_worth_it(const std::string& why) {
  if (settled_) return;
  events_.push_back({{"not-worth-it", why}});
  settle(0, "not-worth-it");
}

void AdaptivePolicy::no_gain(const std::string& why) {
  if (settled_) return;
  events_.push_back({{"no-gain", why}});
  settle(0, "no-gain");
}

void AdaptivePolicy::charge(double seconds, const std::string& what, Cost kind) {
  extra_s_ += seconds;
  charged_[static_cast<int>(kind)] += seconds;
  if (!what.empty()) events_.push_back({{"charged", what}, {"seconds", seconds}});
}

void AdaptivePolicy::end_rung() {
  std::vector<int> live;
  for (std::size_t k = 1; k < arms_.size(); ++k)
    if (arms_[k].live) live.push_back(static_cast<int>(k));
  std::stable_sort(live.begin(), live.end(), [&](int a, int b) {
    return median_ratio(arms_[static_cast<std::size_t>(a)]) <
           median_ratio(arms_[static_cast<std::size_t>(b)]);
  });
  const std::size_t keep = live.size() == 1 ? 1 : (live.size() + 1) / 2;
  for (std::size_t q = 0; q < live.size(); ++q) {
    Arm& a = arms_[static_cast<std::size_t>(live[q])];
    const double r = median_ratio(a);
    if (q >= keep)
      a.left = "rung " + std::to_string(rung_) + ": median ratio to csr " + std::to_string(r) +
               ", not in the better half";
    else if (r > 1.0 + o_.drop_above)
      a.left = "rung " + std::to_string(rung_) + ": median ratio to csr " + std::to_string(r);
    else
      continue;
    a.live = false;
    events_.push_back({{"nominee", live[q]}, {"left", a.left}});
  }
  events_.push_back({{"rung", rung_}, {"live", live_nominees()}});
  if (live_nominees() == 0) {
    settle(0, "no-gain");
    return;
  }
  if (live_nominees() == 1) {
    for (std::size_t k = 1; k < arms_.size(); ++k)
      if (arms_[k].live) finalist_ = static_cast<int>(k);
    phase_ = Phase::Judge;
    judge_csr_.clear();
    judge_nominee_.clear();
    return;
  }
  ++rung_;
  for (Arm& a : arms_) a.rung_calls = 0;
}

void AdaptivePolicy::judge() {
  heuristics::Measurement w, ref;
  w.status = ref.status = heuristics::MeasureStatus::Ok;
  w.seconds = judge_nominee_;
  ref.seconds = judge_csr_;
  w.median_s = median(w.seconds);
  ref.median_s = median(ref.seconds);
  judged_ = heuristics::judge_gain(w, ref, o_.rule);
  if (judged_->gain)
    settle(finalist_, "gain");
  else
    settle(0, "no-gain");
}

void AdaptivePolicy::settle(int arm, const std::string& verdict) {
  settled_ = true;
  settled_at_ = calls_;
  phase_ = Phase::Settled;
  settled_arm_ = arm;
  verdict_ = verdict;
  recheck_in_ = arm != 0 && o_.recheck ? std::max(o_.recheck_first, recheck_gap(recheck_block())) : 0;
}

int AdaptivePolicy::recheck_block() const {
  const double csr = csr_seconds();
  const double fit = csr > 0 ? std::ceil(o_.recheck_block_s / csr) : 0.0;
  return std::max(o_.recheck_block_calls, std::min(1 << 16, static_cast<int>(fit)));
}

std::int64_t AdaptivePolicy::recheck_in() const {
  return phase_ == Phase::Settled && settled_arm_ != 0 ? recheck_in_ : 0;
}

void AdaptivePolicy::start_recheck(std::int64_t served) {
  WACO_ASSERT(recheck_in() > 0, "AdaptivePolicy::start_recheck: no recheck is due");
  served_ = served;
  phase_ = Phase::Recheck;
  recheck_pos_ = 0;
  recheck_block_ = std::max(recheck_block(), o_.recheck_warm + 1);
  recheck_s_[0].clear();
  recheck_s_[1].clear();
}

AdaptivePolicy::Step AdaptivePolicy::recheck_step() {
  // Round r: a block of the chosen kernel's calls and one of csr's, the chosen one first in
  // even rounds; each block's first recheck_warm calls are no samples. Calls handed out beyond
  // the recheck's (overlapping callers) run the chosen kernel as no samples.
  const std::int64_t b = recheck_block_, pos = recheck_pos_++;
  if (pos >= 2 * b * o_.recheck_rounds) return {settled_arm_, 0, true};
  const std::int64_t round = pos / (2 * b), j = pos % (2 * b);
  const int arm = ((j < b) == (round % 2 == 0)) ? settled_arm_ : 0;
  if (arm == 0) ++recheck_csr_calls_;
  return {arm, 0, j % b < o_.recheck_warm};
}

void AdaptivePolicy::recheck_record(int arm, double seconds) {
  std::vector<double>& s = recheck_s_[arm == 0 ? 0 : 1];
  s.push_back(seconds);
  const std::size_t need = static_cast<std::size_t>(o_.recheck_rounds) *
                           static_cast<std::size_t>(recheck_block_ - o_.recheck_warm);
  if (recheck_s_[0].size() >= need && recheck_s_[1].size() >= need) end_recheck();
}

void AdaptivePolicy::end_recheck() {
  // Each round's ratio: the chosen kernel's block median over csr's.
  const auto per = static_cast<std::ptrdiff_t>(recheck_block_ - o_.recheck_warm);
  std::vector<double> ratios;
  for (int r = 0; r < o_.recheck_rounds; ++r) {
    const auto block = [&](const std::vector<double>& v) {
      return median(std::vector<double>(v.begin() + r * per, v.begin() + (r + 1) * per));
    };
    const double c = block(recheck_s_[0]);
    if (c > 0) ratios.push_back(block(recheck_s_[1]) / c);
  }
  const double here = ratios.empty() ? 1.0 : median(ratios);
  const bool doubted = !doubt_ratios_.empty();
  doubt_ratios_.insert(doubt_ratios_.end(), ratios.begin(), ratios.end());
  const double pooled = doubt_ratios_.empty() ? 1.0 : median(doubt_ratios_);
  std::vector<double> sorted(ratios);
  std::sort(sorted.begin(), sorted.end());
  nlohmann::json ev = {{"at_call", calls_ + served_},
                       {"rounds", ratios.size()},
                       {"block_calls", recheck_block_},
                       {"ratio_median", here},
                       {"ratio_q25", sorted.empty() ? 1.0 : kernels::quantile(sorted, 0.25)},
                       {"ratio_q75", sorted.empty() ? 1.0 : kernels::quantile(sorted, 0.75)}};
  recheck_pos_ = 0;
  recheck_s_[0].clear();
  recheck_s_[1].clear();
  if (here < 1.0 || (doubted && pooled < 1.0)) {
    ev["held"] = true;
    held_ratios_.insert(held_ratios_.end(), doubt_ratios_.begin(), doubt_ratios_.end());
    doubt_ratios_.clear();
    phase_ = Phase::Settled;
    recheck_in_ = std::max(recheck_in_ * o_.recheck_growth, recheck_gap(recheck_block_));
  } else if (!doubted) {
    ev["held"] = nullptr;  // a second recheck follows at once
  } else {
    ev["held"] = false;
    ev["pooled_ratio_median"] = pooled;
    events_.push_back({{"reverted", "the chosen kernel was not faster than csr on two rechecks in a row "
                                    "(median block ratio " + std::to_string(pooled) + "): csr serves"}});
    reverted_ = true;
    settled_arm_ = 0;
    verdict_ = "no-gain";
    recheck_in_ = 0;
    doubt_ratios_.clear();
    phase_ = Phase::Settled;
  }
  rechecks_.push_back(std::move(ev));
}

int AdaptivePolicy::choice() const { return settled_ ? settled_arm_ : 0; }

std::string AdaptivePolicy::verdict() const { return verdict_; }

std::optional<double> AdaptivePolicy::speedup() const {
  if (!settled_) return std::nullopt;
  if (speedup_from_rechecks()) return 1.0 / median(held_ratios_);
  if (verdict_ == "gain" && judged_) return judged_->speedup;
  return 1.0;
}

std::optional<double> AdaptivePolicy::break_even_calls() const {
  if (verdict_ != "gain" || !judged_) return std::nullopt;
  const double csr = median(judge_csr_);
  const double mine = speedup_from_rechecks() ? csr * median(held_ratios_) : median(judge_nominee_);
  if (mine >= csr) return std::nullopt;
  return std::max(0.0, cost_seconds()) / (csr - mine);
}

nlohmann::json AdaptivePolicy::to_json() const {
  nlohmann::json arms = nlohmann::json::array();
  for (std::size_t k = 0; k < arms_.size(); ++k) {
    const Arm& a = arms_[k];
    nlohmann::json j = {{"arm", k},
                        {"live", a.live},
                        {"verified", a.verified},
                        {"calls", k == 0 ? csr_calls_ : static_cast<std::int64_t>(a.seconds.size())},
                        {"median_s", k == 0 ? csr_seconds() : median(a.seconds)}};
    if (k > 0) j["median_ratio"] = a.ratios.empty() ? nlohmann::json() : nlohmann::json(median_ratio(a));
    if (!a.left.empty()) j["left"] = a.left;
    arms.push_back(j);
  }
  const std::optional<double> sp = speedup(), be = break_even_calls();
  // The cost in seconds and in csr calls, by where it went; the parts sum to cost_s.
  const double csr = csr_seconds();
  nlohmann::json breakdown = nlohmann::json::object(), in_calls = nlohmann::json::object();
  const auto part = [&](const char* name, double s) {
    breakdown[name] = s;
    in_calls[name] = csr > 0 ? nlohmann::json(s / csr) : nlohmann::json();
  };
  static const char* const kCostNames[] = {"choice", "format", "load", "compile", "verify",
                                           "overhead", "other"};
  static_assert(sizeof kCostNames / sizeof kCostNames[0] == static_cast<int>(Cost::Other) + 1);
  for (int k = 0; k <= static_cast<int>(Cost::Other); ++k) part(kCostNames[k], charged_[k]);
  part("selection", rungs_s_ - static_cast<double>(rungs_n_) * csr);
  part("judgment", judge_s_ - static_cast<double>(judge_n_) * csr);
  part("total", cost_seconds());
  breakdown["in_csr_calls"] = in_calls;
  breakdown["selection_calls"] = rungs_n_;
  breakdown["judgment_calls"] = judge_n_;
  return {{"verdict", verdict_},
          {"settled", settled_},
          {"choice", choice()},
          {"calls", calls_},
          {"exploring_calls", exploring_calls_},
          {"cost_s", cost_seconds()},
          {"budget_s", budget_seconds()},
          {"overrun_s", overrun_s_},
          {"csr_s", csr_seconds()},
          {"expected_calls", o_.expected_calls},
          {"share", o_.share},
          {"rung", rung_},
          {"settled_at_call", settled_at_},
          {"cost_breakdown", breakdown},
          {"speedup", sp ? nlohmann::json(*sp) : nlohmann::json()},
          {"break_even_calls", be ? nlohmann::json(*be) : nlohmann::json()},
          {"speedup_from", verdict_ != "gain" || !judged_ ? nlohmann::json()
                           : speedup_from_rechecks() ? nlohmann::json("rechecks")
                                                     : nlohmann::json("judgment")},
          {"judged", judged_ ? judged_->to_json() : nlohmann::json()},
          {"rechecks", rechecks_},
          {"recheck_csr_calls", recheck_csr_calls_},
          {"reverted", reverted_},
          {"arms", arms},
          {"events", events_}};
}

}  // namespace waco::tuning
