// The one Catch2 main shared by every test executable.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

int main(int argc, char* argv[]) {
  // No test reads the kernels compiled ahead of time unless it says so (what a test compiles
  // must not depend on the shipped lists, data/aot): set here because catch_discover_tests
  // passes one ENVIRONMENT variable only (tests/CMakeLists.txt). An explicit value wins.
  ::setenv("WACO_SHIPPED_KERNELS", "none", 0);
  // Nor does a tune or predict rank with a model `waco-hybrid calibrate` left in the user's data
  // folder (tune/calibration.hpp): the shipped models, unless a test says otherwise
  // (test_calibrate sets WACO_NO_CALIBRATION=0).
  ::setenv("WACO_NO_CALIBRATION", "1", 0);
  // A suite registered twice (the no-sysfs variants: tests/CMakeLists.txt sets WACO_SYSFS_ROOT,
  // its one variable) gets its own scratch root (test_paths.hpp), so that ctest -j never runs
  // two copies of one test case in one directory (they overwrote each other's files), and the
  // tuning cache the other units get from WACO_TEST_XDG_ENV, under that root (not the user's:
  // a decision stored there once answered a CLI test's tune).
  if (const char* sysfs = std::getenv("WACO_SYSFS_ROOT"); sysfs != nullptr && *sysfs != '\0') {
    ::setenv("WACO_TEST_SCRATCH", "test-scratch-no-sysfs", 0);
    ::setenv("XDG_CACHE_HOME", WACO_BINARY_DIR "/test-scratch-no-sysfs/xdg-cache", 1);
  }
  return Catch::Session().run(argc, argv);
}
