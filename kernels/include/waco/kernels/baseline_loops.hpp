// The hand-written loops of the `csr` and `csf` baselines, callable on arrays the caller owns.
// The baselines (Implementations "csr", "csf") run them on their own CSR / CSF; codegen::bind_baseline
// runs the same compiled code on the csr (csf) schedule's storage, so that a waco::Plan whose tune
// found the hand-written baseline the fastest (no gain over it) serves the very kernel that was
// measured. Rows (slices) in parallel, OpenMP dynamic: 32 rows for SpMM, SDDMM and MTTKRP; SpMV in
// about four chunks a thread of at least 128 rows, or serially where that is faster on the matrix
// (csr_spmv_serial_for) or, without a matrix to time, up to this machine's serial bound
// (serial_bound.hpp). Instantiated for float and double (baseline_csr.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

/// The csr SpMV baseline's parallel rule (baseline_csr.cpp says why): at most the serial bound's
/// nonzeros (csr_spmv_serial, serial_bound.hpp: measured on this machine), or one thread, run
/// serially; otherwise rows go in dynamic chunks of
/// csr_spmv_chunk(rows, threads), about kCsrSpmvChunksPerThread a thread and at least
/// kCsrSpmvMinChunk rows. The drop-in header of a plan that this baseline serves applies the
/// same rule (codegen::emit_standalone_header), and so does the generated csr schedule of SpMV
/// (codegen's chunk=auto).
inline constexpr int kCsrSpmvChunksPerThread = 4;
inline constexpr index_t kCsrSpmvMinChunk = 128;
inline index_t csr_spmv_chunk(index_t rows, int threads) {
  const index_t parts = static_cast<index_t>(kCsrSpmvChunksPerThread) * threads;
  const index_t even = (rows + parts - 1) / parts;
  return even > kCsrSpmvMinChunk ? even : kCsrSpmvMinChunk;
}

/// The dia SpMV baseline (baseline_dia.cpp) stores at most kDiaMaxFill values a nonzero (its
/// diagonals times its rows); it refuses a matrix that would need more.
inline constexpr std::int64_t kDiaMaxFill = 2;
/// Rows a dia_spmv block sums at once where a diagonal leaves the matrix: the block's partial sums
/// stay in the L1 cache while the diagonals stream past them. Threads take whole blocks.
inline constexpr index_t kDiaBlockRows = 512;
/// Bytes of partial sums a dia_spmv tile keeps in registers (4 AVX-512 or 8 AVX2 registers) where
/// every diagonal lies inside the matrix: each tile sums all the diagonals before the next.
inline constexpr int kDiaTileBytes = 256;
/// How far ahead of a tile dia_spmv prefetches each diagonal's values (every cache line of it):
/// on the Zen 5 VM the hardware prefetchers fetched the diagonals' streams late (kernels/README.md,
/// "The `dia` baseline").
inline constexpr int kDiaPrefetchBytes = 2048;

/// A matrix in diagonal storage held elsewhere (the dia baseline's; codegen::bind_baseline binds
/// the same arrays): `diagonals` diagonals of offset col - row, increasing, diagonal d's rows at
/// val[d * rows, (d + 1) * rows), zero where the matrix has no entry.
template <class V>
struct DiaView {
  index_t rows = 0;
  index_t cols = 0;
  std::int64_t diagonals = 0;
  const index_t* offsets = nullptr;
  const V* val = nullptr;
};

