// WACONet (WACO paper section 4.1.1) and the torch-free FeatureExtractor built on it: weight
// initialization from a seed, the forward pass with its time breakdown, forward+backward, and
// the versioned weights file. The sparse convolutions are in sparse_conv.cpp.
//
// Weights file: tensor_file.hpp's layout, magic "WACONETW", version kFormatVersion, header
// WacoNetParams::to_string(). The architecture text is checked against the requested
// architecture before any tensor is read; every tensor name and shape is checked against the
// network the architecture describes.
#include "waconet.hpp"

#include "tensor_file.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <tuple>

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::learned {
namespace {

using kernels::Error;
constexpr char kMagic[8] = {'W', 'A', 'C', 'O', 'N', 'E', 'T', 'W'};
constexpr std::uint32_t kFormatVersion = 1;
constexpr float kDefaultMetaMean = 12.0f;  // log2(1 + x) of a 4096-sized dimension
constexpr float kDefaultMetaStd = 4.0f;

torch::Tensor init_uniform(std::vector<std::int64_t> sizes, double bound, at::Generator& gen) {
  return (torch::rand(sizes, gen, torch::kFloat) * 2.0 - 1.0) * bound;
}

void init_linear(torch::nn::Linear& lin, at::Generator& gen) {
  torch::NoGradGuard guard;
  const double bound = 1.0 / std::sqrt(static_cast<double>(lin->weight.size(1)));
  lin->weight.copy_(init_uniform(lin->weight.sizes().vec(), bound, gen));
  lin->bias.copy_(init_uniform(lin->bias.sizes().vec(), bound, gen));
}

void check_pattern(const WacoNetParams& p, const PreparedPattern::Impl& g) {
  if (g.dims != p.dims || g.first_kernel != p.first_kernel || g.kernel != p.kernel ||
      g.strided_layers != p.strided_layers)
    throw Error("prepared pattern does not fit WACONet '" + p.name + "' (prepared for dims " +
                    std::to_string(g.dims) + ", kernels " + std::to_string(g.first_kernel) + "/" +
                    std::to_string(g.kernel) + ", " + std::to_string(g.strided_layers) +
                    " strided layers)",
                "prepare the pattern with the same extractor that runs it");
}

}  // namespace

std::shared_ptr<const PreparedPattern::Impl> prepare_sites(const WacoNetParams& p, SiteSet sites) {
  auto impl = std::make_shared<PreparedPattern::Impl>();
  SparseGeometry geometry =
      build_geometry(std::move(sites), p.first_kernel, p.strided_layers, p.kernel, threads());
  // The network needs only the maps; the levels' coordinates were needed to build them.
  for (auto& level : geometry.levels) std::vector<std::int32_t>().swap(level.coords);
  impl->geometry = std::make_shared<SparseGeometry>(std::move(geometry));
  impl->dims = p.dims;
  impl->first_kernel = p.first_kernel;
  impl->kernel = p.kernel;
  impl->strided_layers = p.strided_layers;
  for (const auto& m : impl->geometry->maps) {
    impl->maps.push_back(std::make_unique<TorchKernelMap>(m));
    impl->stats.sites.push_back(m->out_sites);
    impl->stats.pairs.push_back(m->pairs);
  }
  impl->stats.bytes = impl->geometry->bytes();
  impl->stats.build_seconds = impl->geometry->build_seconds;
  return impl;
}

WacoNetImpl::WacoNetImpl(const WacoNetParams& params, std::uint64_t seed) : params_(params) {
  params_.validate();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int C = params_.channels;
  for (int l = 0; l < params_.conv_layers(); ++l) {
    const int k = l == 0 ? params_.first_kernel : params_.kernel;
    std::int64_t K = 1;
    for (int m = 0; m < params_.dims; ++m) K *= k;
    const int cin = l == 0 ? 1 : C;
    const double stddev = std::sqrt(2.0 / static_cast<double>(K * cin));
    conv_.push_back(register_parameter("conv" + std::to_string(l),
                                       torch::randn({K, cin, C}, gen, torch::kFloat) * stddev));
  }
  meta1_ = register_module("meta1", torch::nn::Linear(params_.meta_inputs(), params_.meta_hidden));
  meta2_ = register_module("meta2", torch::nn::Linear(params_.meta_hidden, params_.meta_out));
  embed1_ = register_module(
      "embed1", torch::nn::Linear(params_.pooled_size() + params_.meta_out, params_.embed_hidden));
  embed2_ = register_module("embed2", torch::nn::Linear(params_.embed_hidden, params_.embedding));
  for (auto* lin : {&meta1_, &meta2_, &embed1_, &embed2_}) init_linear(*lin, gen);
  meta_mean = register_buffer("meta_mean",
                              torch::full({params_.meta_inputs()}, kDefaultMetaMean));
  meta_std = register_buffer("meta_std", torch::full({params_.meta_inputs()}, kDefaultMetaStd));
}

WacoNetOutput WacoNetImpl::forward(const PreparedPattern::Impl& g, ConvImpl impl,
                                   FeatureTimes* times) {
  WacoNetOutput o = forward_batch({&g}, impl, times);
  o.embedding = o.embedding.squeeze(0);
  o.pooled = o.pooled.squeeze(0);
  return o;
}

WacoNetOutput WacoNetImpl::forward_batch(const std::vector<const PreparedPattern::Impl*>& batch,
                                         ConvImpl impl, FeatureTimes* times) {
  WACO_ASSERT(!batch.empty(), "forward_batch needs at least one pattern");
  for (const auto* g : batch) check_pattern(params_, *g);
  const double t_start = kernels::now_seconds();
  const auto dtype = conv_[0].scalar_type();
  const auto B = static_cast<std::int64_t>(batch.size());
  std::int64_t sites0 = 0;
  for (const auto* g : batch) sites0 += g->geometry->nnz;
  torch::Tensor x = torch::ones({sites0, 1}, torch::TensorOptions().dtype(dtype));
  std::vector<torch::Tensor> pooled;  // per layer [B][channels]
  double pooling = 0.0;
  WacoNetOutput result;
  const bool hooks = times != nullptr && torch::GradMode::is_enabled();
  if (hooks)
    result.grad_ready = std::make_shared<std::vector<double>>(params_.conv_layers(), 0.0);
  for (int l = 0; l < params_.conv_layers(); ++l) {
    const double t0 = kernels::now_seconds();
    torch::Tensor mean;
    if (B == 1) {
      std::tie(x, mean) = sparse_conv_relu_pool(x, conv_[l], *batch[0]->maps[l], impl);
    } else {
      std::vector<const KernelMap*> maps;
      for (const auto* g : batch) maps.push_back(&g->maps[l]->map());
      const TorchKernelMap joined(std::make_shared<KernelMap>(join_maps(maps, threads())));
      x = sparse_conv(x, conv_[l], joined, impl, /*relu=*/true);
    }
    if (hooks && x.requires_grad()) {
      auto ready = result.grad_ready;
      x.register_hook([ready, l](const torch::Tensor&) { (*ready)[l] = kernels::now_seconds(); });
    }
    const double t1 = kernels::now_seconds();
    if (B == 1) {
      pooled.push_back(mean.unsqueeze(0));
    } else {
      std::vector<torch::Tensor> rows;
      std::int64_t base = 0;
      for (const auto* g : batch) {
        const std::int64_t n = g->maps[l]->map().out_sites;
        rows.push_back(n > 0 ? x.narrow(0, base, n).mean(0)
                             : torch::zeros({params_.channels}, x.options()));
        base += n;
      }
      pooled.push_back(torch::stack(rows));
    }
    const double t2 = kernels::now_seconds();
    if (times) times->layers.push_back(t1 - t0);
    pooling += t2 - t1;
  }
  const double t_mlp = kernels::now_seconds();
  std::vector<float> meta_raw;
  for (const auto* g : batch) {
    meta_raw.insert(meta_raw.end(), g->geometry->shape.begin(), g->geometry->shape.end());
    meta_raw.push_back(static_cast<float>(g->geometry->nnz));
  }
  auto meta = torch::tensor(meta_raw).to(dtype).reshape({B, params_.meta_inputs()});
  meta = (torch::log2(meta + 1.0) - meta_mean) / meta_std;
  auto m = meta2_->forward(torch::relu(meta1_->forward(meta)));
  auto all = torch::cat(pooled, 1);
  auto e = embed2_->forward(torch::relu(embed1_->forward(torch::cat({all, m}, 1))));
  const double t_end = kernels::now_seconds();
  if (times) {
    times->pooling = pooling;
    times->mlp = t_end - t_mlp;
    times->forward = t_end - t_start;
  }
  result.embedding = e;
  result.pooled = all;
  return result;
}

double measure_gemm_gflops(std::int64_t m, std::int64_t n, std::int64_t k, int repeats) {
  torch::NoGradGuard guard;
  auto a = torch::randn({m, k});
  auto b = torch::randn({k, n});
  auto c = torch::empty({m, n});
  torch::mm_out(c, a, b);  // warm-up
  std::vector<double> t;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const double t0 = kernels::now_seconds();
    torch::mm_out(c, a, b);
    t.push_back(kernels::now_seconds() - t0);
  }
  std::sort(t.begin(), t.end());
  return 2.0 * static_cast<double>(m) * n * k / t[t.size() / 2] * 1e-9;
}

