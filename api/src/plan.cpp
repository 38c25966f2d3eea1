// waco::tune, waco::Plan: the decision from the tuning cache or from the tune pipeline run in this
// process (tuning::run; measurements in the isolated measuring worker), then the format built and
// the kernel loaded here (codegen::bind_schedule).

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/tune/adaptive_run.hpp"
#include "waco/tune/in_process.hpp"
#include "waco/tune/searcher.hpp"
#include "api_internal.hpp"
#include "plan_file.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/economy.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/grown_block.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/backend.hpp"
#include "waco/tune/settings.hpp"
#include "waco/tune/tune.hpp"

namespace waco {

namespace fs = std::filesystem;
using kernels::KernelKind;

struct Plan::Impl {
  Kernel kernel = Kernel::SpMV;
  std::shared_ptr<const tuning::Arm> arm;        ///< the schedule that serves (a fixed plan)
  std::shared_ptr<tuning::AdaptiveRun> adaptive;  ///< an adaptive plan's run time (else null)
  nlohmann::json report;  ///< the deciding tune's report (null for make_plan)
  std::string verdict;
  double speedup = 0.0;
  double break_even = -1.0;
  double tuning_s = 0.0;
  bool from_cache = false;
  int threads = 1;
  int dense = 1;
  kernels::Dtype dtype = kernels::Dtype::F32;  ///< its matrix's: the type of the arrays it takes
  double max_padding = 20.0;  ///< the format builder's bound (Options::max_padding), for headers
  std::string fingerprint;  ///< of its matrix, taken when it was bound (not an adaptive plan's)
  /// An adaptive plan's matrix (its run keeps it alive anyway): the fingerprint is computed when
  /// first asked, not when the plan is made.
  std::shared_ptr<const Matrix> matrix;
  std::vector<std::int64_t> dims;
  std::int64_t nnz = 0;

  std::string fingerprint_of() const { return matrix ? matrix->fingerprint() : fingerprint; }
  /// The arm serving calls now.
  std::shared_ptr<const tuning::Arm> serving() const { return adaptive ? adaptive->current() : arm; }
  /// One call: `run` on the serving arm (an adaptive plan's policy chooses, times, verifies);
  /// `out_size` values at out are the call's output.
  void serve(void* out, std::size_t out_size, const tuning::ArmCall& run) const {
    if (adaptive)
      adaptive->call(out, out_size, run);
    else
      run(*arm, out);
  }

