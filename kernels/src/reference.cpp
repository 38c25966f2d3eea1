// Reference kernels (serial, naive, double accumulation) and verification. Deliberately simple:
// loops over the canonical COO entries, nothing clever, so that they can be trusted.
#include "waco/kernels/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "waco/kernels/error.hpp"

namespace waco::kernels {

template <>
Scale to_scale<float>(double s) {
  // A scale saturates instead of becoming infinite (tolerance x infinity would pass any output):
  // the largest finite one is as lenient as a check of such an entry can be.
  constexpr Scale kLargest = 0x7f7f;
  if (!(s > 0.0)) return 0;
  if (s >= static_cast<double>(from_scale<float>(kLargest))) return kLargest;
  float f = static_cast<float>(s);
  if (static_cast<double>(f) < s) f = std::nextafter(f, INFINITY);
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  // Non-negative floats order as their bits: the smallest top half at or above f.
  return static_cast<Scale>((bits + 0xffffu) >> 16);
}

template <>
Scale to_scale<double>(double s) {
  constexpr Scale kLargest = 0x7fef;
  if (!(s > 0.0)) return 0;
  if (s >= from_scale<double>(kLargest)) return kLargest;
  std::uint64_t bits;
  std::memcpy(&bits, &s, sizeof bits);
  return static_cast<Scale>((bits + ((std::uint64_t{1} << 48) - 1)) >> 48);
}

double Reference::scale_at(std::size_t e) const {
  return value.dtype() == Dtype::F64 ? from_scale<double>(scale[e])
                                     : static_cast<double>(from_scale<float>(scale[e]));
}

Reference make_reference(Dtype d, const std::vector<double>& value,
                         const std::vector<double>& scale) {
  WACO_ASSERT(value.size() == scale.size(), "one scale per value");
  Reference r;
  r.value.assign(d, value.data(), value.size());
  r.scale.resize(scale.size());
  for (std::size_t e = 0; e < scale.size(); ++e)
    r.scale[e] = d == Dtype::F64 ? to_scale<double>(scale[e]) : to_scale<float>(scale[e]);
  return r;
}

namespace {

/// Accumulates in double and stores each output entry once, rounded to the problem's value
/// type (a float reference takes half the memory of a double one, in the tuning process, the
/// worker and every measuring child, and half the bytes a verification reads). The canonical
/// operand's entries come sorted by output row, so one row's sums at a time are enough: `open`
/// starts a row (the previous one is stored), `add` sums one product into the open row.
class Accumulator {
 public:
  Accumulator(Dtype d, std::int64_t rows, std::int64_t width)
      : width_(width), sum_(static_cast<std::size_t>(width)), abs_(sum_.size()) {
    r_.value.assign(d, static_cast<std::size_t>(rows * width));
    r_.scale.resize(static_cast<std::size_t>(rows * width));
    double_scales_ = d == Dtype::F64;
  }
  void open(std::int64_t row) {
    if (row == row_) return;
    WACO_ASSERT(row > row_, "compute_reference needs the operand's entries sorted by row");
    store();
    row_ = row;
  }
  void add(std::int64_t j, double term) {
    sum_[static_cast<std::size_t>(j)] += term;
    abs_[static_cast<std::size_t>(j)] += std::fabs(term);
  }
  Reference done() {
    store();
    return std::move(r_);
  }

