// The loop-nest generator, in three steps: analyze() decides what the nest needs (register
// accumulation, write-once flushes, zeroing, race handling, compile-time split sizes), then the
// header comment and argument block are written, then NestWriter emits one loop per entry of the
// schedule's loop order: a sparse level (U: by index, C: by position) or a plain loop for a
// variable the sparse operand lacks, and the KernelSpec's statement at the innermost point.
//
// Two register accumulations keep partial results out of memory across loops that do not index
// the output: a scalar (`acc`) when the innermost loops only reduce (TACO's scalar workspace for
// CSR SpMV, SDDMM's k), and a register block (`blk[s_x]`) when the innermost loop is the inner
// part x0 of a split output variable under sparse or reduction loops (SpMM's and MTTKRP's j0): the
// block of the output row stays in vector registers while the nonzeros stream, and is written once.
//
// The source depends only on what is fixed at compile time: run-time values (threads, chunk and
// the split sizes that are not constants) are printed in the header as placeholders, so that
// schedules differing only in them share one source, one cache key and one compiled kernel.
#include "waco/codegen/emitter.hpp"

#include "stream_writer.hpp"
#include "text_util.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"

namespace waco::codegen {
namespace {

/// Variables that index the output: the dense output's, or (sparse output) the sparse operand's.
std::vector<char> output_coordinate_vars(const KernelSpec& spec) {
  return spec.sparse_output() ? spec.sparse_vars : spec.output.vars;
}

bool contains(const std::vector<char>& v, char x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string upper(char v) { return std::string(1, static_cast<char>(std::toupper(v))); }

/// Row-major offset of an access: a*EXT(b) + b for two variables, a for one.
std::string offset(const Access& a) {
  std::string off;
  for (std::size_t i = 0; i < a.vars.size(); ++i) {
    const std::string v(1, a.vars[i]);
    off = i == 0 ? v : "(" + off + ") * " + upper(a.vars[i]) + " + " + v;
  }
  return off;
}

using detail::join;

/// The level of the sparse operand that loop `loop` iterates, or -1 (a dense-only variable).
int level_of(const std::vector<Loop>& levels, const Loop& loop) {
  const auto it = std::find(levels.begin(), levels.end(), loop);
  return it == levels.end() ? -1 : static_cast<int>(it - levels.begin());
}

std::size_t position_of(const SuperSchedule& s, const Loop& loop) {
  return static_cast<std::size_t>(std::find(s.order.begin(), s.order.end(), loop) - s.order.begin());
}

/// Whether a loop indexes the output (so that its iterations update different entries).
bool indexes_output(const KernelSpec& spec, const Loop& l) {
  return contains(output_coordinate_vars(spec), l.var) ||
         (spec.sparse_output() && spec.is_sparse_var(l.var));
}

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

/// The least average size of a register block's flush that streams (bytes): the writer's work
/// per flush outweighs what streaming saves in smaller ones (write_arguments).
constexpr long long kStreamMinFlushBytes = 256;

/// The streaming writer of a register block's flush (Analysis::stream_flush), in the source
/// before the kernel (stream_writer.hpp).
void write_stream_helpers(Writer& w, SourceForm form) {
  std::istringstream lines(stream_writer_source(form));
  for (std::string line; std::getline(lines, line);) w.line(line);
  w.line("");
}

/// The header comment: the schedule with its run-time placeholders and what the nest does.
void write_header(Writer& w, const SuperSchedule& s, const Analysis& a, SourceForm form,
                  kernels::Dtype dtype) {
  const KernelSpec& spec = *a.spec;
  std::vector<std::string> split_text, constants, run_time;
  for (std::size_t v = 0; v < spec.vars.size(); ++v) {
    if (s.split[v] == 1) continue;
    const std::string x(1, spec.vars[v]), size = std::to_string(s.split[v]);
    if (a.constant_split[v] > 0) {
      split_text.push_back(x + ":" + size);
      constants.push_back("s_" + x + " = " + size);
    } else {
      split_text.push_back(x + ":s_" + x);
      run_time.push_back("s_" + x);
    }
  }
  if (!a.serial) run_time.push_back("threads");
  if (!a.serial && !a.static_ranges) run_time.push_back("chunk");
  SuperSchedule shape = s;  // threads and a dynamic chunk printed as their defaults
  shape.threads = a.serial ? 1 : 0;
  shape.chunk = a.static_ranges ? kStaticChunk : 1;
  std::string text = to_text(shape);
  if (!split_text.empty()) {  // to_text prints the split field first: replace it
    WACO_ASSERT(text.rfind("split=", 0) == 0, "to_text no longer prints split first: " + text);
    text = "split=" + join(split_text, ",") + text.substr(text.find(' '));
  }
  w.line("// Generated by waco-hybrid (codegen ABI " + std::to_string(kAbiVersion) + ") for " +
         std::string(kernels::kernel_name(s.kind)) + " in " + std::string(kernels::dtype_ctype(dtype)) +
         ":");
  w.line("//   " + text +
         (run_time.empty() ? "" : "  (" + join(run_time) + ": set at run time)"));
  if (a.serial) w.line("// Serial (threads=1): no OpenMP region.");
  w.line("// Sparse levels (loop: format):");
  for (std::size_t l = 0; l < a.levels.size(); ++l)
    w.line("//   A" + std::to_string(l) + " " + a.levels[l].name() + ": " +
           (s.formats[l] == LevelFormat::U   ? "U (dense interval)"
            : s.formats[l] == LevelFormat::C ? "C (pos/crd)"
                                             : "N (pos/crd, 16-bit coordinates)"));
  if (!constants.empty())
    w.line("// Compile-time constants (small U blocks and register blocks): " + join(constants) + ".");
  if (a.block) {
    const std::string x(1, a.block->var), y(1, a.block->row_var);
    w.line("// Register block: the output block of " +
           (a.block->rows > 1 ? y + "0 x " + x + "0 (" + std::to_string(a.block->rows) + " x " : x + "0 (") +
           std::to_string(a.block->size) + " values) stays in registers");
    w.line("// across the loops between " + x + "1 and " + x + "0 and is written once after them.");
  }
  w.line("// Run-time arguments (WacoArgs): extents, " + join(run_time) + ".");
  if (a.balance_level >= 0)
    w.line("// Static: one contiguous range of " + s.parallel.name() + " per thread, balanced by the "
           "entries of A" + std::to_string(a.balance_level) + ".");
  else if (a.static_ranges)
    w.line("// Static: OpenMP's static split of " + s.parallel.name() + " (one contiguous range per thread).");
  if (a.privatize) {
    w.line("// The parallel loop " + s.parallel.name() + " does not index the output: thread 0 "
           "accumulates into the output,");
    w.line("// every other thread into its own zeroed copy, summed into the output after the loop.");
  } else if (!a.race_free) {
    w.line("// The parallel loop " + s.parallel.name() +
           " does not index the output: updates are atomic.");
  }
  w.line("");
  if ((a.privatize || a.balance_level >= 0) && form == SourceForm::SharedObject) {  // a header includes them up front
    w.line("#include <cstdlib>");
    w.line("#include <omp.h>");
    w.line("");
  }
  if (a.vector_block) {
    w.line("// Bytes per vector register of the target (the register block's vectors).");
    w.line("#ifndef WACO_VECTOR_BYTES");
    w.line("#if defined(__AVX512F__)");
    w.line("#define WACO_VECTOR_BYTES 64");
    w.line("#elif defined(__AVX__)");
    w.line("#define WACO_VECTOR_BYTES 32");
    w.line("#else");
    w.line("#define WACO_VECTOR_BYTES 16");
    w.line("#endif");
    w.line("#endif");
    w.line("");
  }
  w.line("typedef " + std::string(kernels::dtype_ctype(dtype)) + " waco_value_t;");
  w.line("");
  if (a.stream_flush) write_stream_helpers(w, form);
  w.open("struct WacoArgs");
  {  // one field per line, from the same text that declares the host-side struct
    std::istringstream fields(kWacoArgsFields);
    std::string field;
    while (std::getline(fields, field, ';')) {
      field.erase(0, field.find_first_not_of(' '));
      if (!field.empty()) w.line(field + ";");
    }
  }
  w.close(";");
  w.line("");
  std::vector<std::string> constant_text;
  for (long long c : a.constant_split) constant_text.push_back(std::to_string(c));
  w.line("// Per variable, its split size when it is a compile-time constant, else 0 (the host checks it).");
  w.line(std::string(form == SourceForm::SharedObject ? "extern \"C\" const" : "inline constexpr") +
         " long long waco_constant_split[" + std::to_string(kMaxVars) + "] = {" +
         join(constant_text) + "};");
  w.line("");
}

/// The function's first lines: extents, split sizes, level arrays and operand pointers.
void write_arguments(Writer& w, const SuperSchedule& s, const Analysis& a,
                     const std::string& out_name) {
  const KernelSpec& spec = *a.spec;
  for (std::size_t v = 0; v < spec.vars.size(); ++v) {
    const std::string x(1, spec.vars[v]), index = std::to_string(v);
    w.line("const long long " + upper(spec.vars[v]) + " = a->extent[" + index + "];");
    if (a.constant_split[v] > 0)
      w.line("constexpr long long s_" + x + " = " + std::to_string(a.constant_split[v]) + ";");
    else if (s.split[v] > 1)
      w.line("const long long s_" + x + " = a->split[" + index + "];");
    if (a.vector_block && a.block->var == spec.vars[v]) {
      w.line("constexpr long long blk_lanes = WACO_VECTOR_BYTES / sizeof(waco_value_t);");
      w.line("constexpr long long blk_w = s_" + x + " < blk_lanes ? s_" + x + " : blk_lanes;");
      w.line("typedef waco_value_t blk_vec __attribute__((vector_size(blk_w * sizeof(waco_value_t))));");
    }
  }
  for (std::size_t l = 0; l < a.levels.size(); ++l) {
    const std::string A = "A" + std::to_string(l);
    if (s.formats[l] == LevelFormat::C) {
      w.line("const int* __restrict " + A + "_pos = a->pos[" + std::to_string(l) + "];");
      w.line("const int* __restrict " + A + "_crd = a->crd[" + std::to_string(l) + "];");
    } else if (s.formats[l] == LevelFormat::N) {
      // 16-bit coordinates, passed in the ABI's crd slot (the host stores uint16 there).
      w.line("const int* __restrict " + A + "_pos = a->pos[" + std::to_string(l) + "];");
      w.line("const unsigned short* __restrict " + A + "_crd = (const unsigned short*)(const void*)a->crd[" +
             std::to_string(l) + "];");
    } else {
      w.line("const long long " + A + "_dim = a->level_dim[" + std::to_string(l) + "];");
    }
  }
  w.line("const waco_value_t* __restrict A_vals = a->vals;");
  for (std::size_t i = 0; i < spec.inputs.size(); ++i)
    w.line("const waco_value_t* __restrict " + spec.inputs[i].name + " = a->in[" + std::to_string(i) + "];");
  // Private: thread 0's copy is the output itself, so the output pointer cannot be __restrict.
  w.line(std::string(a.privatize ? "waco_value_t* " : "waco_value_t* __restrict ") + out_name + " = a->out;");
  if (!a.serial && !a.static_ranges) w.line("const int chunk = a->chunk;");
  if (a.stream_flush) {
    // Measured (the harness of the streaming writer, AVX-512, output 16 bytes off a line): flushes of
    // 64 floats gained 1.31x, of 32 lost 4%, of 16 lost 15% (the writer's work per flush).
    const std::string x(1, a.block->var), X = upper(a.block->var);
    w.line("// Streaming stores (WacoArgs::stream_out) when the flushes average " +
           std::to_string(kStreamMinFlushBytes) + " bytes or more.");
    w.line("const long long waco_flush = " + X + " > 0 ? " + X + " / ((" + X + " + s_" + x + " - 1) / s_" + x +
           ") : 0;");
    w.line("const bool waco_stream = a->stream_out && waco_flush * (long long)sizeof(waco_value_t) >= " +
           std::to_string(kStreamMinFlushBytes) + ";");
  }
}

/// Emits the loops of the schedule, from the outermost, with the statement at the innermost point.
class NestWriter {
 public:
  NestWriter(Writer& w, const SuperSchedule& s, const Analysis& a, std::string out_base)
      : w_(w), s_(s), a_(a), spec_(*a.spec), out_base_(std::move(out_base)) {
    const Loop& innermost = s.order.back();
    hoist_ = level_of(a.levels, innermost) < 0;
    leaf_ = "p" + std::to_string(a.levels.size() - 1);
  }

  void write() { loops_from(0, {}); }

 private:
  /// Where the loops being written are: outside a register block, in its full-size vector copy
  /// (the x0 loop becomes a loop over vectors), or in an array copy whose x0 loop runs to `bound`
  /// (s_x for a full block, x0_end for the remainder).
  struct InBlock {
    enum class Kind { None, Vector, Array } kind = Kind::None;
    std::string bound, row_bound;  ///< trip counts of x0 and (a block with rows) y0
  };

  /// Whether v is the block's column or row variable.
  bool in_block_var(char v) const {
    return a_.block && (v == a_.block->var || (a_.block->rows > 1 && v == a_.block->row_var));
  }
  /// The block's index text: "[y0][x0]" / "[x0]", or with "q" for the vector index.
  std::string block_index(const std::string& column) const {
    const std::string col = "[" + column + "]";
    return a_.block->rows > 1 ? "[" + std::string(1, a_.block->row_var) + "0]" + col : col;
  }

  /// Emits loops t..n-1 and the statement.
  void loops_from(std::size_t t, const InBlock& in) {
    using Kind = InBlock::Kind;
    if (t == a_.n || (in.kind == Kind::Vector && t + 1 == a_.n)) {
      if (t < a_.n)
        for (const std::string& h : hoisted_lines(true)) w_.line(h);
      statement(in);
      return;
    }
    if (a_.block && t == a_.block_outer + 1 && in.kind == Kind::None) {
      write_register_block(t);
      return;
    }
    const Loop& loop = s_.order[t];
    const std::string v(1, loop.var), V = upper(loop.var);
    const bool innermost = t + 1 == a_.n;
    if (a_.accumulate && t == a_.d) w_.line("waco_value_t acc = 0;");
    if (innermost)
      for (const std::string& h : hoisted_lines(in.kind != Kind::None)) w_.line(h);
    if (loop.part == Loop::Part::Inner && !(in.kind != Kind::None && in_block_var(loop.var)))
      w_.line("const long long " + v + "0_end = " + inner_end(loop.var) + ";");
    const int l = level_of(a_.levels, loop);
    const bool balanced = loop == s_.parallel && t == 0 && a_.balance_level >= 0;
    // The outermost loop's own barrier is the region's: nothing follows it in the region but
    // the private copies' sum, which begins with an explicit barrier. So it waits once, as a
    // combined `parallel for` does (a second barrier cost the csr schedule 2-4% against the
    // hand-written csr on 2-10 us SpMV calls, 2 threads).
    const char* nowait = t == 0 ? " nowait" : "";
    if (loop == s_.parallel && !a_.serial && !balanced)
      w_.line(std::string(a_.static_ranges ? "#pragma omp for schedule(static)"
                                           : "#pragma omp for schedule(dynamic, chunk)") + nowait);
    // An innermost plain loop (SpMM's j) that updates the output (or the register block)
    // directly writes a distinct entry per iteration (its variable is in the output offset, else
    // the loop would accumulate in a scalar) and only reads the inputs: declare it a SIMD loop.
    if (innermost && l < 0 && !a_.accumulate &&
        (a_.race_free || a_.privatize || in.kind != Kind::None) && loop != s_.parallel)
      w_.line("#pragma omp simd");
    // An innermost plain loop that only reduces into the scalar (SDDMM's k): a SIMD reduction
    // (without it GCC keeps the float sum in order, one lane at a time).
    if (innermost && l < 0 && a_.accumulate && a_.d + 1 == a_.n && loop != s_.parallel)
      w_.line("#pragma omp simd reduction(+ : acc)");
    const std::string parent = l <= 0 ? "0" : "p" + std::to_string(l - 1);
    if (l < 0) {  // a variable the sparse operand does not have: a plain loop
      const std::string idx = loop.part == Loop::Part::Whole   ? v
                              : loop.part == Loop::Part::Outer ? v + "1"
                                                               : v + "0";
      const std::string bound =
          in.kind == Kind::Array && loop.var == a_.block->var && loop.part == Loop::Part::Inner
              ? in.bound
              : upper_bound(loop);
      w_.open("for (long long " + idx + " = 0; " + idx + " < " + bound + "; ++" + idx + ")");
      bind(loop, idx);
    } else if (s_.formats[static_cast<std::size_t>(l)] == LevelFormat::U) {
      const std::string c = "c" + std::to_string(l), p = "p" + std::to_string(l);
      const bool rows = in.kind != Kind::None && a_.block->rows > 1 &&
                        loop == Loop{a_.block->row_var, Loop::Part::Inner};
      if (rows && in.kind == Kind::Vector) w_.line("#pragma GCC unroll 8");
      if (balanced) {
        balanced_range(loop);
        w_.open("for (long long c0 = c0_lo; c0 < c0_hi; ++c0)");
      } else {
        w_.open("for (long long " + c + " = 0; " + c + " < " + (rows ? in.row_bound : upper_bound(loop)) +
                "; ++" + c + ")");
      }
      w_.line("const long long " + p + " = " +
              (l == 0 ? c : parent + " * A" + std::to_string(l) + "_dim + " + c) + ";");
      bind(loop, c);
    } else {
      const std::string A = "A" + std::to_string(l), p = "p" + std::to_string(l);
      // An int counter, as the positions are (pos is int, so it cannot overflow): with a 64-bit
      // one the csr schedule ran 1-3.5% behind the hand-written csr on cache-resident SpMV
      // (cage10, bcsstk16, wiki-Vote; 0.8-2.2% after), the loads sign-extended each iteration.
      // An innermost N loop is unrolled: GCC 12 vectorizes no gather with 16-bit indices, so
      // the loop stays scalar; in a side-by-side harness of ncsr's kernel (2 threads) unrolled by
      // 8 it took 5.20-5.22 ms against 5.41-5.48 on a 4M-row 5-point stencil, 7.68 against 7.70
      // on a 4M-row banded matrix (11 nonzeros a row). (Not the parallel loop: an OpenMP loop
      // directive must be followed by the loop itself.)
      if (innermost && s_.formats[static_cast<std::size_t>(l)] == LevelFormat::N &&
          (loop != s_.parallel || a_.serial))
        w_.line("#pragma GCC unroll 8");
      w_.open("for (int " + p + " = " + A + "_pos[" + parent + "]; " + p + " < " + A +
              "_pos[" + parent + " + 1]; ++" + p + ")");
      bind(loop, A + "_crd[" + p + "]");
    }
    if (t == 0 && a_.slice_zero) zero_slice(loop);
    loops_from(t + 1, in);
    w_.close();
    if (a_.accumulate && t == a_.d) {
      const std::string sum = factor_value() ? "A_vals[" + leaf_ + "] * acc" : "acc";
      if (a_.write_once)
        w_.line(target() + " = " + sum + ";");
      else
        update(target(), sum);
    }
  }

  /// The register block over loops t..n-1: zeroed, filled by a full-size copy of the loops or,
  /// for the remainder of an extent the block size does not divide, by a copy with the run-time
  /// trip count; then flushed once. The full-size copy accumulates into an array of vectors
  /// (GCC/Clang vector extensions, blk_w values each) that the compiler keeps in registers: with
  /// a plain array and `omp simd`, GCC 12 vectorized the loop over nonzeros instead, with
  /// gathers, and the block ran at 0.25x the speed of csr SpMM (bcsstk13, J=256).
  void write_register_block(std::size_t t) {
    const RegisterBlock& b = *a_.block;
    const std::string x(1, b.var), x0 = x + "0", y(1, b.row_var), y0 = y + "0";
    const bool rows = b.rows > 1;
    w_.line("const long long " + x0 + "_end = " + inner_end(b.var) + ";");
    if (rows) w_.line("const long long " + y0 + "_end = " + inner_end(b.row_var) + ";");
    w_.line(std::string("waco_value_t blk") + (rows ? "[s_" + y + "]" : "") + "[s_" + x + "];");
    w_.open("if (" + x0 + "_end == s_" + x + (rows ? " && " + y0 + "_end == s_" + y : "") + ")");
    if (a_.vector_block) {
      w_.line(std::string("blk_vec blk_v") + (rows ? "[s_" + y + "]" : "") + "[s_" + x +
              " / blk_w] = {};");
      loops_from(t, {InBlock::Kind::Vector, "", "s_" + y});
      w_.line("__builtin_memcpy(blk, blk_v, sizeof blk);");
    } else {
      w_.line("__builtin_memset(blk, 0, sizeof blk);");
      loops_from(t, {InBlock::Kind::Array, "s_" + x, "s_" + y});
    }
    w_.reopen("else");
    w_.line("__builtin_memset(blk, 0, sizeof blk);");
    loops_from(t, {InBlock::Kind::Array, x0 + "_end", y0 + "_end"});
    w_.close();
    if (a_.stream_flush) {  // a block of one row
      w_.open("if (waco_stream)");
      w_.line("const long long " + x + " = " + x + "1 * s_" + x + ";");
      w_.line("waco_stream_store(&waco_writer, &" + out_base_ + "[" + offset(spec_.output) + "], blk, " +
              x0 + "_end);");
      w_.reopen("else");
    }
    if (rows) {
      w_.open("for (long long " + y0 + " = 0; " + y0 + " < " + y0 + "_end; ++" + y0 + ")");
      w_.line("const long long " + y + " = " + y + "1 * s_" + y + " + " + y0 + ";");
    }
    const bool atomic = !a_.race_free && !a_.privatize;
    if (!atomic) w_.line("#pragma omp simd");
    w_.open("for (long long " + x0 + " = 0; " + x0 + " < " + x0 + "_end; ++" + x0 + ")");
    w_.line("const long long " + x + " = " + x + "1 * s_" + x + " + " + x0 + ";");
    const std::string out = out_base_ + "[" + offset(spec_.output) + "]";
    if (a_.write_once)
      w_.line(out + " = blk" + block_index(x0) + ";");
    else
      update(out, "blk" + block_index(x0));
    w_.close();
    if (rows) w_.close();
    if (a_.stream_flush) w_.close();
  }

  /// The vector statement of a full register block: blk_v[q] += A_v * <input blocks>.
  void vector_statement() {
    const std::string x(1, a_.block->var);
    std::string term = "A_v";
    w_.line("#pragma GCC unroll 16");
    w_.open("for (long long q = 0; q < s_" + x + " / blk_w; ++q)");
    for (const Access& in : spec_.inputs) {
      if (!contains(in.vars, a_.block->var)) {
        term += " * " + element(in, in.name);
        continue;
      }
      const std::string row = row_name(in, in.name), v = row + "_v";
      w_.line("blk_vec " + v + ";");
      w_.line("__builtin_memcpy(&" + v + ", " + row + " + " + x + "1 * s_" + x + " + q * blk_w, sizeof " +
              v + ");");
      term += " * " + v;
    }
    w_.line("blk_v" + block_index("q") + " += " + term + ";");
    w_.close();
  }

  void statement(const InBlock& in) {
    if (in.kind == InBlock::Kind::Vector) {
      vector_statement();
      return;
    }
    const bool factored = in.kind == InBlock::Kind::None && factor_value();
    std::string term = factored ? "" : hoist_ ? "A_v" : "A_vals[" + leaf_ + "]";
    for (const Access& in : spec_.inputs) term += (term.empty() ? "" : " * ") + element(in, in.name);
    if (in.kind == InBlock::Kind::Array)
      w_.line("blk" + block_index(std::string(1, a_.block->var) + "0") + " += " + term + ";");
    else if (a_.accumulate)
      w_.line("acc += " + term + ";");
    else
      update(target(), term);
  }

  // A scalar reduction that runs within one nonzero (SDDMM's k, the output sparse: the
  // nonzero's loop encloses the reduction) multiplies by the same value in every step: it is
  // taken out of the sum and applied once at the flush (sum of B*C, then times A), one FMA per
  // step instead of two multiplies and an add, as the hand-written csr SDDMM does.
  bool factor_value() const {
    return hoist_ && a_.accumulate && spec_.sparse_output() && !a_.block;
  }

  void update(const std::string& target, const std::string& rhs) {
    if (!a_.race_free && !a_.privatize) w_.line("#pragma omp atomic");
    w_.line(target + " += " + rhs + ";");
  }

  /// The output entry the statement (or the scalar's flush) updates.
  std::string target() const {
    if (spec_.sparse_output()) return out_base_ + "[" + leaf_ + "]";
    // (A scalar accumulation is flushed outside the innermost loop, where a hoisted row is not
    // in scope; an innermost plain loop indexes a dense output, so that case does not arise.)
    if (a_.accumulate) return out_base_ + "[" + offset(spec_.output) + "]";
    return element(spec_.output, out_base_);
  }

  // Hoisting for an innermost plain loop (SpMM's and MTTKRP's j, SDDMM's k): the nonzero's value
  // and, for every dense access whose last (contiguous) variable is the loop's, the row pointer
  // are loop-invariant; naming them before the loop (as a hand-written kernel does) let GCC
  // vectorize SpMM's j loop without re-deriving the addresses: gen:csr / csr SpMM J=256 went from
  // 1.21 to 0.99 (ca-CondMat, 2 threads, chunk 32) in a side-by-side harness.
  bool hoisted_access(const Access& acc) const {
    const char inner = s_.order.back().var;
    return hoist_ && acc.vars.size() >= 2 && acc.vars.back() == inner &&
           std::count(acc.vars.begin(), acc.vars.end(), inner) == 1;
  }
  std::string row_name(const Access& acc, const std::string& base) const {
    return base + "_" + std::string(acc.vars.begin(), acc.vars.end() - 1);
  }
  std::string element(const Access& acc, const std::string& base) const {
    if (!hoisted_access(acc)) return base + "[" + offset(acc) + "]";
    return row_name(acc, base) + "[" + std::string(1, acc.vars.back()) + "]";
  }
  std::vector<std::string> hoisted_lines(bool in_block) const {
    std::vector<std::string> out;
    if (!hoist_) return out;
    if (in_block || !factor_value()) out.push_back("const waco_value_t A_v = A_vals[" + leaf_ + "];");
    auto row = [&](const Access& acc, const std::string& base, bool writable) {
      if (!hoisted_access(acc)) return;
      const Access prefix{acc.name, std::vector<char>(acc.vars.begin(), acc.vars.end() - 1)};
      // No __restrict on an atomically updated row: other threads write it too.
      const std::string type = !writable ? "const waco_value_t* __restrict "
                               : !a_.race_free && !a_.privatize ? "waco_value_t* "
                                                                : "waco_value_t* __restrict ";
      out.push_back(type + row_name(acc, base) + " = " + base + " + (" + offset(prefix) + ") * " +
                    upper(acc.vars.back()) + ";");
    };
    for (const Access& in : spec_.inputs) row(in, in.name, false);
    if (!spec_.sparse_output() && !a_.accumulate && !in_block) row(spec_.output, out_base_, true);
    return out;
  }

  void bind(const Loop& loop, const std::string& c) {
    const std::string v(1, loop.var);
    if (loop.part == Loop::Part::Whole) {
      if (c != v) w_.line("const long long " + v + " = " + c + ";");
    } else if (loop.part == Loop::Part::Outer) {
      if (c != v + "1") w_.line("const long long " + v + "1 = " + c + ";");
    } else {
      if (c != v + "0") w_.line("const long long " + v + "0 = " + c + ";");
      w_.line("const long long " + v + " = " + v + "1 * s_" + v + " + " + v + "0;");
    }
  }

  /// The trip count of x0: s_x, or what remains of the extent in the last block.
  static std::string inner_end(char var) {
    const std::string v(1, var), V = upper(var);
    return "s_" + v + " < " + V + " - " + v + "1 * s_" + v + " ? s_" + v + " : " + V + " - " + v +
           "1 * s_" + v;
  }

  /// Upper bound of a loop over a part of variable v: x0 stops at the extent (remainders).
  static std::string upper_bound(const Loop& loop) {
    const std::string v(1, loop.var), V = upper(loop.var);
    switch (loop.part) {
      case Loop::Part::Whole: return V;
      case Loop::Part::Outer: return "(" + V + " + s_" + v + " - 1) / s_" + v;
      case Loop::Part::Inner: return v + "0_end";
    }
    return V;
  }

  /// Static ranges balanced by entries: thread q of T starts at the first c0 whose entries
  /// before it (pos of the balance level at c0 * D) reach q/T of them all (binary search).
  void balanced_range(const Loop& loop) {
    const std::string P = "A" + std::to_string(a_.balance_level) + "_pos";
    std::string D = "1";
    for (int l = 1; l < a_.balance_level; ++l)
      D += " * A" + std::to_string(l) + "_dim";
    w_.line("const long long c0_n = " + upper_bound(loop) + ", c0_D = " + D + ";");
    w_.line("const int c0_team = omp_get_num_threads(), c0_me = omp_get_thread_num();");
    w_.line("const long long c0_first = " + P + "[0], c0_all = " + P + "[c0_n * c0_D] - c0_first;");
    w_.open("const auto c0_start = [&](int q) -> long long");
    w_.line("if (q >= c0_team) return c0_n;");
    w_.line("const long long target = c0_first + c0_all * q / c0_team;");
    w_.line("long long lo = 0, hi = c0_n;");
    w_.open("while (lo < hi)");
    w_.line("const long long mid = lo + (hi - lo) / 2;");
    w_.line("if (" + P + "[mid * c0_D] < target) lo = mid + 1; else hi = mid;");
    w_.close();
    w_.line("return lo;");
    w_.close(";");
    w_.line("const long long c0_lo = c0_start(c0_me), c0_hi = c0_start(c0_me + 1);");
  }

  void zero_slice(const Loop& loop) {
    std::string stride = "1";
    for (std::size_t i = 1; i < spec_.output.vars.size(); ++i)
      stride = (i == 1 ? "" : stride + " * ") + upper(spec_.output.vars[i]);
    const std::string v(1, loop.var), V = upper(loop.var);
    const std::string lo = loop.part == Loop::Part::Whole ? v : v + "1 * s_" + v;
    const std::string hi = loop.part == Loop::Part::Whole
                               ? v + " + 1"
                               : "(" + v + "1 + 1) * s_" + v + " < " + V + " ? (" + v + "1 + 1) * s_" +
                                     v + " : " + V;
    w_.line("for (long long q = (" + lo + ") * " + stride + "; q < (" + hi + ") * " + stride +
            "; ++q) " + out_base_ + "[q] = 0;");
  }

  Writer& w_;
  const SuperSchedule& s_;
  const Analysis& a_;
  const KernelSpec& spec_;
  std::string out_base_;
  bool hoist_ = false;
  std::string leaf_;
};

}  // namespace

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

std::string emit_kernel_source(const SuperSchedule& s, RaceStrategy race, SourceForm form,
                               kernels::Dtype dtype) {
  const std::vector<std::string> problems = validate(s);
  WACO_ASSERT(problems.empty(), "emit_kernel_source needs a valid schedule: " +
                                    (problems.empty() ? std::string() : problems.front()));
  WACO_ASSERT(race != RaceStrategy::Auto, "emit_kernel_source needs Atomic or Private");
  const Analysis a = analyze(s, race);
  const KernelSpec& spec = *a.spec;
  const std::string out_name = spec.sparse_output() ? "D_vals" : spec.output.name;

  Writer w;
  write_header(w, s, a, form, dtype);
  w.line(a.privatize ? "// Returns 0, or 1 when the per-thread copies of the output could not be allocated."
                     : "// Returns 0 (kernels with per-thread copies of the output return 1 when they "
                       "cannot allocate them).");
  w.open(form == SourceForm::SharedObject ? "extern \"C\" int waco_kernel(const WacoArgs* a)"
                                          : "inline int waco_kernel(const WacoArgs* a)");
  write_arguments(w, s, a, out_name);
  if (a.privatize) {
    w.line("// copies[t]: where thread t accumulates (copies[0] is the output itself).");
    w.line("waco_value_t** copies = (waco_value_t**)calloc(a->threads, sizeof(waco_value_t*));");
    w.line("if (!copies) return 1;");
    w.line("int team = 0;");
  }
  w.line("");
  if (a.serial) {
    if (!a.write_once && !a.slice_zero)
      w.line("for (long long q = 0; q < a->out_size; ++q) " + out_name + "[q] = 0;");
    if (a.stream_flush) w.line("waco_stream_line waco_writer = {};");
    NestWriter(w, s, a, out_name).write();
    if (a.stream_flush) w.line("if (waco_stream) waco_stream_finish(&waco_writer);");
    w.line("return 0;");
    w.close();  // function
    return w.str();
  }
  w.line("#pragma omp parallel num_threads(a->threads)");
  w.open("");
  if (a.privatize) {
    w.line("const int t = omp_get_thread_num(), team_size = omp_get_num_threads();");
    w.line("if (t == 0) team = team_size;");
    w.line("copies[t] = t == 0 ? " + out_name + " : (waco_value_t*)calloc(a->out_size, sizeof(waco_value_t));");
  }
  if (a.write_once) {
    w.line("// Every output entry is assigned exactly once below: no zeroing pass.");
  } else if (a.slice_zero) {
    w.line("// The output is zeroed slice by slice in the outermost (parallel) loop.");
  } else {
    w.line("#pragma omp for schedule(static)");
    w.line("for (long long q = 0; q < a->out_size; ++q) " + out_name + "[q] = 0;");
  }
  if (a.privatize) {
    // The barrier ending the zeroing loop publishes every copy; all threads then take the same
    // branch, as worksharing loops inside it require.
    w.line("bool allocated = true;");
    w.line("for (int u = 1; u < team_size; ++u) allocated = allocated && copies[u];");
    w.open("if (allocated)");
    w.open("");  // the scope of the __restrict copy ends before the sum reads the output
    w.line("waco_value_t* __restrict " + out_name + "_mine = copies[t];");
  }
  if (a.stream_flush) w.line("waco_stream_line waco_writer = {};  // this thread's");
  NestWriter(w, s, a, a.privatize ? out_name + "_mine" : out_name).write();
  // Each thread ends its own writing before the region's closing barrier.
  if (a.stream_flush) w.line("if (waco_stream) waco_stream_finish(&waco_writer);");
  if (a.privatize) {
    w.close();
    // Sum the copies into the output in blocks, each block by one thread (vectorizable).
    w.line("#pragma omp barrier");
    w.line("#pragma omp for schedule(static)");
    w.open("for (long long b = 0; b < a->out_size; b += 4096)");
    w.line("const long long e = b + 4096 < a->out_size ? b + 4096 : a->out_size;");
    w.open("for (int u = 1; u < team_size; ++u)");
    w.line("const waco_value_t* __restrict copy = copies[u];");
    w.line("for (long long q = b; q < e; ++q) " + out_name + "[q] += copy[q];");
    w.close();
    w.close();
    w.close();  // if (allocated)
  }
  w.close();  // parallel region
  if (a.privatize) {
    w.line("int status = 0;");
    w.line("for (int u = 1; u < team; ++u) status |= copies[u] == nullptr;");
    w.line("for (int u = 1; u < a->threads; ++u) free(copies[u]);");
    w.line("free(copies);");
    w.line("return status;");
  } else {
    w.line("return 0;");
  }
  w.close();  // function
  return w.str();
}

}  // namespace waco::codegen
