// Unit "waconet": the WACONet feature extractor through its torch-free public API: architecture
// parameters and variants, shapes of the embedding and pooled features, determinism with a seed,
// agreement of the two convolution implementations and of thread counts, batched inference
// against one pattern at a time, forward+backward, the versioned weights file (round trip, wrong
// architecture, corrupt files) and dims checks.
// (The layer-by-layer comparison with dense convolutions is in test_sparse_conv.cpp.)
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <string>

#include "support/test_paths.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/learned/feature_extractor.hpp"

namespace {

using namespace waco;
using learned::FeatureExtractor;
using learned::waconet_variant;

// A canonical random matrix: a band plus scattered entries plus one dense row.
kernels::CooMatrix test_matrix(kernels::index_t rows, kernels::index_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  kernels::CooMatrix a;
  a.rows = rows;
  a.cols = cols;
  auto add = [&](kernels::index_t r, kernels::index_t c) {
    a.row.push_back(r);
    a.col.push_back(c);
    a.val.push_back(1.0f);
  };
  for (kernels::index_t r = 0; r < rows; ++r) {
    for (kernels::index_t d = -1; d <= 1; ++d)
      if (r + d >= 0 && r + d < cols) add(r, r + d);
    add(r, static_cast<kernels::index_t>(rng() % cols));
  }
  for (kernels::index_t c = 0; c < cols; c += 3) add(rows / 2, c);
  kernels::canonicalize(a);
  return a;
}

std::string scratch(const std::string& name) {
  // A folder of its own per file: each test case runs in a process of its own under ctest -j, and
  // scratch_dir empties the folder it names (one shared folder lost another case's file between
  // its save and its load: "weights save and load round trip" failed once, session 76).
  return test::scratch_dir("waconet/" + name) + "/" + name;
}

bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

}  // namespace

TEST_CASE("waconet: params round-trip through text and variants are valid") {
  for (const auto& name : learned::waconet_variant_names())
    for (int dims : {2, 3}) {
      const auto p = waconet_variant(name, dims);
      const auto q = learned::WacoNetParams::parse(p.to_string());
      CHECK(q.same_architecture(p));
      CHECK(q.name == p.name);
      CHECK(q.to_string() == p.to_string());
    }
  const auto full = waconet_variant("full");
  CHECK(full.pooled_size() == 448);  // 14 layers x 32 channels (ARCHITECTURE.md section 5)
  CHECK(full.pooled_size() + full.meta_out == 480);
  CHECK_FALSE(full.same_architecture(waconet_variant("small")));
  CHECK_THROWS_AS(waconet_variant("huge"), kernels::Error);
  auto bad = full;
  bad.kernel = 4;
  CHECK_THROWS_AS(bad.validate(), kernels::Error);
  CHECK_THROWS_AS(learned::WacoNetParams::parse(full.to_string() + " extra=1"), kernels::Error);
  CHECK_THROWS_AS(learned::WacoNetParams::parse("name=full dims=2"), kernels::Error);
  CHECK(learned::parse_conv_impl("autograd") == learned::ConvImpl::Autograd);
  CHECK_THROWS_AS(learned::parse_conv_impl("cuda"), kernels::Error);
}

TEST_CASE("waconet: shapes of the embedding, pooled features and pattern statistics") {
  REQUIRE(learned::built_with_torch());
  learned::set_threads(2);
  const auto a = test_matrix(300, 250, 1);
  for (const auto& name : learned::waconet_variant_names()) {
    const auto p = waconet_variant(name);
    auto fx = FeatureExtractor::create(p, 1);
    const auto f = fx.extract(a);
    CHECK(static_cast<int>(f.embedding.size()) == p.embedding);
    CHECK(static_cast<int>(f.pooled.size()) == p.pooled_size());
    CHECK(all_finite(f.embedding));
    REQUIRE(static_cast<int>(f.pattern.sites.size()) == p.conv_layers());
    CHECK(f.pattern.sites[0] == a.nnz());
    for (std::size_t l = 1; l < f.pattern.sites.size(); ++l)
      CHECK(f.pattern.sites[l] <= f.pattern.sites[l - 1]);
    CHECK(f.pattern.sites.back() >= 1);
    CHECK(static_cast<int>(f.times.layers.size()) == p.conv_layers());
    CHECK(f.times.kernel_maps > 0.0);
    CHECK(f.times.total >= f.times.forward);
    // ReLU outputs are pooled: every pooled value is non-negative.
    for (float v : f.pooled) CHECK(v >= 0.0f);
  }
}

