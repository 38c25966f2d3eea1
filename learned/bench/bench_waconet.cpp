// bench_waconet: the cost of WACONet on this CPU (issue 6). Not a test: it prints a table.
//
// Parent mode (default): picks the `--top` largest matrices of DATA/MANIFEST.tsv by nnz and, for
// every (matrix, variant, conv implementation, thread count), runs itself in a fresh process
// (`--one`) so that each configuration's peak memory (VmHWM) is its own. Child mode (`--one FILE`)
// measures kernel-map build time (prepare), forward time (extract) and forward+backward time
// (forward_backward) as medians of `--repeats` runs after one warm-up, with min and max, the
// median process CPU time of each (immune to waiting for a core on a shared machine), and the
// peak resident memory, and prints one tab-separated line. Times in seconds, memory in MiB.
//
//   bench_waconet --data /work/shared/data [--top 10] [--variants full,small] [--threads 1,2]
//                 [--impls fused] [--repeats 3]
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
#include "waco/kernels/io.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/feature_extractor.hpp"
#include "waco/learned/peak_memory.hpp"

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

int run_one(const Options& o) {
  learned::set_threads(o.thread_count);
  auto loaded = kernels::read_matrix_market(o.one);
  const auto& a = loaded.matrix;
  const double rss_loaded = static_cast<double>(learned::current_rss_bytes()) / (1 << 20);
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
  fx.forward_backward(p);  // warm-up
  for (int r = 0; r < o.repeats; ++r) {
    const double c0 = cpu_now();
    const auto f = fx.forward_backward(p);
    fb_cpu.push_back(cpu_now() - c0);
    fb.push_back(f.times.forward + f.times.backward);
  }
  std::int64_t pairs = 0;
  for (auto v : p.stats().pairs) pairs += v;
  const double peak = static_cast<double>(learned::peak_rss_bytes()) / (1 << 20);
  std::printf("%s\t%lld\t%s\t%s\t%d\t%s\t%s\t%s\t%.4f\t%.4f\t%.4f\t%.0f\t%.0f\t%.0f\t%lld\t%lld\n",
              o.one.c_str(), static_cast<long long>(a.nnz()), o.variant.c_str(), o.impl.c_str(),
              o.thread_count, fmt(kernels::summarize(maps)).c_str(),
              fmt(kernels::summarize(fwd)).c_str(), fmt(kernels::summarize(fb)).c_str(),
              kernels::summarize(maps_cpu).median, kernels::summarize(fwd_cpu).median,
              kernels::summarize(fb_cpu).median, peak, rss_loaded,
              static_cast<double>(p.stats().bytes) / (1 << 20), static_cast<long long>(pairs),
              static_cast<long long>(p.stats().sites.at(1)));
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
              "maps_MiB\tpairs\tsites_l1\n");
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
      else if (a == "--variant") o.variant = next();
      else if (a == "--impl") o.impl = next();
      else if (a == "--thread-count") o.thread_count = std::stoi(next());
      else throw kernels::Error("unknown option " + a,
                                "see the comment at the top of learned/bench/bench_waconet.cpp");
    }
    if (!learned::built_with_torch())
      throw kernels::Error("bench_waconet needs LibTorch", "waco_learned was built without it");
    if (!o.one.empty()) return run_one(o);
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
