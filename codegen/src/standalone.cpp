// The drop-in header of a schedule (emitter.hpp, emit_standalone_header): the kernel in its
// Header form, the schedule's level shapes as constants, and a small generic format builder, all
// inside one namespace. The builder sorts the nonzeros by their level coordinates and assigns
// positions level by level (U: parent x dim + coordinate; C: one position per distinct
// coordinate under a parent), as build_storage defines the format; it is the simple form of that
// algorithm (a comparison sort), not its fast paths, and the tests check it against the
// reference through the kernel.
#include <algorithm>
#include <cctype>
#include <iomanip>
#include <sstream>

#include "standalone_dia.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/serial_bound.hpp"

namespace waco::codegen {

namespace {

// The builder and the calls, the same for every schedule: they read the constants kVars,
// kSparseMode, kLevels, kLevelVar, kLevelPart, kLevelCompressed, kLevelNarrow, kSplit, kThreads, kChunk,
// kSerialMaxNnz, kChunksPerThread, kParallelVar, kStreamMinBytes, kKernel emitted before them.
constexpr const char* kRuntime = R"WACO(
/// The sparse operand in the schedule's format, with what the kernel needs besides the dense
/// arrays. Made by build(); read-only afterwards (calls may share it across threads).
struct Format {
  long long extent[4] = {0, 0, 0, 0};    ///< per variable (the dense one's is set per call)
  std::vector<int> pos[8], crd[8];       ///< C levels (N levels: pos)
  std::vector<unsigned short> crd16[8];  ///< N levels: 16-bit coordinates
  long long level_dim[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::vector<waco_value_t> vals;               ///< one per leaf position (explicit zeros of U levels)
  std::vector<long long> entry_position; ///< input nonzero e -> its leaf position
  long long nnz = 0;
};

namespace detail {

/// The format from nonzeros given by their coordinates per sparse mode (dims[m] each), any order,
/// no coordinate twice. Throws std::invalid_argument on bad input, std::length_error when the
/// format would need more positions than 32-bit indices hold, or an N level more than 65536
/// coordinates (16 bits).
inline Format build_from_coordinates(const long long* dims, long long nnz,
                                     const int* const* coords, const waco_value_t* values) {
  Format f;
  f.nnz = nnz;
  for (int v = 0; v < kVars; ++v)
    if (kSparseMode[v] >= 0) f.extent[v] = dims[kSparseMode[v]];
  for (int m = 0; m < kModes; ++m)
    for (long long e = 0; e < nnz; ++e)
      if (coords[m][e] < 0 || coords[m][e] >= dims[m])
        throw std::invalid_argument("coordinate out of range at nonzero " + std::to_string(e));
  // Level coordinates: whole x, outer x / s, inner x % s.
  std::vector<std::vector<long long>> c(kLevels, std::vector<long long>(nnz));
  for (int l = 0; l < kLevels; ++l) {
    const int v = kLevelVar[l];
    const long long s = kSplit[v] > 0 ? kSplit[v] : 1;
    const int* x = coords[kSparseMode[v]];
    f.level_dim[l] = kLevelPart[l] == 0 ? f.extent[v]
                     : kLevelPart[l] == 1 ? (f.extent[v] + s - 1) / s
                                          : s;
    for (long long e = 0; e < nnz; ++e)
      c[l][e] = kLevelPart[l] == 0 ? x[e] : kLevelPart[l] == 1 ? x[e] / s : x[e] % s;
  }
  for (int l = 0; l < kLevels; ++l)
    if (kLevelNarrow[l] && f.level_dim[l] > 65536)
      throw std::length_error("format refused: level " + std::to_string(l) + " has " +
                              std::to_string(f.level_dim[l]) +
                              " coordinates, more than 16-bit coordinates hold (65536)");
  std::vector<long long> order(nnz);
  for (long long e = 0; e < nnz; ++e) order[e] = e;
  std::sort(order.begin(), order.end(), [&](long long a, long long b) {
    for (int l = 0; l < kLevels; ++l)
      if (c[l][a] != c[l][b]) return c[l][a] < c[l][b];
    return false;
  });
  for (long long t = 1; t < nnz; ++t) {
    bool same = true;
    for (int l = 0; l < kLevels && same; ++l) same = c[l][order[t]] == c[l][order[t - 1]];
    if (same) throw std::invalid_argument("a coordinate appears twice (nonzero " +
                                          std::to_string(order[t]) + ")");
  }
  // The padding bound (as waco-hybrid's own builder): stored values at most kMaxPadding x nnz;
  // a U level may exceed it only within the index arrays' bound; nothing above 32-bit indices.
  const double kMax = 2147483647.0;
  const double value_bound = kMaxPadding * static_cast<double>(nnz > 1 ? nnz : 1);
  double dims_sum = 0;
  for (int l = 0; l < kLevels; ++l) dims_sum += static_cast<double>(f.level_dim[l]);
  const double index_bound = value_bound + 2.0 * dims_sum + 2.0 * kLevels;
  double index_words = 0;
  const auto refuse = [&](int l, double size) {
    throw std::length_error("format refused: level " + std::to_string(l) + " needs " +
                            std::to_string(static_cast<long long>(size)) + " positions for " +
                            std::to_string(nnz) + " nonzeros, over the padding bound");
  };
  std::vector<long long> parent(nnz, 0);  // position at the level above, per sorted nonzero
  long long size = 1;                     // positions at the level above
  for (int l = 0; l < kLevels; ++l) {
    if (!kLevelCompressed[l]) {
      const long long dim = f.level_dim[l];
      const double grown = static_cast<double>(size) * static_cast<double>(dim);
      if ((grown > value_bound && grown > index_bound) || grown > kMax) refuse(l, grown);
      for (long long t = 0; t < nnz; ++t) parent[t] = parent[t] * dim + c[l][order[t]];
      size *= dim;
      continue;
    }
    index_words += static_cast<double>(size) + 1;
    if (index_words > index_bound || static_cast<double>(size) + 1 > kMax) refuse(l, size + 1.0);
    std::vector<int>& pos = f.pos[l];
    std::vector<int>& crd = f.crd[l];
    pos.assign(static_cast<std::size_t>(size + 1), 0);
    long long last_parent = -1, last_coord = -1;
    for (long long t = 0; t < nnz; ++t) {
      const long long x = c[l][order[t]];
      if (parent[t] != last_parent || x != last_coord) {
        last_parent = parent[t];
        last_coord = x;
        crd.push_back(static_cast<int>(x));
        ++pos[static_cast<std::size_t>(parent[t] + 1)];
      }
      parent[t] = static_cast<long long>(crd.size()) - 1;
    }
    for (long long p = 0; p < size; ++p) pos[p + 1] += pos[p];
    size = static_cast<long long>(crd.size());
    index_words += static_cast<double>(size);
    if (kLevelNarrow[l]) {  // below level_dim <= 65536: every coordinate fits
      f.crd16[l].assign(crd.begin(), crd.end());
      std::vector<int>().swap(crd);
    }
  }
  if (static_cast<double>(size) > value_bound) refuse(kLevels - 1, static_cast<double>(size));
  f.vals.assign(static_cast<std::size_t>(size), 0.0f);
  f.entry_position.resize(nnz);
  for (long long t = 0; t < nnz; ++t) {
    f.vals[parent[t]] = values != nullptr ? values[order[t]] : waco_value_t(1);
    f.entry_position[order[t]] = parent[t];
  }
  return f;
}

/// The variable of the sparse operand's first mode (its rows).
inline long long row_extent() {
  for (int v = 0; v < kVars; ++v)
    if (kSparseMode[v] == 0) return v;
  return 0;
}

/// This thread's 64-byte aligned buffer of at least n values (kept between calls; it only grows).
inline waco_value_t* staging_buffer(long long n) {
  struct Buffer {
    waco_value_t* p = nullptr;
    long long n = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local Buffer b;
  if (b.n < n) {
    std::free(b.p);
    b.p = nullptr;
    b.n = 0;
    const std::size_t bytes = (static_cast<std::size_t>(n) * sizeof(waco_value_t) + 63) / 64 * 64;
    b.p = static_cast<waco_value_t*>(std::aligned_alloc(64, bytes));
    if (b.p == nullptr) throw std::bad_alloc();
    b.n = n;
  }
  return b.p;
}

/// Copies n values of a staged output to the caller's array, on `threads` threads when large.
inline void copy_staged(const waco_value_t* from, waco_value_t* to, long long n, int threads) {
  const long long piece = 16384;  // values
  const long long pieces = (n + piece - 1) / piece;
  #pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && pieces >= 4)
  for (long long q = 0; q < pieces; ++q)
    std::copy(from + q * piece, from + std::min(n, (q + 1) * piece), to + q * piece);
}

/// Runs the kernel: in0, in1 and out laid out as the calls below say, `dense` the extent of the
/// dense-only variable (ignored by SpMV).
inline void run(const Format& f, const waco_value_t* in0, const waco_value_t* in1, waco_value_t* out,
                long long out_size, long long dense) {
  WacoArgs a{};
  for (int l = 0; l < kLevels; ++l) {
    a.pos[l] = f.pos[l].empty() ? nullptr : f.pos[l].data();
    // An N level's 16-bit coordinates go in the crd slot (the kernel reads them as such).
    a.crd[l] = kLevelNarrow[l] ? static_cast<const int*>(static_cast<const void*>(f.crd16[l].data()))
               : f.crd[l].empty() ? nullptr
                                  : f.crd[l].data();
    a.level_dim[l] = f.level_dim[l];
  }
  a.vals = f.vals.data();
  a.in[0] = in0;
  a.in[1] = in1;
  // A kernel that adds into the output's rows (kStageUnalignedOutput) runs 1.5-1.9x slower into
  // an output 16 or 48 bytes past a 64-byte line, as malloc's, std::vector's and NumPy's arrays
  // can be (its row updates, 32-byte vectors, straddle cache lines): it then writes this
  // thread's aligned buffer, copied out.
  waco_value_t* target = out;
  if (kStageUnalignedOutput && out_size > 0 &&
      reinterpret_cast<unsigned long long>(out) % kStagedAlignment != 0)
    target = staging_buffer(out_size);
  a.out = target;
  a.out_size = out_size;
  for (int v = 0; v < kVars; ++v) {
    a.extent[v] = kSparseMode[v] >= 0 ? f.extent[v] : dense;
    a.split[v] = kSplit[v];
  }
  a.threads = kThreads > 0 ? kThreads : omp_get_max_threads();
  a.chunk = kChunk;
  // The hand-written csr SpMV baseline's rule (kSerialMaxNnz and kChunksPerThread are 0 for
  // every other header): small products on one thread, the parallel loop's iterations (csr: rows;
  // dcsr: its nonempty rows) in about kChunksPerThread dynamic chunks a thread of at least kChunk.
  if (f.nnz <= kSerialMaxNnz) a.threads = 1;
  if (kChunksPerThread > 0 && a.threads > 1) {
    // A compressed outermost level (dcsr) runs over its stored coordinates only.
    const bool stored = kLevelVar[0] == kParallelVar && kLevelPart[0] == 0 && kLevelCompressed[0];
    const long long iterations = !stored ? f.extent[kParallelVar]
                                 : kLevelNarrow[0] ? static_cast<long long>(f.crd16[0].size())
                                                   : static_cast<long long>(f.crd[0].size());
    const long long parts = std::max<long long>(1, static_cast<long long>(kChunksPerThread) * a.threads);
    a.chunk = static_cast<int>(std::max<long long>(kChunk, (iterations + parts - 1) / parts));
  }
  // Outputs larger than the last-level cache of the machine the header was made on are written
  // with streaming stores, as the plan that was measured writes them (kStreamMinBytes: 0 when
  // the kernel has no streaming flush).
  a.stream_out = kStreamMinBytes > 0 && out_size * static_cast<long long>(sizeof(waco_value_t)) > kStreamMinBytes &&
                 reinterpret_cast<unsigned long long>(target) % sizeof(waco_value_t) == 0;
  if (waco_kernel(&a) != 0) throw std::bad_alloc();
  if (target != out) copy_staged(target, out, out_size, a.threads);
}

}  // namespace detail
)WACO";

// Call 1 for matrices (CSR in) and the calls of each kernel.
constexpr const char* kMatrixBuild = R"WACO(
/// Call 1: the format of a rows x cols matrix given as CSR (rowptr: rows + 1 offsets from 0;
/// colind: the column of each nonzero; values may be null for a pattern, every value 1). Rows'
/// columns need not be sorted; a coordinate may not appear twice.
template <typename Offset>
inline Format build(long long rows, long long cols, const Offset* rowptr, const int* colind,
                    const waco_value_t* values) {
  if (rows < 0 || cols < 0 || rowptr == nullptr) throw std::invalid_argument("bad CSR arguments");
  const long long nnz = static_cast<long long>(rowptr[rows]);
  std::vector<int> row(nnz);
  for (long long r = 0; r < rows; ++r) {
    if (rowptr[r + 1] < rowptr[r] || rowptr[r + 1] > nnz)
      throw std::invalid_argument("rowptr is not non-decreasing at row " + std::to_string(r));
    for (long long e = rowptr[r]; e < rowptr[r + 1]; ++e) row[e] = static_cast<int>(r);
  }
  const long long dims[2] = {rows, cols};
  const int* coords[2] = {row.data(), colind};
  return detail::build_from_coordinates(dims, nnz, coords, values);
}
)WACO";

constexpr const char* kTensorBuild = R"WACO(
/// Call 1: the format of a dims[0] x dims[1] x dims[2] tensor given by coordinates (i, k, l per
/// nonzero, any order, no coordinate twice); values may be null (every value 1).
inline Format build(const long long dims[3], long long nnz, const int* i, const int* k,
                    const int* l, const waco_value_t* values) {
  const int* coords[3] = {i, k, l};
  return detail::build_from_coordinates(dims, nnz, coords, values);
}
)WACO";

constexpr const char* kSpmvCall = R"WACO(
/// Call 2: y = A x (x: cols values, y: rows values, overwritten).
inline void spmv(const Format& f, const waco_value_t* x, waco_value_t* y) {
  detail::run(f, x, nullptr, y, f.extent[detail::row_extent()], 1);
}
)WACO";

