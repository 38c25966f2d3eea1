// One-pass computation of the locality signature (SC'20 Alg. 7-8, eq. 10-14) and the exact
// aligned/block counts; see signature.hpp for the definitions and the bit-width argument.
#include "waco/signature/signature.hpp"

#include <algorithm>
#include <array>
#include <string>

#include <omp.h>

#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::signature {

namespace {

constexpr int kBlockLevels = 6;  // 1, 2, 4, 8, 16, 32
static_assert((1 << (kBlockLevels - 1)) == kMaxBlock, "block levels must reach kMaxBlock");

/// Number of bits needed for x > 0 (std::bit_width of C++20).
inline int bit_width(std::uint32_t x) { return 32 - __builtin_clz(x); }

using BitHistogram = std::array<std::int64_t, 33>;

/// Eq. 12-14 (Alg. 8): nonactive[T] = notsmallerweighted[T] - (T - 1) * notsmaller[T], both
/// suffix sums accumulated from T = length down to 1.
std::vector<std::int64_t> nonactive_from_intervals(const std::vector<std::int64_t>& intervals) {
  const std::int64_t length = static_cast<std::int64_t>(intervals.size()) - 1;
  std::vector<std::int64_t> nonactive(static_cast<std::size_t>(length) + 1, 0);
  std::int64_t notsmaller = 0;
  std::int64_t notsmallerweighted = 0;
  for (std::int64_t T = length; T >= 1; --T) {
    notsmaller += intervals[T];
    notsmallerweighted += T * intervals[T];
    nonactive[T] = notsmallerweighted - (T - 1) * notsmaller;
  }
  return nonactive;
}

/// aligned_active[t] = nonempty + #{consecutive pairs with bit_width(p ^ q) > t}, t = 0..levels.
std::vector<std::int64_t> aligned_from_bits(const BitHistogram& bits, std::int64_t nonempty,
                                            int levels) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(levels) + 1, 0);
  for (int t = 0; t <= levels; ++t) {
    std::int64_t s = nonempty;
    for (int h = t + 1; h <= 32; ++h) s += bits[h];
    out[t] = s;
  }
  return out;
}

}  // namespace

int log2_ceil(std::int64_t n) {
  int l = 0;
  while ((std::int64_t{1} << l) < n) ++l;
  return l;
}

std::int64_t SegmentSignature::total_segments(std::int64_t T) const {
  WACO_ASSERT(T >= 1, "segment size must be >= 1");
  if (length == 0) return 0;
  const std::int64_t t = std::min<std::int64_t>(T, length);
  return static_cast<std::int64_t>(lines) * (length - t + 1);
}

std::int64_t SegmentSignature::nonactive_segments(std::int64_t T) const {
  WACO_ASSERT(T >= 1, "segment size must be >= 1");
  if (length == 0) return 0;
  return nonactive[std::min<std::int64_t>(T, length)];
}

double SegmentSignature::active_proportion(std::int64_t T) const {
  const std::int64_t total = total_segments(T);
  if (total == 0) return 0.0;
  return static_cast<double>(total - nonactive_segments(T)) / static_cast<double>(total);
}

std::int64_t SegmentSignature::aligned_active_pow2(std::int64_t T) const {
  WACO_ASSERT(is_pow2(T), "aligned_active_pow2 needs a power of two, got " + std::to_string(T));
  const int t = log2_ceil(T);
  if (t >= static_cast<int>(aligned_active.size())) return nonempty_lines;
  return aligned_active[t];
}

double SegmentSignature::aligned_active_estimate(std::int64_t T) const {
  WACO_ASSERT(T >= 1, "segment size must be >= 1");
  if (is_pow2(T)) return static_cast<double>(aligned_active_pow2(T));
  if (T >= length) return static_cast<double>(nonempty_lines);
  return static_cast<double>(lines) * (static_cast<double>(length) / static_cast<double>(T)) *
         active_proportion(T);
}

const BlockStat& LocalitySignature::block(int bi, int bk) const {
  WACO_ASSERT(is_pow2(bi) && is_pow2(bk) && bi <= kMaxBlock && bk <= kMaxBlock,
              "block shape must be powers of two <= 32");
  const std::size_t idx = static_cast<std::size_t>(log2_ceil(bi)) * kBlockLevels + log2_ceil(bk);
  WACO_ASSERT(idx < blocks.size(), "block statistics missing");
  return blocks[idx];
}

