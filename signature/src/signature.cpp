// One-pass computation of the locality signature (SC'20 Alg. 7-8, eq. 10-14) and the exact
// aligned/block counts; see signature.hpp for the definitions and the bit-width argument.
//
// Cost. The budget is half of one CSR SpMM with J = 128 on the same matrix, so the pass is built
// around what a nonzero costs:
//   - one cache line of last-row slots for the block-column widths 1..8 (a Group), one small array
//     for 16 and 32, one increment of each zero-interval histogram (32-bit bins);
//   - every small histogram (bit widths, block thresholds) in registers, flushed every few
//     thousand nonzeros: a memory histogram hit at the same bin by consecutive nonzeros
//     serializes through store forwarding;
//   - no data-dependent branch except the row change (block columns of the row already hit give a
//     bit width of 0, which counts nowhere, instead of a mispredicted test); matrices of dense
//     runs get a variant that skips them, and the block columns of a column hit in the previous
//     row of its row pair, chosen from a count taken while checking the input;
//   - with AVX-512 the other matrices count the 25 block thresholds of a nonzero in one vector
//     (permute of the slots, xor, min, lzcnt, table permute, add) and store each slot line once;
//     the dense-run variant stays scalar (a vector store followed by a load of the same line for
//     the next nonzero of the run is a dependency chain the scalar stores do not have);
//   - the block count of bi = 1 comes from the row bit widths, of bk = 1 from the columns'.
// The input check (range, order) is a separate branch-free streaming pass, split over the
// threads. Threads scan row chunks; the chunk boundaries are stitched afterwards (O(rows + cols)
// per chunk). A matrix too sparse for two chunks (kMinChunkNnzPerLine) is scanned by two threads
// all the same: one counts the vertical statistics and the blocks, the other the horizontal ones
// (2 threads, the seven of the ten largest matrices that take one chunk: 0.69-0.88x the time
// of the one-thread scan, side by side in one process, two runs). The sums of eq. 12-14 of the two
// directions run on two threads too.
// Dense matrices (choose_panels) take the panel scan instead (scan_panels): per nonzero an OR of
// its row bit into its column's mask and the horizontal statistics, every vertical and block
// statistic from the masks at the end of each panel of 32 rows, 32 columns at a time in vector
// lanes (0.53-0.70x the time of the entry scan on bcsstk16, Groebner_id2003_aug and
// facebook_combined, side by side in one process, 2 threads).
#include "waco/signature/signature.hpp"

#include <algorithm>
#include <array>
#include <string>

#include <omp.h>
#if defined(__LZCNT__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::signature {

