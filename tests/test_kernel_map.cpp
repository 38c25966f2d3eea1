// Unit "kernel_map" (torch-free; links waco::learned_internal for the headers of learned/src):
// WACONet's sorted levels, parallel downsampling and kernel maps (learned/src/kernel_map.hpp).
// Every map must equal a brute-force neighbour search on generated patterns: random ones in 2-D
// and 3-D, sites on the edge rows and columns, a single nonzero (in a corner), a dense block, a
// full row and a full column; each offset's pairs must be increasing in both columns (the
// convolutions scatter without atomics and find blocks by binary search because of it); levels
// must be the distinct halved coordinates, sorted; maps and levels must not depend on the thread
// count.
#include <algorithm>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include "kernel_map.hpp"
#include "waco/kernels/error.hpp"

namespace {

using namespace waco::learned;
using Coord = std::vector<std::int32_t>;

SiteSet from_coords(std::vector<std::int64_t> extent, const std::vector<Coord>& cs) {
  SiteSet s;
  s.dims = static_cast<int>(extent.size());
  s.extent = std::move(extent);
  for (const auto& c : cs) s.coords.insert(s.coords.end(), c.begin(), c.end());
  return s;
}

// Every coordinate of the grid, row-major, kept when keep(c) holds.
template <typename Keep>
SiteSet grid_sites(std::vector<std::int64_t> extent, Keep keep) {
  std::vector<Coord> cs;
  std::int64_t total = 1;
  for (auto e : extent) total *= e;
  for (std::int64_t lin = 0; lin < total; ++lin) {
    Coord c(extent.size());
    std::int64_t rest = lin;
    for (int m = static_cast<int>(extent.size()) - 1; m >= 0; --m) {
      c[m] = static_cast<std::int32_t>(rest % extent[m]);
      rest /= extent[m];
    }
    if (keep(c)) cs.push_back(c);
  }
  return from_coords(extent, cs);
}

SiteSet random_sites(std::vector<std::int64_t> extent, double density, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  return grid_sites(extent, [&](const Coord&) { return u(rng) < density; });
}

Coord site(const SiteSet& s, std::int64_t i) {
  return {s.coords.begin() + i * s.dims, s.coords.begin() + (i + 1) * s.dims};
}

std::int64_t brute_find(const SiteSet& s, const Coord& c) {
  for (std::int64_t i = 0; i < s.sites(); ++i)
    if (site(s, i) == c) return i;
  return -1;
}

// The distinct floor(c / 2), sorted.
SiteSet brute_downsample(const SiteSet& in) {
  std::set<Coord> distinct;
  for (std::int64_t i = 0; i < in.sites(); ++i) {
    auto c = site(in, i);
    for (auto& v : c) v /= 2;
    distinct.insert(c);
  }
  const std::vector<Coord> out(distinct.begin(), distinct.end());
  std::vector<std::int64_t> ext;
  for (auto e : in.extent) ext.push_back((e + 1) / 2);
  return from_coords(ext, out);
}

using Triple = std::tuple<int, std::int32_t, std::int32_t>;  // (offset, input, output)

// (offset, input, output) of every pair: output o at c reads input at stride * c + d_j.
std::set<Triple> brute_pairs(const SiteSet& in, const SiteSet& out, int kernel, int stride) {
  const int d = in.dims;
  const auto off = kernel_offsets(d, kernel);
  const int K = static_cast<int>(off.size()) / d;
  std::set<Triple> t;
  for (std::int64_t o = 0; o < out.sites(); ++o)
    for (int j = 0; j < K; ++j) {
      auto c = site(out, o);
      for (int m = 0; m < d; ++m) c[m] = stride * c[m] + off[j * d + m];
      const auto i = brute_find(in, c);
      if (i >= 0) t.insert({j, static_cast<std::int32_t>(i), static_cast<std::int32_t>(o)});
    }
  return t;
}

std::set<Triple> map_pairs(const KernelMap& m) {
  std::set<Triple> t;
  for (int j = 0; j < m.offsets; ++j)
    for (std::int64_t p = m.offset_start[j]; p < m.offset_start[j + 1]; ++p)
      t.insert({j, m.in[p], m.out[p]});
  return t;
}

// Structure every map must have: sizes, offset starts, distinct columns within an offset.
void check_structure(const KernelMap& m) {
  REQUIRE(static_cast<int>(m.offset_start.size()) == m.offsets + 1);
  CHECK(m.offset_start.front() == 0);
  CHECK(m.offset_start.back() == m.pairs);
  CHECK(static_cast<std::int64_t>(m.in.size()) == m.pairs);
  CHECK(static_cast<std::int64_t>(m.out.size()) == m.pairs);
  for (int j = 0; j < m.offsets; ++j) {
    CHECK(m.offset_start[j] <= m.offset_start[j + 1]);
    std::set<std::int32_t> ins, outs;
    for (std::int64_t p = m.offset_start[j]; p < m.offset_start[j + 1]; ++p) {
      CHECK(m.in[p] >= 0);
      CHECK(m.in[p] < m.in_sites);
      CHECK(m.out[p] >= 0);
      CHECK(m.out[p] < m.out_sites);
      ins.insert(m.in[p]);
      outs.insert(m.out[p]);
    }
    CHECK(static_cast<std::int64_t>(ins.size()) == m.pairs_of(j));
    CHECK(static_cast<std::int64_t>(outs.size()) == m.pairs_of(j));
    // Both columns increase within an offset: the convolutions find a block's pairs by binary
    // search.
    std::int64_t unordered = 0;
    for (std::int64_t p = m.offset_start[j] + 1; p < m.offset_start[j + 1]; ++p)
      unordered += !(m.in[p - 1] < m.in[p] && m.out[p - 1] < m.out[p]);
    CHECK(unordered == 0);
  }
}

// One pattern through a whole geometry (first kernel, then strided layers), every level and map
// against brute force, with 1 and 2 threads giving identical results.
void check_geometry(const SiteSet& level0, int first_kernel, int kernel, int strided_layers) {
  const SparseGeometry g1 = build_geometry(level0, first_kernel, strided_layers, kernel, 1);
  const SparseGeometry g2 = build_geometry(level0, first_kernel, strided_layers, kernel, 2);
  REQUIRE(g1.levels.size() == static_cast<std::size_t>(strided_layers + 1));
  REQUIRE(g1.maps.size() == g1.levels.size());
  SiteSet expect = level0;
  for (int l = 0; l <= strided_layers; ++l) {
    INFO("level " << l);
    if (l > 0) expect = brute_downsample(expect);
    CHECK(g1.levels[l].coords == expect.coords);
    CHECK(g1.levels[l].extent == expect.extent);
    CHECK(g2.levels[l].coords == expect.coords);
    const KernelMap& m = *g1.maps[l];
    check_structure(m);
    const SiteSet& in = l == 0 ? g1.levels[0] : g1.levels[l - 1];
    const bool same = map_pairs(m) == brute_pairs(in, g1.levels[l], l == 0 ? first_kernel : kernel,
                                                  l == 0 ? 1 : 2);
    CHECK(same);
    CHECK(m.in_sites == in.sites());
    CHECK(m.out_sites == g1.levels[l].sites());
    // Thread count independence, down to the order of the pairs.
    CHECK(g2.maps[l]->in == m.in);
    CHECK(g2.maps[l]->out == m.out);
    CHECK(g2.maps[l]->offset_start == m.offset_start);
  }
}

}  // namespace

