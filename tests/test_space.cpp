// Tests of the SuperSchedule space (heuristics/space.hpp, prefix_counts.hpp): prefix counts against
// brute force and the signature's block statistics; the count against enumeration and a closed
// form; index decoding; uniform, reproducible sampling; the legality check against build_storage.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "support/edge_cases.hpp"
#include "waco/codegen/storage.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/signature/signature.hpp"

using namespace waco;
using namespace waco::heuristics;
using kernels::KernelKind;

namespace {

std::int64_t brute_distinct(const std::vector<const std::vector<kernels::index_t>*>& c,
                            const std::vector<int>& shift) {
  std::set<std::vector<std::int64_t>> s;
  for (std::size_t e = 0; e < c[0]->size(); ++e) {
    std::vector<std::int64_t> t;
    for (std::size_t m = 0; m < c.size(); ++m) t.push_back((*c[m])[e] >> shift[m]);
    s.insert(t);
  }
  return static_cast<std::int64_t>(s.size());
}

kernels::CooMatrix small_matrix() {
  // 6 x 7, an empty row, a denser row, a column block.
  return test::from_triplets(6, 7, {0, 0, 1, 3, 3, 3, 3, 4, 5}, {0, 5, 1, 0, 2, 3, 6, 2, 6},
                             {1, 2, 3, 4, 5, 6, 7, 8, 9});
}

/// Keeps one split vector only (to enumerate its nests).
class FixSplit final : public Constraint {
 public:
  explicit FixSplit(std::vector<int> s) : s_(std::move(s)) {}
  Stage stage() const override { return Stage::Split; }
  const char* check_split(const Space&, const std::vector<int>& split) const override {
    return split == s_ ? nullptr : "other-split";
  }

 private:
  std::vector<int> s_;
};

/// Keeps chunk 1 only.
class FixChunk final : public Constraint {
 public:
  Stage stage() const override { return Stage::Execution; }
  const char* check_execution(const Space&, const std::vector<int>&, const Loop&, int,
                              int chunk) const override {
    return chunk == 1 ? nullptr : "other-chunk";
  }
};

std::uint64_t factorial(int n) { return n <= 1 ? 1 : static_cast<std::uint64_t>(n) * factorial(n - 1); }

}  // namespace

TEST_CASE("space: prefix counts equal brute force on every shift") {
  for (const auto& nm : test::edge_case_matrices()) {
    const auto& a = nm.matrix;
    const std::vector<const std::vector<kernels::index_t>*> c{&a.row, &a.col};
    const PrefixCounts pc = PrefixCounts::compute(c, {a.rows, a.cols});
    for (int x = 0; x <= pc.bits(0) + 1; ++x)
      for (int y = 0; y <= pc.bits(1) + 1; ++y) {
        INFO(nm.name << " shifts " << x << "," << y);
        REQUIRE(pc.distinct({x, y}) ==
                brute_distinct(c, {std::min(x, 40), std::min(y, 40)}));
      }
  }
  for (const auto& nt : test::edge_case_tensors()) {
    const auto& t = nt.tensor;
    const std::vector<const std::vector<kernels::index_t>*> c{&t.idx[0], &t.idx[1], &t.idx[2]};
    const PrefixCounts pc = PrefixCounts::compute(c, {t.dims[0], t.dims[1], t.dims[2]});
    for (int x = 0; x <= pc.bits(0); ++x)
      for (int y = 0; y <= pc.bits(1); ++y)
        for (int z = 0; z <= pc.bits(2); ++z) {
          INFO(nt.name << " shifts " << x << "," << y << "," << z);
          REQUIRE(pc.distinct({x, y, z}) == brute_distinct(c, {x, y, z}));
        }
  }
}

TEST_CASE("space: prefix counts agree with the signature's block statistics") {
  kernels::GeneratorSpec g;
  g.kind = "uniform";
  g.rows = 300;
  g.cols = 200;
  g.nnz = 1800;
  g.seed = 7;
  const kernels::CooMatrix a = kernels::generate(g);
  const PrefixCounts pc = PrefixCounts::compute({&a.row, &a.col}, {a.rows, a.cols});
  const signature::LocalitySignature sig = signature::compute_signature(a);
  for (int x = 0; x <= 5; ++x)
    for (int y = 0; y <= 5; ++y)
      REQUIRE(pc.distinct({x, y}) == sig.block(1 << x, 1 << y).nonempty_blocks);
}

