// An adaptive plan's calls (adaptive_run.hpp): each served by the arm the policy chooses, timed,
// a verification running a nominee beside csr and comparing; settling, the decision stored in the
// tuning cache, and what the plan reports.
#include "waco/tune/adaptive_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>

#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/kernels/values.hpp"

#include "adaptive_run_internal.hpp"

namespace waco::tuning {

using detail::kMaxQuietCalls;
using detail::operand_nnz;

namespace {

/// While the verification waits for a nominee compiled in the background, and nothing is left to
/// prepare, csr serves this long of calls quietly before the plan looks again: the compiler
/// thread is polled every ~0.1 s, and each call that asks costs the lock, the policy and the
/// clock (~0.7-1.5 us; on a 7k-nonzero matrix's 6 us calls, 4,200 such calls in one plan's
/// wait cost 2.9 ms, more than all the rest of its tuning).
constexpr double kWaitingQuietS = 0.002;

/// Whether a nominee's output equals csr's on this call, to float summation order: entry by
/// entry within 1e-3 of the larger magnitude plus 1e-5 of the output's largest (a cancelling sum
/// is small beside its terms). NaN where csr has NaN is equal (the caller's input had one).
/// (The same bounds in double: they hold there with room to spare.)
/// In one pass: the largest excess of |a - b| over 1e-3 of the larger magnitude, against 1e-5 of
/// the output's largest finite entry (taken in the same pass); the worst entry is named.
template <class V>
bool same_output(const V* want, const V* got, std::size_t n, std::string& why) {
  double scale = 0.0, worst = 0.0;
  std::size_t at = n;
  for (std::size_t i = 0; i < n; ++i) {
    const double a = want[i], b = got[i];
    if (std::isfinite(a)) scale = std::max(scale, std::fabs(a));
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    if (!std::isfinite(a) || !std::isfinite(b)) {  // unequal and not both finite: wrong
      at = i;
      worst = HUGE_VAL;
      break;
    }
    const double excess = std::fabs(a - b) - 1e-3 * std::max(std::fabs(a), std::fabs(b));
    if (excess > worst) {
      worst = excess;
      at = i;
    }
  }
  if (at == n || worst <= 1e-5 * scale) return true;
  why = "entry " + std::to_string(at) + ": csr gives " + std::to_string(want[at]) +
        ", the nominee " + std::to_string(got[at]);
  return false;
}

}  // namespace

void AdaptiveRun::call(void* out, std::size_t out_size, const ArmCall& run) {
  if (settled_.load(std::memory_order_acquire) &&
      settled_calls_.load(std::memory_order_relaxed) < recheck_at_.load(std::memory_order_relaxed)) {
    settled_calls_.fetch_add(1, std::memory_order_relaxed);
    run(*serving_.load(std::memory_order_acquire), out);
    return;
  }
  if (quiet_.load(std::memory_order_relaxed) > 0 &&
      quiet_.fetch_sub(1, std::memory_order_relaxed) > 0) {
    quiet_served_.fetch_add(1, std::memory_order_relaxed);
    run(*csr_, out);
    return;
  }
  // Everything of this call but its kernels and a preparation step (charged by the step) is the
  // exploration's overhead: the lock, the policy, the clock, copying and comparing a verification.
  const double t_enter = kernels::now_seconds();
  AdaptivePolicy::Step step;
  std::shared_ptr<const Arm> arm, nominee;
  double t_prepare = 0.0;
  bool exploring = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (policy_.recheck_in() > 0 && settled_calls_.load(std::memory_order_relaxed) >=
                                        recheck_at_.load(std::memory_order_relaxed)) {
      // A recheck of the gain: every call takes the lock until it decides.
      settled_.store(false, std::memory_order_release);
      recheck_at_.store(INT64_MAX, std::memory_order_relaxed);
      policy_.start_recheck(settled_calls_.load(std::memory_order_relaxed));
    }
    policy_.skip(quiet_served_.exchange(0, std::memory_order_relaxed));
    const double p0 = kernels::now_seconds();
    maybe_prepare(lock);
    t_prepare = kernels::now_seconds() - p0;
    exploring = !policy_.settled();
    step = policy_.next();
    if (policy_.settled()) {
      if (!policy_.rechecking()) settle_locked();
    } else if (step.arm == 0 && step.verify == 0 && quiet_.load(std::memory_order_relaxed) <= 0) {
      // Over budget: wait for the calls to pay. Waiting for a kernel compiled in the background
      // with nothing left to prepare: look again after kWaitingQuietS of calls.
      std::int64_t quiet = policy_.calls_to_wait(0.0, look_s_);
      if (step.waiting && nominated_done_ && next_nominee_ >= nominated_.size() && policy_.csr_seconds() > 0.0)
        quiet = std::max(quiet, static_cast<std::int64_t>(kWaitingQuietS / policy_.csr_seconds()));
      quiet_.store(std::min(quiet, kMaxQuietCalls), std::memory_order_relaxed);
    }
    arm = arms_.at(static_cast<std::size_t>(step.arm));
    if (step.verify) nominee = arms_.at(static_cast<std::size_t>(step.verify));
  }
  const double t0 = kernels::now_seconds();
  try {
    run(*arm, out);
  } catch (...) {  // the caller gets the error; a verification handed out is given back
    std::lock_guard<std::mutex> lock(mu_);
    if (step.verify) policy_.verified(step.verify, false, 0.0, "the csr call beside it failed");
    throw;
  }
  const double t = kernels::now_seconds() - t0;
  bool ok = true;
  double t_nominee = 0.0, t_check = 0.0;  // the nominee's run; copying and comparing beside it
  std::string why;
  kernels::Values mine;  // the nominee's output: a copy of what csr wrote, padding included
  if (nominee) {
    const double c0 = kernels::now_seconds();
    try {
      const kernels::Dtype dtype = arm->bound.dtype;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!spare_.empty()) {
          mine = std::move(spare_.back());
          spare_.pop_back();
        }
      }
      if (mine.dtype() != dtype || mine.size() != out_size) mine.assign(dtype, out_size);
      std::memcpy(mine.raw(), out, out_size * kernels::dtype_size(dtype));
      const double t1 = kernels::now_seconds();
      run(*nominee, mine.raw());
      t_nominee = kernels::now_seconds() - t1;
      ok = kernels::with_value_type(dtype, [&](auto v) {
        using V = decltype(v);
        return same_output(static_cast<const V*>(out), mine.data<V>(), out_size, why);
      });
    } catch (const std::exception& e) {
      ok = false;
      why = e.what();
    }
    t_check = kernels::now_seconds() - c0 - t_nominee;
  }
  bool store = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    policy_.record(step.arm, t, step.warm);
    if (step.verify) {
      policy_.verified(step.verify, ok, t_nominee, why, t_check);
      if (!mine.empty()) spare_.push_back(std::move(mine));
    }
    if (exploring) {
      look_s_ = kernels::now_seconds() - t_enter - t_prepare - t - t_nominee - t_check;
      policy_.charge(look_s_, {}, Cost::Overhead);
    }
    if (policy_.settled() && !policy_.rechecking() && !settled_.load(std::memory_order_relaxed)) {
      // A recheck decided: the gain holds (kept again in the cache when the rechecks moved its
      // speedup), or csr serves again, its no-gain kept in the cache.
      settle_locked();
      const double sp = policy_.speedup().value_or(0.0);
      store = stored_ && (policy_.reverted() || std::abs(sp - stored_speedup_) > 0.02 * stored_speedup_);
    }
    if (policy_.settled() && !stored_) {
      settle_locked();
      stored_ = true;
      // The cache's gain stays unless these calls judged it (a nominee whose kernel is not
      // compiled yet leaves unjudged: that is no verdict on it). A no-gain none of whose
      // nominees ran on a call (each left before: its format refused, its kernel not
      // compiled) is no verdict either: kept, it would answer later plans with csr unasked.
      const bool tried = policy_.exploring_calls() > 0;  // a nominee ran (verified) on a call
      // Nor is a no-gain among the short list's first entries (prior_step) where the kernel's
      // plans choose by the model: the model's nominees were not tried, and a later plan that
      // affords them would find csr's decision in the cache. Where the list's order is the
      // kernel's own way to choose (default_nominee_choice), it is that decision.
      const bool prior_no_gain =
          prior_ && policy_.verdict() == "no-gain" &&
          default_nominee_choice(setup_.request.kind) != NomineeChoice::List;
      store = tried && (!cached_gain_ || policy_.judged()) && !prior_no_gain;
      if (!tried && policy_.verdict() == "no-gain")
        cache_result_ = {{"skipped", "no nominee ran on a call: no verdict to keep"}};
      else if (prior_no_gain)
        cache_result_ = {{"skipped", "the short list's order was tried, not the model's nominees: "
                                     "no verdict to keep"}};
    }
  }
  if (store) store_decision();
}

