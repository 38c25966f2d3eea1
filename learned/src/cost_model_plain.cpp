// cost_model.hpp in the lite build (backend.hpp): inference of models whose matrix encoder reads
// feature vectors (stats, signature) in plain C++ with Eigen, so that `waco-hybrid` ranks
// schedules without loading LibTorch. It computes what cost_model.cpp's network computes, layer
// for layer, from the same model file (the CLI test compares the two builds' scores):
//   matrix   m = feat2 relu(feat1 ((x - mean) / std))
//   schedule s = mlp2 relu(mlp1 relu([table_0[f_0] .. table_F-1[f_F-1], order P]))
//   score      = head3 relu(head2 relu(head1 relu([m, s])))
// Creating, training and saving a model, and the WACONet encoders, throw TorchRequired.
#include <Eigen/Core>
#include <algorithm>
#include <map>
#include <memory>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cost_model_internal.hpp"
#include "scratch_product.hpp"
#include "tensor_reader.hpp"
#include "waco/codegen/schedule_encoding.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/huge_pages.hpp"
#include "waco/kernels/memo.hpp"
#include "waco/learned/cost_model.hpp"

namespace waco::learned {

using kernels::Error;

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::VectorXf;
/// Rows in storage this file holds (the weights' block, a Workspace): aligned as a Matrix's own
/// storage is, so that every product computes what it computed on Matrix objects, bit for bit.
using MatrixMap = Eigen::Map<Matrix, Eigen::AlignedMax>;
using ConstMatrixMap = Eigen::Map<const Matrix, Eigen::AlignedMax>;
using ConstVectorMap = Eigen::Map<const Vector, Eigen::AlignedMax>;

/// A weight tensor in the model's block (Tensors): rows x cols, row-major.
struct Weights {
  const float* data = nullptr;
  Eigen::Index rows = 0, cols = 0;
  ConstMatrixMap matrix() const { return {data, rows, cols}; }
  ConstVectorMap vector() const { return {data, rows * cols}; }
  Eigen::Index size() const { return rows * cols; }
};

/// A linear layer as torch::nn::Linear stores it: weight [out x in], bias [out].
struct Linear {
  Weights w, b;
  ConstMatrixMap weight() const { return w.matrix(); }
  ConstVectorMap bias() const { return b.vector(); }
  /// Rows of x [N x in] -> [N x out].
  Matrix operator()(const Matrix& x) const {
    Matrix y = x * weight().transpose();
    y.rowwise() += bias().transpose();
    return y;
  }
  /// The same into y [N x out], storage the caller holds; Eigen's packed panels in `pack`
  /// where the product runs on one thread (detail::product_in_scratch).
  template <class X>
  void into(const X& x, MatrixMap& y, detail::PackScratch pack = {}) const {
    if (!detail::product_in_scratch(y, x, weight().transpose(), pack))
      y.noalias() = x * weight().transpose();
    y.rowwise() += bias().transpose();
  }
};

Matrix relu(const Matrix& x) { return x.cwiseMax(0.0f); }
void relu_in_place(MatrixMap& x) { x = x.cwiseMax(0.0f); }

/// Where a model's weights lie: the model file's read-only mapping (a padded file: the weights
/// used where they lie, tensor_reader.hpp), or one block the values were read into (an older
/// file).
struct WeightStorage {
  std::shared_ptr<const void> mapping;
  kernels::HugeBlock block;
};

/// The model file's tensors by name, each 64-byte aligned, row-major in its shape (rows: the
/// first size; columns: the product of the others): where they lie in the file's mapping (a
/// padded file), else all read straight into one block of memory (kernels::HugeBlock: the
/// weights of a model, ~0.5 MB, were ~20 matrices of their own whose ~140 fresh pages cost 2.2 ms
/// of a process's first choice on the Zen 5 VMs, ~0.3 ms on one huge page); take() checks each
/// one's shape and removes it, so that what is left at the end was not expected.
class Tensors {
 public:
  explicit Tensors(TensorFileReader& r) : path_(r.path()) {
    if (r.padded()) {
      r.view_each([&](const std::string& name, const std::vector<std::int64_t>& sizes,
                      std::int64_t numel,
                      const float* values) { keep(name, sizes, numel, values); });
      storage_.mapping = r.mapping();
      return;
    }
    std::size_t used = 0, capacity = 0;
    float* base = nullptr;
    r.read_each(
        [&](const std::string& name, const std::vector<std::int64_t>& sizes, std::int64_t numel) {
          const std::size_t at = (used + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
          if (at + static_cast<std::size_t>(numel) > capacity)  // read_each checked the file
            throw kernels::InternalError(path_ + ": a tensor outside the weights' block");
          used = at + static_cast<std::size_t>(numel);
          keep(name, sizes, numel, base + at);
          return base + at;
        },
        [&](std::uint32_t count) {
          // Each tensor's values are in the file, so its size bounds them all; each start is
          // rounded up to 64 bytes.
          capacity = static_cast<std::size_t>(r.size()) / sizeof(float) +
                     std::size_t{count + 1} * kAlignFloats;
          storage_.block = kernels::HugeBlock(capacity * sizeof(float));
          base = static_cast<float*>(storage_.block.data());
        });
  }
  Weights matrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
    return take(name, {rows, cols});
  }
  Weights vec(const std::string& name, std::int64_t n) { return take(name, {n}); }
  Linear linear(const std::string& name, std::int64_t in, std::int64_t out) {
    return {matrix(name + ".weight", out, in), vec(name + ".bias", out)};
  }
  void check_all_read() const {
    if (!by_name_.empty())
      throw Error(path_ + ": unexpected tensor '" + by_name_.begin()->first + "'",
                  "the file is corrupt or was written by another version");
  }
  /// Where the weights taken lie.
  WeightStorage release() { return std::move(storage_); }

