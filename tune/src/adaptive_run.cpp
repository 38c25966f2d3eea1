// An adaptive plan's run time (adaptive_run.hpp).
#include "waco/tune/adaptive_run.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "waco/codegen/compiler.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/diagonal.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/tune/observer.hpp"

#include "adaptive_arm.hpp"

namespace waco::tuning {

namespace {

/// What compiling one kernel is taken to cost (0.2-1 s on the development VMs).
constexpr double kCompileEstimateS = 0.5;
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
/// Reading the shipped lists, the first time in a process (0.2-0.36 ms, session 49).
constexpr double kListReadS = 0.0004;
constexpr double kFormatFixedS = 0.00005;
constexpr double kFormatPerNonzeroS = 20e-9;
constexpr double kLoadS = 0.0001;
constexpr double kFirstLoadS = 0.0003;
/// Counting a matrix's diagonals (the dia step): 2-3 ns a nonzero (Intel Xeon VM, 18k-449k
/// nonzeros, `tune --adaptive`'s events); the dia format then 9-20 ns, nothing loaded.
constexpr double kDiaCountPerNonzeroS = 4e-9;
/// Whether this process made a choice / loaded a nominee's kernel before (the estimates above).
std::atomic<bool> g_chose{false};
std::atomic<bool> g_loaded{false};
/// What asking the tuning cache is taken to cost: the key (the machine's identity, ~0.3 ms the
/// first time in a process on the development VM: sysfs and /proc/cpuinfo; ~0.02 ms after) and
/// reading the entry.
constexpr double kLookupS = 0.0003;
/// ... and the operand's fingerprint when the caller did not give it (AdaptiveSetup::fingerprint:
/// a serial hash, 13 ns a nonzero on the development VM; 19 ms for 1.4M nonzeros, more than a
/// 14-iteration CG solve's budget).
constexpr double kFingerprintPerNonzeroS = 15e-9;
/// Nominees that may share a kernel (one schedule in several dynamic chunks) before others go.
constexpr std::size_t kPerKernel = 2;
/// csr calls timed before the first preparation step.
constexpr std::int64_t kMinCsrCalls = 8;
/// At most this many calls are served quietly (csr, untimed) before the budget is asked again.
constexpr std::int64_t kMaxQuietCalls = 4096;
/// While the verification waits for a nominee compiled in the background, and nothing is left to
/// prepare, csr serves this long of calls quietly before the plan looks again: the compiler
/// thread is polled every ~0.1 s, and each call that asks costs the lock, the policy and the
/// clock (~0.7-1.5 us; on a 7k-nonzero matrix's 6 us calls, 4,200 such calls in one plan's
/// wait cost 2.9 ms, more than all the rest of its tuning).
constexpr double kWaitingQuietS = 0.002;

std::int64_t operand_nnz(const TuneOperand& o) {
  return o.tensor ? o.tensor->nnz() : o.matrix ? o.matrix->nnz() : 0;
}

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

/// A tuning observer that keeps nothing: the preparing thread must not print from the
/// background (Options::progress is called from the tuning call's thread only).
class QuietObserver : public TuneObserver {
 public:
  void note(const std::string&) override {}
  void warning(const std::string&) override {}
  void progress(const heuristics::TuneProgress&, std::optional<double>) override {}
};

}  // namespace

AdaptiveRun::AdaptiveRun(std::shared_ptr<const Arm> csr, AdaptiveSetup setup)
    : setup_(std::move(setup)), policy_(setup_.nominees, setup_.policy) {
  // The dia step applies to SpMV on a matrix whose pipeline names diagonal-storage: decided here
  // once, not on every call that looks for a step.
  if (setup_.request.kind == kernels::KernelKind::SpMV && setup_.operand.matrix != nullptr) {
    dia_pending_ = heuristics::names_pass(heuristics::parse_pipeline(setup_.request.passes), "diagonal-storage");
  }
  arms_.resize(static_cast<std::size_t>(setup_.nominees) + 1);
  nominee_text_.resize(arms_.size());
  arms_[0] = csr_ = std::move(csr);
  storages_->keep(csr_->bound.schedule, csr_->bound.storage);
  // The csr arm is the hand-written baseline (the plan binds it: codegen::bind_baseline), named
  // as the tune report names one.
  nominee_text_[0] = arms_[0]->bound.baseline.empty() ? codegen::to_text(arms_[0]->bound.schedule)
                                                      : "impl=" + arms_[0]->bound.baseline;
  if (policy_.settled()) settle_locked();  // no nominee asked for
}

AdaptiveRun::~AdaptiveRun() {
  // A background compile is for a later plan: the plan's end does not wait for it (the compiler
  // is killed within ~0.1 s; the kernel is compiled again by a later plan that needs it).
  stop_compiling_.store(true);
  if (compiler_.joinable()) compiler_.join();
}

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
  const double lookup_estimate =
      kLookupS + (setup_.operand.fingerprint.empty() ? kFingerprintPerNonzeroS * nnz : 0.0);
  // The count pays only when the cheapest step after it does too: a format (dia's, the least a
  // nominee costs; stencil300 at 200 expected calls counted, 1-1.5 ms, then could not build it).
  const double count_estimate =
      kFormatFixedS + kDiaCountPerNonzeroS * nnz + kFormatFixedS + kFormatPerNonzeroS * nnz;
  // The tuning cache first (a decision there needs no count), unless the expected calls do not
  // pay for asking it, counting and a format after: then the diagonals first, a quarter of the
  // fingerprint's cost the cache's key needs (a matrix dia stores needs no model, nor the cache).
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
    prior = setup_.prior_only || policy_.chooses_by_list_order(estimate, read, then);
    if (prior) estimate = read;
    if (policy_.affords(estimate + then)) {
      if (!shortlist_) {  // read once (a cached file read), its time charged to the choice
        const double t0 = kernels::now_seconds();
        shortlist_ = codegen::shipped_schedules(setup_.request.kind);
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

void AdaptiveRun::lookup_step() {
  const double t0 = kernels::now_seconds();
  std::optional<heuristics::TuningKey> key;
  heuristics::CacheLookup found;
  std::string error;
  try {
    key = setup_.cache_key();
    found = heuristics::TuningCache(setup_.cache_dir).find(*key);
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  looked_up_ = true;
  key_ = key;
  policy_.charge(kernels::now_seconds() - t0, "the tuning cache asked", Cost::Choice);
  lookup_ = {{"path", found.path}, {"hit", found.hit.has_value()}};
  if (!error.empty()) lookup_["error"] = error;
  if (!found.problem.empty()) lookup_["problem"] = found.problem;  // a corrupt entry: ignored
  if (!found.hit) return;
  const std::string verdict = found.hit->report.value("verdict", std::string());
  lookup_["verdict"] = verdict;
  if (verdict != "gain") {
    stored_ = true;  // the cache's decision: nothing new to store
    policy_.no_gain("the tuning cache's decision for this matrix (" + found.path + "): csr");
    return;
  }
  // A cached gain: the only nominee, verified and judged on the caller's calls like any other
  // (what it gains here goes to the cache again, or a no-gain replaces it).
  cached_gain_ = true;
  // Served as the tune served it: a cached dia gain as dia.
  only_nominee(found.hit->schedule,
               implementation_of(found.hit->report) == codegen::kDiaBaseline,
               {{"tuning_cache", found.path}}, "the tuning cache's decision is the only nominee");
}

void AdaptiveRun::only_nominee(const codegen::SuperSchedule& s, bool dia, nlohmann::json nomination,
                               const std::string& why) {
  nominated_ = {s};
  dia_at_.reset();  // a cached gain replaces the dia step's nominee
  if (dia) dia_at_ = 0;
  nominee_text_[1] = dia ? "impl=" + std::string(codegen::kDiaBaseline) : codegen::to_text(s);
  nominated_done_ = true;
  next_nominee_ = 0;
  nomination_ = std::move(nomination);
  for (int k = 2; k <= setup_.nominees; ++k) policy_.failed(k, why);
}

void AdaptiveRun::dia_step() {
  const double t0 = kernels::now_seconds();
  const heuristics::DiaAdmission dia = heuristics::dia_admission(setup_.request.kind, *setup_.operand.matrix);
  std::lock_guard<std::mutex> lock(mu_);
  dia_pending_ = false;
  policy_.charge(kernels::now_seconds() - t0, "the diagonals counted", Cost::Choice);
  dia_note_ = dia.note;
  diagonals_ = dia.diagonals;
  if (!dia.admitted) return;
  // The dia baseline alone, and no model: on every matrix the diagonal-storage pass admitted
  // (held-out and generated stencils and bands, 18k-22M nonzeros) it ran 2.7-9x csr and beat
  // every generated nominee of the hybrid tune (experiments/README.md); choosing with the model
  // costs more than a short solve's calls (tune/README.md).
  only_nominee(csr_->bound.schedule, true, {{"dia", dia.note}},
               "the dia baseline is the only nominee (" + dia.note + ")");
}

std::string AdaptiveRun::as_run(codegen::SuperSchedule s) const {
  if (s.threads <= 0) s.threads = csr_->bound.args.threads;
  return codegen::to_text(codegen::canonicalize(s));
}

std::vector<codegen::SuperSchedule> AdaptiveRun::trimmed(std::vector<codegen::SuperSchedule> v) const {
  // csr's own schedule, in its fixed chunk (as the model ranks it) or its own (a list's `csr`
  // entry, chunk=auto), can only tie.
  const std::string csr = as_run(csr_->bound.schedule);
  const std::string csr_fixed = as_run(codegen::fixed_chunk(csr_->bound.schedule));
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const codegen::SuperSchedule& s) {
                           const std::string t = as_run(s);
                           return t == csr || t == csr_fixed;
                         }),
          v.end());
  // The model scores a kernel's chunk variants alike: its best few are often one kernel in
  // several chunks (SpMM n=64: four of `split=j:64|32 UC` dynamic, where the static twin the
  // hybrid tune chose on 14 of 22 held-out-like matrices came sixth). At most kPerKernel of a
  // kernel (its schedule but the dynamic chunk) go first, the rest of the ranking after them.
  std::vector<codegen::SuperSchedule> diverse, rest;
  std::map<std::string, std::size_t> per_kernel;
  for (codegen::SuperSchedule& s : v) {
    codegen::SuperSchedule k = s;
    if (k.chunk != codegen::kStaticChunk) k.chunk = 1;
    (per_kernel[as_run(k)]++ < kPerKernel ? diverse : rest).push_back(std::move(s));
  }
  diverse.insert(diverse.end(), rest.begin(), rest.end());
  if (diverse.size() > static_cast<std::size_t>(setup_.nominees))
    diverse.resize(static_cast<std::size_t>(setup_.nominees));
  return diverse;
}

void AdaptiveRun::prior_step() {
  const double t0 = kernels::now_seconds();
  // The listed schedules run with this plan's threads (the lists name the threads of the
  // machine that made them), as the model's nominees do (nominate: the request's), not csr's:
  // on a small matrix csr may run serially (chunk=auto), which is no reason to run the list's
  // parallel schedules on one thread. One the operand cannot store or run fails when it is
  // prepared.
  const int threads = setup_.request.threads > 0 ? setup_.request.threads : kernels::available_cpus();
  std::vector<codegen::SuperSchedule> v;
  for (codegen::SuperSchedule s : *shortlist_) {
    if (s.threads > 0) s.threads = threads;
    v.push_back(codegen::canonicalize(s));
  }
  v = trimmed(std::move(v));
  const double seconds = kernels::now_seconds() - t0;
  std::lock_guard<std::mutex> lock(mu_);
  nominated_done_ = true;
  prior_ = true;
  next_nominee_ = 0;
  nomination_ = {{"search", "prior"},
                 {"note", setup_.prior_only
                              ? "the short list's order (prior-only): its most frequent winners first"
                              : "the expected calls afford a nominee but not the model's choice: the "
                                "short list's most frequent winners, in its order"},
                 {"shortlist", shortlist_->size()},
                 {"seconds", seconds}};
  if (!dia_note_.empty()) nomination_["dia"] = dia_note_;
  policy_.charge(seconds, "choice (the short list's order)", Cost::Choice);
  for (int k = static_cast<int>(v.size()) + 1; k <= setup_.nominees; ++k)
    policy_.failed(k, "the short list has fewer schedules");
  for (std::size_t k = 0; k < v.size(); ++k) nominee_text_[k + 1] = codegen::to_text(v[k]);
  nominated_ = std::move(v);
}

void AdaptiveRun::nominate_step() {
  Nomination nom;
  std::string error;
  try {
    QuietObserver quiet;
    // The short list of the shipped kernels when there is one: ranking only what can run
    // without a compiler costs a fraction of ranking the admissible set (tune/README.md, "The
    // cost of the choice").
    // More than asked: csr's own schedule among them (with this plan's threads, as the space
    // holds it: codegen::fixed_chunk) would be a nominee that can only tie, and at most
    // kPerKernel nominees share a kernel (below).
    TuneOperand operand = setup_.operand;
    operand.diagonals = diagonals_;  // counted by the dia step: the space does not count again
    nom = nominate(operand, setup_.request, kPerKernel * static_cast<std::size_t>(setup_.nominees) * 2 + 1,
                   quiet, shortlist_->empty() ? nullptr : &*shortlist_);
    g_chose.store(true, std::memory_order_relaxed);
    nom.schedules = trimmed(std::move(nom.schedules));
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  nominated_done_ = true;
  next_nominee_ = 0;
  if (!error.empty()) {
    nomination_ = {{"error", error}};
    for (int k = 1; k <= setup_.nominees; ++k) policy_.failed(k, "no nomination: " + error);
    return;
  }
  nomination_ = nom.info;
  nomination_["seconds"] = nom.seconds;
  if (!dia_note_.empty()) nomination_["dia"] = dia_note_;
  policy_.charge(nom.seconds, "choice", Cost::Choice);
  for (int k = static_cast<int>(nom.schedules.size()) + 1; k <= setup_.nominees; ++k)
    policy_.failed(k, "the admissible set has fewer schedules");
  for (std::size_t k = 0; k < nom.schedules.size(); ++k)
    nominee_text_[k + 1] = codegen::to_text(nom.schedules[k]);
  nominated_ = std::move(nom.schedules);
}

void AdaptiveRun::nominee_step(std::size_t k) {
  const TuneRequest& r = setup_.request;
  const kernels::KernelKind kind = r.kind;
  const int arm = static_cast<int>(k) + 1;
  const double t0 = kernels::now_seconds();
  double t1 = 0.0;
  std::optional<Arm> a;
  std::string error;
  bool cached = false;
  // The arms prepared so far (csr's among them): a nominee takes a format or a kernel they
  // have (a schedule's chunk twins store one format and run one kernel) instead of building or
  // loading it again.
  std::vector<std::shared_ptr<const Arm>> before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    before.assign(arms_.begin(), arms_.begin() + arm);
  }
  try {
    a.emplace();
    codegen::GeneratedOptions g = r.generated;
    g.storages = storages_;
    const kernels::Problem sparse = sparse_problem(setup_.operand, kind, r.dtype);
    const std::int64_t dense = kind == kernels::KernelKind::SpMV ? 1 : r.dense;
    a->bound = dia_at_ == k ? codegen::bind_baseline(codegen::kDiaBaseline, sparse, dense, r.threads, g)
                            : codegen::prepare_binding(nominated_[k], sparse, dense, r.threads, g);
    detail::finish_arm(*a, kind, operand_nnz(setup_.operand));
    t1 = kernels::now_seconds();
    for (const std::shared_ptr<const Arm>& b : before)
      if (b && codegen::reuse_kernel(a->bound, b->bound)) break;
    cached = a->bound.fn != nullptr || codegen::in_cache(a->bound.source, r.generated.compiler);
    if (cached && a->bound.fn == nullptr) {
      codegen::load_kernel(a->bound, r.generated.compiler);
      g_loaded.store(true, std::memory_order_relaxed);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  const double t2 = kernels::now_seconds();
  if (t1 == 0.0) t1 = t2;  // the format failed: all of it was the format's
  std::unique_lock<std::mutex> lock(mu_);
  const std::string name = "nominee " + std::to_string(arm);
  policy_.charge(t1 - t0, name + ": format", Cost::Format);
  policy_.charge(t2 - t1, name + (cached ? ": kernel loaded" : ": kernel looked for"),
                 Cost::Load);
  if (!error.empty()) {
    policy_.failed(arm, error);
    return;
  }
  if (cached) {
    arms_[static_cast<std::size_t>(arm)] = std::make_shared<const Arm>(std::move(*a));
    policy_.ready(arm);
    return;
  }
  // Not compiled: never waited for. Compiled in the background, one kernel after the other,
  // when what is left of the budget pays for it; the nominee joins once its kernel is loaded
  // (the verification waits for it, csr serving the calls).
  const double left = policy_.budget_seconds() - std::max(0.0, policy_.cost_seconds());
  if (left < kCompileEstimateS) {
    policy_.failed(arm, "its kernel is not compiled (the calls cannot pay for compiling it now)");
    return;
  }
  policy_.charge(kCompileEstimateS, "compile of nominee " + std::to_string(arm) + " (estimated)",
                 Cost::Compile);
  to_compile_.emplace_back(arm, std::make_shared<Arm>(std::move(*a)));
  if (compiling_) return;  // the running thread takes it next
  compiling_ = true;
  if (compiler_.joinable()) compiler_.join();  // ended: it found its queue empty
  codegen::CompilerOptions copts = r.generated.compiler;
  copts.cancelled = [this] { return stop_compiling_.load(); };
  compiler_ = std::thread([this, opts = std::move(copts)] { compile_queued(opts); });
}

void AdaptiveRun::compile_queued(codegen::CompilerOptions opts) {
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
  for (;;) {
    std::pair<int, std::shared_ptr<Arm>> next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // Settled (or ended): the kernels still queued are left for a plan that needs them.
      if (to_compile_.empty() || stop_compiling_.load() || policy_.settled()) {
        to_compile_.clear();
        compiling_ = false;
        return;
      }
      next = std::move(to_compile_.front());
      to_compile_.erase(to_compile_.begin());
    }
    const auto& [arm, a] = next;
    const double t0 = kernels::now_seconds();
    std::string error;
    try {
      codegen::load_kernel(a->bound, opts);
      g_loaded.store(true, std::memory_order_relaxed);
    } catch (const std::exception& e) {
      error = e.what();
    }
    const double took = kernels::now_seconds() - t0;
    std::lock_guard<std::mutex> lock(mu_);
    // Settled meanwhile (or ended): this kernel stays in the compile cache for a later plan.
    if (policy_.settled() || stop_compiling_.load()) continue;
    const std::string name = "nominee " + std::to_string(arm);
    if (!error.empty()) {
      policy_.failed(arm, "its kernel did not compile: " + error);
      continue;
    }
    // What it took from the cores beside the calls is its CPU time (the compiler's processes'
    // rusage): the estimate charged when it was queued is corrected to it (at nice 19 its wall
    // time, 6.7-9.7 s beside the calls on the AMD EPYC VM, says little).
    const double cpu = a->bound.compile.compile_cpu_seconds;
    policy_.charge(cpu - kCompileEstimateS,
                   name + format(": kernel compiled in the background in %.2f s, %.2f s of CPU", took, cpu) +
                       format(" (charged instead of the %.2f s estimated)", kCompileEstimateS),
                   Cost::Compile);
    arms_[static_cast<std::size_t>(arm)] = std::move(next.second);
    policy_.ready(arm);
  }
}

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
      policy_.verified(step.verify, ok, t_nominee, why);
      policy_.charge(t_check, {}, Cost::Verify);
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
      // Nor is a no-gain among the short list's first entries (prior_step): the model's
      // nominees were not tried.
      const bool prior_no_gain = prior_ && policy_.verdict() == "no-gain";
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
  std::string fingerprint;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (key_) fingerprint = key_->fingerprint;
  }
  if (fingerprint.empty()) fingerprint = setup_.fingerprint();
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
