// Unit "schedule_encoding": the integer encoding of SuperSchedule for the learned cost model.
// decode(encode(s)) == canonicalize(s) for the shortcuts and for random schedules of every kernel
// (and encode(decode(c)) == c), a split-1 pair encodes as the merged loop, decode refuses every
// kind of malformed code with kernels::Error, the JSON form round-trips and checks its version,
// the categorical fields fit their cardinalities, and order_matrix is a permutation matrix.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/schedule_encoding.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/dense.hpp"
#include "support/random_schedule.hpp"
#include "waco/kernels/error.hpp"

using namespace waco::codegen;
using waco::kernels::Error;
using waco::kernels::KernelKind;
using waco::test::Rng;

namespace {


std::string decode_error(const ScheduleCode& c) {
  try {
    decode(c);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

std::string json_error(const nlohmann::json& j) {
  try {
    schedule_code_from_json(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

/// The checks every accepted code passes.
void check_code_properties(const ScheduleCode& c) {
  const std::size_t nv = kernel_spec(c.kind).vars.size();
  const std::vector<int> fields = categorical_fields(c);
  const std::vector<int> card = categorical_cardinalities(c.kind);
  REQUIRE(fields.size() == 3 * nv + 3);
  REQUIRE(card.size() == fields.size());
  for (std::size_t f = 0; f < fields.size(); ++f) {
    CHECK(fields[f] >= 0);
    CHECK(fields[f] < card[f]);
  }
  const std::size_t n = 2 * nv;
  const std::vector<float> m = order_matrix(c);
  REQUIRE(m.size() == n * n);
  for (std::size_t p = 0; p < n; ++p) {
    float row = 0.0f, col = 0.0f;
    for (std::size_t q = 0; q < n; ++q) {
      CHECK((m[p * n + q] == 0.0f || m[p * n + q] == 1.0f));
      row += m[p * n + q];
      col += m[q * n + p];
    }
    CHECK(row == 1.0f);
    CHECK(col == 1.0f);
    CHECK(m[p * n + static_cast<std::size_t>(c.order[p])] == 1.0f);
  }
}

}  // namespace

TEST_CASE("schedule_encoding: shortcuts round trip and encode as documented") {
  struct Case {
    KernelKind k;
    const char* name;
  };
  const Case cases[] = {
      {KernelKind::SpMV, "csr"},     {KernelKind::SpMV, "dcsr"},   {KernelKind::SpMV, "csc"},
      {KernelKind::SpMV, "bcsr4x4"}, {KernelKind::SpMV, "bcsr8x1"}, {KernelKind::SpMM, "csr"},
      {KernelKind::SpMM, "dcsr"},    {KernelKind::SpMM, "csc"},    {KernelKind::SpMM, "bcsr4x4"},
      {KernelKind::SDDMM, "csr"},    {KernelKind::SDDMM, "dcsr"},  {KernelKind::SDDMM, "csc"},
      {KernelKind::SDDMM, "bcsr4x4"}, {KernelKind::MTTKRP, "csf"},
  };
  for (const Case& c : cases) {
    INFO(c.name << " for " << waco::kernels::kernel_name(c.k));
    // SpMV's csr, dcsr and csc (chunk=auto, which has no code) as a space holds them.
    const SuperSchedule s = fixed_chunk(*schedule_shortcut(c.k, c.name));
    const ScheduleCode code = encode(s);
    CHECK(code.version == kScheduleEncodingVersion);
    CHECK(code.kind == c.k);
    CHECK(decode(code) == canonicalize(s));
    CHECK(encode(decode(code)) == code);
    check_code_properties(code);
  }

  // The examples of schedule_encoding.hpp.
  const ScheduleCode bcsr = encode(*schedule_shortcut(KernelKind::SpMV, "bcsr4x4"));
  CHECK(bcsr.split_log2 == std::vector<int>{2, 2});
  CHECK(bcsr.order == std::vector<int>{0, 2, 1, 3});
  CHECK(bcsr.format == std::vector<int>{1, 1, 2, 1});
  CHECK(bcsr.parallel == 0);
  CHECK(bcsr.threads == 0);
  CHECK(bcsr.chunk_log2 == 5);
  CHECK_THROWS_WITH(encode(*schedule_shortcut(KernelKind::SpMV, "csr")),
                    Catch::Contains("has chunk=auto, which schedule encoding version"));
  const ScheduleCode csr = encode(fixed_chunk(*schedule_shortcut(KernelKind::SpMV, "csr")));
  CHECK(csr.split_log2 == std::vector<int>{0, 0});
  CHECK(csr.order == std::vector<int>{0, 1, 2, 3});
  CHECK(csr.format == std::vector<int>{1, 0, 2, 0});
  CHECK(csr.chunk_log2 == 7);
  // CSC SpMV: k (slot 2) outer; SDDMM vars are i, j, k, so csc's j is slot 2.
  CHECK(encode(fixed_chunk(*schedule_shortcut(KernelKind::SpMV, "csc"))).order == std::vector<int>{2, 3, 0, 1});
  const ScheduleCode sddmm_csc = encode(*schedule_shortcut(KernelKind::SDDMM, "csc"));
  CHECK(sddmm_csc.order == std::vector<int>{2, 3, 0, 1, 4, 5});
  CHECK(sddmm_csc.format == std::vector<int>{2, 0, 1, 0, 0, 0});
  CHECK(sddmm_csc.parallel == 2);
  const ScheduleCode csf = encode(*schedule_shortcut(KernelKind::MTTKRP, "csf"));
  CHECK(csf.format == std::vector<int>{2, 0, 2, 0, 2, 0, 0, 0});
}

TEST_CASE("schedule_encoding: random schedules of every kernel round trip") {
  Rng rng{2024};
  for (KernelKind k : waco::kernels::kAllKernels) {
    int valid = 0, collapsed = 0;
    for (int n = 0; n < 600; ++n) {
      const SuperSchedule raw = waco::test::random_schedule(k, rng, {4, true});
      const SuperSchedule s = canonicalize(raw);
      if (!validate(s).empty()) continue;
      ++valid;
      if (s != raw) ++collapsed;
      INFO(to_text(raw));
      const ScheduleCode c = encode(raw);
      CHECK(c == encode(s));
      CHECK(decode(c) == s);
      CHECK(encode(decode(c)) == c);
      CHECK(schedule_code_from_json(to_json(c)) == c);
      check_code_properties(c);
    }
    INFO(waco::kernels::kernel_name(k));
    CHECK(valid >= 200);
    CHECK(collapsed > 20);  // split-1 pairs were exercised
  }
}

TEST_CASE("schedule_encoding: a split-1 pair encodes as the merged loop") {
  SuperSchedule pair;
  pair.kind = KernelKind::SpMM;
  pair.split = {1, 4, 1};
  pair.order = {{'i', Loop::Part::Outer}, {'k', Loop::Part::Outer}, {'i', Loop::Part::Inner},
                {'j', Loop::Part::Outer}, {'k', Loop::Part::Inner}, {'j', Loop::Part::Inner}};
  pair.formats = {LevelFormat::U, LevelFormat::C, LevelFormat::C, LevelFormat::U};
  pair.parallel = {'i', Loop::Part::Inner};
  pair.threads = 4;
  pair.chunk = 16;
  const SuperSchedule merged = parse_schedule(
      KernelKind::SpMM, "split=k:4 order=i,k1,j,k0 format=UCU parallel=i threads=4 chunk=16");
  const ScheduleCode c = encode(pair);
  CHECK(c == encode(merged));
  CHECK(c.split_log2 == std::vector<int>{0, 2, 0});
  CHECK(c.order == std::vector<int>{0, 1, 2, 4, 5, 3});
  CHECK(c.format == std::vector<int>{1, 0, 2, 1, 0, 0});
  CHECK(c.parallel == 0);
  CHECK(c.threads == 4);
  CHECK(c.chunk_log2 == 4);
  CHECK(decode(c) == merged);

  // encode refuses a schedule that is invalid even after canonicalize.
  SuperSchedule bad = merged;
  bad.chunk = 3;
  CHECK_THROWS_AS(encode(bad), Error);
  // Static scheduling has no code in this version: a clear refusal (the cost model encodes its
  // dynamic twin, chunk 256, instead).
  SuperSchedule st = merged;
  st.chunk = kStaticChunk;
  CHECK_THROWS_WITH(encode(st), Catch::Contains("static scheduling"));
}

TEST_CASE("schedule_encoding: a narrow (N) level encodes as C, the format the model knows") {
  Rng rng{0x4A77u};
  int narrow = 0;
  for (KernelKind k : waco::kernels::kAllKernels) {
    for (int n = 0; n < 200; ++n) {
      SuperSchedule s = canonicalize(waco::test::random_schedule(k, rng, {0, false, true}));
      if (s.chunk == kStaticChunk) s.chunk = kMaxChunk;
      if (!validate(s).empty() || std::count(s.formats.begin(), s.formats.end(), LevelFormat::N) == 0)
        continue;
      ++narrow;
      INFO(to_text(s));
      const ScheduleCode c = encode(s);
      CHECK(c == encode(wide_twin(s)));
      CHECK(decode(c) == wide_twin(s));
      CHECK(std::count(c.format.begin(), c.format.end(), 2) ==
            std::count_if(s.formats.begin(), s.formats.end(), [](LevelFormat f) { return is_compressed(f); }));
    }
  }
  CHECK(narrow > 100);
}

TEST_CASE("schedule_encoding: decode refuses malformed codes") {
  // SpMM "split=k:4 order=i,k1,j,k0 format=UCU parallel=i threads=4 chunk=16".
  const ScheduleCode good = encode(parse_schedule(
      KernelKind::SpMM, "split=k:4 order=i,k1,j,k0 format=UCU parallel=i threads=4 chunk=16"));
  REQUIRE(good.order == std::vector<int>{0, 1, 2, 4, 5, 3});
  REQUIRE_NOTHROW(decode(good));

  struct Bad {
    const char* what;
    std::function<void(ScheduleCode&)> edit;
    const char* message;
    bool structural = true;  ///< refused before validate(), so by every reader of codes
  };
  const Bad cases[] = {
      {"version", [](ScheduleCode& c) { c.version = 2; },
       "version 2 is not supported (this build reads version 1)"},
      {"kernel", [](ScheduleCode& c) { c.kind = static_cast<KernelKind>(17); },
       "unknown kernel kind 17"},
      {"split size", [](ScheduleCode& c) { c.split_log2.push_back(0); },
       "split_log2 has 4 values, spmm needs 3"},
      {"order size", [](ScheduleCode& c) { c.order.pop_back(); }, "order has 5 values, spmm needs 6"},
      {"format size", [](ScheduleCode& c) { c.format.clear(); }, "format has 0 values, spmm needs 6"},
      {"split high", [](ScheduleCode& c) { c.split_log2[1] = 17; },
       "split_log2 17 for k is out of range (expected 0..16)"},
      {"split negative", [](ScheduleCode& c) { c.split_log2[1] = -1; },
       "split_log2 -1 for k is out of range"},
      {"order range", [](ScheduleCode& c) { c.order[5] = 6; },
       "order entry 6 at position 5 is out of range"},
      {"order negative", [](ScheduleCode& c) { c.order[5] = -1; },
       "order entry -1 at position 5 is out of range"},
      {"order duplicate", [](ScheduleCode& c) { c.order[5] = 2; },
       "slot 2 appears twice in order (positions 2 and 5)"},
      {"unsplit inner apart", [](ScheduleCode& c) { c.order = {0, 2, 1, 4, 5, 3}; },
       "variable i is not split, but its inner slot 1 is not directly after its outer slot 0"},
      {"unsplit inner first", [](ScheduleCode& c) { c.order = {1, 0, 2, 4, 5, 3}; },
       "variable i is not split, but its inner slot 1"},
      {"format high", [](ScheduleCode& c) { c.format[2] = 3; }, "format 3 of slot 2 (k1 or k)"},
      {"format zero on a level", [](ScheduleCode& c) { c.format[3] = 0; },
       "format 0 of slot 3 (k0) is out of range (a sparse level: expected 1 = U or 2 = C)"},
      {"format on a dense slot", [](ScheduleCode& c) { c.format[4] = 1; },
       "format 1 of slot 4 (j1 or j) is out of range (not a sparse level: expected 0)"},
      {"format on an unsplit inner slot", [](ScheduleCode& c) { c.format[1] = 2; },
       "format 2 of slot 1 (i0) is out of range (not a sparse level"},
      {"parallel range", [](ScheduleCode& c) { c.parallel = 6; },
       "parallel slot 6 is out of range (expected 0..5)"},
      {"parallel on an unsplit inner slot", [](ScheduleCode& c) { c.parallel = 1; },
       "parallel slot 1 is the inner slot of i, which is not split"},
      {"threads", [](ScheduleCode& c) { c.threads = -2; }, "threads -2 is negative"},
      {"chunk high", [](ScheduleCode& c) { c.chunk_log2 = 9; },
       "chunk_log2 9 is out of range (expected 0..8)"},
      {"chunk negative", [](ScheduleCode& c) { c.chunk_log2 = -1; }, "chunk_log2 -1 is out of range"},
      {"validate: k0 before k1", [](ScheduleCode& c) { c.order = {0, 1, 3, 4, 5, 2}; },
       "k0 comes before k1 in order", false},
  };
  for (const Bad& b : cases) {
    INFO(b.what);
    ScheduleCode c = good;
    b.edit(c);
    CHECK_THROWS_AS(decode(c), Error);
    CHECK_THAT(decode_error(c), Catch::Contains(b.message));
    if (b.structural) {  // the structural refusals guard the other readers too
      CHECK_THROWS_AS(categorical_fields(c), Error);
      if (c.version == kScheduleEncodingVersion && c.kind == KernelKind::SpMM)
        CHECK_THROWS_AS(schedule_code_from_json(to_json(c)), Error);
    }
  }
}

TEST_CASE("schedule_encoding: JSON round trips and refuses another version") {
  const ScheduleCode c = encode(*schedule_shortcut(KernelKind::SDDMM, "bcsr2x8"));
  const nlohmann::json j = to_json(c);
  CHECK(j["version"] == kScheduleEncodingVersion);
  CHECK(j["kernel"] == "sddmm");
  CHECK(j["split_log2"] == nlohmann::json({1, 3, 0}));
  CHECK(j["order"] == nlohmann::json({0, 2, 1, 3, 4, 5}));
  CHECK(j["format"] == nlohmann::json({1, 1, 2, 1, 0, 0}));
  CHECK(j["parallel"] == 0);
  CHECK(j["threads"] == 0);
  CHECK(j["chunk_log2"] == 5);
  CHECK(j.size() == 8);
  CHECK(schedule_code_from_json(j) == c);
  CHECK(schedule_code_from_json(nlohmann::json::parse(j.dump())) == c);

  nlohmann::json bad = j;
  bad["version"] = kScheduleEncodingVersion + 1;
  CHECK_THROWS_AS(schedule_code_from_json(bad), Error);
  CHECK_THAT(json_error(bad), Catch::Contains("version 2 is not supported (this build reads version 1)"));
  bad["colour"] = 1;  // the version is judged before the keys of the other version
  CHECK_THAT(json_error(bad), Catch::Contains("version 2 is not supported"));
  bad = j;
  bad.erase("version");
  CHECK_THAT(json_error(bad), Catch::Contains("missing key 'version'"));
  bad = j;
  bad.erase("order");
  CHECK_THAT(json_error(bad), Catch::Contains("missing key 'order'"));
  bad = j;
  bad["colour"] = 1;
  CHECK_THAT(json_error(bad), Catch::Contains("unknown key 'colour'"));
  bad = j;
  bad["kernel"] = "spgemm";
  CHECK_THAT(json_error(bad), Catch::Contains("unknown kernel \"spgemm\""));
  bad = j;
  bad["kernel"] = "spmv";  // sddmm's content: the sizes do not fit
  CHECK_THAT(json_error(bad), Catch::Contains("split_log2 has 3 values, spmv needs 2"));
  bad = j;
  bad["order"][1] = "2";
  CHECK_THAT(json_error(bad), Catch::Contains("order[1] \"2\" is not an integer"));
  bad = j;
  bad["format"] = "UCUU";
  CHECK_THAT(json_error(bad), Catch::Contains("format is not an array of integers"));
  bad = j;
  bad["chunk_log2"] = 12;
  CHECK_THAT(json_error(bad), Catch::Contains("chunk_log2 12 is out of range"));
  bad = j;
  bad["order"] = {0, 3, 1, 2, 4, 5};  // validate: j0 before j1
  CHECK_THAT(json_error(bad), Catch::Contains("j0 comes before j1"));
  CHECK_THAT(json_error(nlohmann::json::array()), Catch::Contains("not an object"));
}

TEST_CASE("schedule_encoding: categorical fields and cardinalities") {
  for (KernelKind k : waco::kernels::kAllKernels) {
    const std::size_t nv = kernel_spec(k).vars.size();
    const std::vector<int> card = categorical_cardinalities(k);
    REQUIRE(card.size() == 3 * nv + 3);
    for (std::size_t f = 0; f < nv; ++f) CHECK(card[f] == 17);
    for (std::size_t f = nv; f < 3 * nv; ++f) CHECK(card[f] == 3);
    CHECK(card[3 * nv] == static_cast<int>(2 * nv));
    CHECK(card[3 * nv + 1] == 9);
    CHECK(card[3 * nv + 2] == 9);
  }
  ScheduleCode c = encode(parse_schedule(
      KernelKind::SpMV, "split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=k0 threads=2 chunk=32"));
  CHECK(categorical_fields(c) == std::vector<int>{2, 2, 1, 1, 2, 1, 3, 2, 5});
  // Thread categories: 0 for every core, then 1 + floor(log2(threads)), capped at 8.
  const std::pair<int, int> threads[] = {{0, 0},   {1, 1},   {2, 2},   {3, 2},    {4, 3},
                                         {7, 3},   {64, 7},  {127, 7}, {128, 8},  {1000, 8}};
  for (const auto& [t, cat] : threads) {
    INFO("threads " << t);
    c.threads = t;
    CHECK(categorical_fields(c)[7] == cat);
  }
}

TEST_CASE("schedule_encoding: order_matrix is the permutation matrix of the order") {
  const ScheduleCode c = encode(*schedule_shortcut(KernelKind::SpMV, "bcsr4x4"));  // {0, 2, 1, 3}
  const std::vector<float> m = order_matrix(c);
  const std::vector<float> want = {1, 0, 0, 0,  //
                                   0, 0, 1, 0,  //
                                   0, 1, 0, 0,  //
                                   0, 0, 0, 1};
  CHECK(m == want);
  check_code_properties(encode(*schedule_shortcut(KernelKind::MTTKRP, "csf")));
  ScheduleCode bad = c;
  bad.order = {0, 0, 1, 3};
  CHECK_THROWS_AS(order_matrix(bad), Error);
}
