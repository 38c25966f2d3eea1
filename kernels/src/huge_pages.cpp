// Transparent huge pages for large arrays (huge_pages.hpp).
#include "waco/kernels/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include <nlohmann/json.hpp>

#include "boot_facts.hpp"
#include "waco/kernels/timing.hpp"

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

double small_page_fault_us() {
  // 64 pages of a fresh mapping, huge pages refused (THP `always` would give it one), touched
  // once each: the mean. Kept with the boot's facts (boot_facts.hpp): the first process of a
  // boot pays it (~0.1 ms where faults are cheap, ~1 ms where they are not).
  static const double us = [] {
    const nlohmann::json j = detail::boot_fact(
        "small_page_fault_us",
        [] {
          constexpr std::size_t kPages = 64, kPage = 4096;
          void* p = ::mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          if (p == MAP_FAILED) return nlohmann::json(0.0);
#ifdef MADV_NOHUGEPAGE
          (void)::madvise(p, kPages * kPage, MADV_NOHUGEPAGE);
#endif
          auto* c = static_cast<volatile char*>(p);
          const double t0 = now_seconds();
          for (std::size_t i = 0; i < kPages; ++i) c[i * kPage] = 1;
          const double seconds = now_seconds() - t0;
          ::munmap(p, kPages * kPage);
          return nlohmann::json(seconds * 1e6 / kPages);
        },
        [](const nlohmann::json& v) { return v.is_number() && v.get<double>() > 0.0; });
    return j.get<double>();
  }();
  return us;
}

bool huge_blocks() {
  if (const char* env = std::getenv("WACO_HUGE_BLOCKS"); env != nullptr && *env != '\0')
    return std::strcmp(env, "0") != 0;
  static const bool huge = [] {
    const double us = small_page_fault_us();
    return us <= 0.0 || us >= kCheapSmallPageFaultUs;
  }();
  return huge;
}

HugeBlock::HugeBlock(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  void* p = nullptr;
  if (bytes >= kHugeBlockMinBytes && huge_blocks()) {
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
