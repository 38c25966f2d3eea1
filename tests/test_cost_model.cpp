// Unit "cost_model": the learned cost model (learned/cost_model.hpp) and what it stands on:
// ranking metrics on hand-made orders, the pairwise hinge loss, training data read from group
// JSON (families and splits), the network's scores, a training step lowering the loss,
// determinism, checkpoint + resume equal to an uninterrupted run, the model file (round trip and
// refusals), and a model trained briefly on the committed measurements ranking heavy padding
// below csr on a matrix it never saw.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>

#include "waco/learned/shipped.hpp"
#include "dataset_files.hpp"
#include "support/test_paths.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/ranking_metrics.hpp"
#include "waco/learned/training_data.hpp"
#include "cost_model_internal.hpp"
#include "tensor_reader.hpp"

namespace {

using namespace waco;
using learned::CostModel;
using learned::CostModelConfig;
using learned::EncoderKind;
using learned::RankingExample;
namespace fs = std::filesystem;

const double kInf = std::numeric_limits<double>::infinity();

kernels::CooMatrix gen(const std::string& kind, std::int64_t rows, std::int64_t nnz, std::uint64_t seed) {
  kernels::GeneratorSpec g;
  g.kind = kind;
  g.rows = rows;
  g.nnz = nnz;
  g.seed = seed;
  return kernels::generate(g);
}

codegen::SuperSchedule sched(const std::string& text) {
  return codegen::schedule_from_string(kernels::KernelKind::SpMV, text);
}

/// Schedules with invented times for mechanics tests (optimizer, determinism, files): the time
/// grows with the chunk and with blocking, the same way on every matrix.
RankingExample synthetic_example(const CostModel& m, const kernels::CooMatrix& a) {
  RankingExample ex;
  ex.name = "synthetic";
  ex.input = m.prepare(a);
  int n = 0;
  for (int chunk : {1, 4, 16, 64, 256})
    for (const char* base : {"order=i,k format=UC parallel=i", "split=i:4 order=i1,i0,k format=UUC parallel=i1",
                             "split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1"}) {
      ex.schedules.push_back(sched(std::string(base) + " chunk=" + std::to_string(chunk)));
      ex.seconds.push_back(1.0 + 0.1 * chunk + 3.0 * (std::string(base).find("k:4") != std::string::npos) + 0.01 * n++);
      ex.lower_bound.push_back(0);
    }
  ex.lower_bound.back() = 1;  // the slowest only as a lower bound
  return ex;
}

std::vector<RankingExample> synthetic_set(const CostModel& m, int count, std::uint64_t seed) {
  std::vector<RankingExample> out;
  const char* kinds[] = {"uniform", "banded", "powerlaw"};
  for (int i = 0; i < count; ++i)
    out.push_back(synthetic_example(m, gen(kinds[i % 3], 300 + 50 * i, 3000, seed + static_cast<std::uint64_t>(i))));
  return out;
}

/// Training options of the short runs below: one thread, two matrices a step.
learned::TrainOptions quick_training(int epochs) {
  learned::TrainOptions o;
  o.epochs = epochs;
  o.threads = 1;
  o.learning_rate = 3e-3;
  o.matrices_per_step = 2;
  return o;
}

std::string read_all(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("cost model: ranking metrics on hand-made orders") {
  using namespace learned;
  CHECK(spearman({1, 2, 3, 4}, {10, 20, 30, 40}) == Approx(1.0));
  CHECK(spearman({1, 2, 3, 4}, {4, 3, 2, 1}) == Approx(-1.0));
  CHECK(std::isnan(spearman({1, 1, 1}, {1, 2, 3})));
  CHECK(average_ranks({5, 1, 5, 2}) == std::vector<double>{3.5, 1, 3.5, 2});
  CHECK(kendall_tau_b({1, 2, 3}, {1, 2, 3}) == Approx(1.0));
  CHECK(kendall_tau_b({1, 2, 3, 4}, {1, 3, 2, 4}) == Approx(4.0 / 6.0));
  // Pairs: 0 < 1 < 2 exact, 3 a lower bound 2.0 (known slower than 0 and 1, not comparable with 2).
  const std::vector<double> t = {1.0, 1.5, 3.0, 2.0};
  const std::vector<char> lb = {0, 0, 0, 1};
  const PairCount all = pairwise_agreement({0, 1, 2, 3}, t, lb);
  CHECK(all.pairs == 5);
  CHECK(all.accuracy() == Approx(1.0));
  CHECK(pairwise_agreement({3, 2, 1, 0}, t, lb).accuracy() == Approx(0.0));
  CHECK(pairwise_agreement({0, 0, 0, 0}, t, lb).accuracy() == Approx(0.5));
  CHECK(pairwise_agreement({0, 1, 2, 3}, t, lb, 0.6).pairs == 3);  // 1.5 vs 1.0 is closer than 60%
  // Regret: the model's best pick is the 3.0 one; best overall 1.0.
  CHECK(top_k_regret({5, 4, 0, 9}, t, lb, 1) == Approx(2.0));
  CHECK(top_k_regret({5, 4, 0, 9}, t, lb, 3) == Approx(0.0));
  CHECK(top_k_regret({5, 4, 9, 0}, t, lb, 1) == kInf);  // only a lower bound picked
  CHECK(median_finite({3, std::nan(""), 1, 2, kInf}) == Approx(2.0));
}

TEST_CASE("cost model: hinge loss is zero when every pair is ordered by more than the margin") {
  const std::vector<double> sec = {1.0, 2.0, 4.0};
  const std::vector<char> lb = {0, 0, 0};
  CHECK(learned::pairwise_hinge({0.0, 1.5, 3.0}, sec, lb, 1.0, 0.0) == 0.0);
  // Ordered right but within the margin: each pair pays margin - gap.
  CHECK(learned::pairwise_hinge({0.0, 0.5, 1.0}, sec, lb, 1.0, 0.0) == Approx((0.5 + 0.0 + 0.5) / 3));
  // Reversed: every pair pays margin + gap.
  CHECK(learned::pairwise_hinge({3.0, 1.5, 0.0}, sec, lb, 1.0, 0.0) == Approx((2.5 + 4.0 + 2.5) / 3));
  CHECK(learned::pairwise_hinge({0.0, 0.0}, {1.0, 1.01}, {0, 0}, 1.0, 0.02) == 0.0);  // too close
}

TEST_CASE("cost model: groups from JSON, families and splits") {
  const nlohmann::json g = {
      {"kernel", "spmv"}, {"dense", 1}, {"threads", 2}, {"source", "file:x/Erdos971.mtx"},
      {"matrix", {{"fingerprint", "00000000000000ab"}, {"rows", 3}, {"cols", 3}, {"nnz", 3}}},
      {"recipe", {{"recipe_version", 1}, {"source", "file"}, {"path", "x/Erdos971.mtx"},
                  {"augment", {{"resize", 2.0}, {"seed", 5}}}}},
      {"pair_agreement", 0.9},
      {"rows", {{"order=i,k format=UC parallel=i threads=2 chunk=128", "ok", 2e-6, 1e-6, 3e-6},
                {"impl=csr", "ok", 1e-6, 1e-6, 1e-6},
                {"order=k,i format=UC parallel=k threads=2 chunk=16", "abandoned", 9e-6, 9e-6, 9e-6},
                {"order=k,i format=UC parallel=k threads=2 chunk=32", "timeout", nullptr, nullptr, nullptr}}}};
  const learned::DatasetGroup d = learned::group_from_json(g);
  CHECK(d.kind == kernels::KernelKind::SpMV);
  REQUIRE(d.candidates.size() == 2);
  CHECK_FALSE(d.candidates[0].lower_bound);
  CHECK(d.candidates[1].lower_bound);
  CHECK(d.csr_seconds == 1e-6);
  CHECK(d.pair_agreement == 0.9);
  CHECK(d.family == "file:Erdos971.mtx");
  // Every augmentation of a file shares its split; splits are spread 80/10/10.
  CHECK(learned::split_of_family(d.family) == d.split);
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 2000; ++i) {
    const std::string s = learned::split_of_family("matrix:" + std::to_string(i));
    ++counts[s == "train" ? 0 : s == "validation" ? 1 : 2];
  }
  CHECK(counts[0] > 1500);
  CHECK(counts[1] > 120);
  CHECK(counts[2] > 120);
  nlohmann::json bad = g;
  bad["rows"][0][0] = "order=q format=UC";
  CHECK_THROWS_AS(learned::group_from_json(bad), kernels::Error);
  bad = g;
  bad.erase("matrix");
  CHECK_THROWS_AS(learned::group_from_json(bad), kernels::Error);
  // No source file: a clear error naming it.
  CHECK_THROWS_WITH(learned::make_group_matrix(d, {}), Catch::Contains("Erdos971.mtx"));
  // The value type a group was timed in: f32 when an older export does not say.
  CHECK(d.dtype == kernels::Dtype::F32);
  nlohmann::json f64 = g;
  f64["dtype"] = "f64";
  CHECK(learned::group_from_json(f64).dtype == kernels::Dtype::F64);
  f64["dtype"] = "f16";
  CHECK_THROWS_WITH(learned::group_from_json(f64), Catch::Contains("f16"));
}

TEST_CASE("cost model: a model reading the value type tells f32 from f64, others do not") {
  const kernels::CooMatrix a = gen("banded", 500, 4000, 4);
  const std::vector<codegen::SuperSchedule> list = {
      sched("order=i,k format=UC parallel=i chunk=16"),
      sched("split=i:4 order=i1,i0,k format=UUC parallel=i1 chunk=4")};
  CostModelConfig c;
  c.encoder = EncoderKind::Signature;
  const CostModel plain = CostModel::create(c);
  CHECK(plain.scores(plain.prepare(a, nullptr, kernels::Dtype::F64), list) ==
        plain.scores(plain.prepare(a), list));
  c.dtype_input = true;
  const CostModel both = CostModel::create(c);
  const auto f32 = both.scores(both.prepare(a, nullptr, kernels::Dtype::F32), list);
  const auto f64 = both.scores(both.prepare(a, nullptr, kernels::Dtype::F64), list);
  CHECK(f32 != f64);
  CHECK(both.config().to_json().at("dtype_input") == true);
  CHECK_FALSE(plain.config().to_json().contains("dtype_input"));  // older files read alike
  // The file keeps it, and what the model reads.
  const std::string path = test::scratch_dir("cost-model-dtype") + "/both.model";
  both.save(path);
  const CostModel back = CostModel::load(path);
  CHECK(back.config().dtype_input);
  CHECK(back.scores(back.prepare(a, nullptr, kernels::Dtype::F64), list) == f64);
  // WACONet reads no features, so no value type.
  CostModelConfig w = c;
  w.encoder = EncoderKind::WacoNet;
  CHECK_THROWS_WITH(CostModel::create(w), Catch::Contains("feature encoder"));
  nlohmann::json j = w.to_json();
  CHECK_THROWS_WITH(CostModelConfig::from_json(j), Catch::Contains("dtype_input"));
}

TEST_CASE("cost model: a model reading the dense size tells J apart, and widening one keeps its ranking") {
  const kernels::CooMatrix a = gen("banded", 500, 4000, 4);
  const std::vector<codegen::SuperSchedule> list = {
      codegen::schedule_from_string(kernels::KernelKind::SpMM, "csr"),
      codegen::schedule_from_string(kernels::KernelKind::SpMM,
                                    "split=i:4,j:16 order=i1,i0,j1,k,j0 format=CUC parallel=i1 chunk=4")};
  CostModelConfig c;
  c.kind = kernels::KernelKind::SpMM;
  const CostModel plain = CostModel::create(c);
  CHECK(plain.scores(plain.prepare(a, nullptr, kernels::Dtype::F32, 16), list) ==
        plain.scores(plain.prepare(a), list));  // others ignore it
  CHECK_FALSE(plain.config().to_json().contains("dense_input"));  // older files read alike
  c.dense_input = true;
  const CostModel sized = CostModel::create(c);
  const auto j16 = sized.scores(sized.prepare(a, nullptr, kernels::Dtype::F32, 16), list);
  const auto j256 = sized.scores(sized.prepare(a, nullptr, kernels::Dtype::F32, 256), list);
  CHECK(j16 != j256);
  CHECK_THROWS_WITH(sized.prepare(a), Catch::Contains("reads the dense size"));
  // The file keeps it.
  const std::string path = test::scratch_dir("cost-model-dense") + "/sized.model";
  sized.save(path);
  const CostModel back = CostModel::load(path);
  CHECK(back.config().dense_input);
  CHECK(back.scores(back.prepare(a, nullptr, kernels::Dtype::F32, 16), list) == j16);
  // Widening a trained model: the new feature's weights are zero, so it ranks as before at
  // every size, until training moves them.
  const CostModel wide = plain.with_dense_input();
  CHECK(wide.config().dense_input);
  CHECK(wide.parameter_count() == plain.parameter_count() + c.width);
  const auto before = plain.scores(plain.prepare(a), list);
  for (std::int64_t j : {1, 16, 64, 256, 4096}) {
    const auto after = wide.scores(wide.prepare(a, nullptr, kernels::Dtype::F32, j), list);
    REQUIRE(after.size() == before.size());
    for (std::size_t i = 0; i < after.size(); ++i) CHECK(after[i] == Approx(before[i]).epsilon(1e-5));
  }
  CHECK_THROWS_WITH(wide.with_dense_input(), Catch::Contains("already"));
  // SpMV has no dense size; WACONet reads no features.
  CostModelConfig v;
  v.dense_input = true;
  CHECK_THROWS_WITH(CostModel::create(v), Catch::Contains("dense operands"));
  CHECK_THROWS_WITH(CostModel::create(CostModelConfig{}).with_dense_input(), Catch::Contains("not spmv"));
  CostModelConfig w = c;
  w.encoder = EncoderKind::WacoNet;
  CHECK_THROWS_WITH(CostModel::create(w), Catch::Contains("feature encoder"));
  CHECK_THROWS_WITH(CostModelConfig::from_json(w.to_json()), Catch::Contains("dense_input"));
}

TEST_CASE("cost model: scores per schedule for every encoder without WACONet, foreign input refused") {
  const kernels::CooMatrix a = gen("uniform", 400, 4000, 3);
  for (EncoderKind e : {EncoderKind::Stats, EncoderKind::Signature}) {
    CostModelConfig c;
    c.encoder = e;
    const CostModel m = CostModel::create(c);
    CHECK(m.parameter_count() > 10000);
    const auto ex = synthetic_example(m, a);
    const std::vector<double> s = m.scores(ex.input, ex.schedules);
    REQUIRE(s.size() == ex.schedules.size());
    for (double v : s) CHECK(std::isfinite(v));
    CHECK(m.scores(ex.input, {}).empty());
    const auto spmm = codegen::schedule_from_string(kernels::KernelKind::SpMM, "csr");
    CHECK_THROWS_WITH(m.scores(ex.input, {spmm}), Catch::Contains("spmm schedule"));
    CHECK_THROWS_AS(m.prepare(kernels::CooTensor{}), kernels::Error);
  }
}

TEST_CASE("cost model: one epoch lowers the loss, training is deterministic and resumable") {
  CostModelConfig c;
  c.encoder = EncoderKind::Stats;
  c.seed = 7;
  CostModel m = CostModel::create(c);
  const auto data = synthetic_set(m, 6, 11);
  learned::TrainOptions o = quick_training(1);
  const double before = m.loss(data);
  m.train(data, {}, o);
  CHECK(m.loss(data) < before);

  // Same seed, same threads: the same model.
  o.epochs = 4;
  CostModel a = CostModel::create(c), b = CostModel::create(c);
  a.train(data, data, o);
  b.train(data, data, o);
  CHECK(a.scores(data[0].input, data[0].schedules) == b.scores(data[0].input, data[0].schedules));
  // The same weights with another order seed (train --init --seed): another model; the same
  // order seed as the config's: the same one.
  learned::TrainOptions reorder = o;
  reorder.order_seed = 8;
  CostModel d = CostModel::create(c);
  d.train(data, data, reorder);
  CHECK(d.scores(data[0].input, data[0].schedules) != a.scores(data[0].input, data[0].schedules));
  reorder.order_seed = c.seed;
  CostModel e = CostModel::create(c);
  e.train(data, data, reorder);
  CHECK(e.scores(data[0].input, data[0].schedules) == a.scores(data[0].input, data[0].schedules));

  // Interrupted after 2 epochs and resumed to 4: the same as 4 in one go (no early stop here).
  const std::string dir = test::scratch_dir("cost-model-resume");
  o.checkpoint = dir + "/ck";
  o.patience = 100;
  CostModel straight = CostModel::create(c);
  straight.train(data, data, o);
  learned::TrainOptions first = o;
  first.epochs = 2;
  CostModel part = CostModel::create(c);
  part.train(data, data, first);
  CHECK(fs::exists(dir + "/ck"));
  CHECK(fs::exists(dir + "/ck.adam"));
  learned::TrainOptions rest = o;
  rest.resume = true;
  CostModel resumed = CostModel::create(c);
  const learned::TrainSummary s = resumed.train(data, data, rest);
  CHECK(s.resumed);
  CHECK(s.history.size() == 4);
  const auto x = straight.scores(data[1].input, data[1].schedules);
  const auto y = resumed.scores(data[1].input, data[1].schedules);
  REQUIRE(x.size() == y.size());
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == Approx(y[i]).epsilon(1e-5));
  // A checkpoint of another configuration is refused.
  CostModelConfig other = c;
  other.seed = 8;
  CostModel wrong = CostModel::create(other);
  CHECK_THROWS_WITH(wrong.train(data, data, rest), Catch::Contains("another configuration"));
}

