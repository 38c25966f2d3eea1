// waco-gnn: GCN-style propagation, H <- relu(Â H W_l) over several layers and epochs, where Â is
// the symmetrically normalized adjacency with self loops of a graph, D^-1/2 (A + I) D^-1/2 (Kipf
// and Welling's propagation rule; forward passes only). The sparse product Â H (SpMM, n = the
// feature width) runs on three back-ends side by side:
//   plan   the kernel waco::tune chose for Â at this width (tuning time counted),
//   csr    the hand-written csr (waco::make_plan(Â, SpMM, "csr")),
//   eigen  Eigen's sparse x dense product (row-major both, parallel).
// The dense products H W_l go through Eigen for every back-end. Features and weights are seeded.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "example_common.hpp"

namespace {

const char* kUsage =
    "usage: waco-gnn GRAPH.mtx [options]\n"
    "  --features F     width of the node features (default 64)\n"
    "  --layers L       layers per forward pass (default 2)\n"
    "  --epochs E       forward passes (default 20)\n"
    "  --backends LIST  of plan, csr, eigen (default all three)\n"
    "  --threads N      threads (default: all cores)\n"
    "  --search S       waco tune's search (default model)\n"
    "  --budget N       candidates tune measures (default: the search's)\n"
    "  --tuning-share F share of the expected calls' csr time tuning may take (default 0.1)\n"
    "  --always-tune    tune without telling waco the expected calls (no not-worth-it shortcut)\n"
    "  --adaptive       an adaptive plan: csr at once, the model's nominees tried on the calls\n"
    "  --cache-dir DIR  waco's tuning cache\n"
    "  --refresh        tune again even when the cache has a decision\n"
    "  --verbose        tune's progress on stderr\n"
    "  --json           one JSON object instead of the table\n"
    "  --check          exit 1 unless every back-end computes the same features\n"
    "example: waco-gnn ../shared/data/matrices/email-Enron.mtx.gz --features 64 --epochs 20\n";

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Outcome {
  std::string backend;
  double setup_s = 0;
  double run_s = 0;
  double spmm_s = 0;
  double difference = 0;  ///< max |H - H_eigen| / max |H_eigen|
  std::string detail;
  double break_even = -1;  ///< plan: calls after which its tuning paid for itself (-1: never/unknown)
  double speedup = 0;      ///< plan: tune's side-by-side speedup over csr
  RowMatrix H;
};

/// D^-1/2 (A + I) D^-1/2 of A's pattern.
waco::Matrix normalized_adjacency(const example::Csr& a) {
  std::vector<std::int32_t> row, col;
  std::vector<float> val;
  std::vector<double> degree(a.rows, 1.0);  // the self loop
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t e = a.rowptr[r]; e < a.rowptr[r + 1]; ++e)
      if (a.colind[e] != r) degree[r] += 1.0;
  for (std::int64_t r = 0; r < a.rows; ++r) {
    row.push_back(static_cast<std::int32_t>(r));
    col.push_back(static_cast<std::int32_t>(r));
    val.push_back(static_cast<float>(1.0 / degree[r]));
    for (std::int64_t e = a.rowptr[r]; e < a.rowptr[r + 1]; ++e) {
      if (a.colind[e] == r) continue;
      row.push_back(static_cast<std::int32_t>(r));
      col.push_back(a.colind[e]);
      val.push_back(static_cast<float>(1.0 / std::sqrt(degree[r] * degree[a.colind[e]])));
    }
  }
  return waco::Matrix::from_coo(a.rows, a.cols, static_cast<std::int64_t>(val.size()), row.data(),
                                col.data(), val.data());
}