TEST_CASE("waconet: the same seed gives the same network, another seed another") {
  const auto a = test_matrix(200, 200, 2);
  const auto p = waconet_variant("small");
  const auto e1 = FeatureExtractor::create(p, 42).extract(a).embedding;
  const auto e2 = FeatureExtractor::create(p, 42).extract(a).embedding;
  const auto e3 = FeatureExtractor::create(p, 43).extract(a).embedding;
  CHECK(e1 == e2);
  CHECK(e1 != e3);
}

TEST_CASE("waconet: different patterns give different embeddings") {
  auto fx = FeatureExtractor::create(waconet_variant("small"), 1);
  CHECK(fx.extract(test_matrix(200, 200, 2)).embedding !=
        fx.extract(test_matrix(200, 200, 3)).embedding);
}

TEST_CASE("waconet: fused and autograd convolutions and 1 or 2 threads agree") {
  const auto a = test_matrix(400, 380, 4);
  auto fx = FeatureExtractor::create(waconet_variant("full"), 5);
  const auto p = fx.prepare(a);
  learned::set_threads(1);
  const auto f1 = fx.extract(p);
  learned::set_threads(2);
  const auto f2 = fx.extract(p);
  CHECK(f1.embedding == f2.embedding);  // output-stationary forward: no reduction order change
  fx.set_conv_impl(learned::ConvImpl::Autograd);
  const auto f3 = fx.extract(p);
  REQUIRE(f3.embedding.size() == f1.embedding.size());
  for (std::size_t i = 0; i < f1.embedding.size(); ++i)
    CHECK(f3.embedding[i] == Approx(f1.embedding[i]).margin(1e-4).epsilon(1e-4));
}

TEST_CASE("waconet: a batch of patterns gives what each pattern gives alone") {
  kernels::CooMatrix empty;
  empty.rows = 30;
  empty.cols = 40;
  const std::vector<kernels::CooMatrix> mats = {test_matrix(300, 280, 11), test_matrix(40, 90, 12),
                                                empty, test_matrix(500, 500, 13)};
  for (auto impl : {learned::ConvImpl::Fused, learned::ConvImpl::Autograd}) {
    auto fx = FeatureExtractor::create(waconet_variant("full"), 8);
    fx.set_conv_impl(impl);
    std::vector<learned::PreparedPattern> batch;
    for (const auto& a : mats) batch.push_back(fx.prepare(a));
    const auto fs = fx.extract(batch);
    REQUIRE(fs.size() == mats.size());
    for (std::size_t b = 0; b < mats.size(); ++b) {
      INFO("impl " << learned::conv_impl_name(impl) << " matrix " << b);
      const auto one = fx.extract(batch[b]);
      REQUIRE(fs[b].embedding.size() == one.embedding.size());
      REQUIRE(fs[b].pooled.size() == one.pooled.size());
      for (std::size_t i = 0; i < one.pooled.size(); ++i)
        CHECK(fs[b].pooled[i] == Approx(one.pooled[i]).margin(1e-6).epsilon(1e-5));
      for (std::size_t i = 0; i < one.embedding.size(); ++i)
        CHECK(fs[b].embedding[i] == Approx(one.embedding[i]).margin(1e-6).epsilon(1e-5));
      CHECK(fs[b].pattern.pairs == one.pattern.pairs);
    }
    // Different matrices in one batch still give different embeddings.
    CHECK(fs[0].embedding != fs[3].embedding);
  }
  auto fx = FeatureExtractor::create(waconet_variant("small"), 8);
  CHECK(fx.extract(std::vector<learned::PreparedPattern>{}).empty());
}

TEST_CASE("waconet: forward_backward reuses the pattern and matches the forward pass") {
  const auto a = test_matrix(250, 260, 6);
  auto fx = FeatureExtractor::create(waconet_variant("small"), 3);
  const auto p = fx.prepare(a);
  const auto f = fx.extract(p);
  const auto fb1 = fx.forward_backward(p);
  const auto fb2 = fx.forward_backward(p);
  REQUIRE(fb1.embedding.size() == f.embedding.size());
  for (std::size_t i = 0; i < f.embedding.size(); ++i)
    CHECK(fb1.embedding[i] == Approx(f.embedding[i]).margin(1e-6));
  CHECK(fb1.embedding == fb2.embedding);
  CHECK(fb1.times.backward > 0.0);
  REQUIRE(fb1.times.layers_backward.size() == fb1.times.layers.size());
  for (double t : fb1.times.layers_backward) CHECK(t >= 0.0);
  CHECK(fb1.times.kernel_maps == 0.0);  // a prepared pattern: no kernel map work
  CHECK(fx.parameter_count() > 0);
}

