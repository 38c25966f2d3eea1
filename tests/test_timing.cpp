// Unit "timing": summary statistics, the repeat loop, software counts and disturbed runs; the
// roofline's peak probes (which vector ISA they run on).
#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/openmp_team.hpp"
#include "waco/kernels/peaks.hpp"
#include "waco/kernels/timing.hpp"

using namespace waco::kernels;

TEST_CASE("timing: summarize gives median, min, max of odd and even counts") {
  TimingStats s = summarize({3.0, 1.0, 2.0});
  CHECK(s.median == 2.0);
  CHECK(s.min == 1.0);
  CHECK(s.max == 3.0);
  CHECK(s.seconds == std::vector<double>{3.0, 1.0, 2.0});  // kept in run order
  s = summarize({4.0, 1.0, 3.0, 2.0});
  CHECK(s.median == 2.5);
  CHECK_THROWS_AS(summarize({}), InternalError);
}

TEST_CASE("timing: time_repeated runs warm-up plus repeats and times each") {
  int calls = 0;
  const TimingStats s = time_repeated([&] { ++calls; }, TimingOptions{3, 5});
  CHECK(calls == 8);
  CHECK(s.seconds.size() == 5);
  CHECK(s.min >= 0.0);
  CHECK(s.min <= s.median);
  CHECK(s.median <= s.max);
}

