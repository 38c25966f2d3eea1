// Unit "matrix_features": the torch-free feature vectors of learned/matrix_features.hpp have the
// announced lengths and names, are finite and bounded on the edge cases, swap their row and
// column entries under transposition, tell a banded matrix from a random one, do not depend on
// the thread count, and name their sets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "support/edge_cases.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/learned/matrix_features.hpp"

using namespace waco::kernels;
using namespace waco::learned;

namespace {

const std::vector<FeatureSet> kSets = {FeatureSet::Stats, FeatureSet::Signature};

/// The edge cases plus generated matrices (power law, banded, R-MAT) and a few tiny shapes.
std::vector<waco::test::NamedMatrix> matrices() {
  std::vector<waco::test::NamedMatrix> m = waco::test::edge_case_matrices();
  m.push_back({"empty 1x1", waco::test::from_triplets(1, 1, {}, {}, {})});
  m.push_back({"empty 0x0", waco::test::from_triplets(0, 0, {}, {}, {})});
  m.push_back({"one entry 9x1", waco::test::from_triplets(9, 1, {4}, {0}, {1.0f})});
  GeneratorSpec g;
  g.kind = "powerlaw";
  g.rows = 3000;
  m.push_back({"powerlaw 3000", generate(g)});
  g = GeneratorSpec{};
  g.kind = "banded";
  g.rows = 1000;
  g.cols = 700;
  g.bandwidth = 5;
  m.push_back({"banded 1000x700", generate(g)});
  g = GeneratorSpec{};
  g.kind = "rmat";
  g.scale = 10;
  m.push_back({"rmat 2^10", generate(g)});
  return m;
}

std::map<std::string, float> by_name(FeatureSet set, int dims, const std::vector<float>& v) {
  const std::vector<std::string> names = feature_names(set, dims);
  REQUIRE(names.size() == v.size());
  std::map<std::string, float> m;
  for (std::size_t i = 0; i < v.size(); ++i) m[names[i]] = v[i];
  return m;
}

/// The name of the entry that a feature becomes under transposition.
std::string transposed_name(const std::string& n) {
  const auto swap_prefix = [&](const std::string& a, const std::string& b) -> std::string {
    if (n.rfind(a, 0) == 0) return b + n.substr(a.size());
    if (n.rfind(b, 0) == 0) return a + n.substr(b.size());
    return {};
  };
  if (n == "log2_rows") return "log2_cols";
  if (n == "log2_cols") return "log2_rows";
  for (const auto& [a, b] : {std::pair<std::string, std::string>{"row_", "col_"},
                             std::pair<std::string, std::string>{"nacs_", "nars_"}})
    if (std::string t = swap_prefix(a, b); !t.empty()) return t;
  const std::string bf = "block_fill_";
  if (n.rfind(bf, 0) == 0) {
    const std::string shape = n.substr(bf.size());
    const std::size_t x = shape.find('x');
    return bf + shape.substr(x + 1) + "x" + shape.substr(0, x);
  }
  return n;
}

void check_values(const std::string& what, FeatureSet set, int dims, const std::vector<float>& v) {
  INFO(what << " (" << feature_set_name(set) << ")");
  REQUIRE(static_cast<int>(v.size()) == feature_count(set, dims));
  const std::vector<std::string> names = feature_names(set, dims);
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO(names[i] << " = " << v[i]);
    CHECK(std::isfinite(v[i]));
    CHECK(std::fabs(v[i]) <= 40.0f);  // counts as log2(1 + x) of 32-bit sizes at most
    const std::string& n = names[i];
    bool share = n == "density";
    for (const char* part : {"share", "gini", "fill", "next_log2", "nacs", "nars", "dist_"})
      share = share || n.find(part) != std::string::npos;
    if (share) {
      CHECK(v[i] >= 0.0f);
      CHECK(v[i] <= 1.0f);
    }
    if (n.find("skew") != std::string::npos) CHECK(std::fabs(v[i]) <= 1.0f);
  }
}

}  // namespace

