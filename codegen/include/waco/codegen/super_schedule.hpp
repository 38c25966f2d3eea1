// SuperSchedule (WACO section 4.1.2, ARCHITECTURE.md section 2): a storage format for the sparse
// operand and a loop schedule, as one value type used by every stage.
//
// Every index variable x is split into x1 (outer) and x0 (inner, size s_x, a power of two); a
// split size of 1 means "not split" and the variable is then a single loop named x. The loop
// order is a permutation of the loops with x1 before x0. The sparse operand's levels follow the
// loop order restricted to its variables (iteration is concordant with storage), each level
// uncompressed (U: a dense interval), compressed (C: pos/crd) or narrow (N: compressed with 16-bit
// coordinates, for a level whose coordinate range fits them: a block-local column offset, issue
// 36). One loop runs in parallel with
// OpenMP dynamic scheduling (chunk), on `threads` threads (0 = every available core), or with
// chunk=static (0) in one contiguous range per thread: balanced by the stored entries when the
// parallel loop is the outermost over a U level with a C level below it (CSR-like rows), else
// OpenMP's static split of the iterations; or (SpMV) with chunk=auto, the hand-written csr SpMV's
// run-time rule (kAutoChunk, -1 in the JSON form).
//
// Text form (one line; the order of the key=value fields is fixed when printed, free when parsed):
//   split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1 threads=2 chunk=32
// `split` lists only variables with s > 1 and may be omitted; `format` has one U/C/N letter per
// level of the sparse operand in level order. Example (CSR SpMV, the csr shortcut): "order=i,k
// format=UC parallel=i threads=0 chunk=auto".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/kernel_spec.hpp"

namespace waco::codegen {

/// U: a dense interval of coordinates. C: pos/crd, 32-bit coordinates. N (narrow): C with 16-bit
/// coordinates (2 bytes a position instead of 4), legal on a level whose coordinates are below
/// kMaxNarrowRange: an inner part x0 (s_x <= kMaxSplit = 2^16 always), an outer part or a whole
/// variable of a small enough extent. The schedule alone cannot tell the extent: build_storage
/// (and the legality pass, exactly) refuses an N level of a wider range, never truncating it.
enum class LevelFormat : std::uint8_t { U, C, N };

/// Whether a level stores pos/crd (C or N).
inline bool is_compressed(LevelFormat f) { return f != LevelFormat::U; }
/// The level's letter in the text form: 'U', 'C' or 'N'.
char format_letter(LevelFormat f);
/// Coordinates an N level can hold: 0 .. kMaxNarrowRange - 1 (uint16).
inline constexpr std::int64_t kMaxNarrowRange = std::int64_t{1} << 16;

/// One loop: variable x whole (not split), or its outer part x1, or its inner part x0.
struct Loop {
  enum class Part : std::uint8_t { Whole, Outer, Inner };
  char var = 'i';
  Part part = Part::Whole;

  /// "i", "i1" or "i0".
  std::string name() const;
  bool operator==(const Loop& o) const { return var == o.var && part == o.part; }
  bool operator!=(const Loop& o) const { return !(*this == o); }
};

/// The JSON form's schema version (bump on any change of the JSON layout).
inline constexpr int kScheduleJsonVersion = 1;
/// Largest split size.
inline constexpr int kMaxSplit = 1 << 16;
static_assert(kMaxSplit <= kMaxNarrowRange, "an inner part x0 always fits an N level");
/// Largest OpenMP chunk size.
inline constexpr int kMaxChunk = 256;
/// The chunk value of static scheduling (text form "chunk=static"): one contiguous range of the
/// parallel loop per thread, no dynamic dispatch. Measured on 2 threads (Xeon, SpMV csr rows):
/// 1.34x dynamic chunk 256 on a 5-point stencil and 1.46x on a block matrix, 0.74x on an R-MAT
/// graph; so it is one more choice of the space, not a replacement.
inline constexpr int kStaticChunk = 0;
/// The chunk value of the hand-written csr SpMV's rule (text form "chunk=auto"; SpMV only, with an
/// unsplit parallel loop): set when the kernel is bound, from the parallel loop's extent and the
/// threads, as kernels::csr_spmv_chunk (about four dynamic chunks a thread, at least
/// kernels::kCsrSpmvMinChunk iterations), and on one thread when A stores at most
/// kernels::csr_spmv_serial says (the serial bound measured on this machine). It is the csr shortcut's chunk for SpMV, so that the
/// generated csr runs as the baseline does: the fixed 128-row chunks it had took 1.15-1.71x the
/// baseline's time on seven of nine 16-28M-nonzero matrices (AMD EPYC VM, 2 threads). The space
/// does not enumerate it, and the cost model sees it as its dynamic twin of the largest chunk.
inline constexpr int kAutoChunk = -1;

struct SuperSchedule {
  kernels::KernelKind kind = kernels::KernelKind::SpMV;
  std::vector<int> split;             ///< per kernel_spec(kind).vars; 1 = not split
  std::vector<Loop> order;            ///< every loop once, x1 before x0
  std::vector<LevelFormat> formats;   ///< per sparse level, in level order
  Loop parallel;                      ///< the loop run in parallel
  int threads = 0;                    ///< 0 = every available core
  int chunk = 1;                      ///< OpenMP dynamic chunk size, 1..kMaxChunk, kAutoChunk or kStaticChunk

