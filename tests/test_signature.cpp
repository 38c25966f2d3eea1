// Unit "signature": every statistic of compute_signature equals a brute-force computation, exactly,
// on the generated edge cases, on random and structured matrices (rectangular, empty rows and
// columns, T larger than the dimension) and on a few real matrices of the shared data; plus the
// data-movement model's formulas and candidate sets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <omp.h>

#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/kernels/io.hpp"
#include "waco/signature/model.hpp"
#include "waco/signature/signature.hpp"

using namespace waco::kernels;
using namespace waco::signature;

namespace {

/// A seeded random matrix: each entry present with probability `density`, plus optionally a few
/// dense rows/columns; rows/cols listed in `empty_rows`/`empty_cols` are left empty.
CooMatrix random_matrix(index_t rows, index_t cols, double density, std::uint64_t seed,
                        bool dense_lines = false) {
  std::vector<index_t> r, c;
  std::vector<float> v;
  std::uint64_t s = seed;
  for (index_t i = 0; i < rows; ++i)
    for (index_t j = 0; j < cols; ++j) {
      s = splitmix64(s);
      const double u = static_cast<double>(s >> 11) / 9007199254740992.0;
      const bool line = dense_lines && (i == rows / 3 || j == cols / 2);
      const bool skip = (i % 7 == 3) || (j % 5 == 1);  // empty rows and columns
      if ((u < density || line) && !skip) {
        r.push_back(i);
        c.push_back(j);
        v.push_back(1.0f + static_cast<float>(u));
      }
    }
  return waco::test::from_triplets(rows, cols, r, c, v);
}

/// Dense occupancy grid of a small matrix.
std::vector<std::vector<bool>> grid(const CooMatrix& a) {
  std::vector<std::vector<bool>> g(a.rows, std::vector<bool>(a.cols, false));
  for (std::int64_t e = 0; e < a.nnz(); ++e) g[a.row[e]][a.col[e]] = true;
  return g;
}

/// Field-by-field equality of two signatures (timing excluded).
void check_same(const LocalitySignature& x, const LocalitySignature& y) {
  CHECK(x.rows == y.rows);
  CHECK(x.cols == y.cols);
  CHECK(x.nnz == y.nnz);
  for (const auto& [p, q] : {std::make_pair(&x.col_segments, &y.col_segments),
                             std::make_pair(&x.row_segments, &y.row_segments)}) {
    CHECK(p->nonempty_lines == q->nonempty_lines);
    CHECK(p->zero_runs == q->zero_runs);
    CHECK(p->nonactive == q->nonactive);
    CHECK(p->aligned_active == q->aligned_active);
  }
  REQUIRE(x.blocks.size() == y.blocks.size());
  for (std::size_t i = 0; i < x.blocks.size(); ++i) {
    CHECK(x.blocks[i].nonempty_blocks == y.blocks[i].nonempty_blocks);
    CHECK(x.blocks[i].fill_ratio == y.blocks[i].fill_ratio);
  }
}

/// The scans this build has (SignatureScan).
std::vector<SignatureScan> scans() {
  std::vector<SignatureScan> x = {SignatureScan::kEntries};
  if (panel_scan_available()) x.push_back(SignatureScan::kPanels);
  return x;
}

/// Both scans, in one chunk and in chunks stitched at many boundaries, equal `serial`, and so
/// does the single chunk whose horizontal statistics a second thread counts (a minimum of
/// nonzeros per line no matrix here has).
void check_chunking(const CooMatrix& a, const LocalitySignature& serial) {
  for (const SignatureScan scan : scans()) {
    INFO(scan_name(scan) << " scan");
    for (int threads : {1, 2, 3, 7}) {
      INFO(threads << " chunks");
      check_same(serial, compute_signature(a, threads, 1, 0.0, scan));
    }
    INFO("one chunk, the statistics split over 2 threads");
    check_same(serial, compute_signature(a, 2, 1, 1e12, scan));
  }
}

/// Brute-force check of every statistic on a small matrix (dense grid, all T).
void check_brute_small(const CooMatrix& a, const std::string& name) {
  INFO("matrix '" << name << "' " << a.rows << " x " << a.cols << ", nnz " << a.nnz());
  const LocalitySignature s = compute_signature(a, 1);
  check_chunking(a, s);
  const auto g = grid(a);
  const std::int64_t M = a.rows, N = a.cols;
  REQUIRE(s.rows == a.rows);
  REQUIRE(s.cols == a.cols);
  REQUIRE(s.nnz == a.nnz());

  // Both directions share one brute force: at(line, pos) reads the grid along the line.
  for (int dir = 0; dir < 2; ++dir) {
    const SegmentSignature& seg = dir == 0 ? s.col_segments : s.row_segments;
    const std::int64_t length = dir == 0 ? M : N;
    const std::int64_t lines = dir == 0 ? N : M;
    const auto at = [&](std::int64_t line, std::int64_t pos) {
      return dir == 0 ? g[pos][line] : g[line][pos];
    };
    INFO((dir == 0 ? "column segments" : "row segments"));
    REQUIRE(seg.length == length);
    REQUIRE(seg.lines == lines);

    // Alg. 7: intervals between consecutive nonzeros (and the virtual boundaries).
    std::vector<std::int64_t> intervals(length + 1, 0);
    std::int64_t nonempty = 0;
    for (std::int64_t l = 0; l < lines; ++l) {
      std::int64_t last = -1;
      bool any = false;
      for (std::int64_t p = 0; p <= length; ++p) {
        if (p == length || at(l, p)) {
          ++intervals[p - last - 1];
          last = p;
          if (p < length) any = true;
        }
      }
      nonempty += any;
    }
    CHECK(seg.interval_histogram() == intervals);
    for (std::int64_t d = 0; d <= length; ++d) CHECK(seg.intervals(d) == intervals[d]);
    CHECK(seg.nonempty_lines == nonempty);

    // Eq. 10 by enumeration of every unaligned segment, for every T (and beyond the length).
    // prefix[l][p]: nonzeros of line l before position p.
    std::vector<std::vector<std::int64_t>> prefix(lines, std::vector<std::int64_t>(length + 1, 0));
    for (std::int64_t l = 0; l < lines; ++l)
      for (std::int64_t p = 0; p < length; ++p) prefix[l][p + 1] = prefix[l][p] + at(l, p);
    for (std::int64_t T = 1; T <= length + 3; ++T) {
      const std::int64_t Tc = std::min(T, length);
      std::int64_t inactive = 0, total = 0;
      if (length > 0)
        for (std::int64_t l = 0; l < lines; ++l)
          for (std::int64_t start = 0; start + Tc <= length; ++start) {
            ++total;
            inactive += prefix[l][start + Tc] == prefix[l][start];
          }
      INFO("T = " << T);
      CHECK(seg.nonactive_segments(T) == inactive);
      CHECK(seg.total_segments(T) == total);
      const double p = total == 0 ? 0.0 : static_cast<double>(total - inactive) / total;
      CHECK(seg.active_proportion(T) == p);
    }

    // Exact aligned counts for every power of two, including T far beyond the length.
    for (std::int64_t T = 1; T <= 4 * std::max<std::int64_t>(length, 1); T *= 2) {
      std::int64_t active = 0;
      for (std::int64_t l = 0; l < lines; ++l)
        for (std::int64_t p0 = 0; p0 < length; p0 += T) {
          bool any = false;
          for (std::int64_t p = p0; p < std::min(length, p0 + T); ++p) any = any || at(l, p);
          active += any;
        }
      INFO("aligned T = " << T);
      CHECK(seg.aligned_active_pow2(T) == active);
      CHECK(seg.aligned_active_estimate(T) == static_cast<double>(active));
    }
  }
  // nacs / nars are the aligned counts of the two directions.
  for (std::int64_t T = 1; T <= 64; T *= 2) {
    CHECK(s.nacs(T) == s.col_segments.aligned_active_pow2(T));
    CHECK(s.nars(T) == s.row_segments.aligned_active_pow2(T));
  }

  // Block statistics by enumeration of every aligned block.
  REQUIRE(s.blocks.size() == 36);
  for (int bi = 1; bi <= kMaxBlock; bi *= 2)
    for (int bk = 1; bk <= kMaxBlock; bk *= 2) {
      std::int64_t blocks = 0;
      for (std::int64_t i0 = 0; i0 < M; i0 += bi)
        for (std::int64_t k0 = 0; k0 < N; k0 += bk) {
          bool any = false;
          for (std::int64_t i = i0; i < std::min(M, i0 + bi); ++i)
            for (std::int64_t k = k0; k < std::min(N, k0 + bk); ++k) any = any || g[i][k];
          blocks += any;
        }
      INFO("block " << bi << " x " << bk);
      const BlockStat& b = s.block(bi, bk);
      CHECK(b.bi == bi);
      CHECK(b.bk == bk);
      CHECK(b.nonempty_blocks == blocks);
      const double fill =
          blocks == 0 ? 0.0 : static_cast<double>(a.nnz()) / (static_cast<double>(blocks) * bi * bk);
      CHECK(b.fill_ratio == fill);
    }
}

/// Key-sorting brute force for larger matrices: distinct (pos / T, line) pairs.
std::int64_t distinct_pairs(const std::vector<index_t>& pos, const std::vector<index_t>& line,
                            std::int64_t T, std::int64_t line_div) {
  std::vector<std::int64_t> keys(pos.size());
  for (std::size_t e = 0; e < pos.size(); ++e)
    keys[e] = (static_cast<std::int64_t>(pos[e]) / T) * (std::int64_t{1} << 32) + line[e] / line_div;
  std::sort(keys.begin(), keys.end());
  return std::unique(keys.begin(), keys.end()) - keys.begin();
}

/// Non-active unaligned segments of size T counted as the complement of the union of the
/// windows [r - T + 1, r] (clamped) that each nonzero makes active -- independent of eq. 10-14.
std::int64_t nonactive_by_windows(const std::vector<index_t>& pos, const std::vector<index_t>& line,
                                  std::int64_t lines, std::int64_t length, std::int64_t T) {
  // Group positions per line (sorted).
  std::vector<std::int64_t> start(lines + 1, 0);
  for (index_t l : line) ++start[l + 1];
  for (std::int64_t l = 0; l < lines; ++l) start[l + 1] += start[l];
  std::vector<index_t> sorted(pos.size());
  std::vector<std::int64_t> cur(start.begin(), start.end() - 1);
  for (std::size_t e = 0; e < pos.size(); ++e) sorted[cur[line[e]]++] = pos[e];
  std::int64_t inactive = 0;
  const std::int64_t starts = length - T + 1;  // valid segment starts 0..starts-1
  for (std::int64_t l = 0; l < lines; ++l) {
    std::sort(sorted.begin() + start[l], sorted.begin() + start[l + 1]);
    std::int64_t covered = 0, reach = -1;  // union of [max(0, r-T+1), min(r, starts-1)]
    for (std::int64_t e = start[l]; e < start[l + 1]; ++e) {
      const std::int64_t lo = std::max<std::int64_t>(std::max<std::int64_t>(0, sorted[e] - T + 1),
                                                     reach + 1);
      const std::int64_t hi = std::min<std::int64_t>(sorted[e], starts - 1);
      if (hi >= lo) {
        covered += hi - lo + 1;
        reach = hi;
      }
    }
    inactive += starts - covered;
  }
  return inactive;
}

void check_brute_large(const CooMatrix& a, const std::string& name) {
  INFO("matrix '" << name << "' " << a.rows << " x " << a.cols << ", nnz " << a.nnz());
  const LocalitySignature s = compute_signature(a, 2, 1000, 0.0);
  check_chunking(a, compute_signature(a, 1));
  for (std::int64_t T = 1; T <= 2 * std::max<index_t>(a.rows, 1); T *= 2) {
    INFO("T = " << T);
    CHECK(s.nacs(T) == distinct_pairs(a.row, a.col, T, 1));
  }
  for (std::int64_t T = 1; T <= 2 * std::max<index_t>(a.cols, 1); T *= 2) {
    INFO("T = " << T);
    CHECK(s.nars(T) == distinct_pairs(a.col, a.row, T, 1));
  }
  for (std::int64_t T : {1, 2, 3, 7, 16, 100, 1000}) {
    if (T <= a.rows) {
      INFO("column segments T = " << T);
      CHECK(s.col_segments.nonactive_segments(T) ==
            nonactive_by_windows(a.row, a.col, a.cols, a.rows, T));
    }
    if (T <= a.cols) {
      INFO("row segments T = " << T);
      CHECK(s.row_segments.nonactive_segments(T) ==
            nonactive_by_windows(a.col, a.row, a.rows, a.cols, T));
    }
  }
  for (int bi = 1; bi <= kMaxBlock; bi *= 2)
    for (int bk = 1; bk <= kMaxBlock; bk *= 2) {
      INFO("block " << bi << " x " << bk);
      CHECK(s.block(bi, bk).nonempty_blocks == distinct_pairs(a.row, a.col, bi, bk));
    }
}

}  // namespace

