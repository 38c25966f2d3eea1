// An adaptive plan's run time (api/README.md, "Adaptive plans"; tune/README.md): csr serves the
// caller's calls at once; then, on the caller's own thread between calls and only while the budget of the policy
// (tune/adaptive.hpp) allows it, one preparation step at a time: the cost model's nominees (among
// the shipped kernels' schedules when their folders list them), a nominee's format (shared with
// csr's or another nominee's that stores alike), its kernel loaded from the compile cache or a
// shipped folder. While the budget has not grown enough for the next step, csr serves the calls
// untimed and without the lock. A kernel the cache lacks is not
// waited for: it is compiled by a background thread of low priority, when the calls can pay for
// it, and the nominee joins once its kernel is loaded (until then the policy's verification
// waits for it, csr serving the calls). The policy tries the prepared nominees on the caller's
// calls, each verified against csr on a real call before any of its results is returned, and
// settles. Nothing runs beside the caller's kernels but that compiler. waco::Plan (libwaco) runs
// one on the application's calls, `waco-hybrid tune --adaptive` on calls it makes itself: the same
// run, so both answer alike.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/generated_kernel.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/values.hpp"
#include "waco/tune/adaptive.hpp"
#include "waco/tune/tune.hpp"

namespace waco::tuning {

/// One way to serve a call: a schedule bound to the plan's matrix.
struct Arm {
  codegen::BoundKernel bound;
  bool sddmm_in_order = true;  ///< SDDMM: the format stores the nonzeros in CSR order, no padding

  /// One call into `out` in the caller's layout: for SDDMM one value a nonzero in the operand's
  /// (CSR) order, whatever order the format stores them in; otherwise as bound.run.
  void run(const void* in0, const void* in1, void* out, std::int64_t dense) const;
};

/// The problem of the sparse operand alone (no dense operands), values of `dtype`.
kernels::Problem sparse_problem(const TuneOperand& operand, kernels::KernelKind kind,
                                kernels::Dtype dtype);

/// Binds `s` to the operand: the format built, the kernel compiled when not cached, and loaded.
/// With `baseline` "csr" or "csf" (a tune's result: tuning::implementation_of), that hand-written
/// baseline on its schedule's format instead (codegen::bind_baseline; `s` is then the csr / csf
/// schedule); another name is a kernels::Error.
Arm make_arm(const kernels::Problem& sparse, const codegen::SuperSchedule& s, std::int64_t dense,
             int threads, const codegen::GeneratedOptions& g, const std::string& baseline = "");

/// Runs one call on an arm, writing the caller's output at `out` (values of the arm's dtype).
using ArmCall = std::function<void(const Arm& arm, void* out)>;

/// How an adaptive plan chooses its nominees.
enum class NomineeChoice {
  /// The model ranks the shipped kernels' short list (the admissible set without one), falling
  /// back to the list's own order when the expected calls afford a nominee but not the model's
  /// choice before it.
  Model,
  /// The short list's own order (its first entries: the committed dataset's most frequent
  /// winners), never the model; the model ranks only where there is no list.
  List,
};

/// The kernel's default (api/README.md, "SpMV: the short list's order by default"): List for
/// SpMV, whose list's first entries gained as often and as much as the model's nominees on 16
/// real matrices, the plans costing ~60% as many csr calls at the median (a process's first
/// choice by the model is 0.3-1.9 thousand csr calls of a small matrix); Model for the others
/// (SpMM's list order reached 0.85 of the hybrid tune's kernel at the median).
NomineeChoice default_nominee_choice(kernels::KernelKind kind);

/// What an adaptive plan is set up with.
struct AdaptiveSetup {
  TuneOperand operand;                   ///< the sparse operand (its fingerprint may be unset)
  std::shared_ptr<const void> keep;      ///< what keeps the operand alive (nominees are built from it)
  TuneRequest request;                   ///< kind, dense, threads, dtype, passes, model, generated
  int nominees = 5;
  AdaptiveOptions policy;
  /// The tuning cache's key of this plan (empty: no cache), taken when first needed (the machine's
  /// identity costs ~0.1-0.3 ms the first time in a process, the operand's content key ~1-2 ns a
  /// nonzero: more than a short solve's every call).
  std::function<heuristics::TuningKey()> cache_key;
  std::string cache_dir;
  /// Whether the plan asks the tuning cache before choosing (a step like the others, when the
  /// calls pay for it): a cached gain is the only nominee, a cached no-gain settles on csr. The
  /// decision is stored whenever cache_key is set.
  bool ask_cache = false;
  /// The operand's fingerprint (kernels::fingerprint_hex), computed when first needed: for
  /// the report (a serial hash of ~10 ns a nonzero; the tuning cache's key holds the faster
  /// content key since session 85).
  std::function<std::string()> fingerprint;
  /// How nominees are chosen (NomineeChoice): adaptive_setup sets the kernel's default
  /// (default_nominee_choice); `tune --adaptive --prior-choice | --model-choice` set either.
  NomineeChoice choice = NomineeChoice::Model;
};

/// The setup of an adaptive run for `request` (resolved threads; dense 0: the kernel's default):
/// its expected calls and tuning share; the tuning cache of request.plan_cache (none with
/// no_plan_cache; asked first unless refresh), keyed as a tune's decision. Throws kernels::Error
/// when the request's search does not rank with the model or nominees < 1, and what
/// check_request throws (the backend of a model the request names; the default model's is
/// found out by the plan's choice, whose failure leaves the plan on csr). `fingerprint` gives
/// the operand's when first needed (unset: operand.fingerprint, or computed from the operand
/// then).
AdaptiveSetup adaptive_setup(const TuneOperand& operand, std::shared_ptr<const void> keep,
                             const TuneRequest& request, int nominees,
                             std::function<std::string()> fingerprint = {});

class AdaptiveRun {
 public:
  /// Starts serving with `csr`.
  AdaptiveRun(std::shared_ptr<const Arm> csr, AdaptiveSetup setup);
  /// Waits for a background compilation in progress.
  ~AdaptiveRun();
  AdaptiveRun(const AdaptiveRun&) = delete;
  AdaptiveRun& operator=(const AdaptiveRun&) = delete;

