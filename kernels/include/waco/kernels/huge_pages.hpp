// An allocator for large scratch arrays that asks the kernel for transparent huge pages.
//
// Why: fresh memory costs one page fault per 4 KiB page when it is first written, about 5 us on
// the KVM guest this was built on, i.e. ~1.3 ms per MiB: more than writing the memory. A
// per-call scratch array of a few MiB (the signature's per-chunk arrays are ~17 bytes per row and
// column) then costs as much as the work it serves. With THP in `madvise` mode (Debian's
// default), memory marked MADV_HUGEPAGE before it is touched is faulted 2 MiB at a time. Arrays
// below kHugePageThreshold use the ordinary allocator; when the kernel has no huge page to give,
// it falls back to 4 KiB pages by itself (nothing to handle here).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace waco::kernels {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
/// Arrays from this size on are allocated in whole, aligned huge pages.
inline constexpr std::size_t kHugePageThreshold = std::size_t{1} << 20;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

  static_assert(alignof(T) <= kHugePageBytes, "huge pages are the largest alignment given");

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePageThreshold) return std::allocator<T>().allocate(n);  // keeps alignof(T)
    const std::size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    void* p = std::aligned_alloc(kHugePageBytes, rounded);
    if (p == nullptr) throw std::bad_alloc();
    ::madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure leaves ordinary pages
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHugePageThreshold)
      std::allocator<T>().deallocate(p, n);
    else
      std::free(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept { return true; }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const noexcept { return false; }
};

}  // namespace waco::kernels
