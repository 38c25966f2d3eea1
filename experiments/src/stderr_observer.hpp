// The CLI's observer of a tune (tune/observer.hpp): notes and the search's progress on stderr
// unless quiet, warnings always ("warning: ..."). On a terminal the progress line is rewritten in
// place; elsewhere it is printed every 5 s and at the end.
#pragma once

#include <optional>
#include <string>

#include "waco/tune/observer.hpp"

namespace waco::cli {

class StderrObserver : public tuning::TuneObserver {
 public:
  explicit StderrObserver(bool quiet);
  void note(const std::string& line) override;
  void warning(const std::string& line) override;
  void progress(const heuristics::TuneProgress& p, std::optional<double> csr_s) override;
  /// Ends a progress line left open on a terminal.
  void finish();

 private:
  bool quiet_;
  bool tty_;
  bool line_open_ = false;  ///< a progress line without its newline (terminal only)
  double last_print_ = -1e9;
};

}  // namespace waco::cli
