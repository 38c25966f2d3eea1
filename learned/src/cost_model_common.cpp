// The torch-free part of cost_model.hpp, built with and without LibTorch: encoder names, the
// configuration's JSON form, the reference pairwise hinge loss, and the pieces both
// implementations share (cost_model_internal.hpp).

#include <algorithm>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>

#include "cost_model_internal.hpp"
#include "tensor_reader.hpp"
#include "waco/codegen/schedule_encoding.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/file_stamp.hpp"
#include "waco/kernels/json_fields.hpp"
#include "waco/learned/backend.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/ranking_metrics.hpp"

namespace waco::learned {

using kernels::Error;

std::string encoder_name(EncoderKind e) {
  switch (e) {
    case EncoderKind::Stats: return "stats";
    case EncoderKind::Signature: return "signature";
    case EncoderKind::WacoNet: return "waconet";
    case EncoderKind::SignatureWacoNet: return "signature+waconet";
  }
  return "?";
}

std::vector<std::string> encoder_names() {
  return {"stats", "signature", "waconet", "signature+waconet"};
}

EncoderKind parse_encoder(const std::string& name) {
  for (EncoderKind e : {EncoderKind::Stats, EncoderKind::Signature, EncoderKind::WacoNet,
                        EncoderKind::SignatureWacoNet})
    if (encoder_name(e) == name) return e;
  throw Error("unknown matrix encoder '" + name + "'",
              "use one of: stats, signature, waconet, signature+waconet");
}

float HeadTail::score(const float* q, const float* u) const {
  // The first layer's output, relu'd, kept on the stack for the usual width (128).
  float h1_small[256];
  std::vector<float> h1_big;
  float* h1 = h1_small;
  if (width > 256) {
    h1_big.resize(static_cast<std::size_t>(width));
    h1 = h1_big.data();
  }
  for (int k = 0; k < width; ++k) h1[k] = std::max(0.0f, q[k] + u[k]);
  float out = b3;
  for (int r = 0; r < hidden; ++r) {
    const float* row = w2.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(width);
    float acc = b2[static_cast<std::size_t>(r)];
#pragma omp simd reduction(+ : acc)
    for (int k = 0; k < width; ++k) acc += row[k] * h1[k];
    out += w3[static_cast<std::size_t>(r)] * std::max(0.0f, acc);
  }
  return out;
}

nlohmann::json CostModelConfig::to_json() const {
  nlohmann::json j = {{"kernel", std::string(kernels::kernel_name(kind))},
          {"encoder", encoder_name(encoder)},
          {"waconet_variant", waconet_variant},
          {"width", width},
          {"table_width", table_width},
          {"seed", seed}};
  if (dtype_input) j["dtype_input"] = true;
  if (dense_input) j["dense_input"] = true;
  return j;
}

void check_inputs(const CostModelConfig& c) {
  if (c.dtype_input && !uses_features(c.encoder))
    throw Error("a model reading the value type (dtype_input) needs a feature encoder "
                "(signature or stats)");
  if (c.dense_input && !uses_features(c.encoder))
    throw Error("a model reading the dense size (dense_input) needs a feature encoder "
                "(signature or stats)");
  if (c.dense_input && c.kind == kernels::KernelKind::SpMV)
    throw Error("a model reading the dense size (dense_input) needs a kernel with dense "
                "operands (spmm, sddmm, mttkrp), not spmv");
}

CostModelConfig CostModelConfig::from_json(const nlohmann::json& j) {
  try {
    CostModelConfig c;
    const auto kind = kernels::parse_kernel(j.at("kernel").get<std::string>());
    if (!kind) throw Error("unknown kernel '" + j.at("kernel").get<std::string>() + "'");
    c.kind = *kind;
    c.encoder = parse_encoder(j.at("encoder").get<std::string>());
    c.waconet_variant = j.at("waconet_variant").get<std::string>();
    const auto small_int = [&](const char* key) {
      return static_cast<int>(
          kernels::json_int_field(j, key, 0, 1 << 30, "malformed cost model configuration"));
    };
    c.width = small_int("width");
    c.table_width = small_int("table_width");
    c.seed = kernels::json_unsigned_field(j, "seed", "malformed cost model configuration");
    c.dtype_input = j.value("dtype_input", false);
    c.dense_input = j.value("dense_input", false);
    try {
      check_inputs(c);
    } catch (const Error& e) {
      throw Error(std::string("malformed cost model configuration: ") + e.what());
    }
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed cost model configuration: ") + e.what());
  }
}

double pairwise_hinge(const std::vector<double>& scores, const std::vector<double>& seconds,
                      const std::vector<char>& lower_bound, double margin, double min_gap) {
  double sum = 0.0;
  std::int64_t pairs = 0;
  for (std::size_t i = 0; i < scores.size(); ++i)
    for (std::size_t j = 0; j < scores.size(); ++j)
      if (i != j && known_faster(seconds[i], lower_bound[i], seconds[j], lower_bound[j], min_gap)) {
        sum += std::max(0.0, margin - (scores[j] - scores[i]));
        ++pairs;
      }
  return pairs ? sum / static_cast<double>(pairs) : 0.0;
}

RankingQuality ranking_quality(const CostModel& model, const std::vector<RankingExample>& examples,
                               double min_gap) {
  std::vector<double> rho;
  PairCount pc;
  for (const auto& ex : examples) {
    const std::vector<double> s = model.scores(ex.input, ex.schedules);
    std::vector<double> ps, ms;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (!ex.lower_bound[i]) {
        ps.push_back(s[i]);
        ms.push_back(ex.seconds[i]);
      }
    rho.push_back(spearman(ps, ms));
    const PairCount c = pairwise_agreement(s, ex.seconds, ex.lower_bound, min_gap);
    pc.agree2 += c.agree2;
    pc.pairs += c.pairs;
  }
  return {median_finite(rho), pc.accuracy(), examples.size(), pc.pairs};
}

double CostModel::loss(const std::vector<RankingExample>& examples, double margin,
                       double min_gap) const {
  double sum = 0.0;
  int n = 0;
  for (const auto& ex : examples) {
    const std::vector<double> s = scores(ex.input, ex.schedules);
    sum += pairwise_hinge(s, ex.seconds, ex.lower_bound, margin, min_gap);
    ++n;
  }
  return n ? sum / n : 0.0;
}

ScheduleInputs schedule_inputs(kernels::KernelKind kind,
                               const std::vector<codegen::SuperSchedule>& schedules) {
  ScheduleInputs in;
  schedule_inputs_into(kind, schedules, in);
  return in;
}

void schedule_inputs_into(kernels::KernelKind kind,
                          const std::vector<codegen::SuperSchedule>& schedules, ScheduleInputs& in) {
  in.count = static_cast<std::int64_t>(schedules.size());
  in.fields = static_cast<std::int64_t>(codegen::categorical_cardinalities(kind).size());
  const auto slots = static_cast<std::int64_t>(2 * codegen::kernel_spec(kind).vars.size());
  in.order_size = slots * slots;
  in.field_values.clear();
  in.order.clear();
  in.field_values.reserve(static_cast<std::size_t>(in.count * in.fields));
  in.order.reserve(static_cast<std::size_t>(in.count * in.order_size));
  for (const codegen::SuperSchedule& s : schedules) {
    if (s.kind != kind)
      throw Error("a " + std::string(kernels::kernel_name(s.kind)) + " schedule given to a " +
                      std::string(kernels::kernel_name(kind)) + " cost model",
                  "use the model of the schedule's kernel");
    // The encoding has no static scheduling nor chunk=auto, nor the training data: such a
    // schedule is seen as its dynamic twin with the largest chunk (the closest dispatch), so that
    // a search scores them alike and measurement decides between them.
    codegen::SuperSchedule seen = s;
    if (seen.chunk == codegen::kStaticChunk || seen.chunk == codegen::kAutoChunk)
      seen.chunk = codegen::kMaxChunk;
    const codegen::ScheduleCode c = codegen::encode(seen);
    for (int v : codegen::categorical_fields(c)) in.field_values.push_back(v);
    const std::vector<float> m = codegen::order_matrix(c);
    in.order.insert(in.order.end(), m.begin(), m.end());
  }
}

struct ModelRecord::State {
  std::mutex mutex;        ///< the first read parses (not std::call_once: a parse may throw)
  std::string path, text;  ///< text: empty once parsed (or never given)
  nlohmann::json value = nlohmann::json::object();
};

ModelRecord::ModelRecord() : state_(std::make_unique<State>()) {}
ModelRecord::ModelRecord(std::string path, std::string text) : ModelRecord() {
  state_->path = std::move(path);
  state_->text = std::move(text);
}
ModelRecord::ModelRecord(ModelRecord&&) noexcept = default;
ModelRecord& ModelRecord::operator=(ModelRecord&&) noexcept = default;
ModelRecord::~ModelRecord() = default;

ModelRecord& ModelRecord::operator=(nlohmann::json value) {
  state_ = std::make_unique<State>();
  state_->value = std::move(value);
  return *this;
}

const nlohmann::json& ModelRecord::get() const {
  State& s = *state_;
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.text.empty()) {  // a corrupt record stays text: it is reported at every read
    try {
      s.value = nlohmann::json::parse(s.text);
    } catch (const nlohmann::json::exception& e) {
      throw Error(s.path + ": corrupt cost model header (its training record): " + e.what(),
                  "write the model again");
    }
    s.text.clear();
    s.text.shrink_to_fit();
  }
  return s.value;
}

