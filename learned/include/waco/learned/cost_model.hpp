// The learned cost model (WACO section 4.1, ARCHITECTURE.md section 5): a matrix encoder and a
// schedule embedder, each giving 128 numbers, and a head concat(256) -> 128 -> 64 -> 1 whose
// output ranks schedules for one matrix (lower = predicted faster; the scale is arbitrary).
// Trained with WACO's pairwise hinge loss over the schedules of one measurement group, i.e.
// candidates timed side by side. Torch-free interface; LibTorch stays in learned/src.
//
// Matrix encoders (one interface, chosen by name, combinable with WACONet):
//   stats             plain statistics (matrix_features.hpp, FeatureSet::Stats) through an MLP;
//   signature         the locality signature's curves, interval histograms and block fill
//                     ratios plus the statistics (FeatureSet::Signature) through an MLP;
//   waconet           WACONet on the nonzero pattern, trained end to end (waconet_params.hpp);
//   signature+waconet both, concatenated and projected to 128.
// Schedule embedder: per categorical field of the schedule encoding (schedule_encoding.hpp) a
// 32-wide lookup table, a linear layer on the flattened loop-order permutation matrix, concat,
// MLP -> 128.
//
// Model file: tensor_file layout, magic "WACOCOST", a JSON header with the configuration, the
// schedule encoding version, the feature standardization and the training record (data hash,
// commands, history). load() refuses a file for another kernel, encoder or encoding version.
//
// Two implementations (backend.hpp): the LibTorch network (learned/src/cost_model.cpp: every
// encoder, training) and plain inference without LibTorch (cost_model_plain.cpp, the lite build:
// load, prepare, scores, head_tail, query_vector and node_vectors of the stats and signature
// encoders; the rest throws TorchRequired).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/kernels/values.hpp"
#include "waco/learned/backend.hpp"
#include "waco/signature/signature.hpp"

namespace waco::learned {

enum class EncoderKind { Stats, Signature, WacoNet, SignatureWacoNet };
/// "stats", "signature", "waconet", "signature+waconet".
std::string encoder_name(EncoderKind e);
/// Inverse of encoder_name; throws kernels::Error listing the known names.
EncoderKind parse_encoder(const std::string& name);
std::vector<std::string> encoder_names();

/// The model file's format version (written; version 1, without padding, is still read).
inline constexpr int kCostModelFormatVersion = 2;

struct CostModelConfig {
  kernels::KernelKind kind = kernels::KernelKind::SpMV;
  EncoderKind encoder = EncoderKind::Signature;
  std::string waconet_variant = "small";  ///< waconet_variant() name, for the WACONet encoders
  int width = 128;                        ///< matrix and schedule embeddings
  int table_width = 32;                   ///< lookup table width per categorical field
  std::uint64_t seed = 1;                 ///< weight initialization and training order
  /// The value type the kernel computes in is one more matrix feature (1 for f64, 0 for f32),
  /// so that one model ranks both (trained on groups of both); a feature encoder only. Files
  /// without the field have none.
  bool dtype_input = false;
  /// The dense size (SpMM/MTTKRP J, SDDMM K) is one more matrix feature, log2 of it, after the
  /// value type's, so that one model ranks every size (trained on groups of several); a feature
  /// encoder and a kernel with dense operands only. Files without the field have none.
  bool dense_input = false;