  static Plan wrap(std::shared_ptr<const Impl> impl) { return Plan(std::move(impl)); }
};

namespace {

namespace settings = tuning::settings;

KernelKind kind_of(Kernel k) {
  switch (k) {
    case Kernel::SpMV: return KernelKind::SpMV;
    case Kernel::SpMM: return KernelKind::SpMM;
    case Kernel::SDDMM: return KernelKind::SDDMM;
    case Kernel::MTTKRP: return KernelKind::MTTKRP;
  }
  throw Error("unknown kernel");
}

Kernel kernel_of(KernelKind k) {
  switch (k) {
    case KernelKind::SpMV: return Kernel::SpMV;
    case KernelKind::SpMM: return Kernel::SpMM;
    case KernelKind::SDDMM: return Kernel::SDDMM;
    case KernelKind::MTTKRP: return Kernel::MTTKRP;
  }
  throw Error("unknown kernel");
}

void check_operand(const Matrix& A, Kernel k) {
  if (k == Kernel::MTTKRP && A.order() != 3)
    throw Error("mttkrp needs a 3-D tensor, this operand is a matrix",
                "make it with Matrix::tensor_from_coo or from a .tns file");
  if (k != Kernel::MTTKRP && A.order() != 2)
    throw Error(std::string(kernel_name(k)) + " needs a matrix, this operand is a 3-D tensor");
}

int resolved_threads(const Options& o) {
  if (o.threads < 0) throw Error("Options::threads is negative", "0 means every available core");
  return o.threads > 0 ? o.threads : kernels::available_cpus();
}

int resolved_dense(const Options& o, Kernel k) {
  if (o.dense < 0) throw Error("Options::dense is negative", "0 means the kernel's default");
  if (k == Kernel::SpMV) return 1;
  return o.dense > 0 ? o.dense : kernels::default_dense_size(kind_of(k));
}

/// A setting in its range (tune/settings.hpp, which the CLI's option checks too), else an Error
/// naming it.
template <typename T>
T in_range(const std::optional<T>& v, T fallback, const tuning::SettingRange<T>& range) {
  if (!v) return fallback;
  if (!(*v >= range.lo && *v <= range.hi)) {
    std::ostringstream text;
    text << "Options::" << range.name << " = " << *v << " is out of range: [" << range.lo << ", "
         << range.hi << "]";
    throw Error(text.str(), "leave it unset for the default of `waco-hybrid tune`");
  }
  return *v;
}
/// Above 0 (a limit, a tolerance, a padding bound).
double positive(const std::optional<double>& v, double fallback, const char* name) {
  if (v && !(*v > 0.0))
    throw Error("Options::" + std::string(name) + " must be positive",
                "leave it unset for the default of `waco-hybrid tune`");
  return v.value_or(fallback);
}

codegen::GeneratedOptions generated_options(const Options& o) {
  codegen::GeneratedOptions g;
  g.compiler.cache_dir = o.kernel_cache_dir;
  if (!o.compiler.empty()) g.compiler.compiler = o.compiler;
  g.storage.max_padding = positive(o.max_padding, g.storage.max_padding, "max_padding");
  if (!o.race.empty()) {
    const std::optional<codegen::RaceStrategy> race = codegen::parse_race_strategy(o.race);
    if (!race)
      throw Error("Options::race = \"" + o.race + "\" is not a strategy: atomic, private or auto");
    g.race = *race;
  }
  return g;
}

/// The plan of a decided schedule, less its matrix's fingerprint (bind_plan): the format built
/// and the kernel loaded here; with `baseline` (a tune's result that is a hand-written baseline,
/// csr, csf or dia: tuning::implementation_of) that baseline.
std::shared_ptr<Plan::Impl> bind_arm(const Matrix& A, Kernel k, const codegen::SuperSchedule& s,
                                     const Options& o, const std::string& baseline = "") {
  auto impl = std::make_shared<Plan::Impl>();
  impl->kernel = k;
  impl->threads = resolved_threads(o);
  impl->dense = resolved_dense(o, k);
  impl->dtype = A.impl().dtype;
  for (int m = 0; m < A.order(); ++m) impl->dims.push_back(A.dim(m));
  impl->nnz = A.nnz();
  // A compile for the plan (on the calling thread) stops when the caller's interrupt asks.
  codegen::GeneratedOptions g = generated_options(o);
  g.compiler.cancelled = o.interrupt;
  impl->max_padding = g.storage.max_padding;
  impl->arm = std::make_shared<const tuning::Arm>(tuning::make_arm(
      tuning::sparse_problem(api::arrays(A), kind_of(k), A.impl().dtype), s, impl->dense,
      impl->threads, g, baseline));
  return impl;
}

/// The hand-written reference every tune is judged by: csf for MTTKRP, csr otherwise.
std::string reference_of(Kernel k) { return kernels::needs_tensor(kind_of(k)) ? "csf" : "csr"; }

/// bind_arm of that reference, compiled into the library (nothing to compile or load).
std::shared_ptr<Plan::Impl> bind_reference(const Matrix& A, Kernel k, const Options& o) {
  const std::string reference = reference_of(k);
  return bind_arm(A, k, *codegen::schedule_shortcut(kind_of(k), reference), o, reference);
}

/// bind_arm, and the plan's fingerprint (computed now if the matrix had none yet).
std::shared_ptr<Plan::Impl> bind_plan(const Matrix& A, Kernel k, const codegen::SuperSchedule& s,
                                      const Options& o, const std::string& baseline = "") {
  std::shared_ptr<Plan::Impl> impl = bind_arm(A, k, s, o, baseline);
  impl->fingerprint = A.fingerprint();
  return impl;
}

void take_report(Plan::Impl& impl, const nlohmann::json& report) {
  impl.report = report;
  impl.verdict = report.value("verdict", std::string("unknown"));
  // What the tune claims over the faster csr reference, on the fresh runs that decided (a plan
  // of a no-gain serves that reference); "speedup_over_csr" is over the csr schedule, which can
  // run slower than the baseline (ash219 in double: 4.4x over it, 1.25-1.34x over the
  // baseline). Reports of older versions have only the latter.
  nlohmann::json sp = report.value("claimed_speedup", nlohmann::json());
  if (!sp.is_number()) sp = report.value("speedup_over_csr", nlohmann::json());
  impl.speedup = sp.is_number() ? sp.get<double>() : 0.0;
  if (impl.verdict == "no-gain" || impl.verdict == "not-worth-it") impl.speedup = 1.0;
  const nlohmann::json& be =
      report.contains("economy") ? report["economy"].value("break_even_calls", nlohmann::json())
                                 : nlohmann::json();
  impl.break_even = be.is_number() ? be.get<double>() : -1.0;
}

/// A measured plan's gain checked in this process, where the caller runs it (tuning::
/// check_in_process: the chosen kernel and the csr / csf baseline alternating in blocks of
/// calls on operands made here). When it holds, speedup() and the break-even are this
/// process's figures; when it does not, the baseline serves and the verdict (the report's too)
/// is "no-gain". The report keeps the tune's own figures and gains "in_process".
void check_here(Plan::Impl& impl, const Matrix& A, Kernel k, const Options& o) {
  if (!o.check_in_process || impl.verdict != "gain") return;
  const std::string reference = reference_of(k);
  if (impl.arm->bound.baseline == reference) return;  // nothing to compare with
  const std::shared_ptr<Plan::Impl> base = bind_reference(A, k, o);
  const std::int64_t n = k == Kernel::SpMV ? 1 : impl.dense;
  const std::int64_t rows = impl.dims[0], cols = impl.dims.size() > 1 ? impl.dims[1] : 1;
  std::int64_t in0 = cols * n, in1 = 0, out = rows * n;
  if (k == Kernel::SDDMM) {
    in0 = rows * n;
    in1 = cols * n;
    out = impl.nnz;
  } else if (k == Kernel::MTTKRP) {
    in1 = impl.dims[2] * n;
  }
  // Up to 4 placements of the operands (separate allocations, each at another offset in its
  // page), as many as fit in 256 MiB: where they lie can change the kernels' speed.
  const double bytes = static_cast<double>(in0 + in1 + out) * kernels::dtype_size(impl.dtype);
  tuning::InProcessOptions io;
  io.placements = static_cast<int>(std::clamp(std::floor(256.0 * (1 << 20) / std::max(bytes, 1.0)), 1.0, 4.0));
  tuning::InProcessCheck c;
  kernels::with_value_type(impl.dtype, [&](auto v) {
    using V = decltype(v);
    struct Operands {
      std::vector<V> a, b, y;
      std::size_t pad = 0;
    };
    std::vector<Operands> at(static_cast<std::size_t>(io.placements));
    const auto sized = [](std::int64_t n, std::size_t pad) {
      return static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) + pad;
    };
    for (std::size_t p = 0; p < at.size(); ++p) {
      Operands& d = at[p];
      d.pad = p * (1040 / sizeof(V));  // 0, 1040, 2080, 3120 bytes: other offsets in a page
      d.a.resize(sized(in0, d.pad));
      d.b.resize(sized(in1, d.pad));
      d.y.resize(sized(out, d.pad));
      for (std::size_t i = 0; i < d.a.size(); ++i) d.a[i] = static_cast<V>(0.5 + 0.125 * (i % 7));
      for (std::size_t i = 0; i < d.b.size(); ++i) d.b[i] = static_cast<V>(0.25 + 0.125 * (i % 5));
    }
    const auto on = [&](const tuning::Arm& arm) {
      return [&at, &arm, n](int p) {
        Operands& d = at[static_cast<std::size_t>(p)];
        arm.run(d.a.data() + d.pad, d.b.data() + d.pad, d.y.data() + d.pad, n);
      };
    };
    c = tuning::check_in_process(on(*impl.arm), on(*base->arm), io);
  });
  nlohmann::json j = c.to_json();
  j["claimed_speedup"] = impl.speedup;
  if (c.held) {
    impl.speedup = c.speedup();
    // The tune's cost, this check's included, over what a call saves here.
    const nlohmann::json total = impl.report.contains("economy")
                                     ? impl.report["economy"].value("total_s", nlohmann::json())
                                     : nlohmann::json();
    if (impl.break_even >= 0 && total.is_number()) {
      const std::optional<double> be = heuristics::break_even_calls(
          total.get<double>() + c.seconds, c.csr_call_s, c.csr_call_s / impl.speedup);
      impl.break_even = be ? *be : -1.0;
    }
  } else {
    j["note"] = "the gain the measuring processes judged did not hold in this process: the " +
                reference + " baseline serves";
    j["tune_verdict"] = impl.verdict;
    impl.report["verdict"] = "no-gain";
    impl.arm = base->arm;
    impl.verdict = "no-gain";
    impl.speedup = 1.0;
    impl.break_even = -1.0;
  }
  impl.report["in_process"] = std::move(j);
}

// ----------------------------------------------------------------------------------------------
// Tuning in this process (tuning::run).

/// A tune's notes and warnings for the caller: Options::progress, else stderr when verbose.
class ApiObserver : public tuning::TuneObserver {
 public:
  explicit ApiObserver(const Options& o) : o_(o) {}
  void note(const std::string& line) override { say(line); }
  void warning(const std::string& line) override { say("warning: " + line); }
  void progress(const heuristics::TuneProgress& p, std::optional<double>) override {
    if (p.done != p.total && kernels::now_seconds() - last_ < 5.0) return;
    last_ = kernels::now_seconds();
    say(tuning::format("tune: %lld/%lld measured (%lld reused), %s left",
                     static_cast<long long>(p.done), static_cast<long long>(p.total),
                     static_cast<long long>(p.reused), kernels::duration_text(p.eta_s).c_str()));
  }

