// Unit "reference": the oracle itself, checked by hand on tiny inputs, and verify().
#include <catch2/catch.hpp>

#include <cmath>

#include "support/edge_cases.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/reference.hpp"

using namespace waco::kernels;
using waco::test::from_triplets;

namespace {
DenseMatrix dense(index_t r, index_t c, Layout l, std::vector<float> row_major) {
  DenseMatrix m(r, c, l);
  for (index_t i = 0; i < r; ++i)
    for (index_t j = 0; j < c; ++j) m.set(i, j, row_major[static_cast<std::size_t>(i) * c + j]);
  return m;
}
std::vector<double> scales(const Reference& r) {
  std::vector<double> s;
  for (std::size_t e = 0; e < r.scale.size(); ++e) s.push_back(r.scale_at(e));
  return s;
}
}  // namespace

// A = [[1 0 2], [0 0 0], [0 3 0]]
TEST_CASE("reference: spmv, spmm, sddmm by hand") {
  const CooMatrix A = from_triplets(3, 3, {0, 0, 2}, {0, 2, 1}, {1.f, 2.f, 3.f});
  DenseOperands ops;
  ops.B = dense(3, 1, Layout::RowMajor, {1.f, 2.f, 3.f});
  Problem p = make_problem(KernelKind::SpMV, &A, nullptr, ops);
  Reference r = compute_reference(p);
  CHECK(r.value.to_doubles() == std::vector<double>{7.0, 0.0, 6.0});
  CHECK(scales(r) == std::vector<double>{7.0, 0.0, 6.0});

  ops.B = dense(3, 2, Layout::RowMajor, {1.f, -1.f, 2.f, 0.f, 3.f, 1.f});
  p = make_problem(KernelKind::SpMM, &A, nullptr, ops);
  r = compute_reference(p);
  CHECK(r.value.to_doubles() == std::vector<double>{7.0, 1.0, 0.0, 0.0, 6.0, 0.0});
  CHECK(scales(r) == std::vector<double>{7.0, 3.0, 0.0, 0.0, 6.0, 0.0});

  // SDDMM with K = 2: D[i,j] = A[i,j] * sum_k B[i,k] C[k,j]
  ops.B = dense(3, 2, Layout::RowMajor, {1.f, 2.f, 0.f, 0.f, -1.f, 1.f});
  ops.C = dense(2, 3, Layout::ColMajor, {1.f, 0.f, 3.f, 1.f, 2.f, -1.f});
  p = make_problem(KernelKind::SDDMM, &A, nullptr, ops);
  r = compute_reference(p);
  // (0,0): 1*(1*1 + 2*1) = 3; (0,2): 2*(1*3 + 2*-1) = 2; (2,1): 3*(-1*0 + 1*2) = 6
  CHECK(r.value.to_doubles() == std::vector<double>{3.0, 2.0, 6.0});
  CHECK(p.output_size() == 3);
  CHECK(p.flops() == 3 * (2 * 2 + 1));
}

TEST_CASE("reference: mttkrp by hand") {
  CooTensor T;
  T.dims = {2, 2, 2};
  T.idx = {{0, 0, 1}, {0, 1, 1}, {1, 0, 1}};
  T.val = {1.f, 2.f, 3.f};
  canonicalize(T);
  DenseOperands ops;
  ops.B = dense(2, 2, Layout::RowMajor, {1.f, 2.f, 3.f, 4.f});
  ops.C = dense(2, 2, Layout::RowMajor, {1.f, 0.f, 2.f, 1.f});
  const Problem p = make_problem(KernelKind::MTTKRP, nullptr, &T, ops);
  const Reference r = compute_reference(p);
  // D[0,:] = 1*B[0,:]*C[1,:] + 2*B[1,:]*C[0,:] = (2,2) + (6,0) = (8, 2)
  // D[1,:] = 3*B[1,:]*C[1,:] = (18, 12)
  CHECK(r.value.to_doubles() == std::vector<double>{8.0, 2.0, 18.0, 12.0});
}

TEST_CASE("reference: verify accepts rounding, rejects wrong values, NaN and size mismatch") {
  const std::vector<double> value = {1.0, -2.0, 0.0}, scale = {1.0, 4.0, 0.0};
  const Reference r = make_reference(Dtype::F64, value, scale);
  const std::vector<float> good = {1.00001f, -2.0f, 0.0f};
  Verification v = verify(good.data(), 3, r);
  CHECK(v.ok);
  CHECK(v.max_rel_error < 1e-4);

  const std::vector<float> bad = {1.0f, -1.9f, 0.0f};
  v = verify(bad.data(), 3, r);
  CHECK_FALSE(v.ok);
  CHECK(v.worst_index == 1);
  CHECK(v.message.find("entry 1") != std::string::npos);

  const std::vector<float> nonzero_where_zero = {1.0f, -2.0f, 1e-3f};
  CHECK_FALSE(verify(nonzero_where_zero.data(), 3, r).ok);

  const std::vector<float> nan = {NAN, -2.0f, 0.0f};
  CHECK_FALSE(verify(nan.data(), 3, r).ok);

  CHECK_FALSE(verify(good.data(), 2, r).ok);

  // A float reference (a single-precision problem's) judges alike.
  const Reference f = make_reference(Dtype::F32, value, scale);
  CHECK(verify(good.data(), 3, f).ok);
  CHECK(verify(bad.data(), 3, f).worst_index == 1);
  CHECK_FALSE(verify(nonzero_where_zero.data(), 3, f).ok);
  CHECK_FALSE(verify(nan.data(), 3, f).ok);
}

