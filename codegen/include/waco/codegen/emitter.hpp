// Code generation: a SuperSchedule becomes a C++ loop nest over its format storage (one function,
// `waco_kernel`, taking a WacoArgs block). U levels are iterated by index, C levels by position;
// variables that the sparse operand lacks get plain loops; split coordinates are rebuilt as
// x = x1 * s_x + x0 and inner loops stop at the extent, so sizes that are not multiples of the
// split are correct. The parallel loop carries `#pragma omp for schedule(dynamic, chunk)` inside one
// `omp parallel` region; if it does not index the output, updates are made race-free by a
// RaceStrategy: `omp atomic`, or per-thread copies of the output summed after the loop.
// When the innermost loop is the inner part x0 of a split output variable under loops that do not
// index the output (SpMM's and MTTKRP's j0 under the row's nonzeros), the output block is kept in
// registers across those loops and written once (register_block).
// Chunk, threads and split sizes are run-time arguments, except the split sizes of small U blocks
// at the innermost point and of register blocks (split_is_constant), which are compile-time
// constants: on 4x4 BCSR SpMV a constant block size took 0.6-0.8x the time of a run-time one
// (issue 4); a register block needs its size to be an array length.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/values.hpp"

namespace waco::codegen {

/// Version of the WacoArgs layout; part of every generated source (and so of its cache key).
/// 2: waco_kernel returns a status and exports waco_constant_split. 3: values of the source's
/// waco_value_t (float or double; void on the host side, which passes the caller's arrays).
/// 4: stream_out (non-zero: a register block's flush writes whole cache lines of the output with
/// non-temporal stores).
inline constexpr int kAbiVersion = 4;
inline constexpr int kMaxLevels = 8;
inline constexpr int kMaxVars = 4;

/// The fields of the argument block of a generated kernel, written once: they declare WacoArgs
/// below and, as text (kWacoArgsFields), the identical struct in every generated source.
#define WACO_ARGS_FIELDS                                                                   \
  const int* pos[8];                                                                       \
  const int* crd[8];                                                                       \
  long long level_dim[8];                                                                  \
  const waco_value_t* vals;                                                                \
  const waco_value_t* in[2];                                                               \
  waco_value_t* out;                                                                       \
  long long out_size;                                                                      \
  long long extent[4];                                                                     \
  long long split[4];                                                                      \
  int threads;                                                                             \
  int chunk;                                                                               \
  int stream_out;
#define WACO_STRINGIFY_FIELDS(...) #__VA_ARGS__
#define WACO_STRINGIFY(x) WACO_STRINGIFY_FIELDS(x)

/// The host's view of the values' type: untyped pointers to arrays of the kernel's type (each
/// generated source defines waco_value_t as float or double).
typedef void waco_value_t;

/// The argument block of a generated kernel.
struct WacoArgs {
  WACO_ARGS_FIELDS
};
static_assert(sizeof(WacoArgs::pos) / sizeof(WacoArgs::pos[0]) == kMaxLevels &&
                  sizeof(WacoArgs::extent) / sizeof(WacoArgs::extent[0]) == kMaxVars,
              "WACO_ARGS_FIELDS must match kMaxLevels and kMaxVars");
/// The same fields as C++ source text.
inline constexpr const char* kWacoArgsFields = WACO_STRINGIFY(WACO_ARGS_FIELDS);

/// Largest split size that split_is_constant() bakes into the source.
inline constexpr int kMaxConstantSplit = 32;

/// Largest register block (values; 64 floats are 8 AVX2 or 4 AVX-512 registers, 64 doubles
/// twice as many).
inline constexpr int kMaxRegisterBlock = 64;
/// Most rows of a two-dimensional register block.
inline constexpr int kMaxRegisterRows = 8;

/// Whether the parallel loop writes disjoint outputs (else updates need a RaceStrategy).
bool parallel_loop_is_race_free(const SuperSchedule& s);

/// A block of the output kept in registers: the innermost loop is x0, the inner part of a split
/// output variable x (a plain loop: x is not a variable of the sparse operand; the output is
/// dense), optionally just inside y0, the inner part of another split output variable y over a U
/// level (rows: SpMM's i0 in `i1,j1,k,i0,j0`, BCSR's block rows); at least one loop lies between
/// x1 and the block, none of them indexes the output, and the parallel loop is outside x1;
/// 2 <= s_x, s_y <= kMaxRegisterRows and s_y * s_x <= kMaxRegisterBlock. The emitter then zeroes
/// a local array blk[s_y][s_x] after x1, accumulates into it, and adds (or, write-once, assigns)
/// it to the output after the loops between x1 and the block.
struct RegisterBlock {
  char var = 'j';
  int size = 0;       ///< s_x, a compile-time constant of the source
  char row_var = 0;   ///< y, or 0 for a block of one row
  int rows = 1;       ///< s_y (1: one row), a compile-time constant
};
/// The register block of a valid schedule, or nullopt when it has none.
std::optional<RegisterBlock> register_block(const SuperSchedule& s);

/// Whether the source of a valid schedule flushes its register block with non-temporal stores
/// when WacoArgs::stream_out is set: the block is write-once (every output entry assigned once,
/// no zeroing) and its variable is the dense output's last, so each row of a full block is s_x
/// contiguous values. Other sources ignore stream_out.
bool streams_output(const SuperSchedule& s);

/// Whether the source of a valid schedule adds into rows of a dense output in memory, a vector
/// at a time: SpMM or MTTKRP whose innermost loop runs over the output's last (dense) variable
/// with no register block or scalar accumulation between, so that every stored value updates a
/// stretch of an output row (`order=i,k,j` over UC, every MTTKRP template). Such a kernel ran
/// 1.5-1.9x slower into an output 16 or 48 bytes past a 64-byte boundary, as malloc's,
/// std::vector's and NumPy's arrays lie (its row updates straddle cache lines; AMD EPYC Zen 4
/// VM, session 79); BoundKernel::run and the drop-in header run it into an aligned buffer then.
bool updates_output_rows(const SuperSchedule& s);

/// Such an output is staged when its address is not a multiple of this: the loops that add into
/// its rows run on 32-byte vectors (GCC's preferred width on the AVX2 and AVX-512 CPUs measured),
/// so an output 32 bytes past a line ran as fast as an aligned one (SpMM `order=i,k,j format=UC`,
/// jagmesh7 n = 64, AMD Zen 4 VM: 22.1 us against 22-24), and staged it took 31.9 us.
/// BoundKernel::run and the drop-in header (kStagedAlignment) both use it.
inline constexpr std::uintptr_t kStagedOutputAlignment = 32;

/// The output size in bytes above which the host sets WacoArgs::stream_out (BoundKernel::run,
/// the drop-in header's run): this machine's last-level cache (kernels::last_level_cache_bytes;
/// 0, never, when no source tells, or when the environment sets WACO_STREAM_STORES=0, which
/// turns streaming off for comparisons). An output larger than the cache leaves it before anyone
/// reads it again, so its lines need not be read before they are written; a smaller one stays
/// cached for the caller, which non-temporal stores would evict.
std::int64_t stream_output_min_bytes();

/// Whether the split size of variable v is a compile-time constant in the emitted source: v is
/// the register block's variable, or the innermost loop is a level of the sparse operand (not a
/// dense-only variable like j of SpMM), v0 is a U level, and 1 < s_v <= kMaxConstantSplit. Every
/// other split size is a run-time argument, so schedules that differ only in those share one
/// source and one compiled kernel. Constant sizes are powers of two, so a kernel shape has at
/// most log2(kMaxRegisterBlock) = 6 constant variants per variable.
bool split_is_constant(const SuperSchedule& s, char v);

/// How a parallel loop that does not index the output stays race-free. Atomic: every update is
/// `omp atomic`. Private: thread 0 accumulates into the output, every other thread into its own
/// zeroed copy (calloc, (threads - 1) x output size floats), summed into the output after the
/// loop. Auto: chosen per problem by GeneratedKernel (see generated_kernel.hpp); the emitter takes
/// only Atomic or Private.
enum class RaceStrategy : std::uint8_t { Atomic, Private, Auto };
/// "atomic", "private", "auto".
const char* race_strategy_name(RaceStrategy r);
/// Inverse of race_strategy_name; nullopt for any other text.
std::optional<RaceStrategy> parse_race_strategy(const std::string& name);

/// The C++ source of the kernel for a canonical, valid schedule: readable, self-contained (no
/// waco headers), exporting `extern "C" int waco_kernel(const WacoArgs*)`, which returns 0, or 1
/// when the per-thread output copies of RaceStrategy::Private could not be allocated (the output
/// is then undefined), and `extern "C" const long long waco_constant_split[kMaxVars]`: per
/// variable, its split size when it is a compile-time constant, else 0. `race` (Atomic or
/// Private) matters only when the parallel loop is not race-free; otherwise the source is the
/// same for both.
/// SharedObject: as above, to compile into a shared object. Header: the same code as inline
/// functions and constants, to be placed inside a namespace of a header (no #include lines:
/// the enclosing header includes <cstdlib> and <omp.h>); see emit_standalone_header.
enum class SourceForm : std::uint8_t { SharedObject, Header };
/// `dtype`: the value type of the stored values, the dense operands and the output (the
/// source's waco_value_t, so part of the kernel's cache key).
std::string emit_kernel_source(const SuperSchedule& s, RaceStrategy race = RaceStrategy::Atomic,
                               SourceForm form = SourceForm::SharedObject,
                               kernels::Dtype dtype = kernels::Dtype::F32);

/// A drop-in header for a canonical, valid schedule: one self-contained file (C++17, OpenMP, no
/// waco-hybrid header or library) with, in namespace `name_space`, the kernel (emit_kernel_source's
/// Header form), a builder of the schedule's format from CSR arrays (from coordinates for
/// MTTKRP's tensor), and the call that runs it on the caller's dense arrays:
///   Format f = build(rows, cols, rowptr, colind, values);   // once per matrix
///   spmv(f, x, y);  spmm(f, n, B, C);  sddmm(f, k, U, V, out);  mttkrp(f, n, B, C, out);
/// `note` (may be empty) is put in the leading comment, e.g. what the schedule was tuned for.
/// The builder refuses (std::length_error) formats storing more than `max_padding` values per
/// nonzero, with the same bounds as build_storage. Values, dense arrays and outputs are of
/// `dtype` (`name_space::waco_value_t`). `baseline` "csr" (a plan the hand-written csr baseline
/// serves; `s` is then the csr schedule): an SpMV header runs the baseline's parallel rule
/// (kernels/baseline_loops.hpp: serial up to the serial bound of this machine, about four dynamic
/// chunks a thread),
/// so that it holds the loop that was measured; the other kernels' csr and csf baselines are
/// their schedules' loops already. `baseline` "dia" (SpMV; `s` the csr schedule): the same two
/// calls over diagonal storage with the dia baseline's loop (kernels/baseline_loops.hpp); its
/// builder refuses (std::length_error) a matrix whose diagonals store more than kDiaMaxFill
/// values a nonzero, and `max_padding` and `race` do not apply. A source that streams_output() streams outputs larger than
/// this machine's stream_output_min_bytes() (the header's kStreamMinBytes), as the host does.
/// Whether `name` can be emit_standalone_header's namespace: a C++ identifier (letters, digits
/// and _, not starting with a digit).
bool is_cpp_identifier(const std::string& name);

std::string emit_standalone_header(const SuperSchedule& s, RaceStrategy race,
                                   const std::string& name_space = "waco_tuned",
                                   const std::string& note = {}, double max_padding = 20.0,
                                   kernels::Dtype dtype = kernels::Dtype::F32,
                                   const std::string& baseline = {});

}  // namespace waco::codegen