TEST_CASE("waconet: weights save and load round trip, including the standardization") {
  const auto a = test_matrix(150, 170, 7);
  auto fx = FeatureExtractor::create(waconet_variant("tiny"), 9);
  fx.set_standardization({10.0f, 11.0f, 13.0f}, {2.0f, 3.0f, 5.0f});
  const std::string path = scratch("tiny.weights");
  fx.save(path);
  const auto tiny = waconet_variant("tiny");
  auto back = FeatureExtractor::load(path, &tiny);
  CHECK(back.params().to_string() == fx.params().to_string());
  CHECK(back.extract(a).embedding == fx.extract(a).embedding);
  auto any = FeatureExtractor::load(path);  // the file's own architecture
  CHECK(any.params().same_architecture(tiny));
  CHECK_THROWS_AS(fx.set_standardization({1.0f}, {1.0f}), kernels::Error);
}

TEST_CASE("waconet: loading weights of another architecture fails with a clear error") {
  const std::string path = scratch("small.weights");
  FeatureExtractor::create(waconet_variant("small"), 1).save(path);
  const auto full = waconet_variant("full");
  try {
    FeatureExtractor::load(path, &full);
    FAIL("loading small weights as full must fail");
  } catch (const kernels::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("architecture") != std::string::npos);
    CHECK(what.find("channels=16") != std::string::npos);
    CHECK(what.find("channels=32") != std::string::npos);
    CHECK(std::string(e.hint()).find("--arch small") != std::string::npos);
  }
}

TEST_CASE("waconet: missing, foreign and truncated weights files are refused") {
  CHECK_THROWS_AS(FeatureExtractor::load(scratch("does-not-exist")), kernels::Error);
  const std::string foreign = scratch("foreign.weights");
  std::ofstream(foreign) << "this is not a weights file\n";
  CHECK_THROWS_WITH(FeatureExtractor::load(foreign), Catch::Contains("not a WACONet weights"));
  const std::string good = scratch("good.weights");
  FeatureExtractor::create(waconet_variant("tiny"), 1).save(good);
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = scratch("cut.weights");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CHECK_THROWS_WITH(FeatureExtractor::load(cut), Catch::Contains("truncated"));
  std::string newer = bytes;
  newer[8] = 99;  // format version
  const std::string ver = scratch("newer.weights");
  std::ofstream(ver, std::ios::binary) << newer;
  CHECK_THROWS_WITH(FeatureExtractor::load(ver), Catch::Contains("format version 99"));
}

TEST_CASE("waconet: the 3-D variant reads tensors and dims mismatches are errors") {
  kernels::CooTensor t;
  t.dims = {20, 15, 12};
  t.idx.assign(3, {});
  std::mt19937 rng(3);
  for (int e = 0; e < 300; ++e) {
    t.idx[0].push_back(static_cast<kernels::index_t>(rng() % 20));
    t.idx[1].push_back(static_cast<kernels::index_t>(rng() % 15));
    t.idx[2].push_back(static_cast<kernels::index_t>(rng() % 12));
    t.val.push_back(1.0f);
  }
  kernels::canonicalize(t);
  auto fx3 = FeatureExtractor::create(waconet_variant("small", 3), 1);
  const auto f = fx3.extract(t);
  CHECK(f.embedding.size() == 128);
  CHECK(f.pattern.sites[0] == t.nnz());
  CHECK(all_finite(f.embedding));
  CHECK_THROWS_AS(fx3.extract(test_matrix(10, 10, 1)), kernels::Error);
  auto fx2 = FeatureExtractor::create(waconet_variant("small", 2), 1);
  CHECK_THROWS_AS(fx2.extract(t), kernels::Error);
  // A pattern prepared for one architecture is refused by another.
  auto tiny = FeatureExtractor::create(waconet_variant("tiny", 2), 1);
  CHECK_THROWS_AS(tiny.extract(fx2.prepare(test_matrix(10, 10, 1))), kernels::Error);
}

TEST_CASE("waconet: an empty matrix gives a finite embedding") {
  kernels::CooMatrix a;
  a.rows = 50;
  a.cols = 40;
  auto fx = FeatureExtractor::create(waconet_variant("small"), 1);
  const auto f = fx.extract(a);
  CHECK(all_finite(f.embedding));
  for (float v : f.pooled) CHECK(v == 0.0f);
  const auto fb = fx.forward_backward(fx.prepare(a));
  CHECK(all_finite(fb.embedding));
}
