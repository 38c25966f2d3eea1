// libFuzzer's entry point for one target: WACO_FUZZ_ENTRY names its entry function (targets.hpp),
// set per executable by fuzz/CMakeLists.txt.
#include <cstddef>
#include <cstdint>

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  WACO_FUZZ_ENTRY(data, size);
  return 0;
}
