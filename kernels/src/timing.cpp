#include "waco/kernels/timing.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "waco/kernels/error.hpp"

namespace waco::kernels {

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

SoftwareCounts SoftwareCounts::operator-(const SoftwareCounts& o) const {
  return {cpu_s - o.cpu_s, involuntary_switches - o.involuntary_switches,
          voluntary_switches - o.voluntary_switches, page_faults - o.page_faults};
}

SoftwareCounts& SoftwareCounts::operator+=(const SoftwareCounts& o) {
  if (o.run_delay_s >= 0) run_delay_s = std::max(0.0, run_delay_s) + o.run_delay_s;
  cpu_s += o.cpu_s;
  involuntary_switches += o.involuntary_switches;
  voluntary_switches += o.voluntary_switches;
  page_faults += o.page_faults;
  return *this;
}

SoftwareCounts software_counts() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  const auto sec = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return {sec(u.ru_utime) + sec(u.ru_stime), u.ru_nivcsw, u.ru_nvcsw, u.ru_minflt + u.ru_majflt};
}

namespace {

/// The scheduler statistics of this process's threads (/proc/self/task/*/schedstat), opened once
/// and read with pread: a timed run reads them before it (and after it when it was preempted),
/// and listing /proc/self/task and opening each file every time cost ~8 us a run, as much as a
/// small matrix's kernel. scan() lists the threads again (a thread pool may have grown);
/// run_delay_s() reads the listed ones (a thread that ended is left out, and stale() says so).
class RunDelayReader {
 public:
  RunDelayReader() { scan(); }
  RunDelayReader(const RunDelayReader&) = delete;
  RunDelayReader& operator=(const RunDelayReader&) = delete;
  ~RunDelayReader() { close_all(); }

  void scan() {
    close_all();
    stale_ = false;
    DIR* dir = ::opendir("/proc/self/task");
    if (!dir) return;
    char path[320];
    while (const dirent* e = ::readdir(dir)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
      const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) fds_.push_back(fd);  // else the thread ended, or no schedstat
    }
    ::closedir(dir);
  }

  /// The listed threads' summed run_delay (seconds); negative when none could be read.
  double run_delay_s() {
    long long total_ns = 0;
    bool any = false;
    char buf[128];
    for (const int fd : fds_) {
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      if (n <= 0) {  // the thread ended
        stale_ = true;
        continue;
      }
      buf[n] = '\0';
      long long on_cpu = 0, waiting = 0;  // "<ns on the CPU> <ns runnable, waiting> <slices>"
      if (std::sscanf(buf, "%lld %lld", &on_cpu, &waiting) != 2) continue;
      total_ns += waiting;
      any = true;
    }
    return any ? 1e-9 * static_cast<double>(total_ns) : -1.0;
  }
  bool stale() const { return stale_; }

 private:
  void close_all() {
    for (const int fd : fds_) ::close(fd);
    fds_.clear();
  }
  std::vector<int> fds_;
  bool stale_ = false;
};

}  // namespace

double process_run_delay_s() { return RunDelayReader().run_delay_s(); }

bool run_disturbed(const SoftwareCounts& c, double seconds, int threads) {
  if (c.involuntary_switches <= 0) return false;
  const double thread_time = std::max(1, threads) * seconds;
  if (c.run_delay_s >= 0) return c.run_delay_s > kMaxLostShare * thread_time;
  if (threads <= 0) return true;
  return thread_time - c.cpu_s > kMaxLostShare * thread_time;
}

double quantile(const std::vector<double>& sorted, double q) {
  WACO_ASSERT(!sorted.empty(), "quantile needs at least one value");
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const std::size_t lo = (v.size() - 1) / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(lo), v.end());
  if (v.size() % 2 == 1) return v[lo];
  const double hi = *std::min_element(v.begin() + static_cast<std::ptrdiff_t>(lo) + 1, v.end());
  return v[lo] + 0.5 * (hi - v[lo]);
}