  nlohmann::json to_json() const;
  /// Throws kernels::Error on a missing or bad field.
  static CostModelConfig from_json(const nlohmann::json& j);
};

/// A matrix (or tensor) as the model reads it, computed once and reused for every schedule:
/// its feature vector and / or its WACONet pattern. Cheap to copy.
class ModelInput {
 public:
  struct Impl;
  ModelInput() = default;
  explicit ModelInput(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  const Impl& impl() const;
  bool valid() const { return static_cast<bool>(impl_); }
  /// Seconds prepare() took (features and kernel maps): the encoder's per-matrix query cost.
  double prepare_seconds() const;

 private:
  std::shared_ptr<const Impl> impl_;
};

/// One matrix's training or evaluation data: its input and the candidates measured side by side.
struct RankingExample {
  std::string name;
  ModelInput input;
  std::vector<codegen::SuperSchedule> schedules;
  std::vector<double> seconds;     ///< median seconds, or a lower bound
  std::vector<char> lower_bound;   ///< 1 where seconds is a lower bound (abandoned)
};

struct TrainOptions {
  int epochs = 80;                 ///< at most; early stopping may end sooner
  int schedules_per_matrix = 32;   ///< WACO's batch: schedules of one matrix per step (all pairs)
  int matrices_per_step = 4;       ///< matrices whose losses are summed into one Adam step
  double learning_rate = 1e-3;
  double margin = 1.0;             ///< hinge margin (WACO: 1)
  double min_gap = 0.02;           ///< pairs whose times differ by less are not used
  int patience = 10;               ///< epochs without a better validation Spearman before stopping
  int threads = 0;                 ///< LibTorch threads (0: every available core)
  std::string checkpoint;          ///< written after every epoch when not empty
  bool resume = false;             ///< continue from `checkpoint` when it exists
  /// Fine-tuning a trained model (train --init, calibrate): its feature standardization is kept
  /// (not fitted again on `train`, which may be a few matrices), and its weights before training
  /// are epoch 0's candidate: they stay unless an epoch validates better.
  bool fine_tune = false;
  /// Only the scoring head (the three layers that score a matrix embedding beside a schedule
  /// embedding) is trained; the encoders of matrices and schedules stay as they are: a small
  /// correction of a trained model rather than a fine-tuning of all of it (calibrate
  /// --fine-tune head). Needs fine_tune.
  bool head_only = false;
  /// The training order's seed (which matrices and schedule subsets each step sees); without
  /// it, the model's config.seed. A fine-tuned model keeps its config (train --init --seed).
  std::optional<std::uint64_t> order_seed;
};

/// How well a model orders measured groups: the median over matrices of Spearman's rho over the
/// candidates timed to the end, and the pair accuracy pooled over all matrices (pairs known by
/// ranking_metrics.hpp's rules, min_gap apart). NaN without matrices or pairs: a few groups
/// whose timed candidates all lie within min_gap of each other have none (`pairs` says so).
struct RankingQuality {
  double spearman_median = 0.0;
  double pair_accuracy = 0.0;
  std::size_t matrices = 0;
  std::int64_t pairs = 0;  ///< the pooled pairs pair_accuracy is over
};

/// One epoch's record.
struct EpochReport {
  int epoch = 0;                ///< 1-based
  double train_loss = 0.0;      ///< mean hinge loss per pair
  double val_spearman = 0.0;    ///< median over validation matrices (NaN without any)
  double val_pair_accuracy = 0.0;
  double seconds = 0.0;         ///< this epoch (training + validation)
  double eta_seconds = 0.0;     ///< for the remaining epochs at this pace
  bool best = false;            ///< the best validation so far (the weights kept)
};

struct TrainSummary {
  std::vector<EpochReport> history;
  int best_epoch = 0;
  double best_val_spearman = 0.0;
  double seconds = 0.0;
  bool stopped_early = false;
  bool resumed = false;
};

/// The head split after its first layer, for searches that score many schedules against one
/// matrix (the ANNS index, schedule_index.hpp). The network computes
///   score(m, s) = w3 . relu(W2 relu(W1m relu(m) + W1s relu(s) + b1) + b2) + b3
/// for a matrix embedding m and a schedule embedding s; a *query vector* is W1m relu(m) + b1
/// (once per matrix) and a *node vector* W1s relu(s) (once per schedule), so that a score is
/// tail(query + node): 64 x 128 + 64 multiply-adds. Plain floats, no LibTorch.
struct HeadTail {
  int width = 0;           ///< first layer's outputs (query and node vectors)
  int hidden = 0;          ///< second layer's outputs
  std::vector<float> w2;   ///< [hidden x width], row-major
  std::vector<float> b2;   ///< [hidden]
  std::vector<float> w3;   ///< [hidden]
  float b3 = 0.0f;

