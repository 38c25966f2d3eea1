// Unit "sparse_conv": WACONet's coordinate hash, kernel maps and sparse convolution layers.
// Every sparse layer must equal LibTorch's dense conv2d / conv3d on the densified input, read at
// the active output sites, forward and backward (weight and input gradients), in double
// precision, for both implementations (fused custom function, autograd composition); kernel maps
// must equal a brute-force neighbour search. This test includes <torch/...> (the one place
// outside learned/src allowed to) because the dense convolutions are its oracle.
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
  CoordinateHash out_hash({1}, 1);
  std::vector<std::int32_t> parent;
  out = downsample(in, &out_hash, &parent);
  return strided_map(in, out, out_hash, parent, kernel, 2);
}

std::vector<std::int32_t> site(const SiteSet& s, std::int64_t i) {
  return {s.coords.begin() + i * s.dims, s.coords.begin() + (i + 1) * s.dims};
}

std::int64_t brute_find(const SiteSet& s, const std::vector<std::int32_t>& c) {
  for (std::int64_t i = 0; i < s.sites(); ++i)
    if (site(s, i) == c) return i;
  return -1;
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

void check_layer(const LayerCase& lc, ConvImpl impl, std::uint32_t seed) {
  torch::manual_seed(seed);
  const int dims = static_cast<int>(lc.extent.size());
  SiteSet in = random_sites(lc.extent, lc.density, seed);
  CoordinateHash hash = build_hash(in);
  SiteSet out;
  std::shared_ptr<KernelMap> km;
  if (lc.stride == 1) {
    out = in;
    km = std::make_shared<KernelMap>(submanifold_map(in, hash, lc.kernel, 2));
  } else {
    km = std::make_shared<KernelMap>(stride2_map(in, out, lc.kernel));
  }
  TorchKernelMap tkm(km);
  const auto opts = torch::TensorOptions().dtype(torch::kDouble);
  auto x = torch::randn({in.sites(), lc.cin}, opts);
  // Exact zeros, as a ReLU output has, exercise the zero-skipping paths.
  x.masked_fill_(torch::rand({in.sites(), lc.cin}, opts) < 0.3, 0.0);
  x.requires_grad_(true);
  auto w = torch::randn({km->offsets, lc.cin, lc.cout}, opts).requires_grad_(true);
  auto g = torch::randn({out.sites(), lc.cout}, opts);

  auto y = sparse_conv(x, w, tkm, impl);
  REQUIRE(y.size(0) == out.sites());
  REQUIRE(y.size(1) == lc.cout);
  (y * g).sum().backward();

  auto xd = densify(in, x.detach()).requires_grad_(true);
  auto wd = dense_weight(w.detach(), dims, lc.kernel).requires_grad_(true);
  const int pad = lc.kernel / 2;
  auto yd = dims == 2 ? torch::conv2d(xd, wd, {}, lc.stride, pad)
                      : torch::conv3d(xd, wd, {}, lc.stride, pad);
  (yd * densify(out, g)).sum().backward();

  CHECK(torch::allclose(y.detach(), at_sites(out, yd.detach()), 1e-10, 1e-10));
  CHECK(torch::allclose(x.grad(), at_sites(in, xd.grad()), 1e-10, 1e-10));
  auto gw_dense = dense_weight(w.grad(), dims, lc.kernel);
  CHECK(torch::allclose(gw_dense, wd.grad(), 1e-9, 1e-9));
}

}  // namespace

TEST_CASE("sparse_conv: coordinate hash finds every site and nothing else") {
  SiteSet s = random_sites({37, 53}, 0.1, 3);
  CoordinateHash h = build_hash(s);
  std::set<std::vector<std::int32_t>> present;
  for (std::int64_t i = 0; i < s.sites(); ++i) {
    CHECK(h.find(site(s, i).data()) == i);
    present.insert(site(s, i));
  }
  for (std::int32_t r = -2; r < 40; ++r)
    for (std::int32_t c = -2; c < 56; ++c) {
      const std::int32_t q[2] = {r, c};
      if (!present.count({r, c})) CHECK(h.find(q) == -1);
    }
  CHECK(h.insert(site(s, 0).data(), 999) == 0);  // present: keeps the old id
}