// ---------------------------------------------------------------------------------------------
// Torch-free API.

bool built_with_torch() { return true; }

void set_threads(int t) { torch::set_num_threads(t > 0 ? t : kernels::available_cpus()); }

int threads() { return at::get_num_threads(); }

void release_buffers() { release_conv_buffers(); }

const PatternStats& PreparedPattern::stats() const { return impl().stats; }

const PreparedPattern::Impl& PreparedPattern::impl() const {
  if (!impl_)
    throw Error("empty PreparedPattern used", "obtain one from FeatureExtractor::prepare()");
  return *impl_;
}

struct FeatureExtractor::Impl {
  WacoNetParams params;
  WacoNet net{nullptr};
  ConvImpl conv = ConvImpl::Fused;
};

FeatureExtractor::FeatureExtractor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FeatureExtractor::FeatureExtractor(FeatureExtractor&&) noexcept = default;
FeatureExtractor& FeatureExtractor::operator=(FeatureExtractor&&) noexcept = default;
FeatureExtractor::~FeatureExtractor() = default;

FeatureExtractor FeatureExtractor::create(const WacoNetParams& params, std::uint64_t seed) {
  params.validate();
  auto impl = std::make_unique<Impl>();
  impl->params = params;
  impl->net = WacoNet(params, seed);
  return FeatureExtractor(std::move(impl));
}