TEST_CASE("cost model: fine-tuning the scoring head only leaves both encoders as they were") {
  CostModelConfig c;
  c.encoder = EncoderKind::Signature;
  c.seed = 5;
  CostModel m = CostModel::create(c);
  const auto data = synthetic_set(m, 6, 13);
  const learned::TrainOptions o = quick_training(2);
  m.train(data, {}, o);  // a trained model to start from
  const std::string dir = test::scratch_dir("cost-model-head-only");
  m.save(dir + "/before.model");
  const std::vector<double> before = m.scores(data[0].input, data[0].schedules);

  learned::TrainOptions head = o;
  head.head_only = true;
  CHECK_THROWS_WITH(m.train(data, {}, head), Catch::Contains("trained model to start from"));
  head.fine_tune = true;
  head.epochs = 3;
  const double loss_before = m.loss(data);
  m.train(data, {}, head);
  CHECK(m.loss(data) < loss_before);
  CHECK(m.scores(data[0].input, data[0].schedules) != before);
  m.save(dir + "/after.model");
  const auto tensors = [](const std::string& path) {
    learned::TensorFileReader r(path, learned::kCostModelMagic, learned::kCostModelVersions,
                                "cost model");
    std::map<std::string, std::vector<float>> out;
    for (learned::TensorFileReader::Tensor& t : r.read_all()) out[t.name] = std::move(t.data);
    return out;
  };
  const auto a = tensors(dir + "/before.model"), b = tensors(dir + "/after.model");
  REQUIRE(a.size() == b.size());
  int heads = 0, changed = 0;
  for (const auto& [name, values] : a) {
    INFO(name);
    REQUIRE(b.count(name) == 1);
    if (name.rfind("head", 0) == 0) {
      ++heads;
      changed += values != b.at(name);
    } else {
      CHECK(values == b.at(name));  // the encoders, the standardization: untouched
    }
  }
  CHECK(heads == 6);  // three layers' weights and biases
  CHECK(changed > 0);
  // Afterwards every weight trains again (full fine-tuning moves the encoders).
  learned::TrainOptions all = o;
  all.fine_tune = true;
  m.train(data, {}, all);
  m.save(dir + "/all.model");
  const auto d = tensors(dir + "/all.model");
  CHECK(d.at("feat1.weight") != b.at("feat1.weight"));
}