 private:
  void say(const std::string& line) {
    if (o_.progress)
      o_.progress(line);
    else if (o_.verbose)
      std::fprintf(stderr, "%s\n", line.c_str());
  }
  const Options& o_;
  double last_ = -1e9;
};

tuning::TuneRequest tune_request(const Options& o, Kernel k, int threads, int dense,
                                 kernels::Dtype dtype) {
  tuning::TuneRequest r;
  r.kind = kind_of(k);
  r.dtype = dtype;
  r.search = o.search;
  r.budget = o.budget > 0 ? static_cast<std::uint64_t>(o.budget) : 0;
  if (o.budget < 0) throw Error("Options::budget is negative", "0 means the search's default");
  r.budget_seconds = o.budget_seconds;
  r.passes = o.passes;
  r.db = o.results_db;
  r.db_default = false;  // no results database unless the caller names one
  r.seed = o.seed;
  r.dense = k == Kernel::SpMV ? 0 : dense;
  r.threads = threads;
  if (o.confirm >= 0) {
    r.confirm = o.confirm;
    r.confirm_given = true;
  }
  r.plan_cache = o.cache_dir;
  r.no_plan_cache = !o.use_cache;
  r.refresh = o.refresh;
  r.expected_calls = o.expected_calls;
  r.tuning_share = o.tuning_share;
  r.generated = generated_options(o);
  r.cancel = o.interrupt;
  // The rest of tune's settings (Options' last group): the CLI's defaults when unset.
  r.model = o.model;
  r.use_calibration = !o.no_calibration;
  r.index = o.index;
  r.check_recall = o.check_recall;
  r.explain = o.explain;
  r.schedules = o.schedules;
  r.measure_first = o.measure_first;
  r.repeat = in_range(o.repeat, r.repeat, settings::kRepeat);
  r.warmup = in_range(o.warmup, r.warmup, settings::kWarmup);
  r.confirm_rounds = in_range(o.confirm_rounds, r.confirm_rounds, settings::kConfirmRounds);
  r.decide_runs = in_range(o.decide_runs, r.decide_runs, settings::kDecideRuns);
  r.decide_extra_runs = in_range(o.decide_extra_runs, r.decide_extra_runs, settings::kDecideExtraRuns);
  r.layouts = in_range(o.layouts, r.layouts, settings::kLayouts);
  r.decide_rounds = in_range(o.decide_rounds, r.decide_rounds, settings::kDecideRounds);
  r.decide_leaders = in_range(o.decide_leaders, r.decide_leaders, settings::kDecideLeaders);
  r.halving_keep = in_range(o.halving_keep, r.halving_keep, settings::kHalvingKeep);
  r.decide_drop = in_range(o.decide_drop, r.decide_drop, settings::kDecideDrop);
  r.decide_clear = in_range(o.decide_clear, r.decide_clear, settings::kDecideClear);
  r.decide_always = o.decide_always;
  r.decide_together = o.decide_together;
  r.rule.min_gain = in_range(o.min_gain, r.rule.min_gain, settings::kMinGain);
  r.rule.level = in_range(o.verdict_level, r.rule.level, settings::kVerdictLevel);
  r.rule.max_disturbed = in_range(o.max_disturbed, r.rule.max_disturbed, settings::kMaxDisturbed);
  r.side_by_side_bytes = static_cast<double>(in_range(
      o.side_by_side_memory, std::int64_t{0}, settings::kSideBySideMemory));
  r.timeout = positive(o.timeout, r.timeout, "timeout");
  r.compile_timeout = positive(o.compile_timeout, r.compile_timeout, "compile_timeout");
  r.tolerance = positive(o.tolerance, r.tolerance, "tolerance");
  if (o.abandon_factor && !(*o.abandon_factor == 0.0 || *o.abandon_factor >= 1.0))
    throw Error("Options::abandon_factor must be 0 (off) or at least 1");
  r.abandon_factor = o.abandon_factor.value_or(r.abandon_factor);
  r.retry_failed = o.retry_failed;
  heuristics::PassParams& pp = r.params;
  pp.tile_window = in_range(o.tile_window, pp.tile_window, settings::kTileWindow);
  pp.max_block_padding = positive(o.max_block_padding, pp.max_block_padding, "max_block_padding");
  pp.min_chunks_per_thread =
      in_range(o.min_chunks_per_thread, pp.min_chunks_per_thread, settings::kMinChunksPerThread);
  pp.chunk_window = in_range(o.chunk_window, pp.chunk_window, settings::kChunkWindow);
  pp.max_serial_work = in_range(o.max_serial_work, pp.max_serial_work, settings::kMaxSerialWork);
  if (!o.cache_level.empty()) {
    if (o.cache_level != "llc-core" && o.cache_level != "l1" && o.cache_level != "l2" &&
        o.cache_level != "l3")
      throw Error("Options::cache_level = \"" + o.cache_level +
                  "\" is not a cache level: llc-core, l1, l2 or l3");
    pp.cache_level = o.cache_level;
  }
  pp.cache_bytes = in_range(o.cache_bytes, pp.cache_bytes, settings::kCacheBytes);
  pp.cache_fraction = in_range(o.cache_fraction, pp.cache_fraction, settings::kCacheFraction);
  return r;
}

/// Whether tune() gives an adaptive plan (Options::adaptive: unset, unless a setting only a
/// measured tune has is given).
bool wants_adaptive(const Options& o) {
  if (o.adaptive) return *o.adaptive;
  return tuning::ranks_by_model(o.search) && o.budget == 0 && o.budget_seconds == 0.0 &&
         o.confirm < 0 && o.results_db.empty() && o.schedules.empty() && !o.measure_first &&
         !o.explain && !o.check_recall;
}

/// An adaptive plan (Options::adaptive): csr serves at once, the model's nominees are prepared in
/// the background and tried on the caller's calls (tune/adaptive_run.hpp).
Plan adaptive_plan(const Matrix& A, Kernel k, const Options& o, const tuning::TuneRequest& request,
                   double t0) {
  if (!tuning::ranks_with_model(request))
    throw Error("an adaptive plan tries the cost model's nominees: Options::search must be a "
                "search that ranks with the model (\"model\" or \"anns\"), not \"" + o.search + "\"",
                "leave Options::search at \"model\", or set Options::adaptive = false");
  if (o.nominees < 1) throw Error("Options::nominees must be at least 1");
  // The fingerprint (the tuning cache's key) is computed when the plan first asks the cache, a
  // step paid for by the calls like the others: a short solve never pays for it.
  auto matrix = std::make_shared<const Matrix>(A);
  tuning::AdaptiveSetup setup = tuning::adaptive_setup(
      api::arrays(A), matrix, request, o.nominees, [matrix] { return matrix->fingerprint(); });
  // csr (csf) serves first, and whenever no nominee beats it: the hand-written baseline, compiled
  // into the library (nothing to compile or load), the reference a tune's verdict judges by.
  std::shared_ptr<Plan::Impl> impl = bind_reference(A, k, o);
  impl->matrix = std::move(matrix);
  impl->adaptive = std::make_shared<tuning::AdaptiveRun>(impl->arm, std::move(setup));
  impl->tuning_s = kernels::now_seconds() - t0;
  return Plan::Impl::wrap(std::move(impl));
}

codegen::SuperSchedule decided_schedule(const tuning::TuneOutcome& out) {
  if (!out.schedule)
    throw Error("the tune found no schedule that runs correctly, not even csr (verdict " +
                    out.verdict + ")",
                "run the same tune with the waco-hybrid CLI to see the failures");
  return *out.schedule;
}

// ----------------------------------------------------------------------------------------------
// Running a plan.

const Plan::Impl& checked(const std::shared_ptr<const Plan::Impl>& impl, Kernel k) {
  if (impl->kernel != k)
    throw Error(std::string("this plan runs ") + kernel_name(impl->kernel) + ", not " +
                kernel_name(k));
  return *impl;
}

void check_pointer(const void* p, const char* what) {
  if (p == nullptr) throw Error(std::string(what) + " is null");
}

void check_columns(std::int64_t n, std::int64_t ld, const char* name) {
  if (ld < n)
    throw Error(std::string("leading dimension ") + name + " = " + std::to_string(ld) +
                " is smaller than the " + std::to_string(n) + " columns");
}

/// The plan's type must be the arrays' (a plan computes in its matrix's type).
template <class V>
void check_dtype(const Plan::Impl& impl, const char* call) {
  if (impl.dtype == kernels::dtype_of<V>()) return;
  const bool f64 = impl.dtype == kernels::Dtype::F64;
  throw Error(std::string(call) + ": this plan computes in " + (f64 ? "double" : "single") +
                  " precision, the arrays are " + (f64 ? "float" : "double"),
              std::string("pass ") + (f64 ? "double" : "float") +
                  " arrays, or tune a matrix made from " + (f64 ? "float" : "double") +
                  " values for " + (f64 ? "float" : "double") + " ones");
}

/// What a strided operand is packed into: per calling thread, per operand (0 and 1 the inputs,
/// 2 the output), 64-byte aligned, kept between calls (it only grows). A fresh vector a call
/// cost an allocation, and a packed output off a cache line was staged once more by the kernels
/// that add into its rows (codegen::updates_output_rows).
enum Slot { kIn0 = 0, kIn1 = 1, kOut = 2 };
template <class V>
V* scratch(Slot slot, std::int64_t values) {
  thread_local std::array<kernels::HugeBlock, 3> blocks;
  const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(values, 1)) * sizeof(V);
  return static_cast<V*>(kernels::grown(blocks[static_cast<std::size_t>(slot)], bytes));
}

