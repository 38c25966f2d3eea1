// waco::tune, waco::Plan: the decision from the tuning cache or from the waco-hybrid CLI run as a
// child process, then the format built and the kernel loaded here (codegen::bind_schedule).
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "api_internal.hpp"
#include "plan_file.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/process.hpp"
#include "waco/kernels/timing.hpp"

extern char** environ;

namespace waco {

namespace fs = std::filesystem;
using kernels::KernelKind;

struct Plan::Impl {
  Kernel kernel = Kernel::SpMV;
  codegen::BoundKernel bound;
  nlohmann::json report;  ///< the deciding tune's report (null for make_plan)
  std::string verdict;
  double speedup = 0.0;
  double break_even = -1.0;
  double tuning_s = 0.0;
  bool from_cache = false;
  int threads = 1;
  int dense = 1;
  std::string fingerprint;
  std::vector<std::int64_t> dims;
  std::int64_t nnz = 0;
  bool sddmm_in_order = true;  ///< SDDMM: the format stores the nonzeros in CSR order, no padding

  static Plan wrap(std::shared_ptr<const Impl> impl) { return Plan(std::move(impl)); }
};

namespace {

KernelKind kind_of(Kernel k) {
  switch (k) {
    case Kernel::SpMV: return KernelKind::SpMV;
    case Kernel::SpMM: return KernelKind::SpMM;
    case Kernel::SDDMM: return KernelKind::SDDMM;
    case Kernel::MTTKRP: return KernelKind::MTTKRP;
  }
  throw Error("unknown kernel");
}

Kernel kernel_of(KernelKind k) {
  switch (k) {
    case KernelKind::SpMV: return Kernel::SpMV;
    case KernelKind::SpMM: return Kernel::SpMM;
    case KernelKind::SDDMM: return Kernel::SDDMM;
    case KernelKind::MTTKRP: return Kernel::MTTKRP;
  }
  throw Error("unknown kernel");
}

void check_operand(const Matrix& A, Kernel k) {
  if (k == Kernel::MTTKRP && A.order() != 3)
    throw Error("mttkrp needs a 3-D tensor, this operand is a matrix",
                "make it with Matrix::tensor_from_coo or from a .tns file");
  if (k != Kernel::MTTKRP && A.order() != 2)
    throw Error(std::string(kernel_name(k)) + " needs a matrix, this operand is a 3-D tensor");
}

int resolved_threads(const Options& o) {
  if (o.threads < 0) throw Error("Options::threads is negative", "0 means every available core");
  return o.threads > 0 ? o.threads : kernels::available_cpus();
}

int resolved_dense(const Options& o, Kernel k) {
  if (o.dense < 0) throw Error("Options::dense is negative", "0 means the kernel's default");
  if (k == Kernel::SpMV) return 1;
  return o.dense > 0 ? o.dense : kernels::default_dense_size(kind_of(k));
}

codegen::GeneratedOptions generated_options(const Options& o) {
  codegen::GeneratedOptions g;
  g.compiler.cache_dir = o.kernel_cache_dir;
  return g;
}

kernels::Problem sparse_problem(const Matrix& A, Kernel k) {
  kernels::Problem p;
  p.kind = kind_of(k);
  p.A = A.impl().matrix.get();
  p.T = A.impl().tensor.get();
  return p;
}

/// The plan of a decided schedule: the format built and the kernel loaded here.
std::shared_ptr<Plan::Impl> bind(const Matrix& A, Kernel k, const codegen::SuperSchedule& s,
                                 const Options& o) {
  auto impl = std::make_shared<Plan::Impl>();
  impl->kernel = k;
  impl->threads = resolved_threads(o);
  impl->dense = resolved_dense(o, k);
  impl->fingerprint = A.fingerprint();
  for (int m = 0; m < A.order(); ++m) impl->dims.push_back(A.dim(m));
  impl->nnz = A.nnz();
  impl->bound = codegen::bind_schedule(s, sparse_problem(A, k), impl->dense, impl->threads,
                                       generated_options(o));
  if (k == Kernel::SDDMM) {
    const std::vector<kernels::index_t>& pos = impl->bound.storage->entry_position;
    impl->sddmm_in_order = impl->bound.storage->stored_values() == impl->nnz;
    for (std::size_t e = 0; impl->sddmm_in_order && e < pos.size(); ++e)
      impl->sddmm_in_order = pos[e] == static_cast<kernels::index_t>(e);
  }
  return impl;
}

void take_report(Plan::Impl& impl, const nlohmann::json& report) {
  impl.report = report;
  impl.verdict = report.value("verdict", std::string("unknown"));
  const nlohmann::json& sp = report.value("speedup_over_csr", nlohmann::json());
  impl.speedup = sp.is_number() ? sp.get<double>() : 0.0;
  if (impl.verdict == "no-gain" || impl.verdict == "not-worth-it") impl.speedup = 1.0;
  const nlohmann::json& be =
      report.contains("economy") ? report["economy"].value("break_even_calls", nlohmann::json())
                                 : nlohmann::json();
  impl.break_even = be.is_number() ? be.get<double>() : -1.0;
}

// ----------------------------------------------------------------------------------------------
// The CLI as a child process.

std::string find_cli(const Options& o) {
  if (!o.cli.empty()) return o.cli;
  if (const char* env = std::getenv("WACO_HYBRID_CLI"); env != nullptr && *env != '\0') return env;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&waco::version), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    const fs::path lib = fs::weakly_canonical(info.dli_fname, ec);
    const fs::path installed = lib.parent_path() / WACO_LIB_TO_BIN / "waco-hybrid";
    if (!ec && ::access(installed.c_str(), X_OK) == 0) return installed.string();
  }
  if (::access(WACO_BUILD_CLI, X_OK) == 0) return WACO_BUILD_CLI;
  throw Error("cannot find the waco-hybrid program, which tunes",
              "install waco-hybrid (cmake --install), or set WACO_HYBRID_CLI or Options::cli to "
              "its path");
}


