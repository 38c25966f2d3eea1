// bench_waconet: the cost of WACONet on this CPU (issue 6). Not a test: it prints a table.
//
// Parent mode (default): picks the `--top` largest matrices of DATA/MANIFEST.tsv by nnz and, for
// every (matrix, variant, conv implementation, thread count), runs itself in a fresh process
// (`--one`) so that each configuration's peak memory (VmHWM) is its own. Child mode (`--one FILE`)
// measures kernel-map build time (prepare), forward time (extract) and forward+backward time
// (forward_backward) as medians of `--repeats` runs after one warm-up, with min and max, the
// median process CPU time of each (immune to waiting for a core on a shared machine), and the
// peak resident memory, and prints one tab-separated line. Times in seconds, memory in MiB.
// The child also reports the peak after maps + forward only (peak_fwd_MiB: the inference path),
// times the csr SpMV and SpMM (J = 256) baselines on the same matrix and thread count (after the
// peak memory is read) and gives maps, maps + forward and maps + forward+backward in units of
// those calls (*_spmv, *_spmm).
//
// Profile mode (`--profile FILE`): one process, one prepared pattern, the conv implementations of
// `--impls` timed side by side (interleaved rounds, median/min/max of `--repeats`), and per layer:
// sites, pairs, forward and backward time, GFLOP and GFLOP/s, bytes gathered (pairs x cin x 4)
// and scattered (pairs x cout x 4) and the GB/s they imply, beside the machine's fp32 GEMM rate
// (torch::mm) and memory bandwidth (an OpenMP triad), both measured at the same thread count.
//
//   bench_waconet --data /work/shared/data [--top 10] [--variants full,small] [--threads 1,2]
//                 [--impls fused] [--repeats 3]
//   bench_waconet --profile FILE [--variant full] [--impls fused,gemm,autograd]
//                 [--thread-count 2] [--repeats 5]
#include <omp.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "waco/kernels/error.hpp"
#include "waco/kernels/implementation.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/feature_extractor.hpp"
#include "waco/kernels/process_memory.hpp"

namespace {

using namespace waco;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, sep))
    if (!tok.empty()) out.push_back(tok);
  return out;
}

struct Options {
  std::string data = "/work/shared/data";
  int top = 10;
  std::vector<std::string> variants = {"full", "small"};
  std::vector<std::string> threads = {"1", "2"};
  std::vector<std::string> impls = {"fused"};
  int repeats = 3;
  std::string one;  // child mode: the matrix file
  std::string profile;  // profile mode: the matrix file
  std::string variant = "full";
  std::string impl = "fused";
  int thread_count = 1;
};

std::string fmt(const kernels::TimingStats& s) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.4f\t%.4f\t%.4f", s.median, s.min, s.max);
  return buf;
}

// Process CPU seconds (all threads). On a shared, oversubscribed machine wall time includes the
// time this process waited for a core; CPU time does not, so both are reported.
double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Median seconds of the csr baseline for SpMV (J = 1) or SpMM (J = 256).
double csr_seconds(const kernels::CooMatrix& a, kernels::KernelKind k, int threads) {
  const auto ops = kernels::make_dense_operands(k, &a, nullptr, 256, 1);
  const auto prob = kernels::make_problem(k, &a, nullptr, ops);
  auto impl = kernels::make_implementation("csr", k);
  impl->prepare(prob, threads);
  kernels::TimingOptions t;
  t.warmup = 2;
  t.repeats = 7;
  return kernels::time_repeated([&] { impl->run(); }, t).median;
}

