// The cost model in LibTorch (cost_model.hpp): encoders, schedule embedder, head, pairwise hinge
// training with early stopping and checkpoints, and the model file.
#include "waco/learned/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include <torch/torch.h>

#include "cost_model_internal.hpp"
#include "tensor_file.hpp"
#include "waconet.hpp"
#include "waco/codegen/schedule_encoding.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/matrix_features.hpp"
#include "waco/learned/ranking_metrics.hpp"

namespace waco::learned {

using kernels::Error;

// ---------------------------------------------------------------------------------------------
// Inputs.


// ---------------------------------------------------------------------------------------------
// The network.

namespace {

/// Lookup tables per categorical field + a linear layer on the permutation matrix -> MLP.
struct ScheduleEmbedderImpl : torch::nn::Module {
  ScheduleEmbedderImpl(kernels::KernelKind kind, int table_width, int width) {
    const std::vector<int> cards = codegen::categorical_cardinalities(kind);
    for (std::size_t f = 0; f < cards.size(); ++f)
      tables.push_back(register_module("table" + std::to_string(f),
                                       torch::nn::Embedding(cards[f], table_width)));
    const auto slots = static_cast<std::int64_t>(2 * codegen::kernel_spec(kind).vars.size());
    order = register_module("order", torch::nn::Linear(slots * slots, table_width));
    const auto in = static_cast<std::int64_t>(cards.size() + 1) * table_width;
    mlp1 = register_module("mlp1", torch::nn::Linear(in, width));
    mlp2 = register_module("mlp2", torch::nn::Linear(width, width));
  }
  /// fields [N, F] int64, order [N, S*S] float -> [N, width]
  torch::Tensor forward(const torch::Tensor& fields, const torch::Tensor& order_m) {
    std::vector<torch::Tensor> parts;
    for (std::size_t f = 0; f < tables.size(); ++f)
      parts.push_back(tables[f]->forward(fields.select(1, static_cast<std::int64_t>(f))));
    parts.push_back(order->forward(order_m));
    return mlp2->forward(torch::relu(mlp1->forward(torch::relu(torch::cat(parts, 1)))));
  }
  std::vector<torch::nn::Embedding> tables;
  torch::nn::Linear order{nullptr}, mlp1{nullptr}, mlp2{nullptr};
};
TORCH_MODULE(ScheduleEmbedder);

struct CostNetImpl : torch::nn::Module {
  explicit CostNetImpl(const CostModelConfig& c) : config(c) {
    torch::manual_seed(c.seed);
    const int w = c.width;
    if (uses_features(c.encoder)) {
      const int n = model_feature_count(c);
      feat1 = register_module("feat1", torch::nn::Linear(n, w));
      feat2 = register_module("feat2", torch::nn::Linear(w, w));
      feat_mean = register_buffer("feat_mean", torch::zeros({n}));
      feat_std = register_buffer("feat_std", torch::ones({n}));
    }
    if (uses_waconet(c.encoder)) {
      WacoNetParams p = waconet_variant(c.waconet_variant, dims_of(c.kind));
      p.embedding = w;
      waconet = register_module("waconet", WacoNet(p, c.seed));
    }
    if (uses_features(c.encoder) && uses_waconet(c.encoder))
      combine = register_module("combine", torch::nn::Linear(2 * w, w));
    schedule = register_module("schedule", ScheduleEmbedder(c.kind, c.table_width, w));
    head1 = register_module("head1", torch::nn::Linear(2 * w, 128));
    head2 = register_module("head2", torch::nn::Linear(128, 64));
    head3 = register_module("head3", torch::nn::Linear(64, 1));
  }

