// The fixed baselines every tuned kernel is compared with: CSR with rows in parallel (TACO's
// default schedule, "FixedCSR" in the WACO paper, section 6.1) and, for MTTKRP, the same idea over
// CSF (compressed i, k, l). OpenMP dynamic scheduling with the chunk sizes of issue 2: 128 rows for
// SpMV, 32 for SpMM, SDDMM and MTTKRP; an SpMV of at most kSpmvSerialNnz nonzeros runs serially.
#include <omp.h>

#include <algorithm>

#include "baselines.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::kernels::detail {
namespace {

constexpr int kSpmvChunk = 128;
constexpr int kChunk = 32;
/// SpMV of at most this many nonzeros (or on one thread) runs its rows serially, without an
/// OpenMP region. Eigen does the same below 20000 (SparseDenseProduct.h), and csr's f64 SpMV ran
/// at 0.78-0.90x Eigen's speed on 494_bus (1666 nonzeros) and west0479 (1910), though in double
/// the inner loops are the same instructions (movslq, vmovsd, vmulsd, vaddsd): the region's
/// fork, join and dynamic dispatch cost more than such a product (0.3 us on one thread; on two,
/// 0.2-0.35 us above a serial loop of 0.8-1.0 us). Measured (2 threads, AMD EPYC VM, median of 2
/// runs of 40 rounds, us, f64 then f32): the serial loop (Eigen's) against csr's parallel one
/// 0.81 / 1.00 and 1.01 / 1.16 (494_bus), 0.97 / 1.31 and 1.35 / 1.64 (lund_a, 2449), 1.14 /
/// 1.16 and 1.47 / 1.34 (Erdos971, 2628), 1.60 / 1.40 and 2.01 / 1.67 (qh882, 3354): the
/// crossover lies near 3000 in both types. The parallel loop's instructions are unchanged.
constexpr std::int64_t kSpmvSerialNnz = 3072;

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
    const CsrMatrix csr = to_csr(*p.A);
    rows_ = csr.rows;
    rowptr_ = csr.rowptr;
    colidx_ = csr.colidx;
    val_.assign(csr.val.begin(), csr.val.end());
    conversion_seconds_ = now_seconds() - t0;
    out_.assign(p.dtype(), static_cast<std::size_t>(p.output_size()));
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
  void spmv() {
    const index_t* rp = rowptr_.data();
    const index_t* ci = colidx_.data();
    const V* v = val_.data();
    const V* x = problem_.B->data.template data<V>();
    V* y = out_.template data<V>();
    if (threads_ == 1 || static_cast<std::int64_t>(colidx_.size()) <= kSpmvSerialNnz) {
      for (index_t i = 0; i < rows_; ++i) y[i] = spmv_row(rp, ci, v, x, i);
      return;
    }
#pragma omp parallel for num_threads(threads_) schedule(dynamic, kSpmvChunk)
    for (index_t i = 0; i < rows_; ++i) y[i] = spmv_row(rp, ci, v, x, i);
  }

  /// Row i of y = A x.
  static V spmv_row(const index_t* rp, const index_t* ci, const V* v, const V* x, index_t i) {
    V s = 0;
    for (index_t p = rp[i]; p < rp[i + 1]; ++p) s += v[p] * x[ci[p]];
    return s;
  }

  void spmm() {
    const index_t* rp = rowptr_.data();
    const index_t* ci = colidx_.data();
    const V* v = val_.data();
    const index_t J = problem_.B->cols;
    const V* B = problem_.B->data.template data<V>();
    V* C = out_.template data<V>();
#pragma omp parallel for num_threads(threads_) schedule(dynamic, kChunk)
    for (index_t i = 0; i < rows_; ++i) {
      V* c = C + static_cast<std::size_t>(i) * J;
      for (index_t j = 0; j < J; ++j) c[j] = 0;
      for (index_t p = rp[i]; p < rp[i + 1]; ++p) {
        const V a = v[p];
        const V* b = B + static_cast<std::size_t>(ci[p]) * J;
#pragma omp simd
        for (index_t j = 0; j < J; ++j) c[j] += a * b[j];
      }
    }
  }

  void sddmm() {
    const index_t* rp = rowptr_.data();
    const index_t* ci = colidx_.data();
    const V* v = val_.data();
    const index_t K = problem_.B->cols;
    const V* B = problem_.B->data.template data<V>();  // rows x K, row-major
    const V* C = problem_.C->data.template data<V>();  // K x cols, column-major: column j contiguous
    V* D = out_.template data<V>();
#pragma omp parallel for num_threads(threads_) schedule(dynamic, kChunk)
    for (index_t i = 0; i < rows_; ++i) {
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

  Problem problem_;
  int threads_ = 1;
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
    // Rows of D with no slice stay zero; run() overwrites every row that has one.
    out_.assign(p.dtype(), static_cast<std::size_t>(p.output_size()));
  }

  void run() override {
    const index_t J = problem_.B->cols;
    const V* B = problem_.B->data.template data<V>();
    const V* C = problem_.C->data.template data<V>();
    V* D = out_.template data<V>();
    const index_t slices = static_cast<index_t>(csf_.i_crd.size());
#pragma omp parallel num_threads(threads_)
    {
      std::vector<V> fibre(static_cast<std::size_t>(J));
#pragma omp for schedule(dynamic, kChunk)
      for (index_t s = 0; s < slices; ++s) {
        V* d = D + static_cast<std::size_t>(csf_.i_crd[s]) * J;
        for (index_t j = 0; j < J; ++j) d[j] = 0;
        for (index_t f = csf_.k_pos[s]; f < csf_.k_pos[s + 1]; ++f) {
          std::fill(fibre.begin(), fibre.end(), V(0));
          for (index_t e = csf_.l_pos[f]; e < csf_.l_pos[f + 1]; ++e) {
            const V a = csf_.val[e];
            const V* c = C + static_cast<std::size_t>(csf_.l_crd[e]) * J;
#pragma omp simd
            for (index_t j = 0; j < J; ++j) fibre[j] += a * c[j];
          }
          const V* b = B + static_cast<std::size_t>(csf_.k_crd[f]) * J;
#pragma omp simd
          for (index_t j = 0; j < J; ++j) d[j] += fibre[j] * b[j];
        }
      }
    }
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

}  // namespace waco::kernels::detail
