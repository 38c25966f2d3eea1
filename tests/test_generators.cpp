// Unit "generators": the seeded synthetic matrices and tensors (generators.hpp). Checks
// determinism, canonical output, the exact shapes each kind promises, and that every parameter
// out of range is refused with an Error naming it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/kernels/timing.hpp"

using namespace waco::kernels;

namespace {

GeneratorSpec spec_of(const std::string& kind) {
  GeneratorSpec s;
  s.kind = kind;
  s.rows = 300;
  s.nnz = 2000;
  s.nx = 12;
  s.ny = 9;
  s.nz = 5;
  s.scale = 10;
  s.edge_factor = 8;
  s.blocks = 40;
  s.block = 4;
  s.beta = 200.0;
  return s;
}

bool same(const CooMatrix& a, const CooMatrix& b) {
  return a.rows == b.rows && a.cols == b.cols && a.row == b.row && a.col == b.col && a.val == b.val;
}

std::vector<std::int64_t> row_counts(const CooMatrix& m) {
  std::vector<std::int64_t> c(static_cast<std::size_t>(m.rows), 0);
  for (index_t r : m.row) ++c[static_cast<std::size_t>(r)];
  return c;
}

bool values_in_range(const CooMatrix& m) {
  return std::all_of(m.val.begin(), m.val.end(),
                     [](float v) { return v >= -1.0f && v < 1.0f && v != 0.0f; });
}

bool is_symmetric(const CooMatrix& m) {
  std::set<std::pair<index_t, index_t>> s;
  for (std::size_t e = 0; e < m.row.size(); ++e) s.insert({m.row[e], m.col[e]});
  for (const auto& [r, c] : s) {
    if (s.count({c, r}) == 0) return false;
  }
  return true;
}

/// Checks that generate(spec) throws an Error whose message contains `needle`.
void require_error(const GeneratorSpec& s, const std::string& needle) {
  INFO("kind " << s.kind << ", expecting an error mentioning '" << needle << "'");
  try {
    generate(s);
    FAIL("no error thrown");
  } catch (const Error& e) {
    INFO("message: " << e.what());
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
    CHECK(std::string(e.what()).rfind("generate " + s.kind + ":", 0) == 0);
  }
}

}  // namespace

TEST_CASE("generators: every kind is deterministic, canonical and seeded", "[generators]") {
  REQUIRE(generator_kinds().size() == 8);
  for (const auto& kind : generator_kinds()) {
    INFO("kind " << kind.name);
    CHECK_FALSE(kind.description.empty());
    GeneratorSpec s = spec_of(kind.name);
    s.fill = kind.name == "banded" || kind.name == "blocks" ? 0.6 : 1.0;
    s.seed = 7;
    const CooMatrix a = generate(s);
    const CooMatrix b = generate(s);
    CHECK(same(a, b));
    CHECK(is_canonical(a));
    CHECK_NOTHROW(check_bounds(a));
    CHECK(a.nnz() > 0);
    CHECK(values_in_range(a));
    s.seed = 8;
    const CooMatrix c = generate(s);
    CHECK(is_canonical(c));
    // Stencils have a fixed pattern; only their values depend on the seed.
    if (kind.name == "stencil2d" || kind.name == "stencil3d") {
      CHECK(a.row == c.row);
      CHECK(a.col == c.col);
      CHECK(a.val != c.val);
    } else {
      CHECK_FALSE((a.row == c.row && a.col == c.col));
    }
  }
}

TEST_CASE("generators: values are spread over (-1, 1)", "[generators]") {
  GeneratorSpec s = spec_of("uniform");
  s.rows = 1000;
  s.nnz = 20000;
  const CooMatrix m = generate(s);
  double sum = 0.0;
  int negative = 0;
  for (float v : m.val) {
    sum += v;
    negative += v < 0.0f;
  }
  CHECK(std::abs(sum / m.nnz()) < 0.03);
  CHECK(negative > 9500);
  CHECK(negative < 10500);
  CHECK(*std::min_element(m.val.begin(), m.val.end()) < -0.99f);
  CHECK(*std::max_element(m.val.begin(), m.val.end()) > 0.99f);
}