const WacoNetParams& FeatureExtractor::params() const { return impl_->params; }
void FeatureExtractor::set_conv_impl(ConvImpl impl) { impl_->conv = impl; }
ConvImpl FeatureExtractor::conv_impl() const { return impl_->conv; }

void FeatureExtractor::set_standardization(const std::vector<float>& mean,
                                           const std::vector<float>& stddev) {
  const auto n = static_cast<std::size_t>(impl_->params.meta_inputs());
  if (mean.size() != n || stddev.size() != n)
    throw Error("standardization needs " + std::to_string(n) + " means and standard deviations (" +
                "the extents and nnz), got " + std::to_string(mean.size()) + " and " +
                std::to_string(stddev.size()));
  for (float s : stddev)
    if (!(s > 0.0f)) throw Error("standardization standard deviations must be positive");
  torch::NoGradGuard guard;
  impl_->net->meta_mean.copy_(torch::tensor(mean));
  impl_->net->meta_std.copy_(torch::tensor(stddev));
}

PreparedPattern FeatureExtractor::prepare(const kernels::CooMatrix& a) const {
  if (impl_->params.dims != 2)
    throw Error("WACONet '" + impl_->params.name + "' is the " +
                    std::to_string(impl_->params.dims) + "-D variant; a matrix needs dims 2",
                "create the extractor with waconet_variant(name, 2)");
  return PreparedPattern(prepare_sites(impl_->params, sites_of(a)));
}

PreparedPattern FeatureExtractor::prepare(const kernels::CooTensor& t) const {
  if (t.order() != impl_->params.dims)
    throw Error("WACONet '" + impl_->params.name + "' is the " +
                    std::to_string(impl_->params.dims) + "-D variant; the tensor has order " +
                    std::to_string(t.order()),
                "create the extractor with waconet_variant(name, " + std::to_string(t.order()) +
                    ")");
  return PreparedPattern(prepare_sites(impl_->params, sites_of(t)));
}

