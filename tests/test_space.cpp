// Tests of the SuperSchedule space (heuristics/space.hpp, prefix_counts.hpp): prefix counts against
// brute force and the signature's block statistics; the count against enumeration and a closed
// form; index decoding; uniform, reproducible sampling; the legality check against build_storage.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
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

/// A generated 300 x 200 matrix, 1800 uniform nonzeros (seed 7).
kernels::CooMatrix uniform_300x200() {
  kernels::GeneratorSpec g;
  g.kind = "uniform";
  g.rows = 300;
  g.cols = 200;
  g.nnz = 1800;
  g.seed = 7;
  return kernels::generate(g);
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

/// Calls visit(split) on every split vector of the space before constraints (an odometer over
/// split_choices, last variable fastest).
void for_each_split_vector(const Space& s, const std::function<void(const std::vector<int>&)>& visit) {
  const std::size_t nv = s.spec().vars.size();
  std::vector<std::size_t> idx(nv, 0);
  std::vector<int> split(nv, 1);
  for (;;) {
    for (std::size_t v = 0; v < nv; ++v) split[v] = s.split_choices(v)[idx[v]];
    visit(split);
    std::size_t v = nv;
    while (v > 0 && ++idx[v - 1] == s.split_choices(v - 1).size()) idx[--v] = 0;
    if (v == 0) return;
  }
}

/// What a pipeline does to the full space of a small problem, by brute force: every candidate is
/// checked against the constraints of every pass in pipeline order, the first that rejects it
/// names the pass and reason (as run_pass counts), independently of Space's caches and counting.
/// The (threads, chunk) pairs are aggregated per (split vector, parallel loop), the rest is
/// enumerated one candidate at a time.
struct BruteTally {
  std::uint64_t total = 0;
  std::uint64_t kept = 0;
  std::vector<std::map<std::string, std::uint64_t>> removed;  ///< per pass
  std::set<std::string> kept_texts;  ///< the kept candidates, in the text form
};

BruteTally brute_tally(const Space& fresh, const Pipeline& pipeline, const PassParams& pp) {
  using codegen::Loop;
  const codegen::KernelSpec& spec = fresh.spec();
  std::vector<std::pair<std::size_t, std::shared_ptr<const Constraint>>> cons;
  for (std::size_t p = 0; p < pipeline.size(); ++p) {
    std::string note;
    for (const auto& c : make_pass(pipeline[p], pp)->constraints(fresh, note)) cons.emplace_back(p, c);
  }
  struct Verdict {
    std::size_t index;
    const char* reason;
  };
  const Verdict keep{cons.size(), nullptr};
  auto first = [&](Stage st, const auto& check) {
    for (std::size_t i = 0; i < cons.size(); ++i)
      if (cons[i].second->stage() == st)
        if (const char* r = check(*cons[i].second)) return Verdict{i, r};
    return keep;
  };
  BruteTally t;
  t.removed.resize(pipeline.size());
  auto attribute = [&](const Verdict& v, std::uint64_t n) {
    t.total += n;
    if (v.index == cons.size()) t.kept += n;
    else t.removed[cons[v.index].first][v.reason] += n;
  };
  const std::size_t nv = spec.vars.size();
  for_each_split_vector(fresh, [&](const std::vector<int>& split) {
    std::vector<Loop> loops;
    for (std::size_t v = 0; v < nv; ++v) {
      if (split[v] > 1) {
        loops.push_back({spec.vars[v], Loop::Part::Outer});
        loops.push_back({spec.vars[v], Loop::Part::Inner});
      } else {
        loops.push_back({spec.vars[v], Loop::Part::Whole});
      }
    }
    const Verdict vs = first(Stage::Split, [&](const Constraint& c) { return c.check_split(fresh, split); });
    // Per parallel loop: the (threads, chunk) pairs by their first execution verdict.
    std::map<std::string, std::vector<std::pair<Verdict, std::uint64_t>>> exec;
    std::map<std::string, std::vector<std::pair<int, int>>> exec_kept;
    for (const Loop& par : loops) {
      auto& h = exec[par.name()];
      for (int th = 1; th <= fresh.cores(); ++th)
        for (int ch : chunk_choices()) {
          const Verdict v = first(Stage::Execution, [&](const Constraint& c) {
            return c.check_execution(fresh, split, par, th, ch);
          });
          if (v.index == cons.size()) exec_kept[par.name()].emplace_back(th, ch);
          bool found = false;
          for (auto& [hv, n] : h)
            if (hv.index == v.index && hv.reason == v.reason) {
              ++n;
              found = true;
            }
          if (!found) h.push_back({v, 1});
        }
    }
    std::map<std::pair<std::string, std::uint64_t>, Verdict> storage;  // by (levels, format)
    std::vector<int> perm(loops.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {
      bool legal = true;
      for (std::size_t a = 0; a < perm.size(); ++a)
        for (std::size_t b = a + 1; b < perm.size(); ++b)
          legal = legal && !(loops[perm[a]].var == loops[perm[b]].var &&
                             loops[perm[a]].part == Loop::Part::Inner);
      if (!legal) continue;
      std::vector<Loop> order, levels;
      std::string level_key;
      for (int i : perm) order.push_back(loops[i]);
      for (const Loop& l : order)
        if (spec.is_sparse_var(l.var)) {
          levels.push_back(l);
          level_key += l.name() + ",";
        }
      for (const Loop& par : order) {
        const Verdict vn = first(Stage::Nest, [&](const Constraint& c) { return c.check_nest(fresh, order, par); });
        for (std::uint64_t m = 0; m < (std::uint64_t{1} << levels.size()); ++m) {
          std::vector<codegen::LevelFormat> f;
          for (std::size_t l = 0; l < levels.size(); ++l)
            f.push_back((m >> l) & 1u ? codegen::LevelFormat::C : codegen::LevelFormat::U);
          auto it = storage.find({level_key, m});
          if (it == storage.end())
            it = storage.emplace(std::make_pair(level_key, m), first(Stage::Storage, [&](const Constraint& c) {
              return c.check_storage(fresh, split, levels, f);
            })).first;
          Verdict v = vs;
          for (const Verdict& w : {it->second, vn})
            if (w.index < v.index) v = w;
          for (const auto& [ve, n] : exec[par.name()]) attribute(ve.index < v.index ? ve : v, n);
          if (v.index != cons.size() || t.kept_texts.size() > 100000) continue;
          for (const auto& [th, ch] : exec_kept[par.name()]) {
            codegen::SuperSchedule x;
            x.kind = fresh.kind();
            x.split = split;
            x.order = order;
            x.formats = f;
            x.parallel = par;
            x.threads = th;
            x.chunk = ch;
            t.kept_texts.insert(codegen::to_text(x));
          }
        }
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  });
  return t;
}

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

TEST_CASE("space: prefix counts equal brute force on larger operands, sorted or not, with repeats") {
  // Canonical input skips the sort and 3-D heads merge level by level: both paths against brute
  // force, on operands with many groups per level (edge cases are small).
  std::vector<std::vector<std::vector<kernels::index_t>>> inputs;
  std::vector<std::vector<std::int64_t>> dims;
  kernels::GeneratorSpec g;
  g.kind = "rmat", g.scale = 9, g.edge_factor = 6, g.seed = 11;
  const kernels::CooMatrix a = kernels::generate(g);
  inputs.push_back({a.row, a.col});
  dims.push_back({a.rows, a.cols});
  const kernels::CooTensor t = kernels::generate_tensor({37, 70, 19}, 3000, 12);
  inputs.push_back(t.idx);
  dims.push_back({t.dims[0], t.dims[1], t.dims[2]});
  for (std::size_t i = 0, n = inputs.size(); i < n; ++i) {
    // The same coordinates reversed, with every fifth entry repeated.
    std::vector<std::vector<kernels::index_t>> shuffled(inputs[i].size());
    for (std::size_t e = inputs[i][0].size(); e-- > 0;)
      for (int rep = 0; rep < (e % 5 == 0 ? 2 : 1); ++rep)
        for (std::size_t m = 0; m < shuffled.size(); ++m) shuffled[m].push_back(inputs[i][m][e]);
    inputs.push_back(std::move(shuffled));
    dims.push_back(dims[i]);
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<const std::vector<kernels::index_t>*> c;
    for (const auto& v : inputs[i]) c.push_back(&v);
    const PrefixCounts pc = PrefixCounts::compute(c, dims[i]);
    std::vector<int> shift(c.size(), 0);
    const std::function<void(std::size_t)> each = [&](std::size_t m) {
      if (m == c.size()) {
        INFO("input " << i << " shifts " << shift[0] << "," << shift[1]
                      << (c.size() == 3 ? "," + std::to_string(shift[2]) : std::string()));
        REQUIRE(pc.distinct(shift) == brute_distinct(c, shift));
        return;
      }
      for (shift[m] = 0; shift[m] <= pc.bits(static_cast<int>(m)); ++shift[m]) each(m + 1);
    };
    each(0);
  }
}

TEST_CASE("space: prefix counts of large matrices (two halves on two threads) equal brute force") {
  // Above PrefixCounts' parallel threshold (2^15 distinct entries): the row halves are counted
  // apart until the last level; also with every nonzero in one half.
  auto brute2 = [](const kernels::CooMatrix& m, int x, int y) {
    std::vector<std::uint64_t> keys(m.row.size());
    for (std::size_t e = 0; e < keys.size(); ++e)
      keys[e] = (static_cast<std::uint64_t>(m.row[e] >> x) << 32) |
                static_cast<std::uint64_t>(m.col[e] >> y);
    std::sort(keys.begin(), keys.end());
    return static_cast<std::int64_t>(std::unique(keys.begin(), keys.end()) - keys.begin());
  };
  kernels::GeneratorSpec g;
  g.kind = "rmat", g.scale = 13, g.edge_factor = 6, g.seed = 13;
  kernels::CooMatrix big = kernels::generate(g);
  g = {}, g.kind = "uniform", g.rows = 900, g.cols = 5000, g.nnz = 40000, g.seed = 14;
  kernels::CooMatrix top = kernels::generate(g);
  top.rows = 70000;  // every nonzero in the first half of the rows
  g = {}, g.kind = "banded", g.rows = 5000, g.bandwidth = 6, g.seed = 15;
  kernels::CooMatrix band = kernels::generate(g);  // cut at a multiple of 2^k < 2^12
  // One row holds every nonzero: no cut leaves a side nonempty, so the halves are joined at
  // level 0, where a matrix's lists are still its own column array (read in place).
  kernels::CooMatrix row1;
  row1.rows = 6, row1.cols = 70000;
  for (kernels::index_t c = 0; c < 70000; c += 1 + c % 2) {
    row1.row.push_back(3);
    row1.col.push_back(c);
    row1.val.push_back(1.0);
  }
  for (const kernels::CooMatrix* m : {&big, &top, &band, &row1}) {
    REQUIRE(m->nnz() >= (1 << 15));
    const PrefixCounts pc = PrefixCounts::compute({&m->row, &m->col}, {m->rows, m->cols}, 2);
    const PrefixCounts serial = PrefixCounts::compute({&m->row, &m->col}, {m->rows, m->cols});
    for (int x = 0; x <= pc.bits(0); ++x)
      for (int y = 0; y <= pc.bits(1); ++y) {
        INFO("rows " << m->rows << " shifts " << x << "," << y);
        REQUIRE(pc.distinct({x, y}) == brute2(*m, x, y));
        REQUIRE(serial.distinct({x, y}) == pc.distinct({x, y}));
      }
  }
}

TEST_CASE("space: prefix counts of a matrix in many chunks equal brute force") {
  // A matrix is counted in chunks of whole 2^k-row blocks up to level k (about 2^15 entries a
  // chunk): a long tridiagonal matrix spans several, with a dense row inside one (a chunk far
  // larger than the rest), rows with no entry across a chunk's width, and a canonical and a
  // non-canonical (reversed, repeated) copy, serial and on two threads.
  kernels::CooMatrix m;
  m.rows = 70000, m.cols = 70000;
  for (kernels::index_t r = 0; r < m.rows; ++r) {
    if (r >= 50000 && r < 60000) continue;  // 10,000 empty rows
    if (r == 41000) {
      for (kernels::index_t c = 0; c < 60000; c += 2) m.row.push_back(r), m.col.push_back(c);
      continue;
    }
    for (kernels::index_t c = std::max(r - 1, 0); c <= std::min(r + 1, m.cols - 1); ++c)
      m.row.push_back(r), m.col.push_back(c);
  }
  m.val.assign(m.row.size(), 1.0);
  REQUIRE(m.nnz() >= 6 * (1 << 15));
  kernels::CooMatrix shuffled = m;
  std::reverse(shuffled.row.begin(), shuffled.row.end());
  std::reverse(shuffled.col.begin(), shuffled.col.end());
  for (std::size_t e = 0; e < m.row.size(); e += 7)
    shuffled.row.push_back(m.row[e]), shuffled.col.push_back(m.col[e]);
  const PrefixCounts serial = PrefixCounts::compute({&m.row, &m.col}, {m.rows, m.cols});
  std::vector<std::uint64_t> keys(m.row.size());
  for (int x = 0; x <= serial.bits(0); ++x)
    for (int y : {0, 1, 6, serial.bits(1)}) {
      for (std::size_t e = 0; e < keys.size(); ++e)
        keys[e] = (static_cast<std::uint64_t>(m.row[e] >> x) << 32) |
                  static_cast<std::uint64_t>(m.col[e] >> y);
      std::sort(keys.begin(), keys.end());
      INFO("shifts " << x << "," << y);
      REQUIRE(serial.distinct({x, y}) ==
              static_cast<std::int64_t>(std::unique(keys.begin(), keys.end()) - keys.begin()));
    }
  for (const kernels::CooMatrix* c : {&m, &shuffled})
    for (int threads : {1, 2}) {
      const PrefixCounts pc =
          PrefixCounts::compute({&c->row, &c->col}, {c->rows, c->cols}, threads);
      for (int x = 0; x <= pc.bits(0); ++x)
        for (int y = 0; y <= pc.bits(1); ++y) {
          INFO((c == &m ? "canonical" : "shuffled") << " threads " << threads << " shifts " << x
                                                    << "," << y);
          REQUIRE(pc.distinct({x, y}) == serial.distinct({x, y}));
        }
    }
}

TEST_CASE("space: prefix counts agree with the signature's block statistics") {
  const kernels::CooMatrix a = uniform_300x200();
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
  // MTTKRP: four variables, up to 2520 orders per split pattern.
  const kernels::CooTensor t = kernels::generate_tensor({5, 3, 4}, 12, 3);
  SpaceOptions so;
  so.cores = 1;
  Space s = Space::for_operand(KernelKind::MTTKRP, nullptr, &t, 2, so);
  run_pipeline(s, parse_pipeline("legality,parallelize-outer,chunk-rows,vectorizable-inner"));
  const std::uint64_t n = s.count();
  INFO("mttkrp count " << n);
  REQUIRE(n > 1000);
  REQUIRE(n < 1000000);
  std::uint64_t seen = 0;
  std::set<std::string> texts;
  s.for_each([&](const codegen::SuperSchedule& x) {
    REQUIRE(codegen::validate(x).empty());
    if (seen % 997 == 0) REQUIRE(s.at(seen) == x);
    texts.insert(codegen::to_text(x));
    ++seen;
    return true;
  });
  REQUIRE(seen == n);
  REQUIRE(texts.size() == n);
}

TEST_CASE("space: counts and pass statistics equal a brute-force check of every candidate") {
  // 40 rows: parallel loops over i1/i0 have trip counts for which chunk-rows' verdicts differ.
  std::vector<kernels::index_t> rows, cols;
  std::vector<float> vals;
  for (int r = 0; r < 40; ++r)
    for (int c = 0; c < 5; ++c)
      if ((r * 7 + c * 3) % 5 < 2 || (r < 4 && c < 4)) {
        rows.push_back(r);
        cols.push_back(c);
        vals.push_back(1.0f + static_cast<float>(r + c));
      }
  const kernels::CooMatrix a = test::from_triplets(40, 5, rows, cols, vals);
  // 2 x 2 x 2 (and J = 8): small enough to check all 2520 orders x 64 formats of MTTKRP's
  // all-split patterns.
  kernels::CooTensor t;
  t.dims = {2, 2, 2};
  t.idx = {{0, 0, 1, 1, 1}, {0, 1, 0, 1, 1}, {1, 0, 1, 0, 1}};
  t.val = {1, 2, 3, 4, 5};
  PassParams pp;
  pp.cache_bytes = 4096;  // not from sysfs
  pp.chunk_window = 2;    // how many chunks are kept depends on the parallel loop's trip count
  for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM, KernelKind::MTTKRP}) {
    SpaceOptions so;
    so.cores = 2;
    so.max_padding = 1.5;  // the padding bound removes something
    const Space fresh = k == KernelKind::MTTKRP ? Space::for_operand(k, nullptr, &t, 8, so)
                                                : Space::for_operand(k, &a, nullptr, 2, so);
    const BruteTally b = brute_tally(fresh, default_pipeline(), pp);
    Space s = fresh;
    const PipelineResult r = run_pipeline(s, default_pipeline(), pp);
    INFO(kernels::kernel_name(k) << ": brute force " << b.total << " candidates, kept " << b.kept);
    REQUIRE(r.initial_count == b.total);
    REQUIRE(r.final_count == b.kept);
    REQUIRE(s.count() == b.kept);
    std::uint64_t removed = 0;
    for (std::size_t p = 0; p < r.passes.size(); ++p) {
      INFO(r.passes[p].name);
      const std::map<std::string, std::uint64_t> got(r.passes[p].removed.begin(),
                                                     r.passes[p].removed.end());
      REQUIRE(got == b.removed[p]);
      for (const auto& [why, n] : got) removed += n;
    }
    REQUIRE(removed > 0);
    REQUIRE(b.removed[0].count("padding-bound"));  // the legality pass
    // The same candidates, not only as many.
    REQUIRE(b.kept <= 100000);
    std::set<std::string> kept;
    s.for_each([&](const codegen::SuperSchedule& x) {
      kept.insert(codegen::to_text(x));
      return true;
    });
    REQUIRE(kept == b.kept_texts);
    // The same space counted again from scratch, constraint by constraint (add_constraint).
    Space again = fresh;
    for (const std::string& name : default_pipeline()) {
      std::string note;
      for (const auto& c : make_pass(name, pp)->constraints(fresh, note)) again.add_constraint(c);
    }
    REQUIRE(again.count() == b.kept);
  }
}

TEST_CASE("space: the full count matches the closed form") {
  // Structural space: per split vector, (#loops)! / 2^(#split) orders x 2^levels formats x
  // #loops parallel loops x cores threads x 10 chunks (static and 1, 2, ..., 256).
  for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM, KernelKind::MTTKRP}) {
    const codegen::KernelSpec& spec = codegen::kernel_spec(k);
    std::vector<std::int64_t> ext;
    for (std::size_t v = 0; v < spec.vars.size(); ++v) ext.push_back(v == 0 ? 1000 : 37 + 50 * v);
    SpaceOptions so;
    so.cores = 3;
    const Space s = Space::structural(k, ext, so);
    std::uint64_t expect = 0;
    const std::size_t nv = spec.vars.size();
    for_each_split_vector(s, [&](const std::vector<int>& sv) {
      int loops = 0, split = 0, levels = 0;
      for (std::size_t v = 0; v < nv; ++v) {
        const bool sp = sv[v] > 1;
        loops += sp ? 2 : 1;
        split += sp;
        if (spec.is_sparse_var(spec.vars[v])) levels += sp ? 2 : 1;
      }
      expect += factorial(loops) / (std::uint64_t{1} << split) * (std::uint64_t{1} << levels) *
                static_cast<std::uint64_t>(loops) * 3 * 10;
    });
    INFO(kernels::kernel_name(k));
    REQUIRE(s.count() == expect);
  }
  // Split choices: powers of two up to the extent rounded up, at most 2^16.
  const Space s = Space::structural(KernelKind::SpMV, {1000, 1 << 20});
  REQUIRE(s.split_choices(0).back() == 1024);
  REQUIRE(s.split_choices(1).back() == 65536);
}

