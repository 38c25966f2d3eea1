// Sparse convolution layers in LibTorch over precomputed kernel maps (internal; includes torch).
// Used by waconet.cpp and by tests/test_sparse_conv.cpp (the only other place allowed to include
// <torch/...>, because it compares with LibTorch's dense conv2d/conv3d).
//
// Features are [sites][channels] row-major (channels contiguous, one site per row); a layer's
// weight is [offsets][in_channels][out_channels], offset j as in kernel_map.hpp, so that
// out[o] = sum_j in[i(o, j)] * W[j]. There is no bias (MinkowskiConvolution's default).
// A kernel map is a list of (input, output) pairs per offset; within one offset both columns are
// distinct, so every pass below runs offset after offset, the pairs of one offset split among
// the threads, and scatters without atomics:
// - ConvImpl::Fused: a custom autograd function. Passes are blocked by destination rows: for a
//   block of 1024 output rows, every offset's pairs that land in it (a range found by binary
//   search, since both columns increase within an offset) are applied before the next block, so
//   the block stays in L2 and threads own whole blocks. Per pair the input row times W[j] is
//   computed in registers (AVX2 for 8/16/32 float output channels, two pairs at a time so each
//   weight vector loaded feeds two FMAs; the rows of the pairs 8 ahead are prefetched) and
//   added to the output row. Input gradient: the same pass blocked by input rows with the
//   columns swapped and W[j]^T. Weight gradient: per-thread accumulators, blocks of 64 pairs
//   re-read from L1 for every pair of input channels. ReLU and the global average pooling are
//   fused into the node (sparse_conv_relu_pool), so autograd neither saves a pre-ReLU copy nor
//   materializes the pooling's gradient.
// - ConvImpl::Autograd: per offset index_select -> mm -> index_add_ from LibTorch ops; autograd
//   gives the backward (it saves every gathered block). The reference for the fused one.
// A per-offset gather -> one torch::mm over all pairs of the offset (OpenBLAS) -> scatter-add
// variant was measured beside these (issue 18) and removed: 2.8x slower than Fused forward on
// loc-Gowalla, 6x on copter2 (2 threads), the gathers and scatters cost more than the GEMM.
// Fused saves only the layer input and output (the next layer's input, saved anyway). Its
// activation and gradient buffers of 1 MiB or more come from a process-wide pool of freed blocks
// (huge pages; at most 2 GiB cached, never added to the peak): fresh pages of that size cost
// more to fault in and zero than the layer costs to compute.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <torch/torch.h>

#include "kernel_map.hpp"
#include "waco/learned/feature_extractor.hpp"

namespace waco::learned {

/// Torch views of one KernelMap (no copies) plus, built on first use by the autograd path,
/// per-offset int64 (input, output) index lists.
class TorchKernelMap {
 public:
  explicit TorchKernelMap(std::shared_ptr<const KernelMap> map);
  const KernelMap& map() const { return *map_; }
  const std::shared_ptr<const KernelMap>& shared() const { return map_; }
  /// int32 [pairs] input / output site of each pair (share the KernelMap's memory).
  const torch::Tensor& in_index() const { return in_; }
  const torch::Tensor& out_index() const { return out_; }
  /// int64 [offsets + 1] start of each offset's pairs.
  const torch::Tensor& offset_start() const { return start_; }
  /// Per offset: int64 input-site and output-site index lists (built once, thread-safe).
  const std::vector<std::pair<torch::Tensor, torch::Tensor>>& pairs() const;
  /// Bytes of the per-offset int64 index lists (0 until pairs() was called).
  std::int64_t pair_bytes() const;

 private:
  std::shared_ptr<const KernelMap> map_;
  torch::Tensor in_, out_, start_;
  mutable std::once_flag pairs_once_;
  mutable std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs_;
};

/// Frees the activation buffers the convolutions keep for reuse (see sparse_conv.cpp).
void release_conv_buffers();

/// One sparse convolution: in [in_sites][cin] -> [out_sites][cout], weight [offsets][cin][cout],
/// followed by a ReLU when `relu`. Float or double (in and weight of the same dtype).
/// Differentiable in `in` and `weight`.
torch::Tensor sparse_conv(const torch::Tensor& in, const torch::Tensor& weight,
                          const TorchKernelMap& map, ConvImpl impl, bool relu = false);

/// WACONet's layer: sparse_conv with ReLU, and the mean of the output rows ([cout]; zeros when
/// there are no output sites). Fused computes all three in one autograd node (the mean
/// while the ReLU is applied; its gradient folded into the one the convolution's backward
/// needs anyway); Autograd composes LibTorch ops.
std::pair<torch::Tensor, torch::Tensor> sparse_conv_relu_pool(const torch::Tensor& in,
                                                              const torch::Tensor& weight,
                                                              const TorchKernelMap& map,
                                                              ConvImpl impl);

}  // namespace waco::learned