TEST_CASE("cost model: model file round trip and refusals") {
  const std::string dir = test::scratch_dir("cost-model-file");
  CostModelConfig c;
  c.encoder = EncoderKind::Signature;
  CostModel m = CostModel::create(c);
  m.record()["note"] = "kept";
  // The record is found in the header by following its strings and brackets (ModelRecord).
  m.record()["strings"] = {"}]\"{[\\", "\\\"", "record"};
  const auto ex = synthetic_example(m, gen("banded", 500, 4000, 2));
  const std::string path = dir + "/m.model";
  m.save(path);
  const CostModel back = CostModel::load(path);
  CHECK(back.record().at("note") == "kept");
  CHECK(back.record().at("strings") == m.record().at("strings"));
  CHECK(back.scores(ex.input, ex.schedules) == m.scores(ex.input, ex.schedules));
  CHECK_THROWS_WITH(CostModel::load(path, kernels::KernelKind::SpMM), Catch::Contains("for spmv, not spmm"));
  CHECK_THROWS_WITH(CostModel::load(path, std::nullopt, EncoderKind::Stats), Catch::Contains("signature encoder"));
  CHECK_THROWS_WITH(CostModel::load(dir + "/missing.model"), Catch::Contains("cannot open"));
  const std::string bytes = read_all(path);
  std::ofstream(dir + "/cut.model", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CHECK_THROWS_WITH(CostModel::load(dir + "/cut.model"), Catch::Contains("truncated"));
  std::ofstream(dir + "/foreign.model", std::ios::binary) << "not a model at all, just text";
  CHECK_THROWS_WITH(CostModel::load(dir + "/foreign.model"), Catch::Contains("bad magic"));
  std::string other = bytes;
  const std::string key = "\"schedule_encoding_version\":1";
  REQUIRE(other.find(key) != std::string::npos);
  other.replace(other.find(key), key.size(), "\"schedule_encoding_version\":9");
  std::ofstream(dir + "/v9.model", std::ios::binary) << other;
  CHECK_THROWS_WITH(CostModel::load(dir + "/v9.model"), Catch::Contains("encoding version 9"));
  // A header field of the wrong JSON type is a corrupt file, not a crash (same length: the
  // header's size is stored before it).
  std::string typed = bytes;
  const std::string end = "\"schedule_encoding_version\":1}";
  const std::string note = "\"note\":\"kept\"";
  REQUIRE(typed.find(end) != std::string::npos);
  REQUIRE(typed.find(note) != std::string::npos);
  typed.replace(typed.find(end), end.size(), "\"schedule_encoding_version\":[]}");
  typed.replace(typed.find(note), note.size(), "\"note\":\"kep\"");
  std::ofstream(dir + "/typed.model", std::ios::binary) << typed;
  CHECK_THROWS_WITH(CostModel::load(dir + "/typed.model"), Catch::Contains("corrupt cost model header"));
  // The training record is parsed when first read: a record that is not JSON loads and ranks,
  // and says so when read, every time.
  std::string record = bytes;
  REQUIRE(record.find(note) != std::string::npos);
  record.replace(record.find(note), note.size(), "\"note\":[kept]");
  std::ofstream(dir + "/record.model", std::ios::binary) << record;
  const CostModel unread = CostModel::load(dir + "/record.model");
  CHECK(unread.scores(ex.input, ex.schedules) == m.scores(ex.input, ex.schedules));
  CHECK_THROWS_WITH(unread.record(), Catch::Contains("corrupt cost model header"));
  CHECK_THROWS_WITH(unread.record(), Catch::Contains("record.model"));
  // NaN weights are refused.
  std::string nan = bytes;
  const float q = std::numeric_limits<float>::quiet_NaN();
  nan.replace(nan.size() - 8, 4, reinterpret_cast<const char*>(&q), 4);
  std::ofstream(dir + "/nan.model", std::ios::binary) << nan;
  CHECK_THROWS_WITH(CostModel::load(dir + "/nan.model"), Catch::Contains("NaN"));
  // So are infinities (a negative one, a value before).
  std::string inf = bytes;
  const float ninf = -std::numeric_limits<float>::infinity();
  inf.replace(inf.size() - 12, 4, reinterpret_cast<const char*>(&ninf), 4);
  std::ofstream(dir + "/inf.model", std::ios::binary) << inf;
  CHECK_THROWS_WITH(CostModel::load(dir + "/inf.model"), Catch::Contains("infinite"));
  // An unwritable destination fails before anything is written.
  CHECK_THROWS_AS(m.save("/proc/no/such/dir/m.model"), kernels::Error);
}

TEST_CASE("cost model: trained briefly on the committed measurements, heavy padding ranks below csr") {
  const std::vector<std::string> files = learned::committed_exports();
  if (files.empty()) {
    WARN("no committed dataset: skipped");
    return;
  }
  CostModelConfig c;
  c.encoder = EncoderKind::Signature;
  CostModel m = CostModel::create(c);
  std::vector<RankingExample> train;
  std::vector<std::string> dirs;
  if (auto d = test::shared_data_dir()) dirs.push_back(*d);
  for (const auto& j : cli::load_groups("spmv", "", files)) {
    const learned::DatasetGroup g = learned::group_from_json(j);
    // Generated matrices only (a fresh machine may lack the real files), 60 of them.
    if (g.split != "train" || g.source.rfind("generator:", 0) != 0 || train.size() >= 60) continue;
    train.push_back(learned::make_example(m, g, dirs));
  }
  REQUIRE(train.size() >= 30);
  learned::TrainOptions o;
  o.epochs = 15;
  o.threads = 2;
  m.train(train, {}, o);
  // A matrix it never saw: 0.16% dense; 16x16 blocks store ~100 values per nonzero.
  const auto in = m.prepare(gen("uniform", 5000, 40000, 99));
  const auto s = m.scores(in, {sched("csr"), sched("split=i:16,k:16 order=i1,k1,i0,k0 format=UCUU parallel=i1 chunk=16")});
  CHECK(s[0] < s[1]);
}
