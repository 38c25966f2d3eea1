// Calibration to this machine (issue 40, `waco-hybrid calibrate`): a cost model fine-tuned on
// groups measured here, kept in the user's data folder (beside the results database) under this
// machine's identity, and the choice of the model a tune or predict ranks with.
//
// Layout: <data>/calibration/<identity hash>/ holds identity.json (the identity in full),
// <kernel>.sqlite (the groups calibrate collected: resumable), <kernel>.model (the fine-tuned
// model, when it ranked the held-out groups better than the shipped one) and <kernel>.json (the
// sidecar: identity, dense size, minutes, groups, held-out Spearman and pair accuracy before and
// after, the decision, the model file's and the base model's hashes). Single precision only:
// calibrate times f32 kernels; an f64 tune ranks with the shipped models.
//
// One calibration per dense size: <kernel>.* at the kernel's default size (the shipped dataset's:
// SpMM/SDDMM 256, MTTKRP 16), <kernel>-<J>.* at another (`calibrate --dense J`). A calibration
// ranks only tunes of its own size. Measured on a second CPU (learned/README.md "Dense sizes";
// SpMM, 16 held-out-like matrices, Spearman within the admissible set): J=16's calibration ranked
// J=16 at 0.73 (shipped model 0.64) but J=64 and J=256 at 0.81 and 0.79 (shipped 0.84 and 0.84);
// J=64's ranked J=64 at 0.87 (0.84) and J=16 at 0.64. Of six calibrations used at another size,
// one ranked better than the shipped model, three within 0.01, two worse.
// A sidecar without "dense" (made before sizes had their own files) is of the default size; one
// in <kernel>.* that says another size (calibrate --dense before session 40) serves that size.
//
// The identity is heuristics::machine_identity() less waco-hybrid's version and git revision (a
// rebuild keeps the calibration; a changed shipped model is caught by the base model's hash):
// CPU model, cache sizes and their source, waco-hybrid's compiler, flags and build type, the
// generated kernels' compiler and flags. A calibration is used only when its sidecar's identity
// equals this machine's, its model file's hash matches the sidecar and its base is the shipped
// model in use; anything else is a warning and the shipped model serves (no file is removed).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "waco/codegen/compiler.hpp"
#include "waco/kernels/kernel.hpp"

namespace waco::tuning {

/// Version of the sidecar's layout; a sidecar of another version is not used (a warning).
inline constexpr int kCalibrationVersion = 1;
/// The sidecar's "format" field.
inline constexpr const char* kCalibrationFormat = "waco-hybrid calibration";

/// <folder of the default results database>/calibration ($XDG_DATA_HOME/waco-hybrid/calibration,
/// else ~/.local/share/waco-hybrid/calibration).
std::string calibration_root();
/// This machine's identity as calibration keys it (see the file comment).
nlohmann::json calibration_identity(const codegen::CompilerOptions& kernel_compiler);

struct CalibrationPaths {
  std::string dir;      ///< <root>/<16 hex digits of the identity's hash>
  std::string db;       ///< <dir>/<kernel>.sqlite
  std::string model;    ///< <dir>/<kernel>.model
  std::string sidecar;  ///< <dir>/<kernel>.json
};
/// The files of the calibration of `kind` at dense size `dense` (0: the kernel's default).
CalibrationPaths calibration_paths(kernels::KernelKind kind, const nlohmann::json& identity,
                                   const std::string& root = {}, int dense = 0);

/// 16 hex digits of a file's bytes (the sidecar's model and base-model hashes); "" when unreadable.
std::string file_hash(const std::string& path);

/// The model a ranking search uses and why.
struct ModelChoice {
  std::string path;    ///< the model file
  std::string source;  ///< "explicit" (--model), "calibrated" (this machine's), "shipped"
  /// One line for the user: which model, and for a calibration its held-out numbers or why the
  /// shipped model serves instead.
  std::string note;
  /// Non-empty when a calibration exists but was not used because it is corrupt, stale or of
  /// another identity: the warning to print.
  std::string warning;
  /// The sidecar of this machine's calibration (when one was read), else null.
  nlohmann::json calibration;
  nlohmann::json to_json() const;
};

/// Whether calibration is switched off by the environment: WACO_NO_CALIBRATION set, non-empty
/// and not "0".
bool calibration_disabled_by_env();

/// The model to rank with: `explicit_path` when given; else, for f32 and unless `use_calibration`
/// is false or the environment disables it, this machine's calibrated model at dense size `dense`
/// (0: the kernel's default) when it is sound (loaded and checked; a corrupt one gives `warning`
/// and the shipped model); else the shipped model of `kind` and `dtype`
/// (learned::model_path_or_default).
ModelChoice choose_model(const std::string& explicit_path, kernels::KernelKind kind,
                         kernels::Dtype dtype, const codegen::CompilerOptions& kernel_compiler,
                         bool use_calibration, const std::string& root = {}, int dense = 0);

}  // namespace waco::tuning