namespace {

/// The state of one row chunk of the pass. Everything inside the chunk is counted locally; what
/// crosses a chunk boundary (the interval and bit width between the last nonzero of a column in
/// one chunk and its first nonzero in a later chunk) is stitched in merge order afterwards.
struct Chunk {
  std::int64_t e0 = 0, e1 = 0;   ///< entries [e0, e1)
  index_t r0 = 0, r1 = 0;        ///< rows [r0, r1) (entries' rows lie inside)
  std::vector<std::uint32_t> vintervals, hintervals;
  /// first[b][key] / last[b][key]: first and last row of the chunk in block column key = c >> b.
  std::array<std::vector<index_t>, kBlockLevels> first, last;
  std::array<BitHistogram, kBlockLevels> vbits{};
  BitHistogram hbits{};
  std::int64_t nonempty_rows = 0;
};

std::size_t blockcols(index_t cols, int b) {
  return (static_cast<std::size_t>(cols) + (std::size_t{1} << b) - 1) >> b;
}

void scan_chunk(const kernels::CooMatrix& a, Chunk& ch) {
  const index_t rows = a.rows, cols = a.cols;
  // 32-bit counters halve the histograms' cache footprint (the pass is bound by these random
  // increments); a count never exceeds nnz + lines < 2^32.
  ch.vintervals.assign(static_cast<std::size_t>(rows) + 1, 0);
  ch.hintervals.assign(static_cast<std::size_t>(cols) + 1, 0);
  for (int b = 0; b < kBlockLevels; ++b) {
    ch.first[b].assign(blockcols(cols, b), -1);
    ch.last[b].assign(blockcols(cols, b), -1);
  }
  const index_t* row = a.row.data();
  const index_t* col = a.col.data();
  std::uint32_t* hint = ch.hintervals.data();
  std::uint32_t* vint = ch.vintervals.data();
  index_t cur_row = ch.r0 - 1;
  index_t last_col = -1;
  for (std::int64_t e = ch.e0; e < ch.e1; ++e) {
    const index_t r = row[e];
    const index_t c = col[e];
    WACO_ASSERT(r >= 0 && r < rows && c >= 0 && c < cols, "coordinate out of range");
    // Horizontal intervals (Alg. 7 on rows) and row-segment bit widths.
    if (r != cur_row) {
      WACO_ASSERT(r > cur_row, "compute_signature needs a canonical (row-major sorted) matrix");
      if (last_col >= 0) ++hint[cols - last_col - 1];
      hint[cols] += r - cur_row - 1;  // empty rows in between
      ++hint[c];                      // interval from the virtual column -1
      ++ch.nonempty_rows;
      cur_row = r;
    } else {
      WACO_ASSERT(c > last_col, "compute_signature needs a canonical (row-major sorted) matrix");
      ++hint[c - last_col - 1];
      ++ch.hbits[bit_width(static_cast<std::uint32_t>(c ^ last_col))];
    }
    last_col = c;
    // Vertical intervals (Alg. 7 on columns) and column-segment bit widths; the interval before
    // a column's first nonzero in this chunk is stitched by merge().
    {
      index_t& lr = ch.last[0][c];
      if (lr < 0) {
        ch.first[0][c] = r;
      } else {
        ++vint[r - lr - 1];
        ++ch.vbits[0][bit_width(static_cast<std::uint32_t>(r ^ lr))];
      }
      lr = r;
    }
    // Block columns of width 2^b: the same bit-width argument on the rows hitting each.
    for (int b = 1; b < kBlockLevels; ++b) {
      const index_t key = c >> b;
      index_t& lr = ch.last[b][key];
      if (lr < 0)
        ch.first[b][key] = r;
      else if (lr != r)
        ++ch.vbits[b][bit_width(static_cast<std::uint32_t>(r ^ lr))];
      lr = r;
    }
  }
  if (last_col >= 0) ++hint[cols - last_col - 1];
  hint[cols] += ch.r1 - cur_row - 1;  // trailing empty rows of the chunk
}

}  // namespace

