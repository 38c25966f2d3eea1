// Transparent huge pages for large arrays (huge_pages.hpp).
#include "waco/kernels/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace waco::kernels {

void advise_huge_pages(const void* p, std::size_t bytes) noexcept {
#ifdef MADV_HUGEPAGE
  if (p == nullptr || bytes < kHugePageAdviceBytes) return;
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (start + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t end = (start + bytes) & ~(kHugePage - 1);
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

HugeBlock::HugeBlock(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  void* p = nullptr;
  if (bytes >= kHugeBlockMinBytes) {
    const std::size_t whole = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    p = std::aligned_alloc(kHugePage, whole);
#ifdef MADV_HUGEPAGE
    if (p != nullptr) (void)::madvise(p, whole, MADV_HUGEPAGE);
#endif
  } else {
    p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  if (p == nullptr) throw std::bad_alloc();
  p_.reset(p);
}

void HugeBlock::Free::operator()(void* p) const noexcept { std::free(p); }

}  // namespace waco::kernels