  /// One call: a preparation step first when one is due and affordable; then `run` on the arm
  /// the policy chooses, timed; a verification call also runs a nominee into a copy of `out`
  /// (`out_size` values of the plan's type) and compares.
  void call(void* out, std::size_t out_size, const ArmCall& run);

  /// The arm serving calls now (csr while exploring).
  std::shared_ptr<const Arm> current() const;
  std::string verdict() const;
  /// Whether it settled (no lock taken; true also while a recheck of its gain runs).
  bool settled() const { return serving_.load(std::memory_order_acquire) != nullptr; }
  std::optional<double> speedup() const;
  std::optional<double> break_even_calls() const;
  std::int64_t calls() const;
  std::int64_t exploring_calls() const;
  /// The plan's report: the policy's state, the nominees, what preparing them cost.
  nlohmann::json report() const;

 private:
  /// The next preparation step, if one is due and the budget allows its estimated cost (with
  /// mu_ held); runs it without the lock and charges what it took.
  void maybe_prepare(std::unique_lock<std::mutex>& lock);
  void lookup_step();         ///< asks the tuning cache (setup_.ask_cache)
  void nominate_step();
  /// Nominees in the short list's own order (the committed dataset's most frequent winners
  /// first), without the model: what the calls afford when the model's choice does not fit.
  void prior_step();
  /// The nominees of a ranked list: csr's own schedule out (in any chunk it runs in: its own
  /// or the fixed one the model ranks), at most kPerKernel of a kernel
  /// first, setup_.nominees of them.
  std::vector<codegen::SuperSchedule> trimmed(std::vector<codegen::SuperSchedule> v) const;
  /// `s` the only nominee (dia: the dia baseline, `s` the csr schedule naming it), `nomination`
  /// the report's, the other slots failed with `why`. Under mu_.
  void only_nominee(const codegen::SuperSchedule& s, bool dia, nlohmann::json nomination,
                    const std::string& why);
  /// Before the model's choice: when the diagonal-storage pass's rule admits the dia baseline,
  /// it is the only nominee (no model, nothing compiled).
  void dia_step();
  void nominee_step(std::size_t k);
  /// The policy settled, or a recheck ended: publish the choice (the first time, free the
  /// others) and when the next recheck begins.
  void settle_locked();
  void store_decision();      ///< the settled decision into the tuning cache (one it made)