TEST_CASE("generators: uniform hits exactly the requested nnz", "[generators]") {
  GeneratorSpec s = spec_of("uniform");
  for (auto [rows, cols, nnz] : std::vector<std::array<std::int64_t, 3>>{
           {1, 1, 0}, {1, 1, 1}, {10, 10, 100}, {10, 10, 99}, {10, 10, 51}, {7, 13, 45},
           {1000, 3, 2999}, {3, 100000, 12345}, {200000, 200000, 100000}}) {
    INFO(rows << "x" << cols << " nnz " << nnz);
    s.rows = rows;
    s.cols = cols;
    s.nnz = nnz;
    const CooMatrix m = generate(s);
    CHECK(m.rows == rows);
    CHECK(m.cols == cols);
    CHECK(m.nnz() == nnz);
    CHECK(is_canonical(m));
  }
  // cols = 0 means square.
  s.rows = 50;
  s.cols = 0;
  s.nnz = 10;
  CHECK(generate(s).cols == 50);
}

TEST_CASE("generators: uniform positions are spread over rows and columns", "[generators]") {
  GeneratorSpec s = spec_of("uniform");
  s.rows = 100;
  s.cols = 100;
  s.nnz = 5000;  // half the cells: exercises the complement path boundary
  const CooMatrix m = generate(s);
  const auto rc = row_counts(m);
  CHECK(*std::min_element(rc.begin(), rc.end()) > 25);
  CHECK(*std::max_element(rc.begin(), rc.end()) < 75);
  s.nnz = 9000;  // the complement path
  const CooMatrix d = generate(s);
  CHECK(d.nnz() == 9000);
  const auto dc = row_counts(d);
  CHECK(*std::min_element(dc.begin(), dc.end()) >= 75);
}

TEST_CASE("generators: banded stays in the band and fills it at fill 1", "[generators]") {
  GeneratorSpec s = spec_of("banded");
  s.rows = 97;
  s.cols = 60;
  s.bandwidth = 5;
  s.fill = 1.0;
  const CooMatrix m = generate(s);
  std::int64_t expected = 0;
  for (std::int64_t i = 0; i < 97; ++i) {
    for (std::int64_t j = 0; j < 60; ++j) expected += std::abs(i - j) <= 5;
  }
  CHECK(m.nnz() == expected);
  const auto outside_band = [](const CooMatrix& a) {
    std::int64_t n = 0;
    for (std::size_t e = 0; e < a.row.size(); ++e) n += std::abs(a.row[e] - a.col[e]) > 5;
    return n;
  };
  CHECK(outside_band(m) == 0);
  s.fill = 0.5;
  const CooMatrix h = generate(s);
  CHECK(h.nnz() > expected * 0.4);
  CHECK(h.nnz() < expected * 0.6);
  CHECK(outside_band(h) == 0);
  s.bandwidth = 0;
  s.fill = 1.0;
  CHECK(generate(s).nnz() == 60);  // the diagonal of a 97 x 60 matrix
}

TEST_CASE("generators: blocks are dense block-aligned tiles", "[generators]") {
  GeneratorSpec s = spec_of("blocks");
  s.rows = 103;  // not divisible by the block: boundary tiles are clipped
  s.cols = 70;
  s.block = 8;
  s.blocks = 30;
  s.fill = 1.0;
  const CooMatrix m = generate(s);
  std::map<std::pair<int, int>, int> tiles;
  for (std::size_t e = 0; e < m.row.size(); ++e) ++tiles[{m.row[e] / 8, m.col[e] / 8}];
  CHECK(tiles.size() == 30);
  for (const auto& [t, count] : tiles) {
    const int h = std::min(8, 103 - t.first * 8), w = std::min(8, 70 - t.second * 8);
    CHECK(count == h * w);
  }
  // All tiles of the matrix: the matrix is full.
  s.blocks = 13 * 9;
  CHECK(generate(s).nnz() == 103 * 70);
  s.blocks = 30;
  s.fill = 0.5;
  const CooMatrix half = generate(s);
  std::set<std::pair<int, int>> half_tiles;
  for (std::size_t e = 0; e < half.row.size(); ++e)
    half_tiles.insert({half.row[e] / 8, half.col[e] / 8});
  CHECK(half_tiles.size() <= 30);
  CHECK(half.nnz() > 30 * 64 * 0.35);
  CHECK(half.nnz() < 30 * 64 * 0.6);
}

