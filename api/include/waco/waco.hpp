// waco-hybrid as a library: tune a sparse kernel for one matrix, then run the tuned kernel on your
// own arrays, as many times as you like.
//
//   #include <waco/waco.hpp>
//
//   waco::Matrix A = waco::Matrix::from_csr(rows, cols, rowptr, colind, values);
//   waco::Options opt;
//   opt.expected_calls = 5000;               // what tuning may cost depends on how often you call
//   waco::Plan plan = waco::tune(A, waco::Kernel::SpMV, opt);
//   for (int it = 0; it < 5000; ++it) plan.spmv(x, y);   // y = A x
//   plan.save("A.plan");                     // later: waco::Plan::load("A.plan", A)
//
// What tune does, by default: it returns at once with an adaptive plan that serves csr, and
// between your calls, as far as they pay for it, asks the tuning cache, lets the learned cost
// model choose a few nominees among the kernels compiled into the library (SpMV: their list's
// most frequent winners, in its order), tries them on your own calls (each verified against csr
// first) and settles on the fastest, or on csr
// (Options::adaptive). With Options::adaptive = false (or a setting only a measured tune has:
// another search, a budget, a results database, ...), the first call for a matrix searches the
// formats and schedules of the kernel with the waco-hybrid pipeline (signature-driven passes, the
// learned cost model, side-by-side measurement against csr) before it returns; candidate kernels
// are measured in an isolated worker process (spawned, not forked: it works after your program
// has run OpenMP, and a crashing candidate cannot take your program down). Either decision is kept
// in a tuning cache keyed by the matrix's content, the kernel, the dense size, the threads and
// this machine; the next measured tune of the same matrix returns it without searching, the next
// adaptive plan tries it first. The Plan runs in your process: it holds the matrix converted to the winning format and the compiled
// kernel (compiled once, cached on disk; a C++ compiler must be on PATH the first time a schedule
// is compiled, unless the kernels installed with the library hold it: those load without one).
//
// A plan never loses to csr: when no schedule beats csr by more than the measurement noise, the
// plan runs the csr schedule (verdict() == "no-gain"), and with expected_calls set, when tuning
// cannot pay for itself within those calls it does not search (verdict() == "not-worth-it"). An
// adaptive plan says "exploring" until it settles.
//
// Errors throw waco::Error with the message the waco-hybrid CLI prints and, where there is one, a
// hint. No third-party type appears in this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#if defined(__GNUC__)
#define WACO_API __attribute__((visibility("default")))
#else
#define WACO_API
#endif

namespace waco {

/// What went wrong, in the words of the CLI, and a hint of what to do (may be empty).
class WACO_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string hint = {});
  const std::string& hint() const noexcept { return hint_; }

 private:
  std::string hint_;
};

/// tune() stopped because Options::interrupt asked it to: not a failure of the input. The
/// measuring processes were ended, nothing unfinished was stored, no decision was cached; the
/// same call again tunes (reusing what a results database kept).
class WACO_API Interrupted : public Error {
 public:
  using Error::Error;
};

enum class Kernel {
  SpMV,   ///< y = A x
  SpMM,   ///< C = A B (B: cols x n, C: rows x n)
  SDDMM,  ///< out = A .* (U V^T) at A's nonzeros (U: rows x k, V: cols x k)
  MTTKRP  ///< out(i, j) = sum T(i, k, l) B(k, j) C(l, j) (a 3-D tensor T)
};

/// "spmv", "spmm", "sddmm", "mttkrp".
WACO_API const char* kernel_name(Kernel k);

/// The value type a matrix holds and a plan computes in: single or double precision.
enum class Dtype { F32, F64 };
/// "f32", "f64".
WACO_API const char* dtype_name(Dtype d);

