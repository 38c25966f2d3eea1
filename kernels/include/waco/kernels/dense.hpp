// Dense operands of the kernels (vectors are n x 1 matrices) and their seeded generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "waco/kernels/sparse.hpp"
#include "waco/kernels/values.hpp"

namespace waco::kernels {

enum class Layout { RowMajor, ColMajor };

/// A dense matrix of float or double values in the given layout.
struct DenseMatrix {
  index_t rows = 0;
  index_t cols = 0;
  Layout layout = Layout::RowMajor;
  Values data;  ///< 64-byte aligned

  DenseMatrix() = default;
  DenseMatrix(index_t r, index_t c, Layout l, Dtype d = Dtype::F32)
      : rows(r), cols(c), layout(l), data(d, static_cast<std::size_t>(r) * c) {}

  Dtype dtype() const { return data.dtype(); }
  std::size_t offset(index_t i, index_t j) const {
    return layout == Layout::RowMajor ? static_cast<std::size_t>(i) * cols + j
                                      : static_cast<std::size_t>(j) * rows + i;
  }
  double at(index_t i, index_t j) const { return data.get(offset(i, j)); }
  /// Stores v (rounded to float for an F32 matrix).
  void set(index_t i, index_t j, double v) { data.set(offset(i, j), v); }
};

/// The same logical matrix in another layout.
DenseMatrix with_layout(const DenseMatrix& m, Layout layout);

/// A seeded dense operand. Entry (i, j) of the operand named `name` is
///   u(splitmix64(seed ^ fnv1a(name) ^ splitmix64(i * cols + j)))
/// mapped to [-1, 1) with 24 random bits, so it depends on (seed, name, i, j) and not on the
/// layout, the platform or the standard library; the values are exact in float, so an F32 and an
/// F64 operand of the same seed hold the same numbers.
DenseMatrix random_dense(index_t rows, index_t cols, Layout layout, std::uint64_t seed,
                         std::string_view name, Dtype dtype = Dtype::F32);

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