namespace {

constexpr int kBlockLevels = 6;  // 1, 2, 4, 8, 16, 32
constexpr int kPanelRows = 32;  // rows per panel of the panel scan: no block straddles two
static_assert((1 << (kBlockLevels - 1)) == kMaxBlock, "block levels must reach kMaxBlock");

/// Number of bits needed for x > 0 (std::bit_width of C++20).
inline int bit_width(std::uint32_t x) { return 32 - __builtin_clz(x); }

using BitHistogram = std::array<std::int64_t, 33>;

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

/// Leading zeros of a 32-bit value widened to 64 bits, 32 + (32 - bit_width(x)), so 64 for 0;
/// without a branch (one lzcnt where the target has it; a `x == 0 ? ... : clz(x)` form compiles
/// to a branch that mispredicts on every other nonzero), and already a 64-bit table index.
inline std::uint64_t lz64(std::uint32_t x) {
#if defined(__LZCNT__)
  return _lzcnt_u64(x);
#else
  return 32 + static_cast<std::uint64_t>(
                  __builtin_clzll((static_cast<std::uint64_t>(x) << 32) | 0x80000000u));
#endif
}

// Register accumulators. Incrementing a memory histogram at a data-dependent bin serializes
// through store forwarding whenever consecutive nonzeros hit the same bin (the common case), so
// the small histograms live in registers and are flushed to memory every kFlush nonzeros:
//   - the 33-bin bit-width histograms of the columns (b = 0) and of the rows: 32 16-bit lanes of
//     one vector each (lane h - 1 counts bin h; bin 0 never occurs there);
//   - for block-column widths b = 1..5 only the threshold counts #{h > ai}, ai = 1..5, matter
//     (the block statistics; ai = 0 follows from the row bit widths), packed as five 12-bit
//     fields of one 64-bit vector lane per level. Vector registers, one per level: the pass needs
//     every general register for its pointers, and one accumulator per level keeps each
//     increment a single add of a broadcast table entry.
using Lanes = std::uint16_t __attribute__((vector_size(64)));
using Packed = std::uint64_t __attribute__((vector_size(16)));
constexpr int kFieldBits = 12;
constexpr std::uint64_t kFieldMask = (std::uint64_t{1} << kFieldBits) - 1;
constexpr std::int64_t kFlush = static_cast<std::int64_t>(kFieldMask);  // 4095 < 65536 per lane
constexpr std::int64_t kPrefetchFar = 24;   // entries ahead: last-row lines
constexpr std::int64_t kPrefetchNear = 8;   // entries ahead: interval bins

/// The tables are indexed by z = lz64(p ^ q) = 64 - h for the bit width h of the xor of two
/// positions (entries below 32 are unused).
struct AccumulatorTables {
  Lanes one_hot[65];             ///< one_hot[64 - h]: lane h - 1 = 1 (h = 1..32); h = 0: none
  std::uint64_t thresholds[65];  ///< thresholds[64 - h]: field ai - 1 = [h > ai], ai = 1..5
};

const AccumulatorTables& accumulator_tables() {
  static const AccumulatorTables tables = [] {
    AccumulatorTables x{};
    for (int h = 0; h <= 32; ++h) {
      for (int l = 0; l < 32; ++l) x.one_hot[64 - h][l] = (h >= 1 && l == h - 1) ? 1 : 0;
      for (int ai = 1; ai < kBlockLevels; ++ai)
        if (h > ai) x.thresholds[64 - h] |= std::uint64_t{1} << (kFieldBits * (ai - 1));
    }
    return x;
  }();
  return tables;
}

/// Adds the lanes (lane l counts bin l + 1) to a 33-bin histogram and clears them.
inline void flush_lanes(Lanes& acc, BitHistogram& hist) {
  for (int l = 0; l < 32; ++l) hist[l + 1] += acc[l];
  acc = Lanes{};
}

/// Adds the five packed threshold fields to counts[1..5] and clears them.
inline void flush_thresholds(Packed& acc, std::array<std::int64_t, kBlockLevels>& counts) {
  for (int ai = 1; ai < kBlockLevels; ++ai)
    counts[ai] += static_cast<std::int64_t>((acc[0] >> (kFieldBits * (ai - 1))) & kFieldMask);
  acc = Packed{};
}

/// The last row seen in each block column, for the block-column widths 2^b, b = 0..3, laid out so
/// that one nonzero touches one cache line: a Group holds the 8 columns [8g, 8g + 8) (b = 0), their
/// 4 pairs, 2 quads and 1 octet. -1: not seen yet. (Per level one array indexed by c >> b would
/// save a few address instructions but touch four lines per nonzero: slower once the arrays
/// outgrow the caches, e.g. on luxembourg_osm right after an SpMM.)
struct alignas(64) Group {
  index_t l0[8];
  index_t l1[4];
  index_t l2[2];
  index_t l3;
  index_t pad;
};
static_assert(sizeof(Group) == 64, "one Group per cache line");

/// The same for b = 4 and 5: per 32 columns, the last rows of its two 16-column halves and of the
/// whole (dense: 16 bytes per 32 columns).
struct Upper {
  index_t l4[2];
  index_t l5;
  index_t pad;
};

#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512CD__)
#define WACO_SIGNATURE_VECTOR_BLOCKS 1
#else
#define WACO_SIGNATURE_VECTOR_BLOCKS 0
#endif

#if WACO_SIGNATURE_VECTOR_BLOCKS
/// The block thresholds in vector lanes (AVX-512). Per nonzero, one two-source permute gathers
/// the last rows lr_b of the column's block columns, b = 1..5, from its Group line (b <= 3) and its
/// Upper (b = 4, 5) into the low dwords of the 64-bit lanes b - 1; then, in every lane at once,
/// x = min(r ^ lr_b, 63) (so bit_width(x) = min(bit_width(r ^ lr_b), 6), which is all the
/// thresholds ai <= 5 need), lzcnt, and a permute of the eight-entry table below indexed by the
/// low three bits of lzcnt(x) in {58, ..., 64} (all distinct) gives the packed threshold fields
/// of the scalar pass (five 12-bit fields [bit_width > ai], ai = 1..5), added to one accumulator.
/// Each of the two slot lines is then stored once, blended with r in the column's slots.
struct LaneTables {
  alignas(64) std::int32_t pair_index[24][16];  ///< [c & 23]: dword 2(b - 1) -> slot of level b
                                                ///< (0..15 Group, 16..19 Upper); odd dwords 0
  alignas(64) std::uint64_t thresholds[8];      ///< [lzcnt(x) & 7]: the fields of bit_width(x)
  std::uint16_t group_store[8];                 ///< [c & 7]: the column's slots l0..l3
  std::uint8_t upper_store[2];                  ///< [(c >> 4) & 1]: its l4 half and l5
};

const LaneTables& lane_tables() {
  static const LaneTables tables = [] {
    LaneTables x{};
    for (int key = 0; key < 24; ++key) {
      const int k = key & 7, half = (key >> 4) & 1;
      const int slot[6] = {k, 8 + (k >> 1), 12 + (k >> 2), 14, 16 + half, 16 + 2};
      for (int j = 0; j < 16; ++j)
        x.pair_index[key][j] = (j % 2 == 0 && j < 2 * (kBlockLevels - 1)) ? slot[1 + j / 2] : 0;
    }
    for (int k = 0; k < 8; ++k)
      x.group_store[k] = static_cast<std::uint16_t>((1u << k) | (1u << (8 + (k >> 1))) |
                                                    (1u << (12 + (k >> 2))) | (1u << 14));
    for (int half = 0; half < 2; ++half)
      x.upper_store[half] = static_cast<std::uint8_t>((1u << half) | (1u << 2));
    for (int bw = 0; bw <= 6; ++bw) {  // lzcnt of a 64-bit x < 64 is 64 - bw
      std::uint64_t fields = 0;
      for (int ai = 1; ai < kBlockLevels; ++ai)
        if (bw > ai) fields |= std::uint64_t{1} << (kFieldBits * (ai - 1));
      x.thresholds[(64 - bw) & 7] = fields;
    }
    return x;
  }();
  return tables;
}

/// Adds the threshold fields of lanes b - 1 (b = 1..5) to blocks[b][1..5] and clears them.
inline void flush_lane_counts(
    __m512i& acc, std::array<std::array<std::int64_t, kBlockLevels>, kBlockLevels>& blocks) {
  alignas(64) std::uint64_t lanes[8];
  _mm512_store_si512(lanes, acc);
  for (int b = 1; b < kBlockLevels; ++b)
    for (int ai = 1; ai < kBlockLevels; ++ai)
      blocks[b][ai] += static_cast<std::int64_t>((lanes[b - 1] >> (kFieldBits * (ai - 1))) &
                                                 kFieldMask);
  acc = _mm512_setzero_si512();
}
#endif

/// A first occurrence of a block column in a chunk after the first: (key, row), stitched by the
/// merge with the last row of the key in the earlier chunks.
struct FirstSeen {
  index_t key;
  index_t row;
};

/// The state of one row chunk of the pass. Everything inside the chunk is counted as if the chunk
/// were the whole matrix (a block column's first row r in the chunk counts as an interval of r
/// from the virtual row -1 and as a first occurrence, bit width 32); the merge corrects that for
/// the block columns already seen in earlier chunks, from the FirstSeen lists.
struct Chunk {
  std::int64_t e0 = 0, e1 = 0;   ///< entries [e0, e1)
  index_t r0 = 0, r1 = 0;        ///< rows [r0, r1) (entries' rows lie inside)
  bool record_firsts = false;    ///< false for the first chunk (nothing to stitch to)
  bool horizontal = true;        ///< its scan counts the horizontal statistics too; false when a
                                 ///< second thread counts them (scan_horizontal)
  std::vector<std::uint32_t> vintervals, hintervals;
  std::vector<Group> groups;
  std::vector<Upper> upper;
  bool panels = false;               ///< scanned by scan_panels (then the next four, no slots)
  std::vector<std::uint32_t> masks;  ///< per column: the rows of the current panel it holds
  std::vector<index_t> lastrow;      ///< per column: its last row before the current panel
  std::vector<std::uint32_t> multi;  ///< the panel's masks of two runs of rows or more
  std::size_t multis = 0;
  std::vector<std::uint8_t> gaps;    ///< count_run_gaps' buffer
  std::array<std::vector<FirstSeen>, kBlockLevels> firsts;
  /// vbits[h], h = 1..31: consecutive nonzeros p < q of one column with bit_width(p ^ q) = h;
  /// vbits[32]: nonempty columns; vbits[0]: unused.
  BitHistogram vbits{};
  /// blocks[b][ai], b, ai = 1..5: over the block columns of width 2^b, the first rows plus the
  /// consecutive distinct rows p < q with bit_width(p ^ q) > ai (nonempty 2^ai x 2^b blocks).
  std::array<std::array<std::int64_t, kBlockLevels>, kBlockLevels> blocks{};
  /// hbits[h], h = 1..31: consecutive nonzeros p < q of one row with bit_width(p ^ q) = h;
  /// hbits[32]: nonempty rows (the first nonzero of a row is taken after the virtual column -1).
  BitHistogram hbits{};
};

std::size_t blockcols(index_t cols, int b) {
  return (static_cast<std::size_t>(cols) + (std::size_t{1} << b) - 1) >> b;
}

/// The last-row slots of the block columns of width 2^b, b = 0..5, holding column c.
struct Slots {
  index_t* level[kBlockLevels];

  Slots(Group& g, Upper& u, std::uint32_t c) {
    const std::uint32_t k = c & 7;  // column within its Group
    level[0] = &g.l0[k];
    level[1] = &g.l1[k >> 1];
    level[2] = &g.l2[k >> 2];
    level[3] = &g.l3;
    level[4] = &u.l4[(c >> 4) & 1];
    level[5] = &u.l5;
  }
  Slots(Chunk& ch, index_t c)
      : Slots(ch.groups[static_cast<std::size_t>(c) >> 3],
              ch.upper[static_cast<std::size_t>(c) >> 5], static_cast<std::uint32_t>(c)) {}
};

/// The last-row slot of the block column of width 2^b holding column c (b = 0..5).
inline index_t& last_slot(Chunk& ch, int b, index_t c) { return *Slots(ch, c).level[b]; }

/// The input check of the entries [e0, e1), by one thread.
struct CheckPart {
  std::int64_t e0 = 0, e1 = 0;
  bool canonical = true;        ///< in range and strictly row-major (also against entry e0 - 1)
  std::int64_t same_pair = 0;   ///< nonzeros in the column pair of the previous one of the row
};

/// The horizontal statistics of a chunk (Alg. 7 on rows, and the row bit widths), one nonzero at
/// a time in row-major order, for both scans that count them. The caller keeps the previous
/// column of the row, last_col: -1 (the virtual column) before the row's first nonzero, which
/// thus counts its interval from there and bit width 32 (a nonempty row). Closing a row counts
/// the interval to the virtual column `cols`; closing the virtual row before the chunk's first
/// one counts one interval of `cols` too many, which finish() takes back with the empty rows.
struct RowCounts {
  std::uint32_t* hint;
  index_t cols;
  Lanes acc{};