int run_one(const Options& o) {
  learned::set_threads(o.thread_count);
  auto loaded = kernels::read_matrix_market(o.one);
  const auto& a = loaded.matrix;
  const double rss_loaded = static_cast<double>(kernels::current_rss_bytes()) / (1 << 20);
  auto fx = learned::FeatureExtractor::create(learned::waconet_variant(o.variant, 2), 1);
  fx.set_conv_impl(learned::parse_conv_impl(o.impl));
  std::vector<double> maps, fwd, fb, maps_cpu, fwd_cpu, fb_cpu;
  learned::PreparedPattern p;
  for (int r = 0; r < o.repeats; ++r) {
    p = learned::PreparedPattern();  // free the previous geometry first
    const double c0 = cpu_now();
    p = fx.prepare(a);
    maps_cpu.push_back(cpu_now() - c0);
    maps.push_back(p.stats().build_seconds);
  }
  fx.extract(p);  // warm-up
  for (int r = 0; r < o.repeats; ++r) {
    const double c0 = cpu_now();
    fwd.push_back(fx.extract(p).times.forward);
    fwd_cpu.push_back(cpu_now() - c0);
  }
  // Peak so far: the inference path (kernel maps + forward), before any backward pass.
  const double peak_fwd = static_cast<double>(kernels::peak_rss_bytes()) / (1 << 20);
  fx.forward_backward(p);  // warm-up
  for (int r = 0; r < o.repeats; ++r) {
    const double c0 = cpu_now();
    const auto f = fx.forward_backward(p);
    fb_cpu.push_back(cpu_now() - c0);
    fb.push_back(f.times.forward + f.times.backward);
  }
  std::int64_t pairs = 0;
  for (auto v : p.stats().pairs) pairs += v;
  const std::int64_t sites_l1 = p.stats().sites.at(1);
  const double maps_mib = static_cast<double>(p.stats().bytes) / (1 << 20);
  const double peak = static_cast<double>(kernels::peak_rss_bytes()) / (1 << 20);
  p = learned::PreparedPattern();
  const double spmv = csr_seconds(a, kernels::KernelKind::SpMV, o.thread_count);
  const double spmm = csr_seconds(a, kernels::KernelKind::SpMM, o.thread_count);
  const double m_med = kernels::summarize(maps).median, f_med = kernels::summarize(fwd).median,
               b_med = kernels::summarize(fb).median;
  std::printf("%s\t%lld\t%s\t%s\t%d\t%s\t%s\t%s\t%.4f\t%.4f\t%.4f\t%.0f\t%.0f\t%.0f\t%lld\t%lld\t"
              "%.6f\t%.5f\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%.0f\n",
              o.one.c_str(), static_cast<long long>(a.nnz()), o.variant.c_str(), o.impl.c_str(),
              o.thread_count, fmt(kernels::summarize(maps)).c_str(),
              fmt(kernels::summarize(fwd)).c_str(), fmt(kernels::summarize(fb)).c_str(),
              kernels::summarize(maps_cpu).median, kernels::summarize(fwd_cpu).median,
              kernels::summarize(fb_cpu).median, peak, rss_loaded,
              maps_mib, static_cast<long long>(pairs),
              static_cast<long long>(sites_l1), spmv, spmm, m_med / spmv, (m_med + f_med) / spmv,
              (m_med + b_med) / spmv, m_med / spmm, (m_med + f_med) / spmm, (m_med + b_med) / spmm,
              peak_fwd);
  return 0;
}

// An OpenMP triad a = b + s c over 3 x 64 MiB, bytes counted as 2 reads + 1 write: GB/s.
double triad_gbs(int threads) {
  const std::int64_t n = std::int64_t{16} << 20;
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  std::vector<double> t;
  for (int r = 0; r < 6; ++r) {
    const double t0 = kernels::now_seconds();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] + 0.5f * c[i];
    if (r > 0) t.push_back(kernels::now_seconds() - t0);
  }
  std::sort(t.begin(), t.end());
  return 12.0 * static_cast<double>(n) / t[t.size() / 2] * 1e-9 + 0.0 * a[n / 2];
}

