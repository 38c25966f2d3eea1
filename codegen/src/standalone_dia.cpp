// The drop-in header of a plan the dia baseline serves (emitter.hpp, emit_standalone_header with
// baseline "dia"): the same two calls as every drop-in header, build() from CSR arrays and
// spmv(), over diagonal storage, with the loop of kernels/baseline_loops.hpp (dia_spmv): rows in
// static ranges of whole blocks of kDiaBlockRows, one range a thread; rows where every diagonal
// lies inside the matrix in tiles of partial sums held in registers, each diagonal prefetched
// ahead, the others in blocks; every row sums its diagonals in increasing offset with vector
// loops; serially up to the serial bound in stored values. The tests check it
// against the reference through a separate program (tests/test_standalone.cpp).
#include "standalone_dia.hpp"

#include <sstream>

#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/serial_bound.hpp"

namespace waco::codegen::detail {

namespace {

constexpr const char* kDiaRuntime = R"WACO(
/// The matrix in diagonal storage. Made by build(); read-only afterwards (calls may share it
/// across threads).
struct Format {
  long long rows = 0, cols = 0;
  std::vector<int> offsets;         ///< col - row of each stored diagonal, increasing
  std::vector<waco_value_t> vals;   ///< diagonal d's rows at [d * rows, (d + 1) * rows), 0 where no entry
};

namespace detail {

/// The first row of thread q's range of `threads` (whole blocks; the last thread takes the rest).
inline long long range_start(long long rows, int threads, int q) {
  if (q >= threads) return rows;
  const long long blocks = (rows + kBlockRows - 1) / kBlockRows;
  return std::min(rows, blocks * q / threads * kBlockRows);
}

/// y[lo, hi) in blocks of kBlockRows (rows where a diagonal may leave the matrix).
inline void blocks_of(const Format& f, const waco_value_t* x, waco_value_t* y, long long lo, long long hi) {
  waco_value_t acc[kBlockRows];
  for (long long i0 = lo; i0 < hi; i0 += kBlockRows) {
    const long long i1 = std::min(hi, i0 + kBlockRows);
    std::fill(acc, acc + (i1 - i0), waco_value_t(0));
    for (std::size_t d = 0; d < f.offsets.size(); ++d) {
      const long long o = f.offsets[d];
      // Rows of the block whose column i + o exists.
      const long long first = std::max(i0, -o), last = std::min(i1, f.cols - o);
      const waco_value_t* v = f.vals.data() + d * static_cast<std::size_t>(f.rows);
#pragma omp simd
      for (long long i = first; i < last; ++i) acc[i - i0] += v[i] * x[i + o];
    }
    std::copy(acc, acc + (i1 - i0), y + i0);
  }
}

/// y[lo, hi): rows where every diagonal lies inside the matrix in tiles of kTileBytes of partial
/// sums held in registers, each diagonal's values prefetched kPrefetchBytes ahead; the others in
/// blocks_of.
inline void rows_of(const Format& f, const waco_value_t* x, waco_value_t* y, long long lo, long long hi) {
  constexpr long long W = kTileBytes / static_cast<long long>(sizeof(waco_value_t));
  constexpr long long ahead = kPrefetchBytes / static_cast<long long>(sizeof(waco_value_t));
  constexpr long long line = 64 / static_cast<long long>(sizeof(waco_value_t));
  long long t0 = hi, t1 = hi;  // the tiles: [t0, t1)
  if (!f.offsets.empty()) {
    const long long inside_lo = std::max<long long>(lo, -static_cast<long long>(f.offsets.front()));
    const long long inside_hi = std::min<long long>(hi, f.cols - f.offsets.back());
    t0 = std::min(hi, (inside_lo + W - 1) / W * W);
    t1 = inside_hi > t0 ? t0 + (inside_hi - t0) / W * W : t0;
  }
  blocks_of(f, x, y, lo, t0);
  for (long long i = t0; i < t1; i += W) {
    waco_value_t acc[W];
#pragma omp simd
    for (long long t = 0; t < W; ++t) acc[t] = waco_value_t(0);
    for (std::size_t d = 0; d < f.offsets.size(); ++d) {
      const waco_value_t* v = f.vals.data() + d * static_cast<std::size_t>(f.rows) + i;
      const waco_value_t* xd = x + i + f.offsets[d];
      for (long long l = 0; l < W; l += line) __builtin_prefetch(v + ahead + l);
#pragma omp simd
      for (long long t = 0; t < W; ++t) acc[t] += v[t] * xd[t];
    }
#pragma omp simd
    for (long long t = 0; t < W; ++t) y[i + t] = acc[t];
  }
  blocks_of(f, x, y, t1, hi);
}

}  // namespace detail

/// Call 1: the diagonal storage of a rows x cols matrix given as CSR (rowptr: rows + 1 offsets
/// from 0; colind: the column of each nonzero; values may be null for a pattern, every value 1).
/// Rows' columns need not be sorted; a coordinate may not appear twice. Throws
/// std::invalid_argument on bad input, std::length_error when the diagonals would store more
/// than kMaxFill values a nonzero.
template <typename Offset>
inline Format build(long long rows, long long cols, const Offset* rowptr, const int* colind,
                    const waco_value_t* values) {
  if (rows < 0 || cols < 0 || rowptr == nullptr) throw std::invalid_argument("bad CSR arguments");
  Format f;
  f.rows = rows;
  f.cols = cols;
  const long long nnz = static_cast<long long>(rowptr[rows]);
  for (long long r = 0; r < rows; ++r) {
    if (rowptr[r + 1] < rowptr[r] || rowptr[r + 1] > nnz)
      throw std::invalid_argument("rowptr is not non-decreasing at row " + std::to_string(r));
    for (long long e = rowptr[r]; e < rowptr[r + 1]; ++e)
      if (colind[e] < 0 || colind[e] >= cols)
        throw std::invalid_argument("coordinate out of range at nonzero " + std::to_string(e));
  }
  // The diagonals holding a nonzero (offset col - row, marked at col - row + rows - 1).
  std::vector<char> holds(rows > 0 && cols > 0 ? static_cast<std::size_t>(rows + cols - 1) : 0, 0);
  for (long long r = 0; r < rows; ++r)
    for (long long e = rowptr[r]; e < rowptr[r + 1]; ++e) holds[colind[e] - r + rows - 1] = 1;
  for (std::size_t s = 0; s < holds.size(); ++s)
    if (holds[s]) f.offsets.push_back(static_cast<int>(static_cast<long long>(s) - (rows - 1)));
  const long long stored = static_cast<long long>(f.offsets.size()) * rows;
  if (stored > kMaxFill * std::max(nnz, 1LL))
    throw std::length_error("the nonzeros lie on " + std::to_string(f.offsets.size()) +
                            " diagonals: more than " + std::to_string(kMaxFill) +
                            " stored values a nonzero");
  f.vals.assign(static_cast<std::size_t>(stored), waco_value_t(0));
  std::vector<char> placed(static_cast<std::size_t>(stored), 0);
  for (long long r = 0; r < rows; ++r)
    for (long long e = rowptr[r]; e < rowptr[r + 1]; ++e) {
      const long long d = std::lower_bound(f.offsets.begin(), f.offsets.end(), colind[e] - r) - f.offsets.begin();
      const std::size_t at = static_cast<std::size_t>(d * rows + r);
      if (placed[at]) throw std::invalid_argument("coordinate given twice at nonzero " + std::to_string(e));
      placed[at] = 1;
      f.vals[at] = values ? values[e] : waco_value_t(1);
    }
  return f;
}

/// Call 2: y = A x (x: cols values, y: rows values, overwritten).
inline void spmv(const Format& f, const waco_value_t* x, waco_value_t* y) {
  const int threads = kThreads > 0 ? kThreads : omp_get_max_threads();
  if (threads <= 1 || static_cast<long long>(f.vals.size()) <= kSerialMaxStored) {
    detail::rows_of(f, x, y, 0, f.rows);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int q = omp_get_thread_num(), team = omp_get_num_threads();
    detail::rows_of(f, x, y, detail::range_start(f.rows, team, q), detail::range_start(f.rows, team, q + 1));
  }
}
)WACO";

}  // namespace

