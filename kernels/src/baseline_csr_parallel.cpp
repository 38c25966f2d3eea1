// The csr SpMV baseline's parallel row loop (baselines.hpp), in a file of its own because it is
// compiled with other flags than baseline_csr.cpp's serial loop (kernels/CMakeLists.txt): with
// GCC's default loop alignment its inner loop lies where the generated csr schedule's does.
#include "baselines.hpp"

namespace waco::kernels::detail {

template <class V>
WACO_CSR_ROW_SUM_LOOP void csr_spmv_parallel_rows(const CsrView<V>& A, const V* x, V* y, int threads) {
  const index_t* rp = A.rowptr;
  const index_t* ci = A.colidx;
  const V* v = A.val;
  // About four chunks a thread, as Eigen's parallel SpMV takes them (SparseDenseProduct.h), and
  // at least kCsrSpmvMinChunk rows (csr_spmv_chunk): 128-row chunks cost a dispatch each, which
  // in double left csr at 0.84-0.90x Eigen's speed at the median over 22 held-out-like matrices,
  // 0.71-0.72x on a 90k-row 2-D stencil (2 threads, AMD EPYC VM, 3 runs of 30 rounds each); with
  // these chunks 1.12-1.17x, and 0.96-0.99x at worst above 50k nonzeros.
  const index_t chunk = csr_spmv_chunk(A.rows, threads);
#pragma omp parallel for num_threads(threads) schedule(dynamic, chunk)
  for (index_t i = 0; i < A.rows; ++i) y[i] = csr_spmv_row(rp, ci, v, x, i);
}

template void csr_spmv_parallel_rows<float>(const CsrView<float>&, const float*, float*, int);
template void csr_spmv_parallel_rows<double>(const CsrView<double>&, const double*, double*, int);

}  // namespace waco::kernels::detail