nlohmann::json& ModelRecord::get() {
  return const_cast<nlohmann::json&>(static_cast<const ModelRecord&>(*this).get());
}

namespace {

/// [begin, end) of the value of the top-level key `key` in the JSON object `t`, found by
/// following strings and brackets alone (no number is parsed); nullopt when the key is not
/// there or `t` is not an object this walk can follow (the parser then says what is wrong).
std::optional<std::pair<std::size_t, std::size_t>> top_level_value(std::string_view t,
                                                                   std::string_view key) {
  constexpr std::size_t npos = std::string_view::npos;
  std::size_t i = 0;
  const auto blank = [&] {
    while (i < t.size() && (t[i] == ' ' || t[i] == '\n' || t[i] == '\r' || t[i] == '\t')) ++i;
  };
  const auto string_end = [&](std::size_t p) {  // t[p] == '"': after its closing quote
    for (++p; p < t.size(); ++p) {
      if (t[p] == '\\')
        ++p;
      else if (t[p] == '"')
        return p + 1;
    }
    return npos;
  };
  const auto value_end = [&](std::size_t p) {  // where the value at p ends (at depth 0)
    int depth = 0;
    while (p < t.size()) {
      const char c = t[p];
      if (c == '"') {
        p = string_end(p);
        if (p == npos) return npos;
        if (depth == 0) return p;
        continue;
      }
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (depth == 0) return p;  // a scalar's end: the object's close
        if (--depth == 0) return p + 1;
      } else if (depth == 0 && (c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t')) {
        return p;
      }
      ++p;
    }
    return depth == 0 ? p : npos;
  };
  blank();
  if (i >= t.size() || t[i] != '{') return std::nullopt;
  ++i;
  for (;;) {
    blank();
    if (i >= t.size() || t[i] != '"') return std::nullopt;
    const std::size_t k = i;
    i = string_end(i);
    if (i == npos) return std::nullopt;
    const std::string_view name = t.substr(k + 1, i - k - 2);
    blank();
    if (i >= t.size() || t[i] != ':') return std::nullopt;
    ++i;
    blank();
    const std::size_t begin = i;
    i = value_end(i);
    if (i == npos || i == begin) return std::nullopt;
    if (name == key) return std::make_pair(begin, i);
    blank();
    if (i >= t.size() || t[i] != ',') return std::nullopt;
    ++i;
  }
}

}  // namespace

