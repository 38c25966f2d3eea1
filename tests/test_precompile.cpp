// Unit "precompile": `waco-hybrid precompile` (kernels compiled ahead of time) end to end, and the
// build's shipped folder found without configuration (issue 35, "no compiler on the hot path").
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli_runner.hpp"
#include "support/test_paths.hpp"

namespace fs = std::filesystem;
using waco::test::run_cli;

namespace {

std::string example() { return waco::test::examples_dir() + "/bcsstk13.mtx.gz"; }

int count_ext(const std::string& dir, const std::string& ext) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ext;
  return n;
}

}  // namespace

TEST_CASE("precompile: a list is compiled once into a folder that run then loads from", "[cli]") {
  const std::string dir = waco::test::scratch_dir("precompile-list");
  const std::string out = dir + "/kernels";
  const std::string list = dir + "/spmv.txt";
  {
    std::ofstream f(list);
    f << "# two schedules, one of them twice\n"
      << "csr\n\n"
      << "split=i:4 order=i1,k,i0 format=UCU parallel=i1 threads=2 chunk=8  # a comment\n"
      << "order=i,k format=UC parallel=i threads=4 chunk=64\n";  // csr's source: run-time sizes
  }
  const auto first = run_cli("precompile --kernel spmv --list " + list + " --dtype f32,f64 --out " +
                             out + " --json -q");
  INFO(first.err);
  REQUIRE(first.status == 0);
  const auto j = nlohmann::json::parse(first.out);
  CHECK(j["schedules"] == 3);
  CHECK(j["kernels"] == 6);  // (two sources and csr's serial one) x two dtypes
  CHECK(j["compiled"] == 6);
  CHECK(count_ext(out, ".so") == 6);

  const auto again = run_cli("precompile --kernel spmv --list " + list + " --dtype f32,f64 --out " +
                             out + " --json -q");
  REQUIRE(again.status == 0);
  const auto j2 = nlohmann::json::parse(again.out);
  CHECK(j2["compiled"] == 0);
  CHECK(j2["cached"] == 6);
  // The folder lists what it holds (an adaptive plan's short list): the three schedules once,
  // each in its text form; another precompile into it adds its own.
  const auto listed = [&] {
    std::ifstream in(out + "/spmv.txt");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') lines.push_back(line);
    return lines;
  };
  CHECK(listed().size() == 3);
  CHECK(listed().at(0).find("format=UC") != std::string::npos);  // csr, written out
  {
    std::ofstream f(dir + "/more.txt");
    f << "order=i,k format=UC parallel=i threads=2 chunk=static\ncsr\n";
  }
  REQUIRE(run_cli("precompile --kernel spmv --list " + dir + "/more.txt --out " + out + " -q").status == 0);
  CHECK(listed().size() == 4);
  CHECK(listed().back() == "order=i,k format=UC parallel=i threads=2 chunk=static");
  CHECK_FALSE(fs::exists(out + "/bundle.so"));

  // --bundle: every kernel of the folder (of both runs) in one library, its keys listed.
  const auto bundled = run_cli("precompile --kernel spmv --list " + dir + "/more.txt --out " + out +
                               " --bundle --json -q");
  INFO(bundled.err);
  REQUIRE(bundled.status == 0);
  const auto jb = nlohmann::json::parse(bundled.out);
  const auto kernels = static_cast<std::size_t>(count_ext(out, ".so") - 1);  // bundle.so aside
  CHECK(kernels == 7);
  CHECK(jb["bundle"]["kernels"] == kernels);
  CHECK(jb["bundle"]["path"] == out + "/bundle.so");
  std::size_t keys = 0;
  {
    std::ifstream in(out + "/bundle.txt");
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') {
        ++keys;
        CHECK(fs::exists(out + "/" + line + ".so"));
      }
  }
  CHECK(keys == kernels);
  const auto no_out = run_cli("precompile --kernel spmv --list " + dir + "/more.txt --bundle");
  CHECK(no_out.status != 0);
  CHECK_THAT(no_out.err, Catch::Contains("--bundle needs --out"));

  // A run in a fresh kernel cache takes the kernel from the folder: nothing compiled, whether
  // csr's chunk=auto runs the parallel or the serial kernel (decided on the matrix, here forced
  // either way by the decision's override).
  const std::string xdg = "XDG_CACHE_HOME=" + dir + "/xdg ";
  for (const char* serial_nnz : {"1", "100000000"}) {
    const auto run = run_cli("run --kernel spmv --schedule csr --repeat 2 --json " + example(),
                             xdg + "WACO_SHIPPED_KERNELS=" + out + " WACO_CSR_SERIAL_NNZ=" + serial_nnz);
    INFO(serial_nnz << ": " << run.err);
    REQUIRE(run.status == 0);
    const auto rj = nlohmann::json::parse(run.out);
    CHECK(rj["generated"]["shipped"] == true);
    CHECK(rj["generated"]["bundled"] == true);
    CHECK(rj["generated"]["compile_s"] == 0.0);
    CHECK((!fs::exists(dir + "/xdg/waco-hybrid/kernels") ||
           count_ext(dir + "/xdg/waco-hybrid/kernels", ".so") == 0));
  }
  // f64 too; a schedule not in the folder is compiled as before.
  const auto f64 = run_cli("run --kernel spmv --schedule csr --dtype f64 --repeat 2 --json " + example(),
                           xdg + "WACO_SHIPPED_KERNELS=" + out);
  REQUIRE(f64.status == 0);
  CHECK(nlohmann::json::parse(f64.out)["generated"]["shipped"] == true);
  CHECK(nlohmann::json::parse(f64.out)["generated"]["bundled"] == true);
  const auto other = run_cli("run --kernel spmv --schedule bcsr4x4 --repeat 2 --json " + example(),
                             xdg + "WACO_SHIPPED_KERNELS=" + out);
  REQUIRE(other.status == 0);
  CHECK(nlohmann::json::parse(other.out)["generated"]["shipped"] == false);
}

