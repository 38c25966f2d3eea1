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
// are placed by the threads that read them (first touch, the same static ranges of rows). The
// loops and the builder are kernels/baseline_loops.hpp's (dia_spmv, dia_fill): codegen::bind_baseline
// serves a plan with them.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "baselines.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/serial_bound.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::kernels {

namespace {

/// The first row of thread q's range (whole blocks; the last thread takes the rest).
index_t range_start(index_t rows, int threads, int q) {
  if (q >= threads) return rows;
  const index_t blocks = (rows + kDiaBlockRows - 1) / kDiaBlockRows;
  return static_cast<index_t>(std::min<std::int64_t>(
      rows, static_cast<std::int64_t>(blocks) * q / threads * kDiaBlockRows));
}

/// y[lo, hi) in blocks of kDiaBlockRows (rows where a diagonal may leave the matrix).
template <class V>
void dia_blocks(const DiaView<V>& A, const V* x, V* y, index_t lo, index_t hi) {
  V acc[kDiaBlockRows];
  for (index_t i0 = lo; i0 < hi; i0 += kDiaBlockRows) {
    const index_t i1 = std::min<index_t>(hi, i0 + kDiaBlockRows);
    std::fill(acc, acc + (i1 - i0), V(0));
    for (std::int64_t d = 0; d < A.diagonals; ++d) {
      const index_t o = A.offsets[d];
      // Rows of the block whose column i + o exists.
      const index_t first = std::max<index_t>(i0, -o), last = std::min<index_t>(i1, A.cols - o);
      const V* v = A.val + d * static_cast<std::int64_t>(A.rows);
#pragma omp simd
      for (index_t i = first; i < last; ++i) acc[i - i0] += v[i] * x[i + o];
    }
    std::copy(acc, acc + (i1 - i0), y + i0);
  }
}

/// y[lo, hi): the rows where every diagonal lies inside the matrix (i + o in [0, cols) for each
/// offset o) in tiles of kDiaTileBytes, aligned to the tile size, whose partial sums stay in
/// registers while the tile sums each diagonal, each diagonal's values prefetched
/// kDiaPrefetchBytes ahead (every line); the rows before and after them in dia_blocks. Measured
/// against blocks alone (sums in L1, the diagonals one after the other): kernels/README.md, "The
/// `dia` baseline" (2 threads, Zen 5 VM: about half the time beyond the LLC).
template <class V>
void dia_rows(const DiaView<V>& A, const V* x, V* y, index_t lo, index_t hi) {
  constexpr std::int64_t W = kDiaTileBytes / static_cast<int>(sizeof(V));
  constexpr std::int64_t ahead = kDiaPrefetchBytes / static_cast<int>(sizeof(V));
  constexpr std::int64_t line = 64 / static_cast<int>(sizeof(V));
  std::int64_t t0 = hi, t1 = hi;  // the tiles: [t0, t1)
  if (A.diagonals > 0) {
    const std::int64_t inside_lo = std::max<std::int64_t>(lo, -std::int64_t{A.offsets[0]});
    const std::int64_t inside_hi =
        std::min<std::int64_t>(hi, std::int64_t{A.cols} - A.offsets[A.diagonals - 1]);
    t0 = std::min<std::int64_t>(hi, (inside_lo + W - 1) / W * W);
    t1 = inside_hi > t0 ? t0 + (inside_hi - t0) / W * W : t0;
  }
  dia_blocks(A, x, y, lo, static_cast<index_t>(t0));
  const std::int64_t rows = A.rows;
  for (std::int64_t i = t0; i < t1; i += W) {
    V acc[W];
#pragma omp simd
    for (std::int64_t t = 0; t < W; ++t) acc[t] = V(0);
    for (std::int64_t d = 0; d < A.diagonals; ++d) {
      const V* v = A.val + d * rows + i;
      const V* xd = x + i + A.offsets[d];
      for (std::int64_t l = 0; l < W; l += line) __builtin_prefetch(v + ahead + l);
#pragma omp simd
      for (std::int64_t t = 0; t < W; ++t) acc[t] += v[t] * xd[t];
    }
#pragma omp simd
    for (std::int64_t t = 0; t < W; ++t) y[i + t] = acc[t];
  }
  dia_blocks(A, x, y, static_cast<index_t>(t1), hi);
}

}  // namespace