TimingStats summarize(std::vector<double> samples) {
  WACO_ASSERT(!samples.empty(), "summarize needs at least one sample");
  TimingStats s;
  s.seconds = samples;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

TimingStats time_repeated(const std::function<void()>& fn, const TimingOptions& opts) {
  return time_interleaved({fn}, opts).front();  // one function: warm-up, then timed runs
}

std::vector<TimingStats> time_interleaved(const std::vector<std::function<void()>>& fns,
                                          const TimingOptions& opts, int settle,
                                          const AfterRound& after_round) {
  WACO_ASSERT(opts.repeats >= 1 && opts.warmup >= 0 && settle >= 0 && opts.settle_s >= 0 &&
                  opts.min_run_s >= 0 && opts.settle_enough_s >= 0,
              "repeats must be >= 1, warmup, settle, settle_s, min_run_s and settle_enough_s >= 0");
  const std::size_t n = fns.size();
  std::vector<std::vector<double>> samples(n);
  for (auto& s : samples) s.reserve(static_cast<std::size_t>(opts.repeats));
  std::vector<int> retaken(n, 0), kept_disturbed(n, 0);
  std::vector<SoftwareCounts> counts(n);
  std::vector<char> stopped(n, 0);  // named by after_round
  RunDelayReader run_delay;
  std::vector<int> calls(n, 0);            // per timed run; 0 until the first timed run
  std::vector<double> per_call(n, -1.0);   // the latest per-call time (opts.clock), -1: none yet
  const auto calls_for = [&opts](double per) {  // calls that make a timed run last min_run_s
    if (opts.min_run_s <= 0) return 1;
    return per > 0 ? static_cast<int>(std::clamp(std::ceil(opts.min_run_s / per), 1.0, 1e5))
                   : 100000;
  };
  for (int round = 0; round < opts.warmup + opts.repeats; ++round) {
    // Every function has run once after the first round: the threads it starts exist.
    if (round == 1 || run_delay.stale()) run_delay.scan();
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (k + static_cast<std::size_t>(round)) % n;
      if (!fns[i] || stopped[i]) continue;
      for (;;) {
        if (settle > 0) {
          const double s0 = now_seconds();
          const double c0 = opts.min_run_s > 0 ? opts.clock() : 0.0;
          int w = 0;
          while (w < settle || now_seconds() - s0 < opts.settle_s) {
            fns[i]();
            ++w;
            if (opts.settle_enough_s > 0 && now_seconds() - s0 >= opts.settle_enough_s) break;
          }
          if (opts.min_run_s > 0) per_call[i] = (opts.clock() - c0) / w;
        }
        if (round >= opts.warmup && calls[i] == 0) {
          if (opts.min_run_s > 0 && per_call[i] < 0) {  // nothing ran yet: one untimed call
            const double c0 = opts.clock();
            fns[i]();
            per_call[i] = opts.clock() - c0;
          }
          calls[i] = calls_for(per_call[i]);
        }
        const int block = std::max(1, calls[i]);  // the warm-up rounds call once
        const double delay0 = run_delay.run_delay_s();
        const SoftwareCounts c0 = software_counts();
        const double t0 = opts.clock();
        for (int b = 0; b < block; ++b) fns[i]();
        const double run_s = opts.clock() - t0;
        const double dt = run_s / block;
        if (round < opts.warmup) per_call[i] = dt;  // the count is fixed after the warm-up
        SoftwareCounts c = software_counts() - c0;
        if (c.involuntary_switches > 0 && delay0 >= 0) {
          const double delay1 = run_delay.run_delay_s();
          if (delay1 >= 0) c.run_delay_s = std::max(0.0, delay1 - delay0);  // a thread may end
        }
        if (round < opts.warmup) break;
        if (run_disturbed(c, run_s, opts.threads)) {
          if (retaken[i] < opts.retake_disturbed) {
            ++retaken[i];
            continue;
          }
          ++kept_disturbed[i];
        }
        samples[i].push_back(dt);
        counts[i] += c;
        break;
      }
    }
    if (after_round && round >= opts.warmup && round + 1 < opts.warmup + opts.repeats)
      for (const std::size_t i : after_round(round + 1 - opts.warmup, samples)) {
        WACO_ASSERT(i < n, "after_round named a function not in the list");
        stopped[i] = 1;
      }
  }
  std::vector<TimingStats> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (!fns[i]) continue;
    out[i] = summarize(std::move(samples[i]));
    out[i].retaken = retaken[i];
    out[i].disturbed_kept = kept_disturbed[i];
    out[i].counts = counts[i];
    out[i].calls = std::max(1, calls[i]);
  }
  return out;
}

std::string format_seconds(double s) {
  char buf[32];
  if (s >= 1.0) std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3) std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.2f us", s * 1e6);
  return buf;
}

std::string duration_text(double s) {
  if (s < 0) return "?";
  const long t = std::lround(s);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

}  // namespace waco::kernels