TEST_CASE("signature: statistics equal brute force on the edge cases") {
  for (const auto& m : waco::test::edge_case_matrices()) {
    if (static_cast<std::int64_t>(m.matrix.rows) * m.matrix.cols > 200000) {
      check_brute_large(m.matrix, m.name);
    } else {
      check_brute_small(m.matrix, m.name);
    }
  }
}

TEST_CASE("signature: statistics equal brute force on random rectangular matrices") {
  struct Shape {
    index_t rows, cols;
    double density;
    bool dense_lines;
  };
  const Shape shapes[] = {{1, 1, 1.0, false},   {1, 37, 0.3, false},  {41, 1, 0.3, false},
                          {13, 70, 0.05, true}, {70, 13, 0.2, false}, {64, 64, 0.02, false},
                          {65, 33, 0.5, true},  {100, 3, 0.9, false}, {37, 29, 0.0, false}};
  std::uint64_t seed = 11;
  for (const Shape& sh : shapes)
    check_brute_small(random_matrix(sh.rows, sh.cols, sh.density, ++seed, sh.dense_lines),
                      std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + " d=" +
                          std::to_string(sh.density));
}

TEST_CASE("signature: a matrix that is not canonical is refused whatever the chunking") {
  // The pass trusts its input once the check has passed (no bounds checks in the scan), so each
  // way of splitting the work must see every defect: out-of-range coordinates, rows out of
  // order, columns out of order or repeated within a row, in the first or the second half and
  // where they meet.
  const CooMatrix good = random_matrix(300, 200, 0.05, 5, false);
  REQUIRE(good.nnz() > 100);
  // Entry nnz / 2 starts the second half of the split check.
  const std::int64_t half = good.nnz() / 2, last = good.nnz() - 1;
  std::vector<std::pair<std::string, CooMatrix>> bad;
  for (const std::int64_t e : {std::int64_t{1}, half, half + 1, last}) {
    const std::string at = " at entry " + std::to_string(e);
    CooMatrix m = good;
    m.col[e] = good.cols;
    bad.emplace_back("column out of range" + at, m);
    m = good;
    m.row[e] = good.rows;
    bad.emplace_back("row out of range" + at, m);
    m = good;
    m.row[e] = -1;
    bad.emplace_back("negative row" + at, m);
    m = good;
    m.col[e] = good.col[e - 1];
    m.row[e] = good.row[e - 1];
    bad.emplace_back("repeated entry" + at, m);
    m = good;
    std::swap(m.row[e], m.row[e - 1]);
    std::swap(m.col[e], m.col[e - 1]);
    bad.emplace_back("entries swapped" + at, m);
  }
  for (const auto& [what, m] : bad)
    for (const SignatureScan scan : scans()) {
      INFO(what << ", " << scan_name(scan) << " scan");
      CHECK_THROWS_AS(compute_signature(m, 1, 1, 0.0, scan), InternalError);
      CHECK_THROWS_AS(compute_signature(m, 2, 1, 0.0, scan), InternalError);   // 2 row chunks
      CHECK_THROWS_AS(compute_signature(m, 2, 1, 1e12, scan), InternalError);  // statistics split
      CHECK_THROWS_AS(compute_signature(m, 3, 1, 0.0, scan), InternalError);   // 3 row chunks
    }
  for (const SignatureScan scan : scans())
    CHECK_NOTHROW(compute_signature(good, 2, 1, 1e12, scan));
}