/// A rows x n block with leading dimension ld, packed (ld == n: the caller's array itself).
template <class V>
const V* packed(const V* a, std::int64_t rows, std::int64_t n, std::int64_t ld, Slot slot) {
  if (ld == n) return a;
  V* to = scratch<V>(slot, rows * n);
  for (std::int64_t r = 0; r < rows; ++r) std::copy(a + r * ld, a + r * ld + n, to + r * n);
  return to;
}

/// Runs a dense-output kernel into out (rows x n, leading dimension ldo).
template <class V>
void run_dense_out(const Plan::Impl& impl, const V* in0, const V* in1, V* out, std::int64_t rows,
                   std::int64_t n, std::int64_t ldo) {
  const std::size_t size = rows > 0 ? static_cast<std::size_t>((rows - 1) * ldo + n) : 0;
  impl.serve(out, size, [&](const tuning::Arm& a, void* vo) {
    V* o = static_cast<V*>(vo);
    if (ldo == n) {
      a.bound.run(in0, in1, o, n);
      return;
    }
    V* packed_out = scratch<V>(kOut, rows * n);
    a.bound.run(in0, in1, packed_out, n);
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy(packed_out + r * n, packed_out + (r + 1) * n, o + r * ldo);
  });
}

template <class V>
void spmv_call(const Plan::Impl& p, const V* x, V* y) {
  check_dtype<V>(p, "spmv");
  check_pointer(x, "spmv: x");
  check_pointer(y, "spmv: y");
  api::translate_errors([&] {
    p.serve(y, static_cast<std::size_t>(p.dims[0]),
            [&](const tuning::Arm& a, void* out) { a.bound.run(x, nullptr, out, 1); });
  });
}

