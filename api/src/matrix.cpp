// waco::Matrix: the caller's arrays checked and canonicalized into a kernels::CooMatrix/CooTensor.
#include <algorithm>
#include <cmath>
#include <string>

#include "api_internal.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/kernels/values.hpp"

namespace waco {

namespace {

using kernels::index_t;
using kernels::kMaxIndex;

void check_dim(std::int64_t n, const char* what) {
  if (n < 0 || n > kMaxIndex)
    throw Error(std::string(what) + " " + std::to_string(n) + " is out of range [0, " +
                    std::to_string(kMaxIndex) + "]",
                "waco-hybrid stores 32-bit indices");
}

void check_value(double v, std::int64_t entry) {
  if (!std::isfinite(v))
    throw Error("value of entry " + std::to_string(entry) + " is not finite (" +
                    std::to_string(v) + ")",
                "remove NaN and infinite values before tuning");
}

/// Whether from_csr's arrays are valid (rowptr non-decreasing up to nnz; each row's columns in
/// [0, cols), ascending and distinct; every value finite), without a branch per entry. When they
/// are not, csr_matrix's checking loop names the first fault.
template <typename Ptr, typename V>
bool csr_valid(std::int64_t rows, std::int64_t cols, const Ptr* rowptr,
               const std::int32_t* colind, const V* values, std::int64_t nnz) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t begin = static_cast<std::int64_t>(rowptr[r]);
    const std::int64_t end = static_cast<std::int64_t>(rowptr[r + 1]);
    if (end < begin || end > nnz) return false;
    if (end == begin) continue;
    bool ok = colind[begin] >= 0 && colind[begin] < cols;
    for (std::int64_t e = begin + 1; e < end; ++e)
      ok &= (colind[e] > colind[e - 1]) & (colind[e] < cols);
    if (!ok) return false;
  }
  return kernels::all_finite(values, static_cast<std::size_t>(nnz));
}

template <typename Ptr, typename V>
Matrix csr_matrix(std::int64_t rows, std::int64_t cols, const Ptr* rowptr,
                  const std::int32_t* colind, const V* values) {
  check_dim(rows, "rows");
  check_dim(cols, "cols");
  if (rowptr == nullptr) throw Error("from_csr: rowptr is null", "pass rows + 1 row offsets");
  if (rowptr[0] != 0)
    throw Error("from_csr: rowptr[0] is " + std::to_string(rowptr[0]) + ", not 0",
                "row offsets are 0-based");
  const std::int64_t nnz = static_cast<std::int64_t>(rowptr[rows]);
  if (nnz < 0 || nnz > kMaxIndex)
    throw Error("from_csr: rowptr[rows] = " + std::to_string(nnz) + " is not a valid entry count",
                "waco-hybrid stores at most 2^31 - 1 entries");
  if (nnz > 0 && (colind == nullptr || values == nullptr))
    throw Error(std::string("from_csr: ") + (colind == nullptr ? "colind" : "values") +
                    " is null with " + std::to_string(nnz) + " entries");
  kernels::CooMatrix a;
  a.rows = static_cast<index_t>(rows);
  a.cols = static_cast<index_t>(cols);
  if (csr_valid(rows, cols, rowptr, colind, values, nnz)) {
    kernels::reserve_entries(a, static_cast<std::size_t>(nnz));
    a.row.resize(static_cast<std::size_t>(nnz));
    for (std::int64_t r = 0; r < rows; ++r)
      std::fill(a.row.begin() + static_cast<std::ptrdiff_t>(rowptr[r]),
                a.row.begin() + static_cast<std::ptrdiff_t>(rowptr[r + 1]), static_cast<index_t>(r));
    a.col.assign(colind, colind + nnz);
    a.val.assign(values, values + nnz);
    return api::make_matrix(std::move(a), kernels::dtype_of<V>());
  }
  // Invalid: the entry-by-entry loop throws at the first fault, naming it.
  kernels::reserve_entries(a, static_cast<std::size_t>(nnz));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t begin = static_cast<std::int64_t>(rowptr[r]);
    const std::int64_t end = static_cast<std::int64_t>(rowptr[r + 1]);
    if (end < begin || end > nnz)
      throw Error("from_csr: rowptr is not non-decreasing up to rowptr[rows] at row " +
                  std::to_string(r) + " (" + std::to_string(begin) + ", then " +
                  std::to_string(end) + ")");
    for (std::int64_t e = begin; e < end; ++e) {
      const std::int64_t c = colind[e];
      if (c < 0 || c >= cols)
        throw Error("from_csr: column index " + std::to_string(c) + " of entry " +
                        std::to_string(e) + " (row " + std::to_string(r) +
                        ") is out of range [0, " + std::to_string(cols) + ")",
                    "column indices are 0-based");
      if (e > begin && c <= colind[e - 1])
        throw Error("from_csr: the column indices of row " + std::to_string(r) +
                        (c == colind[e - 1] ? " repeat " : " are not ascending at ") +
                        std::to_string(c) + " (entry " + std::to_string(e) + ")",
                    "sort each row's columns and merge repeats, or use Matrix::from_coo, which "
                    "does both");
      check_value(values[e], e);
      a.row.push_back(static_cast<index_t>(r));
      a.col.push_back(static_cast<index_t>(c));
      a.val.push_back(values[e]);
    }
  }
  return api::make_matrix(std::move(a), kernels::dtype_of<V>());
}

