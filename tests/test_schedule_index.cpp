// Unit "schedule_index": the cost model's head split at its first layer (HeadTail: query + node
// vectors give the model's own scores), and the HNSW index over template schedules searched
// with the head as the distance (learned/schedule_index.hpp): recall 1 against brute-force
// scoring when ef is the graph size, the same answer twice, the extra walks from sampled starts
// (never worse than the one walk), the keep filter with widening,
// files (round trip; refusals of another model, a truncated graph, a corrupt header).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "support/test_paths.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/schedule_index.hpp"

namespace {

using namespace waco;
using learned::CostModel;
using learned::ScheduleIndex;
namespace fs = std::filesystem;

kernels::CooMatrix matrix(std::uint64_t seed) {
  kernels::GeneratorSpec g;
  g.kind = "powerlaw";
  g.rows = 3000;
  g.nnz = 30000;
  g.seed = seed;
  return kernels::generate(g);
}

CostModel model(std::uint64_t seed) {
  learned::CostModelConfig c;
  c.kind = kernels::KernelKind::SpMV;
  c.encoder = learned::EncoderKind::Stats;
  c.seed = seed;
  return CostModel::create(c);
}

/// A sample of SpMV's structural templates (what the anns search builds its graph from).
std::vector<codegen::SuperSchedule> templates(std::uint64_t n) {
  heuristics::Space space = heuristics::Space::structural(
      kernels::KernelKind::SpMV, {codegen::kMaxSplit, codegen::kMaxSplit}, {2, 20.0});
  heuristics::run_pipeline(space, heuristics::parse_pipeline("legality,sparse-iteration,"
                                                             "parallelize-one,parallelize-outer,"
                                                             "no-useless-partition"));
  return space.sample(n, 7);
}

}  // namespace

TEST_CASE("schedule_index: query + node vectors through the head tail give the model's scores") {
  const CostModel m = model(3);
  const learned::ModelInput in = m.prepare(matrix(1));
  const std::vector<codegen::SuperSchedule> ss = templates(300);
  const std::vector<double> want = m.scores(in, ss);
  const learned::HeadTail tail = m.head_tail();
  const std::vector<float> q = m.query_vector(in);
  const std::vector<float> u = m.node_vectors(ss);
  REQUIRE(q.size() == static_cast<std::size_t>(tail.width));
  REQUIRE(u.size() == ss.size() * q.size());
  for (std::size_t i = 0; i < ss.size(); ++i) {
    const float got = tail.score(q.data(), u.data() + i * q.size());
    INFO(codegen::to_text(ss[i]));
    CHECK(std::fabs(got - want[i]) <= 1e-4 * (1.0 + std::fabs(want[i])));
  }
}

TEST_CASE("schedule_index: the walk with ef = graph size finds the brute-force top 10") {
  const CostModel m = model(3);
  const std::vector<codegen::SuperSchedule> ts = templates(1500);
  const ScheduleIndex index = ScheduleIndex::build(m, ts, {16, 100, 5});
  REQUIRE(index.size() == ts.size());
  for (std::uint64_t seed : {1, 2, 3}) {
    const std::vector<float> q = m.query_vector(m.prepare(matrix(seed)));
    const learned::IndexResult exact = index.exact(q, 10);
    REQUIRE(exact.schedules.size() == 10);
    CHECK(exact.evaluations == index.size());
    CHECK(std::is_sorted(exact.scores.begin(), exact.scores.end()));
    const learned::IndexResult full = index.search(q, {10, index.size()});
    CHECK(learned::recall_at(full.schedules, exact.schedules) == 1.0);
    CHECK(full.scores == exact.scores);
    CHECK(full.evaluations > 0);
    // The usual ef, hnswlib's walk alone (starts 0): the same answer twice, counted evaluations
    // well below the graph size.
    const learned::IndexResult a = index.search(q, {10, 50, 0});
    const learned::IndexResult b = index.search(q, {10, 50, 0});
    CHECK(a.schedules == b.schedules);
    CHECK(a.evaluations == b.evaluations);
    CHECK(a.evaluations < index.size());
    CHECK(a.searches == 1);
    // More walks from the best sampled nodes find everything the one walk found, or better: each
    // of the ten scores is at most the single walk's; deterministic too.
    const learned::IndexResult more = index.search(q, {10, 50});
    const learned::IndexResult again = index.search(q, {10, 50});
    CHECK(more.schedules == again.schedules);
    REQUIRE(more.scores.size() == a.scores.size());
    for (std::size_t i = 0; i < a.scores.size(); ++i) CHECK(more.scores[i] <= a.scores[i]);
    CHECK(learned::recall_at(more.schedules, exact.schedules) >=
          learned::recall_at(a.schedules, exact.schedules));
    CHECK(more.evaluations > a.evaluations);
  }
}