template <class V>
void spmm_call(const Plan::Impl& p, std::int64_t n, const V* B, std::int64_t ldb, V* C,
               std::int64_t ldc) {
  check_dtype<V>(p, "spmm");
  if (n < 1) throw Error("spmm: n = " + std::to_string(n) + " columns; at least 1");
  check_pointer(B, "spmm: B");
  check_pointer(C, "spmm: C");
  check_columns(n, ldb, "ldb");
  check_columns(n, ldc, "ldc");
  api::translate_errors([&] {
    run_dense_out(p, packed(B, p.dims[1], n, ldb, kIn0), static_cast<const V*>(nullptr), C,
                  p.dims[0], n, ldc);
  });
}

template <class V>
void sddmm_call(const Plan::Impl& p, std::int64_t k, const V* U, std::int64_t ldu, const V* V_,
                std::int64_t ldv, V* out) {
  check_dtype<V>(p, "sddmm");
  if (k < 1) throw Error("sddmm: k = " + std::to_string(k) + "; at least 1");
  check_pointer(U, "sddmm: U");
  check_pointer(V_, "sddmm: V");
  if (p.nnz > 0) check_pointer(out, "sddmm: out");
  check_columns(k, ldu, "ldu");
  check_columns(k, ldv, "ldv");
  api::translate_errors([&] {
    // The kernel's C is k x cols column-major: V (cols x k row-major) is that array.
    const V* u = packed(U, p.dims[0], k, ldu, kIn0);
    const V* v = packed(V_, p.dims[1], k, ldv, kIn1);
    p.serve(out, static_cast<std::size_t>(p.nnz),
            [&](const tuning::Arm& a, void* vo) { a.run(u, v, vo, k); });
  });
}

