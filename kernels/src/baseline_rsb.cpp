// The `rsb` and `rsb-tuned` baselines: librsb's Recursive Sparse Blocks format (Martone, "Efficient
// multithreaded untransposed, transposed or symmetric sparse matrix-vector multiplication with the
// Recursive Sparse Blocks format", Parallel Computing 2014), SpMV and SpMM only.
//
// - rsb: the matrix is assembled from the canonical COO (0-based, in the problem's value type,
//   float or double; librsb's default flags) and multiplied with rsb_spmv / rsb_spmm (B and C row-major, ld = J, beta = 0).
// - rsb-tuned: after assembly, librsb's autotuner (rsb_tune_spmm; nrhs = 1 for SpMV) searches for a
//   better instance of the matrix (a different recursive subdivision) *at the requested thread
//   count*: the thread count is never tuned, it is an explicit parameter of every measurement. The
//   tuner's time is reported as tuning_seconds, separately from conversion_seconds.
//
// librsb state is process-global: rsb_lib_init runs once per process (a thread-safe static; never
// undone, librsb is left to the process' exit), and the executing thread count
// (RSB_IO_WANT_EXECUTING_THREADS) is shared by every matrix, so run() re-asserts this instance's
// count before each product (a ~20 ns call). librsb caps that count, silently, at the OpenMP
// thread limit it saw at initialization: see rsb_init() for how this file deals with it. Every
// librsb error code becomes an Error carrying rsb_strerror_r's text. Empty matrices (0 nnz, even 0
// x 0) and single-column ones are assembled and multiplied by librsb 1.3 itself (checked); only the
// tuner is skipped when nnz == 0.
//
// Built against librsb only when WACO_HAVE_RSB is defined (CMake found librsb via pkg-config);
// otherwise have_rsb() is false and make_rsb() throws an Error saying how to get it.
#include <memory>
#include <string>
#include <vector>

#include "baselines.hpp"
#include "waco/kernels/error.hpp"

#ifdef WACO_HAVE_RSB
#include <omp.h>
#include <rsb.h>

#include <algorithm>

#include "waco/kernels/timing.hpp"
#endif

namespace waco::kernels::detail {

#ifdef WACO_HAVE_RSB

namespace {

static_assert(sizeof(rsb_coo_idx_t) == sizeof(index_t),
              "librsb's coordinate type must match index_t (librsb built with long indices?)");

/// librsb 1.3's RSB_CONST_MAX_SUPPORTED_THREADS (rsb-config.h, which rsb.h does not include and
/// which defines autoconf macros we do not want); librsb itself accepts larger counts silently.
constexpr int kMaxRsbThreads = 128;

constexpr const char* kRsbHint =
    "librsb reported this; try --impl csr, or report the matrix that triggers it";

/// librsb's message for an error code.
std::string rsb_message(rsb_err_t code) {
  char buf[512] = {0};
  if (rsb_strerror_r(code, buf, sizeof(buf)) != RSB_ERR_NO_ERROR || buf[0] == '\0') {
    return "librsb error code " + std::to_string(static_cast<long long>(code));
  }
  return buf;
}

/// Throws Error("<impl>: <what>: <librsb message>") unless code is RSB_ERR_NO_ERROR.
void check_rsb(rsb_err_t code, const std::string& impl, const char* what) {
  if (code != RSB_ERR_NO_ERROR) {
    throw Error(impl + ": " + what + " failed: " + rsb_message(code), kRsbHint);
  }
}

/// What rsb_lib_init left behind: its status and the most executing threads librsb will use.
struct RsbInit {
  rsb_err_t status = RSB_ERR_NO_ERROR;
  int max_threads = 1;
};

/// rsb_lib_init exactly once per process (thread-safe static).
///
/// librsb 1.3 silently caps the threads it runs at the calling thread's omp_get_max_threads() at
/// rsb_lib_init (measured: with OMP_NUM_THREADS=1 a later request for 2 threads is accepted and
/// reported back by rsb_lib_get_opt, yet every product runs on one thread). So the OpenMP limit is
/// raised to at least the processor count around the call, and the resulting cap is recorded
/// for prepare() to enforce.
const RsbInit& rsb_init() {
  static const RsbInit init = [] {
    RsbInit r;
    const int saved = omp_get_max_threads();
    r.max_threads = std::max(saved, omp_get_num_procs());
    omp_set_num_threads(r.max_threads);
    r.status = rsb_lib_init(RSB_NULL_INIT_OPTIONS);
    omp_set_num_threads(saved);
    return r;
  }();
  return init;
}

/// Initializes librsb if needed; rethrows the initialization error on every call.
void ensure_rsb_initialized(const std::string& impl) {
  check_rsb(rsb_init().status, impl, "rsb_lib_init");
}

/// The library-wide executing thread count librsb currently uses.
int rsb_threads(const std::string& impl) {
  rsb_int_t n = 0;
  check_rsb(rsb_lib_get_opt(RSB_IO_WANT_EXECUTING_THREADS, &n), impl,
            "rsb_lib_get_opt(RSB_IO_WANT_EXECUTING_THREADS)");
  return static_cast<int>(n);
}

/// Sets librsb's executing thread count and checks that it took.
void set_rsb_threads(int threads, const std::string& impl) {
  rsb_int_t n = threads;
  check_rsb(rsb_lib_set_opt(RSB_IO_WANT_EXECUTING_THREADS, &n), impl,
            "rsb_lib_set_opt(RSB_IO_WANT_EXECUTING_THREADS)");
  const int got = rsb_threads(impl);
  if (got != threads) {
    throw Error(impl + ": librsb was asked for " + std::to_string(threads) +
                    " executing threads but reports " + std::to_string(got),
                "use a thread count librsb supports (1.." + std::to_string(kMaxRsbThreads) + ")");
  }
}

/// Owns one librsb matrix (RAII): freed with rsb_mtx_free.
struct RsbMatrixDeleter {
  void operator()(rsb_mtx_t* m) const noexcept { rsb_mtx_free(m); }
};
using RsbMatrixPtr = std::unique_ptr<rsb_mtx_t, RsbMatrixDeleter>;

template <class V>
class RsbImplementation : public Implementation {
 public:
  explicit RsbImplementation(bool tuned) : tuned_(tuned), name_(tuned ? "rsb-tuned" : "rsb") {}

