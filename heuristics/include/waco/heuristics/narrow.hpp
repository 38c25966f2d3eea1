// Narrow (16-bit, block-local) coordinates in the search (issue 36, "large-operands"): the N level
// format (codegen::LevelFormat::N) stores a compressed level's coordinates in 2 bytes instead of
// 4, which pays where a kernel streams its sparse operand from memory every call (SpMV beyond
// the last-level cache: bytes are time there).
//
// The space enumerates U and C levels only (its format masks, the cost model's encoding and the
// training data know those); narrow schedules enter a search as *twins* of the nominees the
// search chose: narrow_twin() turns a nominee into the same kernel over 16-bit coordinates,
// tiled_narrow_twin() a csr-like SpMV or SpMM nominee into tiles of 16-bit rows and columns, and
// with_narrow_twins() puts each nominee's twins right after it when the space admits their
// storage. The narrow-indices pass (passes.def) is what admits them: a storage constraint that
// refuses every N level unless the operand's working set exceeds the last-level cache
// (operand_beyond_llc). Measured side by side as every nominee, the twin wins only where it runs
// faster (README.md, "Narrow coordinates").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/values.hpp"

namespace waco::heuristics {

class Space;

/// The bytes a kernel streams of its sparse operand in CSR (or CSF) per call: a 32-bit
/// coordinate and a value per nonzero and a 32-bit position per row (`rows`: the extent of the
/// sparse operand's first variable).
double operand_stream_bytes(std::int64_t nnz, std::int64_t rows, kernels::Dtype dtype);

/// Whether the operand's stream (operand_stream_bytes) exceeds a last-level cache of `llc` bytes
/// (false when llc <= 0: no cache size known, no claim).
bool operand_beyond_llc(std::int64_t nnz, std::int64_t rows, kernels::Dtype dtype, std::int64_t llc);

/// Rows of the block of a blocked narrow twin (rule 2 of narrow_twin). Measured (SpMV, 2 threads,
/// side by side, 2M-row banded matrix of half-width 5 and 4M-row 5-point stencil, 22M and 20M
/// nonzeros): 64 and 256 within 2% of each other on the banded matrix, 256 the fastest of 64,
/// 256 and 1024 on the stencil (1024: 1.06-1.13x the time of 256).
inline constexpr int kNarrowRowBlock = 256;

/// The narrow twin of a canonical, valid schedule `s` for an operand of these extents (per
/// kernel_spec(s.kind).vars), or nullopt when it has none:
/// 1. every C level whose coordinates fit 16 bits (its dim: the whole extent, ceil(extent / s_x)
///    for x1, s_x for x0, at most codegen::kMaxNarrowRange) becomes N; else
/// 2. a csr-like schedule (two sparse levels, `x` U then `y` C, both unsplit, y wider than 16
///    bits) becomes the blocked narrow format: `split=x:256,y:65536`, x1 and y1 where x and y
///    were, then x0 (U) and y0 (N) right after y1, i.e. blocks of kNarrowRowBlock rows by 65536
///    columns holding each row's block-local column offsets in 16 bits (the layout of librsb's
///    leaves); the parallel loop x becomes x1, a dynamic chunk c becomes max(1, c / 256) (about
///    the same rows a chunk), static stays static.
/// The twin is canonical and valid; its storage may still be refused (e.g. the padding bound).
std::optional<codegen::SuperSchedule> narrow_twin(const codegen::SuperSchedule& s,
                                                  const std::vector<std::int64_t>& extents);

/// Rows of the block of a tiled narrow twin (tiled_narrow_twin): the most an N level of the
/// block's rows holds. Measured (SpMV, 2 threads, side by side, 20 rounds; AMD EPYC VM, 8 MiB
/// L3): on a 2M-square uniform random matrix (20M nonzeros) 65536 rows ran in 82 ms, 16384 in
/// 139 ms (the gathered vector's blocks are read once a row block: 4x more often).
inline constexpr int kNarrowTileRows = 1 << 16;

/// The tiled narrow twin of a csr-like SpMV or SpMM schedule (the schedules rule 2 of narrow_twin
/// blocks), a second twin beside that one, or nullopt: `split=x:65536,y:65536`, x1, y1, x0, y0
/// with `UCNN`, i.e. tiles of kNarrowTileRows rows by 65536 columns, each tile's nonempty rows
/// compressed with 16-bit row offsets and its columns 16-bit offsets (CSR within librsb-like
/// leaves), so that the block of x a tile gathers from stays in cache while the tile runs; the
/// parallel loop on x1 in dynamic chunks of one tile whatever the nominee's chunk (static tiles
/// ran no faster anywhere, 1.3-1.4x slower on R-MAT). It is for rows that gather from all over
/// a vector beyond the cache; rows that gather locally (a stencil's) run faster in rule 2's
/// blocks. Measured (2 threads, side by side, AMD EPYC VM, 8 MiB L3), ms:
/// - SpMV, two runs of 20 and 30 rounds: R-MAT (2M vertices, 16.4M nonzeros) 34.3 / 35.6
///   against csr's 36.3 / 37.2 and librsb's tuner's 37.1 / 38.6, the fastest of all (static
///   tiles 48.0 / 49.6; rule 2 121 / 128); uniform random (2M square, 20M nonzeros) 82.9 / 69.0
///   (static 82.3 / 70.2) against csr's 89.5 / 71.2, but librsb's tuner 70.6 / 45.9 (its leaves
///   are COO, a layout the space does not have); 2-D stencil and banded (20M, 22M nonzeros)
///   0.87-0.95x csr's time (static and chunk 1 within 3%), rule 2 0.77-0.88x.
/// - SpMM (n = 16), runs of 15 and 20 rounds: R-MAT 171.7 / 169.7 (static 225.5) against csr's
///   237.4 / 234.4, the best csr-like schedule's 241.6 / 235.7, Eigen's 248.8 and librsb's
///   tuner's 255.4 / 252.7; uniform 436 against 339-366 (csr-like schedules, librsb).
/// SDDMM has none (not measured).
std::optional<codegen::SuperSchedule> tiled_narrow_twin(const codegen::SuperSchedule& s,
                                                        const std::vector<std::int64_t>& extents);

/// What with_narrow_twins added.
struct NarrowTwins {
  std::vector<codegen::SuperSchedule> schedules;  ///< the nominees with their admitted twins
  int added = 0;                                   ///< twins among them
  /// Why there are none, when there are none (e.g. the pass's reason "narrow-within-llc").
  std::string note;
};

/// The nominees in order, each followed by its narrow twins (narrow_twin's, then
/// tiled_narrow_twin's) when a twin is new to the list and `space`'s storage constraints admit
/// it (Space::storage_admits: legality's exact bounds, the narrow-indices pass's cache test,
/// ...). A twin's split, nest and execution stages are the rule's, not the space's: it is the
/// nominee's kernel over narrower coordinates, not a point of the space's search.
NarrowTwins with_narrow_twins(const Space& space,
                              const std::vector<codegen::SuperSchedule>& nominees);

}  // namespace waco::heuristics
