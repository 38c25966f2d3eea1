// Reference kernels: serial, naive, double accumulation, straight from the COO operand. They are
// the correctness oracle for every baseline, tiled kernel and generated schedule.
#pragma once

#include <cstdint>
#include <vector>

#include "waco/kernels/kernel.hpp"

namespace waco::kernels {

/// A reference result in the canonical output layout (see kernel.hpp). scale[e] is the sum of the
/// absolute values of the products that make up value[e]; errors are judged relative to it, which
/// is the bound float accumulation can meet whatever the summation order. Both are summed in
/// double and stored in the problem's value type: rounding a float reference's entry costs at
/// most 2^-24 of its scale, far below any tolerance verify() is given, and halves the memory of
/// every process that holds one (SpMM with J = 16 on 20M nonzeros: 1 GB in double).
struct Reference {
  Values value;
  Values scale;
};

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