  /// The score of query vector q and node vector u (width floats each).
  float score(const float* q, const float* u) const;
};

class CostModel {
 public:
  /// A model with fresh weights (deterministic for config.seed). Throws kernels::Error without
  /// LibTorch or on a bad configuration.
  static CostModel create(const CostModelConfig& config);
  /// Loads a model file. `expect_kind`, when given, must be the file's kernel, `expect_encoder`
  /// its encoder (else kernels::Error naming both). Refuses another schedule encoding version,
  /// a truncated, corrupt or foreign file, NaN weights.
  static CostModel load(const std::string& path,
                        std::optional<kernels::KernelKind> expect_kind = std::nullopt,
                        std::optional<EncoderKind> expect_encoder = std::nullopt);
  /// In the lite build (backend.hpp): throws TorchRequired when the model at `path` needs
  /// LibTorch (a WACONet encoder), before any work that load() would come after. Does nothing
  /// in the LibTorch build, or for a file load() would refuse anyway (load() says why).
  static void check_backend(const std::string& path);
  /// load() once per process and file: the model is kept, shared and read-only, for as long as
  /// the file at `path` is the same one (device, inode, size, modification time); thread-safe.
  /// The model's choice of an adaptive plan, every tune and predict of a process reuse it
  /// (loading costs ~0.5-1 ms, 10-20 csr SpMV calls of a small matrix). Errors as load().
  static std::shared_ptr<const CostModel> load_shared(
      const std::string& path, std::optional<kernels::KernelKind> expect_kind = std::nullopt);
  /// Writes the model file atomically (a kill never leaves a torn file).
  void save(const std::string& path) const;
  /// This model reading the dense size too (config().dense_input), ranking as this one does until
  /// it is trained: the new feature's weights zero, its standardization fixed (log2 J around 6,
  /// by 2), the rest copied; for fine-tuning a model trained at one size on groups of several.
  /// Throws kernels::Error for a model that has it already, SpMV, or a WACONet encoder, and
  /// TorchRequired in the lite build.
  CostModel with_dense_input() const;

  CostModel(CostModel&&) noexcept;
  CostModel& operator=(CostModel&&) noexcept;
  ~CostModel();

  const CostModelConfig& config() const;
  /// Free-form record saved with the model ("training": data hash, command, history, ...).
  nlohmann::json& record();
  const nlohmann::json& record() const;
  std::int64_t parameter_count() const;

  /// The model's view of an operand (throws for a tensor given to a matrix kernel and back).
  /// `signature`: a's locality signature when the caller has it already (the schedule space
  /// computed it), so that the feature encoders do not compute it again (matrix_features).
  /// `dtype`: the value type the schedules will compute in, read by a dtype_input model (others
  /// rank the same whatever it is). `dense`: the dense size, read by a dense_input model (which
  /// throws kernels::Error without one, 0); others ignore it.
  ModelInput prepare(const kernels::CooMatrix& a,
                     const signature::LocalitySignature* signature = nullptr,
                     kernels::Dtype dtype = kernels::Dtype::F32, std::int64_t dense = 0) const;
  ModelInput prepare(const kernels::CooTensor& t, kernels::Dtype dtype = kernels::Dtype::F32,
                     std::int64_t dense = 0) const;

  /// Scores of schedules for one operand, lower = predicted faster. Schedules must be of the
  /// model's kernel (kernels::Error otherwise).
  std::vector<double> scores(const ModelInput& input,
                             const std::vector<codegen::SuperSchedule>& schedules) const;

  /// The head's layers after the first (see HeadTail).
  HeadTail head_tail() const;
  /// The query vector of an operand: HeadTail::width floats.
  std::vector<float> query_vector(const ModelInput& input) const;
  /// The node vectors of schedules, HeadTail::width floats each, one after another.
  /// head_tail().score(query_vector(x), node k) equals scores(x, schedules)[k] (to rounding).
  std::vector<float> node_vectors(const std::vector<codegen::SuperSchedule>& schedules) const;

  /// Trains on `train`, early-stopping on the median Spearman over `validation` (the weights of
  /// the best epoch are kept). Deterministic for a given config.seed and thread count. The
  /// feature standardization is fitted on `train` (unless resuming). `progress` gets every epoch.
  TrainSummary train(const std::vector<RankingExample>& train,
                     const std::vector<RankingExample>& validation, const TrainOptions& options,
                     const std::function<void(const EpochReport&)>& progress = {});

  /// The mean hinge loss over all known pairs of the examples (every schedule), no training.
  double loss(const std::vector<RankingExample>& examples, double margin = 1.0,
              double min_gap = 0.02) const;

  struct Impl;

 private:
  explicit CostModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The model's RankingQuality on `examples` (train's validation, calibrate's held-out groups).
RankingQuality ranking_quality(const CostModel& model, const std::vector<RankingExample>& examples,
                               double min_gap = 0.02);

/// Pairwise hinge loss of one matrix's scores, mean over the known pairs (i known faster than j
/// by more than min_gap: max(0, margin - (s_j - s_i))); 0 without pairs. Torch-free reference
/// for tests and reports.
double pairwise_hinge(const std::vector<double>& scores, const std::vector<double>& seconds,
                      const std::vector<char>& lower_bound, double margin, double min_gap);

}  // namespace waco::learned
