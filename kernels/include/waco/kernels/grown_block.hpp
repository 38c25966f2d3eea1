// A kept buffer that only grows (a thread's staging or packing array, session 79).
#pragma once

#include <cstddef>

#include "waco/kernels/huge_pages.hpp"

namespace waco::kernels {

/// `b`'s data, grown first to at least `bytes` when it is smaller (what it held is not kept; the
/// old block goes before the new one is taken). 64-byte aligned, on huge pages from 256 KiB.
inline void* grown(HugeBlock& b, std::size_t bytes) {
  if (b.size() < bytes) {
    b = HugeBlock();
    b = HugeBlock(bytes);
  }
  return b.data();
}

}  // namespace waco::kernels
