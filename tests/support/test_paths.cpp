#include "support/test_paths.hpp"

#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace waco::test {

std::string examples_dir() { return std::string(WACO_SOURCE_DIR) + "/examples"; }

std::optional<std::string> shared_data_dir() {
  if (const char* env = std::getenv("WACO_DATA_DIR"); env && *env) {
    if (fs::is_directory(env)) return std::string(env);
    return std::nullopt;
  }
  const fs::path p = fs::path(WACO_SOURCE_DIR) / ".." / "shared" / "data";
  if (fs::is_directory(p / "matrices")) return fs::weakly_canonical(p).string();
  return std::nullopt;
}

std::string cli_binary() { return std::string(WACO_BINARY_DIR) + "/experiments/waco-hybrid"; }

std::string scratch_dir(const std::string& name) {
  // A suite registered twice (the no-sysfs variants) names its own root, so that ctest -j never
  // runs two copies of one test case in one directory.
  const char* variant = std::getenv("WACO_TEST_SCRATCH");
  fs::path p = fs::path(WACO_BINARY_DIR) / (variant && *variant ? variant : "test-scratch") / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

}  // namespace waco::test