void AdaptiveRun::settle_locked() {
  const std::shared_ptr<const Arm>& choice = arms_.at(static_cast<std::size_t>(policy_.choice()));
  if (!chosen_) {
    for (std::size_t k = 1; k < arms_.size(); ++k)
      if (arms_[k] != choice) arms_[k].reset();  // the losers' formats and kernels
    std::vector<kernels::Values>().swap(spare_);
  }
  // A recheck that reverts leaves the chosen kernel in arms_: calls without the lock may run it.
  chosen_ = choice;
  serving_.store(chosen_.get(), std::memory_order_release);
  const std::int64_t in = policy_.recheck_in();
  recheck_at_.store(in > 0 ? settled_calls_.load(std::memory_order_relaxed) + in : INT64_MAX,
                    std::memory_order_relaxed);
  settled_.store(true, std::memory_order_release);
}

void AdaptiveRun::store_decision() {
  if (!setup_.cache_key) return;
  const std::string verdict = this->verdict();
  if (verdict != "gain" && verdict != "no-gain") return;  // not-worth-it depends on the calls
  nlohmann::json r = report();
  {
    const nlohmann::json& sp = r.at("speedup_over_csr");
    std::lock_guard<std::mutex> lock(mu_);
    stored_speedup_ = sp.is_number() ? sp.get<double>() : 0.0;
  }
  try {
    std::optional<heuristics::TuningKey> key;
    std::shared_ptr<const Arm> chosen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      key = key_;
      chosen = chosen_;
    }
    if (!key) key = setup_.cache_key();
    const heuristics::TuningCache cache(setup_.cache_dir);
    const std::string path = cache.store(*key, chosen->bound.schedule, r);
    std::lock_guard<std::mutex> lock(mu_);
    cache_result_ = {{"path", path}};
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    cache_result_ = {{"error", e.what()}};
  }
}