/// The diagonals (col - row, increasing) that hold a's nonzeros. O(nnz + rows + cols).
std::vector<index_t> dia_offsets(const CooMatrix& a);
/// Whether the dia baseline stores a rows-row matrix of nnz nonzeros on `diagonals` diagonals:
/// at most kDiaMaxFill values a nonzero.
inline bool dia_stores(std::int64_t rows, std::int64_t nnz, std::size_t diagonals) {
  return static_cast<std::int64_t>(diagonals) * rows <= kDiaMaxFill * (nnz > 1 ? nnz : 1);
}
/// dia_offsets(a) when the dia baseline stores a; throws Error (the counts, and what dia suits)
/// when its diagonals would store more than kDiaMaxFill values a nonzero.
std::vector<index_t> dia_diagonals(const CooMatrix& a);
/// Places canonical a's entries in diagonal storage: `val` holds offsets.size() x a.rows values
/// (dia_offsets(a)), zeroed first by the threads that will read each range of rows (dia_spmv's
/// static ranges on `threads`), so that the pages lie near them.
template <class V>
void dia_fill(const CooMatrix& a, const std::vector<index_t>& offsets, V* val, int threads);
/// y = A x (y: rows values, each written): rows in static ranges of whole blocks of kDiaBlockRows
/// (one range a thread); rows where every diagonal lies inside the matrix in tiles of
/// kDiaTileBytes of partial sums held in registers, each diagonal's values prefetched
/// kDiaPrefetchBytes ahead, the other rows in blocks of kDiaBlockRows; every row sums its diagonals
/// in increasing offset with vector loops (its columns' order, as CSR sums); serially up to the
/// serial bound in stored values (csr_spmv_serial).
template <class V>
void dia_spmv(const DiaView<V>& A, const V* x, V* y, int threads);

/// y = A x (y: rows values, each written) with the decision taken: the serial loop on one thread (threads <= 1), else the
/// parallel one on `threads` (csr_spmv_serial_for decides which, once a matrix).
template <class V>
void csr_spmv_rows(const CsrView<V>& A, const V* x, V* y, int threads);

/// Whether csr's SpMV of this matrix runs serially on `threads` threads, decided on the matrix
/// itself: one thread, at most half the serial probe's smallest size or above its largest
/// (serial_bound.hpp) answer as csr_spmv_serial does, and so does WACO_CSR_SERIAL_NNZ when set;
/// in between, the serial and the parallel loop are timed on A, interleaved (3 rounds, each
/// timed call after two of its own: 22 calls), and the one all three rounds find faster by 10%
/// runs; a nearer tie is the machine's bound's (csr_spmv_serial), so that every process decides
/// it alike; a clear answer against the bound stands only when it holds twice more, each after
/// the loop it found slow ran for up to 20 ms (a process's first parallel regions can be slow:
/// serial_bound.cpp). Why: near the crossover, real matrices of one size differ by
/// 1.5x either way, and the machine's bound missed them by up to 6x (kernels/README.md, "The
/// serial bound"). Also chooses the serial loop's copy for V when this process has not
/// (csr_spmv_serial_copy). x: A's columns, y: A's rows (A x once timed, untouched otherwise). Runs OpenMP regions: not in a
/// process that forks afterwards; never in a timed call (the baselines' prepare, a binding).
template <class V>
bool csr_spmv_serial_for(const CsrView<V>& A, const V* x, V* y, int threads);

/// C = A B, B cols x J and C rows x J row-major (C written whole).
template <class V>
void csr_spmm(const CsrView<V>& A, index_t J, const V* B, V* C, int threads);

/// D = A .* (B C) at A's nonzeros, in CSR order: B rows x K row-major, C K x cols column-major
/// (column j contiguous).
template <class V>
void csr_sddmm(const CsrView<V>& A, index_t K, const V* B, const V* C, V* D, int threads);

/// An order-3 tensor in CSF (compressed i, k, l) held elsewhere: `slices` slices i_crd[s], slice
/// s's fibres [k_pos[s], k_pos[s + 1]) with coordinates k_crd, fibre f's entries
/// [l_pos[f], l_pos[f + 1]) with coordinates l_crd and values val; `rows` the extent of i.
template <class V>
struct CsfView {
  index_t rows = 0;
  index_t slices = 0;
  const index_t* i_crd = nullptr;
  const index_t* k_pos = nullptr;
  const index_t* k_crd = nullptr;
  const index_t* l_pos = nullptr;
  const index_t* l_crd = nullptr;
  const V* val = nullptr;
};

/// D(i, j) = sum over T(i, k, l) of T(i, k, l) B(k, j) C(l, j): B, C and D row-major with J
/// columns (D written whole: the rows without a slice are zeroed by the slice before them).
template <class V>
void csf_mttkrp(const CsfView<V>& T, index_t J, const V* B, const V* C, V* D, int threads);

}  // namespace waco::kernels
