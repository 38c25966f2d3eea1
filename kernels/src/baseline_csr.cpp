// The fixed baselines every tuned kernel is compared with: CSR with rows in parallel (TACO's
// default schedule, "FixedCSR" in the WACO paper, section 6.1) and, for MTTKRP, the same idea over
// CSF (compressed i, k, l). OpenMP dynamic scheduling with the chunk sizes of issue 2: 128 rows for
// SpMV, 32 for SpMM, SDDMM and MTTKRP.
#include <omp.h>

#include <algorithm>

#include "baselines.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::kernels::detail {
namespace {

constexpr int kSpmvChunk = 128;
constexpr int kChunk = 32;

class CsrBaseline final : public Implementation {
 public:
  void prepare(const Problem& p, int threads) override {
    p.validate();
    if (needs_tensor(p.kind)) throw Error("csr: mttkrp needs a tensor format", "use --impl csf");
    problem_ = p;
    threads_ = std::max(1, threads);
    const double t0 = now_seconds();
    csr_ = to_csr(*p.A);
    conversion_seconds_ = now_seconds() - t0;
    out_.assign(static_cast<std::size_t>(p.output_size()), 0.0f);
  }

  void run() override {
    switch (problem_.kind) {
      case KernelKind::SpMV: spmv(); break;
      case KernelKind::SpMM: spmm(); break;
      case KernelKind::SDDMM: sddmm(); break;
      case KernelKind::MTTKRP: break;
    }
  }

  const AlignedFloats& output() const override { return out_; }

 private:
  void spmv() {
    const index_t* rp = csr_.rowptr.data();
    const index_t* ci = csr_.colidx.data();
    const float* v = csr_.val.data();
    const float* x = problem_.B->data.data();
    float* y = out_.data();
#pragma omp parallel for num_threads(threads_) schedule(dynamic, kSpmvChunk)
    for (index_t i = 0; i < csr_.rows; ++i) {
      float s = 0.0f;
      for (index_t p = rp[i]; p < rp[i + 1]; ++p) s += v[p] * x[ci[p]];
      y[i] = s;
    }
  }

  void spmm() {
    const index_t* rp = csr_.rowptr.data();
    const index_t* ci = csr_.colidx.data();
    const float* v = csr_.val.data();
    const index_t J = problem_.B->cols;
    const float* B = problem_.B->data.data();
    float* C = out_.data();
#pragma omp parallel for num_threads(threads_) schedule(dynamic, kChunk)
    for (index_t i = 0; i < csr_.rows; ++i) {
      float* c = C + static_cast<std::size_t>(i) * J;
      for (index_t j = 0; j < J; ++j) c[j] = 0.0f;
      for (index_t p = rp[i]; p < rp[i + 1]; ++p) {
        const float a = v[p];
        const float* b = B + static_cast<std::size_t>(ci[p]) * J;
#pragma omp simd
        for (index_t j = 0; j < J; ++j) c[j] += a * b[j];
      }
    }
  }

  void sddmm() {
    const index_t* rp = csr_.rowptr.data();
    const index_t* ci = csr_.colidx.data();
    const float* v = csr_.val.data();
    const index_t K = problem_.B->cols;
    const float* B = problem_.B->data.data();  // rows x K, row-major
    const float* C = problem_.C->data.data();  // K x cols, column-major: column j contiguous
    float* D = out_.data();
#pragma omp parallel for num_threads(threads_) schedule(dynamic, kChunk)
    for (index_t i = 0; i < csr_.rows; ++i) {
      const float* b = B + static_cast<std::size_t>(i) * K;
      for (index_t p = rp[i]; p < rp[i + 1]; ++p) {
        const float* c = C + static_cast<std::size_t>(ci[p]) * K;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (index_t k = 0; k < K; ++k) s += b[k] * c[k];
        D[p] = v[p] * s;
      }
    }
  }

  Problem problem_;
  int threads_ = 1;
  CsrMatrix csr_;
  AlignedFloats out_;
};

/// CSF of an order-3 canonical tensor: i level (compressed), k fibres, l entries.
struct Csf3 {
  std::vector<index_t> i_crd;               ///< slice coordinates
  std::vector<index_t> k_pos, k_crd;        ///< per slice: fibres [k_pos[s], k_pos[s+1])
  std::vector<index_t> l_pos, l_crd;        ///< per fibre: entries [l_pos[f], l_pos[f+1])
  std::vector<float> val;
};

Csf3 build_csf(const CooTensor& t) {
  WACO_ASSERT(is_canonical(t), "csf needs a canonical tensor");
  Csf3 c;
  const std::int64_t n = t.nnz();
  c.l_crd = t.idx[2];
  c.val = t.val;
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

class CsfBaseline final : public Implementation {
 public:
  void prepare(const Problem& p, int threads) override {
    p.validate();
    if (!needs_tensor(p.kind))
      throw Error("csf: only mttkrp runs on a tensor format", "use --impl csr for matrices");
    problem_ = p;
    threads_ = std::max(1, threads);
    const double t0 = now_seconds();
    csf_ = build_csf(*p.T);
    conversion_seconds_ = now_seconds() - t0;
    // Rows of D with no slice stay zero; run() overwrites every row that has one.
    out_.assign(static_cast<std::size_t>(p.output_size()), 0.0f);
  }

  void run() override {
    const index_t J = problem_.B->cols;
    const float* B = problem_.B->data.data();
    const float* C = problem_.C->data.data();
    float* D = out_.data();
    const index_t slices = static_cast<index_t>(csf_.i_crd.size());
#pragma omp parallel num_threads(threads_)
    {
      std::vector<float> fibre(static_cast<std::size_t>(J));
#pragma omp for schedule(dynamic, kChunk)
      for (index_t s = 0; s < slices; ++s) {
        float* d = D + static_cast<std::size_t>(csf_.i_crd[s]) * J;
        for (index_t j = 0; j < J; ++j) d[j] = 0.0f;
        for (index_t f = csf_.k_pos[s]; f < csf_.k_pos[s + 1]; ++f) {
          std::fill(fibre.begin(), fibre.end(), 0.0f);
          for (index_t e = csf_.l_pos[f]; e < csf_.l_pos[f + 1]; ++e) {
            const float a = csf_.val[e];
            const float* c = C + static_cast<std::size_t>(csf_.l_crd[e]) * J;
#pragma omp simd
            for (index_t j = 0; j < J; ++j) fibre[j] += a * c[j];
          }
          const float* b = B + static_cast<std::size_t>(csf_.k_crd[f]) * J;
#pragma omp simd
          for (index_t j = 0; j < J; ++j) d[j] += fibre[j] * b[j];
        }
      }
    }
  }

  const AlignedFloats& output() const override { return out_; }

 private:
  Problem problem_;
  int threads_ = 1;
  Csf3 csf_;
  AlignedFloats out_;
};

}  // namespace

std::unique_ptr<Implementation> make_csr() { return std::make_unique<CsrBaseline>(); }
std::unique_ptr<Implementation> make_csf() { return std::make_unique<CsfBaseline>(); }

}  // namespace waco::kernels::detail
