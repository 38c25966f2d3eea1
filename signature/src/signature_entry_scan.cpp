// The scan of one row chunk of compute_signature (signature.cpp; the cost budget and the
// layout of the pass are at its top): scan_chunk sets up the chunk's arrays and hands a dense
// chunk to the panel scan (signature_panel_scan.cpp), any other to the entry scan, one nonzero
// at a time (scan_entries: last-row slots, register accumulators, with AVX-512 the block
// thresholds in vector lanes), in the variant chosen for it (gated, prefetching); and
// scan_horizontal, the horizontal statistics alone, for a second thread.
#include <algorithm>
#include <array>

#include "signature_detail.hpp"
#include "waco/kernels/context.hpp"

namespace waco::signature::detail {

namespace {

constexpr std::int64_t kPrefetchFar = 24;   // entries ahead: last-row lines
constexpr std::int64_t kPrefetchNear = 8;   // entries ahead: interval bins

/// Adds the five packed threshold fields to counts[1..5] and clears them.
inline void flush_thresholds(Packed& acc, std::array<std::int64_t, kBlockLevels>& counts) {
  for (int ai = 1; ai < kBlockLevels; ++ai)
    counts[ai] += static_cast<std::int64_t>((acc[0] >> (kFieldBits * (ai - 1))) & kFieldMask);
  acc = Packed{};
}

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

}  // namespace

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

namespace {

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

std::size_t blockcols(index_t cols, int b) {
  return (static_cast<std::size_t>(cols) + (std::size_t{1} << b) - 1) >> b;
}

}  // namespace

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

}  // namespace waco::signature::detail