TEST_CASE("precompile: bad lists and options are clear errors", "[cli]") {
  const std::string dir = waco::test::scratch_dir("precompile-errors");
  {
    std::ofstream f(dir + "/bad.txt");
    f << "csr\norder=i,q format=UC\n";
  }
  const auto bad = run_cli("precompile --kernel spmv --list " + dir + "/bad.txt --out " + dir + "/k");
  CHECK(bad.status == 1);
  CHECK(bad.err.find("error:") != std::string::npos);
  const auto missing = run_cli("precompile --kernel spmv --list " + dir + "/absent.txt");
  CHECK(missing.status == 1);
  CHECK(missing.err.find("cannot read the schedule list") != std::string::npos);
  const auto neither = run_cli("precompile --kernel spmv");
  CHECK(neither.status == 1);
  CHECK(neither.err.find("either --list FILE or --from-dataset") != std::string::npos);
}

TEST_CASE("precompile: the committed dataset's winners and what share of held-out groups they cover",
          "[cli]") {
  const std::string dir = waco::test::scratch_dir("precompile-dataset");
  const auto r = run_cli("precompile --kernel spmm --from-dataset --top 5 --json --write-list " +
                         dir + "/spmm.txt -q");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["chosen"].size() == 5);
  // Most frequent winners first.
  for (std::size_t i = 1; i < j["chosen"].size(); ++i)
    CHECK(j["chosen"][i]["winners"].get<int>() <= j["chosen"][i - 1]["winners"].get<int>());
  for (const char* split : {"train", "validation", "test", "all"}) {
    INFO(split);
    REQUIRE(j["coverage"].contains(split));
    const double w = j["coverage"][split]["winner_covered"];
    const double n = j["coverage"][split]["near_winner_covered"];
    CHECK(w > 0.0);
    CHECK(w <= n);
    CHECK(n <= 1.0);
  }
  // More templates never cover less.
  const auto r10 = run_cli("precompile --kernel spmm --from-dataset --top 10 --json -q");
  REQUIRE(r10.status == 0);
  CHECK(nlohmann::json::parse(r10.out)["coverage"]["all"]["winner_covered"].get<double>() >=
        j["coverage"]["all"]["winner_covered"].get<double>());
  // The written list is a --list file of the same schedules.
  const auto listed = run_cli("precompile --kernel spmm --list " + dir + "/spmm.txt --json");
  REQUIRE(listed.status == 0);
  CHECK(nlohmann::json::parse(listed.out)["schedules"] == 5);

  // --scheduling-twins 2: the first two templates also with the other loop scheduling, listed
  // after the five (one kernel each: a twin already chosen is not added again).
  const auto t = run_cli("precompile --kernel spmm --from-dataset --top 5 --scheduling-twins 2 "
                         "--json -q --write-list " + dir + "/twins.txt");
  INFO(t.err);
  REQUIRE(t.status == 0);
  const auto tj = nlohmann::json::parse(t.out);
  REQUIRE(tj["scheduling_twins"].size() <= 2);
  CHECK(tj["schedules"] == 5 + tj["scheduling_twins"].size());
  for (std::size_t q = 0; q < tj["scheduling_twins"].size(); ++q) {
    const std::string twin = tj["scheduling_twins"][q];
    bool matched = false;
    for (std::size_t c = 0; c < 2; ++c) {
      const std::string first = tj["chosen"][c]["schedule"];
      const bool first_static = first.find("chunk=static") != std::string::npos;
      const bool twin_static = twin.find("chunk=static") != std::string::npos;
      matched |= first_static != twin_static &&
                 first.substr(0, first.find(" chunk=")) == twin.substr(0, twin.find(" chunk="));
    }
    CHECK(matched);
  }
  const auto twins_listed = run_cli("precompile --kernel spmm --list " + dir + "/twins.txt --json");
  REQUIRE(twins_listed.status == 0);
  CHECK(nlohmann::json::parse(twins_listed.out)["schedules"] == tj["schedules"]);
}

