// Private to kernels/src/recipe*.cpp: what the three parts of the matrix recipes share (recipe.hpp
// has the contract). The parts:
//   recipe.cpp          the recipe value type: its JSON form, its label, the recipe files and
//                       shards
//   recipe_augment.cpp  the augmentations and making operands (augment, make_matrix, make_tensor)
//   recipe_mix.cpp      nnz estimates (estimated_nnz) and the default mixes (default_mix,
//                       default_tensor_mix): dataset policy
//
// Determinism. Every random choice is a SplitMix64 stream (dense.hpp) keyed by a seed and a step
// tag. The augmentations use integer arithmetic and single IEEE operations (i * f, then floor),
// never a std distribution. default_mix draws its parameters on integer grids and with IEEE
// +, -, *, / and sqrt only (correctly rounded everywhere), and never writes a * b + c in doubles
// (GCC contracts that into an FMA under -march=native on some machines and not on others), so two
// machines agree on the mix. Only the powerlaw estimate uses std::pow, as the generator does.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "waco/kernels/dense.hpp"
#include "waco/kernels/recipe.hpp"

namespace waco::kernels::recipe_detail {

using u64 = std::uint64_t;

inline constexpr u64 kGolden = 0x9E3779B97F4A7C15ull;
// Step tags: separate the random streams of one seed.
inline constexpr u64 kTagSubmatrix = 0x7375626D6174ull, kTagResize = 0x726573697A65ull,
                     kTagPermRows = 0x7065726D72ull, kTagPermCols = 0x7065726D63ull,
                     kTagZero = 0x7A65726F76ull, kTagMix = 0x6D6978ull, kTagCycle = 0x6379636C65ull,
                     kTagTensorMix = 0x746D6978ull;

// ---- randomness ------------------------------------------------------------------------------

/// The SplitMix64 sequence started from a key, with exact bounded draws.
class Stream {
 public:
  explicit Stream(u64 key) : state_(splitmix64(key)) {}
  u64 next() {
    state_ += kGolden;
    return splitmix64(state_);
  }
  /// Uniform in [0, n), n >= 1, exact (Lemire's multiply-shift with rejection).
  u64 below(u64 n) {
    using u128 = unsigned __int128;
    u128 m = static_cast<u128>(next()) * n;
    if (static_cast<u64>(m) < n) {
      const u64 threshold = (0 - n) % n;
      while (static_cast<u64>(m) < threshold) m = static_cast<u128>(next()) * n;
    }
    return static_cast<u64>(m >> 64);
  }
  /// Uniform integer in [lo, hi], lo <= hi.
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(below(static_cast<u64>(hi - lo) + 1));
  }
  /// True with probability num / den.
  bool chance(u64 num, u64 den) { return below(den) < num; }
  /// Log-uniform on [lo, hi] (0 < lo <= hi) on a grid of 16 steps per octave, by repeated IEEE
  /// multiplication (no libm).
  double log_uniform(double lo, double hi) {
    constexpr double kStep = 1.0442737824274138;  // 2^(1/16)
    u64 steps = 0;
    for (double x = lo; x * kStep <= hi; x *= kStep) ++steps;
    double x = lo;
    for (u64 k = below(steps + 1); k > 0; --k) x *= kStep;
    return x;
  }

 private:
  u64 state_;
};

/// A number for labels and messages: integers in full, others in the shortest ostream form.
inline std::string num(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::abs(x) < 9e15) {
    return std::to_string(static_cast<long long>(x));
  }
  std::ostringstream s;
  s << x;
  return s.str();
}

/// One GeneratorSpec field a kind reads (exactly one member pointer is set).
struct Param {
  const char* name;
  std::int64_t GeneratorSpec::*i64 = nullptr;
  int GeneratorSpec::*i32 = nullptr;
  double GeneratorSpec::*f64 = nullptr;
};

/// The parameters of a kind; Error naming `field` for an unknown kind (recipe.cpp).
const std::vector<Param>& params_of(const std::string& kind, const std::string& field);

/// The (row, col) offset of the window (a window fitting in rows x cols): uniform over the
/// offsets that fit, or along the diagonal (row offset = column offset) for a diagonal window
/// (recipe_augment.cpp).
std::pair<std::int64_t, std::int64_t> window_offset(const Augmentation& g, std::int64_t rows,
                                                    std::int64_t cols);

}  // namespace waco::kernels::recipe_detail
