// Exact storage sizes of every format of the SuperSchedule space, from one statistics pass.
//
// A C level of a format holds one position per distinct prefix of level coordinates above and at
// it (storage.hpp). Because x1 always precedes x0, every prefix of a level order resolves each
// sparse variable x to one of: absent, x1 = x >> log2(s_x), or whole (x1 and x0 both seen), so the
// size of every C level of every format is a count of distinct tuples (x >> a, y >> b[, z >> c])
// over the nonzeros, for shifts a, b, c in 0..bit_width(dim - 1) (the top shift equals "absent").
// PrefixCounts tabulates all of them at once. It generalizes the signature's block statistics
// (nonempty bi x bk blocks, bi, bk <= 32) to every power of two, with the same bit-width argument
// as signature.hpp: in a sorted list of distinct coordinates, consecutive p < q differ after a shift
// by c iff c < bit_width(p xor q), so one histogram per group gives every c. The groups are built
// by merging sorted lists hierarchically, O(bits x nnz) for matrices and O(bits^2 x nnz +
// bits x nnz log nnz) for 3-D tensors.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/kernel.hpp"

namespace waco::heuristics {

class PrefixCounts {
 public:
  PrefixCounts() = default;

  /// Counts for the sparse operand of a problem (a matrix: (row, col); MTTKRP: the 3 modes), in
  /// the order of codegen::KernelSpec::sparse_vars. Throws kernels::Error for other orders.
  /// Serial (the measuring worker computes them and must never run OpenMP: measure.hpp).
  static PrefixCounts compute(const kernels::Problem& p);
  /// Counts for coordinate arrays of 2 or 3 modes (dims[m] > every coordinate of mode m).
  /// threads: 1 serial (the default); 0 (OpenMP's default) or more: a large matrix's two row
  /// sides on two threads (an OpenMP parallel region: not in a process that forks afterwards).
  /// The counts do not depend on it.
  static PrefixCounts compute(const std::vector<const std::vector<kernels::index_t>*>& coords,
                              const std::vector<std::int64_t>& dims, int threads = 1);

  /// Number of modes (0 when default-constructed).
  int modes() const { return static_cast<int>(bits_.size()); }
  /// bit_width(dim - 1) of mode m: the shift at which every coordinate becomes 0 ("absent").
  int bits(int m) const { return bits_[static_cast<std::size_t>(m)]; }
  std::int64_t nnz() const { return nnz_; }
  /// Distinct tuples (x_m >> shift[m])_m over the nonzeros; shifts above bits(m) are clamped
  /// (they mean the mode is absent from the tuple). Precondition: shift.size() == modes().
  std::int64_t distinct(const std::vector<int>& shift) const;
  /// The same for an array of modes() shifts (no allocation; the counting loops use it).
  std::int64_t distinct(const int* shift) const;

 private:
  std::vector<int> bits_;
  std::int64_t nnz_ = 0;
  std::vector<std::int64_t> table_;  ///< row-major over (bits_[m] + 1)
};

/// The format-independent part of a format's sizes: per level of the sparse operand its
/// dimension and the positions it has when compressed (distinct prefixes through it).
struct LevelShapes {
  static constexpr std::size_t kMaxLevels = 6;  ///< 3 sparse modes, each split in two
  std::size_t count = 0;
  std::array<double, kMaxLevels> dims{};
  std::array<double, kMaxLevels> compressed{};
};

/// The shapes of `levels` (the loop order restricted to the sparse variables) for the sparse
/// operand described by `pc` (modes in spec.sparse_vars order), the kernel's extents and split
/// sizes per spec.vars. O(levels).
LevelShapes level_shapes(const PrefixCounts& pc, const codegen::KernelSpec& spec,
                         const std::vector<std::int64_t>& extents, const std::vector<int>& split,
                         const std::vector<codegen::Loop>& levels);

/// What codegen::build_storage decides for one format of the sparse operand, from the prefix
/// counts alone: the same level sizes and bounds (StorageOptions::max_padding x nnz stored values
/// or index words, 32-bit positions), checked in the same order, so the verdict is exact.
struct FormatVerdict {
  /// nullptr when build_storage builds the format, else "padding-bound", "index-overflow" or
  /// "narrow-overflow" (an N level of more than codegen::kMaxNarrowRange coordinates).
  const char* refusal = nullptr;
  /// The refused level (-1: the stored values as a whole), with its positions (or the values;
  /// narrow-overflow: its coordinates).
  int level = -1;
  double size = 0;
  /// Values stored (explicit zeros included) when the format is built.
  double stored_values = 0;
};

/// The verdict for one format (one per level) of levels with these shapes. O(levels).
FormatVerdict check_format(const LevelShapes& shapes,
                           const std::vector<codegen::LevelFormat>& formats, std::int64_t nnz,
                           double max_padding);
/// The same from the problem's description (level_shapes, then check_format).
FormatVerdict check_format(const PrefixCounts& pc, const codegen::KernelSpec& spec,
                           const std::vector<std::int64_t>& extents, const std::vector<int>& split,
                           const std::vector<codegen::Loop>& levels,
                           const std::vector<codegen::LevelFormat>& formats, double max_padding);

/// Values the format stores (explicit zeros included), with no bound applied.
double format_stored_values(const LevelShapes& shapes,
                            const std::vector<codegen::LevelFormat>& formats);

/// A refusal as a sentence in the words of build_storage ("format refused: level 2 (k0, U) would
/// hold ..."); empty when v.refusal is nullptr.
std::string describe_refusal(const FormatVerdict& v, const std::vector<codegen::Loop>& levels,
                             const std::vector<codegen::LevelFormat>& formats, std::int64_t nnz,
                             double max_padding);

}  // namespace waco::heuristics