 private:
  static constexpr std::size_t kAlignFloats = 64 / sizeof(float);
  struct Stored {
    std::vector<std::int64_t> sizes;
    Weights weights;
  };
  void keep(const std::string& name, const std::vector<std::int64_t>& sizes, std::int64_t numel,
            const float* values) {
    const std::int64_t rows = sizes.empty() ? 1 : sizes.front();
    Stored& t = by_name_[name];  // a name given twice: the last one (as before)
    t.sizes = sizes;
    t.weights = {values, rows, rows > 0 ? numel / rows : 0};
  }
  Weights take(const std::string& name, const std::vector<std::int64_t>& sizes) {
    auto it = by_name_.find(name);
    if (it == by_name_.end())
      throw Error(path_ + ": has no tensor '" + name + "'",
                  "the file is corrupt or was written by another version");
    if (it->second.sizes != sizes)
      throw Error(path_ + ": tensor '" + name + "' has the wrong shape for the architecture",
                  "the file is corrupt or was written by another version");
    const Weights w = it->second.weights;
    by_name_.erase(it);
    return w;
  }
  std::string path_;
  WeightStorage storage_;
  std::map<std::string, Stored> by_name_;
};

/// Storage for scoring a batch, kept per thread and reused: the temporaries of scoring the
/// whole admissible set (SpMM: ~900 schedules, ~5 MB) were given back to the system after every
/// call and faulted in again on the next, 60% of a repeated choice on the Zen 5 VMs (~10 us a
/// 4-KiB page). Three arrays in one kernels::HugeBlock of at least 256 KiB (so on a huge page:
/// up to 2 MiB resident per thread that scores), which only grows; past kKeptFloats it is let
/// go after the call. A fourth array holds Eigen's packed panels of the products that run on
/// one thread (detail::product_in_scratch): fresh stack or heap pages in a process's first choice.
class Workspace {
 public:
  /// Room for arrays of na, nb, nc and (packing) nd floats; what it holds is kept when that is
  /// enough.
  void reserve(std::size_t na, std::size_t nb, std::size_t nc, std::size_t nd) {
    if (na <= na_ && nb <= nb_ && nc <= nc_ && nd <= nd_) return;
    const auto grown = [](std::size_t need, std::size_t had) {
      return round_up(std::max(need, had + had / 2));
    };
    na_ = grown(na, na_);
    nb_ = grown(nb, nb_);
    nc_ = grown(nc, nc_);
    nd_ = grown(nd, nd_);
    // At least a huge page's worth: in a process's first choice, an SpMM short list's ~0.2 MB in
    // 4-KiB pages took ~0.5 ms more to score (medians of 8 fresh adaptive plans on each of 4
    // files: 1.77-3.08 ms -> 1.44-2.50 ms); an SpMV list's ~0.1 MB gained nothing measurable.
    constexpr std::size_t kMinFloats = kernels::HugeBlock::kHugeBlockMinBytes / sizeof(float);
    if (total() < kMinFloats) na_ += round_up(kMinFloats - total());
    block_ = kernels::HugeBlock(total() * sizeof(float));
  }
  float* a() const { return base(); }
  float* b() const { return base() + na_; }
  float* c() const { return base() + na_ + nb_; }
  detail::PackScratch pack() const { return {base() + na_ + nb_ + nc_, nd_}; }
  /// The schedule embedder's inputs of the last batch, their vectors' storage reused: a whole
  /// admissible set's (SpMM: ~900 schedules, ~0.2 MB) were fresh pages on every call.
  ScheduleInputs inputs;
  /// Lets go of the storage when it holds more than kKeptFloats (a batch of tens of thousands
  /// of schedules).
  void trim() {
    if (total() > kKeptFloats) *this = Workspace();
  }