  /// Matrix embeddings [B, width] of inputs.
  torch::Tensor matrix_embedding(const std::vector<const ModelInput::Impl*>& in) {
    const auto B = static_cast<std::int64_t>(in.size());
    torch::Tensor fe, we;
    if (feat1) {
      const std::int64_t n = feat_mean.size(0);
      std::vector<float> raw;
      raw.reserve(static_cast<std::size_t>(B * n));
      for (const auto* x : in) {
        if (static_cast<std::int64_t>(x->features.size()) != n)
          throw Error("model input has " + std::to_string(x->features.size()) +
                      " features, the model reads " + std::to_string(n),
                      "prepare the matrix with the same model");
        raw.insert(raw.end(), x->features.begin(), x->features.end());
      }
      auto f = (torch::tensor(raw).reshape({B, n}) - feat_mean) / feat_std;
      fe = feat2->forward(torch::relu(feat1->forward(f)));
    }
    if (waconet) {
      std::vector<const PreparedPattern::Impl*> patterns;
      for (const auto* x : in) {
        if (!x->pattern) throw Error("model input has no WACONet pattern", "prepare it with this model");
        patterns.push_back(x->pattern.get());
      }
      we = waconet->forward_batch(patterns, ConvImpl::Fused).embedding;
    }
    if (fe.defined() && we.defined()) return combine->forward(torch::relu(torch::cat({fe, we}, 1)));
    return fe.defined() ? fe : we;
  }

  /// Scores [N] of N schedules for one matrix embedding [width].
  torch::Tensor scores(const torch::Tensor& m, const torch::Tensor& fields, const torch::Tensor& order_m) {
    auto s = schedule->forward(fields, order_m);
    auto x = torch::cat({m.unsqueeze(0).expand({s.size(0), m.size(0)}), s}, 1);
    x = head2->forward(torch::relu(head1->forward(torch::relu(x))));
    return head3->forward(torch::relu(x)).squeeze(1);
  }