TEST_CASE("space: parallelize-one keeps a serial kernel only for tiny work") {
  const kernels::CooMatrix a = small_matrix();  // 9 nonzeros
  SpaceOptions so;
  so.cores = 2;
  auto threads_kept = [&](KernelKind k, std::int64_t dense, std::int64_t max_serial) {
    Space s = Space::for_operand(k, &a, nullptr, dense, so);
    PassParams pp;
    pp.max_serial_work = max_serial;
    const PipelineResult r = run_pipeline(s, parse_pipeline("legality,parallelize-one"), pp);
    std::set<int> t;
    s.for_each([&](const codegen::SuperSchedule& x) {
      t.insert(x.threads);
      return t.size() < 2;
    });
    return std::make_pair(t, r.passes.back().note);
  };
  // SpMV: 9 multiply-adds; SpMM J=64: 576; both under 1000 keep threads 1 and 2.
  auto [spmv, note] = threads_kept(KernelKind::SpMV, 1, 1000);
  CHECK(spmv == std::set<int>{1, 2});
  CHECK(note.find("serial kept: 9 multiply-adds") != std::string::npos);
  CHECK(threads_kept(KernelKind::SpMM, 64, 1000).first == std::set<int>{1, 2});
  // Above the bound (and with it 0): all cores only.
  CHECK(threads_kept(KernelKind::SpMM, 256, 1000).first == std::set<int>{2});
  CHECK(threads_kept(KernelKind::SpMV, 1, 0).first == std::set<int>{2});
  // chunk-rows keeps one chunk for a serial kernel (it has no dynamic loop), several otherwise.
  {
    Space s = Space::for_operand(KernelKind::SpMV, &a, nullptr, 1, so);
    PassParams pp;
    run_pipeline(s, parse_pipeline("legality,parallelize-one,chunk-rows"), pp);
    std::map<std::string, std::set<int>> chunks[3];
    s.for_each([&](codegen::SuperSchedule x) {
      const int t = x.threads, c = x.chunk;
      x.chunk = 1;
      chunks[t][codegen::to_text(x)].insert(c);
      return true;
    });
    REQUIRE_FALSE(chunks[1].empty());
    for (const auto& [text, c] : chunks[1]) CHECK(c.size() == 1);
    std::size_t most = 0;
    for (const auto& [text, c] : chunks[2]) most = std::max(most, c.size());
    CHECK(most > 1);
  }
  // The structural space (no matrix) never keeps it: the work is unknown.
  Space st = Space::structural(KernelKind::SpMV, {6, 7}, so);
  run_pipeline(st, parse_pipeline("legality,parallelize-one"));
  bool one = false;
  st.for_each([&](const codegen::SuperSchedule& x) {
    one = one || x.threads == 1;
    return !one;
  });
  CHECK_FALSE(one);
}