TEST_CASE("signature: inside another parallel region the pass gives the same result") {
  // Nested parallelism off: compute_signature's region gets a team of one thread, which must
  // then take every chunk, or both halves of the split statistics, itself.
  const CooMatrix a = random_matrix(300, 200, 0.05, 9, true);
  const LocalitySignature serial = compute_signature(a, 1);
  std::vector<LocalitySignature> split, chunks;
  const int levels = omp_get_max_active_levels();
  omp_set_max_active_levels(1);
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    for (const SignatureScan scan : scans()) {
      split.push_back(compute_signature(a, 2, 1, 1e12, scan));
      chunks.push_back(compute_signature(a, 3, 1, 0.0, scan));
    }
  }
  omp_set_max_active_levels(levels);
  REQUIRE(split.size() == scans().size());
  for (std::size_t k = 0; k < split.size(); ++k) {
    INFO(scan_name(scans()[k]) << " scan");
    check_same(serial, split[k]);
    check_same(serial, chunks[k]);
  }
}

TEST_CASE("signature: statistics equal brute force on an empty shape") {
  CooMatrix empty;
  empty.rows = 0;
  empty.cols = 5;
  const LocalitySignature s = compute_signature(empty);
  CHECK(s.nacs(1) == 0);
  CHECK(s.nars(4) == 0);
  CHECK(s.p_col(3) == 0.0);
  CHECK(s.p_row(3) == 0.0);
  CHECK(s.block(4, 4).nonempty_blocks == 0);
  CHECK(s.block(4, 4).fill_ratio == 0.0);
  CooMatrix none;
  none.rows = 9;
  none.cols = 4;
  check_brute_small(none, "9x4 without nonzeros");
}

