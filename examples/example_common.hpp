// What the example applications share: a small option parser, timing, the matrix as CSR arrays
// and as an Eigen matrix, and the waco options from the command line. Examples only use the
// installed API (waco/waco.hpp) and Eigen, as an application would.
#pragma once

#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Sparse>

#include <waco/waco.hpp>

namespace example {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// --name value and --flag options after one positional argument; unknown ones are errors.
class Args {
 public:
  Args(int argc, char** argv, const std::map<std::string, std::string>& defaults,
       const std::string& usage)
      : values_(defaults), usage_(usage) {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "-h" || a == "--help") {
        std::printf("%s", usage.c_str());
        std::exit(0);
      }
      if (a.rfind("--", 0) != 0) {
        if (!positional_.empty()) fail("more than one input file: " + a);
        positional_ = a;
        continue;
      }
      const std::string name = a.substr(2);
      const auto it = values_.find(name);
      if (it == values_.end()) fail("unknown option " + a);
      if (it->second == "false" || it->second == "true") {
        it->second = "true";
      } else {
        if (i + 1 >= argc) fail("option " + a + " needs a value");
        it->second = argv[++i];
      }
    }
    if (positional_.empty()) fail("no input file");
  }
  const std::string& file() const { return positional_; }
  std::string str(const std::string& n) const { return values_.at(n); }
  bool flag(const std::string& n) const { return values_.at(n) == "true"; }
  long long integer(const std::string& n) const {
    char* end = nullptr;
    const long long v = std::strtoll(values_.at(n).c_str(), &end, 10);
    if (end == values_.at(n).c_str() || *end != '\0') fail("--" + n + " needs an integer");
    return v;
  }
  double real(const std::string& n) const {
    char* end = nullptr;
    const double v = std::strtod(values_.at(n).c_str(), &end);
    if (end == values_.at(n).c_str() || *end != '\0') fail("--" + n + " needs a number");
    return v;
  }
  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "error: %s\n%s", why.c_str(), usage_.c_str());
    std::exit(2);
  }

 private:
  std::map<std::string, std::string> values_;
  std::string positional_;
  std::string usage_;
};

/// A matrix as CSR arrays (from the waco handle, canonical order), values of type T.
template <class T>
struct CsrOf {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int64_t> rowptr;
  std::vector<std::int32_t> colind;
  std::vector<T> val;
};
using Csr = CsrOf<float>;

template <class T = float>
CsrOf<T> csr_of(const waco::Matrix& m) {
  CsrOf<T> c;
  c.rows = m.rows();
  c.cols = m.cols();
  c.rowptr.resize(c.rows + 1);
  c.colind.resize(m.nnz());
  c.val.resize(m.nnz());
  m.csr(c.rowptr.data(), c.colind.data(), c.val.data());
  return c;
}

template <class T>
using EigenCsrOf = Eigen::SparseMatrix<T, Eigen::RowMajor, int>;
using EigenCsr = EigenCsrOf<float>;

template <class T>
EigenCsrOf<T> eigen_of(const CsrOf<T>& c) {
  std::vector<Eigen::Triplet<T, int>> t;
  t.reserve(c.val.size());
  for (std::int64_t r = 0; r < c.rows; ++r)
    for (std::int64_t e = c.rowptr[r]; e < c.rowptr[r + 1]; ++e)
      t.emplace_back(static_cast<int>(r), c.colind[e], c.val[e]);
  EigenCsrOf<T> m(static_cast<int>(c.rows), static_cast<int>(c.cols));
  m.setFromTriplets(t.begin(), t.end());
  return m;
}

/// The waco options of the examples' command lines (--threads, --search, --budget, --cache-dir,
/// --refresh, --verbose, --tuning-share, --adaptive).
inline waco::Options waco_options(const Args& a) {
  waco::Options o;
  o.threads = static_cast<int>(a.integer("threads"));
  o.search = a.str("search");
  o.budget = static_cast<int>(a.integer("budget"));
  o.cache_dir = a.str("cache-dir");
  o.refresh = a.flag("refresh");
  o.verbose = a.flag("verbose");
  o.tuning_share = a.real("tuning-share");
  o.adaptive = a.flag("adaptive");
  return o;
}

