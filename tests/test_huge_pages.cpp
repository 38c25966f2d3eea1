// Unit "huge_pages": the large arrays this project allocates ask the kernel for transparent huge
// pages (kernels/huge_pages.hpp): advise_huge_pages marks the whole 2 MiB pages of a block of at
// least kHugePageAdviceBytes (the mapping's "hg" flag in /proc/self/smaps, which MADV_HUGEPAGE
// sets whatever the THP mode, unless the kernel has no THP), reserve_huge / resize_huge /
// huge_vector the new storage of a std::vector, CacheAligned (kernels::Values) its blocks; a
// small block, a null pointer and a vector that already has room are left alone; a HugeBlock
// (a cost model's weights) lies on whole advised 2 MiB pages from kHugeBlockMinBytes on where
// small pages fault slowly (huge_blocks()), on plain memory where they fault cheaply.
#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "waco/kernels/huge_pages.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/kernels/values.hpp"

using namespace waco::kernels;

namespace {

/// Whether the mapping holding address p has VM_HUGEPAGE ("hg" in its VmFlags); nullopt-like
/// -1 when no mapping holds it.
int huge_flag(const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find("VmFlags:") == 0) {
      if (inside) return line.find(" hg") != std::string::npos ? 1 : 0;
      continue;
    }
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' '))
      inside = addr >= lo && addr < hi;
  }
  return -1;
}

/// THP is built into this kernel (MADV_HUGEPAGE is accepted).
bool thp_available() {
  void* m = ::mmap(nullptr, std::size_t{4} << 20, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  const bool ok = ::madvise(m, std::size_t{2} << 20, MADV_HUGEPAGE) == 0;
  ::munmap(m, std::size_t{4} << 20);
  return ok;
}

constexpr std::size_t kMiB = std::size_t{1} << 20;

}  // namespace

TEST_CASE("huge_pages: a large block's whole 2 MiB pages are advised, a small one's not") {
  if (!thp_available()) {
    WARN("no transparent huge pages in this kernel: skipped");
    return;
  }
  // A fresh mapping, its start 4 KiB past a 2 MiB boundary as glibc's large blocks are.
  const std::size_t span = 16 * kMiB;
  char* m = static_cast<char*>(::mmap(nullptr, span + 2 * kMiB, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(m != MAP_FAILED);
  const auto aligned = (reinterpret_cast<std::uintptr_t>(m) + 2 * kMiB - 1) & ~(2 * kMiB - 1);
  char* block = reinterpret_cast<char*>(aligned) + 4096;
  const std::size_t bytes = 8 * kMiB;
  advise_huge_pages(block, bytes);
  CHECK(huge_flag(block + 2 * kMiB) == 1);      // inside the first whole 2 MiB page
  CHECK(huge_flag(block + bytes - 4 * kMiB) == 1);
  CHECK(huge_flag(block) == 0);                 // the partial page before it
  CHECK(huge_flag(block + bytes + kMiB) == 0);  // past the block
  // Below the threshold, or null: nothing.
  char* small = reinterpret_cast<char*>(aligned) + 12 * kMiB;
  advise_huge_pages(small, kHugePageAdviceBytes - 1);
  CHECK(huge_flag(small + 2 * kMiB) == 0);
  advise_huge_pages(nullptr, bytes);
  // Writing an advised block works as any other.
  for (std::size_t i = 0; i < bytes; i += 4096) block[i] = static_cast<char>(i >> 12);
  CHECK(block[bytes - 4096] == static_cast<char>((bytes - 4096) >> 12));
  ::munmap(m, span + 2 * kMiB);
}

TEST_CASE("huge_pages: vectors and aligned values ask for them when large and new") {
  if (!thp_available()) {
    WARN("no transparent huge pages in this kernel: skipped");
    return;
  }
  const std::size_t n = 16 * kMiB / sizeof(std::int32_t);
  std::vector<std::int32_t> v{1, 2, 3};
  reserve_huge(v, n);
  REQUIRE(v.capacity() >= n);
  CHECK(v.size() == 3);
  CHECK(v[2] == 3);  // the elements moved with it
  CHECK(huge_flag(v.data() + n / 2) == 1);

  const std::vector<double> h = huge_vector<double>(n);
  CHECK(h.size() == n);
  CHECK(h[n - 1] == 0.0);
  CHECK(huge_flag(h.data() + n / 2) == 1);

  std::vector<std::uint16_t> r;
  resize_huge(r, n);
  CHECK(r.size() == n);
  CHECK(huge_flag(r.data() + n / 2) == 1);

  // Room already there: no new storage, nothing asked.
  const std::int32_t* before = v.data();
  reserve_huge(v, 10);
  CHECK(v.data() == before);

  Values vals(Dtype::F32, n);
  CHECK(huge_flag(vals.data<float>() + n / 2) == 1);
  CHECK(vals.get(n - 1) == 0.0);

  CooMatrix a;
  reserve_entries(a, n);
  CHECK(a.row.capacity() >= n);
  CHECK(a.val.capacity() >= n);
  CHECK(huge_flag(a.col.data() + n / 2) == 1);
  CHECK(huge_flag(a.val.data() + n / 2) == 1);
}

TEST_CASE("huge_pages: a HugeBlock from kHugeBlockMinBytes on lies on whole advised 2 MiB pages "
          "where small pages fault slowly, on plain memory where they fault cheaply") {
  // This machine's small page faults, measured once a boot.
  const double us = small_page_fault_us();
  CHECK(us > 0.0);
  CHECK(us == small_page_fault_us());
  for (const char* setting : {"1", "0", ""}) {
    INFO("WACO_HUGE_BLOCKS=" << setting);
    ::setenv("WACO_HUGE_BLOCKS", setting, 1);
    const bool huge = std::string(setting) == "1" ||
                      (std::string(setting).empty() && us >= kCheapSmallPageFaultUs);
    CHECK(huge_blocks() == huge);
    // Sizes and alignment hold with or without THP.
    const HugeBlock empty;
    CHECK(empty.data() == nullptr);
    CHECK(empty.size() == 0);
    const HugeBlock none(0);
    CHECK(none.data() == nullptr);

    const HugeBlock small(1000);
    REQUIRE(small.data() != nullptr);
    CHECK(small.size() == 1000);
    CHECK(reinterpret_cast<std::uintptr_t>(small.data()) % 64 == 0);

    const std::size_t bytes = HugeBlock::kHugeBlockMinBytes + 12345;  // ~0.26 MiB: one 2 MiB page
    HugeBlock large(bytes);
    REQUIRE(large.data() != nullptr);
    CHECK(large.size() == bytes);
    CHECK(reinterpret_cast<std::uintptr_t>(large.data()) % (huge ? 2 * kMiB : 64) == 0);
    // Written whole and read back.
    auto* f = static_cast<float*>(large.data());
    for (std::size_t i = 0; i < bytes / sizeof(float); ++i) f[i] = static_cast<float>(i);
    CHECK(f[bytes / sizeof(float) - 1] == static_cast<float>(bytes / sizeof(float) - 1));
    // Moved, the memory goes with it.
    HugeBlock moved = std::move(large);
    CHECK(moved.data() == f);

    if (!thp_available()) {
      WARN("no transparent huge pages in this kernel: the advice not checked");
      continue;
    }
    if (huge) {
      CHECK(huge_flag(f) == 1);
      CHECK(huge_flag(f + bytes / sizeof(float) - 1) == 1);
    }
  }
  ::unsetenv("WACO_HUGE_BLOCKS");
}
