// Unit "super_schedule": the kernel specs, and the SuperSchedule value type (WACO section 4.1.2):
// canonicalize is idempotent, the text and JSON forms round-trip, == and hash agree, validate
// lists every reason, the shortcuts expand as documented, and malformed text gets a precise error.
// Random schedules come from a seeded generator covering every kernel, split sizes 1..2^16 (and
// non-canonical split-1 pairs), every loop order with x1 before x0, all level formats.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/dense.hpp"
#include "support/random_schedule.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"

using namespace waco::codegen;
using waco::kernels::Error;
using waco::kernels::KernelKind;
using waco::test::Rng;

namespace {


bool contains_reason(const std::vector<std::string>& reasons, const std::string& needle) {
  return std::any_of(reasons.begin(), reasons.end(),
                     [&](const std::string& r) { return r.find(needle) != std::string::npos; });
}

std::string error_of(KernelKind k, const std::string& text) {
  try {
    schedule_from_string(k, text);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("super_schedule: kernel specs describe the four kernels") {
  const KernelSpec& spmv = kernel_spec(KernelKind::SpMV);
  CHECK(spmv.vars == std::vector<char>{'i', 'k'});
  CHECK(spmv.sparse_vars == std::vector<char>{'i', 'k'});
  REQUIRE(spmv.inputs.size() == 1);
  CHECK(spmv.inputs[0].name == "x");
  CHECK(spmv.inputs[0].vars == std::vector<char>{'k'});
  CHECK(spmv.output.vars == std::vector<char>{'i'});
  CHECK(spmv.is_output_var('i'));
  CHECK_FALSE(spmv.is_output_var('k'));

  const KernelSpec& spmm = kernel_spec(KernelKind::SpMM);
  CHECK(spmm.vars == std::vector<char>{'i', 'k', 'j'});
  CHECK(spmm.var_index('j') == 2);
  CHECK(spmm.var_index('l') == -1);
  CHECK(spmm.inputs[0].vars == std::vector<char>{'k', 'j'});
  CHECK(spmm.output.vars == std::vector<char>{'i', 'j'});
  CHECK_FALSE(spmm.is_sparse_var('j'));
  CHECK_FALSE(spmm.sparse_output());

  const KernelSpec& sddmm = kernel_spec(KernelKind::SDDMM);
  CHECK(sddmm.vars == std::vector<char>{'i', 'j', 'k'});
  CHECK(sddmm.sparse_vars == std::vector<char>{'i', 'j'});
  REQUIRE(sddmm.inputs.size() == 2);
  CHECK(sddmm.inputs[0].vars == std::vector<char>{'i', 'k'});
  CHECK(sddmm.inputs[1].name == "C");
  CHECK(sddmm.inputs[1].vars == std::vector<char>{'j', 'k'});
  CHECK(sddmm.sparse_output());
  CHECK(sddmm.is_output_var('i'));  // the sparse output sits at A's positions
  CHECK(sddmm.is_output_var('j'));
  CHECK_FALSE(sddmm.is_output_var('k'));

  const KernelSpec& mttkrp = kernel_spec(KernelKind::MTTKRP);
  CHECK(mttkrp.vars == std::vector<char>{'i', 'k', 'l', 'j'});
  CHECK(mttkrp.sparse_vars == std::vector<char>{'i', 'k', 'l'});
  CHECK(mttkrp.inputs[0].vars == std::vector<char>{'k', 'j'});
  CHECK(mttkrp.inputs[1].vars == std::vector<char>{'l', 'j'});
  CHECK(mttkrp.output.vars == std::vector<char>{'i', 'j'});
  CHECK(mttkrp.is_sparse_var('l'));
  CHECK_FALSE(mttkrp.is_output_var('l'));
  for (KernelKind k : waco::kernels::kAllKernels) CHECK(kernel_spec(k).kind == k);
}

TEST_CASE("super_schedule: extents follow the problem's shapes") {
  waco::kernels::CooMatrix a;
  a.rows = 5;
  a.cols = 7;
  a.row = {0, 4};
  a.col = {1, 6};
  a.val = {1.0f, 2.0f};
  const auto d1 = waco::kernels::make_dense_operands(KernelKind::SpMV, &a, nullptr, 1, 1);
  CHECK(extents(kernel_spec(KernelKind::SpMV),
                waco::kernels::make_problem(KernelKind::SpMV, &a, nullptr, d1)) ==
        std::vector<std::int64_t>{5, 7});
  const auto d2 = waco::kernels::make_dense_operands(KernelKind::SpMM, &a, nullptr, 3, 1);
  CHECK(extents(kernel_spec(KernelKind::SpMM),
                waco::kernels::make_problem(KernelKind::SpMM, &a, nullptr, d2)) ==
        std::vector<std::int64_t>{5, 7, 3});
  const auto d3 = waco::kernels::make_dense_operands(KernelKind::SDDMM, &a, nullptr, 9, 1);
  CHECK(extents(kernel_spec(KernelKind::SDDMM),
                waco::kernels::make_problem(KernelKind::SDDMM, &a, nullptr, d3)) ==
        std::vector<std::int64_t>{5, 7, 9});
  const waco::kernels::CooTensor t = waco::kernels::generate_tensor({4, 6, 8}, 20, 3);
  const auto d4 = waco::kernels::make_dense_operands(KernelKind::MTTKRP, nullptr, &t, 2, 1);
  CHECK(extents(kernel_spec(KernelKind::MTTKRP),
                waco::kernels::make_problem(KernelKind::MTTKRP, nullptr, &t, d4)) ==
        std::vector<std::int64_t>{4, 6, 8, 2});
}

TEST_CASE("super_schedule: random schedules are valid and canonicalize is idempotent") {
  Rng rng{42};
  int collapsed = 0;
  for (KernelKind k : waco::kernels::kAllKernels) {
    for (int n = 0; n < 500; ++n) {
      const SuperSchedule canon = waco::test::random_schedule(k, rng);
      INFO(to_text(canon));
      REQUIRE(validate(canon).empty());
      CHECK(canonicalize(canon) == canon);

      const SuperSchedule raw = waco::test::random_schedule(k, rng, {2, false});
      INFO(to_text(raw));
      const SuperSchedule c = canonicalize(raw);
      REQUIRE(validate(c).empty());
      CHECK(canonicalize(c) == c);
      CHECK(c.levels().size() == c.formats.size());
      if (c != raw) {
        ++collapsed;
        CHECK_FALSE(validate(raw).empty());  // split-1 pairs are not valid before canonicalize
      }
    }
  }
  CHECK(collapsed > 500);  // the generator did exercise the collapsing
}

TEST_CASE("super_schedule: canonicalize collapses split-1 pairs") {
  SuperSchedule s;
  s.kind = KernelKind::SpMV;
  s.split = {1, 4};
  s.order = {{'i', Loop::Part::Outer}, {'k', Loop::Part::Outer}, {'i', Loop::Part::Inner},
             {'k', Loop::Part::Inner}};
  s.formats = {LevelFormat::C, LevelFormat::U, LevelFormat::U, LevelFormat::C};
  s.parallel = {'i', Loop::Part::Inner};
  s.chunk = 8;
  CHECK(contains_reason(validate(s), "loop 'i1' in order, but i is not split"));
  const SuperSchedule c = canonicalize(s);
  CHECK(to_text(c) == "split=k:4 order=i,k1,k0 format=CUC parallel=i threads=0 chunk=8");
  CHECK(validate(c).empty());
}

TEST_CASE("super_schedule: text round trips") {
  Rng rng{7};
  for (KernelKind k : waco::kernels::kAllKernels) {
    for (int n = 0; n < 500; ++n) {
      const SuperSchedule s = waco::test::random_schedule(k, rng);
      const std::string t = to_text(s);
      INFO(t);
      const SuperSchedule p = parse_schedule(k, t);
      CHECK(p == s);
      CHECK(to_text(p) == t);
      const SuperSchedule raw = waco::test::random_schedule(k, rng, {2, false});
      INFO(to_text(raw));
      CHECK(parse_schedule(k, to_text(raw)) == canonicalize(raw));
    }
  }
  const std::string t = "split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1 threads=2 chunk=32";
  const SuperSchedule s = parse_schedule(KernelKind::SpMV, t);
  CHECK(to_text(s) == t);
  CHECK(s.split_of('i') == 4);
  CHECK(s.levels().size() == 4);
  // Free field order and extra spaces parse to the same schedule.
  CHECK(parse_schedule(KernelKind::SpMV,
                       "  chunk=32 format=UCUU\torder=i1,k1,i0,k0 split=k:4,i:4 threads=2 parallel=i1 ") ==
        s);
  // Static scheduling: "chunk=static" (or 0) both ways, its own schedule beside every chunk.
  const SuperSchedule st = parse_schedule(KernelKind::SpMV, "order=i,k format=UC threads=2 chunk=static");
  CHECK(st.chunk == kStaticChunk);
  CHECK(to_text(st) == "order=i,k format=UC parallel=i threads=2 chunk=static");
  CHECK(parse_schedule(KernelKind::SpMV, "order=i,k format=UC threads=2 chunk=0") == st);
  CHECK(schedule_from_json(to_json(st)) == st);
  CHECK(st != parse_schedule(KernelKind::SpMV, "order=i,k format=UC threads=2 chunk=256"));
  CHECK(validate(st).empty());
  // chunk=auto (the csr SpMV baseline's rule, kAutoChunk) both ways; SpMV only, with an unsplit
  // parallel loop; fixed_chunk gives the space's form (its least chunk, 128).
  const SuperSchedule au = parse_schedule(KernelKind::SpMV, "order=i,k format=UC threads=2 chunk=auto");
  CHECK(au.chunk == kAutoChunk);
  CHECK(to_text(au) == "order=i,k format=UC parallel=i threads=2 chunk=auto");
  CHECK(schedule_from_json(to_json(au)) == au);
  CHECK(hash_value(au) != hash_value(parse_schedule(KernelKind::SpMV, "order=i,k format=UC threads=2 chunk=128")));
  CHECK(to_text(fixed_chunk(au)) == "order=i,k format=UC parallel=i threads=2 chunk=128");
  CHECK(fixed_chunk(st) == st);
  CHECK_THROWS_WITH(parse_schedule(KernelKind::SpMM, "order=i,k,j format=UC chunk=auto"),
                    Catch::Contains("is for spmv only"));
  CHECK_THROWS_WITH(parse_schedule(KernelKind::SpMV, "split=i:4 order=i1,i0,k format=UUC chunk=auto"),
                    Catch::Contains("chunk=auto needs an unsplit parallel loop, not 'i1'"));
  CHECK_THROWS_WITH(parse_schedule(KernelKind::SpMV, "order=i,k format=UC chunk=automatic"),
                    Catch::Contains("static or auto"));
  // Defaults: parallel = the first loop, threads = 0, chunk = 1.
  CHECK(to_text(parse_schedule(KernelKind::SpMM, "format=UC order=k,i,j")) ==
        "order=k,i,j format=UC parallel=k threads=0 chunk=1");
  // An explicit size 1 allows the pair and collapses it.
  CHECK(to_text(parse_schedule(KernelKind::SpMV, "split=i:1 order=i1,k,i0 format=UCU parallel=i0")) ==
        "order=i,k format=UC parallel=i threads=0 chunk=1");
}

TEST_CASE("super_schedule: narrow (N) levels round trip in text and JSON, and have a wide twin") {
  Rng rng{23};
  int narrow = 0;
  for (KernelKind k : waco::kernels::kAllKernels) {
    for (int n = 0; n < 300; ++n) {
      const SuperSchedule s = waco::test::random_schedule(k, rng, {0, false, true});
      const std::string t = to_text(s);
      INFO(t);
      REQUIRE(validate(s).empty());
      CHECK(parse_schedule(k, t) == s);
      CHECK(schedule_from_json(to_json(s)) == s);
      const SuperSchedule w = wide_twin(s);
      CHECK(std::count(w.formats.begin(), w.formats.end(), LevelFormat::N) == 0);
      if (std::count(s.formats.begin(), s.formats.end(), LevelFormat::N) > 0) {
        ++narrow;
        CHECK(w != s);
        CHECK(hash_value(w) != hash_value(s));
        CHECK(t.find('N') != std::string::npos);
      } else {
        CHECK(w == s);
      }
    }
  }
  CHECK(narrow > 100);
  const std::string t = "split=i:256,k:65536 order=i1,k1,i0,k0 format=UCUN parallel=i1 threads=2 chunk=static";
  const SuperSchedule s = parse_schedule(KernelKind::SpMV, t);
  CHECK(to_text(s) == t);
  CHECK(s.formats.back() == LevelFormat::N);
  CHECK(is_compressed(LevelFormat::N));
  CHECK(is_compressed(LevelFormat::C));
  CHECK_FALSE(is_compressed(LevelFormat::U));
  CHECK(format_letter(LevelFormat::N) == 'N');
  CHECK(to_json(s)["format"] == "UCUN");
  CHECK(to_text(wide_twin(s)) ==
        "split=i:256,k:65536 order=i1,k1,i0,k0 format=UCUC parallel=i1 threads=2 chunk=static");
  // A split-1 pair collapses as for C: the x0 level's N is dropped with the level.
  CHECK(to_text(parse_schedule(KernelKind::SpMV, "split=k:1 order=i,k1,k0 format=UNN")) ==
        "order=i,k format=UN parallel=i threads=0 chunk=1");
  // Any level may be N in the schedule: the range is checked against the operand when built.
  CHECK(validate(parse_schedule(KernelKind::SpMV, "order=i,k format=NN")).empty());
}

TEST_CASE("super_schedule: JSON round trips and checks version, kernel and content") {
  Rng rng{11};
  for (KernelKind k : waco::kernels::kAllKernels) {
    for (int n = 0; n < 200; ++n) {
      const SuperSchedule s = waco::test::random_schedule(k, rng);
      const nlohmann::json j = to_json(s);
      CHECK(j["version"] == kScheduleJsonVersion);
      CHECK(schedule_from_json(j) == s);
      CHECK(schedule_from_json(nlohmann::json::parse(j.dump())) == s);
    }
  }
  const SuperSchedule s = parse_schedule(
      KernelKind::SpMV, "split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1 threads=2 chunk=32");
  const nlohmann::json j = to_json(s);
  CHECK(j["split"]["i"] == 4);
  CHECK(j["order"] == nlohmann::json({"i1", "k1", "i0", "k0"}));
  CHECK(j["format"] == "UCUU");

  auto json_error = [](const nlohmann::json& bad) -> std::string {
    try {
      schedule_from_json(bad);
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  };
  nlohmann::json bad = j;
  bad["version"] = kScheduleJsonVersion + 1;
  CHECK_THAT(json_error(bad), Catch::Contains("version 2 is not supported (expected 1)"));
  bad = j;
  bad.erase("version");
  CHECK_THAT(json_error(bad), Catch::Contains("missing key 'version'"));
  bad = j;
  bad["kernel"] = "spgemm";
  CHECK_THAT(json_error(bad), Catch::Contains("unknown kernel \"spgemm\""));
  bad = j;
  bad["kernel"] = "mttkrp";  // the content is SpMV's: the loops do not fit
  CHECK_THAT(json_error(bad), Catch::Contains("order misses loop 'l'"));
  bad = j;
  bad["colour"] = 1;
  CHECK_THAT(json_error(bad), Catch::Contains("unknown key 'colour'"));
  bad = j;
  bad["chunk"] = "32";
  CHECK_THAT(json_error(bad), Catch::Contains("chunk \"32\" is not an integer"));
  bad = j;
  bad["order"] = {"i1", "k1", "k0", "i0", "q"};
  CHECK_THAT(json_error(bad), Catch::Contains("unknown loop 'q' in order"));
  bad = j;
  bad["format"] = "UCU";
  CHECK_THAT(json_error(bad), Catch::Contains("format has 3 letters, the order has 4 sparse levels"));
  CHECK_THAT(json_error(nlohmann::json::array()), Catch::Contains("not an object"));
}

TEST_CASE("super_schedule: equality and hash agree") {
  Rng rng{99};
  std::unordered_set<SuperSchedule> distinct;
  for (KernelKind k : waco::kernels::kAllKernels)
    for (int n = 0; n < 250; ++n) {
      const SuperSchedule s = waco::test::random_schedule(k, rng);
      const SuperSchedule copy = parse_schedule(k, to_text(s));
      REQUIRE(copy == s);
      CHECK(hash_value(copy) == hash_value(s));
      CHECK(std::hash<SuperSchedule>{}(s) == hash_value(s));
      distinct.insert(s);
    }
  REQUIRE(distinct.size() > 900);
  std::unordered_set<std::size_t> hashes;
  for (const SuperSchedule& s : distinct) hashes.insert(hash_value(s));
  CHECK(distinct.size() - hashes.size() <= 1);

  // Each field takes part in == and in the hash.
  const SuperSchedule base = schedule_from_string(KernelKind::SpMM, "bcsr4x4");
  std::vector<SuperSchedule> variants(7, base);
  variants[0].kind = KernelKind::SDDMM;
  variants[1].split[0] = 8;
  std::swap(variants[2].order[0], variants[2].order[1]);
  variants[3].formats[0] = LevelFormat::C;
  variants[4].parallel = {'k', Loop::Part::Outer};
  variants[5].threads = 2;
  variants[6].chunk = 64;
  for (const SuperSchedule& v : variants) {
    CHECK(v != base);
    CHECK(hash_value(v) != hash_value(base));
  }
}

TEST_CASE("super_schedule: validate lists every reason") {
  SuperSchedule s;
  s.kind = KernelKind::SpMV;
  s.split = {3, 1};
  s.order = {{'i', Loop::Part::Inner}, {'k', Loop::Part::Whole}, {'i', Loop::Part::Outer}};
  s.formats = {LevelFormat::U};
  s.parallel = {'j', Loop::Part::Whole};
  s.threads = -1;
  s.chunk = 3;
  const std::vector<std::string> r = validate(s);
  CHECK(contains_reason(r, "split size 3 for i is not a power of two"));
  CHECK(contains_reason(r, "i0 comes before i1"));
  CHECK(contains_reason(r, "parallel loop 'j' is not in the order (i0, k, i1)"));
  CHECK(contains_reason(r, "threads -1 is negative"));
  CHECK(contains_reason(r, "chunk 3 is not a power of two"));
  CHECK(r.size() == 5);  // the format count is not judged against a broken order

  SuperSchedule t = parse_schedule(KernelKind::SDDMM, "order=i,j,k format=UC");
  CHECK(validate(t).empty());
  t.formats.push_back(LevelFormat::C);
  t.split = {1, 1, 1, 1};
  t.chunk = 512;
  const std::vector<std::string> r2 = validate(t);
  CHECK(contains_reason(r2, "split has 4 sizes, sddmm has 3 variables (i, j, k)"));
  CHECK(contains_reason(r2, "chunk 512 is out of range"));

  t = parse_schedule(KernelKind::SDDMM, "order=i,j,k format=UC");
  t.formats.push_back(LevelFormat::C);
  CHECK(validate(t) == std::vector<std::string>{
                           "format has 3 letters, the order has 2 sparse levels (i, j)"});
  t = schedule_from_string(KernelKind::MTTKRP, "csf");
  t.split[3] = 0;
  t.order.pop_back();
  t.order.push_back({'j', Loop::Part::Whole});
  t.order.push_back({'q', Loop::Part::Whole});
  const std::vector<std::string> r3 = validate(t);
  CHECK(contains_reason(r3, "split size 0 for j is out of range"));
  CHECK(contains_reason(r3, "unknown loop 'q' in order"));
  CHECK(contains_reason(r3, "loop 'j' in order, but j is split by 0 (expected j1 and j0)"));
}

TEST_CASE("super_schedule: shortcuts expand for the kernels they support") {
  struct Case {
    KernelKind k;
    const char* name;
    const char* text;
  };
  const Case cases[] = {
      {KernelKind::SpMV, "csr", "order=i,k format=UC parallel=i threads=0 chunk=auto"},
      {KernelKind::SpMM, "csr", "order=i,k,j format=UC parallel=i threads=0 chunk=32"},
      {KernelKind::SDDMM, "csr", "order=i,j,k format=UC parallel=i threads=0 chunk=32"},
      {KernelKind::SpMV, "dcsr", "order=i,k format=CC parallel=i threads=0 chunk=auto"},
      {KernelKind::SpMM, "dcsr", "order=i,k,j format=CC parallel=i threads=0 chunk=32"},
      {KernelKind::SDDMM, "dcsr", "order=i,j,k format=CC parallel=i threads=0 chunk=32"},
      {KernelKind::SpMV, "csc", "order=k,i format=UC parallel=k threads=0 chunk=auto"},
      {KernelKind::SpMM, "csc", "order=k,i,j format=UC parallel=k threads=0 chunk=32"},
      {KernelKind::SDDMM, "csc", "order=j,i,k format=UC parallel=j threads=0 chunk=32"},
      {KernelKind::SpMV, "bcsr4x4",
       "split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1 threads=0 chunk=32"},
      {KernelKind::SpMM, "bcsr4x4",
       "split=i:4,k:4 order=i1,k1,i0,k0,j format=UCUU parallel=i1 threads=0 chunk=32"},
      {KernelKind::SDDMM, "bcsr2x8",
       "split=i:2,j:8 order=i1,j1,i0,j0,k format=UCUU parallel=i1 threads=0 chunk=32"},
      {KernelKind::SpMV, "bcsr8x1", "split=i:8 order=i1,k,i0 format=UCU parallel=i1 threads=0 chunk=32"},
      {KernelKind::SpMV, "bcsr1x4", "split=k:4 order=i,k1,k0 format=UCU parallel=i threads=0 chunk=32"},
      {KernelKind::SpMV, "bcsr1x1", "order=i,k format=UC parallel=i threads=0 chunk=32"},
      {KernelKind::MTTKRP, "csf", "order=i,k,l,j format=CCC parallel=i threads=0 chunk=32"},
      {KernelKind::SpMV, "ncsr",
       "split=i:256,k:65536 order=i1,k1,i0,k0 format=UCUN parallel=i1 threads=0 chunk=static"},
      {KernelKind::SpMM, "ncsr",
       "split=i:256,k:65536 order=i1,k1,i0,k0,j format=UCUN parallel=i1 threads=0 chunk=static"},
      {KernelKind::SDDMM, "ncsr",
       "split=i:256,j:65536 order=i1,j1,i0,j0,k format=UCUN parallel=i1 threads=0 chunk=static"},
  };
  for (const Case& c : cases) {
    INFO(c.name << " for " << waco::kernels::kernel_name(c.k));
    const std::optional<SuperSchedule> s = schedule_shortcut(c.k, c.name);
    REQUIRE(s.has_value());
    CHECK(validate(*s).empty());
    CHECK(to_text(*s) == c.text);
    CHECK(parse_schedule(c.k, c.text) == *s);
    CHECK(schedule_from_string(c.k, std::string(" ") + c.name + "\n") == *s);
  }
  CHECK_FALSE(schedule_shortcut(KernelKind::SpMV, "order=i,k format=UC").has_value());
  CHECK_FALSE(schedule_shortcut(KernelKind::SpMV, "coo").has_value());

  auto shortcut_error = [](KernelKind k, const std::string& name) -> std::string {
    try {
      schedule_shortcut(k, name);
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  };
  for (const char* name : {"csr", "dcsr", "csc", "bcsr4x4", "ncsr"})
    CHECK_THAT(shortcut_error(KernelKind::MTTKRP, name),
               Catch::Contains("is not defined for mttkrp: use csf"));
  for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM})
    CHECK_THAT(shortcut_error(k, "csf"), Catch::Contains("'csf' is not defined for"));
  CHECK_THAT(shortcut_error(KernelKind::SpMV, "bcsr3x4"),
             Catch::Contains("block size 3 is not a power of two"));
  CHECK_THAT(shortcut_error(KernelKind::SpMV, "bcsr4x0"),
             Catch::Contains("block size 0 is not a power of two"));
  CHECK_THAT(shortcut_error(KernelKind::SpMV, "bcsr4"), Catch::Contains("'bcsr4' is not bcsrRxC"));
  CHECK_THAT(shortcut_error(KernelKind::SpMV, "bcsr4x131072"),
             Catch::Contains("block size 131072 is not a power of two in 1..65536"));
  CHECK_THAT(error_of(KernelKind::SpMV, "coo"),
             Catch::Contains("schedule 'coo' is neither a shortcut nor the text form"));
}

TEST_CASE("super_schedule: malformed text gets a precise error") {
  struct Case {
    KernelKind k;
    const char* text;
    const char* expected;
  };
  const KernelKind V = KernelKind::SpMV;
  const Case cases[] = {
      {V, "", "empty schedule"},
      {V, "   ", "empty schedule"},
      {V, "order=i,q format=UC", "unknown loop 'q' in order (expected one of i, k for spmv)"},
      {V, "split=i:4 order=i1,q,i0 format=UUU",
       "unknown loop 'q' in order (expected one of i1, i0, k for spmv)"},
      {V, "order=i,k,l format=UCC", "'l' is a variable of mttkrp: is the schedule for another kernel?"},
      {V, "split=i:4,k:4 order=i1,k1,i0,k0 format=UCU",
       "format has 3 letters, the order has 4 sparse levels (i1, k1, i0, k0)"},
      {V, "split=i:3 order=i1,k,i0 format=UCU", "split size 3 for i is not a power of two"},
      {V, "split=i:131072 order=i1,k,i0 format=UCU", "split size 131072 for i is out of range"},
      {V, "split=i:x order=i1,k,i0 format=UCU", "split size 'x' for i is not a number"},
      {V, "split=i4 order=i,k format=UC", "split entry 'i4' is not <variable>:<size>"},
      {V, "split=l:4 order=i,k format=UC", "split of 'l', which spmv does not have (its variables are i, k)"},
      {V, "split=i:4,i:8 order=i1,i0,k format=UUC", "i appears twice in split"},
      {V, "order=i,k format=UC foo=1",
       "unknown field 'foo' (expected split, order, format, parallel, threads, chunk)"},
      {V, "order=i,k order=k,i format=UC", "duplicate field 'order'"},
      {V, "split=i:4 order=i0,k,i1 format=UCU", "i0 comes before i1"},
      {V, "order=i,k", "missing field 'format'"},
      {V, "format=UC parallel=i", "missing field 'order'"},
      {V, "order= format=UC", "field 'order' has no value"},
      {V, "order=i,k format=UC threads=two", "threads 'two' is not a number"},
      {V, "order=i,k format=UC threads=-1", "threads -1 is negative"},
      {V, "order=i,k format=UC chunk=-1", "chunk -1 is out of range (expected a power of two in 1..256, static or auto)"},
      {V, "order=i,k format=UC chunk=dynamic", "chunk 'dynamic' is not a number"},
      {V, "order=i,k format=UC chunk=512", "chunk 512 is out of range"},
      {V, "order=i,k format=UC chunk=3", "chunk 3 is not a power of two"},
      {V, "order=i,k format=UC chunk=99999999999", "chunk '99999999999' is not a number"},
      {V, "order=i,k format=UC parallel=j", "parallel loop 'j' is not in the order (i, k)"},
      {V, "order=i,k format=UC parallel=i1,k", "bad parallel loop 'i1,k'"},
      {V, "order=i,k format=UX", "format letter 'X' at position 2 of 'UX' (expected U, C or N)"},
      {V, "order=i1,k,i0 format=UCU", "loop 'i1' in order, but i is not split"},
      {V, "split=i:4 order=i,k format=UC", "loop 'i' in order, but i is split by 4 (expected i1 and i0)"},
      {V, "order=i,k,i format=UCU", "loop 'i' appears 2 times in order"},
      {V, "order=i format=U", "order misses loop 'k'"},
      {V, "split=k:2 order=i,k1 format=UC", "order misses loop 'k0'"},
      {V, "order=i2,k format=UC", "bad loop 'i2' in order"},
      {V, "order=i,,k format=UC", "bad loop '' in order"},
      {V, "order=i, k format=UC", "'k' is not a key=value field"},
      {V, "coo", "neither a shortcut nor the text form"},
      {KernelKind::MTTKRP, "order=i,k,j format=CC", "order misses loop 'l'"},
      {KernelKind::SpMM, "order=i,k,j format=UCC", "format has 3 letters, the order has 2 sparse levels"},
      {KernelKind::SDDMM, "split=k:512 order=i,j,k format=UC",
       "loop 'k' in order, but k is split by 512"},
  };
  STATIC_REQUIRE(sizeof(cases) / sizeof(cases[0]) >= 15);
  for (const Case& c : cases) {
    INFO(c.text);
    const std::string msg = error_of(c.k, c.text);
    CHECK_THAT(msg, Catch::Contains(c.expected));
  }
  // The message quotes the text; every reason is listed.
  CHECK_THAT(error_of(V, "split=i:3 order=i1,k format=UCU chunk=3"),
             Catch::StartsWith("schedule \"split=i:3 order=i1,k format=UCU chunk=3\": ") &&
                 Catch::Contains("split size 3 for i is not a power of two") &&
                 Catch::Contains("order misses loop 'i0'") && Catch::Contains("chunk 3"));
  // The hint shows the text form.
  try {
    parse_schedule(KernelKind::SDDMM, "order=i,j");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.hint(), Catch::Contains("order=i1,j1,i0,j0,k"));
  }
}
