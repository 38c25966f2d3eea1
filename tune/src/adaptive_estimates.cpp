// What an adaptive plan's next preparation step is taken to cost (adaptive_run.hpp): which step
// is due (the tuning cache, the diagonals, the choice, a nominee), whether what is left of the
// policy's budget pays for it, and running it (AdaptiveRun::maybe_prepare).
#include "waco/tune/adaptive_run.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/timing.hpp"

#include "adaptive_run_internal.hpp"

namespace waco::tuning {

using detail::g_chose;
using detail::g_loaded;
using detail::kMaxQuietCalls;
using detail::operand_nnz;

namespace {

/// What the choice (the space, the passes, the model's scores) and a nominee's format are taken
/// to cost before they run: a fixed part and a part per nonzero, whatever the kernel (a choice
/// does not depend on how long a call takes). Ranking the whole admissible set, the development
/// VM (SPR, 2 threads, tune/README.md "The cost of the choice"): SpMV 7.2 ms on bcsstk13 (84k
/// nonzeros), 29.7 ms on delaunay_n16 (393k); SpMM (J=64) 15-39 ms on the same. Ranking the
/// shipped kernels' short list (AMD EPYC VM, 2 threads, `bench_choice --shortlist`): SpMV
/// 0.25-1.1 ms, SpMM 0.6-1.5 ms on 438-27k nonzeros. The first choice of a process costs
/// ~1.5 ms more (`tune --adaptive` on the 22 held-out-like matrices, the same VM: 1.7-2.3 ms
/// below 30k nonzeros; its first allocations, the model's file, the shipped lists). A format
/// other than csr's: 0.02-0.14 ms below 30k nonzeros, 12-23 ns a nonzero from 300k (a CSC of
/// 1.4M: 27-32 ms); loading a kernel: ~0.3 ms the first time in a process (a shipped library
/// opened), ~0.1 ms after.
constexpr double kChoiceFixedS = 0.008;
constexpr double kChoicePerNonzeroS = 60e-9;
constexpr double kShortChoiceFixedS = 0.0006;
/// ... for a kernel with dense operands: SpMM's short list admits 70-80 schedules (their
/// variants) where SpMV's admits 13-26, and the first scoring of each costs (session 49, Intel
/// VM, `scripts/adaptive_vs_hybrid.py` on 8 matrices of 0.4k-27k nonzeros, no tuning cache: a
/// process's first choice 1.8-3.0 ms for SpMV, median 2.2; 2.6-4.6 ms for SpMM n=64, median 3.3).
/// SDDMM and MTTKRP are taken as SpMM.
constexpr double kShortChoiceFixedDenseS = 0.0012;
constexpr double kShortChoicePerNonzeroS = 35e-9;
constexpr double kFirstChoiceS = 0.0015;
/// Reading the shipped lists' texts, then parsing the first few for the list's order, the first
/// time in a process (0.07 ms at the median over 8 small matrices, session 85, Intel Xeon VM;
/// parsing all of them, as before, took 0.2-0.36 ms, session 49; the model's choice still does).
constexpr double kListReadS = 0.0001;
constexpr double kFormatFixedS = 0.00005;
constexpr double kFormatPerNonzeroS = 20e-9;
constexpr double kLoadS = 0.0001;
constexpr double kFirstLoadS = 0.0003;
/// Counting a matrix's diagonals (the dia step): 2-3 ns a nonzero (Intel Xeon VM, 18k-449k
/// nonzeros, `tune --adaptive`'s events); the dia format then 9-20 ns, nothing loaded.
constexpr double kDiaCountPerNonzeroS = 4e-9;

/// What asking the tuning cache is taken to cost: the key (the machine's identity, ~0.3 ms the
/// first time in a process on the development VM: sysfs and /proc/cpuinfo; ~0.02 ms after) and
/// reading the entry.
constexpr double kLookupS = 0.0003;
/// ... and the operand's content key (AdaptiveSetup::cache_key, kernels::content_key:
/// 1.4 ns a nonzero on 7k-704k-nonzero matrices, Intel Xeon VM, session 85, the fingerprint 11).
/// Until session 85 the key held the fingerprint, a serial hash of 13 ns a nonzero.
constexpr double kContentKeyPerNonzeroS = 2e-9;

/// csr calls timed before the first preparation step.
constexpr std::int64_t kMinCsrCalls = 8;

}  // namespace

namespace detail {

/// Whether this process made a choice / loaded a nominee's kernel before (the estimates above).
std::atomic<bool> g_chose{false};
std::atomic<bool> g_loaded{false};

}  // namespace detail

void AdaptiveRun::maybe_prepare(std::unique_lock<std::mutex>& lock) {
  // The budget is a share of csr's median call: not taken before it is steady (a process's
  // first calls take up to several times the later ones, and would lend the plan a budget its
  // calls do not pay for).
  if (preparing_ || policy_.settled() || policy_.csr_calls() < kMinCsrCalls) return;
  const std::size_t total = nominated_.size();
  if (nominated_done_ && next_nominee_ >= total) return;
  // What the step is taken to cost (kChoiceFixedS ...), against what is left of the budget.
  const double nnz = static_cast<double>(operand_nnz(setup_.operand));
  const bool dia_next = nominated_done_ && dia_at_ == next_nominee_;  // no kernel to load
  double estimate = kFormatFixedS + kFormatPerNonzeroS * nnz +
                    (dia_next ? 0.0 : g_loaded.load(std::memory_order_relaxed) ? kLoadS : kFirstLoadS);
  double then = 0.0;  // what the step after it is taken to cost, when the step pays only with it
  bool prior = false;  // the choice by the short list's order (prior_step)
  const double lookup_estimate = kLookupS + kContentKeyPerNonzeroS * nnz;
  // The count pays only when the cheapest step after it does too: a format (dia's, the least a
  // nominee costs; stencil300 at 200 expected calls counted, 1-1.5 ms, then could not build it).
  const double count_estimate =
      kFormatFixedS + kDiaCountPerNonzeroS * nnz + kFormatFixedS + kFormatPerNonzeroS * nnz;
  // The tuning cache first (a decision there needs no count), unless the expected calls do not
  // pay for asking it, counting and a format after: then the diagonals first (a matrix dia
  // stores needs no model, nor the cache).
  const bool count_pending = !nominated_done_ && dia_pending_;
  const bool lookup_pending = setup_.ask_cache && !looked_up_;
  const bool count_first =
      count_pending && lookup_pending && setup_.policy.expected_calls > 0 &&
      !policy_.affords(lookup_estimate + count_estimate);
  bool lookup = lookup_pending && !count_first;
  const bool dia_check = count_pending && !lookup;
  if (lookup && dia_next && setup_.policy.expected_calls > 0 &&
      !policy_.affords(lookup_estimate + estimate)) {
    // dia admitted, and the expected calls do not pay for asking the tuning cache before its
    // format: dia is tried unasked when they pay for its format (its decision still goes to the
    // cache), else the plan is not worth it.
    looked_up_ = true;
    lookup_ = {{"skipped", "the expected calls do not pay for asking before the dia nominee's format"}};
    lookup = false;
  }
  if (lookup) {
    estimate = lookup_estimate;
  } else if (dia_check) {
    estimate = count_estimate;
  } else if (!nominated_done_) {
    // Ranking the shipped kernels' short list is the cheapest choice: until the budget affords
    // that much, the list is not even read (a short run of calls pays nothing for it). The
    // choice pays only when the cheapest step after it does too, a nominee's format and load:
    // a choice that leaves no room for one is spent for nothing (SpMM n=64 at 1,000 expected
    // calls of 20-40 us: 3-4 ms of choice, then not-worth-it).
    const double first = g_chose.load(std::memory_order_relaxed) ? 0.0 : kFirstChoiceS;
    const bool spmv = setup_.request.kind == kernels::KernelKind::SpMV;
    estimate = first + (spmv ? kShortChoiceFixedS : kShortChoiceFixedDenseS) +
               kShortChoicePerNonzeroS * nnz;
    then = kFormatFixedS + kFormatPerNonzeroS * nnz +
           (g_loaded.load(std::memory_order_relaxed) ? kLoadS : kFirstLoadS);
    // When the expected calls afford a nominee but not the model's choice before it, the short
    // list's own order may do: its first entries are the committed dataset's most frequent
    // winners (SpMM n=64 on 8 matrices at 1,000 calls: the model's first choice, 2.6-4.6 ms,
    // did not fit 2.5-4.7 ms budgets; the list's first kernel ran 1.30-1.84x csr on 7 of them).
    const double read = shortlist_ ? 0.0 : kListReadS;
    prior = setup_.choice == NomineeChoice::List ||
            policy_.chooses_by_list_order(estimate, read, then);
    if (prior) estimate = read;
    if (policy_.affords(estimate + then)) {
      if (!shortlist_) {  // read once (a cached file read), its time charged to the choice
        const double t0 = kernels::now_seconds();
        shortlist_ = codegen::shipped_schedule_texts(setup_.request.kind);
        policy_.charge(kernels::now_seconds() - t0, {}, Cost::Choice);
      }
      if (shortlist_->empty()) {  // no list: the model ranks the admissible set
        prior = false;
        estimate = first + kChoiceFixedS + kChoicePerNonzeroS * nnz;
      }
    }
  }
  if (!policy_.affords(estimate + then)) {
    // With expected calls the budget is all there is; without, it grows with the calls, and
    // until it has grown enough csr serves them untimed.
    if (setup_.policy.expected_calls <= 0) {
      quiet_.store(std::min(policy_.calls_to_wait(estimate + then, look_s_), kMaxQuietCalls),
                   std::memory_order_relaxed);
      return;
    }
    if (!nominated_done_) {
      policy_.not_worth_it(lookup      ? "asking the tuning cache would cost more than the expected calls allow"
                           : dia_check ? "counting the diagonals and building a nominee's format would cost "
                                         "more than the expected calls allow"
                                       : "choosing nominees would cost more than the expected calls allow");
      return;
    }
    // No nominee prepared: nothing was tried, so nothing was found wanting (a no-gain would go
    // to the tuning cache and answer later plans of more calls with csr).
    if (next_nominee_ == 0) {
      policy_.not_worth_it("preparing the nominees would cost more than the expected calls allow");
      return;
    }
    for (; next_nominee_ < total; ++next_nominee_)
      policy_.failed(static_cast<int>(next_nominee_) + 1,
                     "not prepared: its format would cost more than the expected calls allow");
    return;
  }
  // What the step is charged (its compile, queued in the background, is estimated apart).
  const auto prepared = [this] {
    return policy_.charged(Cost::Choice) + policy_.charged(Cost::Format) + policy_.charged(Cost::Load);
  };
  const double before = prepared();
  preparing_ = true;
  lock.unlock();
  if (lookup)
    lookup_step();
  else if (dia_check)
    dia_step();
  else if (!nominated_done_ && prior)
    prior_step();
  else if (!nominated_done_)
    nominate_step();
  else
    nominee_step(next_nominee_);
  lock.lock();
  policy_.overran(estimate, prepared() - before);
  if (!lookup && !dia_check && nominated_done_ && total == nominated_.size()) ++next_nominee_;
  preparing_ = false;
  // Counting the diagonals is cheap: without a dia nominee the choice is decided on this call,
  // as it was before the count (a plan of 10 expected calls answers not-worth-it within them).
  if (dia_check && !nominated_done_) maybe_prepare(lock);
}

}  // namespace waco::tuning
