// Private to signature/src: what the parts of compute_signature share (signature.cpp holds the
// pass's cost budget and how it meets it). The parts:
//   signature.cpp             compute_signature: the input check, the row chunks and their
//                             threads, the stitching of the chunk boundaries, the sums of eq. 12-14
//                             and the statistics it assembles from the chunks' counts
//   signature_entry_scan.cpp  a chunk's scan (scan_chunk): the entry scan, one nonzero at a time
//                             (scan_entries and its variants), and the horizontal statistics alone
//                             (scan_horizontal)
//   signature_panel_scan.cpp  the panel scan of dense matrices (scan_panels) and its choice
//                             (choose_panels)
//   signature_queries.cpp     what a computed signature answers (SegmentSignature, block())
// Here: the chunk's state, its last-row slots and the register accumulators both scans use.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#if defined(__LZCNT__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "waco/signature/signature.hpp"

namespace waco::signature::detail {

constexpr int kBlockLevels = 6;  // 1, 2, 4, 8, 16, 32
constexpr int kPanelRows = 32;  // rows per panel of the panel scan: no block straddles two
static_assert((1 << (kBlockLevels - 1)) == kMaxBlock, "block levels must reach kMaxBlock");

using BitHistogram = std::array<std::int64_t, 33>;

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

/// The tables are indexed by z = lz64(p ^ q) = 64 - h for the bit width h of the xor of two
/// positions (entries below 32 are unused).
struct AccumulatorTables {
  Lanes one_hot[65];             ///< one_hot[64 - h]: lane h - 1 = 1 (h = 1..32); h = 0: none
  std::uint64_t thresholds[65];  ///< thresholds[64 - h]: field ai - 1 = [h > ai], ai = 1..5
};

inline const AccumulatorTables& accumulator_tables() {
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

#if WACO_SIGNATURE_VECTOR_BLOCKS && defined(__AVX512VPOPCNTDQ__) && defined(__AVX512VBMI2__) && \
    defined(__AVX512BW__)
#define WACO_SIGNATURE_PANELS 1
#else
#define WACO_SIGNATURE_PANELS 0
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

/// The scan of one (checked) chunk (signature_entry_scan.cpp).
void scan_chunk(const kernels::CooMatrix& a, Chunk& ch, std::int64_t same_pair);
/// The horizontal statistics of a chunk alone, for a second thread (signature_entry_scan.cpp).
void scan_horizontal(const kernels::CooMatrix& a, Chunk& ch);
#if WACO_SIGNATURE_PANELS
/// The pass over one chunk by panels (signature_panel_scan.cpp; instantiated there for the
/// (kRecord, kHorizontal) scan_chunk takes: (false, false), (true, true), (false, true)).
template <bool kRecord, bool kHorizontal>
void scan_panels(const kernels::CooMatrix& a, Chunk& ch);
#endif
/// Whether the panel scan pays for a matrix (signature_panel_scan.cpp).
bool choose_panels(const kernels::CooMatrix& a);

}  // namespace waco::signature::detail