LocalitySignature compute_signature(const kernels::CooMatrix& a, int threads,
                                    std::int64_t min_chunk_nnz) {
  const double t0 = kernels::now_seconds();
  const index_t rows = a.rows;
  const index_t cols = a.cols;
  const std::int64_t nnz = a.nnz();
  WACO_ASSERT(a.row.size() == a.val.size() && a.col.size() == a.val.size(),
              "COO arrays of different lengths");
  if (threads <= 0) threads = omp_get_max_threads();
  // Small matrices are not worth a second chunk (and its O(rows + cols) arrays).
  const std::int64_t chunks = std::max<std::int64_t>(
      1, std::min<std::int64_t>(threads, nnz / std::max<std::int64_t>(1, min_chunk_nnz)));

  LocalitySignature s;
  s.rows = rows;
  s.cols = cols;
  s.nnz = nnz;

  // Chunks of about equal nnz, cut at row starts.
  std::vector<Chunk> ch(static_cast<std::size_t>(chunks));
  for (std::int64_t t = 0; t < chunks; ++t) {
    std::int64_t e = nnz * t / chunks;
    while (e > 0 && e < nnz && a.row[e] == a.row[e - 1]) ++e;
    ch[t].e0 = e;
    ch[t].r0 = t == 0 ? 0 : (e < nnz ? a.row[e] : rows);
  }
  for (std::int64_t t = 0; t < chunks; ++t) {
    ch[t].e1 = t + 1 < chunks ? ch[t + 1].e0 : nnz;
    ch[t].r1 = t + 1 < chunks ? ch[t + 1].r0 : rows;
    WACO_ASSERT(ch[t].e0 <= ch[t].e1 && ch[t].r0 <= ch[t].r1, "bad chunk split");
  }
#pragma omp parallel for schedule(static, 1) num_threads(static_cast<int>(chunks)) if (chunks > 1)
  for (std::int64_t t = 0; t < chunks; ++t) scan_chunk(a, ch[t]);

  // Merge: histograms add up; per block column, stitch the chunks in row order.
  std::vector<std::uint32_t>& vintervals = ch[0].vintervals;
  std::vector<std::uint32_t>& hintervals = ch[0].hintervals;
  std::array<BitHistogram, kBlockLevels> vbits = ch[0].vbits;
  BitHistogram hbits = ch[0].hbits;
  std::int64_t nonempty_rows = ch[0].nonempty_rows;
  for (std::int64_t t = 1; t < chunks; ++t) {
    for (std::size_t d = 0; d < vintervals.size(); ++d) vintervals[d] += ch[t].vintervals[d];
    for (std::size_t d = 0; d < hintervals.size(); ++d) hintervals[d] += ch[t].hintervals[d];
    for (int b = 0; b < kBlockLevels; ++b)
      for (int h = 0; h <= 32; ++h) vbits[b][h] += ch[t].vbits[b][h];
    for (int h = 0; h <= 32; ++h) hbits[h] += ch[t].hbits[h];
    nonempty_rows += ch[t].nonempty_rows;
  }
  std::array<std::int64_t, kBlockLevels> first_in_blockcol{};
  for (int b = 0; b < kBlockLevels; ++b) {
    const std::size_t keys = blockcols(cols, b);
    for (std::size_t key = 0; key < keys; ++key) {
      index_t prev = -1;
      for (std::int64_t t = 0; t < chunks; ++t) {
        const index_t f = ch[t].first[b][key];
        if (f < 0) continue;
        if (prev < 0) {
          ++first_in_blockcol[b];
          if (b == 0) ++vintervals[f];  // interval from the virtual row -1
        } else {
          if (b == 0) ++vintervals[f - prev - 1];
          ++vbits[b][bit_width(static_cast<std::uint32_t>(f ^ prev))];
        }
        prev = ch[t].last[b][key];
      }
      if (b == 0) ++vintervals[prev < 0 ? rows : rows - prev - 1];  // to the virtual row M
    }
  }

  SegmentSignature& v = s.col_segments;
  v.length = rows;
  v.lines = cols;
  v.nonempty_lines = static_cast<index_t>(first_in_blockcol[0]);
  v.intervals.assign(vintervals.begin(), vintervals.end());
  v.nonactive = nonactive_from_intervals(v.intervals);
  v.aligned_active = aligned_from_bits(vbits[0], v.nonempty_lines, log2_ceil(rows));

  SegmentSignature& h = s.row_segments;
  h.length = cols;
  h.lines = rows;
  h.nonempty_lines = static_cast<index_t>(nonempty_rows);
  h.intervals.assign(hintervals.begin(), hintervals.end());
  h.nonactive = nonactive_from_intervals(h.intervals);
  h.aligned_active = aligned_from_bits(hbits, h.nonempty_lines, log2_ceil(cols));

  s.blocks.reserve(kBlockLevels * kBlockLevels);
  for (int ai = 0; ai < kBlockLevels; ++ai) {
    for (int b = 0; b < kBlockLevels; ++b) {
      BlockStat st;
      st.bi = 1 << ai;
      st.bk = 1 << b;
      st.nonempty_blocks = first_in_blockcol[b];
      for (int hb = ai + 1; hb <= 32; ++hb) st.nonempty_blocks += vbits[b][hb];
      st.fill_ratio = st.nonempty_blocks == 0
                          ? 0.0
                          : static_cast<double>(nnz) /
                                (static_cast<double>(st.nonempty_blocks) * st.bi * st.bk);
      s.blocks.push_back(st);
    }
  }
  s.seconds = kernels::now_seconds() - t0;
  return s;
}

}  // namespace waco::signature
