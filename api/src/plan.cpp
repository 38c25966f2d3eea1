// waco::Plan: a decided schedule bound to its matrix (the format built and the kernel loaded here:
// codegen::bind_schedule), make_plan, the calls on the caller's arrays, what was decided, the
// drop-in header, save and load. The decision itself: waco::tune (plan_tune.cpp).

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/tune/adaptive_run.hpp"
#include "api_internal.hpp"
#include "plan_file.hpp"
#include "plan_internal.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/grown_block.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/tune/tune.hpp"

namespace waco {

namespace fs = std::filesystem;
using kernels::KernelKind;

using namespace detail;

namespace detail {

/// The plan of a decided schedule, less its matrix's fingerprint (bind_plan): the format built
/// and the kernel loaded here; with `baseline` (a tune's result that is a hand-written baseline,
/// csr, csf or dia: tuning::implementation_of) that baseline.
std::shared_ptr<Plan::Impl> bind_arm(const Matrix& A, Kernel k, const codegen::SuperSchedule& s,
                                     const Options& o, const std::string& baseline) {
  auto impl = std::make_shared<Plan::Impl>();
  impl->kernel = k;
  impl->threads = resolved_threads(o);
  impl->dense = resolved_dense(o, k);
  impl->dtype = A.impl().dtype;
  for (int m = 0; m < A.order(); ++m) impl->dims.push_back(A.dim(m));
  impl->nnz = A.nnz();
  // A compile for the plan (on the calling thread) stops when the caller's interrupt asks.
  codegen::GeneratedOptions g = generated_options(o);
  g.compiler.cancelled = o.interrupt;
  impl->max_padding = g.storage.max_padding;
  impl->arm = std::make_shared<const tuning::Arm>(tuning::make_arm(
      tuning::sparse_problem(api::arrays(A), kind_of(k), A.impl().dtype), s, impl->dense,
      impl->threads, g, baseline));
  return impl;
}

/// The hand-written reference every tune is judged by: csf for MTTKRP, csr otherwise.
std::string reference_of(Kernel k) { return kernels::needs_tensor(kind_of(k)) ? "csf" : "csr"; }

/// bind_arm of that reference, compiled into the library (nothing to compile or load).
std::shared_ptr<Plan::Impl> bind_reference(const Matrix& A, Kernel k, const Options& o) {
  const std::string reference = reference_of(k);
  return bind_arm(A, k, *codegen::schedule_shortcut(kind_of(k), reference), o, reference);
}

/// bind_arm, and the plan's fingerprint (computed now if the matrix had none yet).
std::shared_ptr<Plan::Impl> bind_plan(const Matrix& A, Kernel k, const codegen::SuperSchedule& s,
                                      const Options& o, const std::string& baseline) {
  std::shared_ptr<Plan::Impl> impl = bind_arm(A, k, s, o, baseline);
  impl->fingerprint = A.fingerprint();
  return impl;
}

}  // namespace detail

namespace {

// ----------------------------------------------------------------------------------------------
// Running a plan.

const Plan::Impl& checked(const std::shared_ptr<const Plan::Impl>& impl, Kernel k) {
  if (impl->kernel != k)
    throw Error(std::string("this plan runs ") + kernel_name(impl->kernel) + ", not " +
                kernel_name(k));
  return *impl;
}

void check_pointer(const void* p, const char* what) {
  if (p == nullptr) throw Error(std::string(what) + " is null");
}

void check_columns(std::int64_t n, std::int64_t ld, const char* name) {
  if (ld < n)
    throw Error(std::string("leading dimension ") + name + " = " + std::to_string(ld) +
                " is smaller than the " + std::to_string(n) + " columns");
}

/// The plan's type must be the arrays' (a plan computes in its matrix's type).
template <class V>
void check_dtype(const Plan::Impl& impl, const char* call) {
  if (impl.dtype == kernels::dtype_of<V>()) return;
  const bool f64 = impl.dtype == kernels::Dtype::F64;
  throw Error(std::string(call) + ": this plan computes in " + (f64 ? "double" : "single") +
                  " precision, the arrays are " + (f64 ? "float" : "double"),
              std::string("pass ") + (f64 ? "double" : "float") +
                  " arrays, or tune a matrix made from " + (f64 ? "float" : "double") +
                  " values for " + (f64 ? "float" : "double") + " ones");
}

/// What a strided operand is packed into: per calling thread, per operand (0 and 1 the inputs,
/// 2 the output), 64-byte aligned, kept between calls (it only grows). A fresh vector a call
/// cost an allocation, and a packed output off a cache line was staged once more by the kernels
/// that add into its rows (codegen::updates_output_rows).
enum Slot { kIn0 = 0, kIn1 = 1, kOut = 2 };
template <class V>
V* scratch(Slot slot, std::int64_t values) {
  thread_local std::array<kernels::HugeBlock, 3> blocks;
  const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(values, 1)) * sizeof(V);
  return static_cast<V*>(kernels::grown(blocks[static_cast<std::size_t>(slot)], bytes));
}

/// A rows x n block with leading dimension ld, packed (ld == n: the caller's array itself).
template <class V>
const V* packed(const V* a, std::int64_t rows, std::int64_t n, std::int64_t ld, Slot slot) {
  if (ld == n) return a;
  V* to = scratch<V>(slot, rows * n);
  for (std::int64_t r = 0; r < rows; ++r) std::copy(a + r * ld, a + r * ld + n, to + r * n);
  return to;
}

/// Runs a dense-output kernel into out (rows x n, leading dimension ldo).
template <class V>
void run_dense_out(const Plan::Impl& impl, const V* in0, const V* in1, V* out, std::int64_t rows,
                   std::int64_t n, std::int64_t ldo) {
  const std::size_t size = rows > 0 ? static_cast<std::size_t>((rows - 1) * ldo + n) : 0;
  impl.serve(out, size, [&](const tuning::Arm& a, void* vo) {
    V* o = static_cast<V*>(vo);
    if (ldo == n) {
      a.bound.run(in0, in1, o, n);
      return;
    }
    V* packed_out = scratch<V>(kOut, rows * n);
    a.bound.run(in0, in1, packed_out, n);
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy(packed_out + r * n, packed_out + (r + 1) * n, o + r * ldo);
  });
}

template <class V>
void spmv_call(const Plan::Impl& p, const V* x, V* y) {
  check_dtype<V>(p, "spmv");
  check_pointer(x, "spmv: x");
  check_pointer(y, "spmv: y");
  api::translate_errors([&] {
    p.serve(y, static_cast<std::size_t>(p.dims[0]),
            [&](const tuning::Arm& a, void* out) { a.bound.run(x, nullptr, out, 1); });
  });
}

template <class V>
void spmm_call(const Plan::Impl& p, std::int64_t n, const V* B, std::int64_t ldb, V* C,
               std::int64_t ldc) {
  check_dtype<V>(p, "spmm");
  if (n < 1) throw Error("spmm: n = " + std::to_string(n) + " columns; at least 1");
  check_pointer(B, "spmm: B");
  check_pointer(C, "spmm: C");
  check_columns(n, ldb, "ldb");
  check_columns(n, ldc, "ldc");
  api::translate_errors([&] {
    run_dense_out(p, packed(B, p.dims[1], n, ldb, kIn0), static_cast<const V*>(nullptr), C,
                  p.dims[0], n, ldc);
  });
}

template <class V>
void sddmm_call(const Plan::Impl& p, std::int64_t k, const V* U, std::int64_t ldu, const V* V_,
                std::int64_t ldv, V* out) {
  check_dtype<V>(p, "sddmm");
  if (k < 1) throw Error("sddmm: k = " + std::to_string(k) + "; at least 1");
  check_pointer(U, "sddmm: U");
  check_pointer(V_, "sddmm: V");
  if (p.nnz > 0) check_pointer(out, "sddmm: out");
  check_columns(k, ldu, "ldu");
  check_columns(k, ldv, "ldv");
  api::translate_errors([&] {
    // The kernel's C is k x cols column-major: V (cols x k row-major) is that array.
    const V* u = packed(U, p.dims[0], k, ldu, kIn0);
    const V* v = packed(V_, p.dims[1], k, ldv, kIn1);
    p.serve(out, static_cast<std::size_t>(p.nnz),
            [&](const tuning::Arm& a, void* vo) { a.run(u, v, vo, k); });
  });
}

template <class V>
void mttkrp_call(const Plan::Impl& p, std::int64_t n, const V* B, std::int64_t ldb, const V* C,
                 std::int64_t ldc, V* out, std::int64_t ldo) {
  check_dtype<V>(p, "mttkrp");
  if (n < 1) throw Error("mttkrp: n = " + std::to_string(n) + " columns; at least 1");
  check_pointer(B, "mttkrp: B");
  check_pointer(C, "mttkrp: C");
  check_pointer(out, "mttkrp: out");
  check_columns(n, ldb, "ldb");
  check_columns(n, ldc, "ldc");
  check_columns(n, ldo, "ldo");
  api::translate_errors([&] {
    run_dense_out(p, packed(B, p.dims[1], n, ldb, kIn0), packed(C, p.dims[2], n, ldc, kIn1), out,
                  p.dims[0], n, ldo);
  });
}

}  // namespace