namespace {

std::vector<float> to_vector(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace

Features FeatureExtractor::extract(const PreparedPattern& p) const {
  Features f;
  torch::NoGradGuard guard;
  auto out = impl_->net->forward(p.impl(), impl_->conv, &f.times);
  f.embedding = to_vector(out.embedding);
  f.pooled = to_vector(out.pooled);
  f.pattern = p.stats();
  f.times.total = f.times.forward;
  return f;
}

Features FeatureExtractor::extract(const kernels::CooMatrix& a) const {
  const PreparedPattern p = prepare(a);
  Features f = extract(p);
  f.times.kernel_maps = p.stats().build_seconds;
  f.times.total += f.times.kernel_maps;
  return f;
}

Features FeatureExtractor::extract(const kernels::CooTensor& t) const {
  const PreparedPattern p = prepare(t);
  Features f = extract(p);
  f.times.kernel_maps = p.stats().build_seconds;
  f.times.total += f.times.kernel_maps;
  return f;
}

std::vector<Features> FeatureExtractor::extract(const std::vector<PreparedPattern>& batch) const {
  std::vector<Features> fs(batch.size());
  if (batch.empty()) return fs;
  std::vector<const PreparedPattern::Impl*> impls;
  for (const auto& p : batch) impls.push_back(&p.impl());
  FeatureTimes times;
  torch::NoGradGuard guard;
  auto out = impl_->net->forward_batch(impls, impl_->conv, &times);
  times.total = times.forward;
  for (std::size_t b = 0; b < batch.size(); ++b) {
    fs[b].embedding = to_vector(out.embedding[static_cast<std::int64_t>(b)]);
    fs[b].pooled = to_vector(out.pooled[static_cast<std::int64_t>(b)]);
    fs[b].pattern = batch[b].stats();
    fs[b].times = times;
  }
  return fs;
}

Features FeatureExtractor::forward_backward(const PreparedPattern& p) {
  Features f;
  impl_->net->zero_grad();
  auto out = impl_->net->forward(p.impl(), impl_->conv, &f.times);
  const double t0 = kernels::now_seconds();
  out.embedding.sum().backward();
  const double t_end = kernels::now_seconds();
  f.times.backward = t_end - t0;
  if (out.grad_ready) {
    // Layer l's backward (ReLU + convolution) runs from the moment its output's gradient is
    // complete to the moment its input's (layer l-1's output) is; layer 0 ends the pass.
    const auto& r = *out.grad_ready;
    for (std::size_t l = 0; l < r.size(); ++l)
      f.times.layers_backward.push_back((l == 0 ? t_end : r[l - 1]) - r[l]);
  }
  f.times.total = f.times.forward + f.times.backward;
  f.embedding = to_vector(out.embedding);
  f.pooled = to_vector(out.pooled);
  f.pattern = p.stats();
  return f;
}

std::int64_t FeatureExtractor::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& t : impl_->net->parameters()) n += t.numel();
  return n;
}

// ---------------------------------------------------------------------------------------------
// Weights file (tensor_file.hpp).

void FeatureExtractor::save(const std::string& path) const {
  write_tensor_file(path, kMagic, {kFormatVersion, kFormatVersion}, impl_->params.to_string(),
                    module_tensors(*impl_->net));
}

FeatureExtractor FeatureExtractor::load(const std::string& path, const WacoNetParams* expected) {
  TensorFileReader r(path, kMagic, {kFormatVersion, kFormatVersion}, "WACONet weights");
  const WacoNetParams file_params = WacoNetParams::parse(r.header());
  if (expected && !expected->same_architecture(file_params))
    throw Error(path + ": weights are for WACONet architecture [" + file_params.to_string() +
                    "] but [" + expected->to_string() + "] was requested",
                "select the architecture the file was written for (e.g. --arch " +
                    file_params.name + "), or omit the architecture to use the file's");
  FeatureExtractor fx = create(file_params, 1);
  std::map<std::string, torch::Tensor> want;
  for (auto& [name, t] : module_tensors(*fx.impl_->net)) want[name] = t;
  read_into(r, std::move(want));
  return fx;
}

}  // namespace waco::learned