template <class V>
void mttkrp_call(const Plan::Impl& p, std::int64_t n, const V* B, std::int64_t ldb, const V* C,
                 std::int64_t ldc, V* out, std::int64_t ldo) {
  check_dtype<V>(p, "mttkrp");
  if (n < 1) throw Error("mttkrp: n = " + std::to_string(n) + " columns; at least 1");
  check_pointer(B, "mttkrp: B");
  check_pointer(C, "mttkrp: C");
  check_pointer(out, "mttkrp: out");
  check_columns(n, ldb, "ldb");
  check_columns(n, ldc, "ldc");
  check_columns(n, ldo, "ldo");
  api::translate_errors([&] {
    run_dense_out(p, packed(B, p.dims[1], n, ldb, kIn0), packed(C, p.dims[2], n, ldc, kIn1), out,
                  p.dims[0], n, ldo);
  });
}

}  // namespace

// ------------------------------------------------------------------------------------------------

Error::Error(const std::string& message, std::string hint)
    : std::runtime_error(message), hint_(std::move(hint)) {}

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::SpMV: return "spmv";
    case Kernel::SpMM: return "spmm";
    case Kernel::SDDMM: return "sddmm";
    case Kernel::MTTKRP: return "mttkrp";
  }
  return "?";
}

const char* version() { return kernels::version(); }

const char* dtype_name(Dtype d) { return d == Dtype::F64 ? "f64" : "f32"; }

Plan tune(const Matrix& A, Kernel k, const Options& o) {
  return api::translate_errors([&] {
    const double t0 = kernels::now_seconds();
    check_operand(A, k);
    const int threads = resolved_threads(o);
    const int dense = resolved_dense(o, k);
    if (o.tuning_share <= 0 || o.tuning_share > 1)
      throw Error("Options::tuning_share must be in (0, 1]");
    // Every setting is checked before the tuning cache is asked.
    const tuning::TuneRequest request = tune_request(o, k, threads, dense, A.impl().dtype);
    const auto torch_required = [](const learned::TorchRequired& e) {
      return Error(std::string("this model needs LibTorch, which libwaco never loads: ") + e.what(),
                   "use a model with the stats or signature encoder (the shipped ones), or tune "
                   "with the waco-hybrid-torch program and load its plan (Plan::load)");
    };
    // An adaptive plan serves csr at once: it asks the tuning cache itself, once its calls pay
    // for that (tune/adaptive_run.hpp).
    if (wants_adaptive(o)) {
      try {
        return adaptive_plan(A, k, o, request, t0);
      } catch (const learned::TorchRequired& e) {
        throw torch_required(e);
      }
    }
    // The tuning cache first, here: a hit builds the plan without starting the CLI (a list of
    // schedules is measured, never a decision: tuning::run does not ask the cache for one).
    if (o.use_cache && !o.refresh && o.schedules.empty()) {
      const heuristics::TuningCache cache(o.cache_dir);
      const heuristics::TuningKey key{A.fingerprint(), kind_of(k), dense, threads,
                                      heuristics::machine_identity(generated_options(o).compiler),
                                      A.impl().dtype};
      const heuristics::CacheLookup found = cache.find(key);
      if (found.hit) {
        std::shared_ptr<Plan::Impl> impl = bind_plan(
            A, k, found.hit->schedule, o, tuning::implementation_of(found.hit->report));
        take_report(*impl, found.hit->report);
        check_here(*impl, A, k, o);
        impl->from_cache = true;
        impl->tuning_s = kernels::now_seconds() - t0;
        return Plan::Impl::wrap(std::move(impl));
      }
      // A corrupt entry: tuning::run reports it (a warning) and replaces it.
    }
    // The pipeline in this process: the tuning cache was asked above; --expected-calls plans
    // from the measuring worker's csr time (tuning::run).
    ApiObserver observer(o);
    const tuning::TuneOperand operand = api::operand(A);
    tuning::TuneOutcome outcome;
    try {
      outcome = tuning::run(operand, request, observer);
    } catch (const learned::TorchRequired& e) {
      throw torch_required(e);
    }
    const nlohmann::json& report = outcome.report;
    std::shared_ptr<Plan::Impl> impl =
        bind_plan(A, k, decided_schedule(outcome), o, outcome.implementation);
    take_report(*impl, report);
    check_here(*impl, A, k, o);
    impl->from_cache = outcome.from_cache;
    impl->tuning_s = kernels::now_seconds() - t0;
    return Plan::Impl::wrap(std::move(impl));
  });
}

