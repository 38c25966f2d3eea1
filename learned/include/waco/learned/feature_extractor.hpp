// The WACONet feature extractor behind a torch-free interface: give it a sparse matrix (or a
// 3-D sparse tensor), get back the matrix embedding and where the time went.
//
// Two steps, because the second is repeated: prepare() computes the pattern's geometry (the
// active sites of every level and the kernel map of every layer, from a coordinate hash map),
// once per matrix; extract() / forward_backward() run the network over a prepared pattern as
// often as needed (inference, training epochs) without recomputing any kernel map.
//
// When waco_learned is built without LibTorch, built_with_torch() is false and every entry
// point of FeatureExtractor throws kernels::Error("... built without LibTorch").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "waco/kernels/sparse.hpp"
#include "waco/learned/backend.hpp"
#include "waco/learned/waconet_params.hpp"

namespace waco::learned {


/// Sets the intra-op thread count of LibTorch and of the sparse convolution kernels (which use
/// the same count). t <= 0 means "all available cores". Process-wide.
void set_threads(int t);
/// The thread count in effect.
int threads();
/// The sparse convolutions keep freed activation and gradient buffers of 1 MiB or more (up to
/// 2 GiB) for the next layer and pass, because fresh pages of that size cost more to fault in
/// than the layers cost to compute; this returns them to the system (e.g. after training).
void release_buffers();
/// The fp32 rate of LibTorch's matrix product (torch::mm, i.e. the BLAS it links) on m x k by
/// k x n operands at the current thread count, in GFLOP/s: the median of `repeats` runs after a
/// warm-up. For cost reports (bench_waconet puts each layer's rate beside it).
double measure_gemm_gflops(std::int64_t m, std::int64_t n, std::int64_t k, int repeats = 5);

/// How a sparse convolution layer is computed; both give the same results (tests check it).
enum class ConvImpl {
  Fused,     ///< custom autograd function: blocked, register-blocked row products (AVX2)
  Autograd,  ///< LibTorch ops per kernel offset (index_select, mm, index_add_); autograd backward
};
/// "fused" / "autograd".
std::string conv_impl_name(ConvImpl impl);
/// Inverse of conv_impl_name; throws kernels::Error on an unknown name.
ConvImpl parse_conv_impl(const std::string& name);

/// Size of a prepared pattern, per conv layer.
struct PatternStats {
  std::vector<std::int64_t> sites;  ///< active output sites of each conv layer
  std::vector<std::int64_t> pairs;  ///< (input site, output site, offset) triples of each layer
  std::int64_t bytes = 0;           ///< memory held by the kernel maps
  double build_seconds = 0.0;       ///< wall time of prepare()
};

/// A matrix or tensor pattern prepared for WACONet: levels of active sites and kernel maps.
/// Cheap to copy (shared, immutable). Valid only for extractors with the same dims, kernel
/// sizes and layer count as the one that prepared it (checked).
class PreparedPattern {
 public:
  struct Impl;
  PreparedPattern() = default;
  explicit PreparedPattern(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  const PatternStats& stats() const;
  const Impl& impl() const;
  bool valid() const { return static_cast<bool>(impl_); }

 private:
  std::shared_ptr<const Impl> impl_;
};

/// Wall-clock breakdown of one pass, in seconds.
struct FeatureTimes {
  double kernel_maps = 0.0;         ///< prepare() (0 when a prepared pattern was reused)
  std::vector<double> layers;       ///< each conv layer (convolution + ReLU), forward
  std::vector<double> layers_backward;  ///< each conv layer's backward (forward_backward only)
  double pooling = 0.0;             ///< global average pooling (in `layers` for ConvImpl::Fused)
  double mlp = 0.0;                 ///< meta MLP and embedding MLP
  double forward = 0.0;             ///< the whole forward pass (layers + pooling + mlp + glue)
  double backward = 0.0;            ///< backward pass (forward_backward only)
  double total = 0.0;               ///< kernel_maps + forward + backward
};

/// The result of one extraction.
struct Features {
  std::vector<float> embedding;  ///< params().embedding values
  std::vector<float> pooled;     ///< the concatenated pooled layer outputs (params().pooled_size())
  FeatureTimes times;
  PatternStats pattern;
};

/// WACONet with its weights. Not thread-safe; movable, not copyable.
class FeatureExtractor {
 public:
  /// A network with freshly initialized weights; the same (params, seed) gives the same weights
  /// on every run. Throws kernels::Error on invalid params or without LibTorch.
  static FeatureExtractor create(const WacoNetParams& params, std::uint64_t seed = 1);
  /// Loads a weights file written by save(). When `expected` is given, the file's architecture
  /// must match it (same_architecture), else kernels::Error names both. Also fails with
  /// kernels::Error on a missing, truncated or foreign file or an unknown format version.
  static FeatureExtractor load(const std::string& path, const WacoNetParams* expected = nullptr);
  /// Writes the versioned weights file (format version, architecture, standardization, tensors).
  void save(const std::string& path) const;

  FeatureExtractor(FeatureExtractor&&) noexcept;
  FeatureExtractor& operator=(FeatureExtractor&&) noexcept;
  ~FeatureExtractor();

  const WacoNetParams& params() const;
  void set_conv_impl(ConvImpl impl);
  ConvImpl conv_impl() const;
  /// Mean and standard deviation applied to log2(1 + x) of each meta input (dims extents, nnz)
  /// before the meta MLP. Defaults: mean 12, std 4 for every input. Saved with the weights.
  void set_standardization(const std::vector<float>& mean, const std::vector<float>& stddev);

  /// Computes the geometry of a matrix (params().dims must be 2) or tensor (order == dims).
  /// Precondition: canonical operand. Throws kernels::Error on a dims mismatch or coordinates
  /// that do not fit the 63-bit coordinate key.
  PreparedPattern prepare(const kernels::CooMatrix& a) const;
  PreparedPattern prepare(const kernels::CooTensor& t) const;

  /// Forward pass (no gradients) over a prepared pattern.
  Features extract(const PreparedPattern& p) const;
  /// Forward pass over several prepared patterns in one call: their kernel maps are joined into
  /// one block-diagonal map per layer, so every layer runs once for the whole batch. Gives what
  /// extract() gives for each pattern (up to float rounding in the MLP); the times of the batch
  /// are in every element. Throws kernels::Error when a pattern does not fit the network.
  std::vector<Features> extract(const std::vector<PreparedPattern>& batch) const;
  /// prepare() + extract(); times.kernel_maps is set.
  Features extract(const kernels::CooMatrix& a) const;
  Features extract(const kernels::CooTensor& t) const;

  /// One training-style step: forward with gradients, then backward of sum(embedding) into
  /// every parameter (gradients are zeroed first). Returns the times and the embedding.
  Features forward_backward(const PreparedPattern& p);

  /// Number of trainable parameters.
  std::int64_t parameter_count() const;

  struct Impl;

 private:
  explicit FeatureExtractor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace waco::learned
