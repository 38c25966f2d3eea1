// waco-hybrid features FILE: runs the WACONet feature extractor (WACO paper section 4.1.1) on a
// matrix or 3-D tensor and prints the embedding and where the time went (kernel maps, each conv
// layer, pooling, MLPs) with the peak memory, so its cost can be seen on any input.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli_common.hpp"
#include "command.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/feature_extractor.hpp"
#include "waco/kernels/process_memory.hpp"

namespace waco::cli {
using namespace waco::kernels;

namespace {

struct Options {
  std::vector<std::string> files;
  std::string file;  ///< files[0]
  std::string arch;  // empty: "full", or the weights file's architecture
  std::string weights;
  std::string impl = "fused";
  std::uint64_t seed = 1;
  int threads = 0;
  bool backward = false;
  bool compare = false;  ///< several files: also one at a time, side by side
  bool json = false;
  ReadOptions read;
};

std::string join_names() {
  std::string s;
  for (const auto& n : learned::waconet_variant_names()) s += (s.empty() ? "" : "|") + n;
  return s;
}

int operand_dims(const std::string& file, const Operand& op) {
  const int dims = op.matrix ? 2 : op.tensor->tensor.order();
  if (dims != 2 && dims != 3)
    throw Error(file + ": WACONet reads matrices and 3-D tensors, this tensor has order " +
                std::to_string(dims));
  return dims;
}

learned::FeatureExtractor make_extractor(const Options& o, int dims) {
  learned::FeatureExtractor fx = [&] {
    if (o.weights.empty())
      return learned::FeatureExtractor::create(
          learned::waconet_variant(o.arch.empty() ? "full" : o.arch, dims), o.seed);
    if (o.arch.empty()) return learned::FeatureExtractor::load(o.weights);
    const auto expected = learned::waconet_variant(o.arch, dims);
    return learned::FeatureExtractor::load(o.weights, &expected);
  }();
  fx.set_conv_impl(learned::parse_conv_impl(o.impl));
  return fx;
}

/// Several files: their patterns embedded in one batched forward pass (one block-diagonal kernel
/// map per layer), as the search embeds many matrices at once; --compare also embeds them one at
/// a time and reports both times and the largest difference of the embeddings.
int run_batch(const Options& o, int threads) {
  if (o.backward) throw Error("--backward takes one file", "give one FILE with --backward");
  std::vector<learned::PreparedPattern> patterns;
  std::vector<std::int64_t> nnz;
  std::optional<learned::FeatureExtractor> fx;
  int dims = 0;
  double maps = 0.0;
  for (const std::string& file : o.files) {
    const Operand op = load_operand(file, o.read);
    const int d = operand_dims(file, op);
    if (!fx) {
      dims = d;
      fx.emplace(make_extractor(o, dims));
    } else if (d != dims) {
      throw Error(file + " has " + std::to_string(d) + " dimensions, " + o.files[0] + " " +
                      std::to_string(dims) + ": one batch holds operands of one order",
                  "embed matrices and tensors in separate calls");
    }
    patterns.push_back(op.matrix ? fx->prepare(op.matrix->matrix) : fx->prepare(op.tensor->tensor));
    maps += patterns.back().stats().build_seconds;
    nnz.push_back(op.matrix ? op.matrix->matrix.nnz() : op.tensor->tensor.nnz());
  }
  if (o.compare) fx->extract(patterns.front());  // warm-up: neither side pays first-call costs
  const double t0 = kernels::now_seconds();
  const std::vector<learned::Features> batch = fx->extract(patterns);
  const double batched_s = kernels::now_seconds() - t0;
  double separate_s = 0.0, max_diff = 0.0;
  if (o.compare) {
    for (std::size_t i = 0; i < patterns.size(); ++i) {
      const double s0 = kernels::now_seconds();
      const learned::Features one = fx->extract(patterns[i]);
      separate_s += kernels::now_seconds() - s0;
      for (std::size_t e = 0; e < one.embedding.size(); ++e)
        max_diff = std::max(max_diff, static_cast<double>(std::abs(one.embedding[e] - batch[i].embedding[e])));
    }
  }
  nlohmann::json files = nlohmann::json::array();
  for (std::size_t i = 0; i < patterns.size(); ++i)
    files.push_back({{"file", o.files[i]}, {"nnz", nnz[i]}, {"embedding", batch[i].embedding}});
  nlohmann::json j = {{"architecture", fx->params().to_string()},
                      {"conv_impl", learned::conv_impl_name(fx->conv_impl())},
                      {"batch", patterns.size()},
                      {"files", files},
                      {"times_seconds", {{"kernel_maps", maps}, {"batched_forward", batched_s}}},
                      {"peak_rss_bytes", kernels::peak_rss_bytes()}};
  if (o.compare) {
    j["times_seconds"]["separate_forward"] = separate_s;
    j["max_abs_difference"] = max_diff;
  }
  if (o.json) {
    j["context"] = context_json(threads, "none");
    print_json(j);
    return kExitOk;
  }
  std::cout << "batch of " << patterns.size() << " (" << j["architecture"].get<std::string>()
            << ", conv " << j["conv_impl"].get<std::string>() << ", " << threads << " threads)\n"
            << "kernel maps:      " << format_seconds(maps) << "\n"
            << "batched forward:  " << format_seconds(batched_s) << "\n";
  if (o.compare)
    std::cout << "one at a time:    " << format_seconds(separate_s) << " (largest embedding difference "
              << max_diff << ")\n";
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    std::ostringstream os;
    os << std::setprecision(4);
    for (std::size_t e = 0; e < std::min<std::size_t>(4, batch[i].embedding.size()); ++e)
      os << " " << batch[i].embedding[e];
    std::cout << "  " << o.files[i] << " (" << nnz[i] << " nonzeros):" << os.str() << " ...\n";
  }
  return kExitOk;
}

int run_features(const Options& o) {
  learned::require_torch("WACONet features");  // the lite build runs waco-hybrid-torch
  const int threads = resolve_threads(o.threads);
  learned::set_threads(threads);
  if (o.files.size() > 1) return run_batch(o, threads);
  const Operand op = load_operand(o.file, o.read);
  const int dims = operand_dims(o.file, op);
  learned::FeatureExtractor fx = make_extractor(o, dims);

  const auto pattern = op.matrix ? fx.prepare(op.matrix->matrix) : fx.prepare(op.tensor->tensor);
  learned::Features f = o.backward ? fx.forward_backward(pattern) : fx.extract(pattern);
  f.times.kernel_maps = pattern.stats().build_seconds;
  f.times.total = f.times.kernel_maps + f.times.forward + f.times.backward;
  double layers = 0.0;
  for (double t : f.times.layers) layers += t;
  const std::int64_t peak = kernels::peak_rss_bytes();

  nlohmann::json j;
  j["file"] = o.file;
  j["nnz"] = op.matrix ? op.matrix->matrix.nnz() : op.tensor->tensor.nnz();
  j["architecture"] = fx.params().to_string();
  j["weights"] = o.weights.empty() ? nlohmann::json("seed " + std::to_string(o.seed))
                                   : nlohmann::json(o.weights);
  j["conv_impl"] = learned::conv_impl_name(fx.conv_impl());
  j["parameters"] = fx.parameter_count();
  j["embedding"] = f.embedding;
  j["times_seconds"] = {{"kernel_maps", f.times.kernel_maps}, {"layers", f.times.layers},
                        {"layers_total", layers},           {"pooling", f.times.pooling},
                        {"mlp", f.times.mlp},                {"forward", f.times.forward},
                        {"backward", f.times.backward},      {"total", f.times.total}};
  j["pattern"] = {{"sites", f.pattern.sites},
                  {"pairs", f.pattern.pairs},
                  {"kernel_map_bytes", f.pattern.bytes}};
  j["peak_rss_bytes"] = peak;

  if (o.json) {
    j["context"] = context_json(threads, "none");
    print_json(j);
    return kExitOk;
  }
  std::cout << "file:         " << o.file << " (" << j["nnz"] << " nonzeros)\n"
            << "architecture: " << j["architecture"].get<std::string>() << "\n"
            << "weights:      " << j["weights"].get<std::string>() << ", "
            << fx.parameter_count() << " parameters; conv " << j["conv_impl"].get<std::string>()
            << ", " << threads << " threads\n"
            << "kernel maps:  " << format_seconds(f.times.kernel_maps) << " ("
            << f.pattern.bytes / (1 << 20) << " MiB)\n"
            << "layers:       " << format_seconds(layers) << "\n";
  for (std::size_t l = 0; l < f.times.layers.size(); ++l)
    std::cout << "  layer " << std::setw(2) << l << ": " << std::setw(10)
              << format_seconds(f.times.layers[l]) << "  " << f.pattern.sites[l] << " sites, "
              << f.pattern.pairs[l] << " pairs\n";
  std::cout << "pooling:      " << format_seconds(f.times.pooling) << "\n"
            << "mlp:          " << format_seconds(f.times.mlp) << "\n"
            << "forward:      " << format_seconds(f.times.forward) << "\n";
  if (o.backward) std::cout << "backward:     " << format_seconds(f.times.backward) << "\n";
  std::cout << "total:        " << format_seconds(f.times.total) << "\n"
            << "peak memory:  " << peak / (1 << 20) << " MiB\n"
            << "embedding (" << f.embedding.size() << "):";
  std::ostringstream os;
  os << std::setprecision(5);
  for (std::size_t i = 0; i < f.embedding.size(); ++i)
    os << (i % 8 == 0 ? "\n  " : " ") << std::setw(11) << f.embedding[i];
  std::cout << os.str() << "\n";
  return kExitOk;
}

}  // namespace

