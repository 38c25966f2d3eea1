// The fixed baselines every tuned kernel is compared with: CSR with rows in parallel (TACO's
// default schedule, "FixedCSR" in the WACO paper, section 6.1) and, for MTTKRP, the same idea over
// CSF (compressed i, k, l). OpenMP dynamic scheduling with the chunk sizes of issue 2: 32 rows for
// SpMM, SDDMM and MTTKRP; SpMV in about four chunks a thread of at least 128 rows (Eigen's), and an
// SpMV of at most the serial bound's nonzeros (serial_bound.hpp) runs serially. The loops and SpMV's rule are public
// (baseline_loops.hpp).
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "baselines.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/huge_pages.hpp"
#include "waco/kernels/serial_bound.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::kernels {

namespace {
constexpr int kChunk = 32;
// The serial bound (serial_bound.hpp): SpMV of at most this many nonzeros (or on one thread) runs
// its rows serially, without an OpenMP region. Eigen does the same below 20000
// (SparseDenseProduct.h). The region's fork, join and dynamic dispatch cost more than a small
// product: with a fixed bound of 3072 (the crossover measured on the generic AMD EPYC VM of
// sessions 39-43, 2 threads: the serial loop against the parallel one 0.81-1.01x on 494_bus, 1666
// nonzeros, 1.35-1.64x on qh882, 3354), csr's f32 SpMV ran at 0.77-0.88x Eigen's speed on four
// 6-12k-nonzero matrices on an AMD EPYC Zen 5 VM, whose two-thread region costs ~3 us: there the
// f32 crossover lies at 11-22k nonzeros (f64 near 3.3k), so the bound is measured per machine
// (kernels/README.md, "The serial bound"). The loops' instructions are unchanged.

}  // namespace

namespace detail {

// The two loops (this serial one; the parallel one is baseline_csr_parallel.cpp's, compiled with
// other flags) are never inlined: each exists once, at one offset in its 64-byte lines in every
// binary (kernels/CMakeLists.txt), and the copy that csr_spmv_serial_for and the probe time is the
// copy that runs. Inlined into the csr baseline's run(), the serial f64 loop ran dwt_1005 in 7.5
// us against 3.6 for this function's copy of the same instructions (Zen 5 VM; the decision,
// timing this copy, had chosen it). The serial loop exists in kSerialLoopCopies copies, each
// shifted by no-ops at its entry, and runs in the one measured fastest on this machine
// (serial_bound.hpp, csr_spmv_serial_copy): on an AMD EPYC Milan VM copy 0, whose inner loop
// crosses a 64-byte line, ran 1.5-1.9x slower than the others in f32 and f64.
template <class V, int Copy>
WACO_CSR_ROW_SUM_LOOP void csr_spmv_serial_rows_copy(const CsrView<V>& A, const V* x, V* y) {
#if defined(__GNUC__)
  if constexpr (Copy > 0) asm volatile(".nops %c0" ::"i"(Copy * kSerialLoopCopyStep));
#endif
  for (index_t i = 0; i < A.rows; ++i) y[i] = csr_spmv_row(A.rowptr, A.colidx, A.val, x, i);
}

template <class V, std::size_t... C>
constexpr std::array<SerialRows<V>, sizeof...(C)> serial_copies(std::index_sequence<C...>) {
  return {&csr_spmv_serial_rows_copy<V, static_cast<int>(C)>...};
}

template <class V>
const std::array<SerialRows<V>, kSerialLoopCopies>& csr_spmv_serial_copies() {
  static constexpr std::array<SerialRows<V>, kSerialLoopCopies> copies =
      serial_copies<V>(std::make_index_sequence<kSerialLoopCopies>{});
  return copies;
}

template <class V>
void csr_spmv_serial_rows(const CsrView<V>& A, const V* x, V* y) {
  csr_spmv_serial_copies<V>()[static_cast<std::size_t>(csr_spmv_serial_copy(dtype_of<V>()))](A, x, y);
}

}  // namespace detail

