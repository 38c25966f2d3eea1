// Unit "timing": summary statistics and the repeat loop.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
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