TEST_CASE("precompile: the build's shipped kernels serve the csr schedule without a compiler",
          "[cli]") {
  const std::string shipped = std::string(WACO_BINARY_DIR) + "/share/waco-hybrid/kernels";
  if (!fs::exists(shipped + "/.complete")) {
    WARN("no shipped kernels in the build tree (WACO_PRECOMPILE_KERNELS=OFF): skipped");
    return;
  }
  const std::string dir = waco::test::scratch_dir("precompile-default");
  // WACO_SHIPPED_KERNELS empty: the default folder, found beside the executable.
  const auto run = run_cli("run --kernel spmm --schedule csr --repeat 2 --json " + example(),
                           "XDG_CACHE_HOME=" + dir + "/xdg WACO_SHIPPED_KERNELS=");
  INFO(run.err);
  REQUIRE(run.status == 0);
  CHECK(nlohmann::json::parse(run.out)["generated"]["shipped"] == true);
  CHECK(nlohmann::json::parse(run.out)["generated"]["bundled"] == true);  // the build bundles them
  // SpMV's csr schedule both ways its chunk=auto binds: in parallel and serially.
  for (const char* serial_nnz : {"1", "100000000"}) {
    const auto spmv = run_cli("run --kernel spmv --schedule csr --repeat 2 --json " + example(),
                              "XDG_CACHE_HOME=" + dir + "/xdg WACO_SHIPPED_KERNELS= "
                              "WACO_CSR_SERIAL_NNZ=" + serial_nnz);
    INFO(serial_nnz << ": " << spmv.err);
    REQUIRE(spmv.status == 0);
    CHECK(nlohmann::json::parse(spmv.out)["generated"]["shipped"] == true);
  }
}