ModelHeader parse_model_header(const std::string& path, const std::string& header_text,
                               std::optional<kernels::KernelKind> expect_kind,
                               std::optional<EncoderKind> expect_encoder) {
  ModelHeader out;
  try {
    // The training record stays text (ModelRecord): the rest, with an empty record in its
    // place, is parsed and checked now.
    nlohmann::json h;
    if (const auto at = top_level_value(header_text, "record")) {
      const auto [begin, end] = *at;
      h = nlohmann::json::parse(header_text.substr(0, begin) + "{}" + header_text.substr(end));
      out.record = ModelRecord(path, header_text.substr(begin, end - begin));
    } else {
      h = nlohmann::json::parse(header_text);
      if (h.is_object() && h.contains("record")) out.record = std::move(h["record"]);
    }
    if (!h.is_object() || !h.contains("config"))
      throw Error(path + ": corrupt cost model header (no configuration)", "write the model again");
    const int enc = h.value("schedule_encoding_version", -1);
    if (enc != codegen::kScheduleEncodingVersion)
      throw Error(path + ": the model reads schedule encoding version " + std::to_string(enc) +
                      ", this build writes version " +
                      std::to_string(codegen::kScheduleEncodingVersion),
                  "train the model again with this version (waco-hybrid train)");
    out.config = CostModelConfig::from_json(h.at("config"));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": corrupt cost model header: " + e.what(), "write the model again");
  }
  const CostModelConfig& config = out.config;
  if (expect_kind && *expect_kind != config.kind)
    throw Error(path + ": a cost model for " + std::string(kernels::kernel_name(config.kind)) +
                    ", not " + std::string(kernels::kernel_name(*expect_kind)),
                "pass the model trained for this kernel");
  if (expect_encoder && *expect_encoder != config.encoder)
    throw Error(path + ": a cost model with the " + encoder_name(config.encoder) +
                    " encoder, not " + encoder_name(*expect_encoder),
                "pass a model trained with the requested encoder, or do not ask for one");
  return out;
}