/// A sparse matrix or 3-D tensor handle: the operand canonicalized (sorted, one entry per
/// coordinate) and owned (the caller's arrays may be freed after construction). Cheap to copy.
/// Its value type is that of the values it was made from (float: Dtype::F32, double:
/// Dtype::F64), and plans of it compute in that type.
class WACO_API Matrix {
 public:
  /// From CSR arrays: rowptr has rows + 1 entries starting at 0; the column indices of each row
  /// are ascending and distinct and below cols; values are finite. Throws Error otherwise
  /// (naming the first offending row or entry).
  static Matrix from_csr(std::int64_t rows, std::int64_t cols, const std::int64_t* rowptr,
                         const std::int32_t* colind, const float* values);
  static Matrix from_csr(std::int64_t rows, std::int64_t cols, const std::int32_t* rowptr,
                         const std::int32_t* colind, const float* values);
  static Matrix from_csr(std::int64_t rows, std::int64_t cols, const std::int64_t* rowptr,
                         const std::int32_t* colind, const double* values);
  static Matrix from_csr(std::int64_t rows, std::int64_t cols, const std::int32_t* rowptr,
                         const std::int32_t* colind, const double* values);
  /// From coordinates (0-based, any order; repeated coordinates are summed in the values'
  /// type). values may be null (a pattern: every value 1; a literal nullptr makes an F32
  /// pattern, a null `const double*` an F64 one).
  static Matrix from_coo(std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                         const std::int32_t* row, const std::int32_t* col, const float* values);
  static Matrix from_coo(std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                         const std::int32_t* row, const std::int32_t* col, const double* values);
  static Matrix from_coo(std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                         const std::int32_t* row, const std::int32_t* col, std::nullptr_t) {
    return from_coo(rows, cols, nnz, row, col, static_cast<const float*>(nullptr));
  }
  /// A 3-D tensor (for MTTKRP) from coordinates, as from_coo.
  static Matrix tensor_from_coo(const std::int64_t dims[3], std::int64_t nnz,
                                const std::int32_t* i, const std::int32_t* k,
                                const std::int32_t* l, const float* values);
  static Matrix tensor_from_coo(const std::int64_t dims[3], std::int64_t nnz,
                                const std::int32_t* i, const std::int32_t* k,
                                const std::int32_t* l, const double* values);
  static Matrix tensor_from_coo(const std::int64_t dims[3], std::int64_t nnz,
                                const std::int32_t* i, const std::int32_t* k,
                                const std::int32_t* l, std::nullptr_t) {
    return tensor_from_coo(dims, nnz, i, k, l, static_cast<const float*>(nullptr));
  }
  /// A Matrix Market file (.mtx, .mtx.gz; symmetric ones expanded) or a FROSTT tensor (.tns,
  /// .tns.gz), its values read in `dtype` (F64: exactly as written, to double's precision).
  static Matrix from_file(const std::string& path, Dtype dtype = Dtype::F32);

