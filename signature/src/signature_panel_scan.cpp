// The panel scan of compute_signature (signature.cpp) for dense matrices: rows in aligned panels
// of 32, a bit mask of the panel's rows per column, every vertical and block statistic counted
// from the masks 32 columns at a time in vector lanes (AVX-512 builds only:
// panel_scan_available()); and choose_panels, whether it pays for a matrix (SignatureScan::kAuto).
#include "waco/signature/signature.hpp"

#include <algorithm>
#include <vector>

#include "signature_detail.hpp"

namespace waco::signature {

bool panel_scan_available() { return WACO_SIGNATURE_PANELS != 0; }

namespace detail {

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
namespace {

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

}  // namespace

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

// The variants scan_chunk takes.
template void scan_panels<false, false>(const kernels::CooMatrix&, Chunk&);
template void scan_panels<true, true>(const kernels::CooMatrix&, Chunk&);
template void scan_panels<false, true>(const kernels::CooMatrix&, Chunk&);
#endif

namespace {

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

}  // namespace

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

}  // namespace detail

}  // namespace waco::signature