  void prepare(const Problem& p, int threads) override {
    if (p.kind != KernelKind::SpMV && p.kind != KernelKind::SpMM) {
      throw Error(name_ + ": kernel " + std::string(kernel_name(p.kind)) + " is not supported",
                  name_ + " implements spmv and spmm only; use --impl csr");
    }
    if (threads < 1 || threads > kMaxRsbThreads) {
      throw Error(
          name_ + ": thread count " + std::to_string(threads) + " is invalid",
          "give --threads between 1 and " + std::to_string(kMaxRsbThreads) + " (librsb's limit)");
    }
    p.validate();
    const CooMatrix& a = *p.A;
    WACO_ASSERT(p.B->layout == Layout::RowMajor || p.B->cols == 1,
                name_ + ": B must be row-major (kernel.hpp layouts)");
    if (a.rows > RSB_MAX_MATRIX_DIM || a.cols > RSB_MAX_MATRIX_DIM ||
        a.nnz() > RSB_MAX_MATRIX_NNZ) {
      throw Error(name_ + ": the matrix (" + std::to_string(a.rows) + " x " +
                      std::to_string(a.cols) + ", " + std::to_string(a.nnz()) +
                      " nnz) exceeds librsb's 32-bit limits",
                  "use --impl csr for this matrix");
    }

    ensure_rsb_initialized(name_);
    if (threads > rsb_init().max_threads) {
      throw Error(name_ + ": " + std::to_string(threads) +
                      " threads requested, but librsb runs at most " +
                      std::to_string(rsb_init().max_threads) +
                      " (the OpenMP thread limit when it was initialized)",
                  "use --threads " + std::to_string(rsb_init().max_threads) +
                      " or fewer, or raise OMP_NUM_THREADS");
    }
    threads_ = threads;
    set_rsb_threads(threads_, name_);

    kind_ = p.kind;
    b_ = p.B;
    rows_ = a.rows;
    cols_ = a.cols;
    dense_ = p.kind == KernelKind::SpMM ? p.dense_size() : 1;
    out_.assign(p.dtype(), static_cast<std::size_t>(p.output_size()));
    WACO_ASSERT(static_cast<std::int64_t>(out_.size()) == static_cast<std::int64_t>(rows_) * dense_,
                name_ + ": output size does not match rows x dense size");

    mtx_.reset();
    const double t0 = now_seconds();
    rsb_err_t status = RSB_ERR_NO_ERROR;
    // Canonical COO: sorted, no duplicates. Block sizes 0: librsb's choice.
    const std::vector<V> values(a.val.begin(), a.val.end());
    rsb_mtx_t* m = rsb_mtx_alloc_from_coo_const(
        values.data(), a.row.data(), a.col.data(), static_cast<rsb_nnz_idx_t>(a.nnz()),
        kType, a.rows, a.cols, 0, 0, kAssemblyFlags, &status);
    conversion_seconds_ = now_seconds() - t0;
    mtx_.reset(m);
    check_rsb(status, name_, "rsb_mtx_alloc_from_coo_const");
    if (!mtx_) throw Error(name_ + ": rsb_mtx_alloc_from_coo_const returned no matrix", kRsbHint);

    tuning_seconds_ = 0.0;
    // With no nonzeros there is nothing to tune, and librsb 1.3's tuner rejects a 0 x 0 SpMV
    // ("corrupt or inconsistent data"): keep the assembled (empty) matrix.
    if (tuned_ && a.nnz() > 0) tune();
  }

