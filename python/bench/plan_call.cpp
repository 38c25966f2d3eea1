// The C++ side of python/bench/bench_binding.py: saved plans' SpMV called from C++ through
// libwaco.so (waco::Plan::spmv), timed as the Python side times `plan.spmv(x, y)`.
//   waco-python-bench MATRIX DTYPE CALLS ROUNDS PLAN [PLAN ...]
//     -> {"per_call_s": [[plan 1's mean time a call, one per round], [plan 2's], ...]}
// DTYPE is f32 or f64 (the matrix's values are read in it; the plans must be of that dtype).
// Each plan is warmed up with CALLS calls, then the plans take turns within every round.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "waco/waco.hpp"

namespace {

template <typename V>
std::vector<std::vector<double>> time_plans(const waco::Matrix& A,
                                            const std::vector<waco::Plan>& plans, long calls,
                                            long rounds) {
  std::vector<V> x(static_cast<std::size_t>(A.cols())), y(static_cast<std::size_t>(A.rows()));
  for (std::size_t i = 0; i < x.size(); ++i)  // numpy.linspace(-1, 1, cols), as the Python side
    x[i] = static_cast<V>(-1.0 + 2.0 * static_cast<double>(i) /
                                     static_cast<double>(x.size() > 1 ? x.size() - 1 : 1));
  for (const waco::Plan& p : plans)
    for (long w = 0; w < calls; ++w) p.spmv(x.data(), y.data());  // warm-up
  std::vector<std::vector<double>> per_call(plans.size());
  for (long r = 0; r < rounds; ++r)
    for (std::size_t k = 0; k < plans.size(); ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      for (long c = 0; c < calls; ++c) plans[k].spmv(x.data(), y.data());
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      per_call[k].push_back(s / static_cast<double>(calls));
    }
  return per_call;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MATRIX f32|f64 CALLS ROUNDS PLAN [PLAN ...]\n", argv[0]);
    return 2;
  }
  const std::string dtype = argv[2];
  if (dtype != "f32" && dtype != "f64") {
    std::fprintf(stderr, "error: DTYPE is f32 or f64, not '%s'\n", argv[2]);
    return 2;
  }
  try {
    const bool f64 = dtype == "f64";
    const waco::Matrix A =
        waco::Matrix::from_file(argv[1], f64 ? waco::Dtype::F64 : waco::Dtype::F32);
    std::vector<waco::Plan> plans;
    for (int i = 5; i < argc; ++i) plans.push_back(waco::Plan::load(argv[i], A));
    const long calls = std::atol(argv[3]), rounds = std::atol(argv[4]);
    const std::vector<std::vector<double>> t = f64 ? time_plans<double>(A, plans, calls, rounds)
                                                   : time_plans<float>(A, plans, calls, rounds);
    std::printf("{\"per_call_s\": [");
    for (std::size_t k = 0; k < t.size(); ++k) {
      std::printf("%s[", k ? ", " : "");
      for (std::size_t r = 0; r < t[k].size(); ++r) std::printf("%s%.9g", r ? ", " : "", t[k][r]);
      std::printf("]");
    }
    std::printf("]}\n");
  } catch (const waco::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