 private:
  static constexpr std::size_t kKeptFloats = std::size_t{8} << 20;  // 32 MiB
  static std::size_t round_up(std::size_t n) { return (n + 15) / 16 * 16; }  // 64 bytes
  float* base() const { return static_cast<float*>(block_.data()); }
  std::size_t total() const { return na_ + nb_ + nc_ + nd_; }
  kernels::HugeBlock block_;
  std::size_t na_ = 0, nb_ = 0, nc_ = 0, nd_ = 0;
};

Workspace& workspace() {
  thread_local Workspace ws;
  return ws;
}

/// A list of schedules as a key (kernels::Memo).
struct ScheduleListHash {
  std::size_t operator()(const std::vector<codegen::SuperSchedule>& list) const {
    std::size_t h = list.size();
    for (const codegen::SuperSchedule& s : list) h = h * 1000003u ^ codegen::hash_value(s);
    return h;
  }
};

/// The largest list whose embeddings are kept (a short list's batch; the whole admissible set's
/// batches are not asked for twice).
constexpr std::size_t kKeptList = 128;

}  // namespace

struct CostModel::Impl {
  CostModelConfig config;
  ModelRecord record;
  std::int64_t parameters = 0;
  WeightStorage weights;  ///< every tensor below points into it (Tensors)
  Weights feat_mean, feat_std;
  Linear feat1, feat2;
  std::vector<Weights> tables;  ///< per categorical field: [cardinality x table width]
  Linear order, mlp1, mlp2;
  Linear head1, head2, head3;

  /// The matrix embedding [1 x width].
  Matrix matrix_embedding(const ModelInput& input) const {
    const std::vector<float>& raw = input.impl().features;
    if (static_cast<std::int64_t>(raw.size()) != feat_mean.size())
      throw Error("model input has " + std::to_string(raw.size()) + " features, the model reads " +
                      std::to_string(feat_mean.size()),
                  "prepare the matrix with the same model");
    Matrix x = Eigen::Map<const Matrix>(raw.data(), 1, static_cast<Eigen::Index>(raw.size()));
    x = ((x.transpose() - feat_mean.vector()).cwiseQuotient(feat_std.vector())).transpose();
    return feat2(relu(feat1(x)));
  }

  /// schedule_embeddings of short lists, per list: they depend on the schedules and the model
  /// alone, and an adaptive plan's short list comes back whole for matrix after matrix (26
  /// schedules: ~80 us of a 0.6 ms choice on a 7k-nonzero matrix).
  mutable kernels::Memo<std::vector<codegen::SuperSchedule>, std::shared_ptr<const Matrix>, ScheduleListHash>
      kept_embeddings{16};

