// Integers read from JSON files, checked before they are converted. nlohmann's get<int>() of a
// float outside int's range (a field of 1e300 in a damaged file) is undefined behaviour, and of a
// larger integer a silent wrap; the fuzz targets found both (fuzz/README.md). Every reader of a
// file's integer fields (recipes, schedules and schedule codes, plan files, cost model headers,
// schedule index headers, dataset exports) takes them through these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "waco/kernels/error.hpp"

namespace waco::kernels {

/// v's value when it is a JSON integer within int64 (signed, or unsigned up to INT64_MAX); never
/// a float, not even a whole one such as 4.0. nullopt otherwise.
std::optional<std::int64_t> json_integer(const nlohmann::json& v);

/// The same, and only when lo <= value <= hi.
std::optional<std::int64_t> json_integer(const nlohmann::json& v, std::int64_t lo, std::int64_t hi);

/// v's value when it is a JSON integer in [0, 2^64) (seeds); nullopt otherwise.
std::optional<std::uint64_t> json_unsigned(const nlohmann::json& v);

/// o.at(key) as an integer in [lo, hi]. Otherwise Error("<what>: '<key>' must be an integer in
/// [lo, hi] (got <the value as JSON>)", hint). A missing key throws as o.at does
/// (nlohmann::json::out_of_range), for the caller's handler of malformed objects.
std::int64_t json_int_field(const nlohmann::json& o, const std::string& key, std::int64_t lo,
                            std::int64_t hi, const std::string& what,
                            const std::string& hint = {});

/// o.at(key) as an integer in [0, 2^64); otherwise Error("<what>: '<key>' must be an integer in
/// [0, 2^64) (got ...)", hint), and a missing key as o.at.
std::uint64_t json_unsigned_field(const nlohmann::json& o, const std::string& key,
                                  const std::string& what, const std::string& hint = {});

/// read(), a reader of a stored object: an Error it throws passes, any other exception (a missing
/// key, a value of another type: nlohmann's) becomes Error("<what>: <its message>"), so that a
/// damaged object is one kind of error.
template <class Read>
auto read_json_object(const std::string& what, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(what + ": " + e.what());
  }
}

}  // namespace waco::kernels