template <class V>
void csr_spmv_rows(const CsrView<V>& A, const V* x, V* y, int threads) {
  if (threads <= 1)
    detail::csr_spmv_serial_rows(A, x, y);
  else
    detail::csr_spmv_parallel_rows(A, x, y, threads);
}

template <class V>
void csr_spmm(const CsrView<V>& A, index_t J, const V* B, V* C, int threads) {
  const index_t* rp = A.rowptr;
  const index_t* ci = A.colidx;
  const V* v = A.val;
  // TACO's loop: each nonzero adds into the output row. With C off a 64-byte boundary (a
  // caller's malloc'd or std::vector array lies 16 bytes past one) those read-modify-writes
  // straddle cache lines: csr SpMM ran 1.5-2x slower on an AMD Zen 4 VM (J = 64: jagmesh7 41-45
  // us with C 16 or 48 bytes off against 23-28 aligned; G51 66 us against 29-33). Such a row is
  // summed in an aligned buffer and copied out once (the same sums in the same order): 22-30 us
  // and 32-39 us. The measuring processes' operands are aligned (kernels::Values): their csr
  // runs the loop as before.
  constexpr index_t kRow = 2048 / static_cast<index_t>(sizeof(V));
  const bool staged = reinterpret_cast<std::uintptr_t>(C) % 64 != 0 && J <= kRow;
#pragma omp parallel num_threads(threads)
  {
    alignas(64) V row[kRow];
#pragma omp for schedule(dynamic, kChunk)
    for (index_t i = 0; i < A.rows; ++i) {
      V* out = C + static_cast<std::size_t>(i) * J;
      V* c = staged ? row : out;
      for (index_t j = 0; j < J; ++j) c[j] = 0;
      for (index_t p = rp[i]; p < rp[i + 1]; ++p) {
        const V a = v[p];
        const V* b = B + static_cast<std::size_t>(ci[p]) * J;
#pragma omp simd
        for (index_t j = 0; j < J; ++j) c[j] += a * b[j];
      }
      if (staged) std::copy(row, row + J, out);
    }
  }
}

template <class V>
void csr_sddmm(const CsrView<V>& A, index_t K, const V* B, const V* C, V* D, int threads) {
  const index_t* rp = A.rowptr;
  const index_t* ci = A.colidx;
  const V* v = A.val;
#pragma omp parallel for num_threads(threads) schedule(dynamic, kChunk)
  for (index_t i = 0; i < A.rows; ++i) {
    const V* b = B + static_cast<std::size_t>(i) * K;
    for (index_t p = rp[i]; p < rp[i + 1]; ++p) {
      const V* c = C + static_cast<std::size_t>(ci[p]) * K;
      V s = 0;
#pragma omp simd reduction(+ : s)
      for (index_t k = 0; k < K; ++k) s += b[k] * c[k];
      D[p] = v[p] * s;
    }
  }
}