int run_profile(const Options& o) {
  learned::set_threads(o.thread_count);
  const auto a = kernels::read_matrix_market(o.profile).matrix;
  const auto params = learned::waconet_variant(o.variant, 2);
  auto fx = learned::FeatureExtractor::create(params, 1);
  std::vector<double> maps;
  learned::PreparedPattern p;
  for (int r = 0; r < o.repeats; ++r) {
    p = learned::PreparedPattern();
    p = fx.prepare(a);
    maps.push_back(p.stats().build_seconds);
  }
  const auto& st = p.stats();
  const int L = static_cast<int>(st.sites.size());
  const double gemm_skinny = learned::measure_gemm_gflops(131072, 32, 32);
  const double gemm_big = learned::measure_gemm_gflops(4096, 1024, 1024);
  const double bw = triad_gbs(o.thread_count);
  std::printf("# %s: nnz %lld, %d threads, variant %s; maps median %.4f s (min %.4f max %.4f)\n",
              o.profile.c_str(), static_cast<long long>(a.nnz()), o.thread_count,
              o.variant.c_str(), kernels::summarize(maps).median, kernels::summarize(maps).min,
              kernels::summarize(maps).max);
  std::printf("# machine: torch::mm fp32 %.1f GFLOP/s (4096x1024x1024), %.1f GFLOP/s "
              "(131072x32x32); triad %.1f GB/s\n", gemm_big, gemm_skinny, bw);
  const std::size_t I = o.impls.size();
  // Interleaved rounds: every round runs each implementation once (forward, then fwd+bwd).
  std::vector<std::vector<std::vector<double>>> fl(I), bl(I);  // [impl][layer][repeat]
  std::vector<std::vector<double>> ft(I), bt(I);
  std::vector<learned::FeatureExtractor> fxs;
  for (std::size_t k = 0; k < I; ++k) {
    fxs.push_back(learned::FeatureExtractor::create(params, 1));
    fxs.back().set_conv_impl(learned::parse_conv_impl(o.impls[k]));
    fxs.back().extract(p);  // warm-up
    fxs.back().forward_backward(p);
    fl[k].assign(L, {});
    bl[k].assign(L, {});
  }
  for (int r = 0; r < o.repeats; ++r)
    for (std::size_t q = 0; q < I; ++q) {
      const std::size_t k = (q + r) % I;
      const auto f = fxs[k].extract(p);
      ft[k].push_back(f.times.forward);
      for (int l = 0; l < L; ++l) fl[k][l].push_back(f.times.layers.at(l));
      const auto b = fxs[k].forward_backward(p);
      bt[k].push_back(b.times.forward + b.times.backward);
      for (int l = 0; l < L; ++l) bl[k][l].push_back(b.times.layers_backward.at(l));
    }
  std::printf("impl\tforward_med\tforward_min\tforward_max\tfwdbwd_med\tfwdbwd_min\tfwdbwd_max\t"
              "fwd_ratio\tfwdbwd_ratio\n");
  const double f0 = kernels::summarize(ft[0]).median, b0 = kernels::summarize(bt[0]).median;
  for (std::size_t k = 0; k < I; ++k) {
    const auto fs = kernels::summarize(ft[k]), bs = kernels::summarize(bt[k]);
    std::printf("%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\t%.2f\t%.2f\n", o.impls[k].c_str(),
                fs.median, fs.min, fs.max, bs.median, bs.min, bs.max, fs.median / f0,
                bs.median / b0);
  }
  const int C = params.channels;
  for (std::size_t k = 0; k < I; ++k) {
    std::printf("# per layer, impl %s (medians)\n", o.impls[k].c_str());
    std::printf("layer\tsites_in\tsites_out\tpairs\tfwd_ms\tGFLOP\tfwd_GFLOPs\tgather_MB\t"
                "scatter_MB\tfwd_GBs\tbwd_ms\tbwd_GFLOPs\tbwd_GBs\n");
    for (int l = 0; l < L; ++l) {
      const int cin = l == 0 ? 1 : C;
      const double pairs = static_cast<double>(st.pairs[l]);
      const double flop = 2.0 * pairs * cin * C;
      const double gather = pairs * cin * 4.0, scatter = pairs * C * 4.0;
      const double tf = kernels::summarize(fl[k][l]).median;
      const double tb = kernels::summarize(bl[k][l]).median;
      // Backward: weight gradient (always) and input gradient (not for layer 0, whose input is
      // the constant 1): gathers the inputs and the output gradients, scatters input gradients.
      const double bflop = l == 0 ? flop : 2.0 * flop;
      const double bbytes = l == 0 ? gather + scatter : 2.0 * (gather + scatter);
      std::printf("%d\t%lld\t%lld\t%.0f\t%.2f\t%.3f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.1f\t%.1f\n", l,
                  static_cast<long long>(l == 0 ? a.nnz() : st.sites[l - 1]),
                  static_cast<long long>(st.sites[l]), pairs, tf * 1e3, flop * 1e-9,
                  flop / tf * 1e-9, gather / 1e6, scatter / 1e6, (gather + scatter) / tf * 1e-9,
                  tb * 1e3, bflop / tb * 1e-9, bbytes / tb * 1e-9);
    }
  }
  std::printf("# peak RSS %.0f MiB\n", static_cast<double>(kernels::peak_rss_bytes()) / (1 << 20));
  return 0;
}

