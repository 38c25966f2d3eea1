// Unit "cli": the waco-hybrid binary end to end: exit codes (0 ok, 1 failure, 2 usage), error
// lines, JSON output, --output / --inputs round trips, bench ratios, generate.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli_runner.hpp"
#include "support/test_paths.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/reference.hpp"

using namespace waco::kernels;
namespace fs = std::filesystem;

namespace {

using Result = waco::test::CliResult;

Result cli(const std::string& args) { return waco::test::run_cli(args); }

std::string example() { return waco::test::examples_dir() + "/bcsstk13.mtx.gz"; }

}  // namespace

TEST_CASE("cli: help, version and usage errors") {
  Result r = cli("--help");
  CHECK(r.status == 0);
  CHECK(r.out.find("info") != std::string::npos);
  CHECK(r.out.find("bench") != std::string::npos);
  r = cli("--version");
  CHECK(r.status == 0);
  CHECK(r.out.find("waco-hybrid") != std::string::npos);
  for (const char* sub : {"info", "run", "bench", "generate"}) {
    r = cli(std::string(sub) + " --help");
    INFO(sub);
    CHECK(r.status == 0);
    CHECK(r.out.find("Example") != std::string::npos);
  }
  CHECK(cli("").status == 2);
  CHECK(cli("no-such-command").status == 2);
  CHECK(cli("info --no-such-option " + example()).status == 2);
  CHECK(cli("run --kernel spmx " + example()).status == 2);
  CHECK(cli("run --kernel spmv --threads -1 " + example()).status == 2);
}

TEST_CASE("cli: info reports the example matrix") {
  const Result r = cli("info --json " + example());
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["rows"] == 2003);
  CHECK(j["cols"] == 2003);
  CHECK(j["nnz"] == 83883);
  CHECK(j["source"]["stored_entries"] == 42943);
  CHECK(j["source"]["symmetry"] == "symmetric");
  CHECK(j["nnz_per_row"]["max"] == 95);
  CHECK(j["fingerprint"].get<std::string>().size() == 16);
  CHECK(j.contains("context"));
  CHECK(j["context"].contains("git_revision"));
  const Result text = cli("info " + example());
  CHECK(text.status == 0);
  CHECK(text.out.find("83883") != std::string::npos);
}