RowMatrix seeded(std::int64_t rows, std::int64_t cols, unsigned seed, float scale) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  RowMatrix m(rows, cols);
  for (std::int64_t i = 0; i < m.size(); ++i) m.data()[i] = u(gen);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  auto defaults = example::waco_option_defaults();
  defaults.insert({{"features", "64"}, {"layers", "2"}, {"epochs", "20"}});
  const example::Args args(argc, argv, defaults, kUsage);
  return example::guarded([&]() -> int {
    const int threads = example::threads_of(args);
    example::warm_up_threads(threads);
    Eigen::setNbThreads(threads);
    const std::int64_t F = args.integer("features");
    const int layers = static_cast<int>(args.integer("layers"));
    const int epochs = static_cast<int>(args.integer("epochs"));
    if (F < 1 || layers < 1 || epochs < 1) args.fail("--features, --layers and --epochs must be >= 1");

    const example::Csr graph = example::csr_of(waco::Matrix::from_file(args.file()));
    if (graph.rows != graph.cols) args.fail("the graph's adjacency matrix is not square");
    const waco::Matrix A = normalized_adjacency(graph);
    const example::Csr a = example::csr_of(A);
    const RowMatrix H0 = seeded(a.rows, F, 1, 1.0f);
    std::vector<RowMatrix> W;
    for (int l = 0; l < layers; ++l)
      W.push_back(seeded(F, F, 100 + l, static_cast<float>(std::sqrt(3.0 / F))));

    const auto forward = [&](const std::function<void(const RowMatrix&, RowMatrix&)>& spmm,
                             Outcome& o) {
      RowMatrix H = H0, T(a.rows, F);
      const double t0 = example::now();
      for (int e = 0; e < epochs; ++e) {
        H = H0;
        for (int l = 0; l < layers; ++l) {
          const double s0 = example::now();
          spmm(H, T);
          o.spmm_s += example::now() - s0;
          H.noalias() = (T * W[l]).cwiseMax(0.0f);
        }
      }
      o.run_s = example::now() - t0;
      o.H = H;
    };

    std::vector<Outcome> out;
    waco::Options wo = example::waco_options(args);
    wo.dense = static_cast<int>(F);
    for (const std::string backend : {"plan", "csr"}) {
      if (!example::wants(args, backend)) continue;
      Outcome o;
      o.backend = backend;
      example::WacoBackend w = example::waco_backend(backend, A, waco::Kernel::SpMM, wo,
                                 static_cast<std::int64_t>(layers) * epochs, args);
      const waco::Plan& plan = w.plan;
      o.setup_s = w.setup_s;
      forward([&](const RowMatrix& H, RowMatrix& T) { plan.spmm(F, H.data(), F, T.data(), F); }, o);
      example::describe(w, backend == std::string("plan"));  // an adaptive plan decided meanwhile
      o.break_even = w.break_even;
      o.speedup = w.speedup;
      o.detail = w.detail;
      out.push_back(std::move(o));
    }
    if (example::wants(args, "eigen")) {
      Outcome o;
      o.backend = "eigen";
      const double t0 = example::now();
      const example::EigenCsr m = example::eigen_of(a);
      o.setup_s = example::now() - t0;
      o.detail = "SparseMatrix<RowMajor> * Matrix<RowMajor>";
      forward([&](const RowMatrix& H, RowMatrix& T) { T.noalias() = m * H; }, o);
      out.push_back(std::move(o));
    }
    const RowMatrix& ref = out.back().H;
    const float scale = std::max(ref.cwiseAbs().maxCoeff(), 1e-30f);
    for (Outcome& o : out) o.difference = (o.H - ref).cwiseAbs().maxCoeff() / scale;

    if (args.flag("json")) {
      std::printf("{\"graph\": \"%s\", \"rows\": %lld, \"nnz\": %lld, \"threads\": %d, "
                  "\"features\": %lld, \"layers\": %d, \"epochs\": %d, \"backends\": [",
                  args.file().c_str(), static_cast<long long>(a.rows),
                  static_cast<long long>(a.val.size()), threads, static_cast<long long>(F), layers,
                  epochs);
      for (std::size_t i = 0; i < out.size(); ++i)
        std::printf("%s{\"backend\": \"%s\", \"setup_s\": %.6f, \"run_s\": %.6f, \"spmm_s\": %.6f, "
                    "\"total_s\": %.6f, \"per_spmm_s\": %.9f, \"difference\": %.3e, \"break_even_calls\": %.1f, \"tune_speedup\": %.4f, \"detail\": \"%s\"}",
                    i ? ", " : "", out[i].backend.c_str(), out[i].setup_s, out[i].run_s,
                    out[i].spmm_s, out[i].setup_s + out[i].run_s,
                    out[i].spmm_s / (static_cast<double>(layers) * epochs), out[i].difference,
                    out[i].break_even, out[i].speedup, out[i].detail.c_str());
      std::printf("]}\n");
    } else {
      std::printf("GCN propagation on %s: %lld nodes, %lld nonzeros of D^-1/2 (A+I) D^-1/2, %lld "
                  "features, %d layers x %d epochs, %d threads\n",
                  args.file().c_str(), static_cast<long long>(a.rows),
                  static_cast<long long>(a.val.size()), static_cast<long long>(F), layers, epochs,
                  threads);
      std::printf("  %-6s %10s %10s %10s %12s %10s  %s\n", "", "setup", "run", "total", "per SpMM",
                  "vs eigen", "");
      for (const Outcome& o : out)
        std::printf("  %-6s %9.3fs %9.3fs %9.3fs %10.1fus %10.1e  %s\n", o.backend.c_str(),
                    o.setup_s, o.run_s, o.setup_s + o.run_s,
                    1e6 * o.spmm_s / (static_cast<double>(layers) * epochs), o.difference,
                    o.detail.c_str());
    }
    if (args.flag("check"))
      for (const Outcome& o : out)
        if (!(o.difference < 1e-4)) {
          std::fprintf(stderr, "check: %s differs from eigen by %.3e\n", o.backend.c_str(),
                       o.difference);
          return 1;
        }
    return 0;
  });
}