TEST_CASE("timing: time_interleaved rotates the order each round and skips empty functions") {
  std::string trace;
  const std::vector<std::function<void()>> fns = {
      [&] { trace += 'a'; }, nullptr, [&] { trace += 'c'; }};
  const std::vector<TimingStats> s = time_interleaved(fns, TimingOptions{1, 3});
  // Round r starts with function r % 3; b is empty. 1 warm-up round + 3 timed rounds.
  CHECK(trace == "ac" "ca" "ca" "ac");
  REQUIRE(s.size() == 3);
  CHECK(s[0].seconds.size() == 3);
  CHECK(s[1].seconds.empty());
  CHECK(s[2].seconds.size() == 3);
  CHECK(s[2].min <= s[2].median);

  // settle: untimed runs of the same function right before each timed run.
  trace.clear();
  const std::vector<std::function<void()>> two = {[&] { trace += 'a'; }, [&] { trace += 'b'; }};
  const std::vector<TimingStats> t = time_interleaved(two, TimingOptions{0, 2}, 2);
  CHECK(trace == "aaa" "bbb" "bbb" "aaa");
  CHECK(t[0].seconds.size() == 2);
  CHECK_THROWS_AS(time_interleaved(two, TimingOptions{0, 0}), InternalError);

  // settle_s: the settle runs go on until they took that long (at least `settle` of them); the
  // timed run follows them. Without settle runs, settle_s settles nothing.
  int calls = 0;
  TimingOptions o{0, 1};
  o.settle_s = 0.002;
  const double t0 = now_seconds();
  time_interleaved({[&] { ++calls; }}, o, 1);
  CHECK(now_seconds() - t0 >= 0.002);
  CHECK(calls > 3);
  calls = 0;
  time_interleaved({[&] { ++calls; }}, o, 0);
  CHECK(calls == 1);
  o.settle_s = -1;
  CHECK_THROWS_AS(time_interleaved(two, o, 1), InternalError);

  // settle_enough_s: a settle run that brings the turn's settling to that long ends it, however
  // many runs `settle` asks for; 0 never ends it early.
  TimingOptions slow{0, 2};
  slow.settle_enough_s = 0.004;
  calls = 0;
  const auto sleeper = [&] {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  time_interleaved({sleeper}, slow, 3);
  CHECK(calls == 2 * (1 + 1));  // two turns, each one settle run and the timed one
  slow.settle_enough_s = 0;
  calls = 0;
  time_interleaved({sleeper}, slow, 3);
  CHECK(calls == 2 * (3 + 1));
  calls = 0;
  time_interleaved({[&] { ++calls; }}, TimingOptions{0, 1}, 3);  // short: every settle run
  CHECK(calls == 3 + 1);
  slow.settle_enough_s = -1;
  CHECK_THROWS_AS(time_interleaved(two, slow, 1), InternalError);
}

TEST_CASE("timing: time_interleaved stops the functions after_round names") {
  std::string trace;
  const std::vector<std::function<void()>> fns = {
      [&] { trace += 'a'; }, [&] { trace += 'b'; }, [&] { trace += 'c'; }};
  std::vector<int> asked;  // the timed rounds done at each call
  const std::vector<TimingStats> s = time_interleaved(
      fns, TimingOptions{1, 4}, 0,
      [&](int done, const std::vector<std::vector<double>>& samples) {
        asked.push_back(done);
        for (const auto& f : samples)
          if (!f.empty()) CHECK(static_cast<int>(f.size()) <= done);
        if (done == 1) return std::vector<std::size_t>{1};  // b stops after one timed round
        if (done == 2) return std::vector<std::size_t>{2};  // c after two
        return std::vector<std::size_t>{};
      });
  // Asked after each timed round but the last, never after the warm-up round.
  CHECK(asked == std::vector<int>{1, 2, 3});
  CHECK(trace == "abc" "bca" "ca" "a" "a");
  CHECK(s[0].seconds.size() == 4);
  CHECK(s[1].seconds.size() == 1);
  CHECK(s[2].seconds.size() == 2);
  CHECK(s[2].min <= s[2].max);
  CHECK_THROWS_AS(time_interleaved(fns, TimingOptions{0, 2}, 0,
                                   [](int, const std::vector<std::vector<double>>&) {
                                     return std::vector<std::size_t>{7};
                                   }),
                  InternalError);
}

TEST_CASE("timing: the clock of TimingOptions measures the runs") {
  // A fake clock that advances by one per reading: every timed run lasts exactly one tick.
  static double ticks = 0.0;
  ticks = 0.0;
  TimingOptions o{1, 4};
  o.clock = [] { return ticks += 1.0; };
  const TimingStats s = time_repeated([] {}, o);
  CHECK(s.seconds == std::vector<double>{1.0, 1.0, 1.0, 1.0});
  const std::vector<TimingStats> t = time_interleaved({[] {}, [] {}}, o);
  CHECK(t[0].median == 1.0);
  CHECK(t[1].max == 1.0);
  CHECK(t[0].calls == 1);

  // min_run_s: a timed run calls the function as often as its per-call time says it takes to
  // last that long, and the sample is the run's time per call. Without a warm-up or settle run,
  // one untimed call tells the per-call time (1 tick): 10 calls a run, 1 tick a run.
  int calls = 0;
  o.warmup = 0;
  o.repeats = 3;
  o.min_run_s = 10.0;
  TimingStats b = time_interleaved({[&] { ++calls; }}, o).front();
  CHECK(calls == 1 + 3 * 10);
  CHECK(b.calls == 10);
  CHECK(b.seconds == std::vector<double>{0.1, 0.1, 0.1});
  // Settle runs tell it instead (2 calls in 1 tick: 20 a run); the count stays fixed.
  calls = 0;
  b = time_interleaved({[&] { ++calls; }}, o, 2).front();
  CHECK(b.calls == 20);
  CHECK(calls == 3 * (2 + 20));
  CHECK(b.median == Approx(0.05));
  // A warm-up run, timed with one call (1 tick): 10 a run.
  calls = 0;
  o.warmup = 1;
  b = time_interleaved({[&] { ++calls; }}, o).front();
  CHECK(b.calls == 10);
  CHECK(calls == 1 + 3 * 10);
  o.min_run_s = -1;
  CHECK_THROWS_AS(time_interleaved({[] {}}, o), InternalError);
  // The thread's CPU clock advances while this thread works, and not by more than wall time.
  const double c0 = thread_cpu_seconds(), w0 = now_seconds();
  volatile double x = 0;
  while (thread_cpu_seconds() - c0 < 0.01) x = x + 1.0;
  CHECK(now_seconds() - w0 >= thread_cpu_seconds() - c0 - 1e-3);
}

TEST_CASE("timing: busy_cpus sees a spinning thread, and the busy warning names the load") {
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    volatile double x = 0;
    while (!stop.load(std::memory_order_relaxed)) x = x + 1.0;
  });
  const double busy = busy_cpus(0.3);
  const std::string warning = busy_machine_warning(available_cpus() + 1, 0.1);
  stop = true;
  spinner.join();
  CHECK(busy >= 0.5);  // the spinner keeps one CPU busy (others may add to it)
  CHECK(busy <= available_cpus() + 0.05);
  // More threads than CPUs: a warning whatever the load.
  CHECK(warning.find("the machine is busy") != std::string::npos);
}