/// The first "error: MESSAGE (hint: HINT)" line of the CLI's stderr as an Error.
Error cli_error(const std::string& err, int status, bool live_stderr) {
  std::istringstream lines(err);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("error: ", 0) != 0) continue;
    std::string message = line.substr(7), hint;
    const std::size_t h = message.rfind(" (hint: ");
    if (h != std::string::npos && message.back() == ')') {
      hint = message.substr(h + 8, message.size() - h - 9);
      message.resize(h);
    }
    return Error(message, hint);
  }
  return Error("waco-hybrid tune failed (exit status " + std::to_string(status) + ")" +
                   (live_stderr ? "; its messages are above" : err.empty() ? "" : ": " + err),
               "run the same tune with the waco-hybrid CLI to see more");
}

nlohmann::json tune_with_cli(const Matrix& A, Kernel k, const Options& o, int threads, int dense) {
  const std::string cli = find_cli(o);
  kernels::TempDir tmp("waco-tune", "tuning");
  const std::string operand = tmp.path() + (A.order() == 3 ? "/operand.tns" : "/operand.mtx");
  if (A.order() == 3)
    kernels::write_frostt(operand, *A.impl().tensor);
  else
    kernels::write_matrix_market(operand, *A.impl().matrix);
  std::vector<std::string> argv = {cli, "tune", "--kernel", kernel_name(k), "--json",
                                   "--threads", std::to_string(threads), "--search", o.search};
  if (k != Kernel::SpMV) argv.insert(argv.end(), {"--dense", std::to_string(dense)});
  if (o.budget > 0) argv.insert(argv.end(), {"--budget", std::to_string(o.budget)});
  if (o.budget_seconds > 0) {
    std::ostringstream s;
    s.precision(17);
    s << o.budget_seconds;
    argv.insert(argv.end(), {"--budget-seconds", s.str()});
  }
  if (o.expected_calls > 0) {
    std::ostringstream s;
    s.precision(17);
    s << o.tuning_share;
    argv.insert(argv.end(), {"--expected-calls", std::to_string(o.expected_calls),
                             "--tuning-share", s.str()});
  }
  if (!o.use_cache) {
    argv.push_back("--no-plan-cache");
  } else {
    if (!o.cache_dir.empty()) argv.insert(argv.end(), {"--plan-cache", o.cache_dir});
    if (o.refresh) argv.push_back("--refresh");
  }
  if (!o.kernel_cache_dir.empty()) argv.insert(argv.end(), {"--cache-dir", o.kernel_cache_dir});
  if (!o.verbose) argv.push_back("--quiet");
  argv.push_back(operand);
  const std::string out_path = tmp.path() + "/report.json", err_path = tmp.path() + "/stderr.txt";
  int status = 0;
  try {
    status = kernels::run_process(argv, out_path, err_path, o.verbose);
  } catch (const kernels::Error& e) {
    throw Error(e.what(), "check Options::cli or WACO_HYBRID_CLI");
  }
  const std::string err = o.verbose ? std::string() : kernels::read_text_file(err_path);
  if (status != 0) throw cli_error(err, status, o.verbose);
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(kernels::read_text_file(out_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("waco-hybrid tune printed no valid report: ") + e.what());
  }
  return report;
}