Plan make_plan(const Matrix& A, Kernel k, const std::string& schedule, const Options& o) {
  return api::translate_errors([&] {
    const double t0 = kernels::now_seconds();
    check_operand(A, k);
    // "csr" ("csf" for MTTKRP) is the reference every tune is judged by: the hand-written
    // baseline compiled into the library, as a no-gain tune and an adaptive plan serve it (no
    // kernel to load, no compiler asked who it is). The csr schedule's generated kernel: its
    // text form.
    // "dia" (SpMV): the diagonal-storage baseline a tune may return; its plan carries the csr
    // schedule, as a tuned one does (codegen::bind_baseline refuses a matrix whose diagonals
    // would store more than kDiaMaxFill values a nonzero).
    const std::string baseline = codegen::baseline_named(kind_of(k), schedule);
    const bool names_dia = codegen::baseline_named(KernelKind::SpMV, schedule) == codegen::kDiaBaseline;
    if (names_dia && baseline.empty())
      throw Error("make_plan: \"dia\" (diagonal storage) serves spmv only",
                  "use \"csr\" or a schedule for the other kernels");
    std::shared_ptr<Plan::Impl> impl = bind_plan(
        A, k,
        codegen::schedule_from_string(kind_of(k), names_dia ? "csr" : schedule),
        o, baseline);
    impl->verdict = "given";
    impl->report = nullptr;
    impl->tuning_s = kernels::now_seconds() - t0;
    return Plan::Impl::wrap(std::move(impl));
  });
}

Plan::Plan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Kernel Plan::kernel() const { return impl_->kernel; }
std::string Plan::schedule() const { return codegen::to_text(impl_->serving()->bound.schedule); }
std::string Plan::implementation() const {
  return impl_->serving()->bound.implementation();
}
std::string Plan::verdict() const {
  return impl_->adaptive ? impl_->adaptive->verdict() : impl_->verdict;
}
double Plan::speedup() const {
  if (!impl_->adaptive) return impl_->speedup;
  return impl_->adaptive->speedup().value_or(0.0);
}
double Plan::break_even_calls() const {
  if (!impl_->adaptive) return impl_->break_even;
  return impl_->adaptive->break_even_calls().value_or(-1.0);
}
double Plan::tuning_seconds() const { return impl_->tuning_s; }
bool Plan::from_cache() const { return impl_->from_cache; }
int Plan::threads() const { return impl_->arm->bound.args.threads; }
int Plan::dense() const { return impl_->dense; }
Dtype Plan::dtype() const { return api::external(impl_->dtype); }
std::string Plan::report_json() const {
  return (impl_->adaptive ? impl_->adaptive->report() : impl_->report).dump(2);
}
std::int64_t Plan::calls() const { return impl_->adaptive ? impl_->adaptive->calls() : 0; }
std::int64_t Plan::exploring_calls() const {
  return impl_->adaptive ? impl_->adaptive->exploring_calls() : 0;
}

std::string Plan::standalone_header(const std::string& name_space) const {
  if (!codegen::is_cpp_identifier(name_space))
    throw Error("namespace \"" + name_space + "\" is not a C++ identifier",
                "letters, digits and _, not starting with a digit");
  const std::shared_ptr<const tuning::Arm> arm = impl_->serving();
  const std::string kernel = kernel_name(impl_->kernel);
  std::string note = std::string(impl_->report.is_null() && !impl_->adaptive
                                     ? "a plan of a given schedule (waco::make_plan)"
                                     : "tuned by waco::tune") +
                     " for " + kernel + " (fingerprint " + impl_->fingerprint_of() + ", dense " +
                     std::to_string(impl_->dense) + ", " +
                     (impl_->dtype == kernels::Dtype::F64 ? "double precision, " : "") +
                     std::to_string(threads()) + " threads)";
  const double sp = speedup();
  char buf[160];
  std::snprintf(buf, sizeof buf, "\nverdict %s, speedup over the %s schedule %.3fx",
                verdict().c_str(), reference_of(impl_->kernel).c_str(), sp);
  if (sp > 0 && verdict() != "given") note += buf;
  if (arm->bound.baseline == codegen::kDiaBaseline)
    note += "\nthe dia baseline (diagonal storage) serves this plan; this header holds its builder "
            "and loop";
  else if (!arm->bound.baseline.empty())
    note += "\nthe hand-written " + arm->bound.baseline +
            " baseline serves this plan; this header holds its loop, generated from the " +
            arm->bound.baseline + " schedule, with the baseline's threads and chunks";
  return api::translate_errors([&] {
    return codegen::emit_standalone_header(arm->bound.schedule, arm->bound.race, name_space, note,
                                           impl_->max_padding, impl_->dtype, arm->bound.baseline);
  });
}