constexpr const char* kSpmmCall = R"WACO(
/// Call 2: C = A B for n columns (B: cols x n, C: rows x n, both row-major and packed; C is
/// overwritten).
inline void spmm(const Format& f, long long n, const waco_value_t* B, waco_value_t* C) {
  detail::run(f, B, nullptr, C, f.extent[detail::row_extent()] * n, n);
}
)WACO";

constexpr const char* kSddmmCall = R"WACO(
/// Call 2: out[e] = a_e * dot(U[row_e, :], V[col_e, :]) for the nonzeros e in the order given to
/// build (U: rows x k, V: cols x k, both row-major and packed; out: nnz values).
inline void sddmm(const Format& f, long long k, const waco_value_t* U, const waco_value_t* V, waco_value_t* out) {
  std::vector<waco_value_t> stored(f.vals.size());
  detail::run(f, U, V, stored.data(), static_cast<long long>(stored.size()), k);
  for (long long e = 0; e < f.nnz; ++e) out[e] = stored[f.entry_position[e]];
}
)WACO";

constexpr const char* kMttkrpCall = R"WACO(
/// Call 2: out(i, j) = sum of T(i, k, l) B(k, j) C(l, j) for n columns (B: dims[1] x n,
/// C: dims[2] x n, out: dims[0] x n, all row-major and packed; out is overwritten).
inline void mttkrp(const Format& f, long long n, const waco_value_t* B, const waco_value_t* C, waco_value_t* out) {
  detail::run(f, B, C, out, f.extent[detail::row_extent()] * n, n);
}
)WACO";

