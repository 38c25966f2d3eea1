// The hand-written csr loops: the `csr` baseline's kernels, callable on arrays the caller owns.
// The baseline (Implementation "csr") runs them on its own CSR; codegen::bind_csr_baseline runs the
// same compiled code on a csr schedule's storage, so that a waco::Plan whose tune found the
// hand-written csr the fastest (no gain over csr) serves the very kernel that was measured.
// Rows in parallel, OpenMP dynamic with the chunk sizes of issue 2: 128 rows for SpMV, 32 for SpMM
// and SDDMM. Instantiated for float and double (baseline_csr.cpp).
#pragma once

#include "waco/kernels/sparse.hpp"

namespace waco::kernels {

/// A CSR matrix of value type V held elsewhere: rowptr has rows + 1 entries.
template <class V>
struct CsrView {
  index_t rows = 0;
  const index_t* rowptr = nullptr;
  const index_t* colidx = nullptr;
  const V* val = nullptr;
};

/// y = A x (y: rows values, each written).
template <class V>
void csr_spmv(const CsrView<V>& A, const V* x, V* y, int threads);

/// C = A B, B cols x J and C rows x J row-major (C written whole).
template <class V>
void csr_spmm(const CsrView<V>& A, index_t J, const V* B, V* C, int threads);

/// D = A .* (B C) at A's nonzeros, in CSR order: B rows x K row-major, C K x cols column-major
/// (column j contiguous).
template <class V>
void csr_sddmm(const CsrView<V>& A, index_t K, const V* B, const V* C, V* D, int threads);

}  // namespace waco::kernels