// ------------------------------------------------------------------------------------------------

Error::Error(const std::string& message, std::string hint)
    : std::runtime_error(message), hint_(std::move(hint)) {}

const char* kernel_name(Kernel k) {
  switch (k) {
    case Kernel::SpMV: return "spmv";
    case Kernel::SpMM: return "spmm";
    case Kernel::SDDMM: return "sddmm";
    case Kernel::MTTKRP: return "mttkrp";
  }
  return "?";
}

const char* version() { return kernels::version(); }

const char* dtype_name(Dtype d) { return d == Dtype::F64 ? "f64" : "f32"; }

Plan make_plan(const Matrix& A, Kernel k, const std::string& schedule, const Options& o) {
  return api::translate_errors([&] {
    const double t0 = kernels::now_seconds();
    check_operand(A, k);
    // "csr" ("csf" for MTTKRP) is the reference every tune is judged by: the hand-written
    // baseline compiled into the library, as a no-gain tune and an adaptive plan serve it (no
    // kernel to load, no compiler asked who it is). The csr schedule's generated kernel: its
    // text form.
    // "dia" (SpMV): the diagonal-storage baseline a tune may return; its plan carries the csr
    // schedule, as a tuned one does (codegen::bind_baseline refuses a matrix whose diagonals
    // would store more than kDiaMaxFill values a nonzero).
    const std::string baseline = codegen::baseline_named(kind_of(k), schedule);
    const bool names_dia = codegen::baseline_named(KernelKind::SpMV, schedule) == codegen::kDiaBaseline;
    if (names_dia && baseline.empty())
      throw Error("make_plan: \"dia\" (diagonal storage) serves spmv only",
                  "use \"csr\" or a schedule for the other kernels");
    std::shared_ptr<Plan::Impl> impl = bind_plan(
        A, k,
        codegen::schedule_from_string(kind_of(k), names_dia ? "csr" : schedule),
        o, baseline);
    impl->verdict = "given";
    impl->report = nullptr;
    impl->tuning_s = kernels::now_seconds() - t0;
    return Plan::Impl::wrap(std::move(impl));
  });
}

