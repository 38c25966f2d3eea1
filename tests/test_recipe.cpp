// Unit "recipe": matrix recipes (recipe.hpp). A recipe remakes its matrix bit for bit (also after
// its JSON round trip); each augmentation is checked against a brute-force expectation on a small
// matrix; the default mixes cover every generator kind and respect their cap; shards partition the
// recipes; bad recipes are refused naming the field, and recipe files naming file:line.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/recipe.hpp"
#include "waco/kernels/sparse.hpp"

using namespace waco::kernels;
using nlohmann::json;
using waco::test::from_triplets;

namespace {

/// A small spec of each kind (fast to generate).
GeneratorSpec small_spec(const std::string& kind) {
  GeneratorSpec s;
  s.kind = kind;
  s.rows = 400;
  s.cols = 0;
  s.nnz = 3000;
  s.nx = 12;
  s.ny = 9;
  s.nz = 5;
  s.scale = 9;
  s.blocks = 30;
  s.beta = 150.0;
  s.seed = 11;
  return s;
}

Recipe generator_recipe(const GeneratorSpec& g) {
  Recipe r;
  r.source = Recipe::Source::Generator;
  r.generator = g;
  return r;
}

/// 9 x 7, with distinct values 1..n so that entries can be followed through a permutation.
CooMatrix small_matrix() {
  std::vector<index_t> r, c;
  std::vector<float> v;
  for (index_t i = 0; i < 9; ++i) {
    for (index_t j = 0; j < 7; ++j) {
      if ((i * 7 + j) % 3 == 0 || i == j) {
        r.push_back(i);
        c.push_back(j);
        v.push_back(static_cast<float>(r.size()));
      }
    }
  }
  return from_triplets(9, 7, r, c, v);
}

CooMatrix square_matrix() {
  std::vector<index_t> r, c;
  std::vector<float> v;
  for (index_t i = 0; i < 12; ++i) {
    for (index_t j = 0; j < 12; ++j) {
      if ((i * 5 + j * 3) % 4 == 0) {
        r.push_back(i);
        c.push_back(j);
        v.push_back(static_cast<float>(r.size()) * 0.25f);
      }
    }
  }
  return from_triplets(12, 12, r, c, v);
}

bool same(const CooMatrix& a, const CooMatrix& b) {
  return a.rows == b.rows && a.cols == b.cols && a.row == b.row && a.col == b.col && a.val == b.val;
}

/// Checks that `f` throws an Error whose text, as main() prints it (what, then the hint),
/// contains every needle.
void require_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    FAIL("no error thrown");
  } catch (const Error& e) {
    const std::string text = std::string(e.what()) + " (hint: " + e.hint() + ")";
    INFO("message: " << text);
    for (const std::string& n : needles) CHECK(text.find(n) != std::string::npos);
  }
}

