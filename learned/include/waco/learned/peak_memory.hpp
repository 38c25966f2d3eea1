// Peak resident memory of this process, for the cost reports of the feature extractor.
#pragma once

#include <cstdint>

namespace waco::learned {

/// Peak resident set size in bytes (VmHWM from /proc/self/status; getrusage ru_maxrss when that
/// is unavailable). Monotone over the life of the process, so measure one configuration per
/// process when the peak of that configuration alone is wanted.
std::int64_t peak_rss_bytes();

/// Current resident set size in bytes (VmRSS), 0 when unknown.
std::int64_t current_rss_bytes();

}  // namespace waco::learned
