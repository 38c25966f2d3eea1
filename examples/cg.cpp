// waco-cg: a Jacobi-preconditioned conjugate-gradient solver for A x = b (A symmetric positive
// definite), with three SpMV back-ends side by side:
//   plan   the kernel waco::tune chose for A (tuning time counted in the time to solution),
//   csr    the hand-written csr (waco::make_plan(A, SpMV, "csr"): what tune measures against),
//   eigen  Eigen's ConjugateGradient (its default Jacobi preconditioner, Lower|Upper: parallel SpMV).
// b = A * ones, so the error of x against ones is known too. Everything is in double precision
// (the matrix, its plans, the vectors; --precision single: float, with dot products accumulated
// in double). --laplacian solves with the graph Laplacian of A's pattern plus the identity
// (L = D - A + I, SPD) instead of A.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/IterativeLinearSolvers>

#include "example_common.hpp"

namespace {

const char* kUsage =
    "usage: waco-cg MATRIX.mtx [options]\n"
    "  --tol T          relative residual to reach (default 1e-6)\n"
    "  --precision P    double (default) or single: of the matrix, the plans and the vectors\n"
    "  --max-iter N     iteration limit (default 2000)\n"
    "  --laplacian      solve with L = D - A + I of A's pattern instead of A\n"
    "  --backends LIST  of plan, csr, eigen (default all three)\n"
    "  --threads N      threads (default: all cores)\n"
    "  --search S       waco tune's search: model, anns, random, exhaustive (default model)\n"
    "  --budget N       candidates tune measures (default: the search's)\n"
    "  --tuning-share F share of the expected calls' csr time tuning may take (default 0.1)\n"
    "  --always-tune    tune without telling waco the expected calls (no not-worth-it shortcut)\n"
    "  --adaptive       an adaptive plan: csr at once, the model's nominees tried on the calls\n"
    "  --cache-dir DIR  waco's tuning cache (default ~/.cache/waco-hybrid/plans)\n"
    "  --refresh        tune again even when the cache has a decision\n"
    "  --verbose        tune's progress on stderr\n"
    "  --json           one JSON object instead of the table\n"
    "  --check          exit 1 unless every back-end converged to the same solution\n"
    "example: waco-cg examples/bcsstk13.mtx.gz --max-iter 20000 --tol 1e-10\n";

struct Outcome {
  std::string backend;
  double setup_s = 0;   ///< tuning / building before the first iteration
  double solve_s = 0;
  int iterations = 0;
  double residual = 0;  ///< ||b - A x|| / ||b||, recomputed in double
  double error = 0;     ///< max |x - 1|
  std::string detail;
  double break_even = -1;  ///< plan: calls after which its tuning paid for itself (-1: never/unknown)
  double speedup = 0;      ///< plan: tune's side-by-side speedup over csr
};

template <class T>
double dot(const std::vector<T>& a, const std::vector<T>& b) {
  double s = 0;
  const std::int64_t n = static_cast<std::int64_t>(a.size());
#pragma omp parallel for reduction(+ : s) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

/// Jacobi-preconditioned CG with spmv(x, y): y = A x. Returns the iterations made.
template <class T>
int pcg(const std::function<void(const T*, T*)>& spmv, const std::vector<T>& diag,
        const std::vector<T>& b, std::vector<T>& x, double tol, int max_iter) {
  const std::int64_t n = static_cast<std::int64_t>(b.size());
  std::vector<T> r = b, z(n), p(n), q(n);
  x.assign(n, T(0));
  const double bnorm = std::sqrt(dot(b, b));
  if (bnorm == 0) return 0;
  for (std::int64_t i = 0; i < n; ++i) z[i] = r[i] / diag[i];
  p = z;
  double rz = dot(r, z);
  int it = 0;
  while (it < max_iter) {
    ++it;
    spmv(p.data(), q.data());
    const double pq = dot(p, q);
    if (!(pq > 0)) throw std::runtime_error("p'Ap <= 0: the matrix is not positive definite");
    const T alpha = static_cast<T>(rz / pq);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      x[i] += alpha * p[i];
      r[i] -= alpha * q[i];
      z[i] = r[i] / diag[i];
    }
    if (std::sqrt(dot(r, r)) / bnorm < tol) break;
    const double rz_new = dot(r, z);
    const T beta = static_cast<T>(rz_new / rz);
    rz = rz_new;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) p[i] = z[i] + beta * p[i];
  }
  return it;
}

/// The graph Laplacian of A's pattern plus the identity: off-diagonal -1, diagonal degree + 1.
template <class T>
waco::Matrix laplacian(const example::CsrOf<T>& a) {
  std::vector<std::int32_t> row, col;
  std::vector<T> val;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    int degree = 0;
    for (std::int64_t e = a.rowptr[r]; e < a.rowptr[r + 1]; ++e) {
      if (a.colind[e] == r) continue;
      row.push_back(static_cast<std::int32_t>(r));
      col.push_back(a.colind[e]);
      val.push_back(T(-1));
      ++degree;
    }
    row.push_back(static_cast<std::int32_t>(r));
    col.push_back(static_cast<std::int32_t>(r));
    val.push_back(static_cast<T>(degree + 1));
  }
  return waco::Matrix::from_coo(a.rows, a.cols, static_cast<std::int64_t>(val.size()), row.data(),
                                col.data(), val.data());
}