TEST_CASE("space: sampling is reproducible and uniform") {
  const kernels::CooMatrix a = small_matrix();
  SpaceOptions so;
  so.cores = 2;
  Space s = Space::for_operand(KernelKind::SpMV, &a, nullptr, 1, so);
  PassParams pp;  // one chunk per split and all cores: a space small enough for 100 n draws
  pp.min_chunks_per_thread = 16;
  pp.chunk_window = 0;
  pp.max_serial_work = 0;
  run_pipeline(s, parse_pipeline("legality,parallelize-one,parallelize-outer,chunk-rows,"
                                 "no-useless-partition,block-fill"), pp);
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
    for_each_split_vector(s, [&](const std::vector<int>& split) {
      bool dense_split = false;
      for (std::size_t v = 0; v < spec.vars.size(); ++v) {
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
    });
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

TEST_CASE("space: tune's space (from the problem) is space's (from the operand)") {
  // tune builds its space from the Problem, the space command from the operand; for MTTKRP the
  // former once lacked the (i, k) projection's signature, so tile-window removed nothing in tune.
  const kernels::CooMatrix a = uniform_300x200();
  const kernels::CooTensor t = kernels::generate_tensor({40, 30, 20}, 600, 5);
  for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM, KernelKind::MTTKRP}) {
    const bool tensor = kernels::needs_tensor(k);
    const kernels::CooMatrix* am = tensor ? nullptr : &a;
    const kernels::CooTensor* tt = tensor ? &t : nullptr;
    const std::int64_t dense = k == KernelKind::SpMV ? 1 : 24;
    const kernels::DenseOperands ops = kernels::make_dense_operands(k, am, tt, dense, 1);
    const kernels::Problem p = kernels::make_problem(k, am, tt, ops);
    SpaceOptions so;
    so.cores = 2;
    Space from_problem = Space::for_problem(p, so);
    Space from_operand = Space::for_operand(k, am, tt, dense, so);
    INFO(kernels::kernel_name(k));
    REQUIRE(from_problem.extents() == from_operand.extents());
    REQUIRE(from_problem.facts()->has_signature);
    const PipelineResult rp = run_pipeline(from_problem, default_pipeline());
    const PipelineResult ro = run_pipeline(from_operand, default_pipeline());
    REQUIRE(rp.final_count == ro.final_count);
    REQUIRE(rp.final_count < rp.initial_count);
  }
}

