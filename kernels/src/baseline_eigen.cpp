// The `eigen` baseline: Eigen 3's own sparse x dense products, as an application that already uses
// Eigen would call them. The operand is an Eigen::SparseMatrix<V, RowMajor, int> (Eigen's CSR; V the problem's float or double),
// built directly from the canonical COO in O(nnz + rows) (no sort, no setFromTriplets); the dense
// operands and the output are wrapped with Eigen::Map, so run() copies nothing.
//
// Parallelism: for a row-major sparse left-hand side Eigen runs the rows in an OpenMP loop with
// `num_threads(Eigen::nbThreads())`, schedule(dynamic, rows / (4 threads)), but only when
// nnz * (dense columns) > 20000 (its threshold, SparseDenseProduct.h); below that it is serial.
// Eigen::nbThreads() is process-global state, so run() sets it before every product.
// Supports SpMV and SpMM only.
#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <algorithm>
#include <string>
#include <vector>

#include "baselines.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::kernels::detail {
namespace {

template <class V>
using EigenCsr = Eigen::SparseMatrix<V, Eigen::RowMajor, index_t>;
template <class V>
using RowMajorMatrix = Eigen::Matrix<V, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class V>
using Vector = Eigen::Matrix<V, Eigen::Dynamic, 1>;

/// Eigen's CSR of a canonical COO matrix: row counts -> prefix sums; the canonical order is
/// already the CSR order, so columns and values are copied as they are.
template <class V>
EigenCsr<V> to_eigen_csr(const CooMatrix& a) {
  EigenCsr<V> m(a.rows, a.cols);
  const std::int64_t nnz = a.nnz();
  m.resizeNonZeros(static_cast<Eigen::Index>(nnz));
  index_t* outer = m.outerIndexPtr();
  std::fill(outer, outer + a.rows + 1, 0);
  for (std::int64_t e = 0; e < nnz; ++e) ++outer[a.row[e] + 1];
  for (index_t i = 0; i < a.rows; ++i) outer[i + 1] += outer[i];
  std::copy(a.col.begin(), a.col.end(), m.innerIndexPtr());
  std::copy(a.val.begin(), a.val.end(), m.valuePtr());
  return m;
}

template <class V>
class EigenImplementation final : public Implementation {
 public:
  void prepare(const Problem& p, int threads) override {
    if (p.kind != KernelKind::SpMV && p.kind != KernelKind::SpMM) {
      throw Error("eigen: kernel " + std::string(kernel_name(p.kind)) + " is not supported",
                  "eigen implements spmv and spmm only; use --impl csr");
    }
    if (threads < 1) {
      throw Error("eigen: thread count " + std::to_string(threads) + " is invalid",
                  "give --threads 1 or more");
    }
    p.validate();
    WACO_ASSERT(is_canonical(*p.A), "eigen: the Problem's sparse operand must be canonical");
    WACO_ASSERT(p.B->layout == Layout::RowMajor || p.B->cols == 1,
                "eigen: B must be row-major (kernel.hpp layouts)");

    kind_ = p.kind;
    threads_ = threads;
    b_ = p.B;
    dense_ = p.kind == KernelKind::SpMM ? p.dense_size() : 1;

    const double t0 = now_seconds();
    a_ = to_eigen_csr<V>(*p.A);
    conversion_seconds_ = now_seconds() - t0;
    tuning_seconds_ = 0.0;

    out_.assign(p.dtype(), static_cast<std::size_t>(p.output_size()));
    WACO_ASSERT(
        static_cast<std::int64_t>(out_.size()) == static_cast<std::int64_t>(a_.rows()) * dense_,
        "eigen: output size does not match rows x dense size");
  }

  void run() override {
    WACO_ASSERT(b_ != nullptr, "eigen: run() before prepare()");
    Eigen::setNbThreads(threads_);
    if (kind_ == KernelKind::SpMV) {
      Eigen::Map<const Vector<V>> x(b_->data.template data<V>(), a_.cols());
      Eigen::Map<Vector<V>> y(out_.template data<V>(), a_.rows());
      y.noalias() = a_ * x;
    } else {
      Eigen::Map<const RowMajorMatrix<V>> b(b_->data.template data<V>(), a_.cols(), dense_);
      Eigen::Map<RowMajorMatrix<V>> c(out_.template data<V>(), a_.rows(), dense_);
      c.noalias() = a_ * b;
    }
  }

  const Values& output() const override { return out_; }

 private:
  KernelKind kind_ = KernelKind::SpMV;
  int threads_ = 1;
  const DenseMatrix* b_ = nullptr;  // x (SpMV) or B (SpMM), owned by the caller of prepare()
  Eigen::Index dense_ = 1;          // J (SpMM) or 1
  EigenCsr<V> a_;
  Values out_;
};

}  // namespace

std::unique_ptr<Implementation> make_eigen() { return make_by_value_type<EigenImplementation>(); }

}  // namespace waco::kernels::detail