  /// The schedule embeddings of a list of at most kKeptList schedules, kept.
  std::shared_ptr<const Matrix> kept_embeddings_of(
      const std::vector<codegen::SuperSchedule>& schedules, Workspace& ws) const {
    return kept_embeddings.get(schedules, [&] {
      return std::make_shared<const Matrix>(schedule_embeddings(schedules, ws));
    });
  }

  /// The schedule embeddings [N x width], in ws.c (ws.a and ws.b are overwritten).
  MatrixMap schedule_embeddings(const std::vector<codegen::SuperSchedule>& schedules,
                                Workspace& ws) const {
    ScheduleInputs& in = ws.inputs;
    schedule_inputs_into(config.kind, schedules, in);
    const auto tw = static_cast<Eigen::Index>(config.table_width);
    const auto f_count = static_cast<Eigen::Index>(in.fields);
    const Eigen::Index n_rows = in.count;
    const auto rows = static_cast<std::size_t>(n_rows);
    const Eigen::Map<const Matrix> order_m(in.order.data(), n_rows, in.order_size);
    reserve(ws, rows);
    MatrixMap x(ws.a(), n_rows, (f_count + 1) * tw);
    for (Eigen::Index n = 0; n < n_rows; ++n)
      for (Eigen::Index f = 0; f < f_count; ++f) {
        const std::int64_t v = in.field_values[static_cast<std::size_t>(n * f_count + f)];
        const Weights& table = tables[static_cast<std::size_t>(f)];
        if (v < 0 || v >= table.rows)
          throw kernels::InternalError("schedule field " + std::to_string(f) + " value " +
                                       std::to_string(v) + " outside its lookup table");
        x.block(n, f * tw, 1, tw) = table.matrix().row(static_cast<Eigen::Index>(v));
      }
    {
      MatrixMap o(ws.b(), n_rows, tw);
      order.into(order_m, o, ws.pack());
      x.rightCols(tw) = o;
    }
    relu_in_place(x);
    MatrixMap h(ws.b(), n_rows, width());
    mlp1.into(x, h, ws.pack());
    relu_in_place(h);
    MatrixMap e(ws.c(), n_rows, width());
    mlp2.into(h, e, ws.pack());
    return e;
  }

  /// Room in ws for schedule_embeddings and scores of `rows` schedules: a holds the embedding
  /// layers' input, then the heads'; b the order layer's and mlp1's output, then head1's; c the
  /// embeddings, then head2's output; d the packed panels of the largest product.
  void reserve(Workspace& ws, std::size_t rows) const {
    const auto tw = static_cast<std::size_t>(config.table_width);
    const auto w = static_cast<std::size_t>(width());
    const auto h1 = static_cast<std::size_t>(head1.w.rows);
    const auto h2 = static_cast<std::size_t>(head2.w.rows);
    std::size_t pack = 0;
    for (const Linear* l : {&order, &mlp1, &mlp2, &head1, &head2, &head3})
      pack = std::max(pack, detail::pack_floats(rows, static_cast<std::size_t>(l->w.rows),
                                                static_cast<std::size_t>(l->w.cols)));
    ws.reserve(rows * std::max((tables.size() + 1) * tw, 2 * w), rows * std::max({tw, w, h1}),
               rows * std::max(w, h2), pack);
  }

  Eigen::Index width() const { return config.width; }
  /// head1's matrix and schedule halves.
  auto head1_matrix() const { return head1.weight().leftCols(width()); }
  auto head1_schedule() const { return head1.weight().rightCols(width()); }
};

CostModel::CostModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CostModel::CostModel(CostModel&&) noexcept = default;
CostModel& CostModel::operator=(CostModel&&) noexcept = default;
CostModel::~CostModel() = default;

CostModel CostModel::create(const CostModelConfig&) {
  throw_torch_required("creating a cost model");
}

void CostModel::save(const std::string&) const { throw_torch_required("writing a cost model"); }
CostModel CostModel::with_dense_input() const { throw_torch_required("widening a cost model"); }

