// Paths the tests need: the project's bundled examples, the shared development data (optional),
// the built waco-hybrid binary, and a scratch directory.
#pragma once

#include <optional>
#include <string>

namespace waco::test {

/// <source>/examples
std::string examples_dir();
/// The shared data folder (../shared/data beside the checkout, or $WACO_DATA_DIR), or nullopt
/// when it is absent: tests that need it must SKIP-like return (see data tests).
std::optional<std::string> shared_data_dir();
/// <build>/experiments/waco-hybrid
std::string cli_binary();
/// A fresh empty directory under the build tree for this test case: <build>/test-scratch/NAME, or
/// <build>/$WACO_TEST_SCRATCH/NAME for a suite registered twice (tests/CMakeLists.txt).
std::string scratch_dir(const std::string& name);

}  // namespace waco::test
