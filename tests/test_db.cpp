// Unit "db": `waco-hybrid db merge` on shard databases made from groups of the committed SDDMM
// dataset: new groups added, identical ones skipped, a group measured differently reported as a
// conflict (the first kept, or the last with --prefer last), merging again adds nothing.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "waco/kernels/recipe.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/learned/shipped.hpp"
#include "dataset_files.hpp"
#include "support/cli_runner.hpp"
#include "support/test_paths.hpp"

namespace {

using waco::test::run_cli;

void write_lines(const std::string& path, const std::vector<nlohmann::json>& groups) {
  std::ofstream out(path);
  for (const nlohmann::json& g : groups) out << g.dump() << "\n";
}

/// The first group with a timed row, and that row's index.
std::size_t timed_row(const nlohmann::json& g) {
  for (std::size_t r = 0; r < g.at("rows").size(); ++r)
    if (g.at("rows")[r][2].is_number()) return r;
  FAIL("no timed row");
  return 0;
}

}  // namespace

TEST_CASE("db merge: shards merged by group identity, duplicates skipped, conflicts reported") {
  const std::string dir = waco::test::scratch_dir("db-merge");
  std::vector<nlohmann::json> groups;
  waco::learned::for_each_export_group(std::string(WACO_SOURCE_DIR) + "/data/dataset/sddmm.jsonl.gz",
                                   [&](const nlohmann::json& g) {
                                     if (groups.size() < 6) groups.push_back(g);
                                   });
  REQUIRE(groups.size() == 6);
  // Shard a: groups 0-3; shard b: 2-5, its group 3 measured otherwise (a time 1.5x).
  std::vector<nlohmann::json> a(groups.begin(), groups.begin() + 4);
  std::vector<nlohmann::json> b(groups.begin() + 2, groups.end());
  const std::size_t r = timed_row(b[1]);
  // (Six significant digits, as exports keep times, so that b's export reads back unchanged.)
  char six[32];
  std::snprintf(six, sizeof six, "%.6g", b[1]["rows"][r][2].get<double>() * 1.5);
  b[1]["rows"][r][2] = std::strtod(six, nullptr);
  write_lines(dir + "/a.jsonl", a);
  write_lines(dir + "/b.jsonl", b);
  REQUIRE(run_cli("dataset import --db " + dir + "/a.sqlite " + dir + "/a.jsonl").status == 0);
  REQUIRE(run_cli("dataset import --db " + dir + "/b.sqlite " + dir + "/b.jsonl").status == 0);

  const std::string merge =
      "db merge --json " + dir + "/out.sqlite " + dir + "/a.sqlite " + dir + "/b.sqlite";
  auto res = run_cli(merge);
  INFO(res.err);
  REQUIRE(res.status == 0);
  auto j = nlohmann::json::parse(res.out);
  CHECK(j.at("added") == 6);
  CHECK(j.at("duplicates") == 1);  // group 2
  CHECK(j.at("conflicts") == 1);   // group 3
  CHECK(j.at("groups") == 6);
  const auto& c = j.at("conflict_list")[0];
  CHECK(c.at("fingerprint") == groups[3].at("matrix").at("fingerprint"));
  CHECK(c.at("kept_from") == dir + "/a.sqlite");
  CHECK(c.at("other_from") == dir + "/b.sqlite");

  // Again: nothing added, every group a duplicate but the conflict.
  res = run_cli(merge);
  REQUIRE(res.status == 0);
  j = nlohmann::json::parse(res.out);
  CHECK(j.at("added") == 0);
  CHECK(j.at("duplicates") == 7);
  CHECK(j.at("conflicts") == 1);
  auto stats =
      nlohmann::json::parse(run_cli("dataset stats --json --db " + dir + "/out.sqlite").out);
  CHECK(stats.at("kernels").at("sddmm").at("groups") == 6);

  // --prefer last, from an export file: b's group 3 replaces a's.
  res = run_cli("db merge --json --prefer last " + dir + "/last.sqlite " + dir + "/a.sqlite " +
                dir + "/b.jsonl");
  REQUIRE(res.status == 0);
  j = nlohmann::json::parse(res.out);
  CHECK(j.at("replaced") == 1);
  CHECK(j.at("conflict_list")[0].at("kept_from") == dir + "/b.jsonl");
  REQUIRE(
      run_cli("dataset export --db " + dir + "/last.sqlite -o " + dir + "/last.jsonl.gz").status ==
      0);
  bool found = false;
  waco::learned::for_each_export_group(dir + "/last.jsonl.gz", [&](const nlohmann::json& g) {
    if (g.at("matrix").at("fingerprint") != groups[3].at("matrix").at("fingerprint")) return;
    found = true;
    CHECK(g.at("rows") == b[1].at("rows"));
  });
  CHECK(found);

  // Errors.
  res = run_cli("db merge " + dir + "/a.sqlite " + dir + "/a.sqlite");
  CHECK(res.status == 1);
  CHECK(res.err.find("also an input") != std::string::npos);
  res = run_cli("db merge " + dir + "/x.sqlite " + dir + "/missing.sqlite");
  CHECK(res.status == 1);
  CHECK(res.err.find("no such file") != std::string::npos);
}

TEST_CASE("dataset: the committed recipes still make the matrices of their fingerprints") {
  // The fingerprint hashes values as float, whatever the precision they are kept in: the
  // datasets and tuning caches made before double precision stay valid. A sample of each
  // committed dataset, its smaller operands (the check makes each one).
  for (const char* kernel : {"spmv", "spmm", "sddmm", "mttkrp"}) {
    int seen = 0, checked = 0;
    waco::learned::for_each_export_group(
        std::string(WACO_SOURCE_DIR) + "/data/dataset/" + kernel + ".jsonl.gz",
        [&](const nlohmann::json& g) {
          if (seen++ % 23 != 0 || checked >= 12) return;
          const waco::kernels::Recipe r = waco::kernels::Recipe::from_json(g.at("recipe"));
          // Files (../shared/data) where this machine has them: the readers' values too.
          if (r.source == waco::kernels::Recipe::Source::File && !std::filesystem::exists(r.path))
            return;
          if (r.source == waco::kernels::Recipe::Source::File
                  ? std::filesystem::file_size(r.path) > (8 << 20)
                  : waco::kernels::estimated_nnz(r) > 300000)
            return;
          const std::string want = g.at("matrix").at("fingerprint");
          const std::string got = std::string(kernel) == "mttkrp"
                                      ? waco::kernels::fingerprint_hex(waco::kernels::make_tensor(r))
                                      : waco::kernels::fingerprint_hex(waco::kernels::make_matrix(r));
          INFO(kernel << " group " << seen - 1 << ": " << g.at("recipe").dump());
          CHECK(got == want);
          ++checked;
        });
    INFO(kernel);
    CHECK(checked >= 6);
  }
}