  void close_row(index_t last_col) { ++hint[static_cast<std::uint32_t>(cols - last_col - 1)]; }
  /// lzc = lz64(c ^ last_col).
  void add(index_t c, index_t last_col, std::uint64_t lzc, const AccumulatorTables& tab) {
    ++hint[static_cast<std::uint32_t>(c - last_col - 1)];
    acc += tab.one_hot[lzc];
  }
  /// After the chunk's last nonzero, and after acc was flushed into ch.hbits.
  void finish(Chunk& ch, index_t last_col) {
    close_row(last_col);
    hint[cols] += (ch.r1 - ch.r0) - ch.hbits[32] - 1;  // the empty rows; the virtual row's
  }
};

/// Checks that the part's entries lie in range and strictly increase in (row, col) order (also
/// against the entry before the part), in one branch-free streaming pass so that the scan needs
/// no checks; and counts the nonzeros in the same column pair as the previous nonzero of their
/// row (which choose the scan variant).
void check_entries(const kernels::CooMatrix& a, CheckPart& part) {
  const index_t* row = a.row.data();
  const index_t* col = a.col.data();
  const auto rows = static_cast<std::uint32_t>(a.rows);
  const auto cols = static_cast<std::uint32_t>(a.cols);
  unsigned bad = 0;
  std::int64_t same_pair = 0;
  if (part.e0 < part.e1) {
    const std::int64_t e0 = part.e0;
    bad |= static_cast<unsigned>(static_cast<std::uint32_t>(row[e0]) >= rows) |
           static_cast<unsigned>(static_cast<std::uint32_t>(col[e0]) >= cols);
    for (std::int64_t e = std::max<std::int64_t>(e0, 1); e < part.e1; ++e) {  // vectorizes
      const index_t r = row[e], c = col[e], pr = row[e - 1], pc = col[e - 1];
      const unsigned same_row = r == pr;
      bad |= static_cast<unsigned>(static_cast<std::uint32_t>(r) >= rows) |
             static_cast<unsigned>(static_cast<std::uint32_t>(c) >= cols) |
             static_cast<unsigned>(r < pr) | (same_row & static_cast<unsigned>(c <= pc));
      same_pair += same_row & static_cast<unsigned>((c ^ pc) < 2);
    }
  }
  part.canonical = bad == 0;
  part.same_pair = same_pair;
}

bool all_canonical(const std::vector<CheckPart>& parts) {
  return std::all_of(parts.begin(), parts.end(), [](const CheckPart& x) { return x.canonical; });
}

/// Records the first occurrences in the chunk (slot -1) of column c and of its block columns,
/// before the nonzero (r, c) updates the slots. Only a column new to the chunk can belong to a
/// block column new to it, so the scan calls this on that rare branch alone.
[[gnu::cold]] [[gnu::noinline]] void record_firsts(Chunk& ch, index_t c, index_t r) {
  const Slots s(ch, c);
  for (int b = 0; b < kBlockLevels; ++b)
    if (*s.level[b] < 0) ch.firsts[b].push_back({c >> b, r});
}

/// The pass over the entries of one (canonical) chunk. Per nonzero: one random cache line of last
/// rows (b = 0..3) and one of a small array (b = 4, 5), one increment of each interval histogram,
/// register accumulators for the rest. Its own function, not inlined into the caller's OpenMP
/// region, which would leave fewer registers for its pointers and accumulators.
///
/// Branches: the row change, and with kRecord the first occurrence of a column in the chunk
/// (rare). With kGate, the block columns whose slots cannot count are skipped: those that the
/// previous nonzero of the row already hit (for b >= 1 when c is in the same column pair, for
/// b >= 4 when in the same 16 columns), and all of b >= 1 when the column's last row lies in the
/// row pair of r (bit width <= 1: the block columns' last rows, between it and r, lie there too,
/// so they count for no ai >= 1, and a slot left there keeps every later count exact). That saves
/// work on matrices of dense runs but mispredicts on scattered rows, so the caller picks it from
/// the share of same-pair nonzeros. With kPrefetch (chosen when the chunk's arrays outgrow the
/// L2), the last-row lines of the nonzero kPrefetchFar ahead and the interval bins of the one
/// kPrefetchNear ahead are prefetched (the latter from a last row that may still change: a
/// prefetch is only a hint). With kVector (AVX-512, not with kGate), the block thresholds of
/// b = 1..5 are counted in vector lanes (LaneTables). Without kHorizontal, the horizontal
/// statistics are left to scan_horizontal on another thread.
template <bool kRecord, bool kGate, bool kPrefetch, bool kVector, bool kHorizontal>
[[gnu::noinline]] void scan_entries(const kernels::CooMatrix& a, Chunk& ch) {
  const index_t cols = a.cols;
  const index_t* col = a.col.data();
  const std::ptrdiff_t to_row = a.row.data() - col;  // row[e] = col[e + to_row]: one register
  std::uint32_t* hint = ch.hintervals.data();
  std::uint32_t* vint = ch.vintervals.data();
  Group* groups = ch.groups.data();
  Upper* upper = ch.upper.data();
  static_assert(!kVector || (WACO_SIGNATURE_VECTOR_BLOCKS && !kGate), "no such scan variant");
  const AccumulatorTables& tab = accumulator_tables();
  Lanes vacc{};
  RowCounts horizontal{hint, cols};
  std::array<Packed, kBlockLevels> bacc{};  // bacc[b], b = 1..5
  index_t cur_row = ch.r0 - 1;
#if WACO_SIGNATURE_VECTOR_BLOCKS
  const LaneTables& lanes = lane_tables();
  const __m512i thresholds = _mm512_load_si512(lanes.thresholds);
  const __m512i clamp = _mm512_set1_epi64(63);
  __m512i lane_acc = _mm512_setzero_si512();
  // The row, broadcast (set at each row change): dwords, and zero-extended to 64-bit lanes.
  __m512i rb = _mm512_set1_epi32(cur_row);
  __m128i rb4 = _mm_set1_epi32(cur_row);
  __m512i rb64 = _mm512_set1_epi64(static_cast<std::uint32_t>(cur_row));
#endif
  index_t last_col = -1;  // the previous column of the row (RowCounts)
  for (const index_t* p0 = col + ch.e0; p0 < col + ch.e1; p0 += kFlush) {
    const index_t* const p1 = std::min(col + ch.e1, p0 + kFlush);
    for (const index_t* pc = p0; pc < p1; ++pc) {
      if (kPrefetch && pc + kPrefetchFar < col + ch.e1) {
        const auto cf = static_cast<std::uint32_t>(pc[kPrefetchFar]);
        __builtin_prefetch(&groups[cf >> 3], 1);
        __builtin_prefetch(&upper[cf >> 5], 1);
      }
      if (kPrefetch && pc + kPrefetchNear < col + ch.e1) {
        const index_t cf = pc[kPrefetchNear], rf = pc[kPrefetchNear + to_row];
        __builtin_prefetch(&vint[rf - groups[cf >> 3].l0[cf & 7] - 1], 1);
        const index_t gap = cf - pc[kPrefetchNear - 1] - 1;  // < 0: a new row
        if (kHorizontal) __builtin_prefetch(&hint[gap < 0 ? cf : gap], 1);
      }
      const index_t r = pc[to_row];
      const index_t c = *pc;
      if (r != cur_row) {
        if (kHorizontal) horizontal.close_row(last_col);
        last_col = -1;
        cur_row = r;
#if WACO_SIGNATURE_VECTOR_BLOCKS
        if constexpr (kVector) {
          rb = _mm512_set1_epi32(r);
          rb4 = _mm_set1_epi32(r);
          rb64 = _mm512_set1_epi64(static_cast<std::uint32_t>(r));
        }
#endif
      }
      const std::uint64_t lzc = lz64(static_cast<std::uint32_t>(c ^ last_col));
      if (kHorizontal) horizontal.add(c, last_col, lzc, tab);
      last_col = c;
      // Vertical intervals (Alg. 7 on columns) and the bit widths of consecutive distinct rows
      // of every block-column width 2^b. lr = -1 (first time in this chunk) gives vint[r] (from
      // the virtual row -1) and bit width 32; lr = r (block column already hit in this row,
      // b >= 1) gives bit width 0, which counts nowhere.
      const auto uc = static_cast<std::uint32_t>(c);  // unsigned: no sign extensions
      const std::uint32_t k = uc & 7;                  // column within its Group
      Group& g = groups[uc >> 3];
      const index_t lr0 = g.l0[k];
      ++vint[static_cast<std::uint32_t>(r - lr0 - 1)];
      const std::uint64_t z0 = lz64(static_cast<std::uint32_t>(r ^ lr0));
      vacc += tab.one_hot[z0];
      if (kRecord && lr0 < 0) record_firsts(ch, c, r);
#if WACO_SIGNATURE_VECTOR_BLOCKS
      if constexpr (kVector) {
        const __m512i zg = _mm512_load_si512(&g);
        Upper& u = upper[uc >> 5];
        const __m128i zu = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&u));
        const __m512i lr = _mm512_maskz_permutex2var_epi32(
            0x0155, zg, _mm512_load_si512(lanes.pair_index[uc & 23]), _mm512_zextsi128_si512(zu));
        // (maskz forms: GCC 12 warns on the plain min and permutexvar; lanes 5..7 are unused)
        const __m512i x = _mm512_maskz_min_epu64(0x1F, _mm512_xor_si512(lr, rb64), clamp);
        lane_acc = _mm512_add_epi64(
            lane_acc, _mm512_maskz_permutexvar_epi64(0x1F, _mm512_lzcnt_epi64(x), thresholds));
        _mm512_store_si512(&g, _mm512_mask_blend_epi32(lanes.group_store[k], zg, rb));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(&u),
                         _mm_mask_blend_epi32(lanes.upper_store[(uc >> 4) & 1], zu, rb4));
        continue;
      }
#endif
      g.l0[k] = r;
      // The threshold increment of block-column width 2^b.
      const auto step = [&](int b, index_t& slot) {
        const index_t lr = slot;
        slot = r;
        bacc[b] += tab.thresholds[lz64(static_cast<std::uint32_t>(r ^ lr))];
      };
      if (kGate && std::max(lzc, z0) >= 63) continue;  // same column pair, or row pair
      step(1, g.l1[k >> 1]);
      step(2, g.l2[k >> 2]);
      step(3, g.l3);
      if (kGate && lzc >= 60) continue;  // same 16 columns
      Upper& u = upper[uc >> 5];
      step(4, u.l4[(uc >> 4) & 1]);
      step(5, u.l5);
    }
