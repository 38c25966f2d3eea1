// A SuperSchedule as a kernels::Implementation: prepare() builds the format storage (conversion
// time), emits and compiles the kernel (compile time, cached on disk), and run() calls it.
// prepare() also resolves RaceStrategy::Auto, which needs the problem (see GeneratedOptions).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "waco/codegen/compiler.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/storage.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/implementation.hpp"

namespace waco::codegen {

/// The most memory RaceStrategy::Auto spends on per-thread copies of the output (a safety
/// bound, not a measured optimum).
inline constexpr double kMaxPrivateCopyBytes = 1024.0 * 1024.0 * 1024.0;

/// Formats of one sparse operand built once and shared by the kernels whose schedules store it
/// alike: the same kernel, splits, sparse levels and level formats (what build_storage reads; the
/// parallel loop, threads, chunk and the dense loops do not change a format). Held weakly: a
/// format goes with the last kernel that uses it. For one operand only (the key does not name it).
class StorageCache {
 public:
  /// The format kept for canonical schedule s, or null.
  std::shared_ptr<const Storage> find(const SuperSchedule& s) const;
  void keep(const SuperSchedule& s, const std::shared_ptr<const Storage>& storage);
  /// What names canonical schedule s's format here: schedules of equal keys store it alike.
  static std::string key(const SuperSchedule& s);

 private:
  std::map<std::string, std::weak_ptr<const Storage>> formats_;
};

struct GeneratedOptions {
  StorageOptions storage;
  CompilerOptions compiler;
  /// How a parallel loop that does not index the output stays race-free. Auto: see resolve_race.
  RaceStrategy race = RaceStrategy::Auto;
  /// Null: every prepare builds its format. Else formats are shared through it (one operand).
  std::shared_ptr<StorageCache> storages;
  /// Null: the kernel writes an output of its own. Else, for a dense output (not SDDMM's), the
  /// buffer it writes, shared by kernels that run one after another (every run writes the whole
  /// output): a kernel's output() is its own only when it ran last; prepare() clears it.
  std::shared_ptr<kernels::Values> output;
};

/// The strategy `requested` resolves to for schedule s on a problem whose output has
/// `output_size` entries, with `updates` updates of the output (the innermost statements: stored
/// values x the extents of the dense-only variables) on `threads` threads: Atomic or Private,
/// never Auto. Auto is Private when the copies are no more entries than there are updates,
/// (threads - 1) x output_size <= updates, and take at most kMaxPrivateCopyBytes; else Atomic.
/// `dtype` sizes the copies.
RaceStrategy resolve_race(RaceStrategy requested, const SuperSchedule& s, std::int64_t output_size,
                          double updates, int threads,
                          kernels::Dtype dtype = kernels::Dtype::F32);

/// A schedule made ready to run on one sparse operand: its format built, its kernel compiled (or
/// found in the cache) and loaded, the argument block filled but for the dense operands and the
/// output. GeneratedKernel runs one on its problem's operands; waco::Plan on a caller's arrays.
struct BoundKernel {
  SuperSchedule schedule;
  std::shared_ptr<const Storage> storage;
  CompileResult compile;               ///< holds the loaded library
  RaceStrategy race = RaceStrategy::Atomic;
  kernels::Dtype dtype = kernels::Dtype::F32;  ///< of the stored values and the arrays run() takes
  int (*fn)(const WacoArgs*) = nullptr;
  WacoArgs args{};                     ///< in, out and the dense-only extents unset
  std::int64_t out_size = 0;           ///< values the kernel writes (SDDMM: stored values)
  /// run() sets WacoArgs::stream_out for outputs larger than this (bytes; 0: never): the
  /// stream_output_min_bytes() of the binding when the source streams_output().
  std::int64_t stream_min_bytes = 0;
  /// run() runs the kernel into an aligned buffer of the calling thread, then copies it out, when
  /// `out` is not 32-byte aligned: set for generated sources that updates_output_rows()
  /// (emitter.hpp), whose row updates straddle cache lines otherwise (1.5-1.9x the time).
  bool stage_unaligned_output = false;
  std::string source;                  ///< the kernel's C++ source (emitter.hpp)
  /// Empty for a generated kernel; "csr", "csf" or "dia" when fn runs that hand-written baseline's loop
  /// (bind_baseline: no source, nothing compiled).
  std::string baseline;
  /// kGeneratedImplementation, or the baseline's name.
  std::string implementation() const { return baseline.empty() ? kGeneratedImplementation : baseline; }