codegen::SuperSchedule decided_schedule(const nlohmann::json& report) {
  const nlohmann::json& best = report.value("best", nlohmann::json());
  if (!best.is_object() || !best.contains("schedule_json"))
    throw Error("the tune found no schedule that runs correctly, not even csr (verdict " +
                    report.value("verdict", std::string("?")) + ")",
                "run the same tune with the waco-hybrid CLI to see the failures");
  return codegen::schedule_from_json(best.at("schedule_json"));
}

// ----------------------------------------------------------------------------------------------
// Expected calls: whether a search can pay for itself at all, decided here.

/// The least a search through the CLI costs: on the 2-core development VMs the CLI starts in
/// 0.34 s (loading LibTorch) and a tune that only measures csr and decides not-worth-it took
/// 0.61-0.68 s on bcsstk13 (`tune --expected-calls 10`, three runs).
constexpr double kCliFloorS = 0.6;

/// Seconds of one call of a bound kernel: the fastest of up to ten timed calls within about
/// 0.2 s after a warm-up call. The fastest, not the median: a run that shares the machine (a
/// descheduled OpenMP thread holds the whole team) made 5-us kernels look 100 times slower, and
/// the question here is only whether a search could pay at all.
double time_calls(const codegen::BoundKernel& b, const Matrix& A, Kernel k, int dense) {
  const std::int64_t n = k == Kernel::SpMV ? 1 : dense;
  std::vector<float> in0, in1, out(static_cast<std::size_t>(b.out_size));
  switch (k) {
    case Kernel::SpMV: in0.assign(A.cols(), 1.0f); break;
    case Kernel::SpMM: in0.assign(A.cols() * n, 1.0f); break;
    case Kernel::SDDMM:
      in0.assign(A.rows() * n, 1.0f);
      in1.assign(A.cols() * n, 1.0f);
      break;
    case Kernel::MTTKRP:
      in0.assign(A.dim(1) * n, 1.0f);
      in1.assign(A.dim(2) * n, 1.0f);
      break;
  }
  const float* p1 = in1.empty() ? nullptr : in1.data();
  b.run(in0.data(), p1, out.data(), n);
  std::vector<double> times;
  const double start = kernels::now_seconds();
  while (times.size() < 10 && (times.empty() || kernels::now_seconds() - start < 0.2)) {
    const double t0 = kernels::now_seconds();
    b.run(in0.data(), p1, out.data(), n);
    times.push_back(kernels::now_seconds() - t0);
  }
  return *std::min_element(times.begin(), times.end());
}

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

/// A rows x n block with leading dimension ld, packed (ld == n: the caller's array itself).
const float* packed(const float* a, std::int64_t rows, std::int64_t n, std::int64_t ld,
                    std::vector<float>& buffer) {
  if (ld == n) return a;
  buffer.resize(static_cast<std::size_t>(rows * n));
  for (std::int64_t r = 0; r < rows; ++r)
    std::copy(a + r * ld, a + r * ld + n, buffer.data() + r * n);
  return buffer.data();
}

