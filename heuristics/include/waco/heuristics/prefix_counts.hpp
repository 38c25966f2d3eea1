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

#include <cstdint>
#include <vector>

#include "waco/kernels/kernel.hpp"

namespace waco::heuristics {

class PrefixCounts {
 public:
  PrefixCounts() = default;

  /// Counts for the sparse operand of a problem (a matrix: (row, col); MTTKRP: the 3 modes), in
  /// the order of codegen::KernelSpec::sparse_vars. Throws kernels::Error for other orders.
  static PrefixCounts compute(const kernels::Problem& p);
  /// Counts for coordinate arrays of 2 or 3 modes (dims[m] > every coordinate of mode m).
  static PrefixCounts compute(const std::vector<const std::vector<kernels::index_t>*>& coords,
                              const std::vector<std::int64_t>& dims);

  /// Number of modes (0 when default-constructed).
  int modes() const { return static_cast<int>(bits_.size()); }
  /// bit_width(dim - 1) of mode m: the shift at which every coordinate becomes 0 ("absent").
  int bits(int m) const { return bits_[static_cast<std::size_t>(m)]; }
  std::int64_t nnz() const { return nnz_; }
  /// Distinct tuples (x_m >> shift[m])_m over the nonzeros; shifts above bits(m) are clamped
  /// (they mean the mode is absent from the tuple). Precondition: shift.size() == modes().
  std::int64_t distinct(const std::vector<int>& shift) const;

 private:
  std::vector<int> bits_;
  std::int64_t nnz_ = 0;
  std::vector<std::int64_t> table_;  ///< row-major over (bits_[m] + 1)
};

}  // namespace waco::heuristics