  /// Runs the kernel: `in0`, `in1` (null when the kernel has one dense input) and `out` as the
  /// Problem lays them out (kernels/kernel.hpp), arrays of `dtype` (the caller checks it),
  /// `dense` the extent of the dense-only variable (J or K; ignored by SpMV); out must hold
  /// out_size values for this dense size. Throws kernels::Error when the per-thread copies of
  /// RaceStrategy::Private cannot be allocated.
  void run(const void* in0, const void* in1, void* out, std::int64_t dense) const;
};

/// Builds the format of `s` for p's sparse operand (p's dense operands may be absent), resolves
/// the race strategy for `dense` and `threads` (threads used when the schedule says 0), compiles
/// and loads the kernel. Throws kernels::Error when the schedule is invalid or for another kernel,
/// the format is refused (with the reason) or compilation fails.
BoundKernel bind_schedule(const SuperSchedule& s, const kernels::Problem& p, std::int64_t dense,
                          int threads, const GeneratedOptions& opts = {});

/// bind_schedule in two steps, for a caller that decides whether to compile (waco::Plan's
/// adaptive mode: codegen::in_cache(b.source) tells a kernel that only needs loading): the format
/// built and the source emitted, nothing compiled (fn null) ...
BoundKernel prepare_binding(const SuperSchedule& s, const kernels::Problem& p, std::int64_t dense,
                            int threads, const GeneratedOptions& opts = {});
/// ... then the kernel compiled (or found in the cache) and loaded.
void load_kernel(BoundKernel& b, const CompilerOptions& opts = {});
/// load_kernel without a load: `b` takes the loaded kernel of `loaded` when both emitted the same
/// source (a schedule's other chunks, thread counts and run-time split sizes). False, b unchanged,
/// otherwise.
bool reuse_kernel(BoundKernel& b, const BoundKernel& loaded);

/// The diagonal-storage SpMV baseline (kernels/baseline_loops.hpp, dia_spmv): a tune's nominee
/// for a matrix it stores (tuning::dia_nominee), served by bind_baseline.
inline constexpr const char* kDiaBaseline = "dia";

/// Whether bind_baseline serves the Implementation `name`: "csr", "csf" and "dia".
bool servable_baseline(const std::string& name);
/// ... for kernel k: "csr" for SpMV, SpMM and SDDMM, "csf" for MTTKRP, "dia" for SpMV.
bool servable_baseline(const std::string& name, kernels::KernelKind k);
/// ... on the csr (csf) schedule's format for kernel k: "csr" for SpMV, SpMM and SDDMM, "csf" for
/// MTTKRP (dia has a storage of its own): what GeneratedKernel::baseline runs.
bool baseline_on_schedule_format(const std::string& name, kernels::KernelKind k);
/// The baseline a schedule's text names for kernel k ("csr", or "csf" for MTTKRP: the shortcut
/// of the reference every tune is judged by, white space aside), else "" (any other shortcut or
/// text form, the csr schedule's own text among them, names a generated kernel).
std::string baseline_named(kernels::KernelKind k, const std::string& text);

/// The `csr` (SpMV, SpMM, SDDMM) or `csf` (MTTKRP) baseline (kernels/baseline_loops.hpp: the same
/// compiled loops that its Implementation times) bound to p's operand as a BoundKernel: the csr
/// (csf) schedule's format, the same arrays, with fn running the hand-written loop, so that a
/// caller of BoundKernel::run serves the baseline where a tune found it the fastest. `dia`
/// (SpMV): the schedule is the csr schedule (what names the plan), the storage dia's (one level:
/// the diagonals' offsets in crd; the values diagonal by diagonal) and fn its loop. Throws
/// kernels::Error for another name, a kernel the baseline does not run, or a matrix dia refuses.
BoundKernel bind_baseline(const std::string& name, const kernels::Problem& p, std::int64_t dense,
                          int threads, const GeneratedOptions& opts = {});

class GeneratedKernel final : public kernels::Implementation {
 public:
  GeneratedKernel(SuperSchedule schedule, GeneratedOptions opts = {});
  /// The hand-written baseline `name` ("csr" or "csf": bind_baseline) for kernel k as an
  /// Implementation that runs as a plan serves it, on the csr (csf) schedule's format: with
  /// GeneratedOptions::storages that format is the one the csr schedule's kernel reads, not a
  /// copy (a measuring child of a large operand: kernels::make_implementation's baseline builds
  /// its own CSR). Throws kernels::Error unless baseline_on_schedule_format(name, k).
  static std::unique_ptr<GeneratedKernel> baseline(const std::string& name, kernels::KernelKind k,
                                                   GeneratedOptions opts = {});

  /// Throws kernels::Error when the schedule is for another kernel, when the format is refused
  /// (the reason, e.g. the padding bound) or when compilation fails (command and log).
  void prepare(const kernels::Problem& p, int threads) override;
  /// Throws kernels::Error when the per-thread output copies of RaceStrategy::Private cannot be
  /// allocated.
  void run() override;
  const kernels::Values& output() const override;

  const SuperSchedule& schedule() const { return schedule_; }
  const Storage& storage() const { return *bound_.storage; }
  /// Seconds spent compiling (0 on a cache hit), and whether the cache had the kernel.
  double compile_seconds() const { return bound_.compile.compile_seconds; }
  bool cache_hit() const { return bound_.compile.cache_hit; }
  /// The kernel came compiled ahead of time (a shipped folder: shipped_kernel_dirs()).
  bool shipped() const { return bound_.compile.shipped; }
  /// ... from the folder's bundle of all its kernels (build_kernel_bundle).
  bool bundled() const { return bound_.compile.bundled; }
  const std::string& source_path() const { return bound_.compile.source_path; }
  /// Threads the kernel runs on (the schedule's, or prepare()'s when the schedule says 0).
  int threads() const { return bound_.args.threads; }
  /// The strategy the kernel was emitted with (resolved; it changes the source only when the
  /// parallel loop does not index the output).
  RaceStrategy race() const { return bound_.race; }

 private:
  SuperSchedule schedule_;
  GeneratedOptions opts_;
  std::string baseline_;  ///< empty, or the baseline prepare() binds (baseline())
  kernels::Problem problem_;
  BoundKernel bound_;
  std::shared_ptr<kernels::Values> out_;  ///< what the kernel writes (GeneratedOptions::output)
  mutable kernels::Values canonical_;   ///< SDDMM: out_ gathered into A's canonical order
};

}  // namespace waco::codegen