TEST_CASE("space: admits agrees with for_each on every candidate of small spaces") {
  const kernels::CooMatrix a = small_matrix();
  kernels::CooTensor t;
  t.dims = {2, 2, 2};
  t.idx = {{0, 0, 1, 1, 1}, {0, 1, 0, 1, 1}, {1, 0, 1, 0, 1}};
  t.val = {1, 2, 3, 4, 5};
  PassParams pp;
  pp.cache_bytes = 4096;
  for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM, KernelKind::MTTKRP}) {
    INFO(kernels::kernel_name(k));
    SpaceOptions so;
    so.cores = 2;
    so.max_padding = 1.5;
    const Space fresh = k == KernelKind::MTTKRP ? Space::for_operand(k, nullptr, &t, 4, so)
                                                : Space::for_operand(k, &a, nullptr, 2, so);
    Space s = fresh;
    run_pipeline(s, default_pipeline(), pp);
    std::set<std::string> kept;
    s.for_each([&](const SuperSchedule& x) {
      kept.insert(codegen::to_text(x));
      return true;
    });
    REQUIRE(!kept.empty());
    // Every candidate of the unconstrained space (a sample for the larger ones): admitted
    // exactly when the constrained space enumerates it, with a reason otherwise.
    std::map<std::string, int> reasons;
    for (const SuperSchedule& x : fresh.sample(20000, 3)) {
      const auto why = s.admits(x);
      CHECK(why.has_value() == (kept.count(codegen::to_text(x)) == 0));
      if (why) ++reasons[*why];
    }
    for (const std::string& text : kept) CHECK_FALSE(s.admits(codegen::parse_schedule(k, text)).has_value());
    CHECK(reasons.size() >= 2);  // several passes said no, each in its own words
    // Outside the space altogether.
    SuperSchedule x = *s.sample(1, 1).begin();
    x.threads = 3;
    CHECK(s.admits(x) == std::optional<std::string>("threads-out-of-range"));
    CHECK(s.admits(*codegen::schedule_shortcut(k == KernelKind::SpMV ? KernelKind::SpMM : KernelKind::SpMV, "csr")) ==
          std::optional<std::string>("other-kernel"));

    // admits_each_chunk: admits() of each chunk, element by element, on the same sample, with
    // chunks outside the space's (0, 3, 2^20), admitted schedules and schedules outside it (3
    // threads, another kernel, an invalid order) among them.
    std::vector<int> chunks = heuristics::chunk_choices();
    chunks.insert(chunks.begin() + 2, {0, 3, 1 << 20});
    std::vector<SuperSchedule> probes = fresh.sample(3000, 5);
    std::size_t taken = 0;
    for (auto it = kept.begin(); it != kept.end() && taken < 300; ++it, ++taken)
      probes.push_back(codegen::parse_schedule(k, *it));
    probes.push_back(x);
    probes.push_back(*codegen::schedule_shortcut(k == KernelKind::SpMV ? KernelKind::SpMM : KernelKind::SpMV, "csr"));
    SuperSchedule bad = *s.sample(1, 2).begin();
    std::swap(bad.order.front(), bad.order.back());
    probes.push_back(bad);
    std::size_t admitted = 0;
    for (const SuperSchedule& p : probes) {
      const std::vector<bool> each = s.admits_each_chunk(p, chunks);
      REQUIRE(each.size() == chunks.size());
      for (std::size_t c = 0; c < chunks.size(); ++c) {
        SuperSchedule v = p;
        v.chunk = chunks[c];
        INFO(codegen::to_text(v));
        CHECK(each[c] == !s.admits(v).has_value());
        admitted += each[c] ? 1 : 0;
      }
    }
    CHECK(admitted > 0);
  }
}