TEST_CASE("space: count equals the number enumerated, and at(i) is the i-th") {
  const kernels::CooMatrix a = small_matrix();
  for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM}) {
    SpaceOptions so;
    so.cores = 2;
    Space s = Space::for_operand(k, &a, nullptr, 2, so);
    // Make it small enough to enumerate: fix chunk and threads by passes.
    run_pipeline(s, parse_pipeline("parallelize-one,chunk-rows"));
    const std::uint64_t n = s.count();
    INFO(kernels::kernel_name(k) << " count " << n);
    REQUIRE(n > 1000);
    std::uint64_t seen = 0;
    std::set<std::string> texts;
    s.for_each([&](const codegen::SuperSchedule& x) {
      REQUIRE(codegen::validate(x).empty());
      REQUIRE(codegen::canonicalize(x) == x);
      if (seen % 97 == 0) REQUIRE(s.at(seen) == x);
      texts.insert(codegen::to_text(x));
      ++seen;
      return true;
    });
    REQUIRE(seen == n);
    REQUIRE(texts.size() == n);  // all distinct
    REQUIRE_THROWS_AS(s.at(n), kernels::Error);
  }
}

TEST_CASE("space: the full count matches the closed form") {
  // Structural space: per split vector, (#loops)! / 2^(#split) orders x 2^levels formats x
  // #loops parallel loops x cores threads x 9 chunks.
  for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM, KernelKind::MTTKRP}) {
    const codegen::KernelSpec& spec = codegen::kernel_spec(k);
    std::vector<std::int64_t> ext;
    for (std::size_t v = 0; v < spec.vars.size(); ++v) ext.push_back(v == 0 ? 1000 : 37 + 50 * v);
    SpaceOptions so;
    so.cores = 3;
    const Space s = Space::structural(k, ext, so);
    std::uint64_t expect = 0;
    const std::size_t nv = spec.vars.size();
    std::vector<std::size_t> idx(nv, 0);
    for (;;) {
      int loops = 0, split = 0, levels = 0;
      for (std::size_t v = 0; v < nv; ++v) {
        const bool sp = s.split_choices(v)[idx[v]] > 1;
        loops += sp ? 2 : 1;
        split += sp;
        if (spec.is_sparse_var(spec.vars[v])) levels += sp ? 2 : 1;
      }
      expect += factorial(loops) / (std::uint64_t{1} << split) * (std::uint64_t{1} << levels) *
                static_cast<std::uint64_t>(loops) * 3 * 9;
      std::size_t v = nv;
      bool done = true;
      while (v > 0) {
        --v;
        if (++idx[v] < s.split_choices(v).size()) {
          done = false;
          break;
        }
        idx[v] = 0;
      }
      if (done) break;
    }
    INFO(kernels::kernel_name(k));
    REQUIRE(s.count() == expect);
  }
  // Split choices: powers of two up to the extent rounded up, at most 2^16.
  const Space s = Space::structural(KernelKind::SpMV, {1000, 1 << 20});
  REQUIRE(s.split_choices(0).back() == 1024);
  REQUIRE(s.split_choices(1).back() == 65536);
}

TEST_CASE("space: sampling is reproducible and uniform") {
  const kernels::CooMatrix a = small_matrix();
  SpaceOptions so;
  so.cores = 2;
  Space s = Space::for_operand(KernelKind::SpMV, &a, nullptr, 1, so);
  run_pipeline(s, parse_pipeline("legality,parallelize-one,parallelize-outer,chunk-rows,"
                                 "no-useless-partition,block-fill"));
  const std::uint64_t n = s.count();
  REQUIRE(n >= 20);
  REQUIRE(n <= 400);
  // Reproducible.
  const auto a1 = s.sample(10, 42), a2 = s.sample(10, 42), b = s.sample(10, 43);
  REQUIRE(a1 == a2);
  REQUIRE(a1 != b);
  std::set<std::string> distinct;
  for (const auto& x : a1) distinct.insert(codegen::to_text(x));
  REQUIRE(distinct.size() == 10);
  // n >= count gives everything once.
  REQUIRE(s.sample(n + 5, 1).size() == n);
  // Uniform: single draws over many seeds, chi-square against the uniform distribution.
  std::map<std::string, std::uint64_t> hist;
  const std::uint64_t draws = 100 * n;
  for (std::uint64_t seed = 0; seed < draws; ++seed) ++hist[codegen::to_text(s.sample(1, seed)[0])];
  REQUIRE(hist.size() == n);
  const double expect = static_cast<double>(draws) / static_cast<double>(n);
  double chi2 = 0;
  for (const auto& [t, c] : hist) chi2 += (static_cast<double>(c) - expect) * (static_cast<double>(c) - expect) / expect;
  const double df = static_cast<double>(n - 1);
  INFO("chi2 " << chi2 << " df " << df);
  REQUIRE(chi2 < df + 6 * std::sqrt(2 * df));  // ~6 sigma
  REQUIRE(chi2 > df - 6 * std::sqrt(2 * df));  // not suspiciously regular
}