TEST_CASE("timing: core_round_trip_ns times a cache line between two CPUs, -1 with one") {
  if (available_cpus() >= 2) {
    // Time enough for a CPU that another process (a test beside this one) keeps busy.
    const double ns = core_round_trip_ns(200, 3, 10.0);
    CHECK(ns > 0.0);
    CHECK(ns < 1e6);  // a millisecond a round trip: not a cache line's journey
  }
  CHECK(core_round_trip_ns(0, 3) == -1.0);
  CHECK(core_round_trip_ns(10, 0) == -1.0);
  CHECK(core_round_trip_ns(10, 1, 0.0) == -1.0);
  // More round trips than fit in the time allowed: given up, -1, and both threads end.
  if (available_cpus() >= 2) CHECK(core_round_trip_ns(50000000, 1, 0.01) == -1.0);
  // A process allowed one CPU has no second one to hand the line to (and its affinity stays).
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) ::_exit(3);
    const bool refused = core_round_trip_ns(100, 2) == -1.0;
    ::_exit(refused && available_cpus() == 1 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("timing: software counts flag disturbed runs, which are taken again") {
  const SoftwareCounts a = software_counts();
  volatile double x = 0;
  for (int i = 0; i < 20000000; ++i) x = x + 1.0;
  const SoftwareCounts d = software_counts() - a;
  CHECK(d.cpu_s > 0.0);
  CHECK(d.involuntary_switches >= 0);
  CHECK(d.page_faults >= 0);

  // Other processes spinning, two on every CPU and one more: the timed runs get preempted, and
  // each CPU has at least two competitors for the test's thread, so that no balancing of the
  // scheduler leaves it a CPU alone (with one spinner a CPU, 1 run in 6 of this test saw no
  // disturbed run at all on a 2-vCPU VM).
  std::vector<pid_t> spinners;
  for (int c = 0; c <= 2 * available_cpus(); ++c) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      volatile double y = 0;
      for (;;) y = y + 1.0;
    }
    spinners.push_back(pid);
  }
  const auto busy = [] {  // ~5 ms of work on the calling thread
    const double t0 = now_seconds();
    volatile double y = 0;
    while (now_seconds() - t0 < 0.005) y = y + 1.0;
  };
  // Wait (at most 5 s) until the spinners run and take this thread's CPU for longer than the
  // rule lets pass: a newly forked process may not get a CPU for the first tens of milliseconds.
  for (const double t0 = now_seconds(); now_seconds() - t0 < 5.0;) {
    const double d0 = process_run_delay_s();
    busy();
    if (process_run_delay_s() - d0 > kMaxLostShare * 0.005) break;
  }
  const TimingStats kept = time_interleaved({busy}, {0, 20, now_seconds, 0}).front();
  const TimingStats retaken = time_interleaved({busy}, {0, 10, now_seconds, 200}).front();
  // The thread count known: processes competing for the CPU take whole time slices, far more
  // than the 3% of the run's thread time that the rule lets pass.
  const TimingStats known = time_interleaved({busy}, {0, 20, now_seconds, 0, 1}).front();
  for (const pid_t pid : spinners) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  // Without retakes the disturbed runs are kept and counted.
  CHECK(kept.retaken == 0);
  CHECK(kept.disturbed_kept > 0);
  CHECK(kept.counts.involuntary_switches >= kept.disturbed_kept);
  CHECK(kept.seconds.size() == 20);
  // With retakes they are taken again until undisturbed: the runs kept as undisturbed lost at
  // most the rule's share of their time to other tasks (a short preemption may pass).
  CHECK(retaken.retaken > 0);
  CHECK(retaken.seconds.size() == 10);
  if (retaken.disturbed_kept == 0) {
    double timed = 0;
    for (const double t : retaken.seconds) timed += t;
    CHECK(retaken.counts.run_delay_s <= kMaxLostShare * timed);
  }
  CHECK(known.disturbed_kept > 0);
}