#if WACO_SIGNATURE_VECTOR_BLOCKS
    if constexpr (kVector) flush_lane_counts(lane_acc, ch.blocks);
#endif
    if constexpr (!kVector)
      for (int b = 1; b < kBlockLevels; ++b) flush_thresholds(bacc[b], ch.blocks[b]);
    flush_lanes(vacc, ch.vbits);
    if (kHorizontal) flush_lanes(horizontal.acc, ch.hbits);
  }
  if (kHorizontal) horizontal.finish(ch, last_col);
}

/// The horizontal statistics of a chunk (hintervals, hbits) alone, as the scan counts them, for a
/// second thread while the first scans the chunk without them: when the matrix is too sparse
/// for two row chunks, the threads split the statistics instead of the rows.
[[gnu::noinline]] void scan_horizontal(const kernels::CooMatrix& a, Chunk& ch) {
  const index_t cols = a.cols;
  const index_t* col = a.col.data();
  const index_t* row = a.row.data();
  ch.hintervals.assign(static_cast<std::size_t>(cols) + 1, 0);
  const AccumulatorTables& tab = accumulator_tables();
  RowCounts horizontal{ch.hintervals.data(), cols};
  index_t cur_row = ch.r0 - 1;
  index_t last_col = -1;
  for (std::int64_t e0 = ch.e0; e0 < ch.e1; e0 += kFlush) {
    const std::int64_t e1 = std::min(ch.e1, e0 + kFlush);
    for (std::int64_t e = e0; e < e1; ++e) {
      const index_t r = row[e], c = col[e];
      if (r != cur_row) {
        horizontal.close_row(last_col);
        last_col = -1;
        cur_row = r;
      }
      horizontal.add(c, last_col, lz64(static_cast<std::uint32_t>(c ^ last_col)), tab);
      last_col = c;
    }
    flush_lanes(horizontal.acc, ch.hbits);
  }
  horizontal.finish(ch, last_col);
}

#if WACO_SIGNATURE_VECTOR_BLOCKS && defined(__AVX512VPOPCNTDQ__) && defined(__AVX512VBMI2__) && \
    defined(__AVX512BW__)
#define WACO_SIGNATURE_PANELS 1
#else
#define WACO_SIGNATURE_PANELS 0
#endif

#if WACO_SIGNATURE_PANELS
// The panel scan, for dense matrices (choose_panels). Rows are taken in aligned panels of
// kPanelRows = 32: per nonzero the scan ORs the bit r & 31 into its column's mask, and counts
// the horizontal statistics as scan_entries does. At the end of a panel, the masks of its column
// range give every vertical statistic, 32 columns at a time in vector lanes:
//   - a column's mask m packs its occupied aligned row segments of every size 2^t, t = 1..5, as
//     W = F1 | F2 << 1 | F3 << 3 | F4 << 7 | F5 << 15 (F_t: m folded to one bit per 2^t rows, at
//     bit 2^t k; the five land on disjoint bits), so popcount(W & kSegmentBits[t]) counts the
//     nonempty 2^t x 1 blocks of the column in the panel. OR commutes with the packing, so the
//     union of the W of 2^b adjacent columns counts the 2^t x 2^b blocks: every block statistic,
//     each block inside one panel (blocks are at most 32 rows high, panels aligned at 32);
//   - the same counts of single columns give the bit widths of consecutive rows within the panel
//     (the pairs p < q with bit_width(p ^ q) > t are the occupied 2^t segments less one), and
//     popcount(m & m >> 1) the intervals of zero rows;
//   - the pair across panels (the column's last row before the panel, its first row in it) is
//     counted per nonempty column, and the longer intervals between the runs of a mask from
//     their positions (byte compress), after the panel in one flat loop: loops per lane
//     mispredict at every exit.

/// All 16 lanes. The helpers below use the maskz forms of the intrinsics: GCC 12 warns on the
/// plain ones.
constexpr __mmask16 kAll = 0xFFFF;
inline __m512i shr(__m512i v, unsigned n) { return _mm512_maskz_srli_epi32(kAll, v, n); }
inline __m512i shl(__m512i v, unsigned n) { return _mm512_maskz_slli_epi32(kAll, v, n); }
/// Lane j gets lane j + kS (0 past the last).
template <int kS>
inline __m512i down(__m512i v) {
  return _mm512_maskz_alignr_epi32(kAll, _mm512_setzero_si512(), v, kS);
}

/// t = 1..5: the bits of W holding F_t ([0]: the mask itself, F_0).
constexpr std::uint32_t kSegmentBits[6] = {0xFFFFFFFFu, 0x55555555u, 0x22222222u,
                                           0x08080808u, 0x00800080u, 0x00008000u};