TEST_CASE("feature counts and names are fixed per set and dims", "[matrix_features]") {
  CHECK(feature_count(FeatureSet::Stats, 2) == 32);
  CHECK(feature_count(FeatureSet::Signature, 2) == 132);
  CHECK(feature_count(FeatureSet::Stats, 3) == 26);
  CHECK(feature_count(FeatureSet::Signature, 3) == 228);
  for (FeatureSet set : kSets)
    for (int dims : {2, 3}) {
      const std::vector<std::string> names = feature_names(set, dims);
      CHECK(static_cast<int>(names.size()) == feature_count(set, dims));
      CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
    }
  const std::vector<std::string> sig = feature_names(FeatureSet::Signature, 2);
  const std::vector<std::string> stats = feature_names(FeatureSet::Stats, 2);
  CHECK(std::equal(stats.begin(), stats.end(), sig.begin()));  // Signature extends Stats
  CHECK(sig[0] == "log2_rows");
  CHECK(std::find(sig.begin(), sig.end(), "nacs_log2_T4") != sig.end());
  CHECK(std::find(sig.begin(), sig.end(), "block_fill_8x32") != sig.end());
  const std::vector<std::string> tsig = feature_names(FeatureSet::Signature, 3);
  CHECK(std::find(tsig.begin(), tsig.end(), "il_nars_log2_T15") != tsig.end());
  CHECK_THROWS_AS(feature_count(FeatureSet::Stats, 4), Error);
  CHECK_THROWS_AS(feature_names(FeatureSet::Signature, 1), Error);
}

TEST_CASE("matrix features are finite and bounded on edge cases", "[matrix_features]") {
  for (const auto& [name, a] : matrices())
    for (FeatureSet set : kSets) check_values(name, set, 2, matrix_features(set, a, 1));
}

TEST_CASE("tensor features are finite and bounded on edge cases", "[matrix_features]") {
  std::vector<waco::test::NamedTensor> ts = waco::test::edge_case_tensors();
  ts.push_back({"uniform 50x40x30", generate_tensor({50, 40, 30}, 3000, 7)});
  for (const auto& [name, t] : ts)
    for (FeatureSet set : kSets) {
      const std::vector<float> v = tensor_features(set, t, 1);
      check_values(name, set, 3, v);
      if (set == FeatureSet::Signature && t.nnz() > 0) {
        const auto m = by_name(set, 3, v);
        CHECK(m.at("ik_proj_nnz_share") > 0.0f);
        CHECK(m.at("il_proj_nnz_share") > 0.0f);
        CHECK(m.at("ik_nacs_log2_T0") == 1.0f);
      }
    }
  CooTensor t4 = generate_tensor({3, 4, 5, 6}, 10, 1);
  CHECK_THROWS_AS(tensor_features(FeatureSet::Stats, t4), Error);
}

TEST_CASE("tensor fiber and slice statistics of a known tensor", "[matrix_features]") {
  // 2 x 3 x 4: slice 0 holds fibers (0,0) of length 3 and (0,2) of length 1; slice 1 is empty.
  CooTensor t;
  t.dims = {2, 3, 4};
  t.idx = {{0, 0, 0, 0}, {0, 0, 0, 2}, {0, 1, 3, 1}};
  t.val = {1, 1, 1, 1};
  const auto m = by_name(FeatureSet::Signature, 3, tensor_features(FeatureSet::Signature, t));
  CHECK(m.at("slice_empty_share") == 0.5f);
  CHECK(m.at("fiber_empty_share") == Approx(4.0 / 6.0));
  CHECK(m.at("fiber_len_max_log2") == 2.0f);
  CHECK(m.at("density") == Approx(4.0 / 24.0));
  CHECK(m.at("ik_proj_nnz_share") == 0.5f);  // (0,0), (0,2)
  CHECK(m.at("il_proj_nnz_share") == 0.75f);  // (0,0), (0,1), (0,3); (0,1) again
}