  bool operator==(const SuperSchedule& o) const;
  bool operator!=(const SuperSchedule& o) const { return !(*this == o); }

  /// The sparse operand's levels: the loops of `order` over sparse variables, in order.
  std::vector<Loop> levels() const;
  /// Split size of variable v (1 when not split).
  int split_of(char v) const;
};

/// Reasons a schedule is invalid; empty when valid. Checks: split sizes powers of two in
/// 1..kMaxSplit, the loop list matches the splits (x alone iff s_x = 1; x1 and x0 otherwise) with
/// every loop once and x1 before x0, one format per level, the parallel loop is one of the loops,
/// threads >= 0, chunk a power of two in 1..kMaxChunk, kStaticChunk, or kAutoChunk (SpMV, parallel loop unsplit).
std::vector<std::string> validate(const SuperSchedule& s);

/// s with chunk=auto replaced by its rule's least chunk (kernels::kCsrSpmvMinChunk), any other
/// chunk kept: the form a space of fixed chunks holds (the search spaces do not enumerate auto).
SuperSchedule fixed_chunk(SuperSchedule s);

/// The canonical form: idempotent. Variables whose split size is 1 become one Whole loop (an
/// x1/x0 pair of split 1 collapses to x, dropping the x0 level's format), and a parallel loop
/// that disappeared becomes the merged loop. Precondition: validate() would accept the schedule
/// up to split-1 pairs.
SuperSchedule canonicalize(const SuperSchedule& s);

/// Hash consistent with ==.
std::size_t hash_value(const SuperSchedule& s);

/// The text form (see the file comment). print(parse(t)) == t for printed text.
std::string to_text(const SuperSchedule& s);
/// Parses the text form for kernel k; throws kernels::Error naming the offending token and what
/// was expected. The result is validated (invalid schedules throw with the reasons) and canonical.
SuperSchedule parse_schedule(kernels::KernelKind k, const std::string& text);

/// {"version": kScheduleJsonVersion, "kernel", "split": {"i": 4, ...}, "order": [...],
///  "format": "UCUU", "parallel", "threads", "chunk"}.
nlohmann::json to_json(const SuperSchedule& s);
/// Inverse of to_json; throws kernels::Error on a wrong version, kernel or content.
SuperSchedule schedule_from_json(const nlohmann::json& j);

/// The implementation name of a kernel generated from a SuperSchedule, as reports, tuning-cache
/// entries and plans name what serves a result ("implementation": this, or a hand-written
/// baseline's name: generated_kernel.hpp, servable_baseline).
inline constexpr const char* kGeneratedImplementation = "generated";

/// The schedule with every N level written C (the wide twin: what the cost model ranks, whose
/// encoding knows U and C only); s itself when it has no N level.
SuperSchedule wide_twin(const SuperSchedule& s);

/// Named schedules that stand wherever a schedule is expected: "csr" (the default schedule),
/// "dcsr", "csc", "bcsrRxC" (R, C powers of two, e.g. bcsr4x4), "ncsr" (narrow csr: blocks of
/// 256 rows by 65536 columns with 16-bit block-local column offsets, UCUN), and "csf" (MTTKRP). Returns
/// nullopt when `name` is not a shortcut; throws Error when it is one but not for kernel k.
std::optional<SuperSchedule> schedule_shortcut(kernels::KernelKind k, const std::string& name);

/// A shortcut name or the text form.
SuperSchedule schedule_from_string(kernels::KernelKind k, const std::string& text);

/// A schedule list file: one schedule a line (text form or shortcut), blank lines and # comments
/// (whole lines, or after a schedule: `precompile --write-list` notes counts there) skipped. Error "<path>:<line>: ..." for a line that does not parse, and for a list with none.
std::vector<SuperSchedule> read_schedule_list(kernels::KernelKind k, const std::string& path);

/// The list of the schedules whose kernels a shipped folder holds (compiler.hpp,
/// shipped_kernel_dirs) for kernel k: <dir>/<kernel>.txt, written by `waco-hybrid precompile
/// --out dir` (a schedule list file).
std::string shipped_list_path(const std::string& dir, kernels::KernelKind k);
/// The schedules of `dir`'s list for kernel k (none when it has none); a line that does not
/// parse (a damaged list) is left out, the others kept.
std::vector<SuperSchedule> shipped_list(const std::string& dir, kernels::KernelKind k);
/// One line of a shipped list parsed (schedule_from_string), or nothing when it does not parse.
std::optional<SuperSchedule> shipped_schedule(kernels::KernelKind k, const std::string& text);
/// The schedule texts of every shipped folder's list for kernel k, in order, without repeated
/// texts, unparsed: a plan that takes the list's order parses only its first few
/// (shipped_schedule), where parsing all of them cost more than the rest of its choice.
std::vector<std::string> shipped_schedule_texts(kernels::KernelKind k);
/// The schedules of every shipped folder's list for kernel k, in order, without repeats (none
/// when no folder has a list or none is readable): an adaptive plan's short list (issue 35,
/// "cheap choice"). Kernel templates: a schedule's kernel also serves its other chunks, thread
/// counts and (most) split sizes (codegen/README.md).
std::vector<SuperSchedule> shipped_schedules(kernels::KernelKind k);

}  // namespace waco::codegen

template <>
struct std::hash<waco::codegen::SuperSchedule> {
  std::size_t operator()(const waco::codegen::SuperSchedule& s) const {
    return waco::codegen::hash_value(s);
  }
};