/// A recipe JSON with one field replaced (or removed when `value` is null).
json with(json j, const std::vector<std::string>& path, const json& value) {
  json* at = &j;
  for (std::size_t k = 0; k + 1 < path.size(); ++k) at = &(*at)[path[k]];
  if (value.is_null())
    at->erase(path.back());
  else
    (*at)[path.back()] = value;
  return j;
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("recipe: a recipe regenerates an identical matrix, also after its JSON round trip",
          "[recipe]") {
  for (const GeneratorKind& k : generator_kinds()) {
    INFO("kind " << k.name);
    Recipe r = generator_recipe(small_spec(k.name));
    for (bool augmented : {false, true}) {
      if (augmented) {
        r.augment.resize = 1.5;
        r.augment.permute = Permutation::Both;
        r.augment.seed = 42;
      }
      const CooMatrix a = make_matrix(r), b = make_matrix(r);
      REQUIRE(a.nnz() > 0);
      CHECK(is_canonical(a));
      CHECK(std::none_of(a.val.begin(), a.val.end(), [](float v) { return v == 0.0f; }));
      CHECK(fingerprint(a) == fingerprint(b));
      const Recipe back = Recipe::from_json(json::parse(r.to_json().dump()));
      CHECK(back == r);
      CHECK(back.to_json().dump() == r.to_json().dump());
      CHECK(fingerprint(make_matrix(back)) == fingerprint(a));
    }
    Recipe other = r;
    other.augment.seed = 43;
    CHECK(fingerprint(make_matrix(other)) != fingerprint(make_matrix(r)));
  }
}

TEST_CASE("recipe: a file recipe remakes the file's matrix, then its augmentation", "[recipe]") {
  const std::string dir = waco::test::scratch_dir("recipe-file");
  const CooMatrix m = generate(small_spec("rmat"));
  const std::string path = dir + "/graph.mtx.gz";
  write_matrix_market(path, m);
  Recipe r;
  r.source = Recipe::Source::File;
  r.path = path;
  CHECK(fingerprint(make_matrix(r)) == fingerprint(read_matrix_market(path).matrix));
  CHECK(estimated_nnz(r) == m.nnz());
  r.augment.block = 2;
  r.augment.permute = Permutation::Symmetric;
  r.augment.seed = 5;
  const CooMatrix a = make_matrix(r);
  CHECK(a.nnz() == 4 * m.nnz());
  CHECK(estimated_nnz(r) == 4 * m.nnz());
  const Recipe back = Recipe::from_json(r.to_json());
  CHECK(back.path == path);  // stored verbatim
  CHECK(fingerprint(make_matrix(back)) == fingerprint(a));
  CHECK(r.label() == "graph block=2 permute=symmetric seed=5");

  Recipe missing = r;
  missing.path = dir + "/absent.mtx";
  require_error([&] { make_matrix(missing); }, {"absent.mtx"});
}

TEST_CASE("recipe: a file keeps its stored zeros and resizing down leaves none", "[recipe]") {
  const std::string dir = waco::test::scratch_dir("recipe-zeros");
  const std::string path = write_file(dir, "zeros.mtx",
                                      "%%MatrixMarket matrix coordinate real general\n"
                                      "4 4 6\n1 1 2.5\n1 2 -2.5\n1 3 0\n2 4 -1\n3 1 0\n4 4 3\n");
  Recipe r;
  r.source = Recipe::Source::File;
  r.path = path;
  const CooMatrix read = read_matrix_market(path).matrix;
  // The same fingerprint as the file read directly: what the held-out guard compares.
  CHECK(fingerprint(make_matrix(r)) == fingerprint(read));
  // Halving (0-based): (0,0) 2.5 and (0,1) -2.5 cancel in cell (0,0); (0,2) 0 and (1,3) -1 sum
  // to -1 in (0,1); the stored zero (2,0) is alone in (1,0); (3,3) 3 in (1,1). The two zeros
  // left get nonzero values; the sums stay.
  r.augment.resize = 0.5;
  r.augment.seed = 1;
  const CooMatrix half = make_matrix(r);
  CHECK(half.rows == 2);
  CHECK(half.row == std::vector<index_t>{0, 0, 1, 1});
  CHECK(half.col == std::vector<index_t>{0, 1, 0, 1});
  CHECK(std::none_of(half.val.begin(), half.val.end(), [](float v) { return v == 0.0f; }));
  CHECK(half.val[1] == -1.0f);
  CHECK(half.val[3] == 3.0f);
  CHECK(fingerprint(make_matrix(r)) == fingerprint(half));
}

TEST_CASE("recipe: a .tns file recipe makes a tensor, not a matrix", "[recipe]") {
  const std::string dir = waco::test::scratch_dir("recipe-tns");
  const CooTensor t = generate_tensor({20, 30, 40}, 500, 3);
  const std::string path = dir + "/small.tns";
  write_frostt(path, t);
  Recipe r;
  r.source = Recipe::Source::File;
  r.path = path;
  CHECK(fingerprint(make_tensor(r)) == fingerprint(read_frostt(path).tensor));
  CHECK(r.label() == "small");
  require_error([&] { make_matrix(r); }, {"tensor file", "make_tensor"});
  r.augment.permute = Permutation::Both;
  require_error([&] { make_tensor(r); }, {"augments a tensor file"});
}

TEST_CASE("recipe: the JSON form holds every parameter a generator kind reads", "[recipe]") {
  // Changing a field the JSON form leaves out must not change the matrix, or the recipe would not
  // remake it. cols is set to rows (the only other value powerlaw and smallworld accept).
  const std::vector<std::pair<std::string, std::function<void(GeneratorSpec&)>>> fields = {
      {"rows", [](GeneratorSpec& s) { s.rows += 3; }},
      {"cols", [](GeneratorSpec& s) { s.cols = s.rows; }},
      {"nnz", [](GeneratorSpec& s) { s.nnz += 7; }},
      {"bandwidth", [](GeneratorSpec& s) { s.bandwidth += 1; }},
      {"block", [](GeneratorSpec& s) { s.block += 1; }},
      {"blocks", [](GeneratorSpec& s) { s.blocks += 1; }},
      {"fill", [](GeneratorSpec& s) { s.fill = 0.5; }},
      {"nx", [](GeneratorSpec& s) { s.nx += 1; }},
      {"ny", [](GeneratorSpec& s) { s.ny += 1; }},
      {"nz", [](GeneratorSpec& s) { s.nz += 1; }},
      {"scale", [](GeneratorSpec& s) { s.scale += 1; }},
      {"edge_factor", [](GeneratorSpec& s) { s.edge_factor += 1; }},
      {"a", [](GeneratorSpec& s) { s.a = 0.5; }},
      {"b", [](GeneratorSpec& s) { s.b = 0.2; }},
      {"c", [](GeneratorSpec& s) { s.c = 0.1; }},
      {"alpha", [](GeneratorSpec& s) { s.alpha = 0.7; }},
      {"beta", [](GeneratorSpec& s) { s.beta = 100.0; }},
      {"neighbors", [](GeneratorSpec& s) { s.neighbors = 8; }},
      {"rewire", [](GeneratorSpec& s) { s.rewire = 0.3; }},
  };
  for (const GeneratorKind& k : generator_kinds()) {
    const GeneratorSpec base = small_spec(k.name);
    const json stored = generator_recipe(base).to_json().at("generator");
    CHECK(stored.at("kind") == k.name);
    CHECK(stored.at("seed") == base.seed);
    const std::uint64_t want = fingerprint(generate(base));
    for (const auto& [name, change] : fields) {
      if (stored.contains(name)) continue;
      INFO("kind " << k.name << ", field left out: " << name);
      GeneratorSpec s = base;
      change(s);
      CHECK(fingerprint(generate(s)) == want);
    }
  }
}

TEST_CASE("recipe: a permutation is a bijection preserving values", "[recipe]") {
  const CooMatrix sq = square_matrix(), rect = small_matrix();
  for (Permutation p :
       {Permutation::Rows, Permutation::Columns, Permutation::Both, Permutation::Symmetric}) {
    INFO("permute " << permutation_name(p));
    const CooMatrix& a = p == Permutation::Symmetric ? sq : rect;
    Augmentation g;
    g.permute = p;
    g.seed = 3;
    const CooMatrix b = augment(a, g);
    REQUIRE(b.rows == a.rows);
    REQUIRE(b.cols == a.cols);
    REQUIRE(b.nnz() == a.nnz());
    CHECK(is_canonical(b));
    // Values are distinct: follow each entry, collecting the row and column maps.
    std::map<float, std::pair<index_t, index_t>> where;
    for (std::size_t e = 0; e < b.val.size(); ++e) where[b.val[e]] = {b.row[e], b.col[e]};
    REQUIRE(where.size() == b.val.size());
    std::map<index_t, index_t> rmap, cmap;
    bool consistent = true;
    for (std::size_t e = 0; e < a.val.size(); ++e) {
      REQUIRE(where.count(a.val[e]) == 1);
      const auto [r, c] = where[a.val[e]];
      consistent &= rmap.emplace(a.row[e], r).first->second == r;
      consistent &= cmap.emplace(a.col[e], c).first->second == c;
    }
    CHECK(consistent);  // one image per row and per column
    std::set<index_t> rimg, cimg;
    bool rows_moved = false, cols_moved = false;
    for (auto [from, to] : rmap) rimg.insert(to), rows_moved |= from != to;
    for (auto [from, to] : cmap) cimg.insert(to), cols_moved |= from != to;
    CHECK(rimg.size() == rmap.size());  // injective
    CHECK(cimg.size() == cmap.size());
    CHECK(rows_moved == (p != Permutation::Columns));
    CHECK(cols_moved == (p != Permutation::Rows));
    if (p == Permutation::Symmetric) {
      for (auto [from, to] : rmap)
        if (cmap.count(from)) CHECK(cmap[from] == to);
    }
    CHECK(same(augment(a, g), b));
  }
  Augmentation g;
  g.permute = Permutation::Symmetric;
  require_error([&] { augment(small_matrix(), g); }, {"symmetric permutation", "square"});
}

TEST_CASE("recipe: resizing down merges entries into floor(i * f)", "[recipe]") {
  const CooMatrix a = square_matrix();
  for (double f : {0.5, 1.0 / 3.0, 0.7}) {
    INFO("f = " << f);
    std::map<std::pair<index_t, index_t>, float> want;  // brute force: sum in canonical order
    for (std::size_t e = 0; e < a.val.size(); ++e) {
      const auto r = static_cast<index_t>(std::floor(a.row[e] * f));
      const auto c = static_cast<index_t>(std::floor(a.col[e] * f));
      want[{r, c}] += a.val[e];
    }
    Augmentation g;
    g.resize = f;
    g.seed = 9;
    const CooMatrix b = augment(a, g);
    CHECK(b.rows == static_cast<index_t>(std::floor(11 * f)) + 1);
    CHECK(b.cols == b.rows);
    REQUIRE(static_cast<std::size_t>(b.nnz()) == want.size());
    CHECK(b.nnz() < a.nnz());
    std::size_t e = 0;
    for (const auto& [rc, v] : want) {
      CHECK(b.row[e] == rc.first);
      CHECK(b.col[e] == rc.second);
      CHECK(b.val[e] == Approx(v));
      ++e;
    }
  }
}

TEST_CASE("recipe: resizing up keeps every entry, in a random cell of its image", "[recipe]") {
  const CooMatrix a = small_matrix();
  for (double f : {2.0, 3.0, 2.5}) {
    INFO("f = " << f);
    Augmentation g;
    g.resize = f;
    g.seed = 17;
    const CooMatrix b = augment(a, g);
    CHECK(b.rows == static_cast<index_t>(std::floor(9 * f)));
    CHECK(b.cols == static_cast<index_t>(std::floor(7 * f)));
    REQUIRE(b.nnz() == a.nnz());
    CHECK(is_canonical(b));
    std::map<float, std::pair<index_t, index_t>> where;
    for (std::size_t e = 0; e < b.val.size(); ++e) where[b.val[e]] = {b.row[e], b.col[e]};
    std::set<std::pair<index_t, index_t>> offsets;
    for (std::size_t e = 0; e < a.val.size(); ++e) {
      REQUIRE(where.count(a.val[e]) == 1);
      const auto [r, c] = where[a.val[e]];
      const auto r0 = static_cast<index_t>(std::floor(a.row[e] * f));
      const auto r1 = static_cast<index_t>(std::floor((a.row[e] + 1) * f));
      const auto c0 = static_cast<index_t>(std::floor(a.col[e] * f));
      const auto c1 = static_cast<index_t>(std::floor((a.col[e] + 1) * f));
      CHECK((r >= r0 && r < r1));
      CHECK((c >= c0 && c < c1));
      offsets.insert({r - r0, c - c0});
    }
    // Spread over the image, rows and columns independently, not always its corner.
    std::set<index_t> row_offsets, col_offsets;
    for (auto [dr, dc] : offsets) row_offsets.insert(dr), col_offsets.insert(dc);
    CHECK(row_offsets.size() > 1);
    CHECK(col_offsets.size() > 1);
  }
}

TEST_CASE("recipe: block expansion multiplies nnz by b*b", "[recipe]") {
  const CooMatrix a = small_matrix();
  for (index_t b : {2, 3}) {
    std::map<std::pair<index_t, index_t>, float> want;
    for (std::size_t e = 0; e < a.val.size(); ++e)
      for (index_t dr = 0; dr < b; ++dr)
        for (index_t dc = 0; dc < b; ++dc) want[{a.row[e] * b + dr, a.col[e] * b + dc}] = a.val[e];
    Augmentation g;
    g.block = b;
    const CooMatrix m = augment(a, g);
    CHECK(m.rows == a.rows * b);
    CHECK(m.cols == a.cols * b);
    REQUIRE(m.nnz() == a.nnz() * b * b);
    CHECK(is_canonical(m));
    std::size_t e = 0;
    for (const auto& [rc, v] : want) {
      CHECK(m.row[e] == rc.first);
      CHECK(m.col[e] == rc.second);
      CHECK(m.val[e] == v);
      ++e;
    }
  }
}

TEST_CASE("recipe: a submatrix keeps exactly the entries in its window", "[recipe]") {
  const CooMatrix a = square_matrix();
  const auto window = [&](index_t r0, index_t c0, index_t h, index_t w) {
    std::vector<index_t> r, c;
    std::vector<float> v;
    for (std::size_t e = 0; e < a.val.size(); ++e) {
      if (a.row[e] >= r0 && a.row[e] < r0 + h && a.col[e] >= c0 && a.col[e] < c0 + w) {
        r.push_back(a.row[e] - r0);
        c.push_back(a.col[e] - c0);
        v.push_back(a.val[e]);
      }
    }
    return from_triplets(h, w, r, c, v);
  };
  for (bool diagonal : {false, true}) {
    std::set<std::pair<index_t, index_t>> offsets;
    for (std::uint64_t seed = 1; seed <= 60; ++seed) {
      Augmentation g;
      g.sub_rows = 5;
      g.sub_cols = diagonal ? 5 : 4;
      g.sub_diagonal = diagonal;
      g.seed = seed;
      const CooMatrix m = augment(a, g);
      REQUIRE(m.rows == 5);
      REQUIRE(m.cols == g.sub_cols);
      // The values are distinct, so exactly one offset reproduces a non-empty window.
      REQUIRE(m.nnz() > 0);
      int found = 0;
      for (index_t r0 = 0; r0 + m.rows <= a.rows; ++r0)
        for (index_t c0 = 0; c0 + m.cols <= a.cols; ++c0)
          if (same(window(r0, c0, m.rows, m.cols), m)) ++found, offsets.insert({r0, c0});
      CHECK(found == 1);
    }
    CHECK(offsets.size() > 1);
    // On the diagonal the column offset is the row offset; otherwise it is drawn on its own, so
    // some row offset comes with several column offsets.
    std::map<index_t, std::set<index_t>> cols_of;
    for (auto [r0, c0] : offsets) cols_of[r0].insert(c0);
    const bool independent = std::any_of(cols_of.begin(), cols_of.end(),
                                         [](const auto& rc) { return rc.second.size() > 1; });
    CHECK(independent == !diagonal);
    if (diagonal)
      for (auto [r0, c0] : offsets) CHECK(r0 == c0);
  }
  Augmentation big;
  big.sub_rows = 13;
  big.sub_cols = 2;
  require_error([&] { augment(a, big); }, {"submatrix 13 x 2", "12 x 12"});
}

TEST_CASE("recipe: augmentations apply in the order submatrix, resize, block, permutation",
          "[recipe]") {
  const CooMatrix a = generate(small_spec("uniform"));
  Augmentation all;
  all.sub_rows = 300;
  all.sub_cols = 250;
  all.resize = 0.5;
  all.block = 2;
  all.permute = Permutation::Both;
  all.seed = 77;
  CooMatrix step = a;
  for (int k = 0; k < 4; ++k) {
    Augmentation one;
    one.seed = all.seed;
    if (k == 0) one.sub_rows = all.sub_rows, one.sub_cols = all.sub_cols;
    if (k == 1) one.resize = all.resize;
    if (k == 2) one.block = all.block;
    if (k == 3) one.permute = all.permute;
    step = augment(step, one);
  }
  CHECK(same(augment(a, all), step));
  CHECK(step.rows == 300);
  CHECK(step.cols == 250);
  CHECK(Augmentation{}.empty());
  CHECK_FALSE(all.empty());
}

TEST_CASE("recipe: default_mix covers every generator kind and respects max_nnz", "[recipe]") {
  // max_nnz caps estimated_nnz, which is exact or an upper bound for uniform, stencils, rmat and
  // smallworld, and an expectation for banded and blocks (each position kept with probability
  // fill) and powerlaw (random degrees): the made matrices may exceed the cap by that sampling
  // noise, for which the check allows 5%.
  const std::int64_t cap = 200000;
  const std::vector<Recipe> mix = default_mix(16, 7, {}, cap);
  REQUIRE(mix.size() == 16);
  std::set<std::string> kinds;
  for (const Recipe& r : mix) {
    INFO(r.label());
    REQUIRE(r.source == Recipe::Source::Generator);
    kinds.insert(r.generator.kind);
    const std::int64_t est = estimated_nnz(r);
    CHECK(est <= cap);
    const CooMatrix m = make_matrix(r);
    CHECK(m.nnz() <= cap * 105 / 100);
    CHECK(m.nnz() >= 1000);
    CHECK(m.rows >= 256);
    const std::string& kind = r.generator.kind;
    if (kind == "uniform" || kind == "stencil2d" || kind == "stencil3d") CHECK(m.nnz() == est);
    if (kind == "rmat" || kind == "smallworld") CHECK(m.nnz() <= est);
    CHECK(Recipe::from_json(r.to_json()) == r);
  }
  std::set<std::string> all;
  for (const GeneratorKind& k : generator_kinds()) all.insert(k.name);
  CHECK(kinds == all);

  // Deterministic, prefix-stable, seeded.
  const std::vector<Recipe> longer = default_mix(40, 7, {}, cap);
  CHECK(std::equal(mix.begin(), mix.end(), longer.begin()));
  CHECK(default_mix(16, 8, {}, cap) != mix);
  for (int start = 0; start + 8 <= 40; start += 8) {  // each cycle of 8 holds every kind
    std::set<std::string> cycle;
    for (int k = start; k < start + 8; ++k)
      cycle.insert(longer[static_cast<std::size_t>(k)].generator.kind);
    CHECK(cycle == all);
  }
  // The smallest caps still give valid recipes (the generators accept them) within the cap.
  for (std::int64_t small : {1000, 5000}) {
    for (const Recipe& r : default_mix(16, 11, {}, small)) {
      INFO(r.label());
      CHECK(make_matrix(r).nnz() <= small * 105 / 100);
    }
  }
  require_error([&] { default_mix(4, 1, {}, 10); }, {"max_nnz"});
}

TEST_CASE("recipe: default_mix parameters span the documented ranges", "[recipe]") {
  // Without making the matrices: estimated rows and nonzeros over a larger mix.
  const std::vector<Recipe> mix = default_mix(400, 3, {}, 2000000);
  std::int64_t lo = INT64_MAX, hi = 0;
  int permuted = 0;
  for (const Recipe& r : mix) {
    const std::int64_t n = estimated_nnz(r);
    lo = std::min(lo, n);
    hi = std::max(hi, n);
    CHECK(n <= 2000000);
    permuted += !r.augment.empty();
  }
  CHECK(lo < 30000);
  CHECK(hi > 1000000);
  CHECK(permuted > 0);
}

TEST_CASE("recipe: default_mix augments the real files it is given, within the cap", "[recipe]") {
  const std::string dir = waco::test::scratch_dir("recipe-mix-files");
  GeneratorSpec big = small_spec("uniform");
  big.rows = 3000;
  big.nnz = 60000;
  GeneratorSpec rect = small_spec("banded");
  rect.rows = 2000;
  rect.cols = 1500;
  const std::vector<std::string> files = {dir + "/big.mtx.gz", dir + "/rect.mtx"};
  write_matrix_market(files[0], generate(big));
  write_matrix_market(files[1], generate(rect));
  const std::int64_t cap = 20000;
  const std::vector<Recipe> mix = default_mix(24, 5, files, cap);
  std::map<std::string, int> uses;
  std::set<std::string> kinds;
  for (const Recipe& r : mix) {
    INFO(r.label());
    if (r.source == Recipe::Source::Generator) {
      kinds.insert(r.generator.kind);
      continue;
    }
    REQUIRE(r.source == Recipe::Source::File);
    ++uses[r.path];
    CHECK_FALSE(r.augment.empty());
    const CooMatrix m = make_matrix(r);
    CHECK(m.nnz() <= cap);  // the bound for files is counted on the file: no tolerance
    CHECK(m.nnz() > 0);
    CHECK(Recipe::from_json(r.to_json()) == r);
  }
  CHECK(kinds.size() == 8);
  CHECK(uses[files[0]] == 4);  // 8 file slots in 24 recipes, the files used in turn
  CHECK(uses[files[1]] == 4);
  CHECK(default_mix(24, 5, files, cap) == mix);
  // A cycle of 12 holds 4 file slots, so the absent file is opened.
  require_error([&] { default_mix(12, 1, {dir + "/absent.mtx"}, cap); }, {"absent.mtx"});
}

TEST_CASE("recipe: default_tensor_mix makes 3-D tensors within the cap", "[recipe]") {
  const std::int64_t cap = 30000;
  const std::vector<Recipe> mix = default_tensor_mix(12, 4, cap);
  REQUIRE(mix.size() == 12);
  for (const Recipe& r : mix) {
    INFO(r.label());
    REQUIRE(r.source == Recipe::Source::Tensor);
    REQUIRE(r.dims.size() == 3);
    const double cells = static_cast<double>(r.dims[0]) * r.dims[1] * r.dims[2];
    CHECK(r.nnz <= cap);
    CHECK(r.nnz >= 1000);
    CHECK(static_cast<double>(r.nnz) <= cells / 100.0);
    CHECK(Recipe::from_json(r.to_json()) == r);
  }
  const CooTensor t = make_tensor(mix[0]), u = make_tensor(Recipe::from_json(mix[0].to_json()));
  CHECK(t.nnz() == mix[0].nnz);
  CHECK(fingerprint(t) == fingerprint(u));
  CHECK(default_tensor_mix(12, 4, cap) == mix);
  require_error([&] { make_matrix(mix[0]); }, {"tensor", "make_tensor"});
  require_error([&] { make_tensor(default_mix(1, 1, {}, cap)[0]); }, {"make_matrix"});
}

TEST_CASE("recipe: shard_indices over n shards covers every index exactly once", "[recipe]") {
  for (std::size_t count : {0u, 1u, 7u, 100u}) {
    for (int n : {1, 2, 3, 8}) {
      std::vector<int> seen(count, 0);
      for (int i = 0; i < n; ++i) {
        const std::vector<std::size_t> s = shard_indices(count, i, n);
        CHECK(std::is_sorted(s.begin(), s.end()));
        for (std::size_t k : s) {
          REQUIRE(k < count);
          CHECK(static_cast<int>(k % static_cast<std::size_t>(n)) == i);
          ++seen[k];
        }
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    }
  }
  require_error([] { shard_indices(10, 3, 3); }, {"shard 3/3"});
  require_error([] { shard_indices(10, 0, 0); }, {"shard 0/0"});
}

TEST_CASE("recipe: bad JSON, an unknown kind or a missing field is refused naming the field",
          "[recipe]") {
  Recipe rmat = generator_recipe(small_spec("rmat"));
  rmat.augment.seed = 1;
  rmat.augment.resize = 2.0;
  const json good = rmat.to_json();
  REQUIRE(Recipe::from_json(good) == rmat);
  const auto refused = [](const json& j, const std::vector<std::string>& needles) {
    INFO("recipe " << j.dump());
    require_error([&] { Recipe::from_json(j); }, needles);
  };
  refused(json::array({1, 2}), {"not a JSON object"});
  refused(with(good, {"recipe_version"}, nullptr), {"missing field 'recipe_version'"});
  refused(with(good, {"recipe_version"}, 2), {"'recipe_version'", "version 1"});
  refused(with(good, {"source"}, "cloud"), {"'source'", "cloud"});
  refused(with(good, {"generator"}, nullptr), {"missing field 'generator'"});
  refused(with(good, {"generator", "kind"}, "fractal"), {"'generator.kind'", "fractal", "rmat"});
  refused(with(good, {"generator", "scale"}, nullptr), {"missing field 'generator.scale'"});
  refused(with(good, {"generator", "scale"}, "big"), {"'generator.scale'", "integer"});
  refused(with(good, {"generator", "seed"}, -1), {"'generator.seed'"});
  refused(with(good, {"generator", "a"}, "x"), {"'generator.a'", "number"});
  refused(with(good, {"generator", "bandwidth"}, 3),
          {"unknown field 'generator.bandwidth'", "rmat reads"});
  refused(with(good, {"colour"}, "red"), {"unknown field 'colour'"});
  refused(with(good, {"augment", "seed"}, nullptr), {"missing field 'augment.seed'"});
  refused(with(good, {"augment", "resize"}, -2.0), {"'augment.resize'"});
  refused(with(good, {"augment", "block"}, 0), {"'augment.block'"});
  refused(with(good, {"augment", "permute"}, "sideways"), {"'augment.permute'", "sideways"});
  refused(with(good, {"augment", "submatrix"}, json{{"rows", 5}}),
          {"missing field 'augment.submatrix.cols'"});
  refused(json{{"recipe_version", 1}, {"source", "file"}}, {"missing field 'path'"});
  refused(
      json{{"recipe_version", 1}, {"source", "tensor"}, {"dims", {10, 0}}, {"nnz", 5}, {"seed", 1}},
      {"'dims'"});
  refused(json{{"recipe_version", 1}, {"source", "tensor"}, {"dims", {10, 10}}, {"seed", 1}},
          {"missing field 'nnz'"});
  // A recipe with a parameter out of the generator's range parses, and fails when made, naming it.
  const Recipe odd = Recipe::from_json(with(good, {"generator", "scale"}, 99));
  require_error([&] { make_matrix(odd); }, {"scale"});
}

TEST_CASE("recipe: recipe files round-trip and read_recipes reports file:line", "[recipe]") {
  const std::string dir = waco::test::scratch_dir("recipe-files");
  std::vector<Recipe> recipes = default_mix(10, 2, {}, 50000);
  const std::vector<Recipe> tensors = default_tensor_mix(3, 2, 50000);
  recipes.insert(recipes.end(), tensors.begin(), tensors.end());
  const std::string path = dir + "/mix.recipes";
  write_recipes(path, recipes);
  CHECK(read_recipes(path) == recipes);

  const std::string line = generator_recipe(small_spec("banded")).to_json().dump();
  const std::string bad_field =
      write_file(dir, "bad-field.recipes",
                 "# a comment\n\n" + line + "\n   # indented comment\n" +
                     with(json::parse(line), {"generator", "fill"}, nullptr).dump() + "\n");
  require_error([&] { read_recipes(bad_field); },
                {bad_field + ":5:", "missing field 'generator.fill'"});
  const std::string bad_json =
      write_file(dir, "bad-json.recipes", line + "\n\n{\"recipe_version\": 1,\n");
  require_error([&] { read_recipes(bad_json); }, {bad_json + ":3:", "JSON"});
  require_error([&] { read_recipes(dir + "/absent.recipes"); }, {"absent.recipes"});
  CHECK(read_recipes(write_file(dir, "empty.recipes", "# nothing\n")).empty());
}

TEST_CASE("recipe: labels are short and name the source, parameters and seed", "[recipe]") {
  GeneratorSpec g;
  g.kind = "rmat";
  g.scale = 14;
  g.edge_factor = 8;
  g.seed = 3;
  Recipe r = generator_recipe(g);
  CHECK(r.label() == "rmat scale=14 ef=8 seed=3");
  r.augment.permute = Permutation::Symmetric;
  r.augment.seed = 5;
  CHECK(r.label() == "rmat scale=14 ef=8 seed=3 + permute=symmetric seed=5");
  Recipe f;
  f.source = Recipe::Source::File;
  f.path = "../shared/data/matrices/bcsstk13.mtx.gz";
  f.augment.sub_rows = f.augment.sub_cols = 1000;
  f.augment.sub_diagonal = true;
  f.augment.seed = 5;
  CHECK(f.label() == "bcsstk13 sub=1000x1000diag seed=5");
  Recipe t;
  t.source = Recipe::Source::Tensor;
  t.dims = {300, 200, 100};
  t.nnz = 50000;
  t.seed = 7;
  CHECK(t.label() == "tensor 300x200x100 nnz=50000 seed=7");
}

TEST_CASE("recipe: estimated_nnz of any parameters a recipe file holds is never negative nor slow",
          "[recipe]") {
  // A recipe file's generator parameters are any int64 until the generator checks them; the
  // estimate (used to cap and balance collections before generating) must still be a count.
  // fuzz_recipe: blocks -155 estimated -13,000 nonzeros.
  Recipe r;
  r.source = Recipe::Source::Generator;
  r.generator.kind = "blocks";
  r.generator.rows = 12418;
  r.generator.block = 32;
  r.generator.blocks = -155;
  r.generator.fill = 0.65;
  CHECK(estimated_nnz(r) == 0);
  r.generator.blocks = 5;
  r.generator.block = std::int64_t{1} << 40;  // block * block overflowed int64 (undefined)
  CHECK(estimated_nnz(r) == INT64_MAX);

  // The band's positions in closed form equal the count of cells with |i - j| <= bandwidth.
  r.generator.kind = "banded";
  r.generator.fill = 1.0;
  for (const std::int64_t rows : {1, 3, 7, 10})
    for (const std::int64_t cols : {0, 1, 4, 12})
      for (const std::int64_t bw : {0, 1, 2, 5, 20}) {
        r.generator.rows = rows;
        r.generator.cols = cols;
        r.generator.bandwidth = bw;
        const std::int64_t c = cols == 0 ? rows : cols;
        std::int64_t cells = 0;
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < c; ++j) cells += std::abs(i - j) <= bw;
        INFO(rows << " x " << c << ", bandwidth " << bw);
        CHECK(estimated_nnz(r) == cells);
      }
  // A bandwidth of 2^62 on 2^62 rows: the loop over the diagonals would never end.
  r.generator.rows = std::int64_t{1} << 62;
  r.generator.cols = 0;
  r.generator.bandwidth = std::int64_t{1} << 62;
  CHECK(estimated_nnz(r) == INT64_MAX);
  r.generator.bandwidth = -3;
  CHECK(estimated_nnz(r) == 0);

  r.generator.kind = "stencil3d";  // nx * ny * nz overflowed int64 (undefined)
  r.generator.nx = r.generator.ny = r.generator.nz = std::int64_t{1} << 40;
  CHECK(estimated_nnz(r) == INT64_MAX);
}