  void run() override {
    WACO_ASSERT(mtx_ != nullptr, name_ + ": run() before prepare()");
    // Another librsb user in this process may have changed the library-wide count.
    if (rsb_threads(name_) != threads_) set_rsb_threads(threads_, name_);
    const V alpha = 1;
    const V beta = 0;
    if (kind_ == KernelKind::SpMV) {
      check_rsb(rsb_spmv(RSB_TRANSPOSITION_N, &alpha, mtx_.get(), b_->data.template data<V>(), 1, &beta,
                         out_.template data<V>(), 1),
                name_, "rsb_spmv");
    } else {
      check_rsb(
          rsb_spmm(RSB_TRANSPOSITION_N, &alpha, mtx_.get(), dense_, RSB_FLAG_WANT_ROW_MAJOR_ORDER,
                   b_->data.template data<V>(), dense_, &beta, out_.template data<V>(), dense_),
          name_, "rsb_spmm");
    }
  }

  const Values& output() const override { return out_; }

 private:
  static constexpr rsb_flags_t kAssemblyFlags = RSB_FLAG_NOFLAGS;
  static constexpr rsb_type_t kType =
      dtype_of<V>() == Dtype::F32 ? RSB_NUMERICAL_TYPE_FLOAT : RSB_NUMERICAL_TYPE_DOUBLE;

  /// librsb's autotuner on this instance's own operands, at the fixed thread count: the matrix
  /// may be replaced by a better-subdivided clone (the old one is freed by librsb).
  void tune() {
    const V alpha = 1;
    const V beta = 0;
    rsb_real_t speedup = 0.0;
    // SpMV is rsb_spmm with one right-hand side; for nrhs = 1 librsb wants column-major order
    // (unit-stride vectors), leading dimensions being the vector lengths.
    const bool spmv = kind_ == KernelKind::SpMV;
    const rsb_flags_t order =
        spmv ? RSB_FLAG_WANT_COLUMN_MAJOR_ORDER : RSB_FLAG_WANT_ROW_MAJOR_ORDER;
    const rsb_nnz_idx_t ld_b = spmv ? cols_ : dense_;
    const rsb_nnz_idx_t ld_c = spmv ? rows_ : dense_;
    rsb_mtx_t* m = mtx_.release();
    const double t0 = now_seconds();
    // mtxAp == NULL: tune *m in place; tnp == NULL: keep the current thread count;
    // maxr = 0, maxt = 0: librsb's default rounds and time per round.
    const rsb_err_t status =
        rsb_tune_spmm(&m, &speedup, nullptr, 0, 0.0, RSB_TRANSPOSITION_N, &alpha, nullptr, dense_,
                      order, b_->data.template data<V>(), ld_b, &beta, out_.template data<V>(), ld_c);
    tuning_seconds_ = now_seconds() - t0;
    mtx_.reset(m);  // on error librsb leaves the input matrix unaffected
    check_rsb(status, name_, "rsb_tune_spmm");
    WACO_ASSERT(mtx_ != nullptr, name_ + ": rsb_tune_spmm returned no matrix");
    // The tuner may leave the library state changed (rsb.h warning): re-assert the count.
    set_rsb_threads(threads_, name_);
  }

  bool tuned_;
  std::string name_;
  KernelKind kind_ = KernelKind::SpMV;
  int threads_ = 1;
  const DenseMatrix* b_ = nullptr;  // x (SpMV) or B (SpMM), owned by the caller of prepare()
  rsb_coo_idx_t rows_ = 0;
  rsb_coo_idx_t cols_ = 0;
  rsb_coo_idx_t dense_ = 1;  // J (SpMM) or 1
  RsbMatrixPtr mtx_;
  Values out_;
};

template <class V>
struct RsbPlain final : RsbImplementation<V> {
  RsbPlain() : RsbImplementation<V>(false) {}
};
template <class V>
struct RsbTuned final : RsbImplementation<V> {
  RsbTuned() : RsbImplementation<V>(true) {}
};

}  // namespace

bool have_rsb() { return true; }

std::unique_ptr<Implementation> make_rsb(bool tuned) {
  if (tuned) return make_by_value_type<RsbTuned>();
  return make_by_value_type<RsbPlain>();
}

#else  // !WACO_HAVE_RSB

bool have_rsb() { return false; }

std::unique_ptr<Implementation> make_rsb(bool tuned) {
  throw Error(std::string(tuned ? "rsb-tuned" : "rsb") + ": this build has no librsb",
              "install librsb-dev (apt-get install librsb-dev) and rebuild");
}

#endif  // WACO_HAVE_RSB

}  // namespace waco::kernels::detail
