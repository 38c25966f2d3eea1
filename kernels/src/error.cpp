#include "waco/kernels/error.hpp"

#include <string>

namespace waco::kernels {

void assertion_failed(const char* condition, const char* file, int line,
                      const std::string& message) {
  throw InternalError(std::string(file) + ":" + std::to_string(line) + ": check failed: " +
                      condition + ": " + message);
}

}  // namespace waco::kernels
