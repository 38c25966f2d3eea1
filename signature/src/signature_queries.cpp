// What a computed locality signature answers (signature.hpp): the segment counts, proportions
// and estimates of one direction (SegmentSignature) and the block statistic of a shape
// (LocalitySignature::block); compute_signature (signature.cpp) computes them.
#include "waco/signature/signature.hpp"

#include <algorithm>
#include <string>

#include "signature_detail.hpp"
#include "waco/kernels/error.hpp"

namespace waco::signature {

using detail::kBlockLevels;

int log2_ceil(std::int64_t n) {
  int l = 0;
  while ((std::int64_t{1} << l) < n) ++l;
  return l;
}

std::int64_t SegmentSignature::total_segments(std::int64_t T) const {
  WACO_ASSERT(T >= 1, "segment size must be >= 1");
  if (length == 0) return 0;
  const std::int64_t t = std::min<std::int64_t>(T, length);
  return static_cast<std::int64_t>(lines) * (length - t + 1);
}

std::int64_t SegmentSignature::intervals(std::int64_t d) const {
  WACO_ASSERT(d >= 0 && d <= length, "interval length out of range");
  if (d == 0) return zero_runs;
  const auto na = [&](std::int64_t T) {
    return T <= length ? nonactive[static_cast<std::size_t>(T)] : std::int64_t{0};
  };
  return na(d) - 2 * na(d + 1) + na(d + 2);
}

std::vector<std::int64_t> SegmentSignature::interval_histogram() const {
  std::vector<std::int64_t> dense(static_cast<std::size_t>(length) + 1, 0);
  for (std::int64_t d = 0; d <= length; ++d) dense[static_cast<std::size_t>(d)] = intervals(d);
  return dense;
}

std::int64_t SegmentSignature::nonactive_segments(std::int64_t T) const {
  WACO_ASSERT(T >= 1, "segment size must be >= 1");
  if (length == 0) return 0;
  return nonactive[std::min<std::int64_t>(T, length)];
}

double SegmentSignature::active_proportion(std::int64_t T) const {
  const std::int64_t total = total_segments(T);
  if (total == 0) return 0.0;
  return static_cast<double>(total - nonactive_segments(T)) / static_cast<double>(total);
}

std::int64_t SegmentSignature::aligned_active_pow2(std::int64_t T) const {
  WACO_ASSERT(is_pow2(T), "aligned_active_pow2 needs a power of two, got " + std::to_string(T));
  const int t = log2_ceil(T);
  if (t >= static_cast<int>(aligned_active.size())) return nonempty_lines;
  return aligned_active[t];
}

double SegmentSignature::aligned_active_estimate(std::int64_t T) const {
  WACO_ASSERT(T >= 1, "segment size must be >= 1");
  if (is_pow2(T)) return static_cast<double>(aligned_active_pow2(T));
  if (T >= length) return static_cast<double>(nonempty_lines);
  return static_cast<double>(lines) * (static_cast<double>(length) / static_cast<double>(T)) *
         active_proportion(T);
}

const BlockStat& LocalitySignature::block(int bi, int bk) const {
  WACO_ASSERT(is_pow2(bi) && is_pow2(bk) && bi <= kMaxBlock && bk <= kMaxBlock,
              "block shape must be powers of two <= 32");
  const std::size_t idx = static_cast<std::size_t>(log2_ceil(bi)) * kBlockLevels + log2_ceil(bk);
  WACO_ASSERT(idx < blocks.size(), "block statistics missing");
  return blocks[idx];
}

}  // namespace waco::signature