TEST_CASE("known values of small matrices", "[matrix_features]") {
  const auto one = by_name(FeatureSet::Signature, 2,
                           matrix_features(FeatureSet::Signature,
                                           waco::test::from_triplets(1, 1, {0}, {0}, {2.0f})));
  CHECK(one.at("log2_rows") == 1.0f);
  CHECK(one.at("density") == 1.0f);
  CHECK(one.at("diag_share") == 1.0f);
  CHECK(one.at("pattern_symmetry") == 1.0f);
  CHECK(one.at("nacs_log2_T0") == 1.0f);
  CHECK(one.at("block_fill_1x1") == 1.0f);
  CHECK(one.at("row_gini") == 0.0f);

  std::vector<index_t> r, c;
  std::vector<float> v;
  for (index_t i = 0; i < 16; ++i)
    for (index_t j = 0; j < 16; ++j) {
      r.push_back(i);
      c.push_back(j);
      v.push_back(1.0f);
    }
  const auto dense = by_name(FeatureSet::Signature, 2,
                             matrix_features(FeatureSet::Signature,
                                             waco::test::from_triplets(16, 16, r, c, v)));
  CHECK(dense.at("block8_dense_share") == 1.0f);
  CHECK(dense.at("block8_fill") == 1.0f);
  CHECK(dense.at("pattern_symmetry") == 1.0f);
  CHECK(dense.at("row_next_log2_0") == Approx(15.0 / 16.0));
  CHECK(dense.at("nacs_log2_T4") == Approx(1.0 / 16.0));
  CHECK(dense.at("row_len_std_log2") == 0.0f);

  // One nonzero in each of 100 rows but row 0 holding 100: top 1% = row 0.
  r.clear();
  c.clear();
  v.clear();
  for (index_t j = 0; j < 100; ++j) {
    r.push_back(0);
    c.push_back(j);
    v.push_back(1.0f);
  }
  for (index_t i = 1; i < 100; ++i) {
    r.push_back(i);
    c.push_back(i);
    v.push_back(1.0f);
  }
  const auto skewed = by_name(FeatureSet::Stats, 2,
                              matrix_features(FeatureSet::Stats,
                                              waco::test::from_triplets(100, 100, r, c, v)));
  CHECK(skewed.at("row_top1pct_share") == Approx(100.0 / 199.0));
  CHECK(skewed.at("row_empty_share") == 0.0f);
  CHECK(skewed.at("row_gini") > 0.45f);
  CHECK(skewed.at("row_len_skew_div10") > 0.9f);
  CHECK(skewed.at("pattern_symmetry") == Approx(100.0 / 199.0));  // the diagonal
}

TEST_CASE("the 8x8 block features equal a count of every block", "[matrix_features]") {
  // Every matrix of the set, and sizes not divisible by 8 (edge blocks by their positions).
  std::vector<waco::test::NamedMatrix> set = matrices();
  GeneratorSpec g;
  g.kind = "blocks";
  g.rows = 1001;
  g.block = 8;
  g.blocks = 60;
  g.fill = 0.6;
  set.push_back({"blocks 1001", generate(g)});
  for (const auto& [name, a] : set) {
    INFO(name);
    std::map<std::pair<index_t, index_t>, std::int64_t> blocks;
    for (std::size_t e = 0; e < a.row.size(); ++e) ++blocks[{a.row[e] / 8, a.col[e] / 8}];
    std::int64_t dense_nnz = 0;
    for (const auto& [b, n] : blocks) {
      const std::int64_t h = std::min<std::int64_t>(8, std::int64_t{a.rows} - 8 * b.first);
      const std::int64_t w = std::min<std::int64_t>(8, std::int64_t{a.cols} - 8 * b.second);
      if (2 * n >= h * w) dense_nnz += n;
    }
    const double nnz = static_cast<double>(a.row.size());
    const auto f = by_name(FeatureSet::Stats, 2, matrix_features(FeatureSet::Stats, a));
    CHECK(f.at("block8_fill") ==
          static_cast<float>(blocks.empty() ? 0.0 : nnz / (64.0 * static_cast<double>(blocks.size()))));
    CHECK(f.at("block8_dense_share") == static_cast<float>(nnz > 0 ? dense_nnz / nnz : 0.0));
  }
}

TEST_CASE("transposition swaps the row and column features", "[matrix_features]") {
  for (const auto& [name, a] : matrices())
    for (FeatureSet set : kSets) {
      INFO(name << " (" << feature_set_name(set) << ")");
      const auto x = by_name(set, 2, matrix_features(set, a, 1));
      const auto y = by_name(set, 2, matrix_features(set, transpose(a), 1));
      for (const auto& [n, value] : x) {
        INFO(n);
        CHECK(y.at(transposed_name(n)) == value);
      }
    }
}

