#include "stderr_observer.hpp"

#include <unistd.h>

#include <cstdio>

#include "waco/kernels/timing.hpp"

namespace waco::cli {

StderrObserver::StderrObserver(bool quiet) : quiet_(quiet), tty_(::isatty(STDERR_FILENO) != 0) {}

void StderrObserver::finish() {
  if (line_open_) std::fprintf(stderr, "\n");
  line_open_ = false;
}

void StderrObserver::note(const std::string& line) {
  if (quiet_) return;
  finish();
  std::fprintf(stderr, "%s\n", line.c_str());
}

void StderrObserver::warning(const std::string& line) {
  finish();
  std::fprintf(stderr, "warning: %s\n", line.c_str());
}

void StderrObserver::progress(const heuristics::TuneProgress& pr, std::optional<double> csr_s) {
  if (quiet_) return;
  const double now = kernels::now_seconds();
  const bool final = pr.done == pr.total;
  if (!tty_ && !final && now - last_print_ < 5.0) return;
  last_print_ = now;
  std::string best = "none yet";
  if (pr.best_median_s) {
    best = kernels::format_seconds(*pr.best_median_s);
    if (csr_s) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " (%.2fx csr)", *csr_s / *pr.best_median_s);
      best += buf;
    }
  }
  std::fprintf(stderr, "%stune: %lld/%lld done (%lld reused), %.2f/s, %s left, best %s%s",
               tty_ ? "\r\033[K" : "", static_cast<long long>(pr.done),
               static_cast<long long>(pr.total), static_cast<long long>(pr.reused), pr.rate,
               kernels::duration_text(pr.eta_s).c_str(), best.c_str(),
               tty_ && !final ? "" : "\n");
  line_open_ = tty_ && !final;
  std::fflush(stderr);
}

}  // namespace waco::cli