void Plan::spmv(const float* x, float* y) const {
  spmv_call(checked(impl_, Kernel::SpMV), x, y);
}
void Plan::spmv(const double* x, double* y) const {
  spmv_call(checked(impl_, Kernel::SpMV), x, y);
}

void Plan::spmm(std::int64_t n, const float* B, std::int64_t ldb, float* C, std::int64_t ldc) const {
  spmm_call(checked(impl_, Kernel::SpMM), n, B, ldb, C, ldc);
}
void Plan::spmm(std::int64_t n, const double* B, std::int64_t ldb, double* C,
                std::int64_t ldc) const {
  spmm_call(checked(impl_, Kernel::SpMM), n, B, ldb, C, ldc);
}

void Plan::sddmm(std::int64_t k, const float* U, std::int64_t ldu, const float* V,
                 std::int64_t ldv, float* out) const {
  sddmm_call(checked(impl_, Kernel::SDDMM), k, U, ldu, V, ldv, out);
}
void Plan::sddmm(std::int64_t k, const double* U, std::int64_t ldu, const double* V,
                 std::int64_t ldv, double* out) const {
  sddmm_call(checked(impl_, Kernel::SDDMM), k, U, ldu, V, ldv, out);
}

void Plan::mttkrp(std::int64_t n, const float* B, std::int64_t ldb, const float* C,
                  std::int64_t ldc, float* out, std::int64_t ldo) const {
  mttkrp_call(checked(impl_, Kernel::MTTKRP), n, B, ldb, C, ldc, out, ldo);
}
void Plan::mttkrp(std::int64_t n, const double* B, std::int64_t ldb, const double* C,
                  std::int64_t ldc, double* out, std::int64_t ldo) const {
  mttkrp_call(checked(impl_, Kernel::MTTKRP), n, B, ldb, C, ldc, out, ldo);
}

void Plan::save(const std::string& path) const {
  if (verdict() == "exploring")
    throw Error("this adaptive plan is still exploring: there is no decision to save yet",
                "save it once verdict() is no longer \"exploring\" (its decision is also kept "
                "in the tuning cache then)");
  api::translate_errors([&] {
    nlohmann::json j = {{"format", api::kPlanFormat},
                        {"version", api::kPlanVersion},
                        {"waco_version", kernels::version()},
                        {"kernel", kernel_name(impl_->kernel)},
                        {"fingerprint", impl_->fingerprint_of()},
                        {"dims", impl_->dims},
                        {"nnz", impl_->nnz},
                        {"dense", impl_->dense},
                        {"threads", threads()},
                        {"dtype", std::string(kernels::dtype_name(impl_->dtype))},
                        {"schedule", codegen::to_json(impl_->serving()->bound.schedule)},
                        {"verdict", verdict()},
                        {"speedup", speedup()},
                        {"break_even_calls", break_even_calls()},
                        {"report", impl_->adaptive ? impl_->adaptive->report() : impl_->report}};
    j["checksum"] = api::plan_checksum(j);
    kernels::write_text_file(path, j.dump(1) + "\n");
  });
}

Plan Plan::load(const std::string& path, const Matrix& A, const Options& o) {
  return api::translate_errors([&] {
    const double t0 = kernels::now_seconds();
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the plan file: " + std::strerror(errno));
    std::stringstream text;
    text << in.rdbuf();
    const api::PlanFile f = api::parse_plan_file(path, text.str());
    const Kernel k = kernel_of(f.kind);
    check_operand(A, k);
    if (f.fingerprint != A.fingerprint())
      throw Error(path + ": the plan was made for the matrix with fingerprint " + f.fingerprint +
                      ", this one's is " + A.fingerprint(),
                  "load it with the matrix it was tuned for, or tune this one");
    if (f.dtype != A.impl().dtype)
      throw Error(path + ": the plan computes in " +
                      std::string(f.dtype == kernels::Dtype::F64 ? "double" : "single") +
                      " precision, this matrix holds " +
                      (A.impl().dtype == kernels::Dtype::F64 ? "double" : "float") + " values",
                  "load it with a matrix of the values it was tuned with");
    Options opts = o;
    opts.threads = f.threads;
    opts.dense = f.dense;
    std::shared_ptr<Impl> impl =
        bind_plan(A, k, f.schedule, opts, tuning::implementation_of(f.report));
    impl->report = f.report;
    impl->verdict = f.verdict;
    impl->speedup = f.speedup;
    impl->break_even = f.break_even;
    impl->tuning_s = kernels::now_seconds() - t0;
    return Impl::wrap(std::move(impl));
  });
}

}  // namespace waco