TEST_CASE("generators: stencils have exact 5- and 7-point counts", "[generators]") {
  GeneratorSpec s = spec_of("stencil2d");
  for (auto [nx, ny] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1, 1}, {1, 7}, {6, 1}, {12, 9}, {32, 32}}) {
    s.nx = nx;
    s.ny = ny;
    const CooMatrix m = generate(s);
    const std::int64_t n = nx * ny;
    CHECK(m.rows == n);
    CHECK(m.cols == n);
    CHECK(m.nnz() == 5 * n - 2 * nx - 2 * ny);
    CHECK(is_symmetric(m));
  }
  s.kind = "stencil3d";
  for (auto [nx, ny, nz] : std::vector<std::array<std::int64_t, 3>>{
           {1, 1, 1}, {4, 1, 1}, {12, 9, 5}, {10, 10, 10}}) {
    s.nx = nx;
    s.ny = ny;
    s.nz = nz;
    const CooMatrix m = generate(s);
    const std::int64_t n = nx * ny * nz;
    CHECK(m.rows == n);
    CHECK(m.nnz() == 7 * n - 2 * (ny * nz + nx * nz + nx * ny));
    CHECK(is_symmetric(m));
  }
  // Row 0 of a 2-D grid: itself, its right and its upper neighbour.
  s.kind = "stencil2d";
  s.nx = 5;
  s.ny = 4;
  const CooMatrix m = generate(s);
  CHECK(m.col[0] == 0);
  CHECK(m.col[1] == 1);
  CHECK(m.col[2] == 5);
  CHECK(m.row[3] == 1);
}

TEST_CASE("generators: rmat is skewed like a power law", "[generators]") {
  GeneratorSpec s = spec_of("rmat");
  s.scale = 14;
  s.edge_factor = 8;
  const CooMatrix m = generate(s);
  CHECK(m.rows == (1 << 14));
  CHECK(m.nnz() <= (std::int64_t{8} << 14));
  CHECK(m.nnz() > (std::int64_t{8} << 14) / 2);  // repeats merged, most edges distinct
  const auto rc = row_counts(m);
  const double mean = static_cast<double>(m.nnz()) / m.rows;
  const auto maxdeg = *std::max_element(rc.begin(), rc.end());
  CHECK(maxdeg > 20 * mean);
  // Quadrant a dominates: the top-left quarter holds the most entries.
  std::int64_t topleft = 0;
  for (std::size_t e = 0; e < m.row.size(); ++e)
    topleft += m.row[e] < (1 << 13) && m.col[e] < (1 << 13);
  CHECK(topleft > m.nnz() / 2);
  // a = b = c = d = 0.25 is uniform: no skew.
  s.a = s.b = s.c = 0.25;
  const auto flat = row_counts(generate(s));
  CHECK(*std::max_element(flat.begin(), flat.end()) < 4 * 8);
}

TEST_CASE("generators: powerlaw and smallworld have their graph shapes", "[generators]") {
  GeneratorSpec p = spec_of("powerlaw");
  p.rows = 20000;
  p.alpha = 0.7;
  p.beta = 3000.0;
  const CooMatrix pl = generate(p);
  CHECK(pl.rows == 20000);
  CHECK(pl.cols == 20000);
  CHECK(is_symmetric(pl));
  const auto pc = row_counts(pl);
  const double pmean = static_cast<double>(pl.nnz()) / pl.rows;
  CHECK(pmean > 4);
  // Boost's PLOD pairs degree credits between uniformly chosen vertices, which caps the hubs
  // well below beta; still far more skewed than a uniform matrix of the same density, whose
  // longest row is about 2.5x the mean.
  CHECK(*std::max_element(pc.begin(), pc.end()) > 10 * pmean);
  std::int64_t loops = 0;
  for (std::size_t e = 0; e < pl.row.size(); ++e) loops += pl.row[e] == pl.col[e];
  CHECK(loops == 0);

  GeneratorSpec w = spec_of("smallworld");
  w.rows = 2000;
  w.neighbors = 6;
  w.rewire = 0.0;
  const CooMatrix ring = generate(w);
  CHECK(ring.nnz() == 2000 * 6);  // exactly the ring lattice: 3 neighbours per side
  const auto rc = row_counts(ring);
  CHECK(std::all_of(rc.begin(), rc.end(), [](std::int64_t c) { return c == 6; }));
  std::int64_t off_ring = 0;
  for (std::size_t e = 0; e < ring.row.size(); ++e) {
    const int d = std::abs(ring.row[e] - ring.col[e]);
    off_ring += std::min(d, 2000 - d) > 3;
  }
  CHECK(off_ring == 0);
  w.rewire = 0.2;
  const CooMatrix sw = generate(w);
  CHECK(is_symmetric(sw));
  std::int64_t far = 0;
  for (std::size_t e = 0; e < sw.row.size(); ++e) {
    const int d = std::abs(sw.row[e] - sw.col[e]);
    far += std::min(d, 2000 - d) > 3;
  }
  const double far_fraction = static_cast<double>(far) / sw.nnz();
  CHECK(far_fraction > 0.12);
  CHECK(far_fraction < 0.28);
}

