// How an adaptive plan is set up (adaptive_setup: the library's plans and `tune --adaptive`
// alike) and `tune --adaptive`'s drive of one on calls of its own (drive_adaptive).
#include <memory>
#include <mutex>

#include "waco/codegen/compiler.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/tune/adaptive_run.hpp"
#include "waco/tune/observer.hpp"

namespace waco::tuning {

namespace {

/// The dense size a request runs its kernel with (1 for SpMV; 0: the kernel's default).
int dense_of(const TuneRequest& r) {
  if (r.kind == kernels::KernelKind::SpMV) return 1;
  return r.dense > 0 ? r.dense : kernels::default_dense_size(r.kind);
}

}  // namespace

NomineeChoice default_nominee_choice(kernels::KernelKind kind) {
  return kind == kernels::KernelKind::SpMV ? NomineeChoice::List : NomineeChoice::Model;
}

AdaptiveSetup adaptive_setup(const TuneOperand& operand, std::shared_ptr<const void> keep,
                             const TuneRequest& request, int nominees,
                             std::function<std::string()> fingerprint) {
  if (!ranks_with_model(request))
    throw kernels::Error("an adaptive plan tries the cost model's nominees: its search must rank "
                         "with the model (\"model\" or \"anns\"), not \"" + request.search + "\"",
                         "use the search \"model\", or tune without adaptive");
  if (nominees < 1)
    throw kernels::Error("an adaptive plan needs at least 1 nominee, not " + std::to_string(nominees));
  // The passes, and a model the caller named: before any work. The default model (the shipped
  // one, or this machine's calibration of it) is found and read by the plan's choice, when the
  // calls pay for it: finding its folder and reading its header took 0.15-0.25 ms, more than
  // making the csr plan (a CG solve of 100 SpMVs on a 2.4k-nonzero matrix, its process's one
  // plan: 33% longer than with a csr plan). A default model that needs LibTorch (a replaced
  // file) then fails the choice: the plan serves csr and its report says why.
  check_request(request, !request.model.empty());
  AdaptiveSetup setup{operand, std::move(keep), request, nominees, {}, {}, request.plan_cache, false, {}};
  // The background thread must not call the caller's interrupt (it is the calling thread's).
  setup.request.cancel = nullptr;
  // The plan's nominees share kernels by its own rule (kPerKernel, adaptive_run.cpp): the cap
  // on one loop structure was measured for a tune's side-by-side selection, not for a plan.
  setup.request.per_structure = 0;
  setup.choice = default_nominee_choice(request.kind);
  setup.policy.expected_calls = request.expected_calls;
  setup.policy.share = request.tuning_share;
  // Without the caller's: computed once (the key and the report both ask for it).
  struct Memo {
    std::once_flag once;
    std::string value;
  };
  setup.fingerprint = fingerprint ? std::move(fingerprint) : [operand, memo = std::make_shared<Memo>()] {
    std::call_once(memo->once, [&] {
      memo->value = !operand.fingerprint.empty() ? operand.fingerprint
                    : operand.matrix             ? kernels::fingerprint_hex(*operand.matrix)
                                                 : kernels::fingerprint_hex(*operand.tensor);
    });
    return memo->value;
  };
  if (!request.no_plan_cache) {
    const kernels::KernelKind kind = request.kind;
    const int dense = dense_of(request);
    // Under the operand's content key (kernels::content_key), taken once, when the plan first
    // asks the cache: not its fingerprint, whose serial hash was most of an adaptive plan's first
    // step (13-39 csr calls of SpMV on 1k-760k-nonzero matrices, session 85).
    setup.cache_key = [operand, memo = std::make_shared<Memo>(), kind, dense,
                       threads = request.threads, compiler = request.generated.compiler,
                       dtype = request.dtype] {
      std::call_once(memo->once, [&] {
        memo->value = operand.matrix ? kernels::content_key_hex(*operand.matrix)
                                     : kernels::content_key_hex(*operand.tensor);
      });
      return heuristics::TuningKey{
          memo->value, kind, dense, threads, heuristics::machine_identity(compiler), dtype};
    };
    setup.ask_cache = !request.refresh;
  }
  return setup;
}

nlohmann::json drive_adaptive(const TuneOperand& operand, const TuneRequest& given,
                              const AdaptiveDrive& drive, TuneObserver& obs) {
  TuneRequest request = given;
  const kernels::KernelKind kind = request.kind;
  const int dense = dense_of(request);
  // The fingerprint is left to the run (AdaptiveSetup::fingerprint): taken, and charged, when
  // it first asks the tuning cache, as a library plan's is.
  const TuneOperand& op = operand;
  AdaptiveSetup setup = adaptive_setup(op, nullptr, request, drive.nominees);
  if (drive.choice) setup.choice = *drive.choice;
  // csr (csf) serves first, and whenever no nominee beats it: the hand-written baseline.
  const std::string reference = kernels::needs_tensor(kind) ? "csf" : "csr";
  const kernels::Problem sparse = sparse_problem(op, kind, request.dtype);
  auto csr = std::make_shared<const Arm>(make_arm(
      sparse, *codegen::schedule_shortcut(kind, reference), dense, request.threads,
      request.generated, reference));
  // The dense operands of a tune (seeded), in the request's type; the output one call writes.
  const kernels::DenseOperands ops =
      kernels::make_dense_operands(kind, op.matrix, op.tensor, dense, request.seed, request.dtype);
  const bool two_inputs = codegen::kernel_spec(kind).inputs.size() > 1;
  const void* in0 = ops.B.data.raw();
  const void* in1 = two_inputs ? ops.C.data.raw() : nullptr;
  kernels::Values out;
  out.assign(request.dtype, static_cast<std::size_t>(csr->bound.out_size));
  const ArmCall call = [&](const Arm& a, void* o) { a.run(in0, in1, o, dense); };

  const std::int64_t expected = request.expected_calls;
  const std::int64_t limit = drive.calls > 0 ? drive.calls : expected > 0 ? expected : drive.max_calls;
  const bool until_settled = drive.calls <= 0 && expected <= 0;
  // A few csr calls first, timed by neither: the process's cold start (the OpenMP team, the
  // operands' first touch) is charged to neither the adaptive calls nor csr's that follow.
  for (int i = 0; i < 3; ++i) call(*csr, out.raw());
  const heuristics::DecisionRule rule = setup.policy.rule;  // the plan's judgment's, for the check
  AdaptiveRun run(csr, std::move(setup));
  const double t0 = kernels::now_seconds();
  double next_note = t0 + 1.0;
  std::int64_t made = 0;
  while (made < limit) {
    run.call(out.raw(), out.size(), call);
    ++made;
    if (until_settled && run.settled()) break;
    if (request.stop != nullptr && *request.stop != 0)
      throw kernels::Cancelled("tune --adaptive: stopped");
    // The caller's callback and the clock every 256 calls: the csr calls compared below pay
    // for neither, so the calls here barely do.
    if (made % 256 != 0) continue;
    if (request.cancel && request.cancel()) throw kernels::Cancelled("tune --adaptive: stopped");
    const double now = kernels::now_seconds();
    if (now >= next_note) {
      next_note = now + 1.0;
      const double per_call = (now - t0) / static_cast<double>(made);
      obs.note(format("tune: adaptive: %lld of %s%lld calls, %s", static_cast<long long>(made),
                      until_settled ? "at most " : "", static_cast<long long>(limit),
                      run.verdict().c_str()) +
               (until_settled ? std::string()
                              : ", ETA " + kernels::duration_text(per_call * static_cast<double>(limit - made))));
    }
  }
  const double wall = kernels::now_seconds() - t0;
  nlohmann::json report = run.report();
  nlohmann::json d = {{"calls", made},
                      {"settled", run.settled()},
                      {"wall_s", wall},
                      {"csr_wall_s", nullptr},
                      {"wall_ratio", nullptr}};
  if (drive.compare && made > 0) {
    // The same calls served by csr alone, after: the time to solution without tuning.
    obs.note(format("tune: adaptive: timing %lld csr calls to compare", static_cast<long long>(made)));
    const double c0 = kernels::now_seconds();
    for (std::int64_t i = 0; i < made; ++i) call(*csr, out.raw());
    const double csr_wall = kernels::now_seconds() - c0;
    d["csr_wall_s"] = csr_wall;
    d["wall_ratio"] = csr_wall > 0 ? nlohmann::json(wall / csr_wall) : nlohmann::json();
    // A gain checked in this process on pairs that took no part in the decision: the chosen
    // kernel and csr side by side as bench times them (kernels::time_interleaved: each timed
    // call after untimed ones of its own for at least kernels::kDefaultSettleSeconds, the order
    // alternating round by round, so that neither is always the one that finds the other's
    // effects), judged by the rule of the plan's judgment (heuristics::judge_gain). A plan's
    // speedup is a claim about the process it ran in; this says whether it holds there a moment
    // later.
    const std::shared_ptr<const Arm> chosen = run.current();
    if (run.settled() && run.verdict() == "gain" && chosen != csr && drive.check_pairs > 0) {
      obs.note(format("tune: adaptive: checking the gain on %d fresh pairs", drive.check_pairs));
      kernels::TimingOptions t;
      t.warmup = 0;
      t.repeats = drive.check_pairs;
      t.threads = request.threads;
      t.settle_s = kernels::kDefaultSettleSeconds;
      t.min_run_s = kernels::kDefaultMinRunSeconds;
      const std::vector<kernels::TimingStats> times = kernels::time_interleaved(
          {[&] { call(*csr, out.raw()); }, [&] { call(*chosen, out.raw()); }}, t, 1);
      heuristics::Measurement ref, mine;
      ref.status = mine.status = heuristics::MeasureStatus::Ok;
      ref.seconds = times[0].seconds;
      ref.median_s = times[0].median;
      mine.seconds = times[1].seconds;
      mine.median_s = times[1].median;
      d["check"] = heuristics::judge_gain(mine, ref, rule).to_json();
    }
  }
  report["drive"] = d;
  return report;
}

}  // namespace waco::tuning
