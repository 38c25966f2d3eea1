// Sparse convolution layers in LibTorch over precomputed kernel maps (internal; includes torch).
// Used by waconet.cpp and by tests/test_sparse_conv.cpp (the only other place allowed to include
// <torch/...>, because it compares with LibTorch's dense conv2d/conv3d).
//
// Features are [sites][channels] row-major (channels contiguous, one site per row); a layer's
// weight is [offsets][in_channels][out_channels], offset j as in kernel_map.hpp, so that
// out[o] = sum_j in[neighbors(o, j)] * W[j]. There is no bias (MinkowskiConvolution's default).
// Two implementations with identical results:
// - ConvImpl::Fused: a custom autograd function. Forward runs over the output sites in parallel
//   (output-stationary, no atomics); backward computes input gradients over the reverse map
//   (input-stationary) and weight gradients with per-thread accumulators. It saves only the
//   input features, so memory per layer is that of the activations.
// - ConvImpl::Autograd: per offset, index_select the input rows, mm by W[j], index_add_ into the
//   output; LibTorch's autograd provides the backward (and saves every gathered block).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <torch/torch.h>

#include "kernel_map.hpp"
#include "waco/learned/feature_extractor.hpp"

namespace waco::learned {

/// Torch views of one KernelMap (no copies for the fused path) plus, built on first use by the
/// autograd path, per-offset (input, output) index lists.
class TorchKernelMap {
 public:
  explicit TorchKernelMap(std::shared_ptr<const KernelMap> map);
  const KernelMap& map() const { return *map_; }
  /// int32 [out_sites][offsets] (shares the KernelMap's memory).
  const torch::Tensor& neighbors() const { return neighbors_; }
  /// int32 [in_sites][offsets]; for stride 1 the neighbors tensor (read with mirrored offsets).
  const torch::Tensor& reverse() const { return reverse_; }
  /// Per offset: int64 input-site and output-site index lists (built once, thread-safe).
  const std::vector<std::pair<torch::Tensor, torch::Tensor>>& pairs() const;
  /// Bytes of the per-offset index lists (0 until pairs() was called).
  std::int64_t pair_bytes() const;

 private:
  std::shared_ptr<const KernelMap> map_;
  torch::Tensor neighbors_;
  torch::Tensor reverse_;
  mutable std::once_flag pairs_once_;
  mutable std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs_;
};

/// One sparse convolution: in [in_sites][cin] -> [out_sites][cout], weight [offsets][cin][cout].
/// Float or double (in and weight of the same dtype). Differentiable in `in` and `weight`.
torch::Tensor sparse_conv(const torch::Tensor& in, const torch::Tensor& weight,
                          const TorchKernelMap& map, ConvImpl impl);

}  // namespace waco::learned
