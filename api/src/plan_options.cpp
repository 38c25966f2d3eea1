// The Options of waco::tune, make_plan and Plan::load checked and converted (plan_internal.hpp):
// the kernel's kind, the operand, the threads and dense size, the generated kernels' options and
// the TuneRequest of a tune, each setting in the range of the CLI option of its name.

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "plan_internal.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/tune/settings.hpp"
#include "waco/tune/tune.hpp"

namespace waco {

using kernels::KernelKind;

namespace {

namespace settings = tuning::settings;

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

}  // namespace

namespace detail {

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
  r.per_structure = in_range(o.per_structure, r.per_structure, settings::kPerStructure);
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

}  // namespace detail
}  // namespace waco