TEST_CASE("signature: statistics equal brute force on generated structured matrices") {
  GeneratorSpec banded;
  banded.kind = "banded";
  banded.rows = 3000;
  banded.cols = 2000;
  banded.bandwidth = 17;
  banded.fill = 0.6;
  GeneratorSpec blocks;
  blocks.kind = "blocks";
  blocks.rows = 2500;
  blocks.block = 8;
  blocks.blocks = 300;
  GeneratorSpec rmat;
  rmat.kind = "rmat";
  rmat.scale = 11;
  GeneratorSpec uniform;
  uniform.kind = "uniform";
  uniform.rows = 5000;
  uniform.cols = 333;
  uniform.nnz = 20000;
  for (const GeneratorSpec& g : {banded, blocks, rmat, uniform})
    check_brute_large(generate(g), g.kind);
  // Small instances through the exhaustive grid check as well.
  banded.rows = 90;
  banded.cols = 70;
  banded.bandwidth = 5;
  check_brute_small(generate(banded), "small banded");
  rmat.scale = 6;
  check_brute_small(generate(rmat), "small rmat");
}

TEST_CASE("signature: the scan variants agree with brute force when chunks differ in kind") {
  // compute_signature scans a chunk with a variant that skips the block columns already hit in
  // the row when over a third of its nonzeros share the column pair of the previous one (dense
  // runs), with a branch-free one otherwise. Rows [0, 1500) here are dense runs, rows
  // [1500, 3000) scattered, so the chunks of one matrix take different variants, and the chunks
  // after the first are stitched to the earlier ones.
  std::vector<index_t> r, c;
  std::uint64_t seed = 7;
  for (index_t i = 0; i < 3000; ++i) {
    if (i < 1500) {
      const index_t start = (i * 37) % 1900;
      for (index_t j = start; j < start + 24; ++j) {
        r.push_back(i);
        c.push_back(j);
      }
    } else {
      for (int k = 0; k < 6; ++k) {
        seed = splitmix64(seed);
        r.push_back(i);
        c.push_back(static_cast<index_t>(seed % 2000));
      }
    }
  }
  // Sort each scattered row and drop repeats (from_triplets wants a canonical matrix).
  std::vector<std::pair<index_t, index_t>> rc;
  for (std::size_t e = 0; e < r.size(); ++e) rc.emplace_back(r[e], c[e]);
  std::sort(rc.begin(), rc.end());
  rc.erase(std::unique(rc.begin(), rc.end()), rc.end());
  r.clear();
  c.clear();
  for (const auto& [i, j] : rc) {
    r.push_back(i);
    c.push_back(j);
  }
  const CooMatrix a =
      waco::test::from_triplets(3000, 2000, r, c, std::vector<float>(r.size(), 1.0f));
  check_brute_large(a, "dense runs over scattered rows");
  for (int threads : {2, 4}) {
    INFO(threads << " chunks of at least 5000 nonzeros");
    check_same(compute_signature(a, 1), compute_signature(a, threads, 5000, 0.0));
  }
}