std::shared_ptr<const Arm> AdaptiveRun::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chosen_ ? chosen_ : arms_[0];
}

std::string AdaptiveRun::verdict() const {
  std::lock_guard<std::mutex> lock(mu_);
  return policy_.verdict();
}

std::optional<double> AdaptiveRun::speedup() const {
  std::lock_guard<std::mutex> lock(mu_);
  return policy_.speedup();
}

std::optional<double> AdaptiveRun::break_even_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return policy_.break_even_calls();
}

std::int64_t AdaptiveRun::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return policy_.calls() + settled_calls_.load(std::memory_order_relaxed) +
         quiet_served_.load(std::memory_order_relaxed);
}

std::int64_t AdaptiveRun::exploring_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return policy_.exploring_calls();
}

nlohmann::json AdaptiveRun::report() const {
  // The fingerprint outside the lock: computed the first time, it would hold up calls.
  const std::string fingerprint = setup_.fingerprint();
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json a = policy_.to_json();
  for (nlohmann::json& arm : a["arms"])
    arm["schedule"] = nominee_text_.at(arm.at("arm").get<std::size_t>());
  a["nomination"] = nomination_;
  a["nominees"] = setup_.nominees;
  const std::shared_ptr<const Arm> now = chosen_ ? chosen_ : arms_[0];
  const std::optional<double> sp = policy_.speedup(), be = policy_.break_even_calls();
  nlohmann::json economy = nlohmann::json::object();
  economy["break_even_calls"] = be ? nlohmann::json(*be) : nlohmann::json();
  economy["cost_s"] = policy_.cost_seconds();
  economy["expected_calls"] = setup_.policy.expected_calls;
  return {{"mode", "adaptive"},
          {"kernel", kernels::kernel_name(setup_.request.kind)},
          {"fingerprint", fingerprint},
          {"nnz", operand_nnz(setup_.operand)},
          {"file", ""},
          {"confirmed", policy_.judged()},  // judged on the application's calls
          {"best", nullptr},                // no search's best: see "adaptive"
          {"threads", now->bound.args.threads},
          {"dense", setup_.request.kind == kernels::KernelKind::SpMV ? 1 : setup_.request.dense},
          {"dtype", std::string(kernels::dtype_name(setup_.request.dtype))},
          {"verdict", policy_.verdict()},
          {"schedule", codegen::to_text(now->bound.schedule)},
          {"implementation", now->bound.implementation()},
          {"speedup_over_csr", sp ? nlohmann::json(*sp) : nlohmann::json()},
          {"economy", economy},
          {"adaptive", a},
          {"tuning_cache", lookup_},
          {"plan_cache", cache_result_}};
}

}  // namespace waco::tuning