TEST_CASE("timing: an involuntary switch disturbs a run when it costs the run's threads time") {
  CHECK(process_run_delay_s() >= 0);  // Linux with schedstat (every kernel we run on)
  SoftwareCounts c;
  c.involuntary_switches = 3;
  c.cpu_s = 0.0299;  // 15 ms on 2 threads: 0.1 ms of 30 lost (a quiet machine's kernel threads)
  CHECK_FALSE(run_disturbed(c, 0.015, 2));
  CHECK(run_disturbed(c, 0.015, 0));  // threads unknown: any switch disturbs
  c.cpu_s = 0.027;                    // 3 ms lost: a time slice given to another process
  CHECK(run_disturbed(c, 0.015, 2));
  c.involuntary_switches = 0;  // no switch: CPU time missing is the threads' own waiting
  CHECK_FALSE(run_disturbed(c, 0.015, 2));
  c.involuntary_switches = 1;
  c.cpu_s = 0.03 * (1 - kMaxLostShare) + 1e-9;  // just within the share
  CHECK_FALSE(run_disturbed(c, 0.015, 2));
  c.cpu_s = 0.03 * (1 - kMaxLostShare) - 1e-6;
  CHECK(run_disturbed(c, 0.015, 2));
  // With the scheduler's run_delay: only the time the threads waited for a CPU counts (a thread
  // asleep at a barrier lowers cpu_s but did not wait).
  c.cpu_s = 0.02;
  c.run_delay_s = 0.0002;
  CHECK_FALSE(run_disturbed(c, 0.015, 2));
  c.run_delay_s = 0.003;
  CHECK(run_disturbed(c, 0.015, 2));
  CHECK(run_disturbed(c, 0.015, 0));  // 3 ms of a 15 ms run on one thread
  c.involuntary_switches = 0;
  CHECK_FALSE(run_disturbed(c, 0.015, 2));
}

TEST_CASE("peaks: the probe runs on the widest vector ISA the CPU has, each supported one measures") {
  using waco::kernels::IsaFeatures;
  using waco::kernels::VectorIsa;
  // The selection: AVX2 counts only with FMA; AVX-512 wins wherever it is.
  CHECK(waco::kernels::widest_isa(IsaFeatures{}) == VectorIsa::Sse2);
  CHECK(waco::kernels::widest_isa(IsaFeatures{true, false, false}) == VectorIsa::Sse2);
  CHECK(waco::kernels::widest_isa(IsaFeatures{true, true, false}) == VectorIsa::Avx2Fma);
  CHECK(waco::kernels::widest_isa(IsaFeatures{true, true, true}) == VectorIsa::Avx512);
  CHECK(std::string(waco::kernels::isa_name(VectorIsa::Avx2Fma)) == "avx2+fma");
  CHECK(waco::kernels::isa_vector_bits(VectorIsa::Avx512) == 512);

  // This CPU: the list ends with the widest, which measure_peaks picks; every one runs.
  const auto isas = waco::kernels::supported_isas();
  REQUIRE(!isas.empty());
  CHECK(isas.front() == VectorIsa::Sse2);
  CHECK(isas.back() == waco::kernels::widest_isa(waco::kernels::cpu_isa_features()));
  for (VectorIsa isa : isas) {
    INFO(waco::kernels::isa_name(isa));
    const auto p = waco::kernels::measure_peaks(1, isa);
    CHECK(p.isa == isa);
    CHECK(p.fp32_gflops > 0.5);
    CHECK(p.fp64_gflops > 0.25);
    CHECK(p.bandwidth_gbs > 0.1);
    CHECK(p.to_json().at("isa") == waco::kernels::isa_name(isa));
  }
  // An ISA this CPU lacks is an error, not an illegal instruction.
  if (isas.back() != VectorIsa::Avx512)
    CHECK_THROWS_AS(waco::kernels::measure_peaks(1, VectorIsa::Avx512), waco::kernels::Error);
}

TEST_CASE("context: /proc/cpuinfo read as far as asked gives what the whole file gives") {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return;  // not Linux: nothing to compare
  std::vector<std::string> whole;
  for (std::string line; std::getline(in, line);) whole.push_back(line);
  REQUIRE(!whole.empty());
  // Every line, in order, when the scan is never stopped.
  std::vector<std::string> scanned;
  waco::kernels::scan_cpuinfo([&](std::string_view line) {
    scanned.emplace_back(line);
    return false;
  });
  // The file is made as it is read: a processor's clock may differ between two reads.
  REQUIRE(scanned.size() == whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i)
    if (whole[i].rfind("cpu MHz", 0) != 0) CHECK(scanned[i] == whole[i]);
  // Stopped at the third line: three lines seen.
  int seen = 0;
  waco::kernels::scan_cpuinfo([&](std::string_view) { return ++seen == 3; });
  CHECK(seen == std::min<int>(3, static_cast<int>(whole.size())));
  // A field is the first line's value after its colon, blanks dropped.
  for (const std::string& line : whole) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || line.rfind("cpu MHz", 0) == 0) continue;
    const std::string key = line.substr(0, line.find_first_of("\t:"));
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    CHECK(waco::kernels::cpuinfo_field(key) == value);
    break;  // the first field (processor)
  }
  CHECK(waco::kernels::cpu_model() == (waco::kernels::cpuinfo_field("model name").empty()
                                           ? std::string("unknown")
                                           : waco::kernels::cpuinfo_field("model name")));
}