template <class V>
void csf_mttkrp(const CsfView<V>& T, index_t J, const V* B, const V* C, V* D, int threads) {
  const auto zero_rows = [D, J](index_t from, index_t to) {  // rows [from, to)
    if (from < to)
      std::fill(D + static_cast<std::size_t>(from) * J, D + static_cast<std::size_t>(to) * J, V(0));
  };
  if (T.slices == 0) zero_rows(0, T.rows);
#pragma omp parallel num_threads(threads)
  {
    // The fibre's sums start on a 64-byte line: malloc puts a 64-byte vector 16 bytes past one
    // as often as not, and then every nonzero's update of it straddled two lines (email_eu_core,
    // J = 16, AMD Zen 4 VM: 490-515 or 720-790 us, as one thread's vector or both straddled,
    // moving with whatever the heap held before, against 377-410 on a line; session 79).
    std::vector<V> storage(static_cast<std::size_t>(J) + 64 / sizeof(V));
    V* fibre = storage.data();
    while (reinterpret_cast<std::uintptr_t>(fibre) % 64 != 0) ++fibre;
#pragma omp for schedule(dynamic, kChunk)
    for (index_t s = 0; s < T.slices; ++s) {
      // The rows without a slice: those before this one (after the previous slice), and after
      // the last slice.
      zero_rows(s == 0 ? 0 : T.i_crd[s - 1] + 1, T.i_crd[s]);
      if (s + 1 == T.slices) zero_rows(T.i_crd[s] + 1, T.rows);
      V* d = D + static_cast<std::size_t>(T.i_crd[s]) * J;
      for (index_t j = 0; j < J; ++j) d[j] = 0;
      for (index_t f = T.k_pos[s]; f < T.k_pos[s + 1]; ++f) {
        std::fill(fibre, fibre + J, V(0));
        for (index_t e = T.l_pos[f]; e < T.l_pos[f + 1]; ++e) {
          const V a = T.val[e];
          const V* c = C + static_cast<std::size_t>(T.l_crd[e]) * J;
#pragma omp simd
          for (index_t j = 0; j < J; ++j) fibre[j] += a * c[j];
        }
        const V* b = B + static_cast<std::size_t>(T.k_crd[f]) * J;
#pragma omp simd
        for (index_t j = 0; j < J; ++j) d[j] += fibre[j] * b[j];
      }
    }
  }
}

#define WACO_BASELINE_LOOPS(V)                                                          \
  template void csr_spmv_rows<V>(const CsrView<V>&, const V*, V*, int);                 \
  template void csr_spmm<V>(const CsrView<V>&, index_t, const V*, V*, int);             \
  template void csr_sddmm<V>(const CsrView<V>&, index_t, const V*, const V*, V*, int);  \
  template void csf_mttkrp<V>(const CsfView<V>&, index_t, const V*, const V*, V*, int); \
  template void detail::csr_spmv_serial_rows<V>(const CsrView<V>&, const V*, V*);           \
  template const std::array<detail::SerialRows<V>, kSerialLoopCopies>& detail::csr_spmv_serial_copies<V>();
WACO_BASELINE_LOOPS(float)
WACO_BASELINE_LOOPS(double)
#undef WACO_BASELINE_LOOPS

namespace detail {
namespace {

/// V: the problem's value type (float or double).
template <class V>
class CsrBaseline final : public Implementation {
 public:
  void prepare(const Problem& p, int threads) override {
    p.validate();
    if (needs_tensor(p.kind)) throw Error("csr: mttkrp needs a tensor format", "use --impl csf");
    problem_ = p;
    threads_ = std::max(1, threads);
    const double t0 = now_seconds();
    // The CSR in the problem's value type straight from the canonical COO (to_csr's copy of the
    // values in double would double the peak: 256 MB beside 176 at 20M nonzeros in float).
    rows_ = p.A->rows;
    rowptr_ = row_pointers(*p.A);
    assign_huge(colidx_, p.A->col.begin(), p.A->col.end());
    assign_huge(val_, p.A->val.begin(), p.A->val.end());
    conversion_seconds_ = now_seconds() - t0;
    out_.assign(p.dtype(), static_cast<std::size_t>(p.output_size()));
    // SpMV's serial or parallel loop, decided on this matrix here: never in a timed call.
    spmv_threads_ = threads_;
    if (p.kind == KernelKind::SpMV &&
        csr_spmv_serial_for(view(), p.B->data.template data<V>(), out_.template data<V>(), threads_))
      spmv_threads_ = 1;
  }

  void run() override {
    switch (problem_.kind) {
      case KernelKind::SpMV: spmv(); break;
      case KernelKind::SpMM: spmm(); break;
      case KernelKind::SDDMM: sddmm(); break;
      case KernelKind::MTTKRP: break;
    }
  }

  const Values& output() const override { return out_; }

 private:
  CsrView<V> view() const { return {rows_, rowptr_.data(), colidx_.data(), val_.data()}; }