TEST_CASE("signature: the panel scan counts panels wider than its counters' flush period") {
  // 40 rows (a panel and a part) x 70000 columns, one or two nonzeros per column: each panel
  // holds tens of thousands of nonempty columns, past the 4095 increments after which the panel
  // scan flushes its 16-bit counters of the bit widths across panels.
  std::vector<std::pair<index_t, index_t>> rc;
  for (index_t j = 0; j < 70000; ++j) {
    rc.emplace_back((j * 7) % 40, j);
    if (j % 3 == 0) rc.emplace_back((j * 13 + 5) % 40, j);
  }
  std::sort(rc.begin(), rc.end());
  rc.erase(std::unique(rc.begin(), rc.end()), rc.end());
  std::vector<index_t> r, c;
  for (const auto& [i, j] : rc) {
    r.push_back(i);
    c.push_back(j);
  }
  check_brute_large(
      waco::test::from_triplets(40, 70000, r, c, std::vector<float>(r.size(), 1.0f)),
      "40 x 70000");
}

TEST_CASE("signature: the automatic scan takes panels on dense matrices only") {
  GeneratorSpec banded;  // a few 32-column steps per panel of 32 rows: ~0.004 per nonzero
  banded.kind = "banded";
  banded.rows = 3000;
  banded.cols = 2000;
  banded.bandwidth = 17;
  banded.fill = 0.6;
  GeneratorSpec uniform;  // every step of every panel holds a nonzero: ~0.09 per nonzero
  uniform.kind = "uniform";
  uniform.rows = 5000;
  uniform.cols = 333;
  uniform.nnz = 20000;
  const CooMatrix dense = generate(banded), sparse = generate(uniform);
  CHECK(compute_signature(sparse).scan == SignatureScan::kEntries);
  CHECK(compute_signature(dense, 2, 1, 0.0, SignatureScan::kEntries).scan ==
        SignatureScan::kEntries);
  if (panel_scan_available()) {
    CHECK(compute_signature(dense).scan == SignatureScan::kPanels);
    CHECK(compute_signature(sparse, 2, 1, 0.0, SignatureScan::kPanels).scan ==
          SignatureScan::kPanels);
  } else {
    WARN("this build has no panel scan (AVX-512 VPOPCNTDQ and VBMI2)");
    CHECK(compute_signature(dense).scan == SignatureScan::kEntries);
    CHECK_THROWS_AS(compute_signature(dense, 1, 1, 0.0, SignatureScan::kPanels), InternalError);
  }
}