TEST_CASE("generators: bad parameters are refused with the parameter named", "[generators]") {
  using Mutate = std::function<void(GeneratorSpec&)>;
  struct Case {
    const char* kind;
    Mutate mutate;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"uniform", [](GeneratorSpec& s) { s.rows = 0; }, "rows"},
      {"uniform", [](GeneratorSpec& s) { s.rows = -5; }, "rows"},
      {"uniform", [](GeneratorSpec& s) { s.rows = kMaxIndex + 1; }, "rows"},
      {"uniform", [](GeneratorSpec& s) { s.cols = -1; }, "cols"},
      {"uniform", [](GeneratorSpec& s) { s.nnz = -1; }, "nnz"},
      {"uniform", [](GeneratorSpec& s) { s.rows = 10; s.cols = 10; s.nnz = 101; }, "rows * cols"},
      {"uniform", [](GeneratorSpec& s) { s.rows = 100000; s.nnz = kMaxIndex + 1; }, "32-bit"},
      {"banded", [](GeneratorSpec& s) { s.bandwidth = -1; }, "bandwidth"},
      {"banded", [](GeneratorSpec& s) { s.bandwidth = 300; }, "bandwidth"},
      {"banded", [](GeneratorSpec& s) { s.fill = 0.0; }, "fill"},
      {"banded", [](GeneratorSpec& s) { s.fill = 1.5; }, "fill"},
      {"banded", [](GeneratorSpec& s) { s.fill = std::nan(""); }, "fill"},
      {"banded", [](GeneratorSpec& s) { s.rows = kMaxIndex; s.bandwidth = 10; }, "32-bit"},
      {"blocks", [](GeneratorSpec& s) { s.block = 0; }, "block"},
      {"blocks", [](GeneratorSpec& s) { s.block = 301; }, "block"},
      {"blocks", [](GeneratorSpec& s) { s.blocks = -1; }, "blocks"},
      {"blocks", [](GeneratorSpec& s) { s.block = 100; s.blocks = 10; }, "tiles"},
      {"blocks", [](GeneratorSpec& s) { s.fill = -0.1; }, "fill"},
      {"stencil2d", [](GeneratorSpec& s) { s.nx = 0; }, "nx"},
      {"stencil2d", [](GeneratorSpec& s) { s.ny = -3; }, "ny"},
      {"stencil2d", [](GeneratorSpec& s) { s.nx = 100000; s.ny = 100000; }, "32-bit"},
      {"stencil3d", [](GeneratorSpec& s) { s.nz = 0; }, "nz"},
      {"stencil3d", [](GeneratorSpec& s) { s.nx = 1000; s.ny = 1000; s.nz = 1000; }, "32-bit"},
      {"rmat", [](GeneratorSpec& s) { s.scale = 0; }, "scale"},
      {"rmat", [](GeneratorSpec& s) { s.scale = 31; }, "scale"},
      {"rmat", [](GeneratorSpec& s) { s.edge_factor = 0; }, "edge_factor"},
      {"rmat", [](GeneratorSpec& s) { s.scale = 30; s.edge_factor = 4; }, "32-bit"},
      {"rmat", [](GeneratorSpec& s) { s.a = -0.1; }, "a must be"},
      {"rmat", [](GeneratorSpec& s) { s.b = 1.0; }, "b must be"},
      {"rmat", [](GeneratorSpec& s) { s.c = std::nan(""); }, "c must be"},
      {"rmat", [](GeneratorSpec& s) { s.a = 0.6; s.b = 0.3; s.c = 0.3; },
       "a + b + c must be < 1 (got 1.2)"},
      {"rmat", [](GeneratorSpec& s) { s.a = 0.5; s.b = 0.25; s.c = 0.25; }, "a + b + c"},
      {"powerlaw", [](GeneratorSpec& s) { s.rows = 1; }, "rows"},
      {"powerlaw", [](GeneratorSpec& s) { s.cols = 7; }, "cols"},
      {"powerlaw", [](GeneratorSpec& s) { s.alpha = 0.0; }, "alpha"},
      {"powerlaw", [](GeneratorSpec& s) { s.alpha = INFINITY; }, "alpha"},
      {"powerlaw", [](GeneratorSpec& s) { s.beta = -1.0; }, "beta"},
      {"powerlaw", [](GeneratorSpec& s) { s.rows = 100000000; s.alpha = 0.5; s.beta = 1e9; },
       "32-bit"},
      {"smallworld", [](GeneratorSpec& s) { s.rows = 3; }, "rows"},
      {"smallworld", [](GeneratorSpec& s) { s.neighbors = 0; }, "neighbors"},
      {"smallworld", [](GeneratorSpec& s) { s.neighbors = 5; }, "even"},
      {"smallworld", [](GeneratorSpec& s) { s.neighbors = 300; }, "neighbors"},
      {"smallworld", [](GeneratorSpec& s) { s.rewire = 1.01; }, "rewire"},
      {"smallworld", [](GeneratorSpec& s) { s.rows = 1000000000; s.neighbors = 10; }, "32-bit"},
  };
  for (const auto& c : cases) {
    GeneratorSpec s = spec_of(c.kind);
    c.mutate(s);
    require_error(s, c.needle);
  }
  // Within the 32-bit limit but beyond this machine's memory (about 36 B per sampled entry):
  // refused before allocating. Only run where that request really is too large.
  const double phys = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                      static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (phys > 0 && phys < 30.0 * static_cast<double>(kMaxIndex)) {
    GeneratorSpec huge = spec_of("uniform");
    huge.rows = 100000;
    huge.nnz = kMaxIndex;
    require_error(huge, "GB of memory");
  }
  GeneratorSpec unknown = spec_of("unifrom");
  try {
    generate(unknown);
    FAIL("unknown kind accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("unknown kind 'unifrom'") != std::string::npos);
    CHECK(e.hint().find("uniform") != std::string::npos);
  }
}

