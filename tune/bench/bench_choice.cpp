// bench_choice: what the model's choice (tuning::nominate: the space, the trimming passes, the
// model's scoring) costs on this CPU, in seconds and in csr calls of the same matrix (issue 35,
// "cheap choice"; issue 34, step 5). Not a test: it prints a table.
//
// Per file and kernel: the csr baseline timed with the same threads (median of 31 calls after 3
// warm-up calls), then `--repeats` calls of tuning::nominate in this process (the first one apart:
// it is the first an application pays; its own stages on a line of their own), the median of the
// others, and a breakdown of one call by its own report (tune --json's "space" and
// "search_info": each pass, the model's load, prepare and scoring) plus the operand analyses
// timed alone (prefix counts, locality signature, the model's feature vector). `--list` prints
// the nominated schedules instead (for comparing two builds). `--shortlist`: nominate among the
// shipped kernels' schedules (codegen::shipped_schedules, as an adaptive plan does), reading the
// lists included. `--memory`: instead of times, what each analysis and one nominate hold at
// their peak above the resident size before them (issue 34's memory target; the free heap is
// given back first, malloc_trim, so that one stage's freed pages do not hide the next one's).
// `--first`: what a process's first choice pays, step by step: each step a first choice takes
// (the request's check, the model's choice and load, the space's analyses, the model's
// features) timed once on its own in this process, in that order, then the first nominate
// (which then finds the model and its caches warm) and a second one, each with the minor page
// faults it took; run it once per process (one FILE) to see an application's first choice.
//
// `--cold`: the first choice as a process pays it, nothing of it warmed before (only the csr
// call timed first, as a plan's first calls run csr), then a second one.
//
//   bench_choice --kernel spmv [--dense 64] [--threads 2] [--repeats 15] [--count 8]
//                [--shortlist] [--memory] [--first | --cold] FILES...
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/prefix_counts.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/implementation.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/process_memory.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/matrix_features.hpp"
#include "waco/signature/signature.hpp"
#include "waco/tune/calibration.hpp"
#include "waco/tune/tune.hpp"