namespace {

/// The affinity of each thread of this process, by thread id.
std::map<pid_t, cpu_set_t> thread_masks() {
  std::map<pid_t, cpu_set_t> masks;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const pid_t tid = std::stoi(task.path().filename().string());
    cpu_set_t m;
    if (sched_getaffinity(tid, sizeof m, &m) == 0) masks[tid] = m;
  }
  return masks;
}

/// `all` without CPU `cpu`.
cpu_set_t without(cpu_set_t all, int cpu) {
  CPU_CLR(cpu, &all);
  return all;
}

}  // namespace

TEST_CASE(
    "context: place_openmp_team starts a team once per size and keeps its workers off the "
    "calling thread's CPU (confined anew when that thread moves) and a released pool starts "
    "anew") {
  // On a thread of its own: its OpenMP pool is its own, started here (whatever ran before).
  int code = 0;
  std::thread([&] {
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
      code |= 1;
      return;
    }
    const int cpus = CPU_COUNT(&allowed);
    const std::map<pid_t, cpu_set_t> before = thread_masks();
    const double first = place_openmp_team(2);
    if (first <= 0.0) code |= 2;
    if (place_openmp_team(2) != 0.0 || place_openmp_team(1) != 0.0) code |= 4;  // placed already
    const std::map<pid_t, cpu_set_t> after = thread_masks();
    std::vector<pid_t> workers;
    for (const auto& [tid, mask] : after)
      if (before.count(tid) == 0) workers.push_back(tid);
    if (workers.empty()) code |= 8;  // the team's thread runs (idle)
    // Every thread runs under the normal policy again (the start runs as SCHED_BATCH).
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task"))
      if (sched_getscheduler(std::stoi(task.path().filename().string())) != SCHED_OTHER)
        code |= 256;
    const pid_t self = static_cast<pid_t>(::syscall(SYS_gettid));
    for (const auto& [tid, mask] : after) {
      if (std::find(workers.begin(), workers.end(), tid) != workers.end()) {
        // With two CPUs or more: every CPU of the calling thread's mask but one.
        const bool confined = cpus >= 2 ? CPU_COUNT(&mask) == cpus - 1 : CPU_EQUAL(&mask, &allowed);
        cpu_set_t both;
        CPU_AND(&both, &mask, &allowed);
        if (!confined || !CPU_EQUAL(&both, &mask)) code |= 16;
      } else if (!CPU_EQUAL(&mask, &before.at(tid))) {
        code |= 32;  // no other thread's mask changed, the calling thread's either
      }
    }
    // The calling thread moves (pinned here, to be sure where it runs): at its next call its
    // workers are confined to the other CPUs.
    for (int c = 0; cpus >= 2 && c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &allowed)) continue;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      if (sched_setaffinity(0, sizeof one, &one) != 0) code |= 1024;
      keep_openmp_team_apart();
      const std::map<pid_t, cpu_set_t> now = thread_masks();
      const cpu_set_t want = without(allowed, c);
      for (pid_t w : workers)
        if (now.count(w) != 0 && !CPU_EQUAL(&now.at(w), &want)) code |= 2048;
    }
    sched_setaffinity(0, sizeof allowed, &allowed);
    if (!CPU_EQUAL(&thread_masks().at(self), &allowed)) code |= 4096;
    release_idle_openmp_threads();
    if (place_openmp_team(2) <= 0.0) code |= 64;
    // A team larger than the CPUs: its new workers keep their masks (they may share a CPU).
    const std::map<pid_t, cpu_set_t> before_large = thread_masks();
    place_openmp_team(cpus + 2);
    for (const auto& [tid, mask] : thread_masks())
      if (before_large.count(tid) == 0 && !CPU_EQUAL(&mask, &allowed)) code |= 128;
  }).join();
  CHECK(code == 0);
}
