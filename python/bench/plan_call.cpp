// The C++ side of python/bench/bench_binding.py: the same saved plan's SpMV called from C++
// through libwaco.so (waco::Plan::spmv), timed as the Python side times `plan @ x`.
//   waco-python-bench MATRIX PLAN CALLS ROUNDS  ->  {"per_call_s": [median of each round ...]}
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "waco/waco.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MATRIX PLAN CALLS ROUNDS\n", argv[0]);
    return 2;
  }
  try {
    const waco::Matrix A = waco::Matrix::from_file(argv[1]);
    const waco::Plan plan = waco::Plan::load(argv[2], A);
    const long calls = std::atol(argv[3]), rounds = std::atol(argv[4]);
    std::vector<float> x(static_cast<std::size_t>(A.cols())), y(static_cast<std::size_t>(A.rows()));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = -1.0f + 2.0f * static_cast<float>(i) / static_cast<float>(x.size());
    for (long w = 0; w < calls; ++w) plan.spmv(x.data(), y.data());  // warm-up
    std::printf("{\"per_call_s\": [");
    for (long r = 0; r < rounds; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (long c = 0; c < calls; ++c) plan.spmv(x.data(), y.data());
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%s%.9g", r ? ", " : "", s / static_cast<double>(calls));
    }
    std::printf("]}\n");
  } catch (const waco::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
