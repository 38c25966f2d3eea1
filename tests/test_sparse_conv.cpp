// Unit "sparse_conv": WACONet's sparse convolution layers. Every sparse layer must equal
// LibTorch's dense conv2d / conv3d on the densified input, read at the active output sites,
// forward and backward (weight and input gradients), in double precision for both
// implementations (fused, autograd), and in single precision with 8/16/32 channels (the
// AVX2 kernels), with and without the fused ReLU. The kernel maps themselves are checked against
// brute force in test_kernel_map.cpp. This test includes <torch/...> (the one place outside
// learned/src allowed to) because the dense convolutions are its oracle.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <torch/torch.h>

#include "kernel_map.hpp"
#include "sparse_conv.hpp"
#include "waco/kernels/error.hpp"

// LibTorch brings glog, whose CHECK macro would shadow Catch2's: drop it before Catch2 defines
// its own (so torch must be included first).
#undef CHECK
#include <catch2/catch.hpp>

namespace {

using namespace waco::learned;

// A random set of distinct coordinates in the grid `extent` with about `density` of it active,
// in row-major order (as a canonical operand would give), plus one corner site.
SiteSet random_sites(std::vector<std::int64_t> extent, double density, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  SiteSet s;
  s.dims = static_cast<int>(extent.size());
  s.extent = extent;
  std::int64_t total = 1;
  for (auto e : extent) total *= e;
  for (std::int64_t lin = 0; lin < total; ++lin) {
    if (!(u(rng) < density || lin == total - 1)) continue;
    std::int64_t rest = lin;
    std::vector<std::int32_t> c(s.dims);
    for (int m = s.dims - 1; m >= 0; --m) {
      c[m] = static_cast<std::int32_t>(rest % extent[m]);
      rest /= extent[m];
    }
    s.coords.insert(s.coords.end(), c.begin(), c.end());
  }
  return s;
}

// downsample() + strided_map(), the way build_geometry chains them.
KernelMap stride2_map(const SiteSet& in, SiteSet& out, int kernel) {
  out = downsample(in, 2);
  return strided_map(in, out, kernel, 2);
}

std::vector<std::int32_t> site(const SiteSet& s, std::int64_t i) {
  return {s.coords.begin() + i * s.dims, s.coords.begin() + (i + 1) * s.dims};
}

// The dense tensor [1][C][extent...] with the rows of `feat` at the sites.
torch::Tensor densify(const SiteSet& s, const torch::Tensor& feat) {
  std::vector<std::int64_t> sizes = {1, feat.size(1)};
  sizes.insert(sizes.end(), s.extent.begin(), s.extent.end());
  auto d = torch::zeros(sizes, feat.options());
  for (std::int64_t i = 0; i < s.sites(); ++i) {
    const auto c = site(s, i);
    if (s.dims == 2) d.index_put_({0, torch::indexing::Slice(), c[0], c[1]}, feat[i]);
    else d.index_put_({0, torch::indexing::Slice(), c[0], c[1], c[2]}, feat[i]);
  }
  return d;
}

// The rows of a dense [1][C][...] tensor at the sites: [sites][C].
torch::Tensor at_sites(const SiteSet& s, const torch::Tensor& d) {
  std::vector<torch::Tensor> rows;
  for (std::int64_t i = 0; i < s.sites(); ++i) {
    const auto c = site(s, i);
    rows.push_back(s.dims == 2 ? d.index({0, torch::indexing::Slice(), c[0], c[1]})
                               : d.index({0, torch::indexing::Slice(), c[0], c[1], c[2]}));
  }
  return torch::stack(rows);
}

// Sparse weight [K][cin][cout] -> dense weight [cout][cin][k...] (offset j = position d + k/2).
torch::Tensor dense_weight(const torch::Tensor& w, int dims, int k) {
  std::vector<std::int64_t> sizes = {w.size(2), w.size(1)};
  for (int m = 0; m < dims; ++m) sizes.push_back(k);
  // [K][cin][cout] -> [cout][cin][K] -> [cout][cin][k][k](...), offsets row-major = kernel order.
  return w.permute({2, 1, 0}).reshape(sizes);
}

struct LayerCase {
  std::vector<std::int64_t> extent;
  double density;
  int kernel;
  int stride;
  int cin, cout;
};

// The layer against the dense convolution (followed by a ReLU when `relu`), forward, input and
// weight gradients; `tol` relative and absolute.
void check_layer(const LayerCase& lc, ConvImpl impl, std::uint32_t seed,
                 torch::Dtype dtype = torch::kDouble, bool relu = false) {
  const double tol = dtype == torch::kDouble ? 1e-10 : 1e-4;
  torch::manual_seed(seed);
  const int dims = static_cast<int>(lc.extent.size());
  SiteSet in = random_sites(lc.extent, lc.density, seed);
  SiteSet out;
  std::shared_ptr<KernelMap> km;
  if (lc.stride == 1) {
    out = in;
    km = std::make_shared<KernelMap>(submanifold_map(in, lc.kernel, 2));
  } else {
    km = std::make_shared<KernelMap>(stride2_map(in, out, lc.kernel));
  }
  TorchKernelMap tkm(km);
  const auto opts = torch::TensorOptions().dtype(dtype);
  auto x = torch::randn({in.sites(), lc.cin}, opts);
  // Exact zeros, as a ReLU output has, exercise the zero-skipping paths.
  x.masked_fill_(torch::rand({in.sites(), lc.cin}, opts) < 0.3, 0.0);
  x.requires_grad_(true);
  auto w = torch::randn({km->offsets, lc.cin, lc.cout}, opts).requires_grad_(true);
  auto g = torch::randn({out.sites(), lc.cout}, opts);

  auto y = sparse_conv(x, w, tkm, impl, relu);
  REQUIRE(y.size(0) == out.sites());
  REQUIRE(y.size(1) == lc.cout);
  (y * g).sum().backward();

  auto xd = densify(in, x.detach()).requires_grad_(true);
  auto wd = dense_weight(w.detach(), dims, lc.kernel).requires_grad_(true);
  const int pad = lc.kernel / 2;
  auto yd = dims == 2 ? torch::conv2d(xd, wd, {}, lc.stride, pad)
                      : torch::conv3d(xd, wd, {}, lc.stride, pad);
  if (relu) yd = torch::relu(yd);
  (yd * densify(out, g)).sum().backward();

  CHECK(torch::allclose(y.detach(), at_sites(out, yd.detach()), tol, tol));
  CHECK(torch::allclose(x.grad(), at_sites(in, xd.grad()), tol, tol));
  auto gw_dense = dense_weight(w.grad(), dims, lc.kernel);
  CHECK(torch::allclose(gw_dense, wd.grad(), 10 * tol, 10 * tol));
}

}  // namespace