TEST_CASE("reference: stored in the problem's value type, summed in double") {
  // Row 0: 1 + 1e-8 + 1e-8 - 1: float accumulation loses the small terms, double keeps them.
  const CooMatrix A = from_triplets(2, 4, {0, 0, 0, 0}, {0, 1, 2, 3}, {1.f, 1e-8f, 1e-8f, -1.f});
  DenseOperands ops;
  ops.B = dense(4, 1, Layout::RowMajor, {1.f, 1.f, 1.f, 1.f});
  const Reference f = compute_reference(make_problem(KernelKind::SpMV, &A, nullptr, ops));
  CHECK(f.value.dtype() == Dtype::F32);
  CHECK(f.value[0] == Approx(2e-8).epsilon(1e-6));
  CHECK(f.value[1] == 0.0);  // an empty row
  DenseOperands wide = make_dense_operands(KernelKind::SpMV, &A, nullptr, 1, 1, Dtype::F64);
  for (index_t k = 0; k < 4; ++k) wide.B.set(k, 0, 1.0);
  const Reference d = compute_reference(make_problem(KernelKind::SpMV, &A, nullptr, wide));
  CHECK(d.value.dtype() == Dtype::F64);
  CHECK(d.value[0] == Approx(2e-8).epsilon(1e-6));
  // A float scale beyond float's range saturates: a tolerance times infinity would pass any
  // output.
  const CooMatrix big = from_triplets(1, 2, {0, 0}, {0, 1}, {3e38f, -3e38f});
  DenseOperands two;
  two.B = dense(2, 1, Layout::RowMajor, {1.f, 1.f});
  const Reference s = compute_reference(make_problem(KernelKind::SpMV, &big, nullptr, two));
  CHECK(std::isfinite(s.scale_at(0)));
  CHECK(s.value[0] == 0.0);
  const std::vector<float> wrong = {1e36f};
  CHECK_FALSE(verify(wrong.data(), 1, s).ok);
}

TEST_CASE("reference: dense operand shapes follow the kernel") {
  const CooMatrix A = from_triplets(5, 7, {0, 4}, {6, 0}, {1.f, 1.f});
  DenseOperands d = make_dense_operands(KernelKind::SDDMM, &A, nullptr, 3, 1);
  CHECK(d.B.rows == 5);
  CHECK(d.B.cols == 3);
  CHECK(d.B.layout == Layout::RowMajor);
  CHECK(d.C.rows == 3);
  CHECK(d.C.cols == 7);
  CHECK(d.C.layout == Layout::ColMajor);
  d = make_dense_operands(KernelKind::SpMM, &A, nullptr, 4, 1);
  CHECK(d.B.rows == 7);
  CHECK(d.B.cols == 4);
}

TEST_CASE("reference: scales in 16 bits round up, never stricter, slightly more lenient") {
  // Exact in both: small integers, powers of two, zero.
  for (double x : {0.0, 1.0, 7.0, 6.0, 0.5, 1024.0}) {
    CHECK(static_cast<double>(from_scale<float>(to_scale<float>(x))) == x);
    CHECK(from_scale<double>(to_scale<double>(x)) == x);
  }
  // Everything else rounds up, by at most 2^-7 (float problems) or 2^-4 (double problems).
  for (double x = 1e-30; x < 1e30; x *= 1.37) {
    const double f = from_scale<float>(to_scale<float>(x));
    const double d = from_scale<double>(to_scale<double>(x));
    INFO(x);
    CHECK(f >= x);
    CHECK(f <= x * (1 + 0x1p-7));
    CHECK(d >= x);
    CHECK(d <= x * (1 + 0x1p-4));
  }
  // Beyond the range a scale saturates at the largest finite one (infinity would pass anything).
  CHECK(std::isfinite(from_scale<float>(to_scale<float>(1e39))));
  CHECK(from_scale<float>(to_scale<float>(1e39)) > 3e38f);
  CHECK(std::isfinite(from_scale<double>(to_scale<double>(INFINITY))));
  CHECK(from_scale<double>(to_scale<double>(1e300)) >= 1e300);
  // A double problem's values beyond float's range are judged against their own scale.
  const Reference big = make_reference(Dtype::F64, {1e200}, {1e200});
  const std::vector<double> close = {1e200 * (1 + 1e-6)}, off = {1e200 * (1 + 1e-3)};
  CHECK(verify(close.data(), 1, big).ok);
  CHECK_FALSE(verify(off.data(), 1, big).ok);
  // An error at the tolerance of the exact scale passes: rounding the scale never makes the
  // check stricter.
  const double scale = 3.3;
  const float at_tolerance = static_cast<float>(1.0 + 0.99e-4 * scale);
  CHECK(verify(&at_tolerance, 1, make_reference(Dtype::F32, {1.0}, {scale})).ok);
  // A reference whose scales do not match its values is refused, not read past its end.
  Reference broken = make_reference(Dtype::F32, {1.0, 2.0}, {1.0, 2.0});
  broken.scale.pop_back();
  const std::vector<float> two = {1.0f, 2.0f};
  const Verification v = verify(two.data(), 2, broken);
  CHECK_FALSE(v.ok);
  CHECK(v.message.find("scales") != std::string::npos);
}
