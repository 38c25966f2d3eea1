// Reference kernels: serial, naive, double accumulation, straight from the COO operand. They are
// the correctness oracle for every baseline, tiled kernel and generated schedule.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "waco/kernels/kernel.hpp"

namespace waco::kernels {

/// An entry's error scale in 16 bits, rounded up, so that verify() against it is never stricter
/// than against the exact sum and only slightly more lenient: for a float problem the top half of
/// a float's bits (bfloat16: float's range, at most 2^-7 = 0.8% above the exact scale), for a
/// double problem the top quarter of a double's (double's range, at most 2^-4 = 6.25% above).
/// Two bytes an entry instead of the value type's four or eight: the scales were as large as the
/// reference's values, in the worker and in every measuring child that verifies (SpMM with J = 16
/// on a 20M-nonzero matrix: 256 MB of float scales, now 128 MB; J = 64: 1 GB, now 512 MB).
using Scale = std::uint16_t;
/// The scale of a sum of absolute products s (>= 0) for values of type R (float or double),
/// rounded up; beyond the largest finite scale it saturates there (a tolerance times infinity
/// would pass any output).
template <class R>
Scale to_scale(double s);
/// The value a scale stands for, in R (float or double, as it was made).
template <class R>
R from_scale(Scale s) {
  static_assert(std::is_same_v<R, float> || std::is_same_v<R, double>);
  if constexpr (std::is_same_v<R, float>) {
    const std::uint32_t bits = std::uint32_t{s} << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  } else {
    const std::uint64_t bits = std::uint64_t{s} << 48;
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
}

/// A reference result in the canonical output layout (see kernel.hpp). scale[e] is the sum of the
/// absolute values of the products that make up value[e] (to_scale of it, for the value type);
/// errors are judged relative to it, which is the bound float accumulation can meet whatever the
/// summation order. Both are summed in double; the values are stored in the problem's value type:
/// rounding a float reference's entry costs at most 2^-24 of its scale, far below any tolerance
/// verify() is given, and halves the memory of every process that holds one.
struct Reference {
  Values value;
  std::vector<Scale> scale;
  /// Entry e's scale as a double (as value's type made it).
  double scale_at(std::size_t e) const;
};

/// A reference of the given values and exact scales (rounded up to Scale) in value type d: for
/// tests and tools that make one by hand.
Reference make_reference(Dtype d, const std::vector<double>& value,
                         const std::vector<double>& scale);

/// Computes the reference result of a validated problem.
Reference compute_reference(const Problem& p);

/// Default tolerance of verify(): |out - ref| <= tol * max(scale, tiny).
inline constexpr double kDefaultTolerance = 1e-4;

struct Verification {
  bool ok = false;
  double max_rel_error = 0.0;  ///< max over entries of |out - ref| / max(scale, tiny)
  /// The entry of max_rel_error (the first non-finite output, if any) when the check fails; when
  /// it passes, -1 for a float output against a float reference (not looked up).
  std::int64_t worst_index = -1;
  double tolerance = kDefaultTolerance;
  /// Empty when ok, otherwise what failed (worst entry, values, or a size mismatch / NaN).
  std::string message;
};

/// Compares a kernel's output with the reference. NaN or Inf in the output fails. The
/// tolerance is the same for both value types (a double kernel meets it with room to spare).
Verification verify(const float* out, std::int64_t size, const Reference& ref,
                    double tolerance = kDefaultTolerance);
Verification verify(const double* out, std::int64_t size, const Reference& ref,
                    double tolerance = kDefaultTolerance);
Verification verify(const Values& out, const Reference& ref, double tolerance = kDefaultTolerance);

}  // namespace waco::kernels