TEST_CASE("sparse_conv: coordinate keys wider than 63 bits are refused") {
  const std::vector<std::int64_t> wide = {1LL << 30, 1LL << 30, 1LL << 30};
  const std::vector<std::int64_t> fits = {1LL << 31, 1LL << 31};
  CHECK_THROWS_AS(CoordinateHash(wide, 10), waco::kernels::Error);
  CHECK_NOTHROW(CoordinateHash(fits, 10));
}

TEST_CASE("sparse_conv: downsampling gives the distinct halved coordinates in first-seen order") {
  for (auto extent : std::vector<std::vector<std::int64_t>>{{29, 17}, {9, 8, 7}}) {
    SiteSet in = random_sites(extent, 0.15, 11);
    CoordinateHash out_hash({1}, 1);
    std::vector<std::int32_t> parent;
    SiteSet out = downsample(in, &out_hash, &parent);
    std::vector<std::vector<std::int32_t>> expect;
    for (std::int64_t i = 0; i < in.sites(); ++i) {
      auto c = site(in, i);
      for (auto& v : c) v /= 2;
      if (std::find(expect.begin(), expect.end(), c) == expect.end()) expect.push_back(c);
    }
    REQUIRE(out.sites() == static_cast<std::int64_t>(expect.size()));
    for (std::int64_t i = 0; i < out.sites(); ++i) {
      CHECK(site(out, i) == expect[i]);
      CHECK(out_hash.find(site(out, i).data()) == i);
    }
    for (std::int64_t i = 0; i < in.sites(); ++i) {
      auto c = site(in, i);
      for (auto& v : c) v /= 2;
      CHECK(site(out, parent[i]) == c);
    }
    for (std::size_t m = 0; m < extent.size(); ++m) CHECK(out.extent[m] == (extent[m] + 1) / 2);
  }
}

TEST_CASE("sparse_conv: kernel maps equal a brute-force neighbour search") {
  for (auto extent : std::vector<std::vector<std::int64_t>>{{23, 31}, {1, 40}, {8, 9, 7}}) {
    const int dims = static_cast<int>(extent.size());
    SiteSet in = random_sites(extent, 0.2, 5);
    CoordinateHash hash = build_hash(in);
    for (int kernel : {3, 5}) {
      const auto off = kernel_offsets(dims, kernel);
      const int K = static_cast<int>(off.size()) / dims;
      // Stride 1: output sites are the input sites, neighbour at c + d.
      const KernelMap sub = submanifold_map(in, hash, kernel, 2);
      std::int64_t pairs = 0;
      for (std::int64_t o = 0; o < in.sites(); ++o)
        for (int j = 0; j < K; ++j) {
          auto c = site(in, o);
          for (int m = 0; m < dims; ++m) c[m] += off[j * dims + m];
          const auto i = brute_find(in, c);
          CHECK(sub.neighbors[o * K + j] == i);
          pairs += i >= 0;
        }
      CHECK(sub.pairs == pairs);
      // Stride 2: output sites are the downsampled sites, neighbour at 2q + d, reverse map.
      SiteSet out;
      const KernelMap st = stride2_map(in, out, kernel);
      std::vector<std::int32_t> rev(static_cast<std::size_t>(in.sites()) * K, -1);
      pairs = 0;
      for (std::int64_t o = 0; o < out.sites(); ++o)
        for (int j = 0; j < K; ++j) {
          auto c = site(out, o);
          for (int m = 0; m < dims; ++m) c[m] = 2 * c[m] + off[j * dims + m];
          const auto i = brute_find(in, c);
          CHECK(st.neighbors[o * K + j] == i);
          if (i >= 0) {
            rev[i * K + j] = static_cast<std::int32_t>(o);
            ++pairs;
          }
        }
      CHECK(st.pairs == pairs);
      CHECK(st.reverse == rev);
      // Every input site reaches its own downsampled site through the centre-ish offsets.
      CHECK(pairs >= in.sites());
    }
  }
}

TEST_CASE("sparse_conv: layers equal dense conv2d forward and backward (double)") {
  const std::vector<LayerCase> cases = {
      {{13, 11}, 0.25, 5, 1, 1, 4},   // WACONet's first layer shape (1 -> C, 5x5, stride 1)
      {{13, 11}, 0.25, 3, 2, 3, 4},   // strided 3x3, odd extents
      {{16, 20}, 0.10, 3, 2, 4, 2},   // strided, even extents, sparser
      {{9, 10}, 0.6, 3, 1, 2, 3},     // dense-ish submanifold
      {{1, 25}, 0.5, 3, 2, 2, 2},     // a single row
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
