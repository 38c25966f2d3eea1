// The loop nest of a schedule (write_nest, the generator's last step: emitter.cpp): NestWriter
// emits one loop per entry of the schedule's loop order, from the outermost: a sparse level (U: by
// index, C and N: by position) or a plain loop for a variable the sparse operand lacks, the
// register block (its full-size vector copy and the remainder's array copy, then its flush), the
// hoisted rows of an innermost plain loop, the static ranges balanced by entries, the output's
// slice zeroing, and the KernelSpec's statement at the innermost point.
#include "emit_internal.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace waco::codegen {

using namespace detail;

namespace {

/// Row-major offset of an access: a*EXT(b) + b for two variables, a for one.
std::string offset(const Access& a) {
  std::string off;
  for (std::size_t i = 0; i < a.vars.size(); ++i) {
    const std::string v(1, a.vars[i]);
    off = i == 0 ? v : "(" + off + ") * " + upper(a.vars[i]) + " + " + v;
  }
  return off;
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

namespace detail {

void write_nest(Writer& w, const SuperSchedule& s, const Analysis& a, std::string out_base) {
  NestWriter(w, s, a, std::move(out_base)).write();
}

}  // namespace detail

}  // namespace waco::codegen