namespace {

using namespace waco;

struct Options {
  kernels::KernelKind kind = kernels::KernelKind::SpMV;
  int dense = 64;
  int threads = 2;
  int repeats = 15;
  std::size_t count = 8;
  bool list = false;
  bool shortlist = false;
  bool memory = false;
  bool first = false;
  bool cold = false;
  std::vector<std::string> files;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double csr_call_seconds(const kernels::CooMatrix& a, const Options& o) {
  const auto ops = kernels::make_dense_operands(o.kind, &a, nullptr, o.dense, 1);
  const auto prob = kernels::make_problem(o.kind, &a, nullptr, ops);
  auto impl = kernels::make_implementation("csr", o.kind);
  impl->prepare(prob, o.threads);
  kernels::TimingOptions t;
  t.warmup = 3;
  t.repeats = 31;
  return kernels::time_repeated([&] { impl->run(); }, t).median;
}

template <class F>
double time_median(int repeats, F f) {
  std::vector<double> s;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = kernels::now_seconds();
    f();
    s.push_back(kernels::now_seconds() - t0);
  }
  return median(s);
}

/// MiB that f holds at its peak above the resident size before it (f run once).
template <class F>
double held_mib(F f) {
  malloc_trim(0);
  const std::int64_t before = kernels::current_rss_bytes();
  if (!kernels::reset_peak_rss()) return -1.0;
  f();
  const std::int64_t peak = kernels::peak_rss_bytes();
  return static_cast<double>(peak - before) / (1024.0 * 1024.0);
}

/// The operand analyses of a choice, each run alone (on the matrix of one file): timed by the
/// default mode, their memory measured by --memory.
struct Analyses {
  std::function<void()> counts;         ///< prefix counts, a large matrix's halves on two threads
  std::function<void()> counts_serial;  ///< prefix counts serially, as a choice counts them
  std::function<void()> signature;
  std::function<void()> features;       ///< the model's whole feature vector
  std::function<void()> statistics;     ///< its statistics part alone
  std::function<void()> space;          ///< Space::for_operand
};

Analyses analyses_of(const kernels::CooMatrix& a, const Options& o) {
  Analyses x;
  x.counts = [&a] { heuristics::PrefixCounts::compute({&a.row, &a.col}, {a.rows, a.cols}, 0); };
  x.counts_serial = [&a] {
    heuristics::PrefixCounts::compute({&a.row, &a.col}, {a.rows, a.cols}, 1);
  };
  x.signature = [&a] { signature::compute_signature(a); };
  x.features = [&a] { learned::matrix_features(learned::FeatureSet::Signature, a, 0); };
  x.statistics = [&a] { learned::matrix_features(learned::FeatureSet::Stats, a, 0); };
  x.space = [&a, &o] {
    heuristics::SpaceOptions so;
    so.cores = o.threads;
    heuristics::Space::for_operand(o.kind, &a, nullptr, o.dense, so);
  };
  return x;
}

void print_memory(const kernels::CooMatrix& a, const Options& o, const std::string& file,
                  const Analyses& x, const std::function<void()>& nominate) {
  const double operand = static_cast<double>(kernels::current_rss_bytes()) / (1024.0 * 1024.0);
  const double m_counts = held_mib(x.counts);
  const double m_sig = held_mib(x.signature);
  const double m_stats = held_mib(x.statistics);
  const double m_space = held_mib(x.space);
  const double m_nominate = held_mib(nominate);
  std::printf("%s %s rows %lld nnz %lld threads %d: resident before %.0f MiB; held at the peak "
              "(MiB): prefix counts %.1f, signature %.1f, statistics features %.1f, "
              "Space::for_operand %.1f, nominate %.1f\n",
              file.c_str(), kernels::kernel_name(o.kind).data(), static_cast<long long>(a.rows),
              static_cast<long long>(a.nnz()), o.threads, operand, m_counts, m_sig, m_stats,
              m_space, m_nominate);
}

/// Seconds and minor page faults of one call of f.
struct Once {
  double seconds = 0.0;
  long faults = 0;
};
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}
template <class F>
Once once(F f) {
  const long f0 = minor_faults();
  const double t0 = kernels::now_seconds();
  f();
  return {kernels::now_seconds() - t0, minor_faults() - f0};
}

/// --first: a process's first choice, step by step (see the top of the file).
void print_first(const kernels::CooMatrix& a, const Options& o, const std::string& file,
                 const tuning::TuneRequest& req, const Analyses& x,
                 const std::function<tuning::Nomination()>& nominate) {
  const double csr = csr_call_seconds(a, o);
  if (o.cold) {
    tuning::Nomination n1, n2;
    const Once first = once([&] { n1 = nominate(); });
    const Once second = once([&] { n2 = nominate(); });
    const auto parts = [](const tuning::Nomination& n) {
      const nlohmann::json& si = n.info.at("search_info");
      char b[160];
      std::snprintf(b, sizeof b, "space %.2f ms, of it score %.2f ms",
                    n.info.at("space").value("seconds", 0.0) * 1e3,
                    si.value("score_seconds", 0.0) * 1e3);
      return std::string(b);
    };
    std::printf("%s %s rows %lld nnz %lld threads %d: csr call %.1f us; cold first nominate "
                "%.2f ms (%ld faults, %.0f calls), again %.2f ms (%ld faults, %.0f calls)\n",
                file.c_str(), kernels::kernel_name(o.kind).data(), static_cast<long long>(a.rows),
                static_cast<long long>(a.nnz()), o.threads, csr * 1e6, first.seconds * 1e3,
                first.faults, first.seconds / csr, second.seconds * 1e3, second.faults,
                second.seconds / csr);
    std::printf("  first: %s; again: %s\n", parts(n1).c_str(), parts(n2).c_str());
    return;
  }
  tuning::ModelChoice choice;
  const Once check = once([&] { tuning::check_request(req); });
  const Once choose = once([&] {
    choice = tuning::choose_model(req.model, req.kind, req.dtype, req.generated.compiler,
                                  req.use_calibration, {}, req.dense);
  });
  const Once load = once([&] { learned::CostModel::load_shared(choice.path, req.kind); });
  const Once space = once(x.space);
  const Once feat = once(x.features);
  const Once first = once(nominate);
  const Once second = once(nominate);
  const double steps = check.seconds + choose.seconds + load.seconds + space.seconds +
                       feat.seconds + first.seconds;
  const auto p = [](const Once& s) {
    char b[64];
    std::snprintf(b, sizeof b, "%.2f ms (%ld faults)", s.seconds * 1e3, s.faults);
    return std::string(b);
  };
  std::printf("%s %s rows %lld nnz %lld threads %d: csr call %.1f us; first in this process: "
              "check_request %s, choose_model %s, model load %s, Space::for_operand %s, model "
              "features %s; then nominate %s, again %s; the steps and the first nominate %.2f ms "
              "(%.0f calls)\n",
              file.c_str(), kernels::kernel_name(o.kind).data(), static_cast<long long>(a.rows),
              static_cast<long long>(a.nnz()), o.threads, csr * 1e6, p(check).c_str(),
              p(choose).c_str(), p(load).c_str(), p(space).c_str(), p(feat).c_str(),
              p(first).c_str(), p(second).c_str(), steps * 1e3, steps / csr);
}

