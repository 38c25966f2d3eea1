// Factories of the baseline implementations (private to waco_kernels; the registry in
// implementations.cpp is the public way to reach them).
#pragma once

#include <array>
#include <memory>

#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/implementation.hpp"
#include "waco/kernels/serial_bound.hpp"

namespace waco::kernels::detail {

/// An implementation whose value type is chosen by the first problem it prepares: the baselines
/// are templates over float and double, and a registry entry makes one before it sees a problem.
template <template <class> class Impl>
class ByValueType final : public Implementation {
 public:
  void prepare(const Problem& p, int threads) override {
    if (!impl_ || dtype_ != p.dtype()) {
      impl_ = with_value_type(p.dtype(), [](auto v) -> std::unique_ptr<Implementation> {
        return std::make_unique<Impl<decltype(v)>>();
      });
      dtype_ = p.dtype();
    }
    impl_->prepare(p, threads);
    conversion_seconds_ = impl_->conversion_seconds();
    tuning_seconds_ = impl_->tuning_seconds();
  }
  void run() override { impl_->run(); }
  const Values& output() const override { return impl_->output(); }

 private:
  std::unique_ptr<Implementation> impl_;
  Dtype dtype_ = Dtype::F32;
};

template <template <class> class Impl>
std::unique_ptr<Implementation> make_by_value_type() {
  return std::make_unique<ByValueType<Impl>>();
}

/// The csr SpMV baseline's two loops (the serial one in baseline_csr.cpp, the parallel one in
/// baseline_csr_parallel.cpp: other alignment flags), which csr_spmv_rows runs as decided;
/// the bound's probe and csr_spmv_serial_for (serial_bound.cpp) time these very loops. Never
/// loop-vectorized: GCC 12 made the f32 row sum gathers of 16 and 16 in-order adds,
/// 1.4-1.6x the time of the scalar loop (AMD EPYC Zen 5 VM; kernels/README.md, "The row sum").
#if defined(__GNUC__) && !defined(__clang__)
#define WACO_CSR_ROW_SUM_LOOP __attribute__((noinline, optimize("no-tree-vectorize")))
#else
#define WACO_CSR_ROW_SUM_LOOP __attribute__((noinline))
#endif
/// Row i of y = A x: the row sum both loops inline.
template <class V>
inline V csr_spmv_row(const index_t* rp, const index_t* ci, const V* v, const V* x, index_t i) {
  V s = 0;
  for (index_t p = rp[i]; p < rp[i + 1]; ++p) s += v[p] * x[ci[p]];
  return s;
}
/// The serial loop: the copy of it chosen for this machine (csr_spmv_serial_copies,
/// csr_spmv_serial_copy in serial_bound.hpp).
template <class V>
void csr_spmv_serial_rows(const CsrView<V>& A, const V* x, V* y);
/// The serial loop's kSerialLoopCopies copies: the same instructions, copy c after c x
/// kSerialLoopCopyStep bytes of no-ops run once a call, so that its inner loop lies at another
/// offset in its 64-byte lines (serial_bound.hpp says why).
template <class V>
using SerialRows = void (*)(const CsrView<V>&, const V*, V*);
template <class V>
const std::array<SerialRows<V>, kSerialLoopCopies>& csr_spmv_serial_copies();
template <class V>
WACO_CSR_ROW_SUM_LOOP void csr_spmv_parallel_rows(const CsrView<V>& A, const V* x, V* y, int threads);

/// csr: CSR rows in parallel, OpenMP dynamic (SpMV: ~4 chunks a thread of >= 128 rows, as Eigen;
/// SpMM/SDDMM: chunk 32); TACO's default loops. A small SpMV (the serial bound: serial_bound.hpp)
/// runs serially.
std::unique_ptr<Implementation> make_csr();
/// csf: MTTKRP over CSF (compressed i, k, l), slices in parallel, dynamic chunk 32.
std::unique_ptr<Implementation> make_csf();
/// eigen: Eigen::SparseMatrix<V, RowMajor> (V float or double) times a vector / row-major dense matrix.
std::unique_ptr<Implementation> make_eigen();
/// dia: SpMV over diagonal storage (the diagonals holding a nonzero, each `rows` values long);
/// refuses a matrix whose diagonals store more than kDiaMaxFill values a nonzero.
std::unique_ptr<Implementation> make_dia();
/// True when this build has librsb.
bool have_rsb();
/// rsb (tuned = false) and rsb-tuned (tuned = true: librsb's own autotuner, time reported as
/// tuning_seconds). Throws Error when built without librsb.
std::unique_ptr<Implementation> make_rsb(bool tuned);

}  // namespace waco::kernels::detail
