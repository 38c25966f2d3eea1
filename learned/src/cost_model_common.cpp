// The torch-free part of cost_model.hpp: encoder names, the configuration's JSON form and the
// reference pairwise hinge loss (built with and without LibTorch).
#include <algorithm>

#include "waco/kernels/error.hpp"
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
  return {{"kernel", std::string(kernels::kernel_name(kind))},
          {"encoder", encoder_name(encoder)},
          {"waconet_variant", waconet_variant},
          {"width", width},
          {"table_width", table_width},
          {"seed", seed}};
}

CostModelConfig CostModelConfig::from_json(const nlohmann::json& j) {
  try {
    CostModelConfig c;
    const auto kind = kernels::parse_kernel(j.at("kernel").get<std::string>());
    if (!kind) throw Error("unknown kernel '" + j.at("kernel").get<std::string>() + "'");
    c.kind = *kind;
    c.encoder = parse_encoder(j.at("encoder").get<std::string>());
    c.waconet_variant = j.at("waconet_variant").get<std::string>();
    c.width = j.at("width").get<int>();
    c.table_width = j.at("table_width").get<int>();
    c.seed = j.at("seed").get<std::uint64_t>();
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

}  // namespace waco::learned