Plan::Plan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Kernel Plan::kernel() const { return impl_->kernel; }
std::string Plan::schedule() const { return codegen::to_text(impl_->serving()->bound.schedule); }
std::string Plan::implementation() const {
  return impl_->serving()->bound.implementation();
}
std::string Plan::verdict() const {
  return impl_->adaptive ? impl_->adaptive->verdict() : impl_->verdict;
}
double Plan::speedup() const {
  if (!impl_->adaptive) return impl_->speedup;
  return impl_->adaptive->speedup().value_or(0.0);
}
double Plan::break_even_calls() const {
  if (!impl_->adaptive) return impl_->break_even;
  return impl_->adaptive->break_even_calls().value_or(-1.0);
}
double Plan::tuning_seconds() const { return impl_->tuning_s; }
bool Plan::from_cache() const { return impl_->from_cache; }
int Plan::threads() const { return impl_->arm->bound.args.threads; }
int Plan::dense() const { return impl_->dense; }
Dtype Plan::dtype() const { return api::external(impl_->dtype); }
std::string Plan::report_json() const {
  return (impl_->adaptive ? impl_->adaptive->report() : impl_->report).dump(2);
}
std::int64_t Plan::calls() const { return impl_->adaptive ? impl_->adaptive->calls() : 0; }
std::int64_t Plan::exploring_calls() const {
  return impl_->adaptive ? impl_->adaptive->exploring_calls() : 0;
}

std::string Plan::standalone_header(const std::string& name_space) const {
  if (!codegen::is_cpp_identifier(name_space))
    throw Error("namespace \"" + name_space + "\" is not a C++ identifier",
                "letters, digits and _, not starting with a digit");
  const std::shared_ptr<const tuning::Arm> arm = impl_->serving();
  const std::string kernel = kernel_name(impl_->kernel);
  std::string note = std::string(impl_->report.is_null() && !impl_->adaptive
                                     ? "a plan of a given schedule (waco::make_plan)"
                                     : "tuned by waco::tune") +
                     " for " + kernel + " (fingerprint " + impl_->fingerprint_of() + ", dense " +
                     std::to_string(impl_->dense) + ", " +
                     (impl_->dtype == kernels::Dtype::F64 ? "double precision, " : "") +
                     std::to_string(threads()) + " threads)";
  const double sp = speedup();
  char buf[160];
  std::snprintf(buf, sizeof buf, "\nverdict %s, speedup over the %s schedule %.3fx",
                verdict().c_str(), reference_of(impl_->kernel).c_str(), sp);
  if (sp > 0 && verdict() != "given") note += buf;
  if (arm->bound.baseline == codegen::kDiaBaseline)
    note += "\nthe dia baseline (diagonal storage) serves this plan; this header holds its builder "
            "and loop";
  else if (!arm->bound.baseline.empty())
    note += "\nthe hand-written " + arm->bound.baseline +
            " baseline serves this plan; this header holds its loop, generated from the " +
            arm->bound.baseline + " schedule, with the baseline's threads and chunks";
  return api::translate_errors([&] {
    return codegen::emit_standalone_header(arm->bound.schedule, arm->bound.race, name_space, note,
                                           impl_->max_padding, impl_->dtype, arm->bound.baseline);
  });
}

