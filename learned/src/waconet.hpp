// WACONet as a LibTorch module (internal; includes torch). WACO paper section 4.1.1 / Figure 9,
// ARCHITECTURE.md section 5: submanifold conv (stride 1) then strided convs (stride 2), ReLU,
// global average pooling of every layer, concatenated with an MLP of the standardized shape and
// nnz, then an MLP to the matrix embedding. The later cost model (learned/) builds on this
// module directly; everything outside learned/ uses waco/learned/feature_extractor.hpp.
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "kernel_map.hpp"
#include "sparse_conv.hpp"
#include "waco/learned/feature_extractor.hpp"

namespace waco::learned {

/// A prepared pattern: the geometry (kernel maps; the levels' coordinates are dropped once the
/// maps are built) plus torch views of its kernel maps.
struct PreparedPattern::Impl {
  std::shared_ptr<const SparseGeometry> geometry;
  std::vector<std::unique_ptr<TorchKernelMap>> maps;
  PatternStats stats;
  // What the geometry was built for; an extractor checks these before using it.
  int dims = 2;
  int first_kernel = 5;
  int kernel = 3;
  int strided_layers = 13;
};

/// Builds a prepared pattern for a network with these parameters from level-0 sites.
std::shared_ptr<const PreparedPattern::Impl> prepare_sites(const WacoNetParams& p, SiteSet sites);

/// What one forward pass returns.
struct WacoNetOutput {
  torch::Tensor embedding;  ///< [embedding] ([batch][embedding] from forward_batch)
  torch::Tensor pooled;     ///< [pooled_size] ([batch][pooled_size] from forward_batch)
  /// With times and gradients: when the gradient of each layer's output became complete
  /// (seconds, filled during backward by tensor hooks).
  std::shared_ptr<std::vector<double>> grad_ready;
};

class WacoNetImpl : public torch::nn::Module {
 public:
  /// Weights drawn from a generator seeded with `seed` (Kaiming-normal convolutions,
  /// uniform(+-1/sqrt(fan_in)) linear layers), so the same seed gives the same network.
  WacoNetImpl(const WacoNetParams& params, std::uint64_t seed);

  /// Forward over a prepared pattern. `times` (optional) receives per-layer, pooling and MLP
  /// times. Throws kernels::Error when the pattern was prepared for another geometry.
  WacoNetOutput forward(const PreparedPattern::Impl& pattern, ConvImpl impl,
                        FeatureTimes* times = nullptr);
  /// Forward over several patterns at once: per layer one convolution over the block-diagonal
  /// join of their kernel maps, pooling per pattern, the MLPs on [batch] rows.
  WacoNetOutput forward_batch(const std::vector<const PreparedPattern::Impl*>& patterns,
                              ConvImpl impl, FeatureTimes* times = nullptr);

  const WacoNetParams& params() const { return params_; }
  /// Conv weight of layer l: [offsets][in_channels][out_channels].
  torch::Tensor& conv_weight(int l) { return conv_[l]; }
  torch::Tensor meta_mean, meta_std;  ///< buffers [meta_inputs]

 private:
  WacoNetParams params_;
  std::vector<torch::Tensor> conv_;
  torch::nn::Linear meta1_{nullptr}, meta2_{nullptr}, embed1_{nullptr}, embed2_{nullptr};
};
TORCH_MODULE(WacoNet);

}  // namespace waco::learned