  CostModelConfig config;
  torch::nn::Linear feat1{nullptr}, feat2{nullptr}, combine{nullptr};
  torch::Tensor feat_mean, feat_std;
  WacoNet waconet{nullptr};
  ScheduleEmbedder schedule{nullptr};
  torch::nn::Linear head1{nullptr}, head2{nullptr}, head3{nullptr};
};
TORCH_MODULE(CostNet);

/// Schedules as the embedder's inputs.
struct EncodedSchedules {
  torch::Tensor fields;  ///< [N, F] int64
  torch::Tensor order;   ///< [N, S*S] float
};

EncodedSchedules encode_schedules(kernels::KernelKind kind,
                                  const std::vector<codegen::SuperSchedule>& schedules) {
  const ScheduleInputs in = schedule_inputs(kind, schedules);
  return {torch::tensor(in.field_values, torch::kLong).reshape({in.count, in.fields}),
          torch::tensor(in.order).reshape({in.count, in.order_size})};
}

/// Pair mask [N, N]: entry (i, j) = 1 when i is known faster than j.
torch::Tensor pair_mask(const std::vector<double>& sec, const std::vector<char>& lb,
                        const std::vector<std::size_t>& idx, double min_gap) {
  const auto n = static_cast<std::int64_t>(idx.size());
  std::vector<float> m(static_cast<std::size_t>(n * n), 0.0f);
  for (std::int64_t a = 0; a < n; ++a)
    for (std::int64_t b = 0; b < n; ++b)
      if (a != b && known_faster(sec[idx[a]], lb[idx[a]], sec[idx[b]], lb[idx[b]], min_gap))
        m[static_cast<std::size_t>(a * n + b)] = 1.0f;
  return torch::tensor(m).reshape({n, n});
}

/// Sum of hinge terms and number of pairs for scores s [n] under mask [n, n].
std::pair<torch::Tensor, double> hinge_terms(const torch::Tensor& s, const torch::Tensor& mask,
                                             double margin) {
  // diff[i][j] = s_j - s_i: positive when j is scored slower than i.
  auto diff = s.unsqueeze(0) - s.unsqueeze(1);
  auto terms = torch::relu(margin - diff) * mask;
  return {terms.sum(), mask.sum().item<double>()};
}

/// A portable shuffle (SplitMix64 Fisher-Yates): the same order on every standard library.
template <typename T>
void shuffle(std::vector<T>& v, std::uint64_t seed) {
  std::uint64_t state = seed;
  for (std::size_t i = v.size(); i > 1; --i) {
    state = kernels::splitmix64(state);
    std::swap(v[i - 1], v[state % i]);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CostModel.

struct CostModel::Impl {
  CostModelConfig config;
  CostNet net{nullptr};
  ModelRecord record;

  std::map<std::string, torch::Tensor> tensors() const {
    std::map<std::string, torch::Tensor> m;
    for (auto& [name, t] : module_tensors(*net)) m[name] = t;
    return m;
  }
  std::map<std::string, torch::Tensor> snapshot() const {
    std::map<std::string, torch::Tensor> m;
    for (auto& [name, t] : module_tensors(*net)) m[name] = t.detach().clone();
    return m;
  }
  void restore(const std::map<std::string, torch::Tensor>& snap) {
    torch::NoGradGuard g;
    for (auto& [name, t] : module_tensors(*net)) t.copy_(snap.at(name));
  }
  nlohmann::json header() const {
    return {{"format_version", kCostModelFormatVersion},
            {"schedule_encoding_version", codegen::kScheduleEncodingVersion},
            {"config", config.to_json()},
            {"record", record.get()}};
  }
};

CostModel::CostModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CostModel::CostModel(CostModel&&) noexcept = default;
CostModel& CostModel::operator=(CostModel&&) noexcept = default;
CostModel::~CostModel() = default;

CostModel CostModel::create(const CostModelConfig& config) {
  if (config.width < 1 || config.width > 4096 || config.table_width < 1 || config.table_width > 1024)
    throw Error("cost model widths out of range (width " + std::to_string(config.width) +
                ", table width " + std::to_string(config.table_width) + ")");
  check_inputs(config);
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->net = CostNet(config);
  return CostModel(std::move(impl));
}

const CostModelConfig& CostModel::config() const { return impl_->config; }
nlohmann::json& CostModel::record() { return impl_->record.get(); }
const nlohmann::json& CostModel::record() const { return impl_->record.get(); }

std::int64_t CostModel::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& t : impl_->net->parameters()) n += t.numel();
  return n;
}

void CostModel::save(const std::string& path) const {
  write_tensor_file(path, kCostModelMagic, kCostModelVersions, impl_->header().dump(),
                    module_tensors(*impl_->net));
}

CostModel CostModel::with_dense_input() const {
  if (impl_->config.dense_input) throw Error("the cost model reads the dense size already");
  CostModelConfig c = impl_->config;
  c.dense_input = true;
  CostModel wide = create(c);  // check_inputs: SpMV and WACONet refused
  wide.impl_->record = impl_->record.get();
  const auto from = impl_->snapshot();
  torch::NoGradGuard g;
  // The dense size is the last feature (prepare_input): a zero column of feat1's weights, so
  // that every score is this model's until training moves it.
  for (auto& [name, t] : module_tensors(*wide.impl_->net)) {
    const torch::Tensor& old = from.at(name);
    if (name == "feat1.weight") {
      t.zero_();
      t.narrow(1, 0, old.size(1)).copy_(old);
    } else if (name == "feat_mean" || name == "feat_std") {
      t.narrow(0, 0, old.size(0)).copy_(old);
      t[old.size(0)] = name == "feat_mean" ? 6.0f : 2.0f;  // log2 J: 16..256 within one unit
    } else {
      t.copy_(old);
    }
  }
  return wide;
}

CostModel CostModel::load(const std::string& path, std::optional<kernels::KernelKind> expect_kind,
                          std::optional<EncoderKind> expect_encoder) {
  TensorFileReader r(path, kCostModelMagic, kCostModelVersions, "cost model");
  ModelHeader h = parse_model_header(path, r.header(), expect_kind, expect_encoder);
  CostModel m = create(h.config);
  m.impl_->record = std::move(h.record);
  read_into(r, m.impl_->tensors());
  return m;
}

namespace {
/// WACONet's view of an operand, for prepare_input.
auto waconet_pattern(const CostNet& net) {
  return [&net](const auto& op) { return prepare_sites(net->waconet->params(), sites_of(op)); };
}
}  // namespace

ModelInput CostModel::prepare(const kernels::CooMatrix& a,
                             const signature::LocalitySignature* signature,
                             kernels::Dtype dtype, std::int64_t dense) const {
  return prepare_input(impl_->config, a, false, features_with(signature),
                       waconet_pattern(impl_->net), dtype, dense);
}

ModelInput CostModel::prepare(const kernels::CooTensor& t, kernels::Dtype dtype,
                             std::int64_t dense) const {
  return prepare_input(impl_->config, t, true, tensor_features, waconet_pattern(impl_->net), dtype,
                       dense);
}

std::vector<double> CostModel::scores(const ModelInput& input,
                                      const std::vector<codegen::SuperSchedule>& schedules) const {
  if (schedules.empty()) return {};
  torch::NoGradGuard guard;
  impl_->net->eval();
  const EncodedSchedules e = encode_schedules(impl_->config.kind, schedules);
  const auto m = impl_->net->matrix_embedding({&input.impl()}).squeeze(0);
  const auto s = impl_->net->scores(m, e.fields, e.order).contiguous();
  return std::vector<double>(s.data_ptr<float>(), s.data_ptr<float>() + s.numel());
}

HeadTail CostModel::head_tail() const {
  torch::NoGradGuard guard;
  const CostNet& net = impl_->net;
  auto floats = [](const torch::Tensor& t) {
    const torch::Tensor c = t.detach().to(torch::kFloat).contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  };
  HeadTail h;
  h.width = static_cast<int>(net->head2->weight.size(1));
  h.hidden = static_cast<int>(net->head2->weight.size(0));
  h.w2 = floats(net->head2->weight);
  h.b2 = floats(net->head2->bias);
  h.w3 = floats(net->head3->weight);
  h.b3 = floats(net->head3->bias).at(0);
  return h;
}

std::vector<float> CostModel::query_vector(const ModelInput& input) const {
  torch::NoGradGuard guard;
  impl_->net->eval();
  const auto m = impl_->net->matrix_embedding({&input.impl()}).squeeze(0);
  const auto w = static_cast<std::int64_t>(impl_->config.width);
  const torch::Tensor& W1 = impl_->net->head1->weight;  // [128, 2w]: matrix half, schedule half
  const torch::Tensor q =
      (torch::matmul(W1.narrow(1, 0, w), torch::relu(m)) + impl_->net->head1->bias).contiguous();
  return std::vector<float>(q.data_ptr<float>(), q.data_ptr<float>() + q.numel());
}

std::vector<float> CostModel::node_vectors(
    const std::vector<codegen::SuperSchedule>& schedules) const {
  if (schedules.empty()) return {};
  torch::NoGradGuard guard;
  impl_->net->eval();
  const EncodedSchedules e = encode_schedules(impl_->config.kind, schedules);
  const auto s = impl_->net->schedule->forward(e.fields, e.order);
  const auto w = static_cast<std::int64_t>(impl_->config.width);
  const torch::Tensor& W1 = impl_->net->head1->weight;
  const torch::Tensor u = torch::matmul(torch::relu(s), W1.narrow(1, w, w).t()).contiguous();
  return std::vector<float>(u.data_ptr<float>(), u.data_ptr<float>() + u.numel());
}

// ---------------------------------------------------------------------------------------------
// Training.

namespace {

/// Validation: median Spearman (exact candidates only) and pooled pair accuracy.
std::pair<double, double> validate(const CostModel& model, const std::vector<RankingExample>& val,
                                   double min_gap) {
  const RankingQuality q = ranking_quality(model, val, min_gap);
  return {q.spearman_median, q.pair_accuracy};
}

void save_optimizer(const torch::optim::Adam& opt, int epoch, const std::string& path) {
  torch::serialize::OutputArchive a;
  opt.save(a);
  a.write("epoch", torch::tensor(static_cast<std::int64_t>(epoch)));
  const std::string tmp = path + ".tmp";
  a.save_to(tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error("cannot rename '" + tmp + "' to '" + path + "'");
}

/// Loads the optimizer state when it belongs to `epoch`; false otherwise (then Adam restarts).
bool load_optimizer(torch::optim::Adam& opt, int epoch, const std::string& path) {
  try {
    torch::serialize::InputArchive a;
    a.load_from(path);
    torch::Tensor e;
    if (!a.try_read("epoch", e) || e.item<std::int64_t>() != epoch) return false;
    opt.load(a);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

nlohmann::json epoch_json(const EpochReport& r) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return {{"epoch", r.epoch}, {"train_loss", num(r.train_loss)},
          {"val_spearman", num(r.val_spearman)}, {"val_pair_accuracy", num(r.val_pair_accuracy)},
          {"seconds", r.seconds}, {"best", r.best}};
}

EpochReport epoch_from_json(const nlohmann::json& j) {
  auto num = [](const nlohmann::json& v) {
    return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
  };
  EpochReport r;
  r.epoch = j.at("epoch").get<int>();
  r.train_loss = num(j.at("train_loss"));
  r.val_spearman = num(j.at("val_spearman"));
  r.val_pair_accuracy = num(j.at("val_pair_accuracy"));
  r.seconds = j.at("seconds").get<double>();
  r.best = j.at("best").get<bool>();
  return r;
}

}  // namespace

TrainSummary CostModel::train(const std::vector<RankingExample>& train,
                              const std::vector<RankingExample>& validation,
                              const TrainOptions& o,
                              const std::function<void(const EpochReport&)>& progress) {
  if (train.empty()) throw Error("no training matrices", "collect data first (waco-hybrid collect)");
  if (o.epochs < 1 || o.schedules_per_matrix < 2 || o.matrices_per_step < 1 || !(o.learning_rate > 0))
    throw Error("bad training options (epochs, schedules per matrix >= 2, matrices per step, "
                "learning rate > 0)");
  set_threads(o.threads);
  const double t_start = kernels::now_seconds();
  CostNet& net = impl_->net;
  const CostModelConfig& c = impl_->config;

  // Inputs that do not change: encoded schedules of every example.
  std::vector<EncodedSchedules> enc;
  for (const auto& ex : train) {
    if (ex.schedules.size() != ex.seconds.size() || ex.seconds.size() != ex.lower_bound.size())
      throw Error("training example '" + ex.name + "': schedules, seconds and flags differ in size");
    enc.push_back(encode_schedules(c.kind, ex.schedules));
  }

  TrainSummary summary;
  if (o.head_only && !o.fine_tune)
    throw Error("training only the scoring head needs a trained model to start from",
                "fine-tune one (train --init MODEL, calibrate)");
  // Head only: the other weights take no gradient (restored before returning).
  std::vector<torch::Tensor> trained = net->parameters();
  if (o.head_only) {
    for (torch::Tensor& t : trained) t.set_requires_grad(false);
    trained.clear();
    for (const torch::nn::Linear* h : {&net->head1, &net->head2, &net->head3})
      for (torch::Tensor t : (*h)->parameters()) {
        t.set_requires_grad(true);
        trained.push_back(t);
      }
  }
  struct GradsBack {
    CostNet& net;
    bool frozen;
    ~GradsBack() {
      if (frozen)
        for (torch::Tensor t : net->parameters()) t.set_requires_grad(true);
    }
  } grads_back{net, o.head_only};
  torch::optim::Adam opt(trained, torch::optim::AdamOptions(o.learning_rate));
  int start_epoch = 0;
  std::map<std::string, torch::Tensor> best;
  summary.best_val_spearman = -std::numeric_limits<double>::infinity();
  int since_best = 0;
  namespace fs = std::filesystem;
  const std::string ck = o.checkpoint, ck_best = ck + ".best", ck_adam = ck + ".adam";
  std::error_code ec;
  if (o.resume && !ck.empty() && fs::exists(ck, ec)) {
    CostModel saved = load(ck, c.kind, c.encoder);
    if (saved.config().to_json() != c.to_json())
      throw Error(ck + ": the checkpoint was written for another configuration (" +
                      saved.config().to_json().dump() + ")",
                  "resume with the same options, or start without --resume");
    const auto& st = saved.record().at("checkpoint");
    impl_->restore(saved.impl_->tensors());
    start_epoch = st.at("epoch").get<int>();
    for (const auto& h : st.at("history")) summary.history.push_back(epoch_from_json(h));
    summary.best_epoch = st.at("best_epoch").get<int>();
    summary.best_val_spearman = st.at("best_val_spearman").is_number()
                                    ? st.at("best_val_spearman").get<double>()
                                    : -std::numeric_limits<double>::infinity();
    since_best = st.at("since_best").get<int>();
    best = fs::exists(ck_best, ec) ? load(ck_best, c.kind, c.encoder).impl_->snapshot()
                                   : impl_->snapshot();
    if (!load_optimizer(opt, start_epoch, ck_adam))
      std::fprintf(stderr, "warning: %s does not match the checkpoint's epoch %d: Adam's moments "
                           "restart\n", ck_adam.c_str(), start_epoch);
    summary.resumed = true;
  } else if (o.fine_tune) {
    // The trained model's standardization stays; its weights as they are are epoch 0's
    // candidate, kept unless an epoch validates better.
    if (!validation.empty()) {
      const double v0 = validate(*this, validation, o.min_gap).first;
      summary.best_val_spearman = std::isfinite(v0) ? v0 : -1.0;
    }
  } else if (net->feat1) {
    // Standardize the features on the training matrices.
    const std::int64_t n = net->feat_mean.size(0);
    std::vector<float> all;
    for (const auto& ex : train) all.insert(all.end(), ex.input.impl().features.begin(),
                                            ex.input.impl().features.end());
    auto f = torch::tensor(all).reshape({static_cast<std::int64_t>(train.size()), n});
    torch::NoGradGuard g;
    net->feat_mean.copy_(f.mean(0));
    auto sd = f.std(0, /*unbiased=*/false);
    net->feat_std.copy_(torch::where(sd > 1e-6, sd, torch::ones_like(sd)));
  }
  if (best.empty()) best = impl_->snapshot();

  for (int epoch = start_epoch; epoch < o.epochs; ++epoch) {
    const double t0 = kernels::now_seconds();
    net->train();
    // This epoch's order and schedule subsets depend only on (seed, epoch): resumable.
    const std::uint64_t es = kernels::splitmix64(o.order_seed.value_or(c.seed) ^
                                                 kernels::splitmix64(static_cast<std::uint64_t>(epoch) + 1));
    std::vector<std::size_t> order(train.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    shuffle(order, es);
    double loss_sum = 0.0, pair_sum = 0.0;
    for (std::size_t s = 0; s < order.size(); s += static_cast<std::size_t>(o.matrices_per_step)) {
      const std::size_t e = std::min(order.size(), s + static_cast<std::size_t>(o.matrices_per_step));
      std::vector<const ModelInput::Impl*> ins;
      for (std::size_t q = s; q < e; ++q) ins.push_back(&train[order[q]].input.impl());
      opt.zero_grad();
      const torch::Tensor emb = net->matrix_embedding(ins);
      torch::Tensor total = torch::zeros({});
      double pairs_step = 0.0;
      for (std::size_t q = s; q < e; ++q) {
        const RankingExample& ex = train[order[q]];
        std::vector<std::size_t> idx(ex.schedules.size());
        for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
        shuffle(idx, es ^ kernels::splitmix64(order[q] + 17));
        idx.resize(std::min(idx.size(), static_cast<std::size_t>(o.schedules_per_matrix)));
        const torch::Tensor mask = pair_mask(ex.seconds, ex.lower_bound, idx, o.min_gap);
        const auto ti = torch::tensor(std::vector<std::int64_t>(idx.begin(), idx.end()), torch::kLong);
        const EncodedSchedules& en = enc[order[q]];
        const torch::Tensor sc = net->scores(emb[static_cast<std::int64_t>(q - s)],
                                             en.fields.index_select(0, ti), en.order.index_select(0, ti));
        auto [terms, pairs] = hinge_terms(sc, mask, o.margin);
        if (pairs <= 0) continue;
        total = total + terms / pairs;  // every matrix weighs the same
        loss_sum += terms.item<double>();
        pair_sum += pairs;
        pairs_step += 1;
      }
      if (pairs_step > 0) {
        (total / pairs_step).backward();
        opt.step();
      }
    }
    EpochReport r;
    r.epoch = epoch + 1;
    r.train_loss = pair_sum > 0 ? loss_sum / pair_sum : 0.0;
    std::tie(r.val_spearman, r.val_pair_accuracy) =
        validation.empty() ? std::pair<double, double>{std::numeric_limits<double>::quiet_NaN(),
                                                       std::numeric_limits<double>::quiet_NaN()}
                           : validate(*this, validation, o.min_gap);
    // Without validation data every epoch is the best (the last weights are kept).
    const double v = std::isfinite(r.val_spearman) ? r.val_spearman : -1.0;
    r.best = validation.empty() || v > summary.best_val_spearman;
    if (r.best) {
      summary.best_val_spearman = validation.empty() ? r.val_spearman : v;
      summary.best_epoch = r.epoch;
      best = impl_->snapshot();
      since_best = 0;
    } else {
      ++since_best;
    }
    r.seconds = kernels::now_seconds() - t0;
    summary.history.push_back(r);
    const bool stop = !validation.empty() && since_best >= o.patience;
    const int left = stop ? 0 : o.epochs - r.epoch;
    r.eta_seconds = r.seconds * left;
    summary.history.back().eta_seconds = r.eta_seconds;
    if (!ck.empty()) {
      // Optimizer, best weights, then the checkpoint itself (its epoch is the commit point).
      save_optimizer(opt, r.epoch, ck_adam);
      if (r.best) save(ck_best);
      nlohmann::json hist = nlohmann::json::array();
      for (const auto& h : summary.history) hist.push_back(epoch_json(h));
      const nlohmann::json saved_record = impl_->record.get();
      impl_->record.get()["checkpoint"] = {
          {"epoch", r.epoch}, {"best_epoch", summary.best_epoch},
          {"best_val_spearman", std::isfinite(summary.best_val_spearman)
                                    ? nlohmann::json(summary.best_val_spearman) : nlohmann::json()},
          {"since_best", since_best}, {"history", hist}};
      save(ck);
      impl_->record = saved_record;
    }
    if (progress) progress(r);
    if (stop) {
      summary.stopped_early = true;
      break;
    }
  }
  impl_->restore(best);
  net->eval();
  summary.seconds = kernels::now_seconds() - t_start;
  nlohmann::json hist = nlohmann::json::array();
  for (const auto& h : summary.history) hist.push_back(epoch_json(h));
  impl_->record.get()["history"] = hist;
  impl_->record.get()["best_epoch"] = summary.best_epoch;
  return summary;
}

}  // namespace waco::learned
