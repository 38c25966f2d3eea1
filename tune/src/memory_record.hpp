// Private to tune/src: the memory record of one tune (report "memory", tune/README.md): the
// resident memory of the tuning process, the measurement worker and its measuring children,
// stage by stage.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "waco/heuristics/runner.hpp"

namespace waco::tuning::detail {

class MemoryRecord {
 public:
  /// `reset_per_stage`: TuneRequest::reset_peak_per_stage. The first stage's figures are the
  /// process's peak so far (the caller read and canonicalized the operand before run()).
  explicit MemoryRecord(bool reset_per_stage);

  /// Ends stage `name`: this process's peak during it (since the last stage, or since the
  /// process began without resets) and its size now; with a runner, the worker's and the
  /// largest measuring child's peaks during it (Runner::memory).
  void stage(const std::string& name, heuristics::Runner* runner = nullptr);

  /// {"stages": [{"stage", "seconds" (its wall time: since the previous stage ended, or since
  /// the record began), "tune_peak_bytes", "tune_rss_bytes", "worker_peak_bytes",
  /// "worker_rss_bytes", "children_peak_bytes"}], "peak_bytes": {"tune", "worker", "children"},
  /// "per_stage": whether the tuning process's peaks are per stage}.
  nlohmann::json to_json() const;

 private:
  bool reset_;
  double last_;  ///< when the previous stage ended (or the record began)
  nlohmann::json stages_ = nlohmann::json::array();
  std::int64_t tune_peak_ = 0, worker_peak_ = 0, children_peak_ = 0;
};

}  // namespace waco::tuning::detail