TEST_CASE("kernel_map: row keys wider than 63 bits are refused") {
  SiteSet wide;
  wide.dims = 4;
  wide.extent = {1LL << 30, 1LL << 30, 1LL << 30, 1LL << 30};  // prefix of 90 bits
  wide.coords = {1, 2, 3, 4};
  CHECK_THROWS_AS(build_geometry(wide, 3, 1, 3, 1), waco::kernels::Error);
  SiteSet fits;
  fits.dims = 3;
  fits.extent = {1LL << 31, 1LL << 31, 1LL << 31};  // prefix of 62 bits
  fits.coords = {5, 6, 7};
  CHECK_NOTHROW(build_geometry(fits, 3, 1, 3, 1));
}

TEST_CASE("kernel_map: downsampling gives the distinct halved coordinates, sorted") {
  const std::vector<std::vector<std::int64_t>> extents = {{29, 17}, {9, 8, 7}, {300, 301}, {50}};
  for (const auto& extent : extents) {
    SiteSet in = random_sites(extent, 0.15, 11);
    const SiteSet expect = brute_downsample(in);
    for (int threads : {1, 2, 3}) {
      const SiteSet out = downsample(in, threads);
      CHECK(out.coords == expect.coords);
      CHECK(out.extent == expect.extent);
    }
  }
}