TEST_CASE("banded and random matrices of one size and nnz differ", "[matrix_features]") {
  GeneratorSpec g;
  g.kind = "banded";
  g.rows = 2048;
  g.bandwidth = 8;
  const CooMatrix banded = generate(g);
  g = GeneratorSpec{};
  g.kind = "uniform";
  g.rows = 2048;
  g.nnz = banded.nnz();
  const CooMatrix random = generate(g);
  REQUIRE(random.nnz() == banded.nnz());
  const auto b = by_name(FeatureSet::Signature, 2, matrix_features(FeatureSet::Signature, banded));
  const auto u = by_name(FeatureSet::Signature, 2, matrix_features(FeatureSet::Signature, random));
  CHECK(b.at("log2_nnz") == u.at("log2_nnz"));
  CHECK(b.at("row_next_log2_0") > 0.8f);
  CHECK(u.at("row_next_log2_0") < 0.05f);
  CHECK(b.at("nacs_log2_T4") < 0.2f);
  CHECK(u.at("nacs_log2_T4") > 0.9f);
  CHECK(b.at("block_fill_8x8") > 0.4f);
  CHECK(u.at("block_fill_8x8") < 0.05f);
  CHECK(b.at("band16_share") == 1.0f);
  CHECK(u.at("band16_share") < 0.05f);
  double l1 = 0.0;
  for (const auto& [n, value] : b) l1 += std::fabs(value - u.at(n));
  CHECK(l1 > 10.0);
}

TEST_CASE("features do not depend on the thread count", "[matrix_features]") {
  GeneratorSpec g;
  g.kind = "uniform";
  g.rows = 4096;
  g.nnz = 300000;  // enough nonzeros per line and in all for two signature chunks
  const CooMatrix a = generate(g);
  g.kind = "rmat";
  g.scale = 14;
  g.edge_factor = 16;
  const CooMatrix r = generate(g);
  for (FeatureSet set : kSets) {
    CHECK(matrix_features(set, a, 1) == matrix_features(set, a, 2));
    CHECK(matrix_features(set, r, 1) == matrix_features(set, r, 2));
  }
  const CooTensor t = generate_tensor({300, 200, 100}, 400000, 3);
  CHECK(tensor_features(FeatureSet::Signature, t, 1) ==
        tensor_features(FeatureSet::Signature, t, 2));
}

TEST_CASE("features read a given signature as the one they compute", "[matrix_features]") {
  // The schedule space's signature (heuristics::MatrixFacts) is handed to the model's features
  // (tuning's model search): the values must be the same bits.
  std::vector<CooMatrix> ms;
  for (const auto& nm : waco::test::edge_case_matrices()) ms.push_back(nm.matrix);
  GeneratorSpec g;
  g.kind = "rmat", g.scale = 12, g.edge_factor = 8;
  ms.push_back(generate(g));
  for (const CooMatrix& a : ms) {
    const waco::signature::LocalitySignature sig = waco::signature::compute_signature(a, 1);
    for (FeatureSet set : kSets) CHECK(matrix_features(set, a, 0, &sig) == matrix_features(set, a, 0));
  }
  GeneratorSpec other = g;
  other.seed = 2;
  const waco::signature::LocalitySignature wrong =
      waco::signature::compute_signature(generate(other), 1);
  if (wrong.nnz != ms.back().nnz())
    CHECK_THROWS(matrix_features(FeatureSet::Signature, ms.back(), 0, &wrong));
}

TEST_CASE("feature set names round trip", "[matrix_features]") {
  for (FeatureSet set : kSets) CHECK(parse_feature_set(feature_set_name(set)) == set);
  CHECK(feature_set_name(FeatureSet::Stats) == "stats");
  CHECK(feature_set_name(FeatureSet::Signature) == "signature");
  try {
    parse_feature_set("waconet");
    FAIL("no error for an unknown feature set");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("waconet") != std::string::npos);
    CHECK(what.find("stats") != std::string::npos);
    CHECK(what.find("signature") != std::string::npos);
  }
}

TEST_CASE("a non-canonical matrix is refused", "[matrix_features]") {
  CooMatrix a;
  a.rows = a.cols = 3;
  a.row = {1, 0};
  a.col = {0, 0};
  a.val = {1.0f, 1.0f};
  CHECK_THROWS_AS(matrix_features(FeatureSet::Stats, a), InternalError);
}
