// Private to codegen/src/emitter.cpp, emit_analysis.cpp and emit_nest.cpp: what the steps of the
// loop-nest generator share (emitter.hpp is the public header). The steps:
//   emit_analysis.cpp  what the nest needs (analyze), and the schedule queries of emitter.hpp that
//                      rest on it (register_block, streams_output, split_is_constant, ...)
//   emitter.cpp        the header comment, the argument block and the function around the nest
//                      (emit_kernel_source)
//   emit_nest.cpp      the loops, the register block and the statement (write_nest)
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "waco/codegen/emitter.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/super_schedule.hpp"

namespace waco::codegen::detail {

inline bool contains(const std::vector<char>& v, char x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

inline std::string upper(char v) { return std::string(1, static_cast<char>(std::toupper(v))); }

/// The level of the sparse operand that loop `loop` iterates, or -1 (a dense-only variable).
inline int level_of(const std::vector<Loop>& levels, const Loop& loop) {
  const auto it = std::find(levels.begin(), levels.end(), loop);
  return it == levels.end() ? -1 : static_cast<int>(it - levels.begin());
}

/// The source text, line by line, indented two spaces a block.
class Writer {
 public:
  void line(const std::string& s) {
    out_ << (s.empty() ? "" : std::string(2 * indent_, ' ')) << s << "\n";
  }
  void open(const std::string& s) {
    line(s.empty() ? "{" : s + " {");
    ++indent_;
  }
  void close(const std::string& tail = "") {
    --indent_;
    line("}" + tail);
  }
  /// Closes a block and opens the next one on the same line: `} else {`.
  void reopen(const std::string& s) {
    --indent_;
    line("} " + s + " {");
    ++indent_;
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
  int indent_ = 0;
};

/// What the loop nest of a schedule needs, decided before any text is written.
struct Analysis {
  const KernelSpec* spec = nullptr;
  std::vector<Loop> levels;
  std::size_t n = 0;  ///< loops
  bool race_free = false, privatize = false;
  /// threads=1 in the schedule: no OpenMP region at all (a one-thread region and its dynamic
  /// loop cost 0.3 us a call, more than a 39-row SpMV itself).
  bool serial = false;
  /// Scalar accumulation: the loops from depth d on only reduce (d == n: none).
  std::size_t d = 0;
  bool accumulate = false;
  std::optional<RegisterBlock> block;
  std::size_t block_outer = 0;  ///< position of the block variable's outer loop x1
  /// The full block runs on vectors: every input the block variable indexes has it as its last
  /// (contiguous) variable, so that a block of it is one unaligned vector load.
  bool vector_block = false;
  /// Every output entry is flushed exactly once (from acc or the block): assign, no zeroing.
  bool write_once = false;
  /// A write-once register block of one row, contiguous in the output, whose flushes follow one
  /// another in memory within a thread: at run time (WacoArgs::stream_out) they go through the
  /// streaming writer (stream_writer.cpp).
  bool stream_flush = false;
  /// An SpMV whose innermost loop walks a compressed level (a row summed through an index): the
  /// kernel is compiled without loop vectorization (WACO_SCALAR_ROW_SUM; codegen/README.md).
  bool scalar_row_sum = false;
  /// The outermost (parallel) loop zeroes the output slice it owns.
  bool slice_zero = false;
  std::vector<long long> constant_split;  ///< per variable, its compile-time split size or 0
  /// chunk=static on threads: the parallel loop runs in one contiguous range per thread.
  bool static_ranges = false;
  /// With static ranges: the C level whose pos array balances them (the stored entries below
  /// each iteration of the outermost, parallel U level, all levels between them U), else -1
  /// (OpenMP's static split of the iterations).
  int balance_level = -1;
};

/// The Analysis of a valid schedule (emit_analysis.cpp); `race` Atomic or Private.
Analysis analyze(const SuperSchedule& s, RaceStrategy race);

/// Emits the loops of the schedule, from the outermost, with the statement at the innermost point,
/// updating the output through `out_base` (emit_nest.cpp: NestWriter).
void write_nest(Writer& w, const SuperSchedule& s, const Analysis& a, std::string out_base);

}  // namespace waco::codegen::detail