/// The solve in value type T (float or double) on every back-end asked for.
template <class T>
int run_cg(const example::Args& args) {
  const int threads = example::threads_of(args);
  example::warm_up_threads(threads);
  Eigen::setNbThreads(threads);
  const double tol = args.real("tol");
  const int max_iter = static_cast<int>(args.integer("max-iter"));
  const bool f64 = std::is_same_v<T, double>;

  const double t_read = example::now();
  waco::Matrix A =
      waco::Matrix::from_file(args.file(), f64 ? waco::Dtype::F64 : waco::Dtype::F32);
  if (args.flag("laplacian")) A = laplacian(example::csr_of<T>(A));
  const example::CsrOf<T> a = example::csr_of<T>(A);
  const double read_s = example::now() - t_read;
  if (a.rows != a.cols) args.fail("the matrix is not square");
  // b = A * ones; the diagonal for Jacobi.
  std::vector<T> b(a.rows), diag(a.rows, T(0));
  for (std::int64_t r = 0; r < a.rows; ++r) {
    double s = 0;
    for (std::int64_t e = a.rowptr[r]; e < a.rowptr[r + 1]; ++e) {
      s += a.val[e];
      if (a.colind[e] == r) diag[r] = a.val[e];
    }
    b[r] = static_cast<T>(s);
    if (!(diag[r] > 0)) throw waco::Error("row " + std::to_string(r) + " has no positive diagonal entry: not SPD", "try --laplacian");
  }
  const auto finish = [&](Outcome& o, const std::vector<T>& x) {
    double rr = 0, bb = 0, err = 0;
    for (std::int64_t r = 0; r < a.rows; ++r) {
      double ax = 0;
      for (std::int64_t e = a.rowptr[r]; e < a.rowptr[r + 1]; ++e)
        ax += static_cast<double>(a.val[e]) * x[a.colind[e]];
      rr += (b[r] - ax) * (b[r] - ax);
      bb += static_cast<double>(b[r]) * b[r];
      err = std::max(err, std::abs(x[r] - 1.0));
    }
    o.residual = std::sqrt(rr / bb);
    o.error = err;
  };

  std::vector<Outcome> out;
  waco::Options wo = example::waco_options(args);
  // One untimed solve first: the process's cold start (OpenMP's team, the vectors' pages, the
  // CPUs leaving idle) would otherwise be charged to whichever back-end is timed first: on the
  // development VM a 158-iteration solve of bcsstk09 took 10-19 ms cold against 1.3 ms warm,
  // with either back-end. Its SpMV is this file's own loop, not a waco plan: a csr plan made
  // here warmed waco's code for making csr plans for the csr back-end alone (G51, Intel Xeon VM,
  // each back-end in its own process: csr's setup 0.08-0.10 ms after such a plan, 0.15-0.29 ms
  // without; the plan's waco::tune 0.22-0.35 ms either way).
  if (example::wants(args, "plan") || example::wants(args, "csr")) {
    std::vector<T> x;
    pcg<T>(
        [&](const T* in, T* y) {
#pragma omp parallel for schedule(static)
          for (std::int64_t r = 0; r < a.rows; ++r) {
            T s = 0;
            for (std::int64_t e = a.rowptr[r]; e < a.rowptr[r + 1]; ++e) s += a.val[e] * in[a.colind[e]];
            y[r] = s;
          }
        },
        diag, b, x, tol, max_iter);
  }
  for (const std::string backend : {"plan", "csr"}) {
    if (!example::wants(args, backend)) continue;
    Outcome o;
    o.backend = backend;
    // The iterations a solve takes are not known before it converges: --max-iter bounds them.
    // A tune decides not-worth-it against that bound; an adaptive plan is told nothing, so that
    // it explores only as the calls so far pay (a solve that stops early loses at most
    // --tuning-share of its time), instead of spending a budget of max-iter calls up front.
    const std::int64_t expected = wo.adaptive ? 0 : max_iter;
    example::WacoBackend w = example::waco_backend(backend, A, waco::Kernel::SpMV, wo, expected, args);
    const waco::Plan& plan = w.plan;
    o.setup_s = w.setup_s;
    std::vector<T> x;
    const double t1 = example::now();
    o.iterations = pcg<T>([&](const T* in, T* y) { plan.spmv(in, y); }, diag, b, x, tol,
                          max_iter);
    o.solve_s = example::now() - t1;
    example::describe(w, backend == std::string("plan"));  // an adaptive plan decided meanwhile
    o.break_even = w.break_even;
    o.speedup = w.speedup;
    o.detail = w.detail;
    finish(o, x);
    out.push_back(o);
  }
  if (example::wants(args, "eigen")) {
    Outcome o;
    o.backend = "eigen";
    const double t0 = example::now();
    const example::EigenCsrOf<T> m = example::eigen_of(a);
    Eigen::ConjugateGradient<example::EigenCsrOf<T>, Eigen::Lower | Eigen::Upper> cg;
    cg.setTolerance(static_cast<T>(tol));
    cg.setMaxIterations(max_iter);
    cg.compute(m);
    o.setup_s = example::now() - t0;
    using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
    const Eigen::Map<const Vector> rhs(b.data(), a.rows);
    const double t1 = example::now();
    const Vector xs = cg.solve(rhs);
    o.solve_s = example::now() - t1;
    o.iterations = static_cast<int>(cg.iterations());
    o.detail = "ConjugateGradient, Jacobi";
    finish(o, std::vector<T>(xs.data(), xs.data() + xs.size()));
    out.push_back(o);
  }

  if (args.flag("json")) {
    std::printf("{\"matrix\": \"%s\", \"rows\": %lld, \"nnz\": %lld, \"threads\": %d, "
                "\"tol\": %g, \"max_iter\": %d, \"precision\": \"%s\", \"laplacian\": %s, "
                "\"read_s\": %.6f, \"backends\": [",
                args.file().c_str(), static_cast<long long>(a.rows),
                static_cast<long long>(a.val.size()), threads, tol, max_iter,
                f64 ? "double" : "single",
                args.flag("laplacian") ? "true" : "false", read_s);
    for (std::size_t i = 0; i < out.size(); ++i)
      std::printf("%s{\"backend\": \"%s\", \"setup_s\": %.6f, \"solve_s\": %.6f, \"total_s\": %.6f, "
                  "\"iterations\": %d, \"per_iteration_s\": %.9f, \"residual\": %.3e, "
                  "\"error\": %.3e, \"break_even_calls\": %.1f, \"tune_speedup\": %.4f, \"detail\": \"%s\"}",
                  i ? ", " : "", out[i].backend.c_str(), out[i].setup_s, out[i].solve_s,
                  out[i].setup_s + out[i].solve_s, out[i].iterations,
                  out[i].solve_s / std::max(1, out[i].iterations), out[i].residual, out[i].error,
                  out[i].break_even, out[i].speedup, out[i].detail.c_str());
    std::printf("]}\n");
  } else {
    std::printf("CG on %s%s: %lld rows, %lld nonzeros, %d threads, tol %g, %s precision\n",
                args.file().c_str(), args.flag("laplacian") ? " (graph Laplacian + I)" : "",
                static_cast<long long>(a.rows), static_cast<long long>(a.val.size()), threads, tol,
                f64 ? "double" : "single");
    std::printf("  %-6s %10s %10s %10s %6s %12s %10s %10s  %s\n", "", "setup", "solve", "total",
                "iters", "per iter", "residual", "max|x-1|", "");
    for (const Outcome& o : out)
      std::printf("  %-6s %9.3fs %9.3fs %9.3fs %6d %10.2fus %10.2e %10.2e  %s\n",
                  o.backend.c_str(), o.setup_s, o.solve_s, o.setup_s + o.solve_s, o.iterations,
                  1e6 * o.solve_s / std::max(1, o.iterations), o.residual, o.error,
                  o.detail.c_str());
  }
  if (args.flag("check")) {
    // Every back-end reached the tolerance (within 10x, as recomputed in double: float
    // arithmetic's residual drifts from the recurrence's) or stopped at the limit, and they
    // agree on the iterations within 10% (the same algorithm; the kernels sum in different
    // orders). The error against ones is not checked: on an ill-conditioned matrix a small
    // residual allows a large error.
    for (const Outcome& o : out) {
      const bool converged = o.iterations < max_iter && o.residual < 10 * tol;
      if (!converged && o.iterations != max_iter) {
        std::fprintf(stderr, "check: %s stopped at residual %.3e\n", o.backend.c_str(), o.residual);
        return 1;
      }
      if (std::abs(o.iterations - out.front().iterations) > 2 + out.front().iterations / 10) {
        std::fprintf(stderr, "check: %s took %d iterations, %s %d\n", o.backend.c_str(),
                     o.iterations, out.front().backend.c_str(), out.front().iterations);
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto defaults = example::waco_option_defaults();
  defaults.insert({{"tol", "1e-6"}, {"max-iter", "2000"}, {"laplacian", "false"},
                   {"precision", "double"}});
  const example::Args args(argc, argv, defaults, kUsage);
  const std::string precision = args.str("precision");
  if (precision != "double" && precision != "single") args.fail("--precision is double or single");
  return example::guarded([&]() -> int {
    return precision == "double" ? run_cg<double>(args) : run_cg<float>(args);
  });
}
