// The caller's output off a cache line (issue 33, session 79): a plan of SCHEDULE against the
// baseline (csr; csf for a 3-D tensor) with the output at 0, 16, 32 and 48 bytes past a 64-byte
// line (malloc, std::vector and NumPy put large arrays at +16), the inputs on a line; per offset,
// 5 windows of 20 ms of each plan's calls alternated, the mean of the windows' medians.
//   usage: output_offsets FILE SCHEDULE [N]   (SpMM for a matrix, MTTKRP for a tensor; N the
//          dense size, default 64 / 16); built and run by scripts/bench_output_offsets.sh
#include <waco/waco.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// A 64-byte-aligned array with room for `n` values at `offset` bytes past its start.
struct Array {
  explicit Array(std::size_t n, std::size_t offset)
      : base(static_cast<char*>(std::aligned_alloc(64, (n * sizeof(float) + offset + 127) / 64 * 64))),
        at(reinterpret_cast<float*>(base + offset)) {
    std::fill(at, at + n, 0.5f);
  }
  ~Array() { std::free(base); }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  char* base;
  float* at;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: output_offsets FILE SCHEDULE [N]\n");
    return 2;
  }
  const waco::Matrix A = waco::Matrix::from_file(argv[1]);
  const bool tensor = A.order() == 3;
  const int n = argc > 3 ? std::atoi(argv[3]) : tensor ? 16 : 64;
  waco::Options o;
  o.threads = 2;
  o.dense = n;
  const waco::Kernel k = tensor ? waco::Kernel::MTTKRP : waco::Kernel::SpMM;
  const waco::Plan base = waco::make_plan(A, k, tensor ? "csf" : "csr", o);
  const waco::Plan plan = waco::make_plan(A, k, argv[2], o);
  const std::size_t nb = static_cast<std::size_t>(A.dim(1) * n);
  const std::size_t nc = tensor ? static_cast<std::size_t>(A.dim(2) * n) : 1;
  const std::size_t no = static_cast<std::size_t>(A.dim(0) * n);
  Array B(nb, 0), C(nc, 0);
  const auto median_call = [&](const waco::Plan& p, float* out) {
    std::vector<double> t;
    const double end = now() + 0.02;
    while (now() < end) {
      const double t0 = now();
      if (tensor)
        p.mttkrp(n, B.at, n, C.at, n, out, n);
      else
        p.spmm(n, B.at, n, out, n);
      t.push_back(now() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  std::printf("%s %s n=%d, 2 threads: %s\n", argv[1], tensor ? "mttkrp" : "spmm", n, argv[2]);
  for (const std::size_t offset : {0, 16, 32, 48}) {
    Array out(no, offset);
    double tb = 0, tp = 0;
    for (int w = 0; w < 5; ++w) {
      tb += median_call(base, out.at);
      tp += median_call(plan, out.at);
    }
    std::printf("  output +%2zu bytes: %s %9.1f us, plan %9.1f us, speedup %.2f\n", offset,
                tensor ? "csf" : "csr", tb / 5 * 1e6, tp / 5 * 1e6, tb / tp);
  }
  return 0;
}
