#include "waco/kernels/dense.hpp"

namespace waco::kernels {

DenseMatrix with_layout(const DenseMatrix& m, Layout layout) {
  if (m.layout == layout) return m;
  DenseMatrix out(m.rows, m.cols, layout, m.dtype());
  for (index_t i = 0; i < m.rows; ++i)
    for (index_t j = 0; j < m.cols; ++j) out.set(i, j, m.at(i, j));
  return out;
}

DenseMatrix random_dense(index_t rows, index_t cols, Layout layout, std::uint64_t seed,
                         std::string_view name, Dtype dtype) {
  DenseMatrix m(rows, cols, layout, dtype);
  const std::uint64_t base = seed ^ fnv1a(name);
  for (index_t i = 0; i < rows; ++i) {
    for (index_t j = 0; j < cols; ++j) {
      const std::uint64_t linear = static_cast<std::uint64_t>(i) * cols + j;
      const std::uint64_t bits = splitmix64(base ^ splitmix64(linear)) >> 40;  // 24 bits
      m.set(i, j, static_cast<double>(bits) * (2.0 / 16777216.0) - 1.0);
    }
  }
  return m;
}

}  // namespace waco::kernels