std::vector<index_t> dia_offsets(const CooMatrix& a) {
  // The diagonals holding a nonzero (offset col - row, marked at col - row + rows - 1).
  const std::int64_t span = a.rows > 0 && a.cols > 0 ? std::int64_t{a.rows} + a.cols - 1 : 0;
  std::vector<bool> holds(static_cast<std::size_t>(span), false);
  for (std::int64_t e = 0; e < a.nnz(); ++e)
    holds[static_cast<std::size_t>(std::int64_t{a.col[e]} - a.row[e] + a.rows - 1)] = true;
  std::vector<index_t> offsets;
  for (std::int64_t s = 0; s < span; ++s)
    if (holds[static_cast<std::size_t>(s)]) offsets.push_back(static_cast<index_t>(s - (a.rows - 1)));
  return offsets;
}

std::vector<index_t> dia_diagonals(const CooMatrix& a) {
  std::vector<index_t> offsets = dia_offsets(a);
  if (dia_stores(a.rows, a.nnz(), offsets.size())) return offsets;
  const std::int64_t stored = static_cast<std::int64_t>(offsets.size()) * a.rows;
  throw Error("dia: the matrix's " + std::to_string(a.nnz()) + " nonzeros lie on " +
                  std::to_string(offsets.size()) + " diagonals: storing them would take " +
                  std::to_string(stored) + " values, more than " + std::to_string(kDiaMaxFill) +
                  " a nonzero",
              "dia suits stencils on structured grids and banded matrices; use csr");
}

template <class V>
void dia_fill(const CooMatrix& a, const std::vector<index_t>& offsets, V* val, int threads) {
  const auto rows = static_cast<std::size_t>(a.rows);
  const std::size_t diagonals = offsets.size();
#pragma omp parallel num_threads(std::max(1, threads)) if (threads > 1)
  {
    const int q = omp_get_thread_num(), team = omp_get_num_threads();
    const auto lo = static_cast<std::size_t>(range_start(a.rows, team, q));
    const auto hi = static_cast<std::size_t>(range_start(a.rows, team, q + 1));
    for (std::size_t d = 0; d < diagonals; ++d) std::fill(val + d * rows + lo, val + d * rows + hi, V(0));
  }
  for (std::int64_t e = 0; e < a.nnz(); ++e) {
    const auto d = static_cast<std::size_t>(
        std::lower_bound(offsets.begin(), offsets.end(), a.col[e] - a.row[e]) - offsets.begin());
    val[d * rows + static_cast<std::size_t>(a.row[e])] = static_cast<V>(a.val[e]);
  }
}

template <class V>
void dia_spmv(const DiaView<V>& A, const V* x, V* y, int threads) {
  if (csr_spmv_serial(A.diagonals * A.rows, threads, dtype_of<V>())) {
    dia_rows(A, x, y, 0, A.rows);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int q = omp_get_thread_num(), team = omp_get_num_threads();
    dia_rows(A, x, y, range_start(A.rows, team, q), range_start(A.rows, team, q + 1));
  }
}

#define WACO_DIA_INSTANTIATE(V)                                                               \
  template void dia_fill<V>(const CooMatrix&, const std::vector<index_t>&, V*, int);       \
  template void dia_spmv<V>(const DiaView<V>&, const V*, V*, int);
WACO_DIA_INSTANTIATE(float)
WACO_DIA_INSTANTIATE(double)
#undef WACO_DIA_INSTANTIATE

namespace detail {
namespace {

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
    offsets_ = dia_diagonals(a);
    vals_.reset(new V[offsets_.size() * static_cast<std::size_t>(a.rows)]);
    dia_fill(a, offsets_, vals_.get(), threads_);
    view_ = DiaView<V>{a.rows, a.cols, static_cast<std::int64_t>(offsets_.size()), offsets_.data(),
                       vals_.get()};
    conversion_seconds_ = now_seconds() - t0;
    out_.assign(p.dtype(), static_cast<std::size_t>(p.output_size()));
    (void)csr_spmv_serial(view_.diagonals * view_.rows, threads_, p.dtype());  // probed untimed
  }

  void run() override {
    dia_spmv(view_, problem_.B->data.template data<V>(), out_.template data<V>(), threads_);
  }

  const Values& output() const override { return out_; }

 private:
  Problem problem_;
  int threads_ = 1;
  std::vector<index_t> offsets_;
  std::unique_ptr<V[]> vals_;
  DiaView<V> view_;
  Values out_;
};

}  // namespace

std::unique_ptr<Implementation> make_dia() { return make_by_value_type<DiaSpmv>(); }

}  // namespace detail
}  // namespace waco::kernels