TEST_CASE("signature: statistics equal brute force when the pass prefetches") {
  // The scan prefetches once its per-chunk arrays (about 16.5 bytes per row and column) outgrow
  // the L2; 180000 x 180000 is past that on L2 sizes up to 2.9 MB.
  GeneratorSpec uniform;
  uniform.kind = "uniform";
  uniform.rows = 180000;
  uniform.nnz = 150000;
  check_brute_large(generate(uniform), "large uniform");
}

TEST_CASE("signature: statistics equal brute force on real matrices") {
  const auto dir = waco::test::shared_data_dir();
  if (!dir) {
    WARN("shared data not found: skipped");
    return;
  }
  for (const char* name : {"3elt.mtx", "494_bus.mtx", "Groebner_id2003_aug.mtx.gz",
                           "sparse_images_1024.mtx.gz", "cage10.mtx.gz"}) {
    const std::string path = *dir + "/matrices/" + name;
    const LoadedMatrix m = read_matrix_market(path);
    check_brute_large(m.matrix, name);
  }
}

TEST_CASE("signature: the model's formulas and candidates") {
  const CooMatrix a = random_matrix(200, 150, 0.05, 99, true);
  const LocalitySignature s = compute_signature(a);
  ModelOptions opt;
  opt.kind = KernelKind::SpMM;
  opt.dense = 100;
  opt.threads = 2;
  opt.min_dense_tile = 16;
  opt.cache = cache_capacity("l2", 2, 1 << 14);  // override: 4096 elements
  CHECK(opt.cache.level == "override");
  CHECK(opt.cache.elements() == 4096);

  const double M = 200, N = 150, K = 100, nnz = static_cast<double>(a.nnz());
  // N-stream (J-Stream), SpMM: M K + 2 nnz ceil(K / T_k) + nacs(T_i) K.
  const TileCandidate n = evaluate(s, opt, StreamDim::N, 32, 1, 48);
  CHECK(n.volume == Approx(M * K + 2 * nnz * 3 + static_cast<double>(s.nacs(32)) * K));
  CHECK(n.footprint == Approx(32 * 48 + 2 * 32 * nnz / (M * N) + 48));
  CHECK(n.exact);
  const TileCandidate m = evaluate(s, opt, StreamDim::M, 1, 16, 100);
  CHECK(m.volume == Approx(N * K + 2 * nnz + 2 * static_cast<double>(s.nars(16)) * K));
  const TileCandidate k = evaluate(s, opt, StreamDim::K, 8, 4, 16);
  CHECK(k.volume ==
        Approx(2 * nnz + (2 * static_cast<double>(s.nars(4)) + static_cast<double>(s.nacs(8))) * K));
  // SDDMM N-stream: M K + nacs K + 3 nnz ceil(K / T_k) + 2 nnz.
  opt.kind = KernelKind::SDDMM;
  const TileCandidate d = evaluate(s, opt, StreamDim::N, 64, 1, 100);
  CHECK(d.volume == Approx(M * K + static_cast<double>(s.nacs(64)) * K + 3 * nnz + 2 * nnz));
  // A non-power-of-two panel uses the paper's estimate from p[T].
  const TileCandidate e = evaluate(s, opt, StreamDim::N, 100, 1, 100);
  CHECK_FALSE(e.exact);
  CHECK(s.col_segments.aligned_active_estimate(100) == Approx(150.0 * 2.0 * s.p_col(100)));

  CHECK(dense_tile_candidates(128) == std::vector<std::int64_t>{128, 64, 48, 32, 16});
  CHECK(dense_tile_candidates(256) == std::vector<std::int64_t>{256, 128, 96, 64, 48, 32, 16});
  CHECK(dense_tile_candidates(100) == std::vector<std::int64_t>{100, 64, 48, 32, 16});
  CHECK(dense_tile_candidates(7) == std::vector<std::int64_t>{7});
  CHECK(dense_tile_candidates(256, 128) == std::vector<std::int64_t>{256, 128});
  CHECK(dense_tile_candidates(100, 128) == std::vector<std::int64_t>{100});
  CHECK(sparse_tile_candidates(4039, 28) ==
        std::vector<std::int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 145});
  CHECK(sparse_tile_candidates(1, 2) == std::vector<std::int64_t>{1});

  // The selection: every chosen candidate fits, and none that fits has a smaller volume.
  opt.kind = KernelKind::SpMM;
  const TileSelection sel = select_tiles(s, opt);
  REQUIRE(sel.best_jstream.fits);
  CHECK(sel.best_jstream.stream == StreamDim::N);
  for (const TileCandidate& c : sel.candidates) {
    if (!c.fits) continue;
    CHECK(c.volume >= sel.best.volume);
    if (c.stream == StreamDim::N) CHECK(c.volume >= sel.best_jstream.volume);
  }
  // At least kDefaultPanelsPerThread panels per thread: 200 rows, 2 threads.
  const int parts = 2 * kDefaultPanelsPerThread;
  CHECK(sel.best_jstream.T_i <= (200 + parts - 1) / parts);
}