/// Defaults of those options.
inline std::map<std::string, std::string> waco_option_defaults() {
  return {{"threads", "0"}, {"search", "model"}, {"budget", "0"}, {"cache-dir", ""},
          {"refresh", "false"}, {"verbose", "false"}, {"json", "false"}, {"check", "false"},
          {"backends", "plan,csr,eigen"}, {"tuning-share", "0.1"}, {"always-tune", "false"},
          {"adaptive", "false"}};
}

inline bool wants(const Args& a, const std::string& backend) {
  const std::string list = "," + a.str("backends") + ",";
  return list.find("," + backend + ",") != std::string::npos;
}

/// A waco back-end of the examples: "plan" (what waco::tune chose for A) or "csr" (the hand-written
/// csr, waco::make_plan), with the time it took to get it and what was decided.
struct WacoBackend {
  waco::Plan plan;
  double setup_s = 0;
  double break_even = -1;  ///< plan: calls after which its tuning paid for itself (-1: never/unknown)
  double speedup = 0;      ///< plan: tune's side-by-side speedup over csr
  std::string detail;      ///< the schedule (and, for the plan, the verdict)
};

inline void describe(WacoBackend& w, bool tuned);

/// `expected_calls`: what the application will call (the example's iterations); --always-tune
/// leaves it out, so that tune searches whatever the calls could pay for.
inline WacoBackend waco_backend(const std::string& backend, const waco::Matrix& A, waco::Kernel k,
                                waco::Options o, std::int64_t expected_calls, const Args& args) {
  o.expected_calls = args.flag("always-tune") ? 0 : expected_calls;
  const double t0 = now();
  const bool tuned = backend == "plan";
  const waco::Plan plan = tuned ? waco::tune(A, k, o) : waco::make_plan(A, k, "csr", o);
  const double setup_s = now() - t0;
  WacoBackend w{plan, setup_s, -1.0, 0.0, {}};
  describe(w, tuned);
  return w;
}

/// The back-end's schedule, verdict and gain as its plan says now: an adaptive plan decides on
/// the application's calls, so call this again after them.
inline void describe(WacoBackend& w, bool tuned) {
  const waco::Plan& plan = w.plan;
  w.detail = plan.schedule();
  if (!tuned) return;
  w.detail += " (" + plan.verdict() + (plan.from_cache() ? ", from cache" : "") +
              (plan.calls() > 0 ? ", " + std::to_string(plan.exploring_calls()) + " of " +
                                      std::to_string(plan.calls()) + " calls exploring"
                                : std::string()) +
              ")";
  w.break_even = plan.break_even_calls();
  w.speedup = plan.speedup();
}

/// Runs an example's body, printing waco::Error (with its hint) and other exceptions as one
/// "error:" line; returns the body's exit status, or 1 after an error.
template <typename Body>
int guarded(Body body) {
  try {
    return body();
  } catch (const waco::Error& e) {
    std::fprintf(stderr, "error: %s%s%s\n", e.what(), e.hint().empty() ? "" : " (hint: ",
                 e.hint().empty() ? "" : (e.hint() + ")").c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
  return 1;
}

/// Starts the OpenMP thread team once before any back-end runs, so that none of them pays for it
/// (the first parallel region of a process took milliseconds, more than a small solve).
inline void warm_up_threads(int threads) {
  omp_set_num_threads(threads);
  volatile int sink = 0;
  for (int round = 0; round < 3; ++round) {
#pragma omp parallel
    { sink = sink + omp_get_thread_num(); }
  }
}

inline int threads_of(const Args& a) {
  const long long t = a.integer("threads");
  return t > 0 ? static_cast<int>(t) : omp_get_max_threads();
}

}  // namespace example