int run_parent(const Options& o, const std::string& self) {
  std::ifstream man(o.data + "/MANIFEST.tsv");
  if (!man)
    throw kernels::Error("cannot read " + o.data + "/MANIFEST.tsv", "pass --data DIR");
  std::string line;
  std::getline(man, line);
  const auto head = split(line, '\t');
  auto col = [&](const std::string& name) {
    const auto it = std::find(head.begin(), head.end(), name);
    if (it == head.end()) throw kernels::Error("MANIFEST.tsv has no column '" + name + "'");
    return static_cast<std::size_t>(it - head.begin());
  };
  const std::size_t c_type = col("type"), c_file = col("file"), c_nnz = col("nnz");
  std::vector<std::pair<long long, std::string>> mats;
  while (std::getline(man, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string tok;
    while (std::getline(ss, tok, '\t')) f.push_back(tok);
    if (f.size() <= std::max({c_type, c_file, c_nnz}) || f[c_type] != "matrix") continue;
    mats.emplace_back(std::stoll(f[c_nnz]), o.data + "/" + f[c_file]);
  }
  std::sort(mats.rbegin(), mats.rend());
  if (static_cast<int>(mats.size()) > o.top) mats.resize(o.top);
  std::printf("matrix\tnnz\tvariant\timpl\tthreads\tmaps_med\tmaps_min\tmaps_max\tfwd_med\t"
              "fwd_min\tfwd_max\tfwdbwd_med\tfwdbwd_min\tfwdbwd_max\tmaps_cpu\tfwd_cpu\tfwdbwd_cpu\t"
              "peak_MiB\tloaded_MiB\t"
              "maps_MiB\tpairs\tsites_l1\tspmv_s\tspmm_s\tmaps_spmv\tfwd_spmv\tfwdbwd_spmv\t"
              "maps_spmm\tfwd_spmm\tfwdbwd_spmm\tpeak_fwd_MiB\n");
  std::fflush(stdout);
  for (const auto& [nnz, path] : mats)
    for (const auto& v : o.variants)
      for (const auto& impl : o.impls)
        for (const auto& t : o.threads) {
          const std::string cmd = "'" + self + "' --one '" + path + "' --variant " + v +
                                  " --impl " + impl + " --thread-count " + t + " --repeats " +
                                  std::to_string(o.repeats);
          FILE* pipe = popen(cmd.c_str(), "r");
          if (!pipe) throw kernels::Error("cannot run " + cmd);
          char buf[4096];
          std::string out;
          while (std::fgets(buf, sizeof buf, pipe)) out += buf;
          const int rc = pclose(pipe);
          if (rc != 0) std::printf("# failed (status %d): %s\n", rc, cmd.c_str());
          std::fputs(out.c_str(), stdout);
          std::fflush(stdout);
        }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw kernels::Error("option " + a + " needs a value");
        return argv[++i];
      };
      if (a == "--data") o.data = next();
      else if (a == "--top") o.top = std::stoi(next());
      else if (a == "--variants") o.variants = split(next(), ',');
      else if (a == "--threads") o.threads = split(next(), ',');
      else if (a == "--impls") o.impls = split(next(), ',');
      else if (a == "--repeats") o.repeats = std::max(1, std::stoi(next()));
      else if (a == "--one") o.one = next();
      else if (a == "--profile") o.profile = next();
      else if (a == "--variant") o.variant = next();
      else if (a == "--impl") o.impl = next();
      else if (a == "--thread-count") o.thread_count = std::stoi(next());
      else throw kernels::Error("unknown option " + a,
                                "see the comment at the top of learned/bench/bench_waconet.cpp");
    }
    if (!learned::built_with_torch())
      throw kernels::Error("bench_waconet needs LibTorch", "waco_learned was built without it");
    if (!o.one.empty()) return run_one(o);
    if (!o.profile.empty()) return run_profile(o);
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) throw kernels::Error("cannot resolve /proc/self/exe");
    self[n] = '\0';
    return run_parent(o, self);
  } catch (const kernels::Error& e) {
    std::cerr << "error: " << e.what();
    if (!e.hint().empty()) std::cerr << " (hint: " << e.hint() << ")";
    std::cerr << "\n";
    return 1;
  }
}