int run(const Options& o) {
  tuning::TuneObserver quiet;
  for (const std::string& file : o.files) {
    const kernels::CooMatrix a = kernels::read_matrix_market(file).matrix;
    tuning::TuneRequest req;
    req.kind = o.kind;
    req.threads = o.threads;
    req.dense = o.dense;
    tuning::TuneOperand op;
    op.matrix = &a;
    // As an adaptive plan nominates (tune/src/adaptive_run.cpp): the lists read on every choice.
    const auto nominate = [&] {
      const double t0 = kernels::now_seconds();
      if (!o.shortlist) return tuning::nominate(op, req, o.count, quiet);
      const std::vector<codegen::SuperSchedule> among = codegen::shipped_schedules(o.kind);
      tuning::Nomination n = tuning::nominate(op, req, o.count, quiet, &among);
      n.seconds = kernels::now_seconds() - t0;
      return n;
    };
    const Analyses analyses = analyses_of(a, o);
    if (o.memory) {
      print_memory(a, o, file, analyses, [&] { nominate(); });
      continue;
    }
    if (o.first || o.cold) {
      print_first(a, o, file, req, analyses, nominate);
      continue;
    }
    if (o.list) {
      const tuning::Nomination n = nominate();
      std::printf("# %s %s\n", file.c_str(), kernels::kernel_name(o.kind).data());
      for (const auto& s : n.schedules) std::printf("%s\n", codegen::to_text(s).c_str());
      continue;
    }
    const double csr = csr_call_seconds(a, o);
    std::vector<double> calls;
    tuning::Nomination first_n, last;
    for (int r = 0; r < o.repeats; ++r) {
      last = nominate();
      calls.push_back(last.seconds);
      if (r == 0) first_n = last;
    }
    const double first = first_n.seconds;
    const double med = median({calls.begin() + (calls.size() > 1 ? 1 : 0), calls.end()});
    const int reps = std::max(3, o.repeats / 2);
    const double t_counts = time_median(reps, analyses.counts);
    const double t_counts1 = time_median(reps, analyses.counts_serial);
    const double t_sig = time_median(reps, analyses.signature);
    const double t_feat = time_median(reps, analyses.features);
    const double t_stats = time_median(reps, analyses.statistics);
    const double t_check = time_median(reps, [&] { tuning::check_request(req); });
    const double t_space = time_median(reps, analyses.space);
    const double t_lists = time_median(reps, [&] { codegen::shipped_schedules(o.kind); });
    const nlohmann::json& space = last.info.at("space");
    const nlohmann::json& si = last.info.at("search_info");
    std::printf("%s %s rows %lld nnz %lld threads %d: csr call %.1f us; nominate first %.2f ms "
                "(%.1f calls), median %.2f ms (%.1f calls); space+passes+search %.2f ms\n",
                file.c_str(), kernels::kernel_name(o.kind).data(),
                static_cast<long long>(a.rows), static_cast<long long>(a.nnz()), o.threads,
                csr * 1e6, first * 1e3, first / csr, med * 1e3, med / csr,
                space.value("seconds", 0.0) * 1e3);
    std::printf("  alone: check_request %.2f ms, Space::for_operand %.2f ms (prefix counts %.2f ms, "
                "serially %.2f ms as a choice counts them; signature %.2f ms), model features "
                "%.2f ms (statistics part %.2f ms)\n",
                t_check * 1e3, t_space * 1e3, t_counts * 1e3, t_counts1 * 1e3, t_sig * 1e3,
                t_feat * 1e3, t_stats * 1e3);
    {
      const nlohmann::json& fsi = first_n.info.at("search_info");
      std::printf("  first call: space+passes+search %.2f ms (model load %.3f ms, prepare %.3f ms, "
                  "score %.3f ms)\n",
                  first_n.info.at("space").value("seconds", 0.0) * 1e3,
                  fsi.value("load_seconds", 0.0) * 1e3, fsi.value("prepare_seconds", 0.0) * 1e3,
                  fsi.value("score_seconds", 0.0) * 1e3);
    }
    if (o.shortlist)
      std::printf("  short list: %lld schedules read in %.3f ms, %lld admitted\n",
                  static_cast<long long>(space.value("shortlist", 0)), t_lists * 1e3,
                  static_cast<long long>(space.value("admissible_count", 0)));
    std::printf("  passes:");
    for (const auto& p : space.value("passes", nlohmann::json::array()))
      std::printf(" %s %.3f", p.at("name").get<std::string>().c_str(),
                  p.at("seconds").get<double>() * 1e3);
    std::printf(" (ms)\n  search: load %.3f ms, prepare %.3f ms, score %.3f ms, %lld scored, "
                "admissible %lld of %lld\n",
                si.value("load_seconds", 0.0) * 1e3, si.value("prepare_seconds", 0.0) * 1e3,
                si.value("score_seconds", 0.0) * 1e3,
                static_cast<long long>(si.value("scored", 0)),
                static_cast<long long>(space.value("admissible_count", 0)),
                static_cast<long long>(space.value("full_count", 0)));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_choice: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--kernel") {
      const auto k = kernels::parse_kernel(next());
      if (!k) {
        std::fprintf(stderr, "bench_choice: unknown kernel\n");
        return 2;
      }
      o.kind = *k;
    } else if (a == "--dense") {
      o.dense = std::atoi(next().c_str());
    } else if (a == "--threads") {
      o.threads = std::atoi(next().c_str());
    } else if (a == "--repeats") {
      o.repeats = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--count") {
      o.count = static_cast<std::size_t>(std::max(1, std::atoi(next().c_str())));
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--shortlist") {
      o.shortlist = true;
    } else if (a == "--memory") {
      o.memory = true;
    } else if (a == "--first") {
      o.first = true;
    } else if (a == "--cold") {
      o.cold = true;
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "bench_choice: unknown option %s\n", a.c_str());
      return 2;
    } else {
      o.files.push_back(a);
    }
  }
  if (o.files.empty()) {
    std::fprintf(stderr, "usage: bench_choice --kernel K [--dense J] [--threads T] [--repeats N] "
                         "[--count N] [--list] [--shortlist] [--memory] [--first | --cold] "
                         "FILES...\n");
    return 2;
  }
  // Without shipped lists (a build tree whose share/waco-hybrid/kernels was not built, or
  // WACO_SHIPPED_KERNELS=none) the short list is empty and nothing would be ranked: the times
  // would be of a choice no plan makes (two builds compared that way looked 2x apart).
  if (o.shortlist && codegen::shipped_schedules(o.kind).empty()) {
    std::fprintf(stderr, "bench_choice: --shortlist, but no shipped list of %s kernels was found "
                         "(build the target waco_shipped_kernels, or point WACO_SHIPPED_KERNELS "
                         "at a folder that has them)\n",
                 std::string(kernels::kernel_name(o.kind)).c_str());
    return 1;
  }
  try {
    return run(o);
  } catch (const kernels::Error& e) {
    std::fprintf(stderr, "bench_choice: %s\n", e.what());
    return 1;
  }
}
