// The loop-nest generator. One pass over the schedule's loop order emits, for each loop, either a
// sparse level (U: by index, C: by position) or a plain loop for a variable the sparse operand
// lacks, then the statement of the KernelSpec at the innermost point. When the innermost loops
// only reduce (none of them indexes the output), the statement accumulates into a register that is
// added to the output once after them (TACO's scalar workspace for CSR SpMV).
//
// The source depends only on what is fixed at compile time: run-time values (threads, chunk and
// the split sizes that are not constants) are printed in the header as placeholders, so that
// schedules differing only in them share one source, one cache key and one compiled kernel.
#include "waco/codegen/emitter.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

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

std::string join(const std::vector<std::string>& xs, const std::string& sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < xs.size(); ++i) out += (i ? sep : "") + xs[i];
  return out;
}

/// The level of the sparse operand that loop `loop` iterates, or -1 (a dense-only variable).
int level_of(const std::vector<Loop>& levels, const Loop& loop) {
  const auto it = std::find(levels.begin(), levels.end(), loop);
  return it == levels.end() ? -1 : static_cast<int>(it - levels.begin());
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
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
  int indent_ = 0;
};

}  // namespace

bool parallel_loop_is_race_free(const SuperSchedule& s) {
  return contains(output_coordinate_vars(kernel_spec(s.kind)), s.parallel.var);
}