Command make_features_command() {
  return {"features", "WACONet embedding of a matrix or tensor, with its time breakdown",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            sub.add_option("FILES", o->files,
                           "Matrix Market (.mtx[.gz]) or FROSTT (.tns[.gz]) files; several are "
                           "embedded in one batched forward pass")
                ->required();
            sub.add_flag("--compare", o->compare,
                         "Several files: also embed them one at a time and report both times");
            sub.add_option("--arch", o->arch,
                           "WACONet variant: " + join_names() +
                               " (default: full, or the architecture of --weights; with "
                               "--weights it must match the file)");
            sub.add_option("--weights", o->weights,
                           "Weights file (default: fresh weights from --seed)");
            sub.add_option("--seed", o->seed, "Seed of fresh weights")->capture_default_str();
            sub.add_option("--conv", o->impl, "Sparse convolution: fused|autograd")
                ->capture_default_str();
            sub.add_flag("--backward", o->backward,
                         "Also run a backward pass (the cost of one training step)");
            add_threads_option(sub, o->threads);
            sub.add_flag("--json", o->json, "Print JSON (with a context block)");
            add_read_options(sub, o->read);
            sub.footer("Examples:\n  waco-hybrid features examples/bcsstk13.mtx.gz --arch small --json\n"
                       "  waco-hybrid features --compare A.mtx B.mtx C.mtx   # batched vs one at a time");
            return [o] {
              o->file = o->files.front();
              return run_features(*o);
            };
          }};
}

}  // namespace waco::cli
