// Pieces of the cost model shared by its two implementations (internal, torch-free): the LibTorch
// network (cost_model.cpp, which trains) and plain inference (cost_model_plain.cpp, the
// torch-free waco-hybrid's). Both must read a model file and a schedule alike.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor_reader.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/feature_extractor.hpp"
#include "waco/learned/matrix_features.hpp"

namespace waco::learned {

inline constexpr char kCostModelMagic[8] = {'W', 'A', 'C', 'O', 'C', 'O', 'S', 'T'};
/// Model files: version 2 written (each tensor's values padded to 64 bytes: read where they lie,
/// tensor_reader.hpp), version 1 (unpadded: copied) still read.
inline constexpr TensorFileVersions kCostModelVersions{kCostModelFormatVersion, 1, 2};

inline bool uses_features(EncoderKind e) { return e != EncoderKind::WacoNet; }
inline bool uses_waconet(EncoderKind e) {
  return e == EncoderKind::WacoNet || e == EncoderKind::SignatureWacoNet;
}
inline FeatureSet feature_set(EncoderKind e) {
  return e == EncoderKind::Stats ? FeatureSet::Stats : FeatureSet::Signature;
}
inline int dims_of(kernels::KernelKind k) { return kernels::needs_tensor(k) ? 3 : 2; }
/// The matrix features a model of `c` reads: its feature set's, then the value type when
/// c.dtype_input and the dense size when c.dense_input (prepare_input appends them).
inline int model_feature_count(const CostModelConfig& c) {
  return feature_count(feature_set(c.encoder), dims_of(c.kind)) + (c.dtype_input ? 1 : 0) +
         (c.dense_input ? 1 : 0);
}
/// The dense size as a dense_input model reads it (raw, before standardization).
inline float dense_feature(std::int64_t dense) {
  return static_cast<float>(std::log2(static_cast<double>(dense)));
}
/// Throws kernels::Error unless a model of `c` can read what its flags say: the value type and
/// the dense size need a feature encoder, the dense size a kernel with dense operands.
void check_inputs(const CostModelConfig& c);

/// Schedules as the schedule embedder reads them: per schedule F categorical field values and
/// the flattened S x S loop-order permutation matrix.
struct ScheduleInputs {
  std::int64_t count = 0;       ///< N
  std::int64_t fields = 0;      ///< F
  std::int64_t order_size = 0;  ///< S * S
  std::vector<std::int64_t> field_values;  ///< [N x F]
  std::vector<float> order;                ///< [N x S*S]
};
/// Throws kernels::Error for a schedule of another kernel. A static or chunk=auto schedule is read
/// as its dynamic twin with the largest chunk (the encoding has neither).
ScheduleInputs schedule_inputs(kernels::KernelKind kind,
                               const std::vector<codegen::SuperSchedule>& schedules);
/// The same into `in` (its vectors' storage reused).
void schedule_inputs_into(kernels::KernelKind kind,
                          const std::vector<codegen::SuperSchedule>& schedules, ScheduleInputs& in);

/// A model's training record (its header's "record": the command, the machine and ~14 KB of
/// per-epoch history), kept as the file's text until it is first read. Ranking never reads it,
/// and parsing it was most of a model's load (0.65 -> 0.11-0.14 ms warm; a process's first
/// load 1.0 -> 0.5-0.7 ms), which an adaptive plan's first choice waits for. A record that is not JSON is reported when it is read
/// (kernels::Error, "corrupt cost model header"). Reading is thread-safe (a shared model's).
class ModelRecord {
 public:
  ModelRecord();  ///< an empty object
  /// The record as the file of `path` holds it (JSON text), parsed when first read.
  ModelRecord(std::string path, std::string text);
  ModelRecord(ModelRecord&&) noexcept;
  ModelRecord& operator=(ModelRecord&&) noexcept;
  ~ModelRecord();
  ModelRecord& operator=(nlohmann::json value);
  nlohmann::json& get();
  const nlohmann::json& get() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// The checked header of a model file: the configuration and the training record. Refuses
/// another schedule encoding version, another kernel or encoder than expected.
struct ModelHeader {
  CostModelConfig config;
  ModelRecord record;
};
ModelHeader parse_model_header(const std::string& path, const std::string& header_text,
                               std::optional<kernels::KernelKind> expect_kind,
                               std::optional<EncoderKind> expect_encoder);

/// Throws kernels::Error when a model of `config` cannot read an operand of this rank.
void check_operand(const CostModelConfig& config, bool tensor);

/// Throws TorchRequired naming `what`: the lite build's answer where LibTorch is needed.
[[noreturn]] void throw_torch_required(const std::string& what);

/// A matrix (or tensor) as a model reads it. The LibTorch build fills `pattern` for the WACONet
/// encoders; the lite build never does (it refuses those models).
struct ModelInput::Impl {
  std::vector<float> features;                           ///< raw (unstandardized)
  std::shared_ptr<const PreparedPattern::Impl> pattern;  ///< WACONet's geometry
  double seconds = 0.0;                                  ///< prepare's wall time
};

/// matrix_features reading `signature` when given (CostModel::prepare's argument), for
/// prepare_input.
inline auto features_with(const signature::LocalitySignature* signature) {
  return [signature](FeatureSet set, const kernels::CooMatrix& a, int threads) {
    return matrix_features(set, a, threads, signature);
  };
}

/// The model's view of an operand, timed: its feature vector (`features`: matrix_features or
/// tensor_features, then the value type `dtype` when c.dtype_input and the dense size `dense`
/// when c.dense_input) for the feature encoders, `pattern(op)` for the WACONet ones.
template <typename Operand, typename Features, typename Pattern>
ModelInput prepare_input(const CostModelConfig& c, const Operand& op, bool tensor,
                         Features features, Pattern pattern, kernels::Dtype dtype,
                         std::int64_t dense) {
  check_operand(c, tensor);
  if (c.dense_input && dense < 1)
    throw kernels::Error("this cost model reads the dense size, and none was given",
                         "give the dense size (J or K) the schedules will run at");
  const double t0 = kernels::now_seconds();
  auto in = std::make_shared<ModelInput::Impl>();
  if (uses_features(c.encoder)) {
    in->features = features(feature_set(c.encoder), op, 0);
    if (c.dtype_input) in->features.push_back(dtype == kernels::Dtype::F64 ? 1.0f : 0.0f);
    if (c.dense_input) in->features.push_back(dense_feature(dense));
  }
  if (uses_waconet(c.encoder)) in->pattern = pattern(op);
  in->seconds = kernels::now_seconds() - t0;
  return ModelInput(in);
}

}  // namespace waco::learned