bool split_is_constant(const SuperSchedule& s, char v) {
  // Measured (issue 4): a constant block size lets the compiler unroll small BCSR blocks of SpMV
  // (time ratio constant/run-time 0.53-0.78 on bcsr4x4), while SpMM, whose dense j is innermost,
  // showed no consistent gain; larger blocks keep one kernel for every size.
  const std::vector<Loop> levels = s.levels();
  const int split = s.split_of(v);
  const int inner = level_of(levels, {v, Loop::Part::Inner});
  return split > 1 && split <= kMaxConstantSplit && level_of(levels, s.order.back()) >= 0 &&
         inner >= 0 && s.formats[inner] == LevelFormat::U;
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

std::string emit_kernel_source(const SuperSchedule& s, RaceStrategy race) {
  const std::vector<std::string> problems = validate(s);
  WACO_ASSERT(problems.empty(), "emit_kernel_source needs a valid schedule: " +
                                    (problems.empty() ? std::string() : problems.front()));
  WACO_ASSERT(race != RaceStrategy::Auto, "emit_kernel_source needs Atomic or Private");
  const KernelSpec& spec = kernel_spec(s.kind);
  const std::vector<Loop> levels = s.levels();
  const std::vector<char> out_vars = output_coordinate_vars(spec);
  const bool race_free = parallel_loop_is_race_free(s);
  const bool privatize = !race_free && race == RaceStrategy::Private;
  const std::size_t n = s.order.size();

  // Depth d after which every loop only reduces: those loops accumulate into a register.
  std::size_t d = n;
  while (d > 0) {
    const Loop& l = s.order[d - 1];
    const bool indexes_output =
        contains(out_vars, l.var) || (spec.sparse_output() && spec.is_sparse_var(l.var));
    if (indexes_output) break;
    --d;
  }
  const bool accumulate = d < n;
  // Write-once: every output entry is flushed exactly once when the loops outside the reduction
  // are all output loops, none of them compressed for a dense output (a C level skips entries)
  // and the parallel loop among them. Then the flush assigns and the output is not zeroed first.
  bool write_once = accumulate;
  for (std::size_t t = 0; t < d && write_once; ++t) {
    const Loop& l = s.order[t];
    if (spec.sparse_output()) {
      write_once = spec.is_sparse_var(l.var);
    } else {
      const auto lv = std::find(levels.begin(), levels.end(), l);
      const bool compressed =
          lv != levels.end() && s.formats[lv - levels.begin()] == LevelFormat::C;
      write_once = contains(out_vars, l.var) && !compressed;
    }
  }
  if (write_once) {
    const auto par = std::find(s.order.begin(), s.order.end(), s.parallel);
    write_once = static_cast<std::size_t>(par - s.order.begin()) < d;
  }

  // Split sizes: constants, or run-time arguments printed as placeholders s_x.
  std::vector<std::string> split_text, constants, run_time;
  std::vector<long long> constant_split(kMaxVars, 0);
  for (std::size_t v = 0; v < spec.vars.size(); ++v) {
    if (s.split[v] == 1) continue;
    const std::string x(1, spec.vars[v]), size = std::to_string(s.split[v]);
    if (split_is_constant(s, spec.vars[v])) {
      constant_split[v] = s.split[v];
      split_text.push_back(x + ":" + size);
      constants.push_back("s_" + x + " = " + size);
    } else {
      split_text.push_back(x + ":s_" + x);
      run_time.push_back("s_" + x);
    }
  }
  run_time.insert(run_time.end(), {"threads", "chunk"});
  SuperSchedule shape = s;  // threads and chunk printed as their defaults
  shape.threads = 0;
  shape.chunk = 1;
  std::string text = to_text(shape);
  if (!split_text.empty()) {  // to_text prints the split field first: replace it
    WACO_ASSERT(text.rfind("split=", 0) == 0, "to_text no longer prints split first: " + text);
    text = "split=" + join(split_text, ",") + text.substr(text.find(' '));
  }

  Writer w;
  w.line("// Generated by waco-hybrid (codegen ABI " + std::to_string(kAbiVersion) + ") for " +
         std::string(kernels::kernel_name(s.kind)) + ":");
  w.line("//   " + text + "  (" + join(run_time) + ": set at run time)");
  w.line("// Sparse levels (loop: format):");
  for (std::size_t l = 0; l < levels.size(); ++l)
    w.line("//   A" + std::to_string(l) + " " + levels[l].name() + ": " +
           (s.formats[l] == LevelFormat::U ? "U (dense interval)" : "C (pos/crd)"));
  if (!constants.empty())
    w.line("// Compile-time constants (small U blocks at the innermost point): " + join(constants) +
           ".");
  w.line("// Run-time arguments (WacoArgs): extents, " + join(run_time) + ".");
  if (privatize) {
    w.line("// The parallel loop " + s.parallel.name() + " does not index the output: thread 0 "
           "accumulates into the output,");
    w.line("// every other thread into its own zeroed copy, summed into the output after the loop.");
  } else if (!race_free) {
    w.line("// The parallel loop " + s.parallel.name() +
           " does not index the output: updates are atomic.");
  }
  w.line("");
  if (privatize) {
    w.line("#include <cstdlib>");
    w.line("#include <omp.h>");
    w.line("");
  }
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
  for (long long c : constant_split) constant_text.push_back(std::to_string(c));
  w.line("// Per variable, its split size when it is a compile-time constant, else 0 (the host checks it).");
  w.line("extern \"C\" const long long waco_constant_split[" + std::to_string(kMaxVars) + "] = {" +
         join(constant_text) + "};");
  w.line("");
  w.line(privatize ? "// Returns 0, or 1 when the per-thread copies of the output could not be allocated."
                   : "// Returns 0 (kernels with per-thread copies of the output return 1 when they "
                     "cannot allocate them).");
  w.open("extern \"C\" int waco_kernel(const WacoArgs* a)");
  for (std::size_t v = 0; v < spec.vars.size(); ++v) {
    const std::string x(1, spec.vars[v]), index = std::to_string(v);
    w.line("const long long " + upper(spec.vars[v]) + " = a->extent[" + index + "];");
    if (constant_split[v] > 0)
      w.line("constexpr long long s_" + x + " = " + std::to_string(constant_split[v]) + ";");
    else if (s.split[v] > 1)
      w.line("const long long s_" + x + " = a->split[" + index + "];");
  }
  for (std::size_t l = 0; l < levels.size(); ++l) {
    const std::string A = "A" + std::to_string(l);
    if (s.formats[l] == LevelFormat::C) {
      w.line("const int* __restrict " + A + "_pos = a->pos[" + std::to_string(l) + "];");
      w.line("const int* __restrict " + A + "_crd = a->crd[" + std::to_string(l) + "];");
    } else {
      w.line("const long long " + A + "_dim = a->level_dim[" + std::to_string(l) + "];");
    }
  }
  w.line("const float* __restrict A_vals = a->vals;");
  for (std::size_t i = 0; i < spec.inputs.size(); ++i)
    w.line("const float* __restrict " + spec.inputs[i].name + " = a->in[" + std::to_string(i) + "];");
  const std::string out_name = spec.sparse_output() ? "D_vals" : spec.output.name;
  // Private: thread 0's copy is the output itself, so the output pointer cannot be __restrict.
  w.line(std::string(privatize ? "float* " : "float* __restrict ") + out_name + " = a->out;");
  w.line("const int chunk = a->chunk;");
  if (privatize) {
    w.line("// copies[t]: where thread t accumulates (copies[0] is the output itself).");
    w.line("float** copies = (float**)calloc(a->threads, sizeof(float*));");
    w.line("if (!copies) return 1;");
    w.line("int team = 0;");
  }
  w.line("");
  w.line("#pragma omp parallel num_threads(a->threads)");
  w.open("");
  if (privatize) {
    w.line("const int t = omp_get_thread_num(), team_size = omp_get_num_threads();");
    w.line("if (t == 0) team = team_size;");
    w.line("copies[t] = t == 0 ? " + out_name + " : (float*)calloc(a->out_size, sizeof(float));");
  }
  // Slice zeroing: when the outermost loop is the parallel loop and runs over every coordinate
  // of the output's leading variable (U level or plain loop, whole or outer part), iteration v
  // alone touches the output slice of v: zero it there, while it is about to be used, instead of
  // a separate pass over the whole output (for SpMM that pass costs as much as the kernel).
  const Loop& first = s.order.front();
  const int first_level = level_of(levels, first);
  const bool slice_zero = !write_once && !spec.sparse_output() && first == s.parallel &&
                          first.var == spec.output.vars.front() && first.part != Loop::Part::Inner &&
                          (first_level < 0 || s.formats[first_level] == LevelFormat::U);
  std::string slice_stride = "1";
  for (std::size_t i = 1; i < spec.output.vars.size(); ++i)
    slice_stride = (i == 1 ? "" : slice_stride + " * ") + upper(spec.output.vars[i]);
  if (write_once) {
    w.line("// Every output entry is assigned exactly once below: no zeroing pass.");
  } else if (slice_zero) {
    w.line("// The output is zeroed slice by slice in the outermost (parallel) loop.");
  } else {
    w.line("#pragma omp for schedule(static)");
    w.line("for (long long q = 0; q < a->out_size; ++q) " + out_name + "[q] = 0.0f;");
  }
  if (privatize) {
    // The barrier ending the zeroing loop publishes every copy; all threads then take the same
    // branch, as worksharing loops inside it require.
    w.line("bool allocated = true;");
    w.line("for (int u = 1; u < team_size; ++u) allocated = allocated && copies[u];");
    w.open("if (allocated)");
    w.open("");  // the scope of the __restrict copy ends before the sum reads the output
    w.line("float* __restrict " + out_name + "_mine = copies[t];");
  }

  auto bind = [&](const Loop& loop, const std::string& c) {
    const std::string v(1, loop.var);
    if (loop.part == Loop::Part::Whole) {
      if (c != v) w.line("const long long " + v + " = " + c + ";");
    } else if (loop.part == Loop::Part::Outer) {
      if (c != v + "1") w.line("const long long " + v + "1 = " + c + ";");
    } else {
      if (c != v + "0") w.line("const long long " + v + "0 = " + c + ";");
      w.line("const long long " + v + " = " + v + "1 * s_" + v + " + " + v + "0;");
    }
  };
  // Upper bound of a loop over a part of variable v: x0 stops at the extent (remainders).
  auto upper_bound = [&](const Loop& loop) -> std::string {
    const std::string v(1, loop.var), V = upper(loop.var);
    switch (loop.part) {
      case Loop::Part::Whole: return V;
      case Loop::Part::Outer: return "(" + V + " + s_" + v + " - 1) / s_" + v;
      case Loop::Part::Inner: return v + "0_end";
    }
    return V;
  };

  auto zero_slice = [&](const Loop& loop) {
    const std::string v(1, loop.var), V = upper(loop.var);
    const std::string lo = loop.part == Loop::Part::Whole ? v : v + "1 * s_" + v;
    const std::string hi = loop.part == Loop::Part::Whole
                               ? v + " + 1"
                               : "(" + v + "1 + 1) * s_" + v + " < " + V + " ? (" + v + "1 + 1) * s_" +
                                     v + " : " + V;
    w.line("for (long long q = (" + lo + ") * " + slice_stride + "; q < (" + hi + ") * " +
           slice_stride + "; ++q) " + out_name + "[q] = 0.0f;");
  };
  // Hoisting for an innermost plain loop (SpMM's and MTTKRP's j, SDDMM's k): the nonzero's value
  // and, for every dense access whose last (contiguous) variable is the loop's, the row pointer
  // are loop-invariant; naming them before the loop (as a hand-written kernel does) let GCC
  // vectorize SpMM's j loop without re-deriving the addresses: gen:csr / csr SpMM J=256 went from
  // 1.21 to 0.99 (ca-CondMat, 2 threads, chunk 32) in a side-by-side harness.
  const Loop& innermost = s.order.back();
  const bool hoist = level_of(levels, innermost) < 0;
  std::vector<std::string> hoisted_lines;
  auto element = [&](const Access& acc, const std::string& base, bool writable) {
    const std::vector<char>& vars = acc.vars;
    if (!hoist || vars.size() < 2 || vars.back() != innermost.var ||
        std::count(vars.begin(), vars.end(), innermost.var) != 1)
      return base + "[" + offset(acc) + "]";
    const Access prefix{acc.name, std::vector<char>(vars.begin(), vars.end() - 1)};
    const std::string row = base + "_" + std::string(prefix.vars.begin(), prefix.vars.end());
    // No __restrict on an atomically updated row: other threads write it too.
    const std::string type = writable ? (!race_free && !privatize ? "float* " : "float* __restrict ")
                                      : "const float* __restrict ";
    hoisted_lines.push_back(type + row + " = " + base + " + (" + offset(prefix) + ") * " +
                            upper(vars.back()) + ";");
    return row + "[" + std::string(1, vars.back()) + "]";
  };
  const std::string leaf = "p" + std::to_string(levels.size() - 1);
  std::string term = "A_vals[" + leaf + "]";
  if (hoist) {
    hoisted_lines.push_back("const float A_v = A_vals[" + leaf + "];");
    term = "A_v";
  }
  for (const Access& in : spec.inputs) term += " * " + element(in, in.name, false);
  // (A register accumulation is flushed outside the innermost loop, where a hoisted row is not
  // in scope; an innermost plain loop indexes a dense output, so that case does not arise.)
  const std::string out_base = privatize ? out_name + "_mine" : out_name;
  const std::string target =
      spec.sparse_output() ? out_base + "[" + leaf + "]"
      : accumulate         ? out_base + "[" + offset(spec.output) + "]"
                           : element(spec.output, out_base, true);

  for (std::size_t t = 0; t < n; ++t) {
    const Loop& loop = s.order[t];
    const std::string v(1, loop.var), V = upper(loop.var);
    if (accumulate && t == d) w.line("float acc = 0.0f;");
    if (t + 1 == n)
      for (const std::string& h : hoisted_lines) w.line(h);
    if (loop.part == Loop::Part::Inner)
      w.line("const long long " + v + "0_end = s_" + v + " < " + V + " - " + v + "1 * s_" + v +
             " ? s_" + v + " : " + V + " - " + v + "1 * s_" + v + ";");
    if (loop == s.parallel) w.line("#pragma omp for schedule(dynamic, chunk)");
    // An innermost plain loop (SpMM's j) that updates the output directly writes a distinct
    // entry per iteration (its variable is in the output offset, else the loop would
    // accumulate in a register) and only reads the inputs: declare it a SIMD loop.
    if (t + 1 == n && level_of(levels, loop) < 0 && !accumulate && (race_free || privatize) &&
        loop != s.parallel)
      w.line("#pragma omp simd");
    // An innermost plain loop that only reduces into the register (SDDMM's k): a SIMD reduction
    // (without it GCC keeps the float sum in order, one lane at a time).
    if (t + 1 == n && level_of(levels, loop) < 0 && accumulate && d + 1 == n && loop != s.parallel)
      w.line("#pragma omp simd reduction(+ : acc)");
    const int l = level_of(levels, loop);
    const std::string parent = l <= 0 ? "0" : "p" + std::to_string(l - 1);
    if (l < 0) {  // a variable the sparse operand does not have: a plain loop
      const std::string idx = loop.part == Loop::Part::Whole ? v : loop.part == Loop::Part::Outer ? v + "1" : v + "0";
      w.open("for (long long " + idx + " = 0; " + idx + " < " + upper_bound(loop) + "; ++" + idx + ")");
      bind(loop, idx);
    } else if (s.formats[l] == LevelFormat::U) {
      const std::string c = "c" + std::to_string(l), p = "p" + std::to_string(l);
      w.open("for (long long " + c + " = 0; " + c + " < " + upper_bound(loop) + "; ++" + c + ")");
      w.line("const long long " + p + " = " + (l == 0 ? c : parent + " * A" + std::to_string(l) + "_dim + " + c) + ";");
      bind(loop, c);
    } else {
      const std::string A = "A" + std::to_string(l), p = "p" + std::to_string(l);
      w.open("for (long long " + p + " = " + A + "_pos[" + parent + "]; " + p + " < " + A + "_pos[" +
             parent + " + 1]; ++" + p + ")");
      bind(loop, A + "_crd[" + p + "]");
    }
    if (t == 0 && slice_zero) zero_slice(loop);
  }

  // The statement at the innermost point (term and target are built above, with the hoisting).
  auto update = [&](const std::string& rhs) {
    if (!race_free && !privatize) w.line("#pragma omp atomic");
    w.line(target + " += " + rhs + ";");
  };
  if (accumulate)
    w.line("acc += " + term + ";");
  else
    update(term);
  for (std::size_t t = n; t-- > 0;) {
    w.close();
    if (accumulate && t == d) {
      if (write_once)
        w.line(target + " = acc;");
      else
        update("acc");
    }
  }
  if (privatize) {
    w.close();
    // Sum the copies into the output in blocks, each block by one thread (vectorizable).
    w.line("#pragma omp barrier");
    w.line("#pragma omp for schedule(static)");
    w.open("for (long long b = 0; b < a->out_size; b += 4096)");
    w.line("const long long e = b + 4096 < a->out_size ? b + 4096 : a->out_size;");
    w.open("for (int u = 1; u < team_size; ++u)");
    w.line("const float* __restrict copy = copies[u];");
    w.line("for (long long q = b; q < e; ++q) " + out_name + "[q] += copy[q];");
    w.close();
    w.close();
    w.close();  // if (allocated)
  }
  w.close();  // parallel region
  if (privatize) {
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