/// Per-lane counts of the panel scan (every count is at most the chunk's nonzeros: 32 bits).
struct PanelCounts {
  __m512i col[6];    ///< t = 1..5: popcount(W & kSegmentBits[t]) of single columns (b = 0)
  __m512i pairs[6];  ///< t = 1..5: the same for the unions of column pairs (b = 1)
  __m512i wide[6];   ///< t = 1..5: lanes 0-7 quads (b = 2), 8-11 (b = 3), 12-13 (b = 4), 14 (b = 5)
  __m512i zero_gaps;         ///< popcount(m & m >> 1)
  Lanes vacc{};              ///< bit widths of the pairs across panels (flush_lanes into vbits)
  std::int64_t pending = 0;  ///< increments of vacc since its last flush
};

/// The sum of the selected lanes.
std::int64_t lane_sum(__m512i v, std::uint16_t lanes) {
  alignas(64) std::uint32_t x[16];
  _mm512_store_si512(x, v);
  std::int64_t s = 0;
  for (int j = 0; j < 16; ++j)
    if ((lanes >> j) & 1) s += x[j];
  return s;
}

/// W of the masks m.
inline __m512i pack_segments(__m512i m) {
  __m512i w = _mm512_setzero_si512();
  __m512i f = m;
  constexpr int kShift[6] = {0, 0, 1, 3, 7, 15};  // F_t << kShift[t]
  for (int t = 1; t < 6; ++t) {
    const int half = 1 << (t - 1);
    f = _mm512_and_si512(_mm512_or_si512(f, shr(f, half)),
                         _mm512_set1_epi32(static_cast<int>(kSegmentBits[t] >> kShift[t])));
    w = _mm512_or_si512(w, shl(f, kShift[t]));
  }
  return w;
}

/// acc[t] += popcount(w & kSegmentBits[t]), t = 1..5.
inline void count_segments(__m512i acc[6], __m512i w) {
  for (int t = 1; t < 6; ++t) {
    const __m512i bits = _mm512_set1_epi32(static_cast<int>(kSegmentBits[t]));
    acc[t] = _mm512_add_epi32(acc[t], _mm512_popcnt_epi32(_mm512_and_si512(w, bits)));
  }
}

/// The pairs across panels of the 16 columns [c, c + 16) with masks m (rows from base): counted
/// per nonempty column, which then records its last row; and the masks of two runs or more,
/// kept for count_run_gaps.
inline void cross_panel(Chunk& ch, PanelCounts& pc, __m512i m, index_t c, index_t base,
                        const AccumulatorTables& tab, bool record) {
  const __mmask16 nz = _mm512_test_epi32_mask(m, m);
  if (nz == 0) return;
  index_t* last = ch.lastrow.data() + c;
  const __m512i lr = _mm512_loadu_si512(last);
  const __m512i top = _mm512_set1_epi32(base + kPanelRows - 1);
  const __m512i low = _mm512_and_si512(m, _mm512_sub_epi32(_mm512_setzero_si512(), m));
  const __m512i first = _mm512_sub_epi32(top, _mm512_lzcnt_epi32(low));
  _mm512_mask_storeu_epi32(last, nz, _mm512_sub_epi32(top, _mm512_lzcnt_epi32(m)));
  // The interval from lr to first, and the bit width of lr ^ first: 32 - lzcnt (lr = -1, the
  // virtual row: 32, a first occurrence).
  alignas(64) std::uint32_t gap[16], lz[16];
  _mm512_store_si512(gap, _mm512_sub_epi32(_mm512_sub_epi32(first, lr), _mm512_set1_epi32(1)));
  _mm512_store_si512(lz, _mm512_lzcnt_epi32(_mm512_xor_si512(first, lr)));
  std::uint32_t* vint = ch.vintervals.data();
  for (unsigned k = nz; k != 0; k &= k - 1) {
    const int j = __builtin_ctz(k);
    ++vint[gap[j]];
    pc.vacc += tab.one_hot[32 + lz[j]];
  }
  pc.pending += __builtin_popcount(nz);
  if (record) {
    const __mmask16 fresh = nz & _mm512_cmplt_epi32_mask(lr, _mm512_setzero_si512());
    if (fresh != 0) {
      alignas(64) std::int32_t f[16];
      _mm512_store_si512(f, first);
      for (unsigned k = fresh; k != 0; k &= k - 1) {
        const int j = __builtin_ctz(k);
        ch.firsts[0].push_back({c + j, f[j]});
      }
    }
  }
  const __m512i starts = _mm512_maskz_andnot_epi32(kAll, shl(m, 1), m);
  const __mmask16 multi =
      _mm512_cmpgt_epu32_mask(_mm512_popcnt_epi32(starts), _mm512_set1_epi32(1));
  _mm512_storeu_si512(ch.multi.data() + ch.multis, _mm512_maskz_compress_epi32(multi, m));
  ch.multis += static_cast<std::size_t>(__builtin_popcount(multi));
}

/// The intervals between the runs of the kept masks (one or more zero rows): the positions of
/// the run starts but the first, less those of the run ends but the last, less one.
void count_run_gaps(Chunk& ch) {
  if (ch.gaps.size() < 16 * ch.multis + 32) ch.gaps.resize(16 * ch.multis + 32);
  std::uint8_t* g = ch.gaps.data();
  std::size_t n = 0;
  const __m256i iota = _mm256_set_epi8(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                       16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m256i one = _mm256_set1_epi8(1);
  for (std::size_t i = 0; i < ch.multis; ++i) {
    const std::uint32_t x = ch.multi[i];
    std::uint32_t s = x & ~(x << 1), e = x & ~(x >> 1);
    s &= s - 1;
    e &= ~(0x80000000u >> __builtin_clz(e));
    const __m256i ps = _mm256_maskz_compress_epi8(s, iota);
    const __m256i pe = _mm256_maskz_compress_epi8(e, iota);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(g + n),
                        _mm256_sub_epi8(_mm256_sub_epi8(ps, pe), one));
    n += static_cast<std::size_t>(__builtin_popcount(s));
  }
  std::uint32_t* vint = ch.vintervals.data();
  for (std::size_t i = 0; i < n; ++i) ++vint[g[i]];
  ch.multis = 0;
}

