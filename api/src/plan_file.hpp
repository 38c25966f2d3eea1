// The plan file of Plan::save / Plan::load: its JSON layout, its checksum and its parsing, apart
// from binding the kernel (which compiles it), so that fuzz/ reads plan files without a compiler.
// Private to the library (and compiled into the fuzz targets).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/kernel.hpp"

namespace waco::api {

inline constexpr const char* kPlanFormat = "waco-hybrid plan";
inline constexpr int kPlanVersion = 1;

/// What a plan file holds, checked.
struct PlanFile {
  kernels::KernelKind kind = kernels::KernelKind::SpMV;
  std::string fingerprint;  ///< of the operand it was tuned for
  int threads = 0;
  int dense = 0;  ///< 0 for SpMV (not read)
  codegen::SuperSchedule schedule;
  nlohmann::json report;
  std::string verdict;
  double speedup = 0.0;
  double break_even = -1.0;
  kernels::Dtype dtype = kernels::Dtype::F32;  ///< "dtype" (absent in plans of single precision)
};

/// A hash of the plan's JSON without its "checksum" field.
std::string plan_checksum(const nlohmann::json& j);

/// Parses the text of a plan file. Throws kernels::Error "<path>: ..." unless it is a plan of
/// this layout version whose checksum matches and whose fields are readable.
PlanFile parse_plan_file(const std::string& path, const std::string& text);

}  // namespace waco::api
