// The csr SpMV rule's serial bound (kernels/serial_bound.hpp): the bound read off probe ratios,
// the stored form, the probe on this machine, the rule decided on a matrix
// (csr_spmv_serial_for, baseline_loops.hpp), and WACO_CSR_SERIAL_NNZ; the serial loop's copies
// and the one chosen for this machine (csr_spmv_serial_copy), and WACO_CSR_SERIAL_COPY.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "support/test_paths.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/cache_probe.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/serial_bound.hpp"
#include "baselines.hpp"  // kernels/src: the serial loop's copies

using namespace waco::kernels;

namespace {

/// A CSR matrix of `nnz` nonzeros in rows of 1-15 (the columns spread over `rows` columns), its
/// x, and A x summed as csr's loops sum a row.
template <class V>
struct TestCsr {
  std::vector<index_t> rowptr{0}, colidx;
  std::vector<V> val, x, expected;
  explicit TestCsr(std::int64_t nnz) {
    std::uint64_t h = 12345;
    while (rowptr.back() < nnz) {
      h = h * 6364136223846793005ULL + 1442695040888963407ULL;
      rowptr.push_back(static_cast<index_t>(std::min<std::int64_t>(nnz, rowptr.back() + 1 + static_cast<index_t>((h >> 33) % 15))));
    }
    const auto rows = static_cast<index_t>(rowptr.size() - 1);
    for (index_t i = 0; i < rows; ++i)
      for (index_t p = rowptr[static_cast<std::size_t>(i)]; p < rowptr[static_cast<std::size_t>(i) + 1]; ++p) {
        colidx.push_back(static_cast<index_t>((static_cast<std::int64_t>(i) * 7 + (p - rowptr[static_cast<std::size_t>(i)]) * 13) % rows));
        val.push_back(V(0.25) + V(p % 5));
      }
    for (index_t i = 0; i < rows; ++i) x.push_back(V(1) + V(i % 3) / V(8));
    for (index_t i = 0; i < rows; ++i) {
      V s = 0;  // as csr's loops: the row's entries in order
      for (index_t p = rowptr[static_cast<std::size_t>(i)]; p < rowptr[static_cast<std::size_t>(i) + 1]; ++p)
        s += val[static_cast<std::size_t>(p)] * x[static_cast<std::size_t>(colidx[static_cast<std::size_t>(p)])];
      expected.push_back(s);
    }
  }
  CsrView<V> view() const { return {static_cast<index_t>(rowptr.size() - 1), rowptr.data(), colidx.data(), val.data()}; }
  /// csr_spmv_serial_for on `threads`; when `timed` (the loops ran on A), y holds A x after it,
  /// else it is untouched.
  bool serial_for(int threads, bool timed = false) const {
    std::vector<V> y(expected.size(), V(-1));
    const bool serial = csr_spmv_serial_for(view(), x.data(), y.data(), threads);
    CHECK(y == (timed ? expected : std::vector<V>(expected.size(), V(-1))));
    return serial;
  }
};

/// Runs the test case `name` of this program in a fresh process (where `var`, read once a
/// process, is read for the first time) with `var`=`value` and WACO_TEST_EXPECT=`expect`;
/// its exit status (0: its checks passed).
int run_case_with(const char* var, const char* value, const char* expect, const char* name) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv(var, value, 1);
    ::setenv("WACO_TEST_EXPECT", expect, 1);
    const char* argv[] = {"test_serial_bound", name, nullptr};
    ::execv("/proc/self/exe", const_cast<char* const*>(argv));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("serial bound: read off the ratios where the parallel loop starts to win for good") {
  // Faster nowhere: serial up to the largest size probed; faster everywhere: half the smallest.
  CHECK(serial_bound_from_ratios({{1024, 3.0}, {2048, 1.5}, {4096, 1.1}}) == 4096);
  CHECK(serial_bound_from_ratios({{1024, 0.9}, {2048, 0.7}}) == 512);
  // A crossing halfway in the ratio is halfway in log(size): 8192 * sqrt(2).
  CHECK(serial_bound_from_ratios({{4096, 2.0}, {8192, 1.2}, {16384, 0.8}, {32768, 0.6}}) == 11585);
  // A ratio of exactly 1 is a tie, which the serial loop keeps.
  CHECK(serial_bound_from_ratios({{4096, 1.0}, {8192, 0.5}}) == 4096);
  // A noisy win below a later loss does not count: the last crossing decides.
  CHECK(serial_bound_from_ratios({{1024, 0.9}, {2048, 1.3}, {4096, 0.7}}) > 2048);
  CHECK(serial_bound_from_ratios({{1024, 0.9}, {2048, 1.3}, {4096, 0.7}}) < 4096);
  CHECK_THROWS(serial_bound_from_ratios({}));
}

TEST_CASE("serial bound: a probe whose parallel loop lost at the largest size was disturbed") {
  // Stored on a Milan VM after a probe beside a test run, and a quiet probe of the same machine.
  CHECK(serial_probe_disturbed({{1024, 6064.0}, {2048, 3525.9}, {4096, 1666.7}, {8192, 774.9},
                                {16384, 378.6}, {32768, 140.7}, {65536, 50.7}, {131072, 29.8}}));
  CHECK(!serial_probe_disturbed({{1024, 2.99}, {2048, 1.85}, {4096, 1.23}, {8192, 0.93},
                                 {16384, 0.75}, {32768, 0.58}, {65536, 0.55}, {131072, 0.64}}));
  CHECK(serial_probe_disturbed({{1024, 3.0}, {131072, kSerialProbeDisturbed}}));
  CHECK(!serial_probe_disturbed({{1024, 3.0}, {131072, 1.2}}));
  CHECK(!serial_probe_disturbed({}));
}

TEST_CASE("serial bound: the stored form round-trips and refuses damage") {
  SerialBoundProbe p;
  p.threads = 2;
  p.dtype = Dtype::F64;
  p.ratios = {{1024, 4.0}, {2048, 0.5}};
  p.serial_nnz = serial_bound_from_ratios(p.ratios);
  p.copy = kSerialLoopCopies - 1;
  p.seconds = 0.02;
  const SerialBoundProbe q = SerialBoundProbe::from_json(p.to_json());
  CHECK(q.threads == 2);
  CHECK(q.dtype == Dtype::F64);
  CHECK(q.ratios == p.ratios);
  CHECK(q.serial_nnz == p.serial_nnz);
  CHECK(q.copy == p.copy);
  nlohmann::json old = p.to_json();  // stored before the copies: measured again
  old.erase("copy");
  CHECK_THROWS_AS(SerialBoundProbe::from_json(old), Error);
  nlohmann::json bad = p.to_json();
  bad["serial_nnz"] = 1e300;
  CHECK_THROWS_AS(SerialBoundProbe::from_json(bad), Error);
  bad = p.to_json();
  bad["dtype"] = "f16";
  CHECK_THROWS_AS(SerialBoundProbe::from_json(bad), Error);
  bad = p.to_json();
  bad["ratios"] = {{1024}};
  CHECK_THROWS_AS(SerialBoundProbe::from_json(bad), Error);
  CHECK_THROWS_AS(SerialBoundProbe::from_json(nlohmann::json::array()), Error);
}

TEST_CASE("serial bound: a stored machine fact is read back only whole, of its format and machine") {
  const std::string dir = waco::test::scratch_dir("serial_bound_store");
  const std::string path = dir + "/fact.json";
  const nlohmann::json key = cache_probe_key(), result = {{"2/f32", 1}};
  CHECK(!load_machine_fact(path, 1, key));  // absent
  REQUIRE(store_machine_fact(path, 1, key, result));
  CHECK(load_machine_fact(path, 1, key) == result);
  CHECK(!load_machine_fact(path, 2, key));                          // another format
  CHECK(!load_machine_fact(path, 1, nlohmann::json{{"cpu", "x"}}));  // another machine
  { std::ofstream(path, std::ios::trunc) << "{\"format\": 1, \"key\""; }  // truncated
  CHECK(!load_machine_fact(path, 1, key));
  CHECK(!store_machine_fact(dir + "/fact.json/not-a-dir/x.json", 1, key, result));  // unwritable
}

TEST_CASE("serial bound: this machine's, probed once, stored, and the rule follows it") {
  if (const char* env = std::getenv("WACO_CSR_SERIAL_NNZ"); env != nullptr && *env != '\0') {
    WARN("WACO_CSR_SERIAL_NNZ is set: the probe is not used");
    return;
  }
  const SerialBoundProbe p = run_serial_bound_probe(2, Dtype::F32, 5);
  CHECK(p.ratios.size() == 8);  // 1024 .. 131072
  CHECK(p.ratios.front().first == kSerialProbeMinNnz);
  CHECK(p.ratios.back().first == kSerialProbeMaxNnz);
  CHECK(p.serial_nnz == serial_bound_from_ratios(p.ratios));
  for (const Dtype d : {Dtype::F32, Dtype::F64}) {
    const std::int64_t bound = csr_spmv_serial_nnz(2, d);
    CHECK(bound >= kSerialProbeMinNnz / 2);
    CHECK(bound <= kSerialProbeMaxNnz);
    CHECK(csr_spmv_serial_nnz(2, d) == bound);  // kept in the process
    CHECK(csr_spmv_serial(bound, 2, d));
    CHECK(!csr_spmv_serial(bound + 1, 2, d));
  }
  // Stored for this machine (XDG_CACHE_HOME is the tests' own).
  const std::optional<nlohmann::json> stored = load_machine_fact(serial_bound_path(), 2, cache_probe_key());
  REQUIRE(stored);
  const SerialBoundProbe s = SerialBoundProbe::from_json(stored->at("2/f32"));
  CHECK(s.serial_nnz == csr_spmv_serial_nnz(2, Dtype::F32));
  CHECK(s.copy == csr_spmv_serial_copy(Dtype::F32));  // measured with the copy that runs
  // Outside the probe's range and on one thread the rule needs no bound.
  CHECK(csr_spmv_serial(kSerialProbeMinNnz / 2, 7, Dtype::F32));
  CHECK(!csr_spmv_serial(kSerialProbeMaxNnz + 1, 7, Dtype::F32));
  CHECK(csr_spmv_serial(1 << 30, 1, Dtype::F32));
}

TEST_CASE("serial bound: a disturbed stored probe is measured again and replaced") {
  if (const char* env = std::getenv("WACO_CSR_SERIAL_NNZ"); env != nullptr && *env != '\0') {
    WARN("WACO_CSR_SERIAL_NNZ is set: the probe is not used");
    return;
  }
  // A store of its own (this test case is a process of its own): the other tests' is left alone.
  const std::string dir = waco::test::scratch_dir("serial_bound_disturbed");
  REQUIRE(setenv("XDG_CACHE_HOME", dir.c_str(), 1) == 0);
  SerialBoundProbe bad;
  bad.threads = 2;
  bad.dtype = Dtype::F32;
  bad.ratios = {{1024, 6064.0}, {8192, 774.9}, {131072, 29.8}};
  bad.serial_nnz = serial_bound_from_ratios(bad.ratios);
  bad.copy = csr_spmv_serial_copy(Dtype::F32);
  REQUIRE(bad.serial_nnz == kSerialProbeMaxNnz);
  REQUIRE(store_machine_fact(serial_bound_path(), 2, cache_probe_key(), {{"2/f32", bad.to_json()}}));
  const std::int64_t bound = csr_spmv_serial_nnz(2, Dtype::F32);
  const std::optional<nlohmann::json> stored = load_machine_fact(serial_bound_path(), 2, cache_probe_key());
  REQUIRE(stored);
  const SerialBoundProbe again = SerialBoundProbe::from_json(stored->at("2/f32"));
  CHECK(again.ratios.size() == 8);  // a new probe's sizes, not the three stored
  CHECK(again.serial_nnz == bound);
}

TEST_CASE("serial bound: the rule decided on a matrix, and its product written meanwhile") {
  if (const char* env = std::getenv("WACO_CSR_SERIAL_NNZ"); env != nullptr && *env != '\0') {
    WARN("WACO_CSR_SERIAL_NNZ is set: the rule is the variable's (the case below)");
    return;
  }
  // Outside the probe's range and on one thread, the machine's rule, nothing timed.
  const TestCsr<float> tiny(kSerialProbeMinNnz / 2), big(kSerialProbeMaxNnz + 1);
  CHECK(tiny.serial_for(2));
  CHECK(tiny.serial_for(1));
  CHECK(!big.serial_for(2));
  CHECK(!big.serial_for(3));
  CHECK(big.serial_for(1));
  // Inside it, timed on the matrix: either loop may win here (machine, load), and y = A x after.
  const TestCsr<float> mid32(6000);
  const TestCsr<double> mid64(20000);
  (void)mid32.serial_for(2, true);
  (void)mid64.serial_for(2, true);
  CHECK(mid64.serial_for(1));
}

// Run by the next case in a process of its own (the variable is read once a process), with
// WACO_CSR_SERIAL_NNZ set and WACO_TEST_EXPECT saying what the rule must do with it.
TEST_CASE("serial bound: the rule under WACO_CSR_SERIAL_NNZ", "[.env]") {
  const std::string expect = std::getenv("WACO_TEST_EXPECT") ? std::getenv("WACO_TEST_EXPECT") : "";
  if (expect == "error") {
    CHECK_THROWS_WITH(csr_spmv_serial(5000, 2, Dtype::F32), Catch::Contains("WACO_CSR_SERIAL_NNZ"));
    return;
  }
  const std::int64_t n = std::stoll(expect);
  for (const Dtype d : {Dtype::F32, Dtype::F64}) {
    CHECK(csr_spmv_serial_nnz(2, d) == n);
    CHECK(csr_spmv_serial_nnz(64, d) == n);
    CHECK(csr_spmv_serial(n, 2, d));
    CHECK(!csr_spmv_serial(n + 1, 3, d));
    CHECK(csr_spmv_serial(n + 1, 1, d));  // one thread: serial whatever the bound
  }
  // Decided on a matrix, the variable's rule too (nothing timed), inside the probe's range and
  // outside it.
  for (const std::int64_t nnz : {std::int64_t{400}, std::int64_t{5000}, std::int64_t{120000}}) {
    INFO(nnz << " nonzeros");
    CHECK(TestCsr<float>(nnz).serial_for(2) == (nnz <= n));
    CHECK(TestCsr<double>(nnz).serial_for(4) == (nnz <= n));
  }
}

TEST_CASE("serial bound: WACO_CSR_SERIAL_NNZ fixes the rule, and a bad value is a clear error") {
  // The case above, in a fresh process of this test program: no probe runs there (a fixed
  // bound needs none), and the variable is read there for the first time.
  const auto run = [](const char* value, const char* expect) {
    return run_case_with("WACO_CSR_SERIAL_NNZ", value, expect, "serial bound: the rule under WACO_CSR_SERIAL_NNZ");
  };
  CHECK(run("100000", "100000") == 0);
  CHECK(run("0", "0") == 0);
  CHECK(run("12k", "error") == 0);
  CHECK(run("-1", "error") == 0);
  CHECK(run("5000", "6000") != 0);  // the child's checks can fail
}

TEST_CASE("serial loop: every copy computes what the loop computes (empty and long rows too)") {
  // The copies differ only in the no-ops before their loop (baseline_csr.cpp): the same sums in
  // the same order, bit for bit, whichever runs.
  const auto check = [](auto zero, std::vector<index_t> rowptr) {
    using V = decltype(zero);
    const auto rows = static_cast<index_t>(rowptr.size() - 1);
    std::vector<index_t> colidx;
    std::vector<V> val;
    for (index_t i = 0; i < rows; ++i)
      for (index_t p = rowptr[static_cast<std::size_t>(i)]; p < rowptr[static_cast<std::size_t>(i) + 1]; ++p) {
        colidx.push_back(static_cast<index_t>((i * 5 + p * 3) % rows));
        val.push_back(V(0.25) * V(1 + p % 7));  // dyadic: every sum exact, however contracted
      }
    std::vector<V> x(static_cast<std::size_t>(rows));
    for (index_t j = 0; j < rows; ++j) x[static_cast<std::size_t>(j)] = V(0.5) + V(j % 9) / V(8);
    const CsrView<V> a{rows, rowptr.data(), colidx.data(), val.data()};
    std::vector<V> expected(x.size());
    for (index_t i = 0; i < rows; ++i) {
      V s = 0;
      for (index_t p = rowptr[static_cast<std::size_t>(i)]; p < rowptr[static_cast<std::size_t>(i) + 1]; ++p)
        s += val[static_cast<std::size_t>(p)] * x[static_cast<std::size_t>(colidx[static_cast<std::size_t>(p)])];
      expected[static_cast<std::size_t>(i)] = s;
    }
    for (const auto& copy : detail::csr_spmv_serial_copies<V>()) {
      std::vector<V> y(x.size(), V(-7));
      copy(a, x.data(), y.data());
      CHECK(y == expected);
    }
    std::vector<V> y(x.size(), V(-7));
    detail::csr_spmv_serial_rows(a, x.data(), y.data());  // the chosen one
    CHECK(y == expected);
  };
  // Empty rows (first, middle, last), a dense row, rows of one.
  std::vector<index_t> rp{0, 0, 1, 1, 41, 42, 42};
  check(float{}, rp);
  check(double{}, rp);
  check(float{}, {0, 0});  // one empty row
  std::vector<index_t> random{0};
  for (int i = 0; i < 300; ++i) random.push_back(random.back() + (i * 7919) % 16);
  check(float{}, random);
  check(double{}, random);
}

TEST_CASE("serial loop: the copy is the fastest by the margin, else copy 0") {
  CHECK(serial_loop_copy_from({1.0, 0.99, 0.97, 1.02}) == 0);  // within the margin: copy 0
  CHECK(serial_loop_copy_from({1.0, 0.66, 0.62, 0.64}) == 2);
  CHECK(serial_loop_copy_from({1.0, 1.2, 1.3, 0.9}) == 3);
  CHECK(serial_loop_copy_from({1.0}) == 0);
  CHECK(serial_loop_copy_from({}) == 0);
  SerialLoopProbe p;
  p.dtype = Dtype::F64;
  p.relative = {1.0, 0.7, 0.6, 0.65};
  p.copy = serial_loop_copy_from(p.relative);
  const SerialLoopProbe q = SerialLoopProbe::from_json(p.to_json());
  CHECK(q.dtype == Dtype::F64);
  CHECK(q.relative == p.relative);
  CHECK(q.copy == 2);
  nlohmann::json bad = p.to_json();
  bad["copy"] = kSerialLoopCopies;
  CHECK_THROWS_AS(SerialLoopProbe::from_json(bad), Error);
  bad = p.to_json();
  bad["relative"] = {1.0, 0.5};  // not one a copy
  CHECK_THROWS_AS(SerialLoopProbe::from_json(bad), Error);
  bad = p.to_json();
  bad["relative"] = {1.0, 0.5, -1.0, 0.5};
  CHECK_THROWS_AS(SerialLoopProbe::from_json(bad), Error);
  CHECK_THROWS_AS(SerialLoopProbe::from_json(nlohmann::json::array()), Error);
}

TEST_CASE("serial loop: this machine's copy, probed once and stored") {
  if (const char* env = std::getenv("WACO_CSR_SERIAL_COPY"); env != nullptr && *env != '\0') {
    WARN("WACO_CSR_SERIAL_COPY is set: the probe is not used");
    return;
  }
  const SerialLoopProbe p = run_serial_loop_probe(Dtype::F32, 3);
  REQUIRE(p.relative.size() == static_cast<std::size_t>(kSerialLoopCopies));
  CHECK(p.relative[0] == 1.0);
  CHECK(p.copy == serial_loop_copy_from(p.relative));
  for (const Dtype d : {Dtype::F32, Dtype::F64}) {
    const int copy = csr_spmv_serial_copy(d);
    CHECK(copy >= 0);
    CHECK(copy < kSerialLoopCopies);
    CHECK(csr_spmv_serial_copy(d) == copy);  // kept in the process
  }
  const std::optional<nlohmann::json> stored = load_machine_fact(serial_loop_path(), 1, cache_probe_key());
  REQUIRE(stored);
  CHECK(SerialLoopProbe::from_json(stored->at("f64")).copy == csr_spmv_serial_copy(Dtype::F64));
}

// Run by the next case in a process of its own, with WACO_CSR_SERIAL_COPY set and
// WACO_TEST_EXPECT the copy that must run (or "error").
TEST_CASE("serial loop: the copy under WACO_CSR_SERIAL_COPY", "[.env]") {
  const std::string expect = std::getenv("WACO_TEST_EXPECT") ? std::getenv("WACO_TEST_EXPECT") : "";
  if (expect == "error") {
    CHECK_THROWS_WITH(csr_spmv_serial_copy(Dtype::F32), Catch::Contains("WACO_CSR_SERIAL_COPY"));
    return;
  }
  for (const Dtype d : {Dtype::F32, Dtype::F64}) CHECK(csr_spmv_serial_copy(d) == std::stoi(expect));
}

TEST_CASE("serial loop: WACO_CSR_SERIAL_COPY fixes the copy, and a bad value is a clear error") {
  const auto run = [](const char* value, const char* expect) {
    return run_case_with("WACO_CSR_SERIAL_COPY", value, expect, "serial loop: the copy under WACO_CSR_SERIAL_COPY");
  };
  CHECK(run("0", "0") == 0);
  CHECK(run("3", "3") == 0);
  CHECK(run("4", "error") == 0);
  CHECK(run("one", "error") == 0);
  CHECK(run("1", "2") != 0);  // the child's checks can fail
}