TEST_CASE("generators: generate_tensor respects dims and nnz", "[generators]") {
  const CooTensor t = generate_tensor({30, 20, 10}, 1500, 5);
  REQUIRE(t.order() == 3);
  CHECK(t.dims == std::vector<index_t>{30, 20, 10});
  CHECK(t.nnz() == 1500);
  CHECK(is_canonical(t));
  CHECK_NOTHROW(check_bounds(t));
  for (int m = 0; m < 3; ++m) {
    const auto mx = *std::max_element(t.idx[m].begin(), t.idx[m].end());
    CHECK(mx == t.dims[m] - 1);  // 1500 of 6000 cells reach every mode's last index
  }
  const CooTensor same_seed = generate_tensor({30, 20, 10}, 1500, 5);
  CHECK(same_seed.idx == t.idx);
  CHECK(same_seed.val == t.val);
  const CooTensor other = generate_tensor({30, 20, 10}, 1500, 6);
  CHECK(other.idx != t.idx);
  // Dense-ish (complement path), full, and huge dims (128-bit keys).
  CHECK(generate_tensor({4, 5, 6}, 100, 1).nnz() == 100);
  CHECK(generate_tensor({4, 5, 6}, 120, 1).nnz() == 120);
  const CooTensor huge = generate_tensor({2000000000, 2000000000, 2000000000}, 1000, 3);
  CHECK(huge.nnz() == 1000);
  CHECK(is_canonical(huge));
  CHECK(generate_tensor({7}, 7, 1).nnz() == 7);

  CHECK_THROWS_AS(generate_tensor({}, 1, 1), Error);
  CHECK_THROWS_AS(generate_tensor({2, 2, 2, 2, 2}, 1, 1), Error);
  CHECK_THROWS_AS(generate_tensor({3, 0, 3}, 1, 1), Error);
  CHECK_THROWS_AS(generate_tensor({3, -2, 3}, 1, 1), Error);
  CHECK_THROWS_AS(generate_tensor({2, 2, 2}, 9, 1), Error);
  CHECK_THROWS_AS(generate_tensor({2, 2, 2}, -1, 1), Error);
}