TEST_CASE("cli: bad input is one error line naming the file, exit 1") {
  const std::string dir = waco::test::scratch_dir("cli-bad");
  {
    std::ofstream(dir + "/bad.mtx") << "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n4 1 2.0\n";
  }
  for (const std::string& args :
       {"info " + dir + "/missing.mtx", "info " + dir + "/bad.mtx", "info " + dir,
        "run --kernel spmv " + dir + "/bad.mtx",
        "run --kernel mttkrp " + example(),
        "run --kernel spmv --output /nonexistent-dir/y.mtx " + example()}) {
    INFO(args);
    const Result r = cli(args);
    CHECK(r.status == 1);
    CHECK(r.err.rfind("error: ", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
  const Result r = cli("info " + dir + "/bad.mtx");
  CHECK(r.err.find("bad.mtx:4") != std::string::npos);  // file and line
}

TEST_CASE("cli: run verifies and reports JSON for every kernel") {
  for (const char* k : {"spmv", "spmm", "sddmm"}) {
    INFO(k);
    const Result r = cli(std::string("run --json --check --repeat 3 --dense 16 --kernel ") + k + " " + example());
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["verified"] == true);
    CHECK(j["max_rel_error"].get<double>() <= j["tolerance"].get<double>());
    CHECK(j["times_s"].size() == 3);
    CHECK(j["min_s"].get<double>() <= j["median_s"].get<double>());
    CHECK(j["median_s"].get<double>() <= j["max_s"].get<double>());
    CHECK(j["gflops"].get<double>() > 0);
    CHECK(j["context"]["counters"].is_string());
  }
  const std::string dir = waco::test::scratch_dir("cli-mttkrp");
  REQUIRE(cli("generate --kind tensor --dims 30,20,10 --nnz 500 --seed 3 -o " + dir + "/t.tns").status == 0);
  const Result r = cli("run --json --check --repeat 2 --kernel mttkrp " + dir + "/t.tns");
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["impl"] == "csf");
}

TEST_CASE("cli: --inputs and --output round-trip through Matrix Market") {
  const std::string dir = waco::test::scratch_dir("cli-io");
  const LoadedMatrix a = read_matrix_market(example());
  const DenseOperands ops = make_dense_operands(KernelKind::SDDMM, &a.matrix, nullptr, 8, 99);
  write_matrix_market_dense(dir + "/B.mtx", ops.B);
  write_matrix_market_dense(dir + "/C.mtx", ops.C);
  const Result r = cli("run --kernel sddmm --dense 8 --repeat 1 --inputs " + dir + " --output " +
                       dir + "/D.mtx " + example());
  REQUIRE(r.status == 0);
  const LoadedMatrix d = read_matrix_market(dir + "/D.mtx");
  REQUIRE(d.matrix.nnz() == a.matrix.nnz());
  CHECK(d.matrix.row == a.matrix.row);
  const Problem p = make_problem(KernelKind::SDDMM, &a.matrix, nullptr, ops);
  const Verification v = verify(d.matrix.val.data(), d.matrix.nnz(), compute_reference(p));
  INFO(v.message);
  CHECK(v.ok);
  // a missing operand file is named
  fs::remove(dir + "/C.mtx");
  const Result missing = cli("run --kernel sddmm --dense 8 --inputs " + dir + " " + example());
  CHECK(missing.status == 1);
  CHECK(missing.err.find("C.mtx") != std::string::npos);
}

TEST_CASE("cli: bench runs implementations side by side with ratios to the first") {
  const Result r = cli("bench --json --repeat 3 --warmup 1 --kernel spmv --impl csr,eigen " + example());
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["results"].size() == 2);
  CHECK(j["results"][0]["ratio_to_first"].get<double>() == Approx(1.0));
  CHECK(j["results"][1]["ratio_to_first"].get<double>() > 0.0);
  CHECK(j["results"][1]["verified"] == true);
  CHECK(j["settle"] == 2);  // kernels::kDefaultSettleRuns, as tune's side-by-side runs
  CHECK(j["settle_enough_us"] == Approx(10000.0));  // kernels::kSettleEnoughSeconds
  // Disturbed runs are counted per row and judged for the whole run (ablate reads them).
  CHECK(j["retake_disturbed"] == 0);
  CHECK(j.contains("disturbed_warning"));
  CHECK(j["results"][0]["times_s"].size() == 3);
  CHECK(j["results"][0]["retaken"] == 0);
  CHECK(j["results"][0]["disturbed_kept"].get<int>() >= 0);
  CHECK(j["results"][0]["involuntary_switches"].get<int>() >= 0);
  const Result retakes = cli("bench --json --repeat 3 --warmup 1 --retake-disturbed 4 --kernel spmv "
                             "--impl csr " + example());
  REQUIRE(retakes.status == 0);
  const auto jr = nlohmann::json::parse(retakes.out);
  CHECK(jr["retake_disturbed"] == 4);
  CHECK(jr["results"][0]["retaken"].get<int>() <= 4);
  CHECK(jr["results"][0]["times_s"].size() == 3);  // a retaken run replaces, never adds, a round
  const Result cold = cli("bench --json --repeat 2 --warmup 0 --settle 0 --kernel spmv --impl csr " + example());
  REQUIRE(cold.status == 0);
  CHECK(nlohmann::json::parse(cold.out)["settle"] == 0);
  // A timed run lasts at least --min-run-us (default 50, kernels::kDefaultMinRunSeconds): a
  // shorter kernel is called several times in it; 0 times single calls.
  CHECK(j["min_run_us"].get<double>() == Approx(50.0));
  // How far apart the CPUs were, before and after the timings (null on one thread or CPU).
  for (const char* when : {"before", "after"}) {
    const nlohmann::json& ns = j.at("core_round_trip_ns").at(when);
    CHECK((ns.is_null() || ns.get<double>() > 0.0));
  }
  CHECK(j["results"][0]["calls_per_run"].get<int>() >= 1);
  const Result single = cli("bench --json --repeat 2 --min-run-us 0 --kernel spmv --impl csr " + example());
  REQUIRE(single.status == 0);
  CHECK(nlohmann::json::parse(single.out)["results"][0]["calls_per_run"] == 1);
  const Result blocks = cli("bench --json --repeat 2 --min-run-us 20000 --kernel spmv --impl csr " + example());
  REQUIRE(blocks.status == 0);
  CHECK(nlohmann::json::parse(blocks.out)["results"][0]["calls_per_run"].get<int>() > 1);
  CHECK(cli("bench --min-run-us -1 --kernel spmv --impl csr " + example()).status != 0);
  CHECK(cli("bench --settle -1 --kernel spmv --impl csr " + example()).status != 0);
  const Result csv = cli("bench --csv --repeat 2 --kernel spmm --dense 8 --impl csr,eigen " + example());
  CHECK(csv.status == 0);
  CHECK(csv.out.rfind("file,impl,", 0) == 0);
  const Result nope = cli("bench --kernel spmv --impl csr,nope " + example());
  CHECK(nope.status == 1);
  CHECK(nope.err.find("nope") != std::string::npos);
  // The files may follow --impl and --schedule directly: each takes one value per occurrence.
  const Result last = cli("bench --json --repeat 2 --warmup 0 --kernel spmv --schedule csr "
                          "--impl csr,eigen " + example());
  REQUIRE(last.status == 0);
  CHECK(nlohmann::json::parse(last.out)["results"].size() == 3);
  // --layouts: a small problem's implementations each in several layouts (bcsstk13's SpMV: 0.7
  // MB of CSR and output), a large one's in one (its SpMM with 64 columns: 1.2 MB).
  const Result laid = cli("bench --json --repeat 4 --layouts 3 --kernel spmv --schedule csr "
                          "--impl csr " + example());
  INFO(laid.err);
  REQUIRE(laid.status == 0);
  const auto lj = nlohmann::json::parse(laid.out);
  CHECK(lj.at("layouts") == 3);
  for (const auto& row : lj.at("results")) {
    CHECK(row.at("layouts") == 3);
    CHECK(row.at("times_s").size() == 4);
  }
  const Result wide = cli("bench --json --repeat 2 --layouts 3 --kernel spmm --dense 64 --impl csr " +
                          example());
  REQUIRE(wide.status == 0);
  CHECK(nlohmann::json::parse(wide.out)["results"][0]["layouts"] == 1);
  CHECK(cli("bench --layouts 0 --kernel spmv --impl csr " + example()).status != 0);
}