TEST_CASE("sparse_conv: layers equal dense conv2d forward and backward (double)") {
  const std::vector<LayerCase> cases = {
      {{13, 11}, 0.25, 5, 1, 1, 4},   // WACONet's first layer shape (1 -> C, 5x5, stride 1)
      {{13, 11}, 0.25, 3, 2, 3, 4},   // strided 3x3, odd extents
      {{16, 20}, 0.10, 3, 2, 4, 2},   // strided, even extents, sparser
      {{9, 10}, 0.6, 3, 1, 2, 3},     // dense-ish submanifold
      {{1, 25}, 0.5, 3, 2, 2, 2},     // a single row
      {{25, 1}, 0.5, 3, 2, 2, 2},     // a single column
  };
  for (auto impl : {ConvImpl::Fused, ConvImpl::Autograd}) {
    std::uint32_t seed = 100;
    for (const auto& lc : cases) {
      INFO("impl " << conv_impl_name(impl) << " kernel " << lc.kernel << " stride " << lc.stride);
      check_layer(lc, impl, seed++);
    }
  }
}

TEST_CASE("sparse_conv: layers equal dense conv3d forward and backward (double)") {
  const std::vector<LayerCase> cases = {
      {{6, 7, 5}, 0.2, 3, 1, 1, 3},
      {{7, 6, 5}, 0.2, 3, 2, 2, 3},
      {{5, 5, 6}, 0.3, 5, 1, 1, 2},
  };
  for (auto impl : {ConvImpl::Fused, ConvImpl::Autograd}) {
    std::uint32_t seed = 200;
    for (const auto& lc : cases) {
      INFO("impl " << conv_impl_name(impl) << " kernel " << lc.kernel << " stride " << lc.stride);
      check_layer(lc, impl, seed++);
    }
  }
}

TEST_CASE("sparse_conv: float layers, 8/16/32 channels, with and without ReLU equal dense conv2d") {
  // WACONet's shapes in single precision: the AVX2 kernels (8/16/32 output channels, pairs two
  // at a time with an odd tail, weight-gradient blocks of 64 pairs) and the fused ReLU.
  const std::vector<LayerCase> cases = {
      {{40, 37}, 0.3, 5, 1, 1, 32},   // first layer: 1 -> 32, 5x5
      {{41, 36}, 0.3, 3, 2, 32, 32},  // strided 32 -> 32
      {{30, 33}, 0.2, 3, 2, 16, 16},
      {{27, 29}, 0.2, 3, 1, 8, 8},
      {{20, 21}, 0.3, 3, 2, 5, 7},    // no AVX2 kernel: the generic one
  };
  for (auto impl : {ConvImpl::Fused, ConvImpl::Autograd})
    for (bool relu : {false, true}) {
      std::uint32_t seed = 300;
      for (const auto& lc : cases) {
        INFO("impl " << conv_impl_name(impl) << " relu " << relu << " cin " << lc.cin << " cout "
                     << lc.cout << " stride " << lc.stride);
        check_layer(lc, impl, seed++, torch::kFloat, relu);
      }
    }
}