  int order() const;            ///< 2 for a matrix, 3 for a tensor
  std::int64_t rows() const;    ///< dims(0)
  std::int64_t cols() const;    ///< dims(1)
  std::int64_t dim(int mode) const;
  std::int64_t nnz() const;     ///< stored entries after canonicalization
  /// The content fingerprint (16 hex digits) that names the matrix in the tuning cache, the
  /// results database and the CLI's output.
  std::string fingerprint() const;
  /// F32 or F64: the values' type, and so the type its plans compute in.
  Dtype dtype() const;
  /// The matrix as CSR arrays (canonical order), e.g. to run a reference next to a plan. The
  /// values of an F64 matrix into float are rounded.
  void csr(std::int64_t* rowptr, std::int32_t* colind, float* values) const;
  void csr(std::int64_t* rowptr, std::int32_t* colind, double* values) const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Matrix(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

/// How to tune. The defaults suit an application: an adaptive plan, whose nominees the learned
/// model proposes and your own calls measure; the decision is cached.
struct Options {
  int threads = 0;                 ///< threads of the kernel (0: every available core)
  /// The search, as `waco-hybrid tune --search`: "model" (the learned cost model ranks every
  /// admissible schedule, the best `budget` are measured side by side with csr), "anns", "random", "exhaustive".
  std::string search = "model";
  int budget = 0;                  ///< candidates to measure (0: the search's default)
  double budget_seconds = 0.0;     ///< stop measuring after this long (0: no limit)
  /// Calls of the kernel you expect to make: tuning then takes at most tuning_share of their csr
  /// time, and returns csr when even one candidate cannot pay for itself (0: no bound).
  std::int64_t expected_calls = 0;
  double tuning_share = 0.1;
  int dense = 0;                   ///< n of SpMM/MTTKRP, k of SDDMM to tune for (0: spmm 256, mttkrp 16, sddmm 256)
  /// The tuning cache folder (empty: ~/.cache/waco-hybrid/plans, or under $XDG_CACHE_HOME).
  std::string cache_dir;
  bool use_cache = true;           ///< false: neither read nor write the tuning cache
  bool refresh = false;            ///< tune again even when the cache holds a decision
  /// Where compiled kernels are kept (empty: ~/.cache/waco-hybrid/kernels).
  std::string kernel_cache_dir;
  bool verbose = false;            ///< the search's notes and warnings on stderr (without `progress`)
  /// The trimming passes before the search, as `waco-hybrid tune --passes` ("all", "legality",
  /// or a comma-separated list: `waco-hybrid space --list-passes`).
  std::string passes = "all";
  /// Candidates measured side by side after the search (-1: the search's default; 0 with a model
  /// search: the model decides alone, its best guarded by one side-by-side run against csr).
  int confirm = -1;
  std::uint64_t seed = 1;          ///< of the dense operands tuned with and of seeded searches
  /// A results database (SQLite) where every measurement is kept and reused by later tunes of
  /// the same matrix (empty: none, nothing is written).
  std::string results_db;
  /// Called with each line of what tuning does and warns of (from the calling thread; none
  /// during a kernel call). Unset: `verbose` decides whether they go to stderr.
  std::function<void(const std::string& line)> progress;
  /// Asked by tune() whether to stop, from the calling thread: between its steps and about every
  /// 0.1 s while candidates are measured (unset: never). Returning true stops the tune within
  /// about that time: the measuring processes (worker, measuring child, compiler) are killed, the
  /// measurement in progress is not stored in results_db (the ones finished before are, whole),
  /// no decision is cached, and tune() throws Interrupted. For Ctrl-C, return a flag your SIGINT
  /// handler sets (the Python module calls PyErr_CheckSignals here). A kernel compiled for the
  /// returned plan after the search (usually cached or shipped already) is stopped too.
  std::function<bool()> interrupt;
  /// Tune on your own calls instead of before returning: tune() returns at once with a plan
  /// that serves csr (nothing asked of the tuning cache yet). Between your calls, one step at a
  /// time and only once the calls have paid for it, the plan asks the tuning cache (a cached
  /// gain becomes its only nominee, a cached no-gain settles on csr), else prepares the cost
  /// model's best `nominees` schedules (SpMV: the first `nominees` of the shipped kernels' list,
  /// their most frequent winners, with no model); it tries them on your calls (each verified against csr
  /// on a real call before a result of it is returned), keeps the fastest if it beats csr by the
  /// decision rule of `waco-hybrid tune`, and stores that decision in the tuning cache. What it
  /// explores is bounded by `tuning_share` of the csr time of `expected_calls` (or, with none,
  /// of the calls made so far). A kernel not in the compile cache is compiled only when the
  /// calls can pay for it, by a low-priority thread, for a later plan. Needs a search that
  /// ranks with the model ("model", "anns").
  /// Unset (the default): adaptive, unless a setting asks for what only a measured tune does:
  /// a search that does not rank with the model, `budget`, `budget_seconds`, `confirm`,
  /// `results_db`, `schedules`, `measure_first`, `explain` or `check_recall` (then measured).
  /// true: adaptive (with a search that does not rank with the model, an Error); false: a tune
  /// measured before tune() returns.
  std::optional<bool> adaptive;
  int nominees = 5;  ///< adaptive: the schedules tried on your calls (at most 2 of one kernel)
  /// A measured tune (or a cached decision) whose verdict is a gain: before tune() returns, the
  /// chosen kernel is timed against csr in this process, in blocks of consecutive calls on
  /// operands made here (~25-60 ms; at most ~1 s for long calls), since a process can see the
  /// two kernels differently from the measuring processes that decided. Holds (the chosen one
  /// faster): speedup() and break_even_calls() are this process's figures. Does not: csr serves,
  /// verdict() "no-gain". report_json()'s "in_process" says what it measured. false: no check,
  /// speedup() is the measuring processes' figure.
  bool check_in_process = true;

  // The rest of `waco-hybrid tune`'s settings, for studies and reproductions: each is the CLI
  // option of the same name (dashes as underscores; `waco-hybrid tune --help` says what it does,
  // and gives its range and default), and an unset one (empty, false) is the CLI's default. An
  // application needs none of them. A value out of the CLI's range is an Error.
  /// --model: a cost model file (empty: this machine's calibrated model at this dense size when
  /// `waco-hybrid calibrate [--dense J]` made one, else the shipped one; the report's "model"
  /// says which).
  std::string model;
  bool no_calibration = false;      ///< --no-calibration (also: WACO_NO_CALIBRATION=1)
  std::string index;                ///< --index: the HNSW graph of search "anns"
  bool check_recall = false;        ///< --check-recall (search "anns")
  bool explain = false;             ///< --explain: the report's "explain"
  /// --schedules: a file of schedules (one a line) measured instead of a search; not a decision:
  /// the tuning cache is neither asked nor written.
  std::string schedules;
  bool measure_first = false;       ///< --measure-first (model searches)
  std::optional<int> repeat;        ///< --repeat: timed runs per candidate (10)
  std::optional<int> warmup;        ///< --warmup (2)
  std::optional<int> confirm_rounds;  ///< --confirm-rounds (20)
  std::optional<int> decide_runs;     ///< --decide-runs (3)
  std::optional<int> decide_extra_runs;  ///< --decide-extra-runs (2; 0: never)
  std::optional<int> per_structure;   ///< --per-structure (3; 0: the model's order alone)
  std::optional<int> layouts;         ///< --layouts (4; 1: one memory layout)
  std::optional<int> decide_rounds;   ///< --decide-rounds (20)
  std::optional<int> decide_leaders;  ///< --decide-leaders (3)
  std::optional<int> halving_keep;    ///< --halving-keep (6; 0: none)
  std::optional<double> decide_drop;  ///< --decide-drop (1.05; <= 1: none)
  std::optional<double> decide_clear; ///< --decide-clear (0.5; 0: every fresh run)
  bool decide_always = false;         ///< --decide-always
  bool decide_together = false;       ///< --decide-together
  std::optional<double> min_gain;       ///< --min-gain (0.02)
  std::optional<double> verdict_level;  ///< --verdict-level (0.9)
  std::optional<double> max_disturbed;  ///< --max-disturbed (0.1)
  /// --side-by-side-memory: bytes one side-by-side child may hold for its kernels' formats and
  /// outputs (0 or unset: a quarter of the machine's); nominees that do not fit go in heats.
  std::optional<std::int64_t> side_by_side_memory;
  std::optional<double> timeout;          ///< --timeout: seconds to verify and time (60)
  std::optional<double> compile_timeout;  ///< --compile-timeout (300)
  std::optional<double> tolerance;        ///< --tolerance (1e-4)
  std::optional<double> abandon_factor;   ///< --abandon-factor (3; 0: off)
  bool retry_failed = false;              ///< --retry-failed (with results_db)
  /// --compiler: the C++ compiler of generated kernels (empty: c++); part of the tuning cache's
  /// key (the machine), and used for the plan's kernel too.
  std::string compiler;
  std::optional<double> max_padding;  ///< --max-padding (20)
  std::string race;                   ///< --race: "atomic", "private" or "auto" (empty: auto)
  std::optional<int> tile_window;            ///< --tile-window (0)
  std::optional<double> max_block_padding;   ///< --max-block-padding (2)
  std::optional<int> min_chunks_per_thread;  ///< --min-chunks-per-thread (1)
  std::optional<int> chunk_window;           ///< --chunk-window (2)
  std::optional<std::int64_t> max_serial_work;  ///< --max-serial-work (16384)
  std::string cache_level;                   ///< --cache-level: llc-core, l1, l2, l3 (llc-core)
  std::optional<std::int64_t> cache_bytes;   ///< --cache-bytes (overrides cache_level)
  std::optional<double> cache_fraction;      ///< --cache-fraction (0.5)
};

/// A tuned kernel for one matrix: the matrix in the winning format and the compiled kernel.
/// Cheap to copy (shared); calls may run concurrently from several threads of the caller (each
/// call runs the kernel on `threads()` OpenMP threads).
class WACO_API Plan {
 public:
  Kernel kernel() const;
  /// The winning schedule (`waco-hybrid run --schedule` text form); the csr schedule when a
  /// hand-written baseline serves (implementation() other than "generated").
  std::string schedule() const;
  /// What runs the calls: "generated" (schedule()'s generated kernel); "csr" ("csf" for MTTKRP)
  /// when no schedule beat csr and the hand-written baseline ran faster than the csr schedule
  /// side by side; or "dia" (SpMV) when the diagonal-storage baseline beat csr (the
  /// diagonal-storage pass admits it where the matrix's diagonals store at most 2 values a
  /// nonzero). A baseline is compiled into the library: the plan serves the kernel that was
  /// measured.
  std::string implementation() const;
  /// "gain" (a schedule beat csr side by side), "no-gain" (csr runs), "not-worth-it" (the
  /// expected calls could not pay for a search: csr runs), "given" (make_plan).
  std::string verdict() const;
  /// Speedup over the faster csr reference (the csr schedule or the hand-written csr baseline),
  /// the median per-round ratio of the fresh side-by-side runs that decided the gain (timed in
  /// the tune's measuring processes: in your process it can differ, by -24% to +57% on six gains
  /// measured, experiments/README.md); for an
  /// adaptive plan, of the pairs of calls that judged it, or once a recheck of the gain held,
  /// of the rechecks' blocks of consecutive calls (1 for csr; 0 when unknown).
  double speedup() const;
  /// Calls after which the tuning paid for itself (negative when it never does or is unknown).
  double break_even_calls() const;
  /// Seconds this tune call took (searching, or reading the cache, plus building the plan).
  double tuning_seconds() const;
  bool from_cache() const;
  int threads() const;
  int dense() const;               ///< the dense size the plan was tuned for
  /// The type it computes in (its matrix's): its calls take arrays of that type (float for F32,
  /// double for F64); the other type's arrays are refused (Error).
  Dtype dtype() const;
  /// The whole report of the tune that decided (`waco-hybrid tune --json`), as JSON text; for an
  /// adaptive plan its state: calls, nominees, timings, cost, budget, decision.
  std::string report_json() const;
  /// An adaptive plan's calls so far, and those among them that ran a nominee or verified one
  /// (0 for other plans). verdict() is "exploring" until it settles on "gain", "no-gain" or
  /// "not-worth-it"; schedule() is what serves calls now (csr while exploring).
  std::int64_t calls() const;
  std::int64_t exploring_calls() const;

  /// y = A x. x: cols values, y: rows values (overwritten).
  void spmv(const float* x, float* y) const;
  void spmv(const double* x, double* y) const;
  /// C = A B for n columns: B is cols x n row-major with leading dimension ldb >= n, C is rows x n
  /// row-major with ldc >= n (overwritten).
  void spmm(std::int64_t n, const float* B, std::int64_t ldb, float* C, std::int64_t ldc) const;
  void spmm(std::int64_t n, const double* B, std::int64_t ldb, double* C, std::int64_t ldc) const;
  /// out[e] = a_e * dot(U[row_e, :], V[col_e, :]) over the nonzeros e in CSR order: U is rows x k
  /// (ldu >= k), V is cols x k (ldv >= k), both row-major; out holds nnz values.
  void sddmm(std::int64_t k, const float* U, std::int64_t ldu, const float* V, std::int64_t ldv,
             float* out) const;
  void sddmm(std::int64_t k, const double* U, std::int64_t ldu, const double* V, std::int64_t ldv,
             double* out) const;
  /// out(i, j) = sum over T(i, k, l) of T(i, k, l) B(k, j) C(l, j) for n columns: B is dim(1) x n,
  /// C is dim(2) x n, out is dim(0) x n (overwritten), all row-major with their leading dimensions.
  void mttkrp(std::int64_t n, const float* B, std::int64_t ldb, const float* C, std::int64_t ldc,
              float* out, std::int64_t ldo) const;
  void mttkrp(std::int64_t n, const double* B, std::int64_t ldb, const double* C, std::int64_t ldc,
              double* out, std::int64_t ldo) const;

  /// The drop-in header of the kernel that serves calls now (`waco-hybrid tune -o`, `emit
  /// --standalone`): one self-contained C++17/OpenMP file, nothing of waco-hybrid needed, with
  /// schedule()'s kernel (generated with the race strategy this plan's kernel was built with), a
  /// builder of its format from CSR arrays (coordinates for MTTKRP) and the call, in namespace
  /// `name_space`. When the hand-written csr (csf) serves (implementation()), that baseline's
  /// loop, generated from the csr (csf) schedule and run with the baseline's threads and chunks
  /// (SpMV: one thread up to the serial bound measured on this machine, else about four dynamic
  /// chunks a thread); the header
  /// says so. Throws Error when `name_space` is not a C++ identifier.
  std::string standalone_header(const std::string& name_space = "waco_tuned") const;

  /// Writes the plan's decision (schedule, report, matrix fingerprint, machine) as JSON, atomically.
  void save(const std::string& path) const;
  /// A saved plan for the same matrix (its fingerprint must match) on this machine: the format is
  /// built again and the kernel loaded (compiled when not cached). Throws Error on a corrupt file,
  /// another matrix, or another kernel.
  static Plan load(const std::string& path, const Matrix& A, const Options& opts = {});

  struct Impl;

 private:
  explicit Plan(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

/// Tunes `kernel` for A (see the file comment). MTTKRP needs a 3-D tensor.
WACO_API Plan tune(const Matrix& A, Kernel kernel, const Options& opts = {});

/// A plan of a given schedule without tuning: "csr" (the reference every tune is measured
/// against: the hand-written csr compiled into the library, implementation() "csr"; "csf" for
/// MTTKRP), another shortcut ("dcsr", "csc", "bcsr4x4") or a schedule's text form (the csr
/// schedule's generated kernel: its text form, Plan::schedule() of the "csr" plan); "dia" (SpMV:
/// the diagonal-storage baseline a tune may return, refused with an Error when the diagonals
/// would store more than 2 values a nonzero).
WACO_API Plan make_plan(const Matrix& A, Kernel kernel, const std::string& schedule,
                        const Options& opts = {});

/// The waco-hybrid version ("0.1.0").
WACO_API const char* version();

}  // namespace waco