TEST_CASE("cli: info --peaks and bench --roofline report the machine's roofline and fractions of it") {
  const Result peaks = cli("info --peaks --threads 1 --json");
  INFO(peaks.err);
  REQUIRE(peaks.status == 0);
  const auto p = nlohmann::json::parse(peaks.out);
  CHECK(p.at("threads") == 1);
  CHECK(p.at("fp32_gflops").get<double>() > 1.0);     // any CPU of this century
  CHECK(p.at("fp64_gflops").get<double>() > 0.5);
  CHECK(p.at("isa").is_string());
  const Result sse = cli("info --peaks --threads 1 --isa sse2 --json");
  REQUIRE(sse.status == 0);
  CHECK(nlohmann::json::parse(sse.out).at("vector_bits") == 128);
  CHECK(cli("info --peaks --isa avx3").status == 2);
  CHECK(cli("info --isa sse2 " + example()).status == 2);  // --isa needs --peaks
  CHECK(p.at("bandwidth_gbs").get<double>() > 0.5);
  CHECK(cli("info --peaks --caches").status == 2);    // one thing at a time
  const Result b = cli("bench --kernel spmv --impl csr --roofline --repeat 3 --threads 1 --json " + example());
  INFO(b.err);
  REQUIRE(b.status == 0);
  const auto j = nlohmann::json::parse(b.out);
  const double peak = j.at("roofline").at("fp32_gflops");
  const auto& row = j.at("results")[0];
  CHECK(row.at("fraction_of_fp32_peak").get<double>() == Approx(row.at("gflops").get<double>() / peak));
  CHECK(row.at("fraction_of_bandwidth").get<double>() > 0.0);
  CHECK(row.at("fraction_of_bandwidth").get<double>() < 10.0);  // a cached working set can exceed 1
  const Result text = cli("bench --kernel spmv --impl csr --roofline --repeat 3 --threads 1 " + example());
  REQUIRE(text.status == 0);
  CHECK(text.out.find("%peak") != std::string::npos);
  const Result f64 = cli("bench --kernel spmv --impl csr --roofline --repeat 3 --threads 1 --dtype f64 --json " +
                         example());
  INFO(f64.err);
  REQUIRE(f64.status == 0);
  const auto j64 = nlohmann::json::parse(f64.out);
  const auto& row64 = j64.at("results")[0];
  CHECK(row64.at("fraction_of_fp64_peak").get<double>() ==
        Approx(row64.at("gflops").get<double>() / j64.at("roofline").at("fp64_gflops").get<double>()));
  CHECK(cli("bench --kernel spmv --impl csr --repeat 3 --json " + example()).out.find("\"roofline\": null") !=
        std::string::npos);
}

