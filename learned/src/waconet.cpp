// WACONet (WACO paper section 4.1.1) and the torch-free FeatureExtractor built on it: weight
// initialization from a seed, the forward pass with its time breakdown, forward+backward, and
// the versioned weights file. The sparse convolutions are in sparse_conv.cpp.
//
// Weights file (little-endian, version kFormatVersion):
//   "WACONETW"  u32 version  u32 n  <n bytes: WacoNetParams::to_string()>
//   u32 tensors, then per tensor: u32 n <name> u32 ndim i64 sizes[ndim] f32 data[numel]
//   "END!"
// The architecture text is checked against the requested architecture before any tensor is
// read; every tensor name and shape is checked against the network the architecture describes.
#include "waconet.hpp"

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
// Weights file.

namespace {

void write_u32(std::ostream& os, std::uint32_t v) { os.write(reinterpret_cast<char*>(&v), 4); }
void write_str(std::ostream& os, const std::string& s) {
  write_u32(os, static_cast<std::uint32_t>(s.size()));
  os.write(s.data(), static_cast<std::streamsize>(s.size()));
}

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_)
      throw Error("cannot open WACONet weights file '" + path + "'",
                  "check the path; weights are written by FeatureExtractor::save");
  }
  void bytes(void* dst, std::size_t n, const char* what) {
    in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (static_cast<std::size_t>(in_.gcount()) != n)
      throw Error(path_ + ": truncated WACONet weights file (while reading " + what + ")",
                  "the file is incomplete; write it again");
  }
  std::uint32_t u32(const char* what) {
    std::uint32_t v = 0;
    bytes(&v, 4, what);
    return v;
  }
  std::string str(const char* what, std::uint32_t max_len) {
    const std::uint32_t n = u32(what);
    if (n > max_len) throw Error(path_ + ": corrupt WACONet weights file (" + what + " too long)");
    std::string s(n, '\0');
    bytes(s.data(), n, what);
    return s;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
};

}  // namespace

void FeatureExtractor::save(const std::string& path) const {
  kernels::check_writable(path);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    if (!os) throw Error("cannot write '" + tmp + "'", "check that the directory is writable");
    os.write(kMagic, 8);
    write_u32(os, kFormatVersion);
    write_str(os, impl_->params.to_string());
    std::vector<std::pair<std::string, torch::Tensor>> all;
    for (const auto& kv : impl_->net->named_parameters()) all.emplace_back(kv.key(), kv.value());
    for (const auto& kv : impl_->net->named_buffers()) all.emplace_back(kv.key(), kv.value());
    write_u32(os, static_cast<std::uint32_t>(all.size()));
    for (const auto& [name, t] : all) {
      write_str(os, name);
      write_u32(os, static_cast<std::uint32_t>(t.dim()));
      for (auto s : t.sizes()) {
        const std::int64_t v = s;
        os.write(reinterpret_cast<const char*>(&v), 8);
      }
      const auto c = t.detach().to(torch::kFloat).contiguous();
      os.write(reinterpret_cast<const char*>(c.data_ptr<float>()),
               static_cast<std::streamsize>(c.numel() * 4));
    }
    os.write("END!", 4);
    if (!os) throw Error("write to '" + tmp + "' failed", "check free disk space");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error("cannot rename '" + tmp + "' to '" + path + "'");
}

FeatureExtractor FeatureExtractor::load(const std::string& path, const WacoNetParams* expected) {
  Reader r(path);
  char magic[8];
  r.bytes(magic, 8, "the header");
  if (std::memcmp(magic, kMagic, 8) != 0)
    throw Error(path + ": not a WACONet weights file (bad magic bytes)",
                "pass a file written by FeatureExtractor::save / waco-hybrid");
  const std::uint32_t version = r.u32("the format version");
  if (version != kFormatVersion)
    throw Error(path + ": WACONet weights format version " + std::to_string(version) +
                    " is not supported (this build reads version " +
                    std::to_string(kFormatVersion) + ")",
                "re-create the weights with this version of waco-hybrid");
  const WacoNetParams file_params = WacoNetParams::parse(r.str("the architecture", 1 << 16));
  if (expected && !expected->same_architecture(file_params))
    throw Error(path + ": weights are for WACONet architecture [" + file_params.to_string() +
                    "] but [" + expected->to_string() + "] was requested",
                "select the architecture the file was written for (e.g. --arch " +
                    file_params.name + "), or omit the architecture to use the file's");
  FeatureExtractor fx = create(file_params, 1);
  std::map<std::string, torch::Tensor> want;
  for (const auto& kv : fx.impl_->net->named_parameters()) want[kv.key()] = kv.value();
  for (const auto& kv : fx.impl_->net->named_buffers()) want[kv.key()] = kv.value();
  const std::uint32_t count = r.u32("the tensor count");
  if (count != want.size())
    throw Error(path + ": holds " + std::to_string(count) + " tensors, architecture needs " +
                    std::to_string(want.size()),
                "the file is corrupt or was written by another version");
  torch::NoGradGuard guard;
  for (std::uint32_t n = 0; n < count; ++n) {
    const std::string name = r.str("a tensor name", 1024);
    auto it = want.find(name);
    if (it == want.end())
      throw Error(path + ": unexpected tensor '" + name + "'",
                  "the file is corrupt or was written by another version");
    const std::uint32_t ndim = r.u32("a tensor rank");
    std::vector<std::int64_t> sizes(ndim);
    if (ndim > 8) throw Error(path + ": corrupt tensor rank for '" + name + "'");
    r.bytes(sizes.data(), 8 * ndim, "tensor sizes");
    if (sizes != it->second.sizes().vec())
      throw Error(path + ": tensor '" + name + "' has the wrong shape for the architecture",
                  "the file is corrupt or was written by another version");
    auto data = torch::empty(sizes, torch::kFloat);
    r.bytes(data.data_ptr<float>(), static_cast<std::size_t>(data.numel()) * 4, name.c_str());
    it->second.copy_(data);
    want.erase(it);
  }
  char end[4];
  r.bytes(end, 4, "the end marker");
  if (std::memcmp(end, "END!", 4) != 0)
    throw Error(path + ": corrupt WACONet weights file (missing end marker)");
  return fx;
}

}  // namespace waco::learned
