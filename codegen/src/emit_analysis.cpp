// What the loop nest of a schedule needs, decided before any text is written (analyze: register
// accumulation, write-once flushes, zeroing, race handling, compile-time split sizes, static
// ranges), and the schedule queries of emitter.hpp that rest on the same rules
// (parallel_loop_is_race_free, register_block, streams_output, split_is_constant,
// stream_output_min_bytes) with the race strategies' names.
#include "emit_internal.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "waco/kernels/context.hpp"

namespace waco::codegen {

using namespace detail;

namespace {

/// Variables that index the output: the dense output's, or (sparse output) the sparse operand's.
std::vector<char> output_coordinate_vars(const KernelSpec& spec) {
  return spec.sparse_output() ? spec.sparse_vars : spec.output.vars;
}

std::size_t position_of(const SuperSchedule& s, const Loop& loop) {
  return static_cast<std::size_t>(std::find(s.order.begin(), s.order.end(), loop) - s.order.begin());
}

/// Whether a loop indexes the output (so that its iterations update different entries).
bool indexes_output(const KernelSpec& spec, const Loop& l) {
  return contains(output_coordinate_vars(spec), l.var) ||
         (spec.sparse_output() && spec.is_sparse_var(l.var));
}

/// split_is_constant, given the schedule's register block (computed once by the caller).
bool constant_split(const SuperSchedule& s, const std::optional<RegisterBlock>& block, char v) {
  // Measured (issue 4): a constant block size lets the compiler unroll small BCSR blocks of SpMV
  // (time ratio constant/run-time 0.53-0.78 on bcsr4x4), while SpMM, whose dense j is innermost,
  // showed no consistent gain; larger blocks keep one kernel for every size. A register block's
  // size is always constant: it is the length of the block array.
  if (block && (block->var == v || (block->rows > 1 && block->row_var == v))) return true;
  const std::vector<Loop> levels = s.levels();
  const int split = s.split_of(v);
  const int inner = level_of(levels, {v, Loop::Part::Inner});
  return split > 1 && split <= kMaxConstantSplit && level_of(levels, s.order.back()) >= 0 &&
         inner >= 0 && s.formats[static_cast<std::size_t>(inner)] == LevelFormat::U;
}

}  // namespace

namespace detail {

Analysis analyze(const SuperSchedule& s, RaceStrategy race) {
  Analysis a;
  a.spec = &kernel_spec(s.kind);
  const KernelSpec& spec = *a.spec;
  a.levels = s.levels();
  a.n = s.order.size();
  a.serial = s.threads == 1;
  a.race_free = a.serial || parallel_loop_is_race_free(s);
  a.privatize = !a.race_free && race == RaceStrategy::Private;
  a.d = a.n;
  while (a.d > 0 && !indexes_output(spec, s.order[a.d - 1])) --a.d;
  a.accumulate = a.d < a.n;
  a.block = register_block(s);
  if (a.block) {
    a.block_outer = position_of(s, {a.block->var, Loop::Part::Outer});
    a.vector_block = true;
    for (const Access& in : spec.inputs)
      if (contains(in.vars, a.block->var) && in.vars.back() != a.block->var) a.vector_block = false;
  }
  // Write-once: every output entry is flushed exactly once when the loops outside the flush are
  // all output loops, none of them compressed for a dense output (a C level skips entries), and
  // the parallel loop among them. Then the flush assigns and the output is not zeroed first.
  const std::size_t outside = a.accumulate ? a.d : a.block ? a.block_outer + 1 : 0;
  a.write_once = a.accumulate || a.block.has_value();
  for (std::size_t t = 0; t < outside && a.write_once; ++t) {
    const Loop& l = s.order[t];
    if (spec.sparse_output()) {
      a.write_once = spec.is_sparse_var(l.var);
    } else {
      const int lv = level_of(a.levels, l);
      const bool compressed = lv >= 0 && is_compressed(s.formats[static_cast<std::size_t>(lv)]);
      a.write_once = contains(spec.output.vars, l.var) && !compressed;
    }
  }
  if (a.write_once) a.write_once = position_of(s, s.parallel) < outside;
  // The block's variable last in the output, so that a block is s_x contiguous values. The
  // loops outside the flush are x1, innermost, and (write-once) loops over the output's rows in
  // order, so a thread's next block starts where the last ended, unless x1 is the parallel loop
  // (its threads would take turns within a row).
  a.stream_flush = a.block && a.block->rows == 1 && a.write_once && !spec.sparse_output() &&
                   spec.output.vars.back() == a.block->var && s.parallel.var != a.block->var;
  // GCC 12 vectorized such a row sum in f32 as gathers of 16 and 16 in-order adds, 1.4-1.6x the
  // time of the scalar loop (AMD EPYC Zen 5 VM, session 62: codegen/README.md); kernels whose
  // innermost level is dense (blocks) keep the vectorizer: their contiguous inner loops gain.
  a.scalar_row_sum =
      s.kind == kernels::KernelKind::SpMV && !s.formats.empty() && is_compressed(s.formats.back());
  // Slice zeroing: when the outermost loop is the parallel loop and runs over every coordinate
  // of the output's leading variable (U level or plain loop, whole or outer part), iteration v
  // alone touches the output slice of v: zero it there, while it is about to be used, instead of
  // a separate pass over the whole output (for SpMM that pass costs as much as the kernel).
  const Loop& first = s.order.front();
  const int first_level = level_of(a.levels, first);
  a.slice_zero = !a.write_once && !spec.sparse_output() && first == s.parallel &&
                 first.var == spec.output.vars.front() && first.part != Loop::Part::Inner &&
                 (first_level < 0 || s.formats[static_cast<std::size_t>(first_level)] == LevelFormat::U);
  a.constant_split.assign(kMaxVars, 0);
  for (std::size_t v = 0; v < spec.vars.size(); ++v)
    if (constant_split(s, a.block, spec.vars[v])) a.constant_split[v] = s.split[v];
  a.static_ranges = !a.serial && s.chunk == kStaticChunk;
  if (a.static_ranges && first == s.parallel && first_level == 0 &&
      s.formats.front() == LevelFormat::U) {
    // Level 0's iteration c0 owns positions [c0 * D, (c0 + 1) * D) of every U level below it
    // (D: the product of their dims), so the first C level's pos at c0 * D counts the entries
    // before c0: the prefix sum the ranges are balanced by.
    for (std::size_t l = 1; l < s.formats.size(); ++l)
      if (is_compressed(s.formats[l])) {
        a.balance_level = static_cast<int>(l);
        break;
      }
  }
  return a;
}

}  // namespace detail

bool parallel_loop_is_race_free(const SuperSchedule& s) {
  return contains(output_coordinate_vars(kernel_spec(s.kind)), s.parallel.var);
}

std::optional<RegisterBlock> register_block(const SuperSchedule& s) {
  const KernelSpec& spec = kernel_spec(s.kind);
  if (spec.sparse_output() || s.order.size() < 3) return std::nullopt;
  const Loop& inner = s.order.back();
  const std::vector<Loop> levels = s.levels();
  const int size = s.split_of(inner.var);
  if (inner.part != Loop::Part::Inner || level_of(levels, inner) >= 0 ||
      !contains(spec.output.vars, inner.var) || size < 2 || size > kMaxRegisterBlock)
    return std::nullopt;
  RegisterBlock block{inner.var, size};
  // Rows: y0 just outside x0, the inner part of another output variable, a U level.
  const std::size_t n = s.order.size();
  const Loop& before = s.order[n - 2];
  std::size_t end = n - 1;  // the loops between x1 and the block are [x1 + 1, end)
  if (before.part == Loop::Part::Inner && contains(spec.output.vars, before.var)) {
    const int l = level_of(levels, before);
    const int rows = s.split_of(before.var);
    if (l < 0 || s.formats[static_cast<std::size_t>(l)] != LevelFormat::U ||
        rows > kMaxRegisterRows || rows * size > kMaxRegisterBlock)
      return std::nullopt;
    block.row_var = before.var;
    block.rows = rows;
    end = n - 2;
  }
  // The loops between x1 and the block must exist, leave the output block unchanged (index no
  // output variable), and not be the parallel loop (its iterations would share the block).
  const std::size_t outer = position_of(s, {inner.var, Loop::Part::Outer});
  if (outer + 1 >= end || position_of(s, s.parallel) > outer) return std::nullopt;
  for (std::size_t t = outer + 1; t < end; ++t)
    if (indexes_output(spec, s.order[t])) return std::nullopt;
  return block;
}

bool streams_output(const SuperSchedule& s) {
  return validate(s).empty() && analyze(s, RaceStrategy::Atomic).stream_flush;
}

bool updates_output_rows(const SuperSchedule& s) {
  if (s.kind != kernels::KernelKind::SpMM && s.kind != kernels::KernelKind::MTTKRP) return false;
  if (!validate(s).empty()) return false;
  const detail::Analysis a = analyze(s, RaceStrategy::Atomic);
  return !a.accumulate && !a.block && s.order.back().var == a.spec->output.vars.back();
}

std::int64_t stream_output_min_bytes() {
  const char* off = std::getenv("WACO_STREAM_STORES");
  if (off != nullptr && std::string(off) == "0") return 0;
  return kernels::last_level_cache_bytes();
}

bool split_is_constant(const SuperSchedule& s, char v) {
  return constant_split(s, register_block(s), v);
}

const char* race_strategy_name(RaceStrategy r) {
  switch (r) {
    case RaceStrategy::Atomic: return "atomic";
    case RaceStrategy::Private: return "private";
    case RaceStrategy::Auto: return "auto";
  }
  return "?";
}

std::optional<RaceStrategy> parse_race_strategy(const std::string& name) {
  for (RaceStrategy r : {RaceStrategy::Atomic, RaceStrategy::Private, RaceStrategy::Auto})
    if (name == race_strategy_name(r)) return r;
  return std::nullopt;
}

}  // namespace waco::codegen
