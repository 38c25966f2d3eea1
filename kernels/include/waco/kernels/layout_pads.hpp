// Memory layouts drawn anew (issue 33, sessions 60 and 80): blocks of random size allocated
// before a kernel's own allocations, so that its format and output land at other addresses.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "waco/kernels/implementation.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/values.hpp"

namespace waco::kernels {

/// Why: a small kernel's time depends on where its arrays lie against each other and the dense
/// operands (4K aliasing, cache sets) by several percent, for a process's whole life; a process
/// whose allocations repeat another's times the same layout again. A block of random size (a
/// multiple of 64 bytes, 1-5 KiB: past glibc's tcache, so that it comes from the top of the heap
/// and shifts what follows it) before an allocation draws another layout. Blocks above
/// kMaxLayoutBytes are mapped by glibc at the same offset in their page whatever comes before:
/// drawing layouts changes nothing for them.
class LayoutPads {
 public:
  LayoutPads() : gen_(std::random_device{}()) {}

  /// A block of random size, kept until this object ends.
  void pad() {
    const std::size_t bytes = 1088 + 64 * std::uniform_int_distribution<std::size_t>(0, 63)(gen_);
    pads_.push_back(std::make_unique<char[]>(bytes));
  }

 private:
  std::mt19937_64 gen_;
  std::vector<std::unique_ptr<char[]>> pads_;
};

/// The size up to which drawing a layout moves an allocation (above: glibc maps it).
inline constexpr std::size_t kMaxLayoutBytes = std::size_t{1} << 20;

/// How many layouts a kernel of `p` is timed in when `layouts` are asked for: all of them when
/// its format (a CSR-sized estimate) and output together take at most kMaxLayoutBytes, else one.
inline int layouts_for(const Problem& p, int layouts) {
  if (layouts <= 1) return 1;
  const double value = static_cast<double>(dtype_size(p.dtype()));
  const double bytes = static_cast<double>(p.nnz()) * (4 + value) +
                       static_cast<double>(p.output_size()) * value;
  return bytes <= static_cast<double>(kMaxLayoutBytes) ? layouts : 1;
}

/// Each kernel's copies in several layouts taken in turn, a timed round each (time_interleaved's
/// rounds; the settle runs before a timed run run the same copy). Lives as long as the functions
/// it made.
class LayoutRotation {
 public:
  /// The function to time: copy `round mod copies.size()` of the current round.
  std::function<void()> runner(std::vector<Implementation*> copies) {
    if (copies.size() == 1) return [impl = copies[0]] { impl->run(); };
    return [copies = std::move(copies), this] { copies[round_ % copies.size()]->run(); };
  }
  /// time_interleaved's AfterRound step: `done` timed rounds made, the next round's copies.
  void after_round(int done) { round_ = static_cast<std::size_t>(done); }
  /// Back to the first copies (for runs after the rounds).
  void reset() { round_ = 0; }

 private:
  std::size_t round_ = 0;
};

}  // namespace waco::kernels
