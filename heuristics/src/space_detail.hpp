// Private to heuristics/src/space*.cpp: what the parts of the factored space (space.hpp) share.
// The parts:
//   space.cpp            the stage names, Constraint's default checks, the chunk choices, and the
//                        construction of a space (for_operand, for_problem, structural)
//   space_stages.cpp     the stage results, cached per what their stage sees (split patterns and
//                        their legal orders, format masks, (threads, chunk) lists) and count()
//   space_constrain.cpp  what a constraint removes (tally), and adding it (add_constraint,
//                        constrain): the filtering of its stage's cached results
//   space_enumerate.cpp  the index order: at(), for_each(), sample(), materialize()
//   space_admits.cpp     whether the space holds a given schedule (admits, storage_admits,
//                        admits_each_chunk)
//   space_storage.cpp    the sizes constraints ask about: storage from the prefix counts, trip
//                        counts
#pragma once

#include <cstdint>
#include <vector>

#include "waco/heuristics/space.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {

struct Space::Pattern {
  unsigned mask = 0;
  std::vector<Loop> loops;                 ///< the pattern's loops (parallel loop q indexes these)
  std::vector<std::vector<Loop>> orders;   ///< every legal order of the pattern
  /// groups[lambda][q]: ids of the orders with that level sequence whose nest with parallel loop
  /// loops[q] passes every nest constraint.
  std::vector<std::vector<std::vector<int>>> groups;
};

struct Space::Cursor {
  std::size_t flat = 0;    ///< index of the split vector in product order
  std::size_t sparse = 0;  ///< index of its sparse split sizes
  unsigned mask = 0;       ///< its split pattern (bit v: variable v is split)
  std::vector<int> split;
  std::vector<std::size_t> choice;  ///< per variable: index into split_choices
};

namespace space_detail {

using kernels::Error;

constexpr std::size_t kMaxLoops = 16;

inline std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    throw Error("the schedule space is too large to count", "it exceeds 2^64 candidates");
  return r;
}
inline std::uint64_t add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    throw Error("the schedule space is too large to count", "it exceeds 2^64 candidates");
  return r;
}

inline int loop_code(const codegen::KernelSpec& spec, const Loop& l) {
  return spec.var_index(l.var) * 3 + static_cast<int>(l.part);
}

/// The loops of a split pattern (space_stages.cpp).
std::vector<Loop> pattern_loops(const std::vector<char>& vars, unsigned mask);
/// Every permutation of `loops` with x1 before x0 (space_stages.cpp).
std::vector<std::vector<Loop>> legal_orders(const std::vector<Loop>& loops);

inline std::uint64_t popcount(std::uint64_t x) {
  return static_cast<std::uint64_t>(__builtin_popcountll(x));
}

inline std::vector<LevelFormat> format_levels(std::uint64_t m, std::size_t levels) {
  std::vector<LevelFormat> f(levels);
  for (std::size_t l = 0; l < levels; ++l) f[l] = (m >> l) & 1u ? LevelFormat::C : LevelFormat::U;
  return f;
}

}  // namespace space_detail

}  // namespace waco::heuristics
