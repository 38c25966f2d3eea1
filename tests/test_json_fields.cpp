// Unit "json_fields": the checked conversion of JSON integers (kernels/json_fields.hpp) that every
// file reader uses for its integer fields (plan files, cost model and index headers, dataset
// exports, recipes, schedules): a float, an out-of-range value or another type is refused, never
// converted (nlohmann's get<int> of 1e300 is undefined behaviour).
#include <catch2/catch.hpp>

#include <climits>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "waco/kernels/error.hpp"
#include "waco/kernels/json_fields.hpp"

using nlohmann::json;
using waco::kernels::Error;
using waco::kernels::json_int_field;
using waco::kernels::json_integer;
using waco::kernels::json_unsigned;
using waco::kernels::json_unsigned_field;

namespace {
std::string message_of(const json& o, const std::string& key, std::int64_t lo, std::int64_t hi) {
  try {
    json_int_field(o, key, lo, hi, "plan.json: the plan file is corrupt", "tune again");
  } catch (const Error& e) {
    CHECK(e.hint() == "tune again");
    return e.what();
  }
  return "(accepted)";
}
}  // namespace

TEST_CASE("json_fields: integers of either JSON sign kind are read, anything else refused") {
  CHECK(json_integer(json(7)) == 7);
  CHECK(json_integer(json(-7)) == -7);
  CHECK(json_integer(json(std::uint64_t{7})) == 7);
  CHECK(json_integer(json(INT64_MAX)) == INT64_MAX);
  CHECK(json_integer(json(INT64_MIN)) == INT64_MIN);
  CHECK(json_integer(json::parse("9223372036854775807")) == INT64_MAX);
  // Above int64: refused, not wrapped to a negative number.
  CHECK_FALSE(json_integer(json::parse("9223372036854775808")));
  CHECK_FALSE(json_integer(json::parse("18446744073709551615")));
  // Floats, even whole ones, and floats far outside any integer type (the fuzzers' 1e300).
  CHECK_FALSE(json_integer(json(4.0)));
  CHECK_FALSE(json_integer(json::parse("1e300")));
  CHECK_FALSE(json_integer(json::parse("-6.7e69")));
  CHECK_FALSE(json_integer(json("3")));
  CHECK_FALSE(json_integer(json(true)));
  CHECK_FALSE(json_integer(json(nullptr)));
  CHECK_FALSE(json_integer(json::array({1})));
  CHECK_FALSE(json_integer(json::object()));
}

TEST_CASE("json_fields: a range, inclusive at both ends") {
  CHECK(json_integer(json(0), 0, 1 << 30) == 0);
  CHECK(json_integer(json(1 << 30), 0, 1 << 30) == (1 << 30));
  CHECK_FALSE(json_integer(json((1 << 30) + 1), 0, 1 << 30));
  CHECK_FALSE(json_integer(json(-1), 0, 1 << 30));
  CHECK(json_integer(json(INT_MIN), INT_MIN, INT_MAX) == INT_MIN);
  CHECK_FALSE(json_integer(json(std::int64_t{INT_MAX} + 1), INT_MIN, INT_MAX));
  // An unsigned value above the bound (the index header's graph_bytes case).
  CHECK_FALSE(json_integer(json(std::uint64_t{1} << 63), 0, INT64_MAX));
  CHECK(json_integer(json(std::uint64_t{5}), 1, 10) == 5);
  CHECK_FALSE(json_integer(json(std::uint64_t{5}), 6, 10));
}

TEST_CASE("json_fields: unsigned values (seeds) take all of uint64, nothing negative") {
  CHECK(json_unsigned(json::parse("18446744073709551615")) == UINT64_MAX);
  CHECK(json_unsigned(json(0)) == 0u);
  CHECK(json_unsigned(json(12)) == 12u);
  CHECK_FALSE(json_unsigned(json(-1)));
  CHECK_FALSE(json_unsigned(json(1.0)));
  CHECK_FALSE(json_unsigned(json::parse("1e300")));
  CHECK_FALSE(json_unsigned(json("1")));
}

TEST_CASE("json_fields: a field outside its range is an Error naming the file, the key and the value") {
  const json o = json::parse(R"({"threads": 1e300, "dense": 64, "big": 18446744073709551615,
                                 "neg": -2, "text": "4"})");
  CHECK(json_int_field(o, "dense", 0, 1 << 30, "x") == 64);
  CHECK(message_of(o, "threads", 0, 1 << 30) ==
        "plan.json: the plan file is corrupt: 'threads' must be an integer in [0, 1073741824] "
        "(got 1e+300)");
  CHECK_THAT(message_of(o, "big", 0, 1 << 30), Catch::Contains("(got 18446744073709551615)"));
  CHECK_THAT(message_of(o, "neg", 0, 10), Catch::Contains("'neg' must be an integer in [0, 10]"));
  CHECK_THAT(message_of(o, "text", 0, 10), Catch::Contains("(got \"4\")"));
  // A missing key is the JSON library's out_of_range, as o.at(key), for the reader's own handler.
  CHECK_THROWS_AS(json_int_field(o, "absent", 0, 1, "x"), json::out_of_range);
  CHECK(json_unsigned_field(o, "big", "x") == UINT64_MAX);
  CHECK_THROWS_WITH(json_unsigned_field(o, "neg", "model.json: header"),
                    "model.json: header: 'neg' must be an integer in [0, 2^64) (got -2)");
}
