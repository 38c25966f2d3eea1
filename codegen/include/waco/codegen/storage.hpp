// Format storage (WACO section 4.1.2; ARCHITECTURE.md section 6): the sparse operand of a Problem
// laid out in a SuperSchedule's format. Each level is U (a dense interval of `dim` coordinates:
// child position = parent position * dim + coordinate) or C (pos/crd arrays: the children of
// parent position p are crd[pos[p] .. pos[p+1])), or N (as C with the coordinates in 16 bits,
// crd16: a level whose dim is at most kMaxNarrowRange; a wider one is refused, never truncated).
// Coordinates are split parts: x (whole), x1 = x / s,
// x0 = x % s. A U level under a C level stores explicit zeros (padding); the padding bound refuses,
// before allocating, formats that would store too much.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/kernel.hpp"

namespace waco::codegen {

struct Level {
  LevelFormat format = LevelFormat::U;
  Loop loop;                          ///< the split variable part this level stores
  std::int64_t dim = 0;               ///< coordinates of the level: extent, ceil(extent/s) or s
  std::vector<kernels::index_t> pos;  ///< C and N: parent count + 1 entries
  std::vector<kernels::index_t> crd;  ///< C only: one coordinate per position
  std::vector<std::uint16_t> crd16;   ///< N only: one coordinate per position
  std::int64_t size = 0;              ///< positions at this level
};

struct Storage {
  std::vector<Level> levels;
  kernels::Values vals;  ///< one per leaf position, explicit zeros included; the problem's type
  std::vector<kernels::index_t> entry_position;  ///< canonical nonzero e -> its leaf position
  std::int64_t nnz = 0;
  double build_seconds = 0.0;

  std::int64_t stored_values() const { return static_cast<std::int64_t>(vals.size()); }
  /// Bytes of the index arrays and values.
  std::int64_t bytes() const;
};

struct StorageOptions {
  /// Refuse formats storing more than max_padding * nnz values (the WACO artifact used 20).
  double max_padding = 20.0;
  /// Whether to fill Storage::entry_position where it comes free of the scan (the csr layout, an
  /// unpadded format in canonical order): only a sparse output (SDDMM) reads it back, and for
  /// other kernels it is 4 bytes a nonzero of fresh memory. Other formats fill it regardless.
  bool entry_positions = true;
};

/// A built storage, or why the format was refused (then storage is empty).
struct StorageResult {
  std::optional<Storage> storage;
  std::string refused;
  std::string hint;  ///< with `refused`: what to write instead (kernels::Error's hint)
};

/// build_storage's refusal messages, written here once so that exact checks elsewhere (the
/// tuner's refusal before compiling) give the same text. `level` < 0: the stored values (`size`
/// of them); else level `level` iterating `loop` in `format` needs `size` positions, over the
/// padding bound, or (`index_overflow`) more than 32-bit indices hold.
std::string refusal_message(int level, const Loop& loop, LevelFormat format, long long size,
                            std::int64_t nnz, double max_padding, bool index_overflow = false);
/// The coordinates of a level over `loop` (Level::dim) when its variable has `extent` and split
/// size `split`: the extent (x), ceil(extent / split) (x1) or split (x0).
inline std::int64_t level_dim(const Loop& loop, std::int64_t extent, std::int64_t split) {
  return loop.part == Loop::Part::Whole   ? extent
         : loop.part == Loop::Part::Outer ? (extent + split - 1) / split
                                          : split;
}

/// The refusal of an N level whose coordinate range (`dim` coordinates) exceeds kMaxNarrowRange.
std::string narrow_refusal_message(int level, const Loop& loop, std::int64_t dim);

/// Builds the sparse operand of `p` in the format of `s` (canonical, valid, for p's kernel).
/// Precondition: p's sparse operand is canonical (sorted, no repeated coordinate; a violation is
/// reported as an internal error). O(levels * nnz + stored values + C-level parent counts) when
/// the canonical order is already the level order (csr, dcsr, csf, splits of leading variables),
/// plus a sort of the nonzeros otherwise: per row block for bcsr-like orders, counting passes over
/// at most max(nnz, 1024) buckets each for csc-like orders (one pass when the key fits), a
/// comparison sort only when the reordered levels' key exceeds 64 bits. Scratch memory is O(nnz);
/// refusals by the padding bound allocate nothing of the format's size.
StorageResult build_storage(const SuperSchedule& s, const kernels::Problem& p,
                            const StorageOptions& opts = {});

}  // namespace waco::codegen
