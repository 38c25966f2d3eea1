// Locality signatures of a sparse matrix (SC'20 "Efficient Tiled Sparse Matrix Multiplication
// through Matrix Signatures", Sections II and V, Alg. 7-8, eq. 10-14).
//
// A *segment* is a run of T consecutive positions of one line of the matrix: a column segment
// A[i..i+T-1][j] of a row panel, or a row segment A[i][j..j+T-1] of a column panel. It is *active*
// when it holds a nonzero. The signature summarizes, for every T at once, how many segments are
// active, which is what decides the dense-operand traffic of tiled SpMM and SDDMM (model.hpp):
//   - the histograms of zero-interval lengths (Alg. 7), vertical (per column) and horizontal (per
//     row), and from them with two suffix sums the number of non-active (unaligned) segments for
//     every T (eq. 12-14, Alg. 8) and the proportion p[T] of active segments (eq. 11);
//   - the exact *aligned* counts nacs(T) (active column segments over the row panels [pT,(p+1)T))
//     and nars(T) (active row segments over the column panels) for every power of two T;
//   - block statistics for bi x bk blocks (bi, bk in 1, 2, ..., 32): nonempty blocks, fill ratio.
//
// Everything comes from ONE pass over the canonical (row-major) nonzeros, O(nnz + rows + cols):
// row-major order visits each column's rows in increasing order, so a per-column "last row seen"
// array replaces the CSC. Aligned counts use the fact that two positions p < q of one line fall in
// different aligned segments of size 2^t exactly when t < bit_width(p XOR q), so one histogram of
// bit widths gives the counts for every power of two at once.
#pragma once

#include <cstdint>
#include <vector>

#include "waco/kernels/sparse.hpp"

namespace waco::signature {

using kernels::index_t;

/// The segment statistics of one direction. "Lines" are the columns for column segments (length
/// = rows) and the rows for row segments (length = cols).
struct SegmentSignature {
  index_t length = 0;           ///< positions per line (rows for column segments)
  index_t lines = 0;            ///< number of lines (cols for column segments)
  index_t nonempty_lines = 0;   ///< lines holding at least one nonzero
  /// nonactive[T], T = 0..length (index 0 unused, 0): non-active unaligned segments of size T,
  /// eq. 10 evaluated as eq. 14 with the suffix sums of eq. 12-13 (Alg. 8).
  std::vector<std::int64_t> nonactive;
  /// intervals[0] of Alg. 7: the runs of no zeros (two adjacent nonzeros, or a nonzero at a
  /// line's end). The other counts are not kept (8 bytes a row and a column: 64 MB for a
  /// 4M x 4M matrix): nonactive's second differences give them (intervals()).
  std::int64_t zero_runs = 0;

  /// intervals[d] of Alg. 7, 0 <= d <= length: the maximal runs of d zeros bracketed by nonzeros
  /// or the matrix boundary (d = length: the empty lines); for d >= 1 nonactive[d] -
  /// 2 nonactive[d + 1] + nonactive[d + 2] (0 beyond the length).
  std::int64_t intervals(std::int64_t d) const;
  /// The dense histogram intervals[0..length] (O(length): for reports and tests).
  std::vector<std::int64_t> interval_histogram() const;
  /// aligned_active[t], t = 0..log2_ceil(length): active aligned segments of size 2^t, summed over
  /// all lines (the last segment of a line may be shorter). For 2^t >= length it equals
  /// nonempty_lines.
  std::vector<std::int64_t> aligned_active;

