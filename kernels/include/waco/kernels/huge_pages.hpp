// Transparent huge pages for large arrays: where the kernel's THP mode is `madvise` (Debian's
// default), every 4 KiB page of a large array is a fault of its own on its first write, ~10 us
// each on VMs with paravirtualized page tables (the AMD EPYC Zen 5 VMs: 64 MiB of fresh memory
// took 172-176 ms to touch, 3.6-7 ms advised, up to 112 ms the first time in a process); a 2 MiB
// page costs about as much as one (kernels/README.md, "Huge pages for large arrays"). The
// measuring processes get it for every allocation from glibc (heuristics/README.md); in any other
// process (the CLI's own, an application's with libwaco) the large arrays this project allocates
// ask for it here.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace waco::kernels {

/// Arrays from this size on are advised (a smaller one holds at most one whole 2 MiB page).
inline constexpr std::size_t kHugePageAdviceBytes = std::size_t{4} << 20;

/// Asks the kernel (`madvise(MADV_HUGEPAGE)`) to back the whole 2 MiB pages inside
/// [p, p + bytes) with transparent huge pages, when bytes >= kHugePageAdviceBytes; to be called
/// before anything writes there. Nothing else changes: THP `always` or `never`, or a kernel
/// without THP (the call's error is ignored), leave the pages as they would have been.
void advise_huge_pages(const void* p, std::size_t bytes) noexcept;

/// v.reserve(n) with the new storage's part past v's elements advised (advise_huge_pages), for
/// a std::vector about to be filled to n elements (assign, resize, insert, push_back).
template <class Vector>
void reserve_huge(Vector& v, std::size_t n) {
  if (n <= v.capacity()) return;
  v.reserve(n);
  advise_huge_pages(v.data() + v.size(), (n - v.size()) * sizeof(typename Vector::value_type));
}

/// reserve_huge(v, n), then v.resize(n).
template <class Vector>
void resize_huge(Vector& v, std::size_t n) {
  reserve_huge(v, n);
  v.resize(n);
}

/// v.assign(first, last) (random-access iterators), the new storage advised as reserve_huge's.
template <class Vector, class It>
void assign_huge(Vector& v, It first, It last) {
  v.clear();
  reserve_huge(v, static_cast<std::size_t>(last - first));
  v.assign(first, last);
}

/// A std::vector<T> of n value-initialized elements, a large one on transparent huge pages.
template <class T>
std::vector<T> huge_vector(std::size_t n) {
  std::vector<T> v;
  resize_huge(v, n);
  return v;
}

/// What faulting in a fresh 4 KiB page costs on this machine, in microseconds (64 pages of a
/// fresh mapping touched once, measured once per boot and kept with the machine's facts in the
/// user's cache; 0 when it could not be measured).
double small_page_fault_us();
/// Below this a small page's fault is cheap: ~1.5-2.5 us on the Intel Xeon VMs, ~10-16 us on the
/// AMD EPYC Zen 5 VMs (paravirtualized page tables).
inline constexpr double kCheapSmallPageFaultUs = 5.0;
/// Whether HugeBlocks go on huge pages here: where small pages fault slowly
/// (small_page_fault_us() >= kCheapSmallPageFaultUs, or unmeasured). Where they fault cheaply a
/// fresh huge page costs as much as the small ones it replaces and now and then 5-13 ms (the
/// host backing it: on the Intel Xeon VM, 9 of 20 processes' first SpMM choice took 4-14 ms
/// with the model's weights and workspace on huge pages, 0 of 20 on small ones, median 3.8 ->
/// 2.5 ms). `WACO_HUGE_BLOCKS=1` or `0` decides instead (experiments, tests).
bool huge_blocks();

/// A block of memory for a long-lived array of a few hundred KiB that is written whole at once
/// (a cost model's weights: ~140 4-KiB pages, each ~16 us to read into on the Zen 5 VMs, 2.2 ms
/// of a process's first choice, against ~0.25 ms on one huge page): from kHugeBlockMinBytes on,
/// where huge_blocks(), 2 MiB-aligned, its size rounded up to whole 2 MiB pages and advised
/// (MADV_HUGEPAGE) before anything writes it, so that where THP is on it holds up to 2 MiB of
/// resident memory beyond `bytes`; a smaller block, or any where small pages fault cheaply, is
/// plain memory. Always 64-byte aligned; its bytes are not initialized.
class HugeBlock {
 public:
  static constexpr std::size_t kHugeBlockMinBytes = std::size_t{256} << 10;
  HugeBlock() = default;
  explicit HugeBlock(std::size_t bytes);
  void* data() const { return p_.get(); }
  std::size_t size() const { return bytes_; }

 private:
  struct Free {
    void operator()(void* p) const noexcept;
  };
  std::unique_ptr<void, Free> p_;
  std::size_t bytes_ = 0;
};

}  // namespace waco::kernels
