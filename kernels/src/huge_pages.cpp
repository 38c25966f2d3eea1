// Transparent huge pages for large arrays (huge_pages.hpp).
#include "waco/kernels/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace waco::kernels {

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

/// madvise(MADV_HUGEPAGE) over the whole 2 MiB pages inside [p, p + bytes); errors ignored.
void advise_whole_pages(const void* p, std::size_t bytes) noexcept {
#ifdef MADV_HUGEPAGE
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t begin = (start + kHugePage - 1) & ~std::uintptr_t{kHugePage - 1};
  const std::uintptr_t end = (start + bytes) & ~std::uintptr_t{kHugePage - 1};
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace

void advise_huge_pages(const void* p, std::size_t bytes) noexcept {
  if (p == nullptr || bytes < kHugePageAdviceBytes) return;
  advise_whole_pages(p, bytes);
}

HugeBlock::HugeBlock(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  void* p = nullptr;
  if (bytes >= kHugeBlockMinBytes) {
    const std::size_t whole = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    p = std::aligned_alloc(kHugePage, whole);
    if (p != nullptr) advise_whole_pages(p, whole);
  } else {
    p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  if (p == nullptr) throw std::bad_alloc();
  p_.reset(p);
}

void HugeBlock::Free::operator()(void* p) const noexcept { std::free(p); }

}  // namespace waco::kernels
