// Calibration to this machine: see calibration.hpp.
#include "waco/tune/calibration.hpp"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "waco/heuristics/results_db.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/file_stamp.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/memo.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/shipped.hpp"

namespace waco::tuning {

namespace fs = std::filesystem;

std::string calibration_root() {
  return (fs::path(heuristics::default_results_path()).parent_path() / "calibration").string();
}

namespace {

/// The identity and its folder's name (16 hex digits of its hash).
struct KeptIdentity {
  nlohmann::json identity;
  std::string folder;
};

/// Once per kernel compiler, as heuristics::machine_identity: nothing of it changes within a
/// process, and every model choice asks (its JSON copied and printed, ~40 us a choice).
std::shared_ptr<const KeptIdentity> kept_identity(const codegen::CompilerOptions& kernel_compiler) {
  static kernels::Memo<std::string, std::shared_ptr<const KeptIdentity>> kept(16);
  std::string key = kernel_compiler.compiler;
  for (const std::string& f : kernel_compiler.flags) key += '\0' + f;
  return kept.get(key, [&] {
    nlohmann::json id = heuristics::machine_identity(kernel_compiler);
    id.erase("waco_version");
    id.erase("git_revision");
    std::string folder = kernels::hex16(kernels::fnv1a(id.dump()));
    return std::make_shared<const KeptIdentity>(KeptIdentity{std::move(id), std::move(folder)});
  });
}

CalibrationPaths paths_in(kernels::KernelKind kind, const std::string& folder, const std::string& root,
                          int dense) {
  const std::string dir = (root.empty() ? calibration_root() : root) + "/" + folder;
  std::string k(kernels::kernel_name(kind));
  if (dense > 0 && dense != kernels::default_dense_size(kind)) k += "-" + std::to_string(dense);
  return {dir, dir + "/" + k + ".sqlite", dir + "/" + k + ".model", dir + "/" + k + ".json"};
}

}  // namespace

nlohmann::json calibration_identity(const codegen::CompilerOptions& kernel_compiler) {
  return kept_identity(kernel_compiler)->identity;
}

CalibrationPaths calibration_paths(kernels::KernelKind kind, const nlohmann::json& identity,
                                   const std::string& root, int dense) {
  return paths_in(kind, kernels::hex16(kernels::fnv1a(identity.dump())), root, dense);
}

std::string file_hash(const std::string& path) {
  // Kept while the file stays (every tune and adaptive plan asks: the two model files are ~0.5 MB
  // each).
  static kernels::PerFileCache<std::string> kept;
  return kept.get(path,
                  [&] { return kernels::hex16(kernels::fnv1a(kernels::read_text_file(path))); });
}

nlohmann::json ModelChoice::to_json() const {
  return {{"path", path}, {"source", source}, {"note", note},
          {"warning", warning.empty() ? nlohmann::json() : nlohmann::json(warning)},
          {"calibration", calibration}};
}

bool calibration_disabled_by_env() {
  const char* v = std::getenv("WACO_NO_CALIBRATION");
  return v && *v && std::string(v) != "0";
}

namespace {

std::string number(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", j[key].get<double>());
  return b;
}

/// "held-out Spearman 0.801 -> 0.853, pair accuracy 0.90 -> 0.93 on N groups" from a sidecar.
std::string held_out_text(const nlohmann::json& s) {
  const nlohmann::json v = s.value("validation", nlohmann::json::object());
  const nlohmann::json before = v.value("shipped", nlohmann::json::object());
  const nlohmann::json after = v.value("calibrated", nlohmann::json::object());
  return "held-out Spearman " + number(before, "spearman_median") + " -> " +
         number(after, "spearman_median") + ", pair accuracy " + number(before, "pair_accuracy") +
         " -> " + number(after, "pair_accuracy") + " on " + v.value("groups", nlohmann::json(0)).dump() +
         " groups";
}

}  // namespace

ModelChoice choose_model(const std::string& explicit_path, kernels::KernelKind kind,
                         kernels::Dtype dtype, const codegen::CompilerOptions& kernel_compiler,
                         bool use_calibration, const std::string& root, int dense) {
  ModelChoice c;
  if (!explicit_path.empty()) {
    c.path = explicit_path;
    c.source = "explicit";
    c.note = "model " + explicit_path + " (--model)";
    return c;
  }
  c.path = learned::model_path_or_default("", kind, dtype);
  c.source = "shipped";
  c.note = "shipped model " + c.path;
  if (dtype != kernels::Dtype::F32) return c;  // calibrate times f32 kernels only
  if (!use_calibration || calibration_disabled_by_env()) {
    c.note += " (calibration not used: " +
              std::string(use_calibration ? "WACO_NO_CALIBRATION" : "--no-calibration") + ")";
    return c;
  }
  const int default_dense = kernels::default_dense_size(kind);
  const int want = dense > 0 ? dense : default_dense;
  const bool sized = kind != kernels::KernelKind::SpMV;
  const std::string size = sized ? " at dense size " + std::to_string(want) : "";
  const std::shared_ptr<const KeptIdentity> kept = kept_identity(kernel_compiler);
  const nlohmann::json& identity = kept->identity;
  const std::string k(kernels::kernel_name(kind));
  const std::string again = "waco-hybrid calibrate --kernel " + k +
                            (want != default_dense ? " --dense " + std::to_string(want) : "");
  // This size's own files first; then, at another size than the default, the default files,
  // which calibrate --dense filled before sizes had files of their own (their sidecar says so).
  std::vector<CalibrationPaths> files = {paths_in(kind, kept->folder, root, want)};
  if (want != default_dense) files.push_back(paths_in(kind, kept->folder, root, 0));
  std::error_code ec;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const CalibrationPaths& p = files[f];
    const bool own = f == 0;  // a broken file of this size is warned about; the other one skipped
    const auto fallback = [&](const std::string& why) {
      c.warning = "the calibration " + p.sidecar + " is not used (" + why + "); ranking with the " +
                  "shipped model (hint: run '" + again + "' again)";
      c.note += " (calibration not used: " + why + ")";
      c.calibration = nullptr;
      return c;
    };
    if (!fs::exists(p.sidecar, ec)) {
      if (own && fs::exists(p.model, ec)) return fallback("a model file without its sidecar");
      continue;
    }
    nlohmann::json s;
    try {
      s = nlohmann::json::parse(kernels::read_text_file(p.sidecar));
    } catch (const nlohmann::json::exception& e) {
      if (!own) continue;
      return fallback(std::string("corrupt sidecar: not JSON: ") + e.what());
    }
    if (!s.is_object() || s.value("format", std::string()) != kCalibrationFormat) {
      if (!own) continue;
      return fallback("corrupt sidecar: not a calibration sidecar");
    }
    const nlohmann::json made_at = s.value("dense", nlohmann::json(default_dense));
    if (made_at != nlohmann::json(want)) {
      if (own && want != default_dense)  // <kernel>-<J>.* is written at J only
        return fallback("corrupt sidecar: it was made at dense size " + made_at.dump() + ", not " +
                        std::to_string(want));
      continue;  // the default files hold another size's calibration (calibrate --dense, session 39)
    }
    if (s.value("version", 0) != kCalibrationVersion) return fallback("a sidecar of another layout version");
    if (!s.contains("identity") || s["identity"] != identity)
      return fallback("it was made for another machine identity");
    if (s.value("kernel", std::string()) != k) return fallback("corrupt sidecar: another kernel");
    const nlohmann::json base = s.value("base_model", nlohmann::json::object());
    if (!base.is_object() || base.value("hash", std::string()) != file_hash(c.path))
      return fallback("it fine-tuned another shipped model than " + c.path);
    c.calibration = s;
    const std::string decision = s.value("decision", std::string());
    if (decision == "shipped") {
      c.note += " (calibration on this machine" + size + " kept it: " + held_out_text(s) + ")";
      return c;
    }
    if (decision != "calibrated") return fallback("corrupt sidecar: no decision");
    const nlohmann::json model = s.value("model", nlohmann::json::object());
    if (!model.is_object() || model.value("hash", std::string()) != file_hash(p.model))
      return fallback("the model file is missing or does not match its sidecar's hash");
    try {
      learned::CostModel::load_shared(p.model, kind);
    } catch (const kernels::Error& e) {
      return fallback(std::string("corrupt model: ") + e.what());
    }
    c.path = p.model;
    c.source = "calibrated";
    c.note = "calibrated model for this machine" + size + " " + p.model + " (" + held_out_text(s) + ")";
    return c;
  }
  // A calibration serves its own dense size only (calibration.hpp): another size's is not used.
  c.note += " (no calibration for this machine" + size + ": " + again + ")";
  return c;
}

}  // namespace waco::tuning
