#include "waco/kernels/values.hpp"

#include <cstring>
#include <string>

#include "waco/kernels/error.hpp"

namespace waco::kernels {

std::string_view dtype_name(Dtype d) { return d == Dtype::F32 ? "f32" : "f64"; }

std::string_view dtype_ctype(Dtype d) { return d == Dtype::F32 ? "float" : "double"; }

std::optional<Dtype> parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "float") return Dtype::F32;
  if (name == "f64" || name == "float64" || name == "double") return Dtype::F64;
  return std::nullopt;
}

void Values::assign(Dtype d, std::size_t n) {
  dtype_ = d;
  if (d == Dtype::F32) {
    AlignedDoubles().swap(d_);
    f_.assign(n, 0.0f);
  } else {
    AlignedFloats().swap(f_);
    d_.assign(n, 0.0);
  }
}

void Values::assign(Dtype d, const double* v, std::size_t n) {
  dtype_ = d;
  if (d == Dtype::F32) {
    AlignedDoubles().swap(d_);
    f_.assign(v, v + n);  // each value converted as it is constructed
  } else {
    AlignedFloats().swap(f_);
    d_.assign(v, v + n);
  }
}

namespace {

template <class Bits, class V>
bool exponents_not_all_ones(const V* v, std::size_t n, Bits exponent) {
  Bits bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, v + i, sizeof b);
    bad |= static_cast<Bits>((b & exponent) == exponent);
  }
  return bad == 0;
}

}  // namespace

bool all_finite(const float* v, std::size_t n) {
  return exponents_not_all_ones<std::uint32_t>(v, n, 0x7F800000u);
}

bool all_finite(const double* v, std::size_t n) {
  return exponents_not_all_ones<std::uint64_t>(v, n, 0x7FF0000000000000ull);
}

std::vector<double> Values::to_doubles() const {
  if (dtype_ == Dtype::F64) return {d_.begin(), d_.end()};
  return {f_.begin(), f_.end()};
}

bool Values::operator==(const Values& o) const {
  return dtype_ == o.dtype_ && size() == o.size() &&
         (size() == 0 || std::memcmp(raw(), o.raw(), size() * dtype_size(dtype_)) == 0);
}

void Values::check_type(Dtype want) const {
  WACO_ASSERT(dtype_ == want, "values of type " + std::string(dtype_name(dtype_)) +
                                  " accessed as " + std::string(dtype_name(want)));
}

}  // namespace waco::kernels