std::string dia_standalone_header(const std::string& name_space, const std::string& note,
                                  kernels::Dtype dtype, int threads) {
  std::ostringstream h;
  h << "// waco-hybrid drop-in kernel: spmv in " << kernels::dtype_ctype(dtype)
    << " (waco_value_t) on diagonal storage (the dia baseline)\n";
  if (!note.empty()) {
    std::istringstream lines(note);
    std::string line;
    while (std::getline(lines, line)) h << "// " << line << "\n";
  }
  h << "//\n// One self-contained header: no waco-hybrid header or library is needed. Compile with a\n"
       "// C++17 compiler and OpenMP, e.g. g++ -O3 -march=native -fopenmp -std=c++17. Two calls:\n"
    << "//   " << name_space << "::Format f = " << name_space
    << "::build(rows, cols, rowptr, colind, values);  // once (CSR)\n"
    << "//   " << name_space << "::spmv(f, x, y);                              // every time\n"
    << "// Threads: " << (threads > 0 ? std::to_string(threads) : "omp_get_max_threads()") << ".\n\n"
    << "#pragma once\n\n#include <omp.h>\n\n#include <algorithm>\n#include <cstddef>\n"
       "#include <stdexcept>\n#include <string>\n#include <vector>\n\n";
  h << "namespace " << name_space << " {\n\n";
  h << "using waco_value_t = " << kernels::dtype_ctype(dtype) << ";\n";
  h << "inline constexpr int kThreads = " << threads << ";  // 0: omp_get_max_threads()\n";
  h << "inline constexpr long long kMaxFill = " << kernels::kDiaMaxFill
    << ";  // stored values per nonzero the builder accepts\n";
  const int rule_threads = threads > 0 ? threads : kernels::available_cpus();  // as standalone.cpp
  h << "inline constexpr long long kSerialMaxStored = "
    << (rule_threads >= 2 ? kernels::csr_spmv_serial_nnz(rule_threads, dtype) : 0)
    << ";  // at most this many stored values: one thread\n";
  h << "inline constexpr long long kBlockRows = " << kernels::kDiaBlockRows
    << ";  // rows a block sums in the L1 cache\n";
  h << "inline constexpr long long kTileBytes = " << kernels::kDiaTileBytes
    << ";  // partial sums a tile holds in registers\n";
  h << "inline constexpr long long kPrefetchBytes = " << kernels::kDiaPrefetchBytes
    << ";  // how far ahead each diagonal's values are prefetched\n";
  h << kDiaRuntime;
  h << "\n}  // namespace " << name_space << "\n";
  return h.str();
}

}  // namespace waco::codegen::detail
