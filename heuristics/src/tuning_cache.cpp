// The persistent tuning cache: see tuning_cache.hpp.
#include "waco/heuristics/tuning_cache.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "waco/codegen/generated_kernel.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/sparse.hpp"

namespace waco::heuristics {

namespace {

constexpr const char* kFormat = "waco-hybrid tuning cache";

}  // namespace

std::string tuning_cache_checksum(const nlohmann::json& key, const nlohmann::json& schedule,
                                  const nlohmann::json& report) {
  return kernels::hex16(kernels::fnv1a(key.dump() + "\n" + schedule.dump() + "\n" + report.dump()));
}

nlohmann::json TuningKey::to_json() const {
  nlohmann::json j = {{"content", content},
                      {"kernel", std::string(kernels::kernel_name(kind))},
                      {"dense", dense},
                      {"threads", threads},
                      {"machine", machine}};
  if (dtype != kernels::Dtype::F32) j["dtype"] = std::string(kernels::dtype_name(dtype));
  return j;
}

std::string TuningKey::hash() const { return kernels::hex16(kernels::fnv1a(to_json().dump())); }

nlohmann::json machine_identity(const codegen::CompilerOptions& kernel_compiler) {
  // context_json minus what does not change a decision (date, counters) or is a key part of its
  // own (threads). Nothing of it changes within a process (the CPU, its caches and the build are
  // read once), so it is built once per kernel compiler: every tune and adaptive plan asks
  // (~50 us of JSON each time).
  static std::mutex lock;
  static std::map<std::pair<std::string, std::vector<std::string>>, nlohmann::json> kept;
  const std::lock_guard<std::mutex> hold(lock);
  auto key = std::make_pair(kernel_compiler.compiler, kernel_compiler.flags);
  if (const auto it = kept.find(key); it != kept.end()) return it->second;
  const nlohmann::json c = kernels::context_json(1, "none");
  nlohmann::json flags = nlohmann::json::array();
  for (const std::string& f : kernel_compiler.flags) flags.push_back(f);
  nlohmann::json id = {{"cpu", c["cpu"]},
                       {"cache_bytes", c["cache_bytes"]},
                       {"cache_source", c["cache_source"]},
                       {"compiler", c["compiler"]},
                       {"flags", c["flags"]},
                       {"build_type", c["build_type"]},
                       {"waco_version", c["waco_version"]},
                       {"git_revision", c["git_revision"]},
                       {"kernel_compiler", kernel_compiler.compiler},
                       {"kernel_flags", flags}};
  return kept.emplace(std::move(key), std::move(id)).first->second;
}

std::string default_tuning_cache_dir() { return kernels::user_cache_dir() + "/plans"; }

TuningCache::TuningCache(std::string dir)
    : dir_(dir.empty() ? default_tuning_cache_dir() : std::move(dir)) {}

CacheLookup TuningCache::find(const TuningKey& key) const {
  CacheLookup out;
  out.path = dir_ + "/" + key.hash() + ".json";
  std::ifstream in(out.path, std::ios::binary);
  if (!in) return out;  // a miss
  std::stringstream text;
  text << in.rdbuf();
  const auto corrupt = [&](const std::string& why) {
    out.problem = "the tuning cache entry " + out.path + " is corrupt (" + why +
                  "); ignored, tuning again";
    return out;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    return corrupt(std::string("not JSON: ") + e.what());
  }
  // Fields are read by type: nlohmann's value() throws when a field holds another type.
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormat) return corrupt("not a tuning cache entry");
  if (!j.contains("version") || !j["version"].is_number_integer()) return corrupt("no layout version");
  if (j["version"] != kTuningCacheVersion) return out;  // another layout: a miss
  if (!j.contains("key") || !j.contains("schedule") || !j.contains("report") ||
      !j.contains("checksum") || !j["checksum"].is_string())
    return corrupt("fields missing");
  if (tuning_cache_checksum(j["key"], j["schedule"], j["report"]) != j["checksum"].get<std::string>())
    return corrupt("checksum mismatch");
  if (j["key"] != key.to_json()) return corrupt("its key is not the key it is filed under");
  CachedDecision d;
  try {
    d.schedule = codegen::schedule_from_json(j["schedule"]);
  } catch (const std::exception& e) {
    return corrupt(std::string("unreadable schedule: ") + e.what());
  }
  const std::vector<std::string> problems = codegen::validate(d.schedule);
  if (!problems.empty()) return corrupt("invalid schedule: " + problems.front());
  if (d.schedule.kind != key.kind) return corrupt("the schedule is for another kernel");
  // What serves the decision: a generated kernel or a baseline a plan can bind (an entry naming
  // another would make every later tune of this key fail where it should tune again).
  const nlohmann::json& impl = j["report"].is_object()
                                   ? j["report"].value("implementation", nlohmann::json())
                                   : nlohmann::json();
  if (!impl.is_null() &&
      !(impl.is_string() &&
        (impl == codegen::kGeneratedImplementation ||
         codegen::servable_baseline(impl.get<std::string>(), key.kind))))
    return corrupt("its implementation " + impl.dump() +
                   " is neither a generated kernel nor a baseline of this kernel");
  d.report = j["report"];
  d.saved_at = j.contains("saved_at") && j["saved_at"].is_string() ? j["saved_at"].get<std::string>() : "";
  d.path = out.path;
  out.hit = std::move(d);
  return out;
}

std::string TuningCache::store(const TuningKey& key, const codegen::SuperSchedule& schedule,
                               const nlohmann::json& report) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec)
    throw kernels::Error("cannot create the tuning cache directory " + dir_ + ": " + ec.message(),
                         "choose another one (--plan-cache DIR) or --no-plan-cache");
  const nlohmann::json k = key.to_json();
  const nlohmann::json s = codegen::to_json(schedule);
  const nlohmann::json entry = {{"format", kFormat},
                                {"version", kTuningCacheVersion},
                                {"saved_at", kernels::utc_timestamp()},
                                {"key", k},
                                {"schedule", s},
                                {"report", report},
                                {"checksum", tuning_cache_checksum(k, s, report)}};
  const std::string path = dir_ + "/" + key.hash() + ".json";
  kernels::write_text_file(path, entry.dump(1) + "\n");
  return path;
}

}  // namespace waco::heuristics
