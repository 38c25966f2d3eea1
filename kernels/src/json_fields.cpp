#include "waco/kernels/json_fields.hpp"

#include "waco/kernels/error.hpp"

namespace waco::kernels {

std::optional<std::int64_t> json_integer(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

std::optional<std::int64_t> json_integer(const nlohmann::json& v, std::int64_t lo, std::int64_t hi) {
  const std::optional<std::int64_t> x = json_integer(v);
  if (!x || *x < lo || *x > hi) return std::nullopt;
  return x;
}

std::optional<std::uint64_t> json_unsigned(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return std::nullopt;
}

std::int64_t json_int_field(const nlohmann::json& o, const std::string& key, std::int64_t lo,
                            std::int64_t hi, const std::string& what, const std::string& hint) {
  const nlohmann::json& v = o.at(key);
  const std::optional<std::int64_t> x = json_integer(v, lo, hi);
  if (!x)
    throw Error(what + ": '" + key + "' must be an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "] (got " + v.dump() + ")",
                hint);
  return *x;
}

std::uint64_t json_unsigned_field(const nlohmann::json& o, const std::string& key,
                                  const std::string& what, const std::string& hint) {
  const nlohmann::json& v = o.at(key);
  const std::optional<std::uint64_t> x = json_unsigned(v);
  if (!x)
    throw Error(what + ": '" + key + "' must be an integer in [0, 2^64) (got " + v.dump() + ")",
                hint);
  return *x;
}

}  // namespace waco::kernels