  void spmv() {
    csr_spmv_rows(view(), problem_.B->data.template data<V>(), out_.template data<V>(), spmv_threads_);
  }

  void spmm() {
    csr_spmm(view(), problem_.B->cols, problem_.B->data.template data<V>(),
             out_.template data<V>(), threads_);
  }

  void sddmm() {
    csr_sddmm(view(), problem_.B->cols, problem_.B->data.template data<V>(),
              problem_.C->data.template data<V>(), out_.template data<V>(), threads_);
  }

  Problem problem_;
  int threads_ = 1;
  int spmv_threads_ = 1;  ///< SpMV's: 1 (the serial loop) or threads_ (csr_spmv_serial_for)
  index_t rows_ = 0;
  std::vector<index_t> rowptr_, colidx_;
  std::vector<V> val_;
  Values out_;
};

/// CSF of an order-3 canonical tensor: i level (compressed), k fibres, l entries.
template <class V>
struct Csf3 {
  std::vector<index_t> i_crd;               ///< slice coordinates
  std::vector<index_t> k_pos, k_crd;        ///< per slice: fibres [k_pos[s], k_pos[s+1])
  std::vector<index_t> l_pos, l_crd;        ///< per fibre: entries [l_pos[f], l_pos[f+1])
  std::vector<V> val;
};

template <class V>
Csf3<V> build_csf(const CooTensor& t) {
  WACO_ASSERT(is_canonical(t), "csf needs a canonical tensor");
  Csf3<V> c;
  const std::int64_t n = t.nnz();
  c.l_crd = t.idx[2];
  c.val.assign(t.val.begin(), t.val.end());
  for (std::int64_t e = 0; e < n; ++e) {
    const bool new_slice = e == 0 || t.idx[0][e] != t.idx[0][e - 1];
    const bool new_fibre = new_slice || t.idx[1][e] != t.idx[1][e - 1];
    if (new_slice) {
      c.i_crd.push_back(t.idx[0][e]);
      c.k_pos.push_back(static_cast<index_t>(c.k_crd.size()));
    }
    if (new_fibre) {
      c.k_crd.push_back(t.idx[1][e]);
      c.l_pos.push_back(static_cast<index_t>(e));
    }
  }
  c.k_pos.push_back(static_cast<index_t>(c.k_crd.size()));
  c.l_pos.push_back(static_cast<index_t>(n));
  return c;
}

template <class V>
class CsfBaseline final : public Implementation {
 public:
  void prepare(const Problem& p, int threads) override {
    p.validate();
    if (!needs_tensor(p.kind))
      throw Error("csf: only mttkrp runs on a tensor format", "use --impl csr for matrices");
    problem_ = p;
    threads_ = std::max(1, threads);
    const double t0 = now_seconds();
    csf_ = build_csf<V>(*p.T);
    conversion_seconds_ = now_seconds() - t0;
    out_.assign(p.dtype(), static_cast<std::size_t>(p.output_size()));
  }

  void run() override {
    const CsfView<V> t{static_cast<index_t>(problem_.T->dims[0]),
                       static_cast<index_t>(csf_.i_crd.size()),
                       csf_.i_crd.data(),
                       csf_.k_pos.data(),
                       csf_.k_crd.data(),
                       csf_.l_pos.data(),
                       csf_.l_crd.data(),
                       csf_.val.data()};
    csf_mttkrp(t, problem_.B->cols, problem_.B->data.template data<V>(),
               problem_.C->data.template data<V>(), out_.template data<V>(), threads_);
  }

  const Values& output() const override { return out_; }

 private:
  Problem problem_;
  int threads_ = 1;
  Csf3<V> csf_;
  Values out_;
};

}  // namespace

std::unique_ptr<Implementation> make_csr() { return make_by_value_type<CsrBaseline>(); }
std::unique_ptr<Implementation> make_csf() { return make_by_value_type<CsfBaseline>(); }

}  // namespace detail
}  // namespace waco::kernels