template <typename V>
Matrix coo_matrix(std::int64_t rows, std::int64_t cols, std::int64_t nnz, const std::int32_t* row,
                  const std::int32_t* col, const V* values) {
  check_dim(rows, "rows");
  check_dim(cols, "cols");
  check_dim(nnz, "nnz");
  if (nnz > 0 && (row == nullptr || col == nullptr))
    throw Error(std::string("from_coo: ") + (row == nullptr ? "row" : "col") + " is null with " +
                std::to_string(nnz) + " entries");
  kernels::CooMatrix a;
  a.rows = static_cast<index_t>(rows);
  a.cols = static_cast<index_t>(cols);
  kernels::reserve_entries(a, static_cast<std::size_t>(nnz));
  a.row.assign(row, row + nnz);
  a.col.assign(col, col + nnz);
  a.val.assign(static_cast<std::size_t>(nnz), 1.0);
  for (std::int64_t e = 0; e < nnz; ++e) {
    if (row[e] < 0 || row[e] >= rows || col[e] < 0 || col[e] >= cols)
      throw Error("from_coo: entry " + std::to_string(e) + " at (" + std::to_string(row[e]) + ", " +
                      std::to_string(col[e]) + ") is outside the " + std::to_string(rows) + " x " +
                      std::to_string(cols) + " matrix",
                  "coordinates are 0-based");
    if (values != nullptr) {
      check_value(values[e], e);
      a.val[static_cast<std::size_t>(e)] = values[e];
    }
  }
  kernels::canonicalize(a, kernels::dtype_of<V>());
  return api::make_matrix(std::move(a), kernels::dtype_of<V>());
}

template <typename V>
Matrix coo_tensor(const std::int64_t dims[3], std::int64_t nnz, const std::int32_t* i,
                  const std::int32_t* k, const std::int32_t* l, const V* values) {
  if (dims == nullptr) throw Error("tensor_from_coo: dims is null");
  for (int m = 0; m < 3; ++m) check_dim(dims[m], "dimension");
  check_dim(nnz, "nnz");
  const std::int32_t* idx[3] = {i, k, l};
  if (nnz > 0 && (i == nullptr || k == nullptr || l == nullptr))
    throw Error("tensor_from_coo: a coordinate array is null with " + std::to_string(nnz) +
                " entries");
  kernels::CooTensor t;
  t.dims = {static_cast<index_t>(dims[0]), static_cast<index_t>(dims[1]),
            static_cast<index_t>(dims[2])};
  t.idx.resize(3);
  for (int m = 0; m < 3; ++m) {
    t.idx[m].assign(idx[m], idx[m] + nnz);
    for (std::int64_t e = 0; e < nnz; ++e)
      if (idx[m][e] < 0 || idx[m][e] >= dims[m])
        throw Error("tensor_from_coo: mode-" + std::to_string(m) + " index " +
                        std::to_string(idx[m][e]) + " of entry " + std::to_string(e) +
                        " is out of range [0, " + std::to_string(dims[m]) + ")",
                    "coordinates are 0-based");
  }
  t.val.assign(static_cast<std::size_t>(nnz), 1.0);
  if (values != nullptr)
    for (std::int64_t e = 0; e < nnz; ++e) {
      check_value(values[e], e);
      t.val[static_cast<std::size_t>(e)] = values[e];
    }
  kernels::canonicalize(t, kernels::dtype_of<V>());
  return api::make_tensor(std::move(t), kernels::dtype_of<V>());
}

template <typename V>
void csr_arrays(const kernels::CooMatrix* m, std::int64_t* rowptr, std::int32_t* colind,
                V* values) {
  if (m == nullptr) throw Error("csr() of a 3-D tensor");
  const kernels::CooMatrix& a = *m;
  if (rowptr == nullptr || (a.nnz() > 0 && (colind == nullptr || values == nullptr)))
    throw Error("csr(): null output array");
  std::fill(rowptr, rowptr + a.rows + 1, std::int64_t{0});
  for (index_t r : a.row) ++rowptr[r + 1];
  for (index_t r = 0; r < a.rows; ++r) rowptr[r + 1] += rowptr[r];
  std::copy(a.col.begin(), a.col.end(), colind);
  for (std::size_t e = 0; e < a.val.size(); ++e) values[e] = static_cast<V>(a.val[e]);
}

}  // namespace

