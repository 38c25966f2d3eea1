// An adaptive plan's run time (adaptive_run.hpp): its making, and the preparation steps run
// between calls (the tuning cache asked, the diagonals counted, the nominees chosen by the model or
// the short list's order, a nominee's format and kernel, the background compile). Which step is
// due and what it costs: adaptive_estimates.cpp; the calls: adaptive_calls.cpp.
#include "waco/tune/adaptive_run.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "waco/codegen/compiler.hpp"
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
#include "adaptive_run_internal.hpp"

namespace waco::tuning {

using detail::g_chose;
using detail::g_loaded;
using detail::operand_nnz;

namespace {

/// What compiling one kernel is taken to cost (0.2-1 s on the development VMs).
constexpr double kCompileEstimateS = 0.5;

/// Nominees that may share a kernel (one schedule in several dynamic chunks) before others go.
constexpr std::size_t kPerKernel = 2;

/// A tuning observer that keeps nothing: the preparing thread must not print from the
/// background (Options::progress is called from the tuning call's thread only).
class QuietObserver : public TuneObserver {
 public:
  void note(const std::string&) override {}
  void warning(const std::string&) override {}
  void progress(const heuristics::TuneProgress&, std::optional<double>) override {}
};

}  // namespace

namespace detail {

std::int64_t operand_nnz(const TuneOperand& o) {
  return o.tensor ? o.tensor->nnz() : o.matrix ? o.matrix->nnz() : 0;
}

}  // namespace detail

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

namespace {

/// The nominees of a ranked list, offered in its order (AdaptiveRun::trimmed): csr's own
/// schedule left out in any chunk it runs in (its own, or the fixed one the model ranks: it can
/// only tie), at most kPerKernel of a kernel first, the rest of the ranking after them, `wanted`
/// in all.
class NomineeTrim {
 public:
  /// `threads`: what csr runs with (its binding's), which a schedule naming none runs with.
  NomineeTrim(const codegen::SuperSchedule& csr, int threads, std::size_t wanted)
      : threads_(threads),
        wanted_(wanted),
        csr_(as_run(csr)),
        csr_fixed_(as_run(codegen::fixed_chunk(csr))) {}

  /// Takes the list's next schedule; false once no later one can be among the first `wanted`.
  bool offer(codegen::SuperSchedule s) {
    const std::string t = as_run(s);
    if (t == csr_ || t == csr_fixed_) return !full();
    // The model scores a kernel's chunk variants alike: its best few are often one kernel in
    // several chunks (SpMM n=64: four of `split=j:64|32 UC` dynamic, where the static twin the
    // hybrid tune chose on 14 of 22 held-out-like matrices came sixth).
    codegen::SuperSchedule k = s;
    if (k.chunk != codegen::kStaticChunk) k.chunk = 1;
    (per_kernel_[as_run(k)]++ < kPerKernel ? diverse_ : rest_).push_back(std::move(s));
    return !full();
  }

  std::vector<codegen::SuperSchedule> take() && {
    diverse_.insert(diverse_.end(), rest_.begin(), rest_.end());
    if (diverse_.size() > wanted_) diverse_.resize(wanted_);
    return std::move(diverse_);
  }

 private:
  bool full() const { return diverse_.size() >= wanted_; }
  /// `s` as the plan runs it (with csr's threads when it names none), canonical, as text.
  std::string as_run(codegen::SuperSchedule s) const {
    if (s.threads <= 0) s.threads = threads_;
    return codegen::to_text(codegen::canonicalize(s));
  }

  int threads_;
  std::size_t wanted_;
  std::string csr_, csr_fixed_;
  std::vector<codegen::SuperSchedule> diverse_, rest_;
  std::map<std::string, std::size_t> per_kernel_;
};

}  // namespace

std::vector<codegen::SuperSchedule> AdaptiveRun::trimmed(
    std::vector<codegen::SuperSchedule> v) const {
  NomineeTrim trim(csr_->bound.schedule, csr_->bound.args.threads,
                   static_cast<std::size_t>(setup_.nominees));
  for (codegen::SuperSchedule& s : v)
    if (!trim.offer(std::move(s))) break;
  return std::move(trim).take();
}

void AdaptiveRun::prior_step() {
  const double t0 = kernels::now_seconds();
  // The listed schedules run with this plan's threads (the lists name the threads of the
  // machine that made them), as the model's nominees do (nominate: the request's), not csr's:
  // on a small matrix csr may run serially (chunk=auto), which is no reason to run the list's
  // parallel schedules on one thread. One the operand cannot store or run fails when it is
  // prepared. The list is parsed only as far as the nominees need (its first ~7 of ~40 lines:
  // parsing all of them cost 0.2-0.3 ms, ~50 calls of a 5-us csr).
  const int threads = setup_.request.threads > 0 ? setup_.request.threads : kernels::available_cpus();
  NomineeTrim trim(csr_->bound.schedule, csr_->bound.args.threads,
                   static_cast<std::size_t>(setup_.nominees));
  std::size_t read = 0;
  for (const std::string& text : *shortlist_) {
    ++read;
    std::optional<codegen::SuperSchedule> s = codegen::shipped_schedule(setup_.request.kind, text);
    if (!s) continue;
    if (s->threads > 0) s->threads = threads;
    if (!trim.offer(codegen::canonicalize(*s))) break;
  }
  std::vector<codegen::SuperSchedule> v = std::move(trim).take();
  const double seconds = kernels::now_seconds() - t0;
  std::lock_guard<std::mutex> lock(mu_);
  nominated_done_ = true;
  prior_ = true;
  next_nominee_ = 0;
  nomination_ = {
      {"search", "prior"},
      {"note", setup_.choice == NomineeChoice::List
                   ? "the short list's order: its most frequent winners first"
                   : "the expected calls afford a nominee but not the model's choice: the "
                     "short list's most frequent winners, in its order"},
      {"shortlist", shortlist_->size()},
      {"read", read},
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
  // The short list's schedules parsed (kept per file after a process's first).
  double parse_s = 0.0;
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
    const double t0 = kernels::now_seconds();
    const std::vector<codegen::SuperSchedule> among =
        shortlist_->empty() ? std::vector<codegen::SuperSchedule>()
                            : codegen::shipped_schedules(setup_.request.kind);
    parse_s = kernels::now_seconds() - t0;
    nom = nominate(operand, setup_.request,
                   kPerKernel * static_cast<std::size_t>(setup_.nominees) * 2 + 1, quiet,
                   among.empty() ? nullptr : &among);
    g_chose.store(true, std::memory_order_relaxed);
    nom.schedules = trimmed(std::move(nom.schedules));
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  nominated_done_ = true;
  next_nominee_ = 0;
  policy_.charge(parse_s, {}, Cost::Choice);
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

}  // namespace waco::tuning