TrainSummary CostModel::train(const std::vector<RankingExample>&, const std::vector<RankingExample>&,
                              const TrainOptions&, const std::function<void(const EpochReport&)>&) {
  throw_torch_required("training");
}

CostModel CostModel::load(const std::string& path, std::optional<kernels::KernelKind> expect_kind,
                          std::optional<EncoderKind> expect_encoder) {
  TensorFileReader r(path, kCostModelMagic, kCostModelVersions, "cost model");
  ModelHeader h = parse_model_header(path, r.header(), expect_kind, expect_encoder);
  const CostModelConfig& c = h.config;
  if (uses_waconet(c.encoder))
    throw_torch_required("the cost model " + path + " (" + encoder_name(c.encoder) + " encoder)");
  if (c.width < 1 || c.width > 4096 || c.table_width < 1 || c.table_width > 1024)
    throw Error(path + ": cost model widths out of range", "the file is corrupt");

  auto impl = std::make_unique<Impl>();
  impl->config = c;
  impl->record = std::move(h.record);
  Tensors t(r);
  const std::int64_t w = c.width;
  const std::int64_t tw = c.table_width;
  const std::int64_t n = model_feature_count(c);
  impl->feat1 = t.linear("feat1", n, w);
  impl->feat2 = t.linear("feat2", w, w);
  impl->feat_mean = t.vec("feat_mean", n);
  impl->feat_std = t.vec("feat_std", n);
  const std::vector<int> cards = codegen::categorical_cardinalities(c.kind);
  for (std::size_t f = 0; f < cards.size(); ++f)
    impl->tables.push_back(t.matrix("schedule.table" + std::to_string(f) + ".weight", cards[f], tw));
  const auto slots = static_cast<std::int64_t>(2 * codegen::kernel_spec(c.kind).vars.size());
  impl->order = t.linear("schedule.order", slots * slots, tw);
  impl->mlp1 = t.linear("schedule.mlp1", static_cast<std::int64_t>(cards.size() + 1) * tw, w);
  impl->mlp2 = t.linear("schedule.mlp2", w, w);
  impl->head1 = t.linear("head1", 2 * w, 128);
  impl->head2 = t.linear("head2", 128, 64);
  impl->head3 = t.linear("head3", 64, 1);
  t.check_all_read();
  impl->weights = t.release();

  std::int64_t p = 0;  // parameters, as LibTorch counts them (not the standardization buffers)
  for (const Linear* l : {&impl->feat1, &impl->feat2, &impl->order, &impl->mlp1, &impl->mlp2,
                          &impl->head1, &impl->head2, &impl->head3})
    p += l->w.size() + l->b.size();
  for (const Weights& m : impl->tables) p += m.size();
  impl->parameters = p;
  return CostModel(std::move(impl));
}

const CostModelConfig& CostModel::config() const { return impl_->config; }
nlohmann::json& CostModel::record() { return impl_->record.get(); }
const nlohmann::json& CostModel::record() const { return impl_->record.get(); }
std::int64_t CostModel::parameter_count() const { return impl_->parameters; }

namespace {

std::vector<float> floats(const Weights& m) { return {m.data, m.data + m.size()}; }

}  // namespace

namespace {
/// The lite build refuses WACONet models at load, so no input needs a pattern.
constexpr auto kNoPattern = [](const auto&) { return std::shared_ptr<const PreparedPattern::Impl>(); };
}  // namespace

ModelInput CostModel::prepare(const kernels::CooMatrix& a,
                             const signature::LocalitySignature* signature,
                             kernels::Dtype dtype, std::int64_t dense) const {
  return prepare_input(impl_->config, a, false, features_with(signature), kNoPattern, dtype, dense);
}

ModelInput CostModel::prepare(const kernels::CooTensor& t, kernels::Dtype dtype,
                             std::int64_t dense) const {
  return prepare_input(impl_->config, t, true, tensor_features, kNoPattern, dtype, dense);
}

