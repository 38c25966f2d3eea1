// dia: SpMV over diagonal storage, for matrices whose nonzeros lie on few diagonals (stencils on
// structured grids, banded matrices). Every diagonal (offset o = col - row) holding a nonzero is
// stored as one array of `rows` values, zero where the matrix has no entry, so that the product
// reads x at consecutive addresses, i + o, instead of through a column index: y[i] = sum over the
// diagonals of val_d[i] * x[i + o_d], in vector loops over blocks of rows.
//
// Why (issue 36; experiments/README.md, "SpMV beyond the last-level cache"): on the Intel Xeon VM
// every CSR-like kernel ran SpMV at 40-74% of STREAM, bound in the core by the load of
// x[col[k]] whose address comes from another load. A harness of this loop ran 2.45-2.69x faster
// than a CSR loop on a 20M-nonzero 2-D stencil and a 44M-nonzero banded matrix (2 threads).
//
// It stores diagonals x rows values; a matrix needing more than kDiaMaxFill times its nonzeros is
// refused (the padding would be the time). Each row sums its diagonals in increasing offset,
// which is its columns' order, as CSR sums; the padding adds 0 * x[j], which differs from CSR
// only where x holds an infinity or a NaN that the row's stored entries do not touch. The values
// are placed by the threads that read them (first touch, the same static ranges of rows).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "baselines.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::kernels {
namespace detail {
namespace {

/// Rows a thread sums in one block: the block's partial sums stay in the L1 cache while the
/// diagonals stream past them.
constexpr index_t kBlockRows = 512;

/// The first row of thread q's range (whole blocks; the last thread takes the rest).
index_t range_start(index_t rows, int threads, int q) {
  if (q >= threads) return rows;
  const index_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  return static_cast<index_t>(std::min<std::int64_t>(
      rows, static_cast<std::int64_t>(blocks) * q / threads * kBlockRows));
}

template <class V>
class DiaSpmv final : public Implementation {
 public:
  void prepare(const Problem& p, int threads) override {
    p.validate();
    if (p.kind != KernelKind::SpMV)
      throw Error("dia: only spmv runs on diagonal storage", "use --impl csr for other kernels");
    problem_ = p;
    threads_ = std::max(1, threads);
    const double t0 = now_seconds();
    const CooMatrix& a = *p.A;
    rows_ = a.rows;
    cols_ = a.cols;
    // The diagonals holding a nonzero (offset col - row, marked at col - row + rows - 1).
    const std::int64_t span = rows_ > 0 && cols_ > 0 ? std::int64_t{rows_} + cols_ - 1 : 0;
    std::vector<bool> holds(static_cast<std::size_t>(span), false);
    for (std::int64_t e = 0; e < a.nnz(); ++e)
      holds[static_cast<std::size_t>(std::int64_t{a.col[e]} - a.row[e] + rows_ - 1)] = true;
    offsets_.clear();
    for (std::int64_t s = 0; s < span; ++s)
      if (holds[static_cast<std::size_t>(s)]) offsets_.push_back(static_cast<index_t>(s - (rows_ - 1)));
    const std::int64_t stored = static_cast<std::int64_t>(offsets_.size()) * rows_;
    if (stored > kDiaMaxFill * std::max<std::int64_t>(a.nnz(), 1))
      throw Error("dia: the matrix's " + std::to_string(a.nnz()) + " nonzeros lie on " +
                      std::to_string(offsets_.size()) + " diagonals: storing them would take " +
                      std::to_string(stored) + " values, more than " + std::to_string(kDiaMaxFill) +
                      " a nonzero",
                  "dia suits stencils on structured grids and banded matrices; use csr");
    // Zeroed by the threads that will read each row range, then the entries placed.
    vals_.reset(new V[static_cast<std::size_t>(stored)]);
    const std::size_t diagonals = offsets_.size();
#pragma omp parallel num_threads(threads_) if (threads_ > 1)
    {
      const int q = omp_get_thread_num(), team = omp_get_num_threads();
      const index_t lo = range_start(rows_, team, q), hi = range_start(rows_, team, q + 1);
      for (std::size_t d = 0; d < diagonals; ++d)
        std::fill(vals_.get() + d * static_cast<std::size_t>(rows_) + lo, vals_.get() + d * static_cast<std::size_t>(rows_) + hi, V(0));
    }
    for (std::int64_t e = 0; e < a.nnz(); ++e) {
      const auto d = static_cast<std::size_t>(
          std::lower_bound(offsets_.begin(), offsets_.end(), a.col[e] - a.row[e]) - offsets_.begin());
      vals_[d * static_cast<std::size_t>(rows_) + static_cast<std::size_t>(a.row[e])] = static_cast<V>(a.val[e]);
    }
    conversion_seconds_ = now_seconds() - t0;
    out_.assign(p.dtype(), static_cast<std::size_t>(p.output_size()));
  }

  void run() override {
    const V* x = problem_.B->data.template data<V>();
    V* y = out_.template data<V>();
    const bool serial = threads_ <= 1 || problem_.A->nnz() <= kCsrSpmvSerialNnz;
    if (serial) {
      rows(x, y, 0, rows_);
      return;
    }
#pragma omp parallel num_threads(threads_)
    {
      const int q = omp_get_thread_num(), team = omp_get_num_threads();
      rows(x, y, range_start(rows_, team, q), range_start(rows_, team, q + 1));
    }
  }

  const Values& output() const override { return out_; }

 private:
  /// y[lo, hi) in blocks of kBlockRows.
  void rows(const V* x, V* y, index_t lo, index_t hi) const {
    V acc[kBlockRows];
    for (index_t i0 = lo; i0 < hi; i0 += kBlockRows) {
      const index_t i1 = std::min<index_t>(hi, i0 + kBlockRows);
      std::fill(acc, acc + (i1 - i0), V(0));
      for (std::size_t d = 0; d < offsets_.size(); ++d) {
        const index_t o = offsets_[d];
        // Rows of the block whose column i + o exists.
        const index_t first = std::max<index_t>(i0, -o), last = std::min<index_t>(i1, cols_ - o);
        const V* v = vals_.get() + d * static_cast<std::size_t>(rows_);
#pragma omp simd
        for (index_t i = first; i < last; ++i) acc[i - i0] += v[i] * x[i + o];
      }
      std::copy(acc, acc + (i1 - i0), y + i0);
    }
  }

  Problem problem_;
  int threads_ = 1;
  index_t rows_ = 0, cols_ = 0;
  std::vector<index_t> offsets_;  ///< col - row of each stored diagonal, increasing
  std::unique_ptr<V[]> vals_;     ///< diagonal d's rows at [d * rows, (d + 1) * rows)
  Values out_;
};

}  // namespace

std::unique_ptr<Implementation> make_dia() { return make_by_value_type<DiaSpmv>(); }

}  // namespace detail
}  // namespace waco::kernels