TEST_CASE("generators: a matrix scaled up is its copies on the block diagonal", "[generators]") {
  // A real file's shape in small: an empty row, a dense row, a one-entry column, rows != cols.
  CooMatrix a;
  a.rows = 4;
  a.cols = 3;
  a.row = {0, 0, 0, 2, 3};
  a.col = {0, 1, 2, 1, 2};
  a.val = {1.5, -2, 0.25, 3, 7};
  REQUIRE(is_canonical(a));
  const CooMatrix m = replicate_diagonal(a, 3);
  CHECK(m.rows == 12);
  CHECK(m.cols == 9);
  REQUIRE(m.nnz() == 15);
  CHECK(is_canonical(m));
  for (std::int64_t c = 0; c < 3; ++c)
    for (std::size_t e = 0; e < a.val.size(); ++e) {
      const std::size_t k = static_cast<std::size_t>(c) * a.val.size() + e;
      CHECK(m.row[k] == a.row[e] + c * a.rows);
      CHECK(m.col[k] == a.col[e] + c * a.cols);
      CHECK(m.val[k] == a.val[e]);
    }
  const CooMatrix one = replicate_diagonal(a, 1);
  CHECK((one.row == a.row && one.col == a.col && one.val == a.val));
  CHECK(replicate_diagonal(CooMatrix{}, 5).nnz() == 0);
  // Refused: no copies, and sizes past the 32-bit index (named).
  CHECK_THROWS_WITH(replicate_diagonal(a, 0), Catch::Contains("copies"));
  CooMatrix wide = a;
  wide.cols = 1 << 30;
  CHECK_THROWS_WITH(replicate_diagonal(wide, 2), Catch::Contains("columns") && Catch::Contains("32-bit"));
}

TEST_CASE(
    "generators: the powerlaw estimate sums term by term and in closed form alike and at once",
    "[generators]") {
  // The sum term by term over every x (what the generator counted before the closed form).
  const auto by_terms = [](std::int64_t rows, double alpha, double beta) {
    const double n = static_cast<double>(rows);
    const double cut = std::min(n, std::pow(beta / 2.0, 1.0 / alpha) + 1.0);
    double extra = 0.0;
    for (std::int64_t x = 1; x < static_cast<std::int64_t>(cut); ++x) {
      const double deg = std::min(n - 1.0, beta * std::pow(static_cast<double>(x), -alpha));
      if (deg > 1.0) extra += std::floor(deg) - 1.0;
    }
    return n + extra;
  };
  // Below 2^16 terms: exactly the sum.
  CHECK(waco::kernels::powerlaw_expected_nnz(5000, 0.6, 200.0) == by_terms(5000, 0.6, 200.0));
  CHECK(waco::kernels::powerlaw_expected_nnz(100, 0.3, 1e6) == by_terms(100, 0.3, 1e6));
  // Beyond, by distinct degrees (0.47M, 2.9M and 2M terms; one with degrees capped at rows - 1,
  // one with alpha 1): the same sum but for rounding.
  for (const auto& [rows, alpha, beta] :
       {std::tuple<std::int64_t, double, double>{10000000, 0.6, 5000.0},
        {3000000, 1.0, 5e6},
        {2000000, 0.5, 3000.0}}) {
    INFO(rows << " " << alpha << " " << beta);
    CHECK(waco::kernels::powerlaw_expected_nnz(rows, alpha, beta) ==
          Approx(by_terms(rows, alpha, beta)).epsilon(1e-9));
  }
  // Degrees of 2^16 and more beyond x = 2^16 (up to 1.1M): the integral, within 10^-4.
  CHECK(waco::kernels::powerlaw_expected_nnz(3000000, 0.2, 1e7) ==
        Approx(by_terms(3000000, 0.2, 1e7)).epsilon(1e-4));
  // A recipe file's 4.6 * 10^13 rows with alpha 0.37 (a fuzzer's: ~10^9 terms, a hang): at once,
  // and far beyond what the generator makes (it refuses it).
  const double t0 = waco::kernels::now_seconds();
  CHECK(waco::kernels::powerlaw_expected_nnz(45852147483648, 0.37, 5016.0) > 1e9);
  CHECK(waco::kernels::now_seconds() - t0 < 0.5);
  waco::kernels::GeneratorSpec s;
  s.kind = "powerlaw";
  s.rows = 2000000000;
  s.alpha = 0.37;
  s.beta = 5016.0;
  CHECK_THROWS_AS(waco::kernels::generate(s), waco::kernels::Error);
  // Parameters the generator refuses: the baseline, no hang, no NaN.
  CHECK(waco::kernels::powerlaw_expected_nnz(10, -1.0, 5.0) == 10.0);
  CHECK(waco::kernels::powerlaw_expected_nnz(1, 0.5, 5.0) == 1.0);
  CHECK(waco::kernels::powerlaw_expected_nnz(-3, 0.5, 5.0) == 0.0);
}