TEST_CASE("cli: generate writes every kind, readable by info") {
  const std::string dir = waco::test::scratch_dir("cli-gen");
  for (const std::string& args :
       {std::string("--kind uniform --rows 300 --cols 200 --nnz 2000"),
        std::string("--kind banded --rows 300 --bandwidth 3"),
        std::string("--kind blocks --rows 256 --block 4 --blocks 50 --fill 0.5"),
        std::string("--kind stencil2d --nx 20 --ny 15"), std::string("--kind stencil3d --nx 6 --ny 5 --nz 4"),
        std::string("--kind rmat --scale 8 --edge-factor 4"), std::string("--kind powerlaw --rows 500"),
        std::string("--kind smallworld --rows 400 --neighbors 4")}) {
    INFO(args);
    const Result g = cli("generate " + args + " --seed 5 -o " + dir + "/m.mtx");
    REQUIRE(g.status == 0);
    const Result i = cli("info --json " + dir + "/m.mtx");
    REQUIRE(i.status == 0);
    CHECK(nlohmann::json::parse(i.out)["nnz"].get<long>() > 0);
  }
  CHECK(cli("generate --kind nope -o " + dir + "/x.mtx").status == 1);
  CHECK(cli("generate --list").status == 0);
}

TEST_CASE("cli: signature and tile report the model, and tile --exhaustive re-times the best points") {
  const Result sig = cli("signature --json " + example());
  REQUIRE(sig.status == 0);
  const auto s = nlohmann::json::parse(sig.out);
  CHECK(s.at("nnz").get<std::int64_t>() > 0);
  REQUIRE(s.at("curves").size() > 1);
  for (const char* key : {"T", "nacs", "nars", "p_col", "p_row"})
    CHECK(s.at("curves")[0].contains(key));
  // T = 1: every nonzero column of a one-row panel is active (aligned count = stored entries).
  CHECK(s.at("curves")[0].at("T") == 1);
  CHECK((s.at("scan") == "entries" || s.at("scan") == "panels"));
  // --cost: the signature and one CSR SpMM with J = 128, timed side by side.
  const Result cost = cli("signature --cost --repeat 3 --threads 1 --json " + example());
  REQUIRE(cost.status == 0);
  const auto c = nlohmann::json::parse(cost.out).at("cost");
  CHECK(c.at("repeats") == 3);
  const double sig_s = c.at("signature_median_s"), spmm_s = c.at("csr_spmm_j128_median_s");
  REQUIRE(spmm_s > 0.0);
  CHECK(sig_s > 0.0);
  CHECK(c.at("ratio").get<double>() == Approx(sig_s / spmm_s));

  const Result tile = cli("tile --kernel spmm --dense 32 --threads 1 --exhaustive --min-ti 256 "
                          "--repeat 2 --confirm 3 --json " + example());
  INFO(tile.err);
  REQUIRE(tile.status == 0);
  const auto t = nlohmann::json::parse(tile.out);
  const auto& ex = t.at("exhaustive");
  const std::size_t points = ex.at("grid_T_i").size() * ex.at("grid_T_k").size();
  CHECK(ex.at("points").size() == points);
  CHECK(ex.at("grid_T_k").back() == 32);
  // The model's point is in the grid and was re-timed with the 3 fastest others (or fewer,
  // when it is one of them), interleaved: the ratio is model / best of those timings.
  const auto& conf = ex.at("confirmation").at("candidates");
  REQUIRE(conf.size() >= 3);
  REQUIRE(conf.size() <= 4);
  CHECK(conf[0].at("model") == true);
  double best = conf[0].at("median_s").get<double>();
  for (const auto& c : conf) best = std::min(best, c.at("median_s").get<double>());
  CHECK(ex.at("model_to_best_time_ratio").get<double>() ==
        Approx(conf[0].at("median_s").get<double>() / best));
  CHECK(ex.at("model_to_best_time_ratio").get<double>() >= 1.0);
  CHECK(ex.at("model_rank").get<int>() >= 1);
  CHECK(ex.at("model_rank").get<std::size_t>() <= points);
  CHECK(ex.at("confirmation").at("rounds") == 2);

  // Bad input: SpMV is not a tiled kernel here.
  CHECK(cli("tile --kernel spmv " + example()).status == 2);
}

