// Diagnostic harness (issue 33, session 57): the csr SpMV baseline's parallel loop
// (kernels::csr_spmv_rows, the compiled copy every tune times) timed round-robin with K - 1 other
// kernels, each timed call after two settle calls of its own, as a tune's side-by-side child and
// `bench` time them. The others are 1024-row-block SpMVs on copies of the matrix, scheduled
// dynamic,1 or static (the shapes of the hybrid's ca-HepTh nominees). Prints each kernel's median
// (us) over 50 rounds. Built and run by scripts/bench_csr_context.sh.
//
// `csr_context MATRIX.mtx K mapping [probe]` (session 61): K copies of the csr loop alone, each
// timed round-robin after 1 ms of its own settle calls (kernels::time_interleaved's settle), in
// three mappings of the same rows to the two threads: the baseline's compiled loop (dynamic, its
// ~4 chunks a thread), the same chunks dealt round-robin (`schedule(static, chunk)`: every call
// gives each thread the same rows) and one block a thread (`schedule(static)`). With `probe`, the
// software counts time_interleaved reads around a timed run (getrusage of the process, each
// thread's /proc schedstat) are read right before it. Prints the median and 75th percentile (us).
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

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

/// k copies of the matrix, each with its own x (ones) and y.
std::vector<Copy> make_copies(const CsrMatrix& a, int k) {
  std::vector<Copy> copies(static_cast<std::size_t>(k));
  for (Copy& c : copies) {
    c.r = a.rowptr;
    c.c = a.colidx;
    c.v = a.val;
    c.x.assign(static_cast<std::size_t>(a.cols), 1.0);
    c.y.assign(static_cast<std::size_t>(a.rows), 0.0);
  }
  return copies;
}

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

enum class Mapping { Dynamic, Cyclic, Blocks };

/// The csr loop with its rows dealt to the threads by `m` (Dynamic: the baseline's own copy).
__attribute__((noinline)) void csr_mapped(Copy& c, index_t n, Mapping m) {
  if (m == Mapping::Dynamic) {
    csr_spmv_rows(CsrView<double>{n, c.r.data(), c.c.data(), c.v.data()}, c.x.data(), c.y.data(), 2);
    return;
  }
  const index_t chunk = csr_spmv_chunk(n, 2);
  const index_t* rp = c.r.data();
  const index_t* ci = c.c.data();
  const double* v = c.v.data();
  const double* x = c.x.data();
  double* y = c.y.data();
  if (m == Mapping::Cyclic) {
#pragma omp parallel for schedule(static, chunk) num_threads(2)
    for (index_t i = 0; i < n; ++i) {
      double s = 0;
      for (index_t p = rp[i]; p < rp[i + 1]; ++p) s += v[p] * x[ci[p]];
      y[i] = s;
    }
  } else {
#pragma omp parallel for schedule(static) num_threads(2)
    for (index_t i = 0; i < n; ++i) {
      double s = 0;
      for (index_t p = rp[i]; p < rp[i + 1]; ++p) s += v[p] * x[ci[p]];
      y[i] = s;
    }
  }
}

/// What time_interleaved reads before a timed run: the process's rusage and every thread's
/// schedstat (files opened once, read with pread).
struct Probe {
  std::vector<int> fds;
  void open_all() {
    DIR* dir = ::opendir("/proc/self/task");
    if (!dir) return;
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      const std::string path = std::string("/proc/self/task/") + e->d_name + "/schedstat";
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) fds.push_back(fd);
    }
    ::closedir(dir);
  }
  void read() const {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    char buf[128];
    for (const int fd : fds) (void)!::pread(fd, buf, sizeof buf, 0);
  }
};

int mappings(const CsrMatrix& a, int k_count, bool probe) {
  const index_t n = a.rows;
  std::vector<Copy> copies = make_copies(a, k_count);
  Probe p;
  csr_mapped(copies[0], n, Mapping::Dynamic);  // the OpenMP team exists before the files are listed
  p.open_all();
  const char* names[] = {"dynamic (the baseline)", "static,chunk (cyclic)", "static (blocks)"};
  for (const Mapping m : {Mapping::Dynamic, Mapping::Cyclic, Mapping::Blocks}) {
    std::vector<std::vector<double>> times(copies.size());
    for (int round = 0; round < 62; ++round)
      for (std::size_t k = 0; k < copies.size(); ++k) {
        const double s0 = now_seconds();
        while (now_seconds() - s0 < 1e-3) csr_mapped(copies[k], n, m);
        if (probe) p.read();
        const double t0 = now_seconds();
        csr_mapped(copies[k], n, m);
        if (round >= 2) times[k].push_back(now_seconds() - t0);
      }
    std::printf("K=%d %s%s: median/q75", k_count, names[static_cast<int>(m)], probe ? ", probe" : "");
    for (auto& t : times) {
      std::sort(t.begin(), t.end());
      std::printf(" %.1f/%.1f", quantile(t, 0.5) * 1e6, quantile(t, 0.75) * 1e6);
    }
    std::printf(" us (chunk %d rows)\n", static_cast<int>(csr_spmv_chunk(n, 2)));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::atoi(argv[2]) < 1) {
    std::fprintf(stderr, "csr_context: K must be at least 1\n");
    return 2;
  }
  if (argc >= 4 && std::string(argv[3]) == "mapping") {
    const bool probe = argc >= 5 && std::string(argv[4]) == "probe";
    return mappings(to_csr(read_matrix_market(argv[1]).matrix), std::atoi(argv[2]), probe);
  }
  if (argc != 4) {
    std::fprintf(stderr, "usage: csr_context MATRIX.mtx K dynamic|static|mapping [probe]\n");
    return 2;
  }
  const CsrMatrix a = to_csr(read_matrix_market(argv[1]).matrix);
  const int k_count = std::atoi(argv[2]);
  const bool dynamic = std::string(argv[3]) == "dynamic";
  const index_t n = a.rows;
  std::vector<Copy> copies = make_copies(a, k_count);
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
