// An application of the installed package: tune SpMV for a matrix file, run the plan, compare
// with a plain CSR loop, reload the saved plan. Prints one line per step; exit 0 when all agree.
#include <cmath>
#include <cstdio>
#include <vector>

#include <waco/waco.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer MATRIX.mtx SCRATCH_DIR\n");
    return 2;
  }
  try {
    const waco::Matrix A = waco::Matrix::from_file(argv[1]);
    std::vector<std::int64_t> rp(A.rows() + 1);
    std::vector<std::int32_t> ci(A.nnz());
    std::vector<float> v(A.nnz());
    A.csr(rp.data(), ci.data(), v.data());
    std::vector<float> x(A.cols()), y(A.rows());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.0f / static_cast<float>(1 + i % 7);

    waco::Options o;
    o.search = "model";  // the shipped model, found by the installed CLI
    o.budget = 3;
    o.cache_dir = std::string(argv[2]) + "/plans";
    o.kernel_cache_dir = std::string(argv[2]) + "/kernels";
    const waco::Plan plan = waco::tune(A, waco::Kernel::SpMV, o);
    std::printf("waco %s: tuned %s, verdict %s, speedup %.3f\n", waco::version(),
                plan.schedule().c_str(), plan.verdict().c_str(), plan.speedup());
    plan.spmv(x.data(), y.data());
    double worst = 0;
    for (std::int64_t r = 0; r < A.rows(); ++r) {
      double ref = 0, mag = 0;
      for (std::int64_t e = rp[r]; e < rp[r + 1]; ++e) {
        ref += static_cast<double>(v[e]) * x[ci[e]];
        mag += std::abs(static_cast<double>(v[e]) * x[ci[e]]);
      }
      worst = std::max(worst, std::abs(y[r] - ref) / (mag + 1e-30));
    }
    std::printf("max relative error %.3g\n", worst);
    if (!(worst < 1e-5)) return 1;
    const std::string file = std::string(argv[2]) + "/A.plan";
    plan.save(file);
    const waco::Plan again = waco::Plan::load(file, A, o);
    std::vector<float> y2(A.rows());
    again.spmv(x.data(), y2.data());
    std::printf("reloaded plan %s\n", y2 == y ? "agrees" : "DIFFERS");
    const waco::Plan cached = waco::tune(A, waco::Kernel::SpMV, o);
    std::printf("second tune from cache: %s\n", cached.from_cache() ? "yes" : "no");
    return y2 == y && cached.from_cache() ? 0 : 1;
  } catch (const waco::Error& e) {
    std::fprintf(stderr, "error: %s%s%s\n", e.what(), e.hint().empty() ? "" : " (hint: ",
                 e.hint().empty() ? "" : (e.hint() + ")").c_str());
    return 1;
  }
}