void Plan::spmv(const float* x, float* y) const {
  spmv_call(checked(impl_, Kernel::SpMV), x, y);
}
void Plan::spmv(const double* x, double* y) const {
  spmv_call(checked(impl_, Kernel::SpMV), x, y);
}

void Plan::spmm(std::int64_t n, const float* B, std::int64_t ldb, float* C, std::int64_t ldc) const {
  spmm_call(checked(impl_, Kernel::SpMM), n, B, ldb, C, ldc);
}
void Plan::spmm(std::int64_t n, const double* B, std::int64_t ldb, double* C,
                std::int64_t ldc) const {
  spmm_call(checked(impl_, Kernel::SpMM), n, B, ldb, C, ldc);
}

void Plan::sddmm(std::int64_t k, const float* U, std::int64_t ldu, const float* V,
                 std::int64_t ldv, float* out) const {
  sddmm_call(checked(impl_, Kernel::SDDMM), k, U, ldu, V, ldv, out);
}
void Plan::sddmm(std::int64_t k, const double* U, std::int64_t ldu, const double* V,
                 std::int64_t ldv, double* out) const {
  sddmm_call(checked(impl_, Kernel::SDDMM), k, U, ldu, V, ldv, out);
}

void Plan::mttkrp(std::int64_t n, const float* B, std::int64_t ldb, const float* C,
                  std::int64_t ldc, float* out, std::int64_t ldo) const {
  mttkrp_call(checked(impl_, Kernel::MTTKRP), n, B, ldb, C, ldc, out, ldo);
}
void Plan::mttkrp(std::int64_t n, const double* B, std::int64_t ldb, const double* C,
                  std::int64_t ldc, double* out, std::int64_t ldo) const {
  mttkrp_call(checked(impl_, Kernel::MTTKRP), n, B, ldb, C, ldc, out, ldo);
}

void Plan::save(const std::string& path) const {
  if (verdict() == "exploring")
    throw Error("this adaptive plan is still exploring: there is no decision to save yet",
                "save it once verdict() is no longer \"exploring\" (its decision is also kept "
                "in the tuning cache then)");
  api::translate_errors([&] {
    nlohmann::json j = {{"format", api::kPlanFormat},
                        {"version", api::kPlanVersion},
                        {"waco_version", kernels::version()},
                        {"kernel", kernel_name(impl_->kernel)},
                        {"fingerprint", impl_->fingerprint_of()},
                        {"dims", impl_->dims},
                        {"nnz", impl_->nnz},
                        {"dense", impl_->dense},
                        {"threads", threads()},
                        {"dtype", std::string(kernels::dtype_name(impl_->dtype))},
                        {"schedule", codegen::to_json(impl_->serving()->bound.schedule)},
                        {"verdict", verdict()},
                        {"speedup", speedup()},
                        {"break_even_calls", break_even_calls()},
                        {"report", impl_->adaptive ? impl_->adaptive->report() : impl_->report}};
    j["checksum"] = api::plan_checksum(j);
    kernels::write_text_file(path, j.dump(1) + "\n");
  });
}

Plan Plan::load(const std::string& path, const Matrix& A, const Options& o) {
  return api::translate_errors([&] {
    const double t0 = kernels::now_seconds();
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the plan file: " + std::strerror(errno));
    std::stringstream text;
    text << in.rdbuf();
    const api::PlanFile f = api::parse_plan_file(path, text.str());
    const Kernel k = kernel_of(f.kind);
    check_operand(A, k);
    if (f.fingerprint != A.fingerprint())
      throw Error(path + ": the plan was made for the matrix with fingerprint " + f.fingerprint +
                      ", this one's is " + A.fingerprint(),
                  "load it with the matrix it was tuned for, or tune this one");
    if (f.dtype != A.impl().dtype)
      throw Error(path + ": the plan computes in " +
                      std::string(f.dtype == kernels::Dtype::F64 ? "double" : "single") +
                      " precision, this matrix holds " +
                      (A.impl().dtype == kernels::Dtype::F64 ? "double" : "float") + " values",
                  "load it with a matrix of the values it was tuned with");
    Options opts = o;
    opts.threads = f.threads;
    opts.dense = f.dense;
    std::shared_ptr<Impl> impl =
        bind_plan(A, k, f.schedule, opts, tuning::implementation_of(f.report));
    impl->report = f.report;
    impl->verdict = f.verdict;
    impl->speedup = f.speedup;
    impl->break_even = f.break_even;
    impl->tuning_s = kernels::now_seconds() - t0;
    return Impl::wrap(std::move(impl));
  });
}

}  // namespace waco
