// Resident memory of this process (Linux /proc/self/status), for the cost reports of the feature
// extractor and the per-stage memory record of a tune.
#pragma once

#include <cstdint>

namespace waco::kernels {

/// Peak resident set size in bytes (VmHWM from /proc/self/status; getrusage ru_maxrss when that
/// is unavailable). Monotone over the life of the process unless reset_peak_rss() is called, so
/// measure one configuration per process when the peak of that configuration alone is wanted.
std::int64_t peak_rss_bytes();

/// Current resident set size in bytes (VmRSS), 0 when unknown.
std::int64_t current_rss_bytes();

/// Sets the peak (VmHWM) back to the current resident size ("5" into /proc/self/clear_refs,
/// Linux 4.0 on), so that the next peak_rss_bytes() is the peak since this call. False when the
/// kernel refused (the peak then stays the process's).
bool reset_peak_rss();

}  // namespace waco::kernels