TEST_CASE("signature: double-precision tiles fit the same cache budget") {
  // 4096 rows (the panel cap, 4096 / 32, does not bind before the cache does), J = 256.
  const CooMatrix a = random_matrix(4096, 2048, 0.002, 7, true);
  const LocalitySignature s = compute_signature(a);
  ModelOptions f32;
  f32.kind = KernelKind::SpMM;
  f32.dense = 256;
  f32.threads = 2;
  const std::int64_t budget_bytes = 64 * 1024;
  f32.cache = cache_capacity("l2", 2, budget_bytes);  // override: the usable bytes per thread
  ModelOptions f64 = f32;
  f64.dtype = Dtype::F64;
  CHECK(value_words(Dtype::F32) == 1.0);
  CHECK(value_words(Dtype::F64) == 2.0);

  const double M = 4096, N = 2048, K = 256, nnz = static_cast<double>(a.nnz());
  const double rho = nnz / (M * N);
  // The N-stream footprint in bytes: the output tile and the input row in values, each nonzero
  // a value and a 4-byte index; the model counts it in 4-byte words.
  const auto jstream_bytes = [&](std::int64_t ti, std::int64_t tk, double value_bytes) {
    const double Ti = static_cast<double>(ti), Tk = static_cast<double>(tk);
    return value_bytes * (Ti * Tk + Tk) + (value_bytes + 4) * Ti * rho;
  };
  for (auto [ti, tk] : {std::pair<std::int64_t, std::int64_t>{32, 128}, {8, 256}, {100, 96}}) {
    INFO("T_i " << ti << " T_k " << tk);
    const TileCandidate c4 = evaluate(s, f32, StreamDim::N, ti, 1, tk);
    const TileCandidate c8 = evaluate(s, f64, StreamDim::N, ti, 1, tk);
    CHECK(4 * c4.footprint == Approx(jstream_bytes(ti, tk, 4)));
    CHECK(4 * c8.footprint == Approx(jstream_bytes(ti, tk, 8)));
    CHECK(c8.footprint > c4.footprint);
    // The volume: x/y in values, every nonzero a value and an index per dense tile.
    const double tiles = std::ceil(K / static_cast<double>(tk));
    const double nacs = static_cast<double>(s.col_segments.aligned_active_estimate(ti));
    CHECK(c8.volume == Approx(2 * M * K + 3 * nnz * tiles + 2 * nacs * K));
    // SDDMM: a nonzero's partial product is read and written in the value type.
    ModelOptions d = f64;
    d.kind = KernelKind::SDDMM;
    const TileCandidate e = evaluate(s, d, StreamDim::N, ti, 1, tk);
    CHECK(4 * e.footprint ==
          Approx(8 * (static_cast<double>(ti) * tk + tk) + 20 * static_cast<double>(ti) * rho));
  }

  const TileSelection s4 = select_tiles(s, f32);
  const TileSelection s8 = select_tiles(s, f64);
  REQUIRE(s4.best_jstream.fits);
  REQUIRE(s8.best_jstream.fits);
  // Every choice of the double selection fits the budget counted in 8-byte values.
  const double usable = 4.0 * static_cast<double>(f64.cache.elements());  // the given bytes
  CHECK(usable == static_cast<double>(budget_bytes));
  CHECK(jstream_bytes(s8.best_jstream.T_i, s8.best_jstream.T_k, 8) <= usable);
  for (const TileCandidate& c : s8.candidates) {
    if (c.stream == StreamDim::N) CHECK(c.fits == (jstream_bytes(c.T_i, c.T_k, 8) <= usable));
    if (c.fits) CHECK(4 * c.footprint <= usable);
  }
  // Single precision's tile would overflow the budget in double: the double tile is smaller.
  CHECK(jstream_bytes(s4.best_jstream.T_i, s4.best_jstream.T_k, 8) > usable);
  CHECK_FALSE(evaluate(s, f64, StreamDim::N, s4.best_jstream.T_i, 1, s4.best_jstream.T_k).fits);
  CHECK(s8.best_jstream.T_i * s8.best_jstream.T_k < s4.best_jstream.T_i * s4.best_jstream.T_k);
}

TEST_CASE("signature: cache capacity errors name the level") {
  CHECK_THROWS_AS(cache_capacity("l7", 1, 0), Error);
  CHECK_THROWS_AS(cache_capacity("l2", 1, 0, 0.0), Error);
  CHECK_THROWS_AS(cache_capacity("l2", 1, 0, 1.5), Error);
  const CacheCapacity l3 = cache_capacity("", 2, 1000);
  CHECK(l3.per_thread_bytes == 1000);
  // The default: the per-core share of the last-level cache, from sysfs (when it gives sizes).
  if (cache_sizes().llc() > 0) {
    const CacheCapacity core = cache_capacity(kDefaultCacheLevel, 3, 0);
    CHECK(core.level == "L3/core");
    CHECK(core.divisor >= 1);
    CHECK(core.per_thread_bytes == cache_sizes().llc() / core.divisor);
    CHECK(core.fraction == kDefaultCacheFraction);
    CHECK_FALSE(core.rule.empty());
    CHECK(cache_capacity("l3", 4, 0).per_thread_bytes == cache_sizes().llc() / 4);
  }
}
