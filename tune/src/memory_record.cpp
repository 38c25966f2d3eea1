// The memory record of one tune (memory_record.hpp).
#include "memory_record.hpp"

#include <algorithm>

#include "waco/kernels/process_memory.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::tuning::detail {

MemoryRecord::MemoryRecord(bool reset_per_stage)
    : reset_(reset_per_stage), last_(kernels::now_seconds()) {}

void MemoryRecord::stage(const std::string& name, heuristics::Runner* runner) {
  const double now = kernels::now_seconds();
  const std::int64_t peak = kernels::peak_rss_bytes();
  nlohmann::json s = {{"stage", name},
                      {"seconds", now - last_},
                      {"tune_peak_bytes", peak},
                      {"tune_rss_bytes", kernels::current_rss_bytes()}};
  tune_peak_ = std::max(tune_peak_, peak);
  if (reset_) reset_ = kernels::reset_peak_rss();
  const nlohmann::json w = runner ? runner->memory() : nlohmann::json();
  if (w.is_object()) {
    s.update(w);
    worker_peak_ = std::max(worker_peak_, w.value("worker_peak_bytes", std::int64_t{0}));
    children_peak_ = std::max(children_peak_, w.value("children_peak_bytes", std::int64_t{0}));
  }
  stages_.push_back(std::move(s));
  last_ = kernels::now_seconds();  // the worker's answer above is not the next stage's
}

nlohmann::json MemoryRecord::to_json() const {
  return {{"stages", stages_},
          {"peak_bytes", {{"tune", tune_peak_}, {"worker", worker_peak_}, {"children", children_peak_}}},
          {"per_stage", reset_}};
}

}  // namespace waco::tuning::detail