 private:
  void store() {
    if (row_ < 0) return;
    const auto at = static_cast<std::size_t>(row_ * width_);
    for (std::size_t j = 0; j < sum_.size(); ++j) {
      r_.value.set(at + j, sum_[j]);
      r_.scale[at + j] = double_scales_ ? to_scale<double>(abs_[j]) : to_scale<float>(abs_[j]);
      sum_[j] = abs_[j] = 0.0;
    }
  }
  Reference r_;
  std::int64_t width_;
  std::int64_t row_ = -1;
  bool double_scales_ = false;
  std::vector<double> sum_, abs_;
};

Reference spmv(const CooMatrix& A, const DenseMatrix& x, Dtype d) {
  Accumulator r(d, A.rows, 1);
  for (std::int64_t e = 0; e < A.nnz(); ++e) {
    r.open(A.row[e]);
    r.add(0, A.val[e] * x.at(A.col[e], 0));
  }
  return r.done();
}

Reference spmm(const CooMatrix& A, const DenseMatrix& B, Dtype d) {
  const index_t J = B.cols;
  Accumulator r(d, A.rows, J);
  for (std::int64_t e = 0; e < A.nnz(); ++e) {
    r.open(A.row[e]);
    for (index_t j = 0; j < J; ++j) r.add(j, A.val[e] * B.at(A.col[e], j));
  }
  return r.done();
}

Reference sddmm(const CooMatrix& A, const DenseMatrix& B, const DenseMatrix& C, Dtype d) {
  const index_t K = B.cols;
  Accumulator r(d, A.nnz(), 1);  // one output entry per nonzero, in their order
  for (std::int64_t e = 0; e < A.nnz(); ++e) {
    r.open(e);
    for (index_t k = 0; k < K; ++k) r.add(0, A.val[e] * B.at(A.row[e], k) * C.at(k, A.col[e]));
  }
  return r.done();
}

Reference mttkrp(const CooTensor& T, const DenseMatrix& B, const DenseMatrix& C, Dtype d) {
  const index_t J = B.cols;
  Accumulator r(d, T.dims[0], J);
  for (std::int64_t e = 0; e < T.nnz(); ++e) {
    r.open(T.idx[0][e]);
    for (index_t j = 0; j < J; ++j)
      r.add(j, T.val[e] * B.at(T.idx[1][e], j) * C.at(T.idx[2][e], j));
  }
  return r.done();
}

}  // namespace

Reference compute_reference(const Problem& p) {
  p.validate();
  const Dtype d = p.dtype();
  switch (p.kind) {
    case KernelKind::SpMV: return spmv(*p.A, *p.B, d);
    case KernelKind::SpMM: return spmm(*p.A, *p.B, d);
    case KernelKind::SDDMM: return sddmm(*p.A, *p.B, *p.C, d);
    case KernelKind::MTTKRP: return mttkrp(*p.T, *p.B, *p.C, d);
  }
  WACO_ASSERT(false, "unknown kernel");
}

namespace {

template <class V, class R>
Verification verify_typed(const V* out, std::int64_t size, const R* value, const Scale* scale,
                          double tolerance) {
  Verification v;
  v.tolerance = tolerance;
  // Entries whose every product is zero must come out (close to) zero: judge them against the
  // smallest normal float rather than dividing by zero.
  constexpr double kTiny = 1.1754943508222875e-38;
  for (std::int64_t i = 0; i < size; ++i) {
    const double o = out[i];
    if (!std::isfinite(o)) {
      v.max_rel_error = INFINITY;
      v.worst_index = i;
      break;
    }
    const double err = std::fabs(o - static_cast<double>(value[i])) /
                       std::max(static_cast<double>(from_scale<R>(scale[i])), kTiny);
    if (err > v.max_rel_error) {
      v.max_rel_error = err;
      v.worst_index = i;
    }
  }
  v.ok = v.max_rel_error <= tolerance;
  if (!v.ok) {
    std::ostringstream msg;
    msg << "entry " << v.worst_index << " is " << out[v.worst_index] << ", the reference "
        << value[v.worst_index] << " (relative error " << v.max_rel_error << " > tolerance "
        << tolerance << ")";
    v.message = msg.str();
  }
  return v;
}

/// A float output against a float reference (a single-precision problem's, every tune's check):
/// the errors in float, their largest found as the largest bit pattern (non-negative floats order
/// as their bits; the error of a non-finite output is infinite or NaN, whose bits are above every
/// finite one's), a loop without a branch or an early exit that the compiler vectorizes (the
/// scalar loop above, one double division an entry, took 0.11-0.20 s for SpMM's 64M entries on
/// a 20M-nonzero matrix, J = 16). The worst entry is looked up only when the check fails.
Verification verify_float(const float* out, std::int64_t size, const float* value,
                          const Scale* scale, double tolerance) {
  constexpr float kTinyF = 1.17549435e-38f;  // the smallest normal float, as kTiny above
  std::uint32_t worst = 0;
  for (std::int64_t i = 0; i < size; ++i) {
    const float err =
        std::fabs(out[i] - value[i]) / std::max(from_scale<float>(scale[i]), kTinyF);
    std::uint32_t bits;
    std::memcpy(&bits, &err, sizeof bits);
    worst = bits > worst ? bits : worst;
  }
  constexpr std::uint32_t kInfinityBits = 0x7f800000u;
  float worst_err;
  std::memcpy(&worst_err, &worst, sizeof worst_err);
  Verification v;
  v.tolerance = tolerance;
  v.max_rel_error = worst >= kInfinityBits ? INFINITY : static_cast<double>(worst_err);
  v.ok = v.max_rel_error <= tolerance;
  if (v.ok) return v;
  // The scalar check finds the worst entry (and the first non-finite output) and says it.
  return verify_typed(out, size, value, scale, tolerance);
}

template <class V>
Verification verify_against(const V* out, std::int64_t size, const Reference& ref,
                            double tolerance) {
  if (size != static_cast<std::int64_t>(ref.value.size()) ||
      ref.scale.size() != ref.value.size()) {
    Verification v;
    v.tolerance = tolerance;
    v.message = ref.scale.size() != ref.value.size()
                    ? "the reference has " + std::to_string(ref.scale.size()) + " scales for " +
                          std::to_string(ref.value.size()) + " values"
                    : "output has " + std::to_string(size) + " entries, the reference " +
                          std::to_string(ref.value.size());
    return v;
  }
  return with_value_type(ref.value.dtype(), [&](auto r) {
    using R = decltype(r);
    if constexpr (std::is_same_v<V, float> && std::is_same_v<R, float>)
      return verify_float(out, size, ref.value.data<R>(), ref.scale.data(), tolerance);
    else
      return verify_typed(out, size, ref.value.data<R>(), ref.scale.data(), tolerance);
  });
}

}  // namespace

Verification verify(const float* out, std::int64_t size, const Reference& ref, double tolerance) {
  return verify_against(out, size, ref, tolerance);
}

Verification verify(const double* out, std::int64_t size, const Reference& ref, double tolerance) {
  return verify_against(out, size, ref, tolerance);
}

Verification verify(const Values& out, const Reference& ref, double tolerance) {
  return with_value_type(out.dtype(), [&](auto v) {
    using V = decltype(v);
    return verify(out.data<V>(), static_cast<std::int64_t>(out.size()), ref, tolerance);
  });
}

}  // namespace waco::kernels