TEST_CASE("sparse_conv: fused and autograd agree in single precision on a larger pattern") {
  torch::manual_seed(7);
  SiteSet in = random_sites({300, 280}, 0.02, 9);
  SiteSet out;
  TorchKernelMap tkm(std::make_shared<KernelMap>(stride2_map(in, out, 3)));
  auto x1 = torch::relu(torch::randn({in.sites(), 32})).requires_grad_(true);
  auto w1 = torch::randn({9, 32, 32}).requires_grad_(true);
  auto x2 = x1.detach().clone().requires_grad_(true);
  auto w2 = w1.detach().clone().requires_grad_(true);
  auto g = torch::randn({out.sites(), 32});
  auto y1 = sparse_conv(x1, w1, tkm, ConvImpl::Fused);
  auto y2 = sparse_conv(x2, w2, tkm, ConvImpl::Autograd);
  (y1 * g).sum().backward();
  (y2 * g).sum().backward();
  CHECK(torch::allclose(y1, y2, 1e-4, 1e-4));
  CHECK(torch::allclose(x1.grad(), x2.grad(), 1e-4, 1e-4));
  CHECK(torch::allclose(w1.grad(), w2.grad(), 1e-3, 1e-3));
  CHECK(tkm.pair_bytes() == 16 * tkm.map().pairs);
}

TEST_CASE("sparse_conv: conv + ReLU + pooling in one node equals the composition") {
  // The fused layer's backward folds the pooling's gradient into the output gradient; the loss
  // reads both outputs so that both gradient paths are exercised.
  torch::manual_seed(11);
  const auto opts = torch::TensorOptions().dtype(torch::kDouble);
  for (int stride : {1, 2}) {
    SiteSet in = random_sites({60, 50}, 0.08, 21 + stride);
    SiteSet out = in;
    auto km = std::make_shared<KernelMap>(stride == 1 ? submanifold_map(in, 5, 2)
                                                      : stride2_map(in, out, 3));
    TorchKernelMap tkm(km);
    const auto x0 = torch::randn({in.sites(), 6}, opts);
    const auto w0 = torch::randn({km->offsets, 6, 8}, opts);
    const auto g = torch::randn({out.sites(), 8}, opts);
    const auto h = torch::randn({8}, opts);
    auto xr = x0.clone().requires_grad_(true), wr = w0.clone().requires_grad_(true);
    auto yr = torch::relu(sparse_conv(xr, wr, tkm, ConvImpl::Autograd));
    ((yr * g).sum() + (yr.mean(0) * h).sum()).backward();
    for (auto impl : {ConvImpl::Fused, ConvImpl::Autograd}) {
      INFO("impl " << conv_impl_name(impl) << " stride " << stride);
      auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
      auto [y, mean] = sparse_conv_relu_pool(x, w, tkm, impl);
      ((y * g).sum() + (mean * h).sum()).backward();
      CHECK(torch::allclose(y, yr, 1e-10, 1e-10));
      CHECK(torch::allclose(mean, yr.mean(0), 1e-10, 1e-10));
      CHECK(torch::allclose(x.grad(), xr.grad(), 1e-10, 1e-10));
      CHECK(torch::allclose(w.grad(), wr.grad(), 1e-9, 1e-9));
      // Only the pooled output in the loss: the output gradient is undefined.
      auto x2 = x0.clone().requires_grad_(true), w2 = w0.clone().requires_grad_(true);
      auto [y2, mean2] = sparse_conv_relu_pool(x2, w2, tkm, impl);
      (mean2 * h).sum().backward();
      auto x3 = x0.clone().requires_grad_(true), w3 = w0.clone().requires_grad_(true);
      (torch::relu(sparse_conv(x3, w3, tkm, ConvImpl::Autograd)).mean(0) * h).sum().backward();
      CHECK(torch::allclose(x2.grad(), x3.grad(), 1e-10, 1e-10));
      CHECK(torch::allclose(w2.grad(), w3.grad(), 1e-9, 1e-9));
    }
  }
}

TEST_CASE("sparse_conv: an empty pattern gives empty outputs and zero weight gradients") {
  SiteSet in;
  in.dims = 2;
  in.extent = {10, 10};
  SiteSet out;
  TorchKernelMap tkm(std::make_shared<KernelMap>(stride2_map(in, out, 3)));
  CHECK(out.sites() == 0);
  for (auto impl : {ConvImpl::Fused, ConvImpl::Autograd}) {
    auto x = torch::zeros({0, 4}).requires_grad_(true);
    auto w = torch::randn({9, 4, 4}).requires_grad_(true);
    auto y = sparse_conv(x, w, tkm, impl);
    CHECK(y.size(0) == 0);
    y.sum().backward();
    if (w.grad().defined()) CHECK(w.grad().abs().sum().item<float>() == 0.0f);
  }
}