TEST_CASE("schedule_index: a keep filter widens ef until k kept schedules are found") {
  const CostModel m = model(4);
  const ScheduleIndex index = ScheduleIndex::build(m, templates(1500), {16, 100, 5});
  const std::vector<float> q = m.query_vector(m.prepare(matrix(9)));
  // Keep only chunk 256 (a few percent of the nodes).
  const auto keep = [](const codegen::SuperSchedule& s) { return s.chunk == 256; };
  const learned::IndexResult r = index.search(q, {5, 10, 0}, keep);  // hnswlib's walk alone
  REQUIRE(r.schedules.size() == 5);
  for (const auto& s : r.schedules) CHECK(s.chunk == 256);
  CHECK(r.searches > 1);
  CHECK(r.ef > 10);
  const learned::IndexResult exact = index.exact(q, 5, keep);
  const learned::IndexResult full = index.search(q, {5, index.size()}, keep);
  CHECK(learned::recall_at(full.schedules, exact.schedules) == 1.0);
  // With the extra walks (their starts among the kept nodes): here the same five or better.
  const learned::IndexResult walks = index.search(q, {5, 10}, keep);
  REQUIRE(walks.schedules.size() == 5);
  for (std::size_t i = 0; i < 5; ++i) CHECK(walks.scores[i] <= r.scores[i]);
  // Nothing kept: an empty result after the whole graph, not a hang.
  const learned::IndexResult none =
      index.search(q, {5, 10}, [](const codegen::SuperSchedule&) { return false; });
  CHECK(none.schedules.empty());
  CHECK(none.ef == index.size());
}

TEST_CASE("schedule_index: files round trip and refuse another model or a damaged file") {
  const std::string dir = test::scratch_dir("schedule_index");
  const std::string path = dir + "/spmv.hnsw";
  const CostModel m = model(3);
  const ScheduleIndex built = ScheduleIndex::build(m, templates(800), {16, 100, 5});
  built.save(path);
  const std::vector<float> q = m.query_vector(m.prepare(matrix(2)));
  const ScheduleIndex loaded = ScheduleIndex::load(path, m);
  CHECK(loaded.size() == built.size());
  CHECK(loaded.templates() == built.templates());
  CHECK(loaded.search(q, {10, 40}).schedules == built.search(q, {10, 40}).schedules);

  CHECK_THROWS_WITH(ScheduleIndex::load(path, model(99)),
                    Catch::Contains("built with another cost model"));
  {
    learned::CostModelConfig c;
    c.kind = kernels::KernelKind::SpMM;
    CHECK_THROWS_WITH(ScheduleIndex::load(path, CostModel::create(c)),
                      Catch::Contains("the index is for spmv"));
  }
  const std::string cut = dir + "/cut.hnsw";
  fs::copy_file(path, cut, fs::copy_options::overwrite_existing);
  fs::copy_file(path + ".json", cut + ".json", fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  CHECK_THROWS_WITH(ScheduleIndex::load(cut, m), Catch::Contains("does not match its header"));
  {
    std::ofstream(cut + ".json") << "{\"format\": \"waco-hybrid schedule index\", \"vers";
  }
  CHECK_THROWS_WITH(ScheduleIndex::load(cut, m), Catch::Contains("corrupt index header"));
  CHECK_THROWS_WITH(ScheduleIndex::load(dir + "/absent.hnsw", m), Catch::Contains("cannot read"));
}

TEST_CASE("schedule_index: recall_at") {
  const auto a = codegen::schedule_from_string(kernels::KernelKind::SpMV, "csr");
  const auto b = codegen::schedule_from_string(kernels::KernelKind::SpMV, "dcsr");
  CHECK(learned::recall_at({a, b}, {a, b}) == 1.0);
  CHECK(learned::recall_at({a}, {a, b}) == 0.5);
  CHECK(learned::recall_at({}, {a}) == 0.0);
  CHECK(learned::recall_at({a}, {}) == 1.0);
}
