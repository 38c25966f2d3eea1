// Helpers shared by the subcommands: loading operands with clear errors, common options, the
// combined implementation registry, and JSON / table output.
#pragma once

#include <signal.h>

#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "waco/codegen/generated_kernel.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/implementation.hpp"
#include "waco/kernels/io.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/signature/model.hpp"
#include "waco/tune/settings.hpp"

namespace waco::cli {

/// A sparse operand read from a file: a matrix, or a tensor for .tns/.tns.gz paths.
struct Operand {
  std::optional<kernels::LoadedMatrix> matrix;
  std::optional<kernels::LoadedTensor> tensor;
  const kernels::SourceInfo& source() const { return matrix ? matrix->source : tensor->source; }
};

/// Reads FILE as a matrix or tensor (by its extension). When `kernel` is given, checks that the
/// operand suits it (a tensor for MTTKRP, a matrix otherwise) and says what to give instead.
Operand load_operand(const std::string& path, const kernels::ReadOptions& opts,
                     std::optional<kernels::KernelKind> kernel = std::nullopt);

/// --drop-zeros and --allow-nonfinite.
void add_read_options(CLI::App& app, kernels::ReadOptions& opts);
/// --dtype f32|f64: the precision values are read in and kernels compute in (default f32).
void add_dtype_option(CLI::App& app, kernels::Dtype& dtype);
/// The arguments that give a child command the same reading as `opts` (--drop-zeros,
/// --allow-nonfinite, --dtype f64; none for the defaults).
std::vector<std::string> read_option_args(const kernels::ReadOptions& opts);
/// --threads T (default 0 = every available core).
void add_threads_option(CLI::App& app, int& threads);
/// Threads to use for a requested count (0 = all available cores).
int resolve_threads(int requested);
/// --kernel {spmv,spmm,sddmm,mttkrp} (required), stored by name.
void add_kernel_option(CLI::App& app, std::string& kernel);
kernels::KernelKind kernel_from_option(const std::string& name);

/// The cache the tile model of the SC'20 signature assumes, shared by tile, space, tune (the
/// tile-window pass) and run/bench (--impl jstream): --cache-level, --cache-bytes,
/// --cache-fraction, as signature::cache_capacity() takes them.
struct CacheOptions {
  std::string level = signature::kDefaultCacheLevel;
  std::int64_t bytes = 0;  ///< > 0: usable bytes per thread, overriding level and fraction
  double fraction = signature::kDefaultCacheFraction;
};
/// Adds the three options, stored into the given fields.
void add_cache_options(CLI::App& app, std::string& level, std::int64_t& bytes, double& fraction);
void add_cache_options(CLI::App& app, CacheOptions& opts);
/// Hands the options to an implementation that uses the tile model (jstream); others ignore them.
void apply_cache_options(kernels::Implementation& impl, const CacheOptions& opts);

/// Every parameter of the trimming passes (heuristics::PassParams), shared by space and tune:
/// --tile-window, --max-block-padding, --min-chunks-per-thread, --chunk-window and the cache
/// options above.
void add_pass_options(CLI::App& app, heuristics::PassParams& params);

/// The CLI11 check of one of tune's settings: its range in tune/settings.hpp (the C++ API checks
/// the same table).
template <typename T>
CLI::Range setting_range(const tuning::SettingRange<T>& r) {
  return CLI::Range(r.lo, r.hi);
}

/// --timeout and --compile-timeout: the limits of one candidate's isolated measurement (tune,
/// collect), in seconds.
void add_limit_options(CLI::App& app, double& timeout, double& compile_timeout);
/// --cpu-lock FILE: an exclusive flock on FILE that the command holds `while_what` (collect and
/// calibrate: while measuring each matrix; ablate: around each measuring child; tune and bench:
/// from reading the file until they exit), so that builds and benchmarks taking the same lock
/// (e.g. `flock -s FILE make`) never run beside a timing.
void add_cpu_lock_option(CLI::App& app, std::string& path, const std::string& while_what);
/// Takes the --cpu-lock `path` (nothing when empty) and keeps it until the process exits; says on
/// stderr that it waits when another process holds it (unless quiet).
void hold_cpu_lock(const std::string& path, bool quiet);
/// --schedule-related options of generated kernels: --cache-dir, --compiler, --max-padding, --race.
void add_codegen_options(CLI::App& app, codegen::GeneratedOptions& opts);
/// A generated kernel for a schedule text or shortcut name (e.g. "csr", "bcsr4x4").
std::unique_ptr<codegen::GeneratedKernel> make_generated(kernels::KernelKind k,
                                                          const std::string& schedule,
                                                          const codegen::GeneratedOptions& opts);
/// The --help paragraph on schedules: the text form and the shortcuts.
std::string schedule_help();

/// Every implementation of this binary: the baselines of kernels/ and the tiled ones of signature/.
const std::vector<kernels::ImplementationInfo>& all_implementations();
/// "name (kernels): description" lines for --help.
std::string implementations_help();

/// Dense operands for a problem in value type `dtype`: seeded, or read from DIR (x.mtx / B.mtx /
/// C.mtx, in that precision) with their shapes checked against the sparse operand.
kernels::DenseOperands dense_operands(kernels::KernelKind k, const Operand& op, int dense,
                                      std::uint64_t seed, const std::string& inputs_dir,
                                      kernels::Dtype dtype = kernels::Dtype::F32);

/// Writes a kernel's canonical output as Matrix Market: SDDMM as a coordinate matrix with A's
/// pattern, the others as dense arrays.
void write_output(const std::string& path, const kernels::Problem& p,
                  const kernels::Values& out);

/// Minimum bytes a kernel must move: the sparse operand once (CSR: 4-byte coordinates and
/// positions, values of the problem's type) and the dense operands and output once. Used for
/// effective GB/s.
double min_traffic_bytes(const kernels::Problem& p);

/// Prints JSON (indented) on stdout.
void print_json(const nlohmann::json& j);
using kernels::format_seconds;  // kernels/timing.hpp
using codegen::read_schedule_list;  // codegen/super_schedule.hpp
using kernels::duration_text;

/// Ctrl-C and SIGTERM for commands that stop at a safe point (tune, ablate): while a guard lives,
/// the first signal sets interrupt_flag() and a second one stops the process at once. The
/// previous handlers come back when the guard ends; a new guard clears the flag.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};
/// 1 once an InterruptGuard saw SIGINT or SIGTERM.
volatile std::sig_atomic_t& interrupt_flag();

}  // namespace waco::cli
