// One-pass computation of the locality signature (SC'20 Alg. 7-8, eq. 10-14) and the exact
// aligned/block counts; see signature.hpp for the definitions and the bit-width argument.
// This file drives the pass (compute_signature: the input check, the row chunks and their threads,
// the stitching of the chunk boundaries, the sums of eq. 12-14); the scans of a chunk are in
// signature_entry_scan.cpp and signature_panel_scan.cpp, what they share in signature_detail.hpp.
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

#include <omp.h>

#include "signature_detail.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::signature {

using namespace detail;

namespace {

/// Number of bits needed for x > 0 (std::bit_width of C++20).
inline int bit_width(std::uint32_t x) { return 32 - __builtin_clz(x); }

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

/// The input check of the entries [e0, e1), by one thread.
struct CheckPart {
  std::int64_t e0 = 0, e1 = 0;
  bool canonical = true;        ///< in range and strictly row-major (also against entry e0 - 1)
  std::int64_t same_pair = 0;   ///< nonzeros in the column pair of the previous one of the row
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

/// seg.nonactive from the chunks' interval histograms of one direction (summed on the way) in
/// one backward pass: eq. 12-14 (Alg. 8), nonactive[T] = notsmallerweighted[T] - (T - 1) *
/// notsmaller[T], both suffix sums accumulated from T = length down to 1; and intervals[0].
void intervals_and_nonactive(const std::vector<Chunk>& ch, bool vertical, SegmentSignature& seg) {
  const std::size_t n = static_cast<std::size_t>(seg.length) + 1;
  const auto hist = [&](const Chunk& c) {
    return vertical ? c.vintervals.data() : c.hintervals.data();
  };
  const auto intervals = [&](std::size_t d) {
    std::int64_t sum = 0;
    for (const Chunk& c : ch) sum += hist(c)[d];
    return sum;
  };
  seg.nonactive.resize(n);
  std::int64_t* na = seg.nonactive.data();
  std::int64_t notsmaller = 0;
  std::int64_t notsmallerweighted = 0;
  for (std::size_t T = n - 1; T >= 1; --T) {
    const std::int64_t iv = intervals(T);
    notsmaller += iv;
    notsmallerweighted += static_cast<std::int64_t>(T) * iv;
    na[T] = notsmallerweighted - (static_cast<std::int64_t>(T) - 1) * notsmaller;
  }
  na[0] = 0;
  seg.zero_runs = intervals(0);
}

}  // namespace

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
