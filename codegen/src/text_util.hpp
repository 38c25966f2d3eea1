// Small text helpers shared by codegen's sources (internal).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace waco::codegen::detail {

/// s without leading and trailing white space.
inline std::string trim(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  const std::size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

/// xs joined with sep.
inline std::string join(const std::vector<std::string>& xs, const std::string& sep = ", ") {
  std::string out;
  for (std::size_t i = 0; i < xs.size(); ++i) out += (i ? sep : "") + xs[i];
  return out;
}

/// "unknown key 'x'" for every key of object j not in `keys`, then "missing key 'y'" for every
/// key of `keys` j lacks.
inline std::vector<std::string> json_key_errors(const nlohmann::json& j,
                                                std::initializer_list<const char*> keys) {
  std::vector<std::string> errors;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; }))
      errors.push_back("unknown key '" + it.key() + "'");
  for (const char* k : keys)
    if (!j.contains(k)) errors.push_back(std::string("missing key '") + k + "'");
  return errors;
}

}  // namespace waco::codegen::detail