  /// Total unaligned segments of size T: lines * (length - T + 1) for 1 <= T <= length.
  std::int64_t total_segments(std::int64_t T) const;
  /// Non-active unaligned segments of size T (T >= 1); for T > length, segments are clamped to
  /// the whole line, so the value of T = length is returned.
  std::int64_t nonactive_segments(std::int64_t T) const;
  /// p[T] of eq. 11: the proportion of active (unaligned) segments of size T, clamped to the
  /// whole line for T > length. 0 for an empty shape (no segments).
  double active_proportion(std::int64_t T) const;
  /// Exact aligned active segments for a power of two T >= 1 (any power of two; beyond the line
  /// length it is nonempty_lines). Precondition: T is a power of two.
  std::int64_t aligned_active_pow2(std::int64_t T) const;
  /// Aligned active segments for any T >= 1: exact for powers of two, otherwise the paper's
  /// estimate from p[T]: lines * (length / T) * p[T] (not an integer in general).
  double aligned_active_estimate(std::int64_t T) const;
};

/// Block statistics for bi x bk blocks aligned at multiples of (bi, bk).
struct BlockStat {
  int bi = 1;
  int bk = 1;
  std::int64_t nonempty_blocks = 0;
  /// nnz / (nonempty_blocks * bi * bk); 0 for an empty matrix.
  double fill_ratio = 0.0;
};

/// Largest block side of the block statistics (bi, bk = 1, 2, ..., kMaxBlock).
inline constexpr int kMaxBlock = 32;

/// How compute_signature scans the nonzeros; every choice gives the same signature.
///   - kEntries: one nonzero at a time, with the last row of every block column (any matrix);
///   - kPanels: by aligned panels of 32 rows, a bit mask of the panel's rows per column, counted
///     32 columns at a time in vector lanes at the end of each panel (dense matrices; AVX-512
///     builds only, see panel_scan_available());
///   - kAuto: kPanels when available and estimated to pay (a few panels sampled), else kEntries.
enum class SignatureScan { kAuto, kEntries, kPanels };

/// "auto", "entries" or "panels".
inline const char* scan_name(SignatureScan scan) {
  if (scan == SignatureScan::kPanels) return "panels";
  return scan == SignatureScan::kEntries ? "entries" : "auto";
}

/// The locality signature of one matrix.
struct LocalitySignature {
  index_t rows = 0;
  index_t cols = 0;
  std::int64_t nnz = 0;
  /// Column segments of row panels (vertical intervals): lines = columns, length = rows.
  SegmentSignature col_segments;
  /// Row segments of column panels (horizontal intervals): lines = rows, length = cols.
  SegmentSignature row_segments;
  /// All (bi, bk) with bi, bk powers of two up to kMaxBlock, bi-major order.
  std::vector<BlockStat> blocks;
  /// Wall time of compute_signature (seconds).
  double seconds = 0.0;
  /// The scan that computed it: kEntries or kPanels.
  SignatureScan scan = SignatureScan::kEntries;

  /// nacs(T): active column segments over the aligned row panels of height T (exact, T a power
  /// of two; see SegmentSignature::aligned_active_pow2).
  std::int64_t nacs(std::int64_t T) const { return col_segments.aligned_active_pow2(T); }
  /// nars(T): active row segments over the aligned column panels of width T (exact, power of 2).
  std::int64_t nars(std::int64_t T) const { return row_segments.aligned_active_pow2(T); }
  /// p[T] for column segments (row panels of height T).
  double p_col(std::int64_t T) const { return col_segments.active_proportion(T); }
  /// p[T] for row segments (column panels of width T).
  double p_row(std::int64_t T) const { return row_segments.active_proportion(T); }
  /// The block statistic of (bi, bk). Precondition: both powers of two <= kMaxBlock.
  const BlockStat& block(int bi, int bk) const;
};

/// Nonzeros per row and column a row chunk of the signature's pass needs: each chunk has its own
/// O(rows + cols) arrays (~17 bytes per row and column, written from fresh memory on every call),
/// which cost about as much per line as the scan per nonzero. Measured on the ten largest
/// matrices of ../shared/data (2 threads against 1): 2 chunks took 1.1-1.9x the time of one at
/// 2.5-4.8 nonzeros per line (ct2010, delaunay_n16, luxembourg_osm, loc-Gowalla), 0.97-0.99x at
/// 4.3-5.0, and 0.59-0.86x at 6.4-30.
inline constexpr double kMinChunkNnzPerLine = 6.0;

/// True when this build has the panel scan (AVX-512 F, VL, CD, BW, VPOPCNTDQ and VBMI2).
bool panel_scan_available();

/// Computes the signature of a canonical matrix (sorted by (row, col), no repeats) in one pass
/// (after a streaming check of the input), O(nnz + rows + cols) time and memory per thread. The
/// pass is split into up to `threads` row chunks scanned in parallel (0: OpenMP's default), each
/// of at least `min_chunk_nnz` nonzeros and `min_chunk_nnz_per_line` x (rows + cols) (tests pass
/// small values to exercise the stitching), and stitched at the chunk boundaries; the result
/// does not depend on the thread count. `scan` chooses the scan, the result does not depend on
/// it either: the panel scan's work per panel is a step per 32 columns of the panel's column
/// range, O(rows x cols / 1024) for a forced kPanels, which kAuto takes only when its estimate
/// of those steps is below 0.06 per nonzero. kPanels requires panel_scan_available(). Throws
/// InternalError if `a` is not canonical.
LocalitySignature compute_signature(const kernels::CooMatrix& a, int threads = 0,
                                    std::int64_t min_chunk_nnz = 65536,
                                    double min_chunk_nnz_per_line = kMinChunkNnzPerLine,
                                    SignatureScan scan = SignatureScan::kAuto);

/// ceil(log2(n)) for n >= 1 (0 for n <= 1).
int log2_ceil(std::int64_t n);
/// True when n is a positive power of two.
inline bool is_pow2(std::int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace waco::signature
