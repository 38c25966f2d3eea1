// Dense operands of the kernels (vectors are n x 1 matrices) and their seeded generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string_view>
#include <vector>

#include "waco/kernels/sparse.hpp"

namespace waco::kernels {

enum class Layout { RowMajor, ColMajor };

/// Allocates on 64-byte (cache line, AVX-512 vector) boundaries. glibc's malloc puts a large
/// block 16 bytes past a page boundary, so every row of a dense operand with a multiple of 16
/// columns straddled two cache lines: CSR SpMM with the operands 16 bytes off ran 0.88-0.98x
/// the speed of aligned ones (2 threads, J = 64 and 256, three generated matrices).
template <class T>
struct CacheAligned {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheAligned() = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, kAlign); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheAligned<U>&) const { return false; }
};
using AlignedFloats = std::vector<float, CacheAligned<float>>;

/// A dense single-precision matrix in the given layout.
struct DenseMatrix {
  index_t rows = 0;
  index_t cols = 0;
  Layout layout = Layout::RowMajor;
  AlignedFloats data;  ///< 64-byte aligned

  DenseMatrix() = default;
  DenseMatrix(index_t r, index_t c, Layout l)
      : rows(r), cols(c), layout(l), data(static_cast<std::size_t>(r) * c, 0.0f) {}

  std::size_t offset(index_t i, index_t j) const {
    return layout == Layout::RowMajor ? static_cast<std::size_t>(i) * cols + j
                                      : static_cast<std::size_t>(j) * rows + i;
  }
  float& operator()(index_t i, index_t j) { return data[offset(i, j)]; }
  float operator()(index_t i, index_t j) const { return data[offset(i, j)]; }
};

/// The same logical matrix in another layout.
DenseMatrix with_layout(const DenseMatrix& m, Layout layout);

/// A seeded dense operand. Entry (i, j) of the operand named `name` is
///   u(splitmix64(seed ^ fnv1a(name) ^ splitmix64(i * cols + j)))
/// mapped to [-1, 1) with 24 random bits, so it depends on (seed, name, i, j) and not on the
/// layout, the platform or the standard library.
DenseMatrix random_dense(index_t rows, index_t cols, Layout layout, std::uint64_t seed,
                         std::string_view name);

/// FNV-1a (64-bit) of a string: the project's portable string hash (separates random streams by
/// name, places families in splits).
inline std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

/// SplitMix64 (Steele et al.), the project's portable hash/PRNG step.
inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace waco::kernels
