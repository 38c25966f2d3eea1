// Unit "cli": the waco-hybrid binary end to end: exit codes (0 ok, 1 failure, 2 usage), error
// lines, JSON output, --output / --inputs round trips, bench ratios, generate.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

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