TEST_CASE("space: the legality check agrees with build_storage's refusals") {
  auto check = [](KernelKind k, const kernels::CooMatrix* a, const kernels::CooTensor* t,
                  double max_padding, const std::string& name) {
    SpaceOptions so;
    so.cores = 1;
    so.max_padding = max_padding;
    const int dense = 3;
    const Space s = Space::for_operand(k, a, t, dense, so);
    const kernels::DenseOperands ops = kernels::make_dense_operands(k, a, t, dense, 1);
    const kernels::Problem p = kernels::make_problem(k, a, t, ops);
    codegen::StorageOptions st;
    st.max_padding = max_padding;
    const codegen::KernelSpec& spec = s.spec();
    std::size_t built = 0, refused = 0;
    // Every split vector of the sparse variables, every level order and format.
    std::vector<std::size_t> idx(spec.vars.size(), 0);
    for (;;) {
      std::vector<int> split(spec.vars.size(), 1);
      bool dense_split = false;
      for (std::size_t v = 0; v < spec.vars.size(); ++v) {
        split[v] = s.split_choices(v)[idx[v]];
        dense_split = dense_split || (!spec.is_sparse_var(spec.vars[v]) && split[v] > 1);
      }
      if (!dense_split) {
        Space one = s;  // enumerate this split vector's nests via the space itself
        one.add_constraint(std::make_shared<FixSplit>(split));
        run_pipeline(one, parse_pipeline("parallelize-one,parallelize-outer"));
        one.add_constraint(std::make_shared<FixChunk>());
        std::set<std::string> seen;
        one.for_each([&](const codegen::SuperSchedule& x) {
          std::string key;
          for (const auto& l : x.levels()) key += l.name() + ",";
          for (auto f : x.formats) key += f == codegen::LevelFormat::U ? "U" : "C";
          if (!seen.insert(key).second) return true;
          const bool legal = s.storage_refusal(x.split, x.levels(), x.formats) == nullptr;
          const auto r = codegen::build_storage(x, p, st);
          INFO(name << ": " << codegen::to_text(x) << " refused: " << r.refused);
          REQUIRE(legal == r.storage.has_value());
          if (r.storage) {
            REQUIRE(static_cast<double>(r.storage->stored_values()) ==
                    s.stored_values(x.split, x.levels(), x.formats));
            ++built;
          } else {
            ++refused;
          }
          return true;
        });
      }
      std::size_t v = spec.vars.size();
      bool done = true;
      while (v > 0) {
        --v;
        if (++idx[v] < s.split_choices(v).size()) {
          done = false;
          break;
        }
        idx[v] = 0;
      }
      if (done) break;
    }
    INFO(name << " built " << built << " refused " << refused);
    REQUIRE(built > 0);
    if (max_padding < 3 && name == "small") REQUIRE(refused > 0);
  };
  const kernels::CooMatrix m = small_matrix();
  for (double mp : {1.5, 4.0, 20.0}) {
    check(KernelKind::SpMV, &m, nullptr, mp, "small");
    check(KernelKind::SDDMM, &m, nullptr, mp, "small");
  }
  int count = 0;
  for (const auto& nm : test::edge_case_matrices()) {
    if (nm.matrix.rows > 64 || nm.matrix.cols > 64) continue;
    check(KernelKind::SpMV, &nm.matrix, nullptr, 2.0, nm.name);
    ++count;
  }
  REQUIRE(count > 0);
  for (const auto& nt : test::edge_case_tensors()) {
    if (nt.tensor.dims[0] > 16 || nt.tensor.dims[1] > 16 || nt.tensor.dims[2] > 16) continue;
    check(KernelKind::MTTKRP, nullptr, &nt.tensor, 2.0, nt.name);
  }
}