void throw_torch_required(const std::string& what) {
  throw TorchRequired(what + " needs LibTorch, which this build of waco_learned runs without",
                      "run waco-hybrid-torch, the LibTorch build installed beside waco-hybrid");
}

void require_torch(const std::string& what) {
  if (!built_with_torch()) throw_torch_required(what);
}

const ModelInput::Impl& ModelInput::impl() const {
  if (!impl_) throw Error("empty model input", "prepare the matrix with CostModel::prepare");
  return *impl_;
}
double ModelInput::prepare_seconds() const { return impl().seconds; }

namespace {

using kernels::FileStamp;

struct SharedModels {
  std::mutex mutex;
  std::map<std::string, std::pair<FileStamp, std::shared_ptr<const CostModel>>> by_path;
  /// Files whose header check_backend read and found to run without LibTorch (a plan checks its
  /// model each time it is made: the file opened and its header read, ~0.06 ms).
  std::map<std::string, FileStamp> checked;
};

SharedModels& shared_models() {
  static SharedModels m;
  return m;
}

/// The model kept for `path` while the file is unchanged, or null.
std::shared_ptr<const CostModel> kept_model(const std::string& path, const FileStamp& stamp) {
  SharedModels& m = shared_models();
  const std::lock_guard<std::mutex> lock(m.mutex);
  const auto it = m.by_path.find(path);
  if (it == m.by_path.end() || !(it->second.first == stamp)) return nullptr;
  return it->second.second;
}

}  // namespace

std::shared_ptr<const CostModel> CostModel::load_shared(
    const std::string& path, std::optional<kernels::KernelKind> expect_kind) {
  const std::optional<FileStamp> stamp = kernels::file_stamp(path);
  if (!stamp) return std::make_shared<const CostModel>(load(path, expect_kind));  // its error
  std::shared_ptr<const CostModel> model = kept_model(path, *stamp);
  if (!model) {
    // Loaded outside the lock (two threads may both load the first time; one is kept).
    model = std::make_shared<const CostModel>(load(path));
    SharedModels& m = shared_models();
    const std::lock_guard<std::mutex> lock(m.mutex);
    m.by_path[path] = {*stamp, model};
  }
  // load()'s own message for a model of another kernel.
  if (expect_kind && model->config().kind != *expect_kind) load(path, expect_kind);
  return model;
}

namespace {

/// The header's config.encoder, read by a SAX pass that stops there: "config" comes first (keys
/// are written in order), so ~100 bytes are parsed of a header whose training record is ~9 KB of
/// numbers (~0.2 ms to parse, a fresh process's every first plan). Empty when not found.
class EncoderOfHeader : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string encoder;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool string(string_t& v) override {
    if (keys_.size() == 2 && keys_[0] == "config" && keys_[1] == "encoder") {
      encoder = v;
      return false;  // found: stop
    }
    return true;
  }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    keys_.back() = k;
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    keys_.emplace_back();  // elements have no key
    return true;
  }
  bool end_array() override {
    keys_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  /// The key of each open object (its last one), from the outermost; "" inside arrays. The
  /// value of keys_[d] is being read at depth d + 1.
  std::vector<std::string> keys_;
};

}  // namespace

void CostModel::check_backend(const std::string& path) {
  if (built_with_torch()) return;
  // A model this process loaded from the same file runs in this build.
  const std::optional<FileStamp> stamp = kernels::file_stamp(path);
  if (!stamp) return;  // load() reports it
  if (kept_model(path, *stamp)) return;
  SharedModels& m = shared_models();
  {
    const std::lock_guard<std::mutex> lock(m.mutex);
    const auto it = m.checked.find(path);
    if (it != m.checked.end() && it->second == *stamp) return;
  }
  std::optional<EncoderKind> encoder;
  try {
    TensorFileReader r(path, kCostModelMagic, kCostModelVersions, "cost model");
    EncoderOfHeader sax;
    nlohmann::json::sax_parse(r.header(), &sax);
    encoder = !sax.encoder.empty() ? parse_encoder(sax.encoder)
                                   : parse_model_header(path, r.header(), std::nullopt, std::nullopt)
                                         .config.encoder;
  } catch (const Error&) {
    return;  // load() reports it
  }
  if (uses_waconet(*encoder))
    require_torch("the cost model " + path + " (" + encoder_name(*encoder) + " encoder)");
  const std::lock_guard<std::mutex> lock(m.mutex);
  m.checked[path] = *stamp;
}

void check_operand(const CostModelConfig& c, bool tensor) {
  if (kernels::needs_tensor(c.kind) != tensor)
    throw Error("a " + std::string(kernels::kernel_name(c.kind)) + " cost model needs " +
                (tensor ? "a matrix, not a tensor" : "a 3-D tensor, not a matrix"));
}

}  // namespace waco::learned
