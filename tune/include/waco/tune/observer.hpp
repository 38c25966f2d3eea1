// What a tune tells its caller while it runs: notes (what it is doing), warnings (what the user
// should know about the result: a busy machine, unstable timings, a corrupt cache entry) and the
// search's progress. The CLI prints them on stderr (notes only without --quiet); libwaco passes
// them to the caller's callback. The pipeline itself never writes to stdout or stderr.
#pragma once

#include <optional>
#include <string>

#include "waco/heuristics/tuner.hpp"

namespace waco::tuning {

class TuneObserver {
 public:
  virtual ~TuneObserver() = default;
  /// A line of what tune is doing ("tune: measuring the best 20 side by side ...").
  virtual void note(const std::string& line) { (void)line; }
  /// Something the user should know about the result, without the "warning: " prefix.
  virtual void warning(const std::string& line) { (void)line; }
  /// A search measuring candidates one by one, after each of them; `csr_s`: the csr schedule's
  /// median when it was measured first.
  virtual void progress(const heuristics::TuneProgress& p, std::optional<double> csr_s) {
    (void)p;
    (void)csr_s;
  }
};

/// printf into a std::string (for notes and warnings).
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace waco::tuning