TEST_CASE("kernel_map: unsorted level-0 sites are sorted, duplicates refused") {
  const SiteSet sorted = random_sites({20, 25}, 0.2, 12);
  SiteSet shuffled = sorted;
  std::vector<Coord> cs;
  for (std::int64_t i = 0; i < sorted.sites(); ++i) cs.push_back(site(sorted, i));
  std::mt19937 rng(3);
  std::shuffle(cs.begin(), cs.end(), rng);
  shuffled = from_coords(sorted.extent, cs);
  const SparseGeometry g = build_geometry(shuffled, 5, 2, 3, 2);
  CHECK(g.levels[0].coords == sorted.coords);
  cs.push_back(cs.front());
  CHECK_THROWS_AS(build_geometry(from_coords(sorted.extent, cs), 5, 2, 3, 2),
                  waco::kernels::Error);
}

TEST_CASE("kernel_map: maps equal brute force on random 2-D and 3-D patterns") {
  check_geometry(random_sites({23, 31}, 0.2, 5), 5, 3, 4);
  check_geometry(random_sites({23, 31}, 0.2, 6), 3, 3, 5);
  check_geometry(random_sites({8, 9, 7}, 0.2, 7), 3, 3, 3);
  check_geometry(random_sites({6, 7, 5}, 0.3, 8), 5, 3, 2);
  check_geometry(random_sites({90, 70}, 0.05, 9), 5, 3, 7);
  check_geometry(random_sites({70}, 0.3, 10), 5, 3, 4);  // 1-D: a single row
}

TEST_CASE("kernel_map: maps equal brute force on edge rows and columns") {
  const std::int64_t R = 19, C = 26;
  check_geometry(grid_sites({R, C}, [&](const Coord& c) {
                   return c[0] == 0 || c[0] == R - 1 || c[1] == 0 || c[1] == C - 1;
                 }),
                 5, 3, 5);
  check_geometry(grid_sites({R, C}, [&](const Coord& c) { return c[1] == C - 1 || c[0] == R - 1; }),
                 5, 3, 5);
}

TEST_CASE("kernel_map: maps equal brute force for a single nonzero") {
  check_geometry(from_coords({1, 1}, {{0, 0}}), 5, 3, 3);
  check_geometry(from_coords({17, 33}, {{16, 32}}), 5, 3, 6);
  check_geometry(from_coords({17, 33}, {{0, 0}}), 5, 3, 6);
  check_geometry(from_coords({5, 6, 7}, {{4, 5, 6}}), 3, 3, 3);
}

TEST_CASE("kernel_map: maps equal brute force for a dense block, a full row and a full column") {
  check_geometry(grid_sites({12, 12}, [](const Coord&) { return true; }), 5, 3, 4);
  check_geometry(grid_sites({30, 40}, [](const Coord& c) {
                   return c[0] >= 7 && c[0] < 20 && c[1] >= 11 && c[1] < 25;
                 }),
                 5, 3, 6);
  check_geometry(grid_sites({16, 50}, [](const Coord& c) {
                   return c[0] == 9 || (c[0] == 3 && c[1] % 7 == 0);
                 }),
                 5, 3, 6);
  check_geometry(grid_sites({1, 64}, [](const Coord&) { return true; }), 5, 3, 7);
  check_geometry(grid_sites({45, 16}, [](const Coord& c) { return c[1] == 15 || c[1] == 0; }), 5,
                 3, 6);
}

TEST_CASE("kernel_map: an empty pattern gives empty levels and maps") {
  SiteSet s;
  s.dims = 2;
  s.extent = {10, 10};
  const SparseGeometry g = build_geometry(s, 5, 3, 3, 2);
  for (const auto& m : g.maps) {
    CHECK(m->pairs == 0);
    check_structure(*m);
  }
  for (const auto& l : g.levels) CHECK(l.sites() == 0);
}

TEST_CASE("kernel_map: a joined map is the block-diagonal union of its parts") {
  const SparseGeometry a = build_geometry(random_sites({20, 30}, 0.2, 1), 5, 2, 3, 2);
  const SparseGeometry b = build_geometry(random_sites({15, 9}, 0.3, 2), 5, 2, 3, 2);
  for (std::size_t l = 0; l < a.maps.size(); ++l) {
    const KernelMap& ma = *a.maps[l];
    const KernelMap& mb = *b.maps[l];
    const KernelMap j = join_maps({&ma, &mb}, 2);
    check_structure(j);
    CHECK(j.in_sites == ma.in_sites + mb.in_sites);
    CHECK(j.out_sites == ma.out_sites + mb.out_sites);
    std::set<Triple> expect = map_pairs(ma);
    for (const auto& [o, i, q] : map_pairs(mb))
      expect.insert({o, i + static_cast<std::int32_t>(ma.in_sites),
                     q + static_cast<std::int32_t>(ma.out_sites)});
    const bool same = map_pairs(j) == expect;
    CHECK(same);
  }
}
