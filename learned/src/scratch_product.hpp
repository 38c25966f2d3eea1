// Eigen's blocked matrix product on one thread, with its packed panels in memory the caller
// holds (the lite cost model's Workspace, on a huge page) instead of the stack or the heap.
//
// Why: Eigen packs each operand's panels into buffers of up to ~128 KiB, on the stack when they
// fit, else from malloc, for every product. In a process's first choice those are fresh pages:
// on the Zen 5 VMs (paravirtualized page tables) ~20 us each, 57 of the 77 page faults of the
// first nominate (perf record -e minor-faults -d: Eigen's gemm_pack_lhs / gemm_pack_rhs on the
// stack and the heap), ~1.1 ms of a 2 ms step that takes 0.45 ms the second time.
//
// How: the same steps as Eigen 3.4's generic_product_impl<..., GemmProduct>::evalTo with its
// serial path (the blocking sizes Eigen computes, the same packing and kernel), the buffers
// handed to Eigen's blocking object. So the result is Eigen's bit for bit
// (tests/test_scratch_product.cpp). Where Eigen would not run the blocked product on one thread
// (a small product it evaluates coefficient by coefficient, a vector, a product it splits over
// threads), or with another Eigen version, it does nothing and says so: the caller evaluates the
// product as usual.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>

namespace waco::learned::detail {

/// Memory for Eigen's packed panels: `floats` floats at `data` (64-byte aligned), or none.
struct PackScratch {
  float* data = nullptr;
  std::size_t floats = 0;
};

/// Floats of PackScratch that a product [rows x depth] * [depth x cols] uses at most.
inline std::size_t pack_floats(std::size_t rows, std::size_t cols, std::size_t depth) {
  return depth * (rows + cols) + 32;  // two panels, each start rounded to 64 bytes
}

#if EIGEN_VERSION_AT_LEAST(3, 4, 0) && !EIGEN_VERSION_AT_LEAST(3, 4, 90)
#define WACO_SCRATCH_PRODUCT 1
#endif

/// dst = lhs * rhs (dst aliases neither), float, as Eigen computes it, with the packed panels
/// in `scratch`. Returns false, having written nothing, where that is not what Eigen would run
/// (see above) or `scratch` is too small.
template <class Dst, class Lhs, class Rhs>
bool product_in_scratch(Dst& dst, const Lhs& a_lhs, const Rhs& a_rhs, PackScratch scratch) {
#ifdef WACO_SCRATCH_PRODUCT
  using namespace Eigen;
  using namespace Eigen::internal;
  using Impl = generic_product_impl<Lhs, Rhs, DenseShape, DenseShape, GemmProduct>;
  using Scalar = typename Impl::Scalar;
  const Index rows = a_lhs.rows(), cols = a_rhs.cols(), depth = a_lhs.cols();
  // evalTo's coefficient-based small products; scaleAndAddTo's empty and vector cases.
  if (rows + cols + depth < EIGEN_GEMM_TO_COEFFBASED_THRESHOLD || rows <= 1 || cols <= 1 || depth == 0)
    return false;

  using ActualLhs = typename add_const_on_value_type<typename Impl::ActualLhsType>::type;
  using ActualRhs = typename add_const_on_value_type<typename Impl::ActualRhsType>::type;
  using BlockingBase =
      gemm_blocking_space<(Dst::Flags & RowMajorBit) ? RowMajor : ColMajor, typename Impl::LhsScalar,
                          typename Impl::RhsScalar, Dst::MaxRowsAtCompileTime, Dst::MaxColsAtCompileTime,
                          Impl::MaxDepthAtCompileTime>;
  /// Eigen's blocking with its buffers in the scratch (never freed by it).
  struct Blocking : BlockingBase {
    Blocking(Index r, Index c, Index d) : BlockingBase(r, c, d, 1, true) {}
    bool place(PackScratch s) {
      const auto a = static_cast<std::size_t>(this->mc() * this->kc());
      const auto b = static_cast<std::size_t>(this->kc() * this->nc());
      const std::size_t a_room = (a + 15) / 16 * 16;
      if (s.data == nullptr || a_room + b > s.floats) return false;
      this->m_blockA = s.data;
      this->m_blockB = s.data + a_room;
      return true;
    }
    ~Blocking() {
      this->m_blockA = nullptr;
      this->m_blockB = nullptr;
    }
  };
  using GemmFunctor = gemm_functor<
      Scalar, Index,
      general_matrix_matrix_product<
          Index, typename Impl::LhsScalar,
          (Impl::ActualLhsTypeCleaned::Flags & RowMajorBit) ? RowMajor : ColMajor,
          bool(Impl::LhsBlasTraits::NeedToConjugate), typename Impl::RhsScalar,
          (Impl::ActualRhsTypeCleaned::Flags & RowMajorBit) ? RowMajor : ColMajor,
          bool(Impl::RhsBlasTraits::NeedToConjugate), (Dst::Flags & RowMajorBit) ? RowMajor : ColMajor,
          Dst::InnerStrideAtCompileTime>,
      typename Impl::ActualLhsTypeCleaned, typename Impl::ActualRhsTypeCleaned, Dst, Blocking>;

  // parallelize_gemm's choice: Eigen runs the product on one thread (with these blocking sizes)
  // when its heuristics give one thread or the caller is inside a parallel region; otherwise it
  // splits it with other sizes, which is left to Eigen.
#if defined(EIGEN_HAS_OPENMP) && !defined(EIGEN_USE_BLAS)
  const bool transpose = (Dst::Flags & RowMajorBit) != 0;
  const Index size = transpose ? rows : cols;
  Index threads = std::max<Index>(1, size / GemmFunctor::Traits::nr);
  const double work = static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(depth);
  threads = std::max<Index>(1, std::min<Index>(threads, static_cast<Index>(work / 50000)));
  threads = std::min<Index>(Eigen::nbThreads(), threads);
  const bool parallel = (Dst::MaxRowsAtCompileTime > 32 || Dst::MaxRowsAtCompileTime == Dynamic) &&
                        threads > 1 && omp_get_num_threads() <= 1;
  if (parallel) return false;
#endif

  ActualLhs lhs = Impl::LhsBlasTraits::extract(a_lhs);
  ActualRhs rhs = Impl::RhsBlasTraits::extract(a_rhs);
  const Scalar alpha = combine_scalar_factors(Scalar(1), a_lhs, a_rhs);
  Blocking blocking(dst.rows(), dst.cols(), lhs.cols());
  if (!blocking.place(scratch)) return false;
  dst.setZero();
  GemmFunctor(lhs, rhs, dst, alpha, blocking)(0, rows, 0, cols);
  return true;
#else
  (void)dst, (void)a_lhs, (void)a_rhs, (void)scratch;
  return false;
#endif
}

}  // namespace waco::learned::detail