std::string list(const std::vector<long long>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

bool is_cpp_identifier(const std::string& name) {
  return !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
         });
}

std::string emit_standalone_header(const SuperSchedule& schedule, RaceStrategy race,
                                   const std::string& name_space, const std::string& note,
                                   double max_padding, kernels::Dtype dtype,
                                   const std::string& baseline) {
  const SuperSchedule s = canonicalize(schedule);
  const std::vector<std::string> problems = validate(s);
  WACO_ASSERT(problems.empty(), "emit_standalone_header needs a valid schedule: " +
                                    (problems.empty() ? std::string() : problems.front()));
  WACO_ASSERT(!name_space.empty(), "emit_standalone_header needs a namespace");
  if (baseline == kDiaBaseline) {
    WACO_ASSERT(s.kind == kernels::KernelKind::SpMV, "the dia baseline's header is SpMV's");
    return detail::dia_standalone_header(name_space, note, dtype, s.threads);
  }
  const KernelSpec& spec = kernel_spec(s.kind);
  const std::string kernel(kernels::kernel_name(s.kind));
  const bool tensor = kernels::needs_tensor(s.kind);

  std::vector<long long> sparse_mode, split, level_var, level_part, compressed, narrow;
  for (std::size_t v = 0; v < spec.vars.size(); ++v) {
    long long mode = -1;
    for (std::size_t m = 0; m < spec.sparse_vars.size(); ++m)
      if (spec.sparse_vars[m] == spec.vars[v]) mode = static_cast<long long>(m);
    sparse_mode.push_back(mode);
    split.push_back(s.split[v]);
  }
  const std::vector<Loop> levels = s.levels();
  for (std::size_t l = 0; l < levels.size(); ++l) {
    level_var.push_back(spec.var_index(levels[l].var));
    level_part.push_back(levels[l].part == Loop::Part::Whole ? 0 : levels[l].part == Loop::Part::Outer ? 1 : 2);
    compressed.push_back(is_compressed(s.formats[l]) ? 1 : 0);
    narrow.push_back(s.formats[l] == LevelFormat::N ? 1 : 0);
  }

  std::ostringstream h;
  h << "// waco-hybrid drop-in kernel: " << kernel << " in " << kernels::dtype_ctype(dtype)
    << " (waco_value_t) with the schedule\n//   " << to_text(s) << "\n";
  if (!note.empty()) {
    std::istringstream lines(note);
    std::string line;
    while (std::getline(lines, line)) h << "// " << line << "\n";
  }
  h << "//\n// One self-contained header: no waco-hybrid header or library is needed. Compile with a\n"
       "// C++17 compiler and OpenMP, e.g. g++ -O3 -march=native -fopenmp -std=c++17. Two calls:\n";
  if (tensor)
    h << "//   " << name_space << "::Format f = " << name_space
      << "::build(dims, nnz, i, k, l, values);  // once\n"
      << "//   " << name_space << "::mttkrp(f, n, B, C, out);                // every time\n";
  else
    h << "//   " << name_space << "::Format f = " << name_space
      << "::build(rows, cols, rowptr, colind, values);  // once (CSR)\n"
      << "//   " << name_space << "::"
      << (s.kind == kernels::KernelKind::SpMV   ? "spmv(f, x, y);"
          : s.kind == kernels::KernelKind::SpMM ? "spmm(f, n, B, C);"
                                                : "sddmm(f, k, U, V, out);")
      << "                              // every time\n";
  h << "// Threads: the schedule's, or omp_get_max_threads() when it says 0.\n\n"
       "#pragma once\n\n#include <omp.h>\n\n#include <algorithm>\n#include <cstdlib>\n"
       "#include <new>\n#include <stdexcept>\n#include <string>\n#include <vector>\n\n";
  const bool streams = streams_output(s);
  if (streams) h << "#if defined(__SSE2__)\n#include <immintrin.h>  // the output's streaming stores\n#endif\n\n";
  h << "namespace " << name_space << " {\n\n";
  // Generated loops declare every level's arrays; some go unused.
  h << "#if defined(__GNUC__)\n#pragma GCC diagnostic push\n"
       "#pragma GCC diagnostic ignored \"-Wunused-variable\"\n"
       "#pragma GCC diagnostic ignored \"-Wunused-but-set-variable\"\n#endif\n\n";
  h << emit_kernel_source(s, race, SourceForm::Header, dtype);
  h << "\n#if defined(__GNUC__)\n#pragma GCC diagnostic pop\n#endif\n\n";
  h << "// The schedule's shape, read by the builder and the calls below.\n";
  h << "inline constexpr int kVars = " << spec.vars.size() << ";\n";
  h << "inline constexpr int kModes = " << spec.sparse_vars.size() << ";\n";
  h << "inline constexpr int kSparseMode[" << spec.vars.size() << "] = {" << list(sparse_mode)
    << "};  // per variable: its mode of the sparse operand, or -1\n";
  h << "inline constexpr long long kSplit[" << spec.vars.size() << "] = {" << list(split) << "};\n";
  h << "inline constexpr int kLevels = " << levels.size() << ";\n";
  h << "inline constexpr int kLevelVar[" << levels.size() << "] = {" << list(level_var) << "};\n";
  h << "inline constexpr int kLevelPart[" << levels.size() << "] = {" << list(level_part)
    << "};  // 0 whole, 1 outer (x / s), 2 inner (x % s)\n";
  const auto flags = [](const std::vector<long long>& v) {
    std::string t;
    for (std::size_t l = 0; l < v.size(); ++l) t += std::string(l ? ", " : "") + (v[l] ? "true" : "false");
    return t;
  };
  h << "inline constexpr bool kLevelCompressed[" << levels.size() << "] = {" << flags(compressed)
    << "};  // C and N levels\n";
  h << "inline constexpr bool kLevelNarrow[" << levels.size() << "] = {" << flags(narrow)
    << "};  // N levels: 16-bit coordinates\n";
  h << "inline constexpr int kThreads = " << s.threads << ";\n";
  // The csr SpMV baseline's run-time rule (kernels/baseline_loops.hpp) for chunk=auto, the csr
  // schedule's chunk: also when that baseline serves the plan (its schedule is the csr schedule).
  const bool csr_spmv_rule = s.chunk == kAutoChunk;
  WACO_ASSERT(csr_spmv_rule || !(baseline == "csr" && s.kind == kernels::KernelKind::SpMV),
              "the csr baseline's header needs the csr schedule (chunk=auto), not " + to_text(s));
  h << "inline constexpr int kChunk = " << (csr_spmv_rule ? kernels::kCsrSpmvMinChunk : s.chunk)
    << ";\n";
  // The serial bound of this machine for the header's threads (serial_bound.hpp; a header run
  // elsewhere keeps the bound of the machine that wrote it).
  const int rule_threads = s.threads > 0 ? s.threads : kernels::available_cpus();
  h << "inline constexpr long long kSerialMaxNnz = "
    << (csr_spmv_rule && rule_threads >= 2 ? kernels::csr_spmv_serial_nnz(rule_threads, dtype) : 0)
    << ";  // at most this many nonzeros: one thread\n";
  h << "inline constexpr int kChunksPerThread = "
    << (csr_spmv_rule ? kernels::kCsrSpmvChunksPerThread : 0)
    << ";  // > 0: dynamic chunks of max(kChunk, iterations / (this x threads))\n";
  h << "inline constexpr int kParallelVar = " << spec.var_index(s.parallel.var)
    << ";  // the parallel loop's variable (unsplit when kChunksPerThread > 0)\n";
  h << "inline constexpr long long kStreamMinBytes = " << (streams ? stream_output_min_bytes() : 0)
    << ";  // > 0: outputs larger (bytes) stream (the last-level cache where it was made)\n";
  h << "inline constexpr bool kStageUnalignedOutput = "
    << (updates_output_rows(s) ? "true" : "false")
    << ";  // an output off kStagedAlignment: the kernel writes an aligned buffer, copied out\n";
  h << "inline constexpr unsigned long long kStagedAlignment = " << kStagedOutputAlignment
    << ";  // bytes: its row updates run on vectors of this size\n";
  h << "inline constexpr double kMaxPadding = " << max_padding
    << ";  // stored values per nonzero the builder accepts\n";
  h << kRuntime << (tensor ? kTensorBuild : kMatrixBuild);
  switch (s.kind) {
    case kernels::KernelKind::SpMV: h << kSpmvCall; break;
    case kernels::KernelKind::SpMM: h << kSpmmCall; break;
    case kernels::KernelKind::SDDMM: h << kSddmmCall; break;
    case kernels::KernelKind::MTTKRP: h << kMttkrpCall; break;
  }
  h << "\n}  // namespace " << name_space << "\n";
  return h.str();
}

}  // namespace waco::codegen
