// The architecture of WACONet as a typed value (WACO paper section 4.1.1, ARCHITECTURE.md
// section 5): layer count, channels, kernel sizes and MLP widths, with named variants so that
// smaller networks can be measured against the full one. Torch-free.
//
// The network these parameters describe: a submanifold sparse convolution (stride 1, kernel
// first_kernel, 1 -> channels) followed by strided_layers strided sparse convolutions (stride 2,
// kernel `kernel`, channels -> channels), each followed by ReLU; every layer's output is
// global-average-pooled and the (1 + strided_layers) * channels results are concatenated; an MLP
// (dims + 1 -> meta_hidden -> meta_out) embeds the standardized shape and nnz; an MLP
// (pooled + meta_out -> embed_hidden -> embedding) gives the matrix embedding.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace waco::learned {

/// Architecture parameters of WACONet. Two parameter sets describe the same network (and the
/// same weights file layout) when same_architecture() holds; `name` is only a label.
struct WacoNetParams {
  std::string name = "full";  ///< variant label, recorded in weights files
  int dims = 2;               ///< 2 for matrices, 3 for 3-D tensors
  int channels = 32;          ///< channels of every sparse convolution layer
  int first_kernel = 5;       ///< kernel size of the first (submanifold, stride 1) layer; odd
  int strided_layers = 13;    ///< number of stride-2 layers after the first
  int kernel = 3;             ///< kernel size of the strided layers; odd
  int meta_hidden = 64;       ///< hidden width of the MLP on the standardized (shape, nnz)
  int meta_out = 32;          ///< output width of that MLP
  int embed_hidden = 256;     ///< hidden width of the embedding MLP
  int embedding = 128;        ///< size of the matrix embedding

  /// 1 + strided_layers.
  int conv_layers() const { return 1 + strided_layers; }
  /// Width of the concatenated pooled features: conv_layers() * channels (448 for "full").
  int pooled_size() const { return conv_layers() * channels; }
  /// Inputs of the meta MLP: the dims extents plus nnz.
  int meta_inputs() const { return dims + 1; }

  /// Throws kernels::Error naming the offending field when a value is out of range.
  void validate() const;
  /// "name=full dims=2 channels=32 ..." (one line, every field; parse() reads it back).
  std::string to_string() const;
  /// Parses to_string()'s form. Unknown keys and missing fields throw kernels::Error.
  static WacoNetParams parse(const std::string& text);
  /// Equality of every field except `name`.
  bool same_architecture(const WacoNetParams& other) const;
};

/// A named variant: "full" (the paper's network), "small" (16 channels, 3x3 first layer),
/// "tiny" (8 channels, 3x3 first layer, 10 strided layers). dims = 2 or 3 selects the matrix or
/// the tensor form. Unknown names throw kernels::Error listing the known ones.
WacoNetParams waconet_variant(std::string_view name, int dims = 2);

/// The names accepted by waconet_variant, in order of decreasing size.
std::vector<std::string> waconet_variant_names();

}  // namespace waco::learned
