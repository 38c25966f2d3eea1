// Diagnostic harness (issue 33, session 57): the csr SpMV baseline's parallel loop
// (kernels::csr_spmv_rows, the compiled copy every tune times) timed round-robin with K - 1 other
// kernels, each timed call after two settle calls of its own, as a tune's side-by-side child and
// `bench` time them. The others are 1024-row-block SpMVs on copies of the matrix, scheduled
// dynamic,1 or static (the shapes of the hybrid's ca-HepTh nominees). Prints each kernel's median
// (us) over 50 rounds. Built and run by scripts/bench_csr_context.sh.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/kernels/timing.hpp"

using namespace waco::kernels;

namespace {

struct Copy {
  std::vector<index_t> r, c;
  std::vector<double> v, x, y;
};

template <bool Dynamic>
__attribute__((noinline)) void blocked(Copy& c, index_t n) {
  const index_t blocks = (n + 1023) / 1024;
  const auto body = [&](index_t b) {
    for (index_t i = b * 1024; i < std::min(n, (b + 1) * 1024); ++i) {
      double s = 0;
      for (index_t p = c.r[i]; p < c.r[i + 1]; ++p) s += c.v[p] * c.x[c.c[p]];
      c.y[i] = s;
    }
  };
  if constexpr (Dynamic) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(2)
    for (index_t b = 0; b < blocks; ++b) body(b);
  } else {
#pragma omp parallel for schedule(static) num_threads(2)
    for (index_t b = 0; b < blocks; ++b) body(b);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: csr_context MATRIX.mtx K dynamic|static\n");
    return 2;
  }
  const CsrMatrix a = to_csr(read_matrix_market(argv[1]).matrix);
  const int k_count = std::atoi(argv[2]);
  const bool dynamic = std::string(argv[3]) == "dynamic";
  const index_t n = a.rows;
  std::vector<Copy> copies(static_cast<std::size_t>(k_count));
  for (Copy& c : copies) {
    c.r = a.rowptr;
    c.c = a.colidx;
    c.v = a.val;
    c.x.assign(static_cast<std::size_t>(a.cols), 1.0);
    c.y.assign(static_cast<std::size_t>(n), 0.0);
  }
  std::vector<std::vector<double>> times(copies.size());
  for (int round = 0; round < 60; ++round)
    for (std::size_t k = 0; k < copies.size(); ++k) {
      Copy& c = copies[k];
      const CsrView<double> view{n, c.r.data(), c.c.data(), c.v.data()};
      const auto run = [&] {
        if (k == 0) csr_spmv_rows(view, c.x.data(), c.y.data(), 2);
        else if (dynamic) blocked<true>(c, n);
        else blocked<false>(c, n);
      };
      run();
      run();
      const double t0 = now_seconds();
      run();
      if (round >= 10) times[k].push_back(now_seconds() - t0);
    }
  std::printf("K=%d others %s: csr", k_count, dynamic ? "dynamic,1" : "static");
  for (const auto& t : times) std::printf(" %.1f", median(t) * 1e6);
  std::printf(" us\n");
}