Matrix Matrix::from_csr(std::int64_t rows, std::int64_t cols, const std::int64_t* rowptr,
                        const std::int32_t* colind, const float* values) {
  return csr_matrix(rows, cols, rowptr, colind, values);
}

Matrix Matrix::from_csr(std::int64_t rows, std::int64_t cols, const std::int32_t* rowptr,
                        const std::int32_t* colind, const float* values) {
  return csr_matrix(rows, cols, rowptr, colind, values);
}

Matrix Matrix::from_csr(std::int64_t rows, std::int64_t cols, const std::int64_t* rowptr,
                        const std::int32_t* colind, const double* values) {
  return csr_matrix(rows, cols, rowptr, colind, values);
}

Matrix Matrix::from_csr(std::int64_t rows, std::int64_t cols, const std::int32_t* rowptr,
                        const std::int32_t* colind, const double* values) {
  return csr_matrix(rows, cols, rowptr, colind, values);
}

Matrix Matrix::from_coo(std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                        const std::int32_t* row, const std::int32_t* col, const float* values) {
  return coo_matrix(rows, cols, nnz, row, col, values);
}

Matrix Matrix::from_coo(std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                        const std::int32_t* row, const std::int32_t* col, const double* values) {
  return coo_matrix(rows, cols, nnz, row, col, values);
}

Matrix Matrix::tensor_from_coo(const std::int64_t dims[3], std::int64_t nnz, const std::int32_t* i,
                               const std::int32_t* k, const std::int32_t* l, const float* values) {
  return coo_tensor(dims, nnz, i, k, l, values);
}

Matrix Matrix::tensor_from_coo(const std::int64_t dims[3], std::int64_t nnz, const std::int32_t* i,
                               const std::int32_t* k, const std::int32_t* l, const double* values) {
  return coo_tensor(dims, nnz, i, k, l, values);
}

Matrix Matrix::from_file(const std::string& path, Dtype dtype) {
  return api::translate_errors([&] {
    kernels::ReadOptions opts;
    opts.dtype = api::internal(dtype);
    if (kernels::is_tensor_path(path)) {
      kernels::LoadedTensor t = kernels::read_frostt(path, opts);
      if (t.tensor.order() != 3)
        throw Error(path + ": a tensor of order " + std::to_string(t.tensor.order()) +
                        ", waco-hybrid's MTTKRP needs order 3");
      return api::make_tensor(std::move(t.tensor), opts.dtype);
    }
    return api::make_matrix(kernels::read_matrix_market(path, opts).matrix, opts.dtype);
  });
}

Matrix::Matrix(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

int Matrix::order() const { return impl_->tensor ? 3 : 2; }

std::int64_t Matrix::dim(int mode) const {
  if (mode < 0 || mode >= order())
    throw Error("dim(" + std::to_string(mode) + ") of an order-" + std::to_string(order()) +
                " operand");
  if (impl_->tensor) return impl_->tensor->dims[static_cast<std::size_t>(mode)];
  return mode == 0 ? impl_->matrix->rows : impl_->matrix->cols;
}

std::int64_t Matrix::rows() const { return dim(0); }
std::int64_t Matrix::cols() const { return dim(1); }
std::int64_t Matrix::nnz() const {
  return impl_->tensor ? impl_->tensor->nnz() : impl_->matrix->nnz();
}
std::string Matrix::fingerprint() const { return impl_->fingerprint(); }

Dtype Matrix::dtype() const { return api::external(impl_->dtype); }

void Matrix::csr(std::int64_t* rowptr, std::int32_t* colind, float* values) const {
  csr_arrays(impl_->matrix.get(), rowptr, colind, values);
}

void Matrix::csr(std::int64_t* rowptr, std::int32_t* colind, double* values) const {
  csr_arrays(impl_->matrix.get(), rowptr, colind, values);
}

namespace api {

Matrix make_matrix(kernels::CooMatrix a, kernels::Dtype dtype) {
  auto impl = std::make_shared<Matrix::Impl>();
  impl->dtype = dtype;
  impl->matrix = std::make_shared<const kernels::CooMatrix>(std::move(a));
  return Matrix::Impl::wrap(std::move(impl));
}

Matrix make_tensor(kernels::CooTensor t, kernels::Dtype dtype) {
  auto impl = std::make_shared<Matrix::Impl>();
  impl->dtype = dtype;
  impl->tensor = std::make_shared<const kernels::CooTensor>(std::move(t));
  return Matrix::Impl::wrap(std::move(impl));
}

}  // namespace api

}  // namespace waco