TEST_CASE("cli: emit --json names the register block and the compile-time split sizes") {
  Result r = cli("emit --kernel spmm --schedule \"split=j:32 order=i,j1,k,j0 format=UC\" --json");
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["register_block"]["var"] == "j");
  CHECK(j["register_block"]["size"] == 32);
  CHECK(j["constant_splits"]["j"] == 32);
  CHECK(j["source"].get<std::string>().find("blk_vec") != std::string::npos);
  r = cli("emit --kernel spmm --schedule csr --json");
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["register_block"].is_null());
}

namespace {

/// One gzip member (a complete gzip stream) of `text`.
std::string gzip_member(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

/// A gzip bomb: `header` as one member, then `members` members of 16 MiB of `line` repeated
/// (a gzip reader reads concatenated members as one stream). Returns the uncompressed bytes.
std::int64_t write_gzip_bomb(const std::string& path, const std::string& header,
                             const std::string& line, int members) {
  std::string chunk;
  chunk.reserve(std::size_t{16} << 20);
  while (chunk.size() + line.size() <= (std::size_t{16} << 20)) chunk += line;
  const std::string member = gzip_member(chunk);
  std::ofstream f(path, std::ios::binary);
  f << gzip_member(header);
  for (int k = 0; k < members; ++k) f.write(member.data(), static_cast<std::streamsize>(member.size()));
  REQUIRE(f.good());
  return static_cast<std::int64_t>(header.size()) +
         static_cast<std::int64_t>(chunk.size()) * members;
}

struct Limited {
  int status = -1;        ///< exit status, -1 when killed by a signal
  std::string err;        ///< stderr
  long peak_rss_kib = 0;  ///< the process's peak resident memory (wait4's ru_maxrss)
  double seconds = 0.0;
};

/// Runs `waco-hybrid args...` with its address space limited to `address_space` bytes (so that
/// an allocation of what a file declares fails instead of succeeding lazily), WACO_MAX_INPUT_MEMORY
/// set to `max_input_memory` (empty: unset), stdout discarded; its peak RSS from wait4.
Limited run_limited(const std::vector<std::string>& args, const std::string& max_input_memory,
                    std::int64_t address_space, const std::string& err_path) {
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const rlimit rl{static_cast<rlim_t>(address_space), static_cast<rlim_t>(address_space)};
    ::setrlimit(RLIMIT_AS, &rl);
    if (max_input_memory.empty())
      ::unsetenv("WACO_MAX_INPUT_MEMORY");
    else
      ::setenv("WACO_MAX_INPUT_MEMORY", max_input_memory.c_str(), 1);
    const int out = ::open("/dev/null", O_WRONLY);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    const std::string bin = waco::test::cli_binary();
    std::vector<char*> argv{const_cast<char*>(bin.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  Limited r;
  int st = 0;
  rusage ru{};
  REQUIRE(::wait4(pid, &st, 0, &ru) == pid);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.peak_rss_kib = ru.ru_maxrss;
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  return r;
}

}  // namespace

TEST_CASE("cli: inputs that declare or expand to more than memory holds stop at a stated limit, in bounded memory") {
  // Issue 39's resource limits, through `info` as a user meets them: each file is refused or
  // stopped with one error line that states the limit (and, for the memory limit, how to raise
  // it), or read, and the process never holds more than 256 MiB, with its address space limited
  // to 4 GiB (an allocation of what a file declares would fail there: "out of memory").
  const std::string dir = waco::test::scratch_dir("cli-limits");
  const std::string err = dir + "/err.txt";
  constexpr std::int64_t kAddressSpace = std::int64_t{4} << 30;
  constexpr long kPeakKib = 256 * 1024;
  const auto write_gz = [](const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << gzip_member(text);
  };
  struct Case {
    std::string name, file, max_input_memory;
    std::vector<std::string> expect;  ///< fragments of the error (empty: read, exit 0)
    std::vector<std::string> or_expect = {};  ///< another acceptable error (machine-dependent limit)
  };
  std::vector<Case> cases;
  const std::string tera = "%%MatrixMarket matrix coordinate real general\n1000000 1000000 1000000000000\n1 1 1\n";
  std::ofstream(dir + "/tera.mtx") << tera;
  write_gz(dir + "/tera.mtx.gz", tera);
  for (const char* f : {"tera.mtx", "tera.mtx.gz"})
    cases.push_back({std::string("a header declaring 10^12 entries: ") + f, dir + "/" + f, "",
                     {":2: declares 1000000000000 entries; more than 2147483647 are not supported"}});
  const std::string promise = "%%MatrixMarket matrix coordinate real general\n1000 1000 2000000000\n1 1 1\n2 2 2\n";
  std::ofstream(dir + "/promise.mtx") << promise;
  cases.push_back({"a size line promising 2*10^9 entries in a plain file of 4 lines", dir + "/promise.mtx", "",
                   {":2: the size line declares 2000000000 entries, but the file has", "room for at most"}});
  // gzip hides the size: 5*10^8 entries (18 GiB by the estimate) are either refused by the
  // memory limit or read until the stream ends, never reserved.
  write_gz(dir + "/promise.mtx.gz",
           "%%MatrixMarket matrix coordinate real general\n1000000 1000000 500000000\n1 1 1\n2 2 2\n");
  cases.push_back({"a size line promising 5*10^8 entries in a gzip file of 4 lines", dir + "/promise.mtx.gz", "",
                   {":4: the file ends after 2 of the 500000000 entries"},
                   {":2: ", "more than the input memory limit", "set WACO_MAX_INPUT_MEMORY"}});
  // 20 GiB of FROSTT entries in about 20 MB: no header, so the limit is checked as they arrive.
  const std::int64_t tns_bytes = write_gzip_bomb(dir + "/bomb.tns.gz", "1 2 3 1.5\n", "1 2 3 1.5\n", 1280);
  CHECK(tns_bytes > std::int64_t{20000000000});  // 20 GB
  CHECK(fs::file_size(dir + "/bomb.tns.gz") < (std::uint64_t{64} << 20));
  cases.push_back({"a gzip bomb of 20 GiB of FROSTT entries", dir + "/bomb.tns.gz", "64M",
                   {"a tensor of order 3 with more than 1198372 entries needs about 64 MiB of memory, more "
                    "than the input memory limit of 64 MiB (WACO_MAX_INPUT_MEMORY)",
                    "set WACO_MAX_INPUT_MEMORY"}});
  // 20 GiB of Matrix Market entries after a size line declaring 10^6: stops at the one after them.
  write_gzip_bomb(dir + "/bomb.mtx.gz", "%%MatrixMarket matrix coordinate real general\n1000 1000 1000000\n",
                  "1 1 1\n", 1280);
  cases.push_back({"a gzip bomb of 20 GiB of entries after a size line of 10^6", dir + "/bomb.mtx.gz", "",
                   {":1000003: more entries than the 1000000 declared on the size line"}});
  // A dense 40000 x 40000 array of zeros (3.2 GB of text): refused at its size line.
  write_gzip_bomb(dir + "/bomb-array.mtx.gz", "%%MatrixMarket matrix array real general\n40000 40000\n", "0\n", 200);
  cases.push_back({"a gzip bomb of a 40000 x 40000 array", dir + "/bomb-array.mtx.gz", "1G",
                   {":2: a 40000 x 40000 array needs about", "more than the input memory limit of 1 GiB "
                    "(WACO_MAX_INPUT_MEMORY)"}});
  // A tensor of 2^40 positions (1024 x 1024 x 2^20) and a matrix of 2^40 (2^20 x 2^20), each of
  // 3 entries: read in memory of their entries, not their positions.
  std::ofstream(dir + "/t40.tns") << "1024 1 1 1.0\n1 1024 1048576 2.0\n3 5 7 3.0\n";
  cases.push_back({"a tensor of 2^40 positions", dir + "/t40.tns", "", {}});
  std::ofstream(dir + "/m40.mtx") << "%%MatrixMarket matrix coordinate real general\n1048576 1048576 3\n"
                                     "1048576 1 1\n1 1048576 2\n7 7 3\n";
  cases.push_back({"a matrix of 2^40 positions", dir + "/m40.mtx", "", {}});
  // Huge dimensions: 8 bytes an index of every mode are 48 GiB.
  std::ofstream(dir + "/huge.tns") << "2147483647 2147483647 2147483647 1.0\n1 1 1 2.0\n";
  cases.push_back({"a tensor of dimensions 2^31 - 1 cubed", dir + "/huge.tns", "4G",
                   {"a 2147483647 x 2147483647 x 2147483647 tensor of 2 entries needs about 48 GiB of memory, "
                    "more than the input memory limit of 4 GiB (WACO_MAX_INPUT_MEMORY)", "set WACO_MAX_INPUT_MEMORY"}});
  if (input_memory_limit() < (std::int64_t{48} << 30))
    cases.push_back({"the same under the memory available now", dir + "/huge.tns", "",
                     {"needs about 48 GiB of memory, more than the input memory limit of",
                      "(the memory available now (MemAvailable))", "set WACO_MAX_INPUT_MEMORY"}});

  for (const Case& c : cases) {
    INFO(c.name);
    const Limited r = run_limited({"info", c.file}, c.max_input_memory, kAddressSpace, err);
    INFO("exit " << r.status << ", peak " << r.peak_rss_kib << " KiB, " << r.seconds << " s: " << r.err);
    CHECK(r.peak_rss_kib < kPeakKib);
    CHECK(r.seconds < 60.0);
    if (c.expect.empty()) {
      CHECK(r.status == 0);
      continue;
    }
    CHECK(r.status == 1);
    CHECK(r.err.rfind("error: " + c.file + ":", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    const auto has_all = [&](const std::vector<std::string>& fragments) {
      if (fragments.empty()) return false;
      for (const std::string& f : fragments)
        if (r.err.find(f) == std::string::npos) return false;
      return true;
    };
    CHECK((has_all(c.expect) || has_all(c.or_expect)));
  }
  for (const char* bomb : {"bomb.tns.gz", "bomb.mtx.gz", "bomb-array.mtx.gz"}) fs::remove(dir + "/" + bomb);
}
