// Unit "timing": summary statistics and the repeat loop.
#include <catch2/catch.hpp>

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