/// The end of a panel: the masks of its column range [lo, hi] (rows from base), 32 columns at a
/// time, counted and cleared.
void finish_panel(Chunk& ch, PanelCounts& pc, index_t lo, index_t hi, index_t base,
                  const AccumulatorTables& tab, bool record) {
  std::uint32_t* masks = ch.masks.data();
  const __m512i z = _mm512_setzero_si512();
  const __m512i pair_even =
      _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i to_quads = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i to_octets = _mm512_set_epi32(0, 0, 0, 0, 12, 8, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i to_sixteens = _mm512_set_epi32(0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  for (index_t c = lo & -32; c <= hi; c += 32) {
    const __m512i ma = _mm512_loadu_si512(masks + c);
    const __m512i mb = _mm512_loadu_si512(masks + c + 16);
    const __m512i any = _mm512_or_si512(ma, mb);
    if (_mm512_test_epi32_mask(any, any) == 0) continue;
    _mm512_storeu_si512(masks + c, z);
    _mm512_storeu_si512(masks + c + 16, z);
    cross_panel(ch, pc, ma, c, base, tab, record);
    cross_panel(ch, pc, mb, c + 16, base, tab, record);
    if (pc.pending > kFlush - 32) {
      flush_lanes(pc.vacc, ch.vbits);
      pc.pending = 0;
    }
    pc.zero_gaps = _mm512_add_epi32(
        pc.zero_gaps, _mm512_add_epi32(_mm512_popcnt_epi32(_mm512_and_si512(ma, shr(ma, 1))),
                                       _mm512_popcnt_epi32(_mm512_and_si512(mb, shr(mb, 1)))));
    const __m512i wa = pack_segments(ma), wb = pack_segments(mb);
    count_segments(pc.col, wa);
    count_segments(pc.col, wb);
    // Unions of 2, 4, ..., 32 adjacent columns: lane j | lane j + s leaves the union of the
    // aligned 2s columns in the lanes j = 0 mod 2s.
    const __m512i pairs = _mm512_permutex2var_epi32(_mm512_or_si512(wa, down<1>(wa)), pair_even,
                                                    _mm512_or_si512(wb, down<1>(wb)));
    count_segments(pc.pairs, pairs);
    const __m512i quads = _mm512_or_si512(pairs, down<1>(pairs));
    const __m512i octets = _mm512_or_si512(quads, down<2>(quads));
    const __m512i sixteens = _mm512_or_si512(octets, down<4>(octets));
    const __m512i all = _mm512_or_si512(sixteens, down<8>(sixteens));
    __m512i wide = _mm512_maskz_permutexvar_epi32(0x00FF, to_quads, quads);
    wide = _mm512_mask_permutexvar_epi32(wide, 0x0F00, to_octets, octets);
    wide = _mm512_mask_permutexvar_epi32(wide, 0x3000, to_sixteens, sixteens);
    wide = _mm512_mask_permutexvar_epi32(wide, 0x4000, z, all);
    count_segments(pc.wide, wide);
  }
  count_run_gaps(ch);
}

/// Adds the panel counts to the chunk's statistics.
void flush_panel_counts(Chunk& ch, PanelCounts& pc) {
  flush_lanes(pc.vacc, ch.vbits);
  // occ[t]: the occupied 2^t segments of the columns' masks over all panels (occ[0]: one bit per
  // nonzero; occ[5]: the nonempty masks); the pairs within a panel with bit width > t are occ[t]
  // less the masks.
  std::int64_t occ[6];
  occ[0] = ch.e1 - ch.e0;
  for (int t = 1; t < 6; ++t) occ[t] = lane_sum(pc.col[t], 0xFFFF);
  for (int h = 1; h <= 5; ++h) ch.vbits[h] += occ[h - 1] - occ[h];
  ch.vintervals[0] += static_cast<std::uint32_t>(lane_sum(pc.zero_gaps, 0xFFFF));
  for (int t = 1; t < 6; ++t) {
    ch.blocks[1][t] += lane_sum(pc.pairs[t], 0xFFFF);
    ch.blocks[2][t] += lane_sum(pc.wide[t], 0x00FF);
    ch.blocks[3][t] += lane_sum(pc.wide[t], 0x0F00);
    ch.blocks[4][t] += lane_sum(pc.wide[t], 0x3000);
    ch.blocks[5][t] += lane_sum(pc.wide[t], 0x4000);
  }
}

/// The pass over one (canonical) chunk by panels; its rows start at a multiple of kPanelRows.
/// kRecord, kHorizontal: as for scan_entries.
template <bool kRecord, bool kHorizontal>
[[gnu::noinline]] void scan_panels(const kernels::CooMatrix& a, Chunk& ch) {
  const index_t cols = a.cols;
  const index_t* col = a.col.data();
  const index_t* row = a.row.data();
  const AccumulatorTables& tab = accumulator_tables();
  RowCounts horizontal{ch.hintervals.data(), cols};
  std::uint32_t* masks = ch.masks.data();
  PanelCounts pc{};
  index_t cur_row = ch.r0 - 1, panel_end = -1, base = 0;
  index_t lo = cols, hi = -1;  // the panel's column range
  index_t last_col = -1;
  std::uint32_t bit = 0;
  for (std::int64_t e0 = ch.e0; e0 < ch.e1; e0 += kFlush) {
    const std::int64_t e1 = std::min(ch.e1, e0 + kFlush);
    for (std::int64_t e = e0; e < e1; ++e) {
      const index_t r = row[e], c = col[e];
      if (r != cur_row) {
        if (kHorizontal) horizontal.close_row(last_col);
        hi = std::max(hi, last_col);
        if (r >= panel_end) {
          finish_panel(ch, pc, lo, hi, base, tab, kRecord);
          base = r & -kPanelRows;
          panel_end = base + kPanelRows;
          lo = cols;
          hi = -1;
        }
        lo = std::min(lo, c);
        bit = std::uint32_t{1} << (r & (kPanelRows - 1));
        cur_row = r;
        last_col = -1;
      }
      masks[c] |= bit;
      if (kHorizontal)
        horizontal.add(c, last_col, lz64(static_cast<std::uint32_t>(c ^ last_col)), tab);
      last_col = c;
    }
    if (kHorizontal) flush_lanes(horizontal.acc, ch.hbits);
  }
  hi = std::max(hi, last_col);
  finish_panel(ch, pc, lo, hi, base, tab, kRecord);
  flush_panel_counts(ch, pc);
  if (kHorizontal) horizontal.finish(ch, last_col);
}
#endif

/// Share of same-column-pair nonzeros above which the gated scan is used (measured: only the
/// matrices of dense runs, e.g. bcsstk16 at 0.44, gain; Groebner_id2003_aug at 0.21 loses).
constexpr double kGateSamePairShare = 0.35;

template <bool kRecord, bool kHorizontal>
void scan_entries_gated(const kernels::CooMatrix& a, Chunk& ch, bool gate, bool prefetch) {
  constexpr bool kVector = WACO_SIGNATURE_VECTOR_BLOCKS;
  if (gate) {
    if (prefetch)
      scan_entries<kRecord, true, true, false, kHorizontal>(a, ch);
    else
      scan_entries<kRecord, true, false, false, kHorizontal>(a, ch);
  } else {
    if (prefetch)
      scan_entries<kRecord, false, true, kVector, kHorizontal>(a, ch);
    else
      scan_entries<kRecord, false, false, kVector, kHorizontal>(a, ch);
  }
}

/// The scan of one (checked) chunk: its arrays, then the pass. The horizontal statistics too
/// unless ch.horizontal is false (then only the first chunk, never recording firsts). same_pair:
/// the chunk's nonzeros in the column pair of the previous one of their row (from the check).
void scan_chunk(const kernels::CooMatrix& a, Chunk& ch, std::int64_t same_pair) {
  // 32-bit counters halve the histograms' cache footprint (the pass is bound by these random
  // increments); a count never exceeds nnz + lines < 2^32.
  ch.vintervals.assign(static_cast<std::size_t>(a.rows) + 1, 0);
  if (ch.horizontal) ch.hintervals.assign(static_cast<std::size_t>(a.cols) + 1, 0);
#if WACO_SIGNATURE_PANELS
  if (ch.panels) {
    const std::size_t padded = blockcols(a.cols, 5) * 32;  // whole 32-column steps
    ch.masks.assign(padded, 0);
    ch.lastrow.assign(padded, -1);
    ch.multi.resize(padded + 16);  // room for a full vector store past the last mask
    if (!ch.horizontal)
      scan_panels<false, false>(a, ch);
    else if (ch.record_firsts)
      scan_panels<true, true>(a, ch);
    else
      scan_panels<false, true>(a, ch);
    return;
  }
#endif
  Group g;
  std::fill(std::begin(g.l0), std::end(g.l0), -1);
  std::fill(std::begin(g.l1), std::end(g.l1), -1);
  std::fill(std::begin(g.l2), std::end(g.l2), -1);
  g.l3 = -1;
  g.pad = -1;
  ch.groups.assign(blockcols(a.cols, 3), g);
  ch.upper.assign(blockcols(a.cols, 5), Upper{{-1, -1}, -1, -1});
  const bool gate = static_cast<double>(same_pair) >
                    kGateSamePairShare * static_cast<double>(ch.e1 - ch.e0);
  // Prefetching pays once the random-access arrays no longer fit the L2 (measured: loc-Gowalla,
  // 3.2 MB, 20% faster; copter2, email-Enron, delaunay_n16 below 1 MB, 25-30% slower).
  const std::size_t footprint = (ch.vintervals.size() + (ch.horizontal ? a.cols + 1 : 0)) * 4 +
                                ch.groups.size() * sizeof(Group) + ch.upper.size() * sizeof(Upper);
  const std::int64_t l2 = kernels::cache_sizes().l2 > 0 ? kernels::cache_sizes().l2 : (1 << 20);
  const bool prefetch = static_cast<std::int64_t>(footprint) > l2;
  if (!ch.horizontal)
    scan_entries_gated<false, false>(a, ch, gate, prefetch);
  else if (ch.record_firsts)
    scan_entries_gated<true, true>(a, ch, gate, prefetch);
  else
    scan_entries_gated<false, true>(a, ch, gate, prefetch);
}

/// The last row of column c in a scanned chunk (-1: none).
index_t last_row(const Chunk& ch, index_t c) {
  return ch.panels ? ch.lastrow[c] : ch.groups[c >> 3].l0[c & 7];
}

/// Re-counts the first occurrences of chunk t (t >= 1) whose block column already occurred in an
/// earlier chunk: against the last row there (the max over the earlier chunks, rows growing with
/// the chunk index). Writes only chunk t's counters; reads the earlier chunks' last rows.
void stitch_chunk(std::vector<Chunk>& ch, std::size_t t) {
  Chunk& ct = ch[t];
  for (int b = 0; b < kBlockLevels; ++b)
    for (const FirstSeen& f : ct.firsts[b]) {
      index_t prev = -1;
      for (std::size_t u = 0; u < t; ++u)
        prev = std::max(prev, b == 0 ? last_row(ch[u], f.key) : last_slot(ch[u], b, f.key << b));
      if (prev < 0) continue;
      const int h = bit_width(static_cast<std::uint32_t>(f.row ^ prev));
      if (b == 0) {  // was counted as an interval f from the virtual row -1 and bit width 32
        --ct.vbits[32];
        ++ct.vbits[h];
        --ct.vintervals[f.row];
        ++ct.vintervals[f.row - prev - 1];
      } else {
        for (int ai = std::max(h, 1); ai < kBlockLevels; ++ai) --ct.blocks[b][ai];
      }
    }
}

/// The interval from the last row of each column to the virtual row M (M itself for an empty
/// column), counted into the first chunk's histogram.
void count_tails(std::vector<Chunk>& ch, index_t rows, index_t cols) {
  std::uint32_t* vint = ch[0].vintervals.data();
  for (index_t c = 0; c < cols; ++c) {
    index_t last = -1;
    for (const Chunk& u : ch) last = std::max(last, last_row(u, c));
    ++vint[rows - last - 1];
  }
}

/// seg.intervals = the sum of the chunks' histograms of one direction, and seg.nonactive from it
/// in the same backward pass: eq. 12-14 (Alg. 8), nonactive[T] = notsmallerweighted[T] - (T - 1)
/// * notsmaller[T], both suffix sums accumulated from T = length down to 1.
void intervals_and_nonactive(const std::vector<Chunk>& ch, bool vertical, SegmentSignature& seg) {
  const std::size_t n = static_cast<std::size_t>(seg.length) + 1;
  const auto hist = [&](const Chunk& c) {
    return vertical ? c.vintervals.data() : c.hintervals.data();
  };
  seg.intervals.assign(hist(ch[0]), hist(ch[0]) + n);
  std::int64_t* iv = seg.intervals.data();
  for (std::size_t t = 1; t < ch.size(); ++t) {
    const std::uint32_t* x = hist(ch[t]);
    for (std::size_t T = 0; T < n; ++T) iv[T] += x[T];
  }
  seg.nonactive.resize(n);
  std::int64_t* na = seg.nonactive.data();
  std::int64_t notsmaller = 0;
  std::int64_t notsmallerweighted = 0;
  for (std::size_t T = n - 1; T >= 1; --T) {
    notsmaller += iv[T];
    notsmallerweighted += static_cast<std::int64_t>(T) * iv[T];
    na[T] = notsmallerweighted - (static_cast<std::int64_t>(T) - 1) * notsmaller;
  }
  na[0] = 0;
}

/// The first entry whose row is >= r, by bisection over the row-major entries (on input not yet
/// checked, some entry: only an estimate depends on it).
std::int64_t first_entry_of_row(const kernels::CooMatrix& a, index_t r) {
  std::int64_t lo = 0, hi = a.nnz();
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (a.row[mid] < r)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// Panels choose_panels samples, and the steps per nonzero up to which it takes the panel scan.
constexpr std::int64_t kPanelSamples = 8;
constexpr double kPanelStepsPerNnz = 0.06;

/// Whether the panel scan pays. Its work per panel is a step per 32 columns of the panel's
/// column range: a full one (~100 vector instructions) where they hold a nonzero, against some
/// 20 instructions it saves per nonzero. Estimated from kPanelSamples panels spread over the
/// rows: the full steps plus an eighth of the empty ones, per nonzero, at most
/// kPanelStepsPerNnz. Measured side by side (2 threads, the panel scan's time / the entry
/// scan's): 0.53-0.80 at 0.005-0.036 full steps per nonzero (bcsstk16, Groebner_id2003_aug,
/// facebook_combined, bcsstk13, ex14, sparse_images_1024, dnn_n1024_l1, data, hangGlider_2,
/// cage8); 0.95-1.02 on cage10 (0.041, and 0.27 steps in all); 1.05-1.14 on G51 and polblogs
/// (0.085-0.098); 2.3 on wiki-Vote (0.24).
bool choose_panels(const kernels::CooMatrix& a) {
  const std::int64_t nnz = a.nnz();
  const std::int64_t panels = (static_cast<std::int64_t>(a.rows) + kPanelRows - 1) / kPanelRows;
  if (nnz == 0 || panels == 0 || a.cols <= 0) return false;
  const std::int64_t samples = std::min(panels, kPanelSamples);
  std::vector<std::uint8_t> seen((static_cast<std::size_t>(a.cols) + 31) / 32, 0);
  double steps = 0.0;
  for (std::int64_t s = 0; s < samples; ++s) {
    const std::int64_t p = (2 * s + 1) * panels / (2 * samples);
    const std::int64_t r0 = p * kPanelRows;
    const std::int64_t r1 = std::min<std::int64_t>(a.rows, r0 + kPanelRows);
    const std::int64_t e0 = first_entry_of_row(a, static_cast<index_t>(r0));
    const std::int64_t e1 = first_entry_of_row(a, static_cast<index_t>(r1));
    index_t lo = a.cols, hi = -1;
    std::int64_t full = 0;
    for (std::int64_t e = e0; e < e1; ++e) {
      const index_t c = a.col[e];
      if (c < 0 || c >= a.cols) continue;  // not checked yet
      full += seen[c >> 5] == 0;
      seen[c >> 5] = 1;
      lo = std::min(lo, c);
      hi = std::max(hi, c);
    }
    if (hi < lo) continue;
    std::fill(seen.begin() + (lo >> 5), seen.begin() + (hi >> 5) + 1, 0);
    steps += static_cast<double>(full) + static_cast<double>((hi >> 5) - (lo >> 5) + 1 - full) / 8;
  }
  return steps / static_cast<double>(samples) * static_cast<double>(panels) <=
         kPanelStepsPerNnz * static_cast<double>(nnz);
}

}  // namespace

bool panel_scan_available() { return WACO_SIGNATURE_PANELS != 0; }

LocalitySignature compute_signature(const kernels::CooMatrix& a, int threads,
                                    std::int64_t min_chunk_nnz, double min_chunk_nnz_per_line,
                                    SignatureScan scan) {
  const double t0 = kernels::now_seconds();
  const index_t rows = a.rows;
  const index_t cols = a.cols;
  const std::int64_t nnz = a.nnz();
  WACO_ASSERT(a.row.size() == a.val.size() && a.col.size() == a.val.size(),
              "COO arrays of different lengths");
  if (threads <= 0) threads = omp_get_max_threads();
  // Small or sparse matrices are not worth a second chunk (and its O(rows + cols) arrays).
  const double per_chunk = std::max<double>(
      {1.0, static_cast<double>(min_chunk_nnz),
       min_chunk_nnz_per_line * (static_cast<double>(rows) + static_cast<double>(cols))});
  const std::int64_t chunks = std::max<std::int64_t>(
      1, std::min<std::int64_t>(threads, static_cast<std::int64_t>(static_cast<double>(nnz) /
                                                                    per_chunk)));

  LocalitySignature s;
  s.rows = rows;
  s.cols = cols;
  s.nnz = nnz;
  SegmentSignature& v = s.col_segments;
  v.length = rows;
  v.lines = cols;
  SegmentSignature& h = s.row_segments;
  h.length = cols;
  h.lines = rows;

  WACO_ASSERT(scan != SignatureScan::kPanels || panel_scan_available(),
              "the panel scan is not in this build (panel_scan_available())");
  const bool panels = scan == SignatureScan::kPanels ||
                      (scan == SignatureScan::kAuto && panel_scan_available() && choose_panels(a));
  // Chunks of about equal nnz, cut at row starts; with panels, at panel starts (a chunk holds
  // whole panels, so no block straddles two chunks).
  std::vector<Chunk> ch(static_cast<std::size_t>(chunks));
  for (std::int64_t t = 0; t < chunks; ++t) {
    std::int64_t e = nnz * t / chunks;
    if (panels && e > 0 && e < nnz) {
      // the first panel after the row of entry e - 1
      // (64-bit: the rows are not checked yet)
      const auto start = static_cast<index_t>(std::min<std::int64_t>(
          rows, (std::int64_t{a.row[e - 1]} + kPanelRows) & -std::int64_t{kPanelRows}));
      while (e < nnz && a.row[e] < start) ++e;
      ch[t].r0 = start;
    } else {
      while (e > 0 && e < nnz && a.row[e] == a.row[e - 1]) ++e;
      ch[t].r0 = t == 0 ? 0 : (e < nnz ? a.row[e] : rows);
    }
    ch[t].e0 = e;
    ch[t].panels = panels;
    ch[t].record_firsts = t > 0;
  }
  for (std::int64_t t = 0; t < chunks; ++t) {
    ch[t].e1 = t + 1 < chunks ? ch[t + 1].e0 : nnz;
    ch[t].r1 = t + 1 < chunks ? ch[t + 1].r0 : rows;
    WACO_ASSERT(ch[t].e0 <= ch[t].e1 && ch[t].r0 <= ch[t].r1, "bad chunk split");
  }

  // One thread per chunk. A single chunk on two threads or more (a matrix too sparse for two)
  // splits the statistics instead: the first thread scans the vertical ones and the block
  // counts, a second the horizontal ones (scan_horizontal).
  const bool split = chunks == 1 && threads >= 2 && nnz >= min_chunk_nnz;
  const int team = split ? 2 : static_cast<int>(chunks);
  ch[0].horizontal = !split;
  // Each thread checks its share of the entries (its chunk's, or half of the single one).
  std::vector<CheckPart> parts(static_cast<std::size_t>(team));
  for (int t = 0; t < team; ++t) {
    parts[t].e0 = split ? nnz * t / team : ch[t].e0;
    parts[t].e1 = split ? nnz * (t + 1) / team : ch[t].e1;
  }
  // Then the scans; then the column tails and the vertical histogram sums of eq. 12-14 on the
  // first thread (after the stitching of the chunk boundaries), the horizontal sums on the last
  // (O(rows + cols) per chunk each). Every step writes its own data, so the result does not
  // depend on the thread count.
#pragma omp parallel num_threads(team) if (team > 1)
  {
    // Roles 0..team-1 (a chunk, or a half of the statistics): each thread takes every nt-th, so
    // all of them run whatever the team OpenMP gives (one thread inside another parallel region).
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    if (split) {
      // Both halves scan every entry: both checks come first.
      for (int r = t; r < team; r += nt) check_entries(a, parts[r]);
#pragma omp barrier
      if (all_canonical(parts)) {
        for (int r = t; r < team; r += nt) {
          if (r == 0) {
            scan_chunk(a, ch[0], parts[0].same_pair + parts[1].same_pair);
            count_tails(ch, rows, cols);
            intervals_and_nonactive(ch, true, v);
          } else {
            scan_horizontal(a, ch[0]);
            intervals_and_nonactive(ch, false, h);
          }
        }
      }
    } else {
      // A chunk's scan reads only its own entries: it starts once they are checked.
      for (int r = t; r < team; r += nt) {
        check_entries(a, parts[r]);
        if (!parts[r].canonical) continue;
        scan_chunk(a, ch[r], parts[r].same_pair);
      }
#pragma omp barrier
      if (all_canonical(parts)) {
        if (t == 0) {
          for (std::size_t u = 1; u < ch.size(); ++u) stitch_chunk(ch, u);
          count_tails(ch, rows, cols);
          intervals_and_nonactive(ch, true, v);
        }
        if (t == nt - 1) intervals_and_nonactive(ch, false, h);
      }
    }
  }
  const bool canonical = all_canonical(parts);
  WACO_ASSERT(canonical, "compute_signature needs a canonical matrix (coordinates in range, "
                         "sorted by (row, col), no repeats)");

  // The small counters add up.
  BitHistogram vbits{}, hbits{};
  std::array<std::array<std::int64_t, kBlockLevels>, kBlockLevels> blocks{};
  for (const Chunk& c : ch) {
    for (int k = 0; k <= 32; ++k) vbits[k] += c.vbits[k];
    for (int k = 0; k <= 32; ++k) hbits[k] += c.hbits[k];
    for (int b = 1; b < kBlockLevels; ++b)
      for (int ai = 1; ai < kBlockLevels; ++ai) blocks[b][ai] += c.blocks[b][ai];
  }
  const std::int64_t nonempty_cols = vbits[32];
  vbits[32] = 0;
  const std::int64_t nonempty_rows = hbits[32];
  hbits[32] = 0;
  v.nonempty_lines = static_cast<index_t>(nonempty_cols);
  v.aligned_active = aligned_from_bits(vbits, v.nonempty_lines, log2_ceil(rows));
  h.nonempty_lines = static_cast<index_t>(nonempty_rows);
  h.aligned_active = aligned_from_bits(hbits, h.nonempty_lines, log2_ceil(cols));

  // Block statistics: bk = 1 are the aligned column counts (nacs(bi)), bi = 1 the distinct block
  // columns of each row (from the row bit widths), the others the threshold counts.
  s.blocks.reserve(kBlockLevels * kBlockLevels);
  for (int ai = 0; ai < kBlockLevels; ++ai) {
    for (int b = 0; b < kBlockLevels; ++b) {
      BlockStat st;
      st.bi = 1 << ai;
      st.bk = 1 << b;
      if (b == 0) {
        st.nonempty_blocks = nonempty_cols;
        for (int hb = ai + 1; hb < 32; ++hb) st.nonempty_blocks += vbits[hb];
      } else if (ai == 0) {
        st.nonempty_blocks = nonempty_rows;
        for (int hb = b + 1; hb < 32; ++hb) st.nonempty_blocks += hbits[hb];
      } else {
        st.nonempty_blocks = blocks[b][ai];
      }
      st.fill_ratio = st.nonempty_blocks == 0
                          ? 0.0
                          : static_cast<double>(nnz) /
                                (static_cast<double>(st.nonempty_blocks) * st.bi * st.bk);
      s.blocks.push_back(st);
    }
  }
  s.scan = panels ? SignatureScan::kPanels : SignatureScan::kEntries;
  s.seconds = kernels::now_seconds() - t0;
  return s;
}

}  // namespace waco::signature