namespace {

/// Eigen splits a product over the calling thread's OpenMP threads (omp_get_max_threads, unless
/// Eigen::setNbThreads set a count in this module: the Eigen baseline's measuring processes). A
/// batch of a short list (13-70 schedules) costs less than starting and joining the team
/// (scoring 26 took 0.15-0.20 ms with it, 0.10-0.11 ms without): such a batch runs on the calling
/// thread alone. The setting is the calling thread's own (OpenMP's nthreads-var) and is restored.
class SerialBelow {
 public:
  explicit SerialBelow(std::size_t batch) {
#ifdef _OPENMP
    if (batch <= kSerialBatch) {
      saved_ = omp_get_max_threads();
      omp_set_num_threads(1);
    }
#else
    (void)batch;
#endif
  }
  ~SerialBelow() {
#ifdef _OPENMP
    if (saved_ > 0) omp_set_num_threads(saved_);
#endif
  }
  SerialBelow(const SerialBelow&) = delete;
  SerialBelow& operator=(const SerialBelow&) = delete;

 private:
  static constexpr std::size_t kSerialBatch = 128;
  int saved_ = 0;
};

}  // namespace

std::vector<double> CostModel::scores(const ModelInput& input,
                                      const std::vector<codegen::SuperSchedule>& schedules) const {
  if (schedules.empty()) return {};
  const SerialBelow serial(schedules.size());
  const Impl& m = *impl_;
  Workspace& ws = workspace();
  const auto n_rows = static_cast<Eigen::Index>(schedules.size());
  const std::size_t rows = schedules.size();
  const Eigen::Index w = m.width();
  // x = [matrix embedding, schedule embedding] per schedule, in ws.a; the embeddings of a short
  // list are kept, the others computed in ws.c.
  std::shared_ptr<const Matrix> kept;
  if (rows <= kKeptList) kept = m.kept_embeddings_of(schedules, ws);
  const float* e = kept ? kept->data() : m.schedule_embeddings(schedules, ws).data();
  const ConstMatrixMap embeddings(e, n_rows, w);
  m.reserve(ws, rows);  // held already: nothing moves
  MatrixMap x(ws.a(), n_rows, 2 * w);
  x.leftCols(w).rowwise() = m.matrix_embedding(input).row(0);
  x.rightCols(w) = embeddings;
  relu_in_place(x);
  MatrixMap h1(ws.b(), n_rows, m.head1.w.rows);
  m.head1.into(x, h1, ws.pack());
  relu_in_place(h1);
  MatrixMap h2(ws.c(), n_rows, m.head2.w.rows);
  m.head2.into(h1, h2, ws.pack());
  relu_in_place(h2);
  Matrix out(n_rows, m.head3.w.rows);
  MatrixMap out_map(out.data(), out.rows(), out.cols());
  m.head3.into(h2, out_map, ws.pack());
  ws.trim();
  return std::vector<double>(out.data(), out.data() + out.size());
}

HeadTail CostModel::head_tail() const {
  const Impl& m = *impl_;
  HeadTail h;
  h.width = static_cast<int>(m.head2.w.cols);
  h.hidden = static_cast<int>(m.head2.w.rows);
  h.w2 = floats(m.head2.w);
  h.b2 = floats(m.head2.b);
  h.w3 = floats(m.head3.w);
  h.b3 = m.head3.b.data[0];
  return h;
}

std::vector<float> CostModel::query_vector(const ModelInput& input) const {
  const Impl& m = *impl_;
  const Matrix e = relu(m.matrix_embedding(input));
  const Vector q = m.head1_matrix() * e.row(0).transpose() + m.head1.bias();
  return {q.data(), q.data() + q.size()};
}

std::vector<float> CostModel::node_vectors(
    const std::vector<codegen::SuperSchedule>& schedules) const {
  if (schedules.empty()) return {};
  const Impl& m = *impl_;
  Workspace& ws = workspace();
  const Matrix e = relu(m.schedule_embeddings(schedules, ws));
  ws.trim();
  const Matrix u = e * m.head1_schedule().transpose();
  return {u.data(), u.data() + u.size()};
}

}  // namespace waco::learned