  AdaptiveSetup setup_;
  mutable std::mutex mu_;
  AdaptivePolicy policy_;
  std::vector<std::shared_ptr<const Arm>> arms_;  ///< [0] csr, then the nominees once prepared
  std::vector<std::string> nominee_text_;
  std::vector<codegen::SuperSchedule> nominated_;
  /// The position in nominated_ of the dia baseline's arm (its entry there the csr schedule,
  /// which names it), when the diagonal-storage pass admitted it or the tuning cache's gain is dia.
  std::optional<std::size_t> dia_at_;
  /// Verification buffers, kept for the next verification (one per verification in flight).
  std::vector<kernels::Values> spare_;
  /// The formats of csr and the nominees, shared by the nominees that store alike.
  std::shared_ptr<codegen::StorageCache> storages_ = std::make_shared<codegen::StorageCache>();
  /// The shipped kernels' schedule texts (codegen::shipped_schedule_texts; empty: the model
  /// ranks the whole admissible set), read once the budget affords ranking a short list; the
  /// list's order parses its first few, the model's choice all of them.
  std::optional<std::vector<std::string>> shortlist_;
  nlohmann::json nomination_ = nullptr;
  std::optional<heuristics::TuningKey> key_;  ///< setup_.cache_key(), once taken
  nlohmann::json lookup_ = nullptr;           ///< what the tuning cache answered
  bool looked_up_ = false;
  /// The dia step is still to come: SpMV on a matrix, the pipeline naming diagonal-storage.
  bool dia_pending_ = false;
  std::string dia_note_;  ///< dia_step's reason either way
  std::int64_t diagonals_ = -1;  ///< what dia_step counted (-1: no count)
  bool cached_gain_ = false;  ///< the only nominee is the tuning cache's gain
  bool nominated_done_ = false;
  bool prior_ = false;  ///< the nominees are the short list's order (prior_step), not the model's
  std::size_t next_nominee_ = 0;  ///< the next nominee to prepare (0-based)
  bool preparing_ = false;        ///< a caller runs a step now
  std::atomic<std::int64_t> settled_calls_{0};
  /// Calls csr may serve untimed, without the lock, while the plan waits for the calls to pay
  /// for its next step (AdaptivePolicy::calls_until_affordable), and those served so (folded
  /// into the policy's calls by the next call that takes the lock).
  std::atomic<std::int64_t> quiet_{0};
  std::atomic<std::int64_t> quiet_served_{0};
  /// What the last call that took the lock cost beyond its kernels (charged as overhead): the
  /// price of looking at the budget again, which a wait's length must amortize (call()).
  double look_s_ = 0.0;
  std::shared_ptr<const Arm> csr_;
  /// The arm serving settled calls (set before settled_; a recheck that reverts sets csr's),
  /// and the same for the calls that take no lock: the arms it pointed to stay alive.
  std::shared_ptr<const Arm> chosen_;
  std::atomic<const Arm*> serving_{nullptr};
  /// settled_calls_ at which the next recheck of a gain begins (AdaptivePolicy::recheck_in).
  std::atomic<std::int64_t> recheck_at_{INT64_MAX};
  /// Calls take the path without the lock: settled, and no recheck running.
  std::atomic<bool> settled_{false};
  bool stored_ = false;
  /// The speedup of the decision last stored in the tuning cache: a recheck that moves it by
  /// more than 2% stores the decision again (the rechecks' figure, as the caller runs it).
  double stored_speedup_ = 0.0;
  nlohmann::json cache_result_ = nullptr;
  /// Nominees whose kernels the background thread compiles, one after the other (its queue;
  /// each with its format built), under mu_; the thread runs while it is not empty.
  std::vector<std::pair<int, std::shared_ptr<Arm>>> to_compile_;
  void compile_queued(codegen::CompilerOptions opts);  ///< the background thread's loop
  std::thread compiler_;          ///< the background compilation
  bool compiling_ = false;
  std::atomic<bool> stop_compiling_{false};  ///< set by the destructor: the compiler is killed
};

/// What `waco-hybrid tune --adaptive` does instead of a tune: an adaptive run driven by `calls`
/// calls of its own on the seeded dense operands of a tune, as an application's would be, then
/// (with `compare`) the same calls served by csr alone, for the time to solution of each.
struct AdaptiveDrive {
  int nominees = 5;
  /// Calls to make: with expected calls, 0 means that many; without, 0 means until the run
  /// settles, at most max_calls.
  std::int64_t calls = 0;
  std::int64_t max_calls = 1000000;
  /// csr alone on as many calls afterwards (wall_ratio); and when the run settled on a gain,
  /// `check_pairs` pairs of the chosen kernel and csr that took no part in the decision ("check").
  bool compare = true;
  int check_pairs = 48;
  /// AdaptiveSetup::choice, when set (else the kernel's default).
  std::optional<NomineeChoice> choice;
};

/// Drives one adaptive run (above), after 3 untimed csr calls (the process's cold start), and
/// returns its report (AdaptiveRun::report, as
/// waco::Plan::report_json gives it) with "drive": the calls made, whether it settled, the wall
/// time of the calls (preparation included) and, with compare, csr's wall time for as many calls
/// and their ratio, and after a gain "check": the gain judged again (heuristics::judge_gain's
/// Verdict) on fresh pairs of the chosen kernel and csr, in alternating order. Progress (calls,
/// verdict, ETA) goes to `obs` about once a second; request.stop or request.cancel end it with
/// kernels::Cancelled.
nlohmann::json drive_adaptive(const TuneOperand& operand, const TuneRequest& request,
                              const AdaptiveDrive& drive, TuneObserver& obs);

}  // namespace waco::tuning
