// Transparent huge pages for large arrays (huge_pages.hpp).
#include "waco/kernels/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>

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

}  // namespace waco::kernels