/// Runs a dense-output kernel into out (rows x n, leading dimension ldo).
void run_dense_out(const Plan::Impl& impl, const float* in0, const float* in1, float* out,
                   std::int64_t rows, std::int64_t n, std::int64_t ldo) {
  if (ldo == n) {
    impl.bound.run(in0, in1, out, n);
    return;
  }
  std::vector<float> o(static_cast<std::size_t>(rows * n));
  impl.bound.run(in0, in1, o.data(), n);
  for (std::int64_t r = 0; r < rows; ++r)
    std::copy(o.data() + r * n, o.data() + (r + 1) * n, out + r * ldo);
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

Plan tune(const Matrix& A, Kernel k, const Options& o) {
  return api::translate_errors([&] {
    const double t0 = kernels::now_seconds();
    check_operand(A, k);
    const int threads = resolved_threads(o);
    const int dense = resolved_dense(o, k);
    if (o.tuning_share <= 0 || o.tuning_share > 1)
      throw Error("Options::tuning_share must be in (0, 1]");
    // The tuning cache first, here: a hit builds the plan without starting the CLI.
    if (o.use_cache && !o.refresh) {
      const heuristics::TuningCache cache(o.cache_dir);
      const heuristics::TuningKey key{A.fingerprint(), kind_of(k), dense, threads,
                                      heuristics::machine_identity(generated_options(o).compiler)};
      const heuristics::CacheLookup found = cache.find(key);
      if (found.hit) {
        std::shared_ptr<Plan::Impl> impl = bind(A, k, found.hit->schedule, o);
        take_report(*impl, found.hit->report);
        impl->from_cache = true;
        impl->tuning_s = kernels::now_seconds() - t0;
        return Plan::Impl::wrap(std::move(impl));
      }
      // A corrupt entry: the CLI reports it (on stderr) and replaces it.
    }
    // Few expected calls: when even the cheapest search costs more than the calls allow, say so
    // without starting the CLI and run csr (measured here, on this matrix).
    if (o.expected_calls > 0) {
      const char* shortcut = k == Kernel::MTTKRP ? "csf" : "csr";
      std::shared_ptr<Plan::Impl> csr =
          bind(A, k, codegen::schedule_from_string(kind_of(k), shortcut), o);
      const double csr_s = time_calls(csr->bound, A, k, dense);
      const double budget_s = o.tuning_share * static_cast<double>(o.expected_calls) * csr_s;
      if (budget_s < kCliFloorS) {
        char reason[320];
        std::snprintf(reason, sizeof reason,
                      "tuning cannot pay for itself within %lld calls: %.0f%% of their csr time is "
                      "%.3g s, less than the %.2g s the least search costs",
                      static_cast<long long>(o.expected_calls), o.tuning_share * 100, budget_s,
                      kCliFloorS);
        take_report(*csr, {{"verdict", "not-worth-it"},
                           {"reason", reason},
                           {"economy",
                            {{"expected_calls", o.expected_calls},
                             {"tuning_share", o.tuning_share},
                             {"csr_s", csr_s},
                             {"budget_s", budget_s},
                             {"least_search_s", kCliFloorS},
                             {"break_even_calls", nullptr}}}});
        csr->tuning_s = kernels::now_seconds() - t0;
        return Plan::Impl::wrap(std::move(csr));
      }
    }
    const nlohmann::json report = tune_with_cli(A, k, o, threads, dense);
    std::shared_ptr<Plan::Impl> impl = bind(A, k, decided_schedule(report), o);
    take_report(*impl, report);
    impl->from_cache = report.value("from_cache", false);
    impl->tuning_s = kernels::now_seconds() - t0;
    return Plan::Impl::wrap(std::move(impl));
  });
}

Plan make_plan(const Matrix& A, Kernel k, const std::string& schedule, const Options& o) {
  return api::translate_errors([&] {
    const double t0 = kernels::now_seconds();
    check_operand(A, k);
    std::shared_ptr<Plan::Impl> impl =
        bind(A, k, codegen::schedule_from_string(kind_of(k), schedule), o);
    impl->verdict = "given";
    impl->report = nullptr;
    impl->tuning_s = kernels::now_seconds() - t0;
    return Plan::Impl::wrap(std::move(impl));
  });
}

Plan::Plan(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Kernel Plan::kernel() const { return impl_->kernel; }
std::string Plan::schedule() const { return codegen::to_text(impl_->bound.schedule); }
std::string Plan::verdict() const { return impl_->verdict; }
double Plan::speedup() const { return impl_->speedup; }
double Plan::break_even_calls() const { return impl_->break_even; }
double Plan::tuning_seconds() const { return impl_->tuning_s; }
bool Plan::from_cache() const { return impl_->from_cache; }
int Plan::threads() const { return impl_->bound.args.threads; }
int Plan::dense() const { return impl_->dense; }
std::string Plan::report_json() const { return impl_->report.dump(2); }

void Plan::spmv(const float* x, float* y) const {
  const Impl& p = checked(impl_, Kernel::SpMV);
  check_pointer(x, "spmv: x");
  check_pointer(y, "spmv: y");
  api::translate_errors([&] { p.bound.run(x, nullptr, y, 1); });
}

void Plan::spmm(std::int64_t n, const float* B, std::int64_t ldb, float* C, std::int64_t ldc) const {
  const Impl& p = checked(impl_, Kernel::SpMM);
  if (n < 1) throw Error("spmm: n = " + std::to_string(n) + " columns; at least 1");
  check_pointer(B, "spmm: B");
  check_pointer(C, "spmm: C");
  check_columns(n, ldb, "ldb");
  check_columns(n, ldc, "ldc");
  api::translate_errors([&] {
    std::vector<float> buffer;
    run_dense_out(p, packed(B, p.dims[1], n, ldb, buffer), nullptr, C, p.dims[0], n, ldc);
  });
}

void Plan::sddmm(std::int64_t k, const float* U, std::int64_t ldu, const float* V,
                 std::int64_t ldv, float* out) const {
  const Impl& p = checked(impl_, Kernel::SDDMM);
  if (k < 1) throw Error("sddmm: k = " + std::to_string(k) + "; at least 1");
  check_pointer(U, "sddmm: U");
  check_pointer(V, "sddmm: V");
  if (p.nnz > 0) check_pointer(out, "sddmm: out");
  check_columns(k, ldu, "ldu");
  check_columns(k, ldv, "ldv");
  api::translate_errors([&] {
    std::vector<float> bu, bv;
    // The kernel's C is k x cols column-major: V (cols x k row-major) is that array.
    const float* u = packed(U, p.dims[0], k, ldu, bu);
    const float* v = packed(V, p.dims[1], k, ldv, bv);
    if (p.sddmm_in_order) {
      p.bound.run(u, v, out, k);
      return;
    }
    std::vector<float> stored(static_cast<std::size_t>(p.bound.out_size));
    p.bound.run(u, v, stored.data(), k);
    const std::vector<kernels::index_t>& pos = p.bound.storage->entry_position;
    for (std::size_t e = 0; e < pos.size(); ++e) out[e] = stored[static_cast<std::size_t>(pos[e])];
  });
}

void Plan::mttkrp(std::int64_t n, const float* B, std::int64_t ldb, const float* C,
                  std::int64_t ldc, float* out, std::int64_t ldo) const {
  const Impl& p = checked(impl_, Kernel::MTTKRP);
  if (n < 1) throw Error("mttkrp: n = " + std::to_string(n) + " columns; at least 1");
  check_pointer(B, "mttkrp: B");
  check_pointer(C, "mttkrp: C");
  check_pointer(out, "mttkrp: out");
  check_columns(n, ldb, "ldb");
  check_columns(n, ldc, "ldc");
  check_columns(n, ldo, "ldo");
  api::translate_errors([&] {
    std::vector<float> bb, bc;
    run_dense_out(p, packed(B, p.dims[1], n, ldb, bb), packed(C, p.dims[2], n, ldc, bc), out,
                  p.dims[0], n, ldo);
  });
}

void Plan::save(const std::string& path) const {
  api::translate_errors([&] {
    nlohmann::json j = {{"format", api::kPlanFormat},
                        {"version", api::kPlanVersion},
                        {"waco_version", kernels::version()},
                        {"kernel", kernel_name(impl_->kernel)},
                        {"fingerprint", impl_->fingerprint},
                        {"dims", impl_->dims},
                        {"nnz", impl_->nnz},
                        {"dense", impl_->dense},
                        {"threads", impl_->bound.args.threads},
                        {"schedule", codegen::to_json(impl_->bound.schedule)},
                        {"verdict", impl_->verdict},
                        {"speedup", impl_->speedup},
                        {"break_even_calls", impl_->break_even},
                        {"report", impl_->report}};
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
    Options opts = o;
    opts.threads = f.threads;
    opts.dense = f.dense;
    std::shared_ptr<Impl> impl = bind(A, k, f.schedule, opts);
    impl->report = f.report;
    impl->verdict = f.verdict;
    impl->speedup = f.speedup;
    impl->break_even = f.break_even;
    impl->tuning_s = kernels::now_seconds() - t0;
    return Impl::wrap(std::move(impl));
  });
}

}  // namespace waco
