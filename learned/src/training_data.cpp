#include "waco/learned/training_data.hpp"

#include <filesystem>

#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/json_fields.hpp"

namespace waco::learned {
namespace {

using kernels::Error;
namespace fs = std::filesystem;

template <typename Operand>
Operand checked(const DatasetGroup& g, Operand op) {
  const std::string fp = kernels::fingerprint_hex(op);
  if (fp != g.fingerprint)
    throw Error("group " + g.label() + ": its recipe made an operand with fingerprint " + fp +
                    ", not " + g.fingerprint,
                "the source file changed since the data was collected");
  return op;
}

}  // namespace

kernels::Recipe resolved_recipe(const DatasetGroup& g, const std::vector<std::string>& data_dirs) {
  if (!g.recipe)
    throw Error("group " + g.label() + " has no recipe: its operand cannot be made again",
                "collect it with `waco-hybrid collect`, which records recipes");
  kernels::Recipe r = *g.recipe;
  if (r.source != kernels::Recipe::Source::File) return r;
  std::error_code ec;
  if (fs::exists(r.path, ec)) return r;
  const std::string base = fs::path(r.path).filename().string();
  for (const std::string& d : data_dirs)
    for (const fs::path& p : {fs::path(d) / base, fs::path(d) / "matrices" / base,
                              fs::path(d) / "tensors" / base})
      if (fs::exists(p, ec)) {
        r.path = p.string();
        return r;
      }
  throw Error("the source file of group " + g.label() + " was not found: " + r.path +
                  " (nor " + base + " in the data directories)",
              "pass the folder holding it with --data-dir");
}


std::string DatasetGroup::label() const {
  if (recipe && recipe->source == kernels::Recipe::Source::File)
    return fs::path(recipe->path).filename().string() + " " + fingerprint;
  return source + " " + fingerprint;
}

std::string family_of(const std::optional<kernels::Recipe>& recipe, const std::string& fingerprint) {
  if (recipe && recipe->source == kernels::Recipe::Source::File) {
    const std::string base = fs::path(recipe->path).filename().string();
    const bool tns = base.find(".tns") != std::string::npos;
    return (tns ? "tensor-file:" : "file:") + base;
  }
  return "matrix:" + fingerprint;
}

std::string split_of_family(const std::string& family) {
  const std::uint64_t bucket = kernels::splitmix64(kernels::fnv1a(family)) % 100;
  return bucket < 80 ? "train" : bucket < 90 ? "validation" : "test";
}

namespace {
/// An integer field in [lo, hi]; Error otherwise.
std::int64_t group_int(const nlohmann::json& o, const char* key, std::int64_t lo, std::int64_t hi) {
  return kernels::json_int_field(o, key, lo, hi, "malformed measurement group",
                                 "the file is not a `waco-hybrid dataset export` file or is corrupt");
}
}  // namespace

DatasetGroup group_from_json(const nlohmann::json& j) {
  try {
    DatasetGroup g;
    const std::string kernel = j.at("kernel").get<std::string>();
    const auto kind = kernels::parse_kernel(kernel);
    if (!kind) throw Error("unknown kernel '" + kernel + "'");
    g.kind = *kind;
    g.dense = static_cast<int>(group_int(j, "dense", 1, 1 << 30));
    g.threads = static_cast<int>(group_int(j, "threads", 1, 1 << 20));
    const std::string dtype = j.value("dtype", std::string("f32"));  // older exports: f32
    const std::optional<kernels::Dtype> dt = kernels::parse_dtype(dtype);
    if (!dt) throw Error("unknown value type '" + dtype + "'");
    g.dtype = *dt;
    const auto& m = j.at("matrix");
    g.fingerprint = m.at("fingerprint").get<std::string>();
    constexpr std::int64_t kBig = std::int64_t{1} << 62;
    g.rows = group_int(m, "rows", 0, kBig);
    g.cols = group_int(m, "cols", 0, kBig);
    g.nnz = group_int(m, "nnz", 0, kBig);
    g.source = j.value("source", nlohmann::json()).is_string() ? j.at("source").get<std::string>()
                                                               : m.value("path", std::string());
    if (j.contains("recipe") && !j.at("recipe").is_null())
      g.recipe = kernels::Recipe::from_json(j.at("recipe"));
    g.family = family_of(g.recipe, g.fingerprint);
    g.split = split_of_family(g.family);
    if (j.contains("pair_agreement") && j.at("pair_agreement").is_number())
      g.pair_agreement = j.at("pair_agreement").get<double>();
    for (const auto& row : j.at("rows")) {
      // [implementation or schedule text, status, median_s, min_s, max_s]
      const std::string what = row.at(0).get<std::string>();
      const std::string status = row.at(1).get<std::string>();
      if (!row.at(2).is_number()) continue;
      if (what == "impl=csr" && status == "ok") g.csr_seconds = row.at(2).get<double>();
      if (what.rfind("impl=", 0) == 0 || (status != "ok" && status != "abandoned")) continue;
      MeasuredCandidate c;
      c.schedule = codegen::parse_schedule(g.kind, what);
      c.seconds = row.at(2).get<double>();
      c.lower_bound = status == "abandoned";
      if (!(c.seconds > 0)) continue;
      g.candidates.push_back(std::move(c));
    }
    return g;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed measurement group: ") + e.what(),
                "the file is not a `waco-hybrid dataset export` file or is corrupt");
  }
}

kernels::CooMatrix make_group_matrix(const DatasetGroup& g, const std::vector<std::string>& data_dirs) {
  return checked(g, kernels::make_matrix(resolved_recipe(g, data_dirs)));
}

kernels::CooTensor make_group_tensor(const DatasetGroup& g, const std::vector<std::string>& data_dirs) {
  return checked(g, kernels::make_tensor(resolved_recipe(g, data_dirs)));
}

RankingExample make_example(const CostModel& model, const DatasetGroup& g,
                            const std::vector<std::string>& data_dirs) {
  if (g.kind != model.config().kind)
    throw Error("group " + g.label() + " is for " + std::string(kernels::kernel_name(g.kind)) +
                ", the model for " + std::string(kernels::kernel_name(model.config().kind)));
  RankingExample ex;
  ex.name = g.label();
  ex.input = kernels::needs_tensor(g.kind)
                 ? model.prepare(make_group_tensor(g, data_dirs), g.dtype, g.dense)
                 : model.prepare(make_group_matrix(g, data_dirs), nullptr, g.dtype, g.dense);
  for (const MeasuredCandidate& c : g.candidates) {
    ex.schedules.push_back(c.schedule);
    ex.seconds.push_back(c.seconds);
    ex.lower_bound.push_back(c.lower_bound ? 1 : 0);
  }
  return ex;
}

}  // namespace waco::learned
