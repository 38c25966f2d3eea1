// The value type of a problem (single or double precision) and an aligned array of values whose
// type is chosen at run time: the dense operands, the kernels' outputs and the formats' stored
// values. Sparse operands keep their values in double, exactly as read (sparse.hpp); each
// implementation stores them in the problem's type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string_view>
#include <vector>

#include "waco/kernels/huge_pages.hpp"

namespace waco::kernels {

enum class Dtype : std::uint8_t { F32, F64 };

/// "f32" or "f64" (how the CLI, results and datasets name it).
std::string_view dtype_name(Dtype d);
/// Inverse of dtype_name; also "float32"/"float" and "float64"/"double". nullopt otherwise.
std::optional<Dtype> parse_dtype(std::string_view name);
inline std::size_t dtype_size(Dtype d) { return d == Dtype::F32 ? 4 : 8; }
/// The C++ type name of a dtype ("float", "double"), as generated sources spell it.
std::string_view dtype_ctype(Dtype d);

/// Whether the n values are all finite: each one's exponent bits compared with all ones, in one
/// pass without a branch, which vectorizes (a branch per value took ~15% of loading a model and
/// 7% of Matrix::from_csr).
bool all_finite(const float* v, std::size_t n);
bool all_finite(const double* v, std::size_t n);

template <class V>
constexpr Dtype dtype_of();
template <>
constexpr Dtype dtype_of<float>() {
  return Dtype::F32;
}
template <>
constexpr Dtype dtype_of<double>() {
  return Dtype::F64;
}

/// Allocates on 64-byte (cache line, AVX-512 vector) boundaries. glibc's malloc puts a large
/// block 16 bytes past a page boundary, so every row of a dense operand with a multiple of 16
/// columns straddled two cache lines: CSR SpMM with the operands 16 bytes off ran 0.88-0.98x
/// the speed of aligned ones (2 threads, J = 64 and 256, three generated matrices; about 0.5x on
/// an AMD Zen 4 VM, where the csr baseline now stages such rows: baseline_csr.cpp). A large
/// block asks for transparent huge pages (advise_huge_pages) before it is filled.
template <class T>
struct CacheAligned {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheAligned() = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) {}
  T* allocate(std::size_t n) {
    T* p = static_cast<T*>(::operator new(n * sizeof(T), kAlign));
    advise_huge_pages(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, kAlign); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const {
    return true;
  }
  template <class U>
  bool operator!=(const CacheAligned<U>&) const {
    return false;
  }
};
using AlignedFloats = std::vector<float, CacheAligned<float>>;
using AlignedDoubles = std::vector<double, CacheAligned<double>>;

/// A 64-byte aligned array of float or double, the type fixed when it is sized.
class Values {
 public:
  Values() = default;
  /// n zeros of type d.
  Values(Dtype d, std::size_t n) { assign(d, n); }

  /// Becomes n zeros of type d (the other type's storage is released).
  void assign(Dtype d, std::size_t n);
  /// Becomes the n values v in type d (rounded to float for F32), without zeroing them first.
  void assign(Dtype d, const double* v, std::size_t n);

  Dtype dtype() const { return dtype_; }
  std::size_t size() const { return dtype_ == Dtype::F32 ? f_.size() : d_.size(); }
  bool empty() const { return size() == 0; }

  /// Typed access; V must be the array's type (checked: a mismatch is an internal error).
  template <class V>
  V* data();
  template <class V>
  const V* data() const;
  const void* raw() const {
    return dtype_ == Dtype::F32 ? static_cast<const void*>(f_.data()) : d_.data();
  }
  void* raw() { return dtype_ == Dtype::F32 ? static_cast<void*>(f_.data()) : d_.data(); }

  double get(std::size_t i) const { return dtype_ == Dtype::F32 ? f_[i] : d_[i]; }
  double operator[](std::size_t i) const { return get(i); }
  /// The values, widened to double.
  std::vector<double> to_doubles() const;
  /// Stores v, rounded to float for F32.
  void set(std::size_t i, double v) {
    if (dtype_ == Dtype::F32)
      f_[i] = static_cast<float>(v);
    else
      d_[i] = v;
  }

  /// Same type, size and bits.
  bool operator==(const Values& o) const;
  bool operator!=(const Values& o) const { return !(*this == o); }

 private:
  void check_type(Dtype want) const;

  Dtype dtype_ = Dtype::F32;
  AlignedFloats f_;
  AlignedDoubles d_;
};

template <>
inline float* Values::data<float>() {
  check_type(Dtype::F32);
  return f_.data();
}
template <>
inline const float* Values::data<float>() const {
  check_type(Dtype::F32);
  return f_.data();
}
template <>
inline double* Values::data<double>() {
  check_type(Dtype::F64);
  return d_.data();
}
template <>
inline const double* Values::data<double>() const {
  check_type(Dtype::F64);
  return d_.data();
}

/// Calls f(V{}) with V the C++ type of d: the one place a run-time dtype becomes a template
/// argument.
template <class F>
decltype(auto) with_value_type(Dtype d, F&& f) {
  if (d == Dtype::F32) return f(float{});
  return f(double{});
}

}  // namespace waco::kernels
