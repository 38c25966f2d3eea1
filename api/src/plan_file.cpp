#include "plan_file.hpp"

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/json_fields.hpp"

namespace waco::api {

using kernels::Error;

std::string plan_checksum(const nlohmann::json& j) {
  nlohmann::json body = j;
  body.erase("checksum");
  return kernels::hex16(kernels::fnv1a(body.dump()));
}

PlanFile parse_plan_file(const std::string& path, const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": not a waco-hybrid plan (not JSON: " + std::string(e.what()) + ")");
  }
  // Fields are read by type: nlohmann's value() throws when a field holds another type.
  if (!j.is_object() || !j.contains("format") || j["format"] != kPlanFormat)
    throw Error(path + ": not a waco-hybrid plan file");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != kPlanVersion)
    throw Error(path + ": a plan of layout version " + (j.contains("version") ? j["version"].dump() : "none") +
                    ", this waco-hybrid reads version " + std::to_string(kPlanVersion),
                "tune again");
  if (!j.contains("checksum") || !j["checksum"].is_string() ||
      j["checksum"].get<std::string>() != plan_checksum(j))
    throw Error(path + ": the plan file is corrupt (checksum mismatch)", "tune again");
  try {
    PlanFile p;
    const std::optional<kernels::KernelKind> kind =
        kernels::parse_kernel(j.at("kernel").get<std::string>());
    if (!kind) throw Error(path + ": unknown kernel " + j.at("kernel").dump());
    p.kind = *kind;
    p.fingerprint = j.at("fingerprint").get<std::string>();
    const auto small_int = [&](const char* key) {
      return static_cast<int>(kernels::json_int_field(j, key, 0, 1 << 30,
                                                      path + ": the plan file is corrupt", "tune again"));
    };
    p.threads = small_int("threads");
    p.dense = p.kind == kernels::KernelKind::SpMV ? 0 : small_int("dense");
    p.schedule = codegen::schedule_from_json(j.at("schedule"));
    p.report = j.at("report");
    p.verdict = j.at("verdict").get<std::string>();
    p.speedup = j.at("speedup").get<double>();
    p.break_even = j.at("break_even_calls").get<double>();
    if (j.contains("dtype")) {
      const std::optional<kernels::Dtype> d = kernels::parse_dtype(j["dtype"].get<std::string>());
      if (!d) throw Error(path + ": the plan file is corrupt ('dtype' is " + j["dtype"].dump() + ")",
                          "tune again");
      p.dtype = *d;
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": the plan file is corrupt (" + std::string(e.what()) + ")", "tune again");
  }
}

}  // namespace waco::api
