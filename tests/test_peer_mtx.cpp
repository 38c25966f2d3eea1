// Unit "peer_mtx" (label data): the Matrix Market conformance set of ../shared/peer/mtx (164 test
// files of fast_matrix_market, SciPy and LAGraph, with MANIFEST.tsv saying what each must give;
// its README.md describes the columns). Every file goes through `waco-hybrid info --json`, as a
// new user would run it, and must give what the manifest says:
//   read    exit 0 with the manifest's rows, cols, stored entries and nnz (where given);
//   reject  a clean refusal: exit 1 or 2 and one line starting with "error:";
//   either  one of the two (a read must still have the manifest's numbers).
// Never a crash, a hang (20 s) or a misread. A file where waco-hybrid deliberately differs would be
// listed in kDeviations with the reason (none is, today). Skipped (ctest: "Skipped") when the
// folder is absent; WACO_PEER_MTX_DIR points elsewhere.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli_runner.hpp"
#include "support/test_paths.hpp"

namespace fs = std::filesystem;

namespace {

/// Files whose outcome deliberately differs from the manifest's expectation, with the reason
/// (kernels/README.md lists them too). Empty: every file conforms.
const std::map<std::string, std::string> kDeviations = {};

std::optional<std::string> peer_dir() {
  if (const char* env = std::getenv("WACO_PEER_MTX_DIR"); env && *env)
    return fs::is_regular_file(fs::path(env) / "MANIFEST.tsv") ? std::optional<std::string>(env)
                                                                : std::nullopt;
  const fs::path p = fs::path(WACO_SOURCE_DIR) / ".." / "shared" / "peer" / "mtx";
  if (fs::is_regular_file(p / "MANIFEST.tsv")) return fs::weakly_canonical(p).string();
  return std::nullopt;
}

using Row = std::map<std::string, std::string>;

std::vector<Row> read_manifest(const std::string& dir) {
  std::ifstream f(dir + "/MANIFEST.tsv");
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    std::size_t b = 0;
    for (;;) {
      const std::size_t t = s.find('\t', b);
      v.push_back(s.substr(b, t == std::string::npos ? std::string::npos : t - b));
      if (t == std::string::npos) return v;
      b = t + 1;
    }
  };
  std::string line;
  std::vector<Row> rows;
  if (!std::getline(f, line)) return rows;
  const std::vector<std::string> header = split(line);
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split(line);
    Row r;
    for (std::size_t k = 0; k < header.size() && k < cells.size(); ++k) r[header[k]] = cells[k];
    rows.push_back(r);
  }
  return rows;
}

std::string quoted(const std::string& path) {
  std::string q = "'";
  for (char c : path) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// What one file gave: "read", "reject", or a failure ("crash", "hang", "unclean", "misread").
struct Outcome {
  std::string kind;
  std::string detail;
};

Outcome run_one(const std::string& dir, const Row& r) {
  const std::string cmd = "timeout 20 " + quoted(waco::test::cli_binary()) + " info --json " +
                          quoted(dir + "/" + r.at("file"));
  const waco::test::CliResult res = waco::test::run_command(cmd);
  if (res.status == 124) return {"hang", "no answer in 20 s"};
  if (res.status < 0 || res.status > 2) return {"crash", "exit status " + std::to_string(res.status) + ": " + res.err};
  if (res.status != 0) {
    const bool one_line = res.err.find('\n') == res.err.size() - 1;
    if (res.err.rfind("error: ", 0) != 0 || !one_line)
      return {"unclean", "refused without one 'error:' line: " + res.err};
    return {"reject", res.err.substr(0, res.err.size() - 1)};
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(res.out);
  } catch (const std::exception& e) {
    return {"unclean", std::string("exit 0 without JSON: ") + e.what()};
  }
  std::string wrong;
  auto expect = [&](const char* column, const nlohmann::json& got) {
    const std::string want = r.count(column) ? r.at(column) : "";
    if (!want.empty() && got.dump() != want) wrong += std::string(" ") + column + " " + got.dump() + " (expected " + want + ")";
  };
  expect("rows", j.at("rows"));
  expect("cols", j.at("cols"));
  expect("stored", j.at("source").at("stored_entries"));
  expect("nnz", j.at("nnz"));
  if (!wrong.empty()) return {"misread", wrong};
  return {"read", std::to_string(j.at("rows").get<long long>()) + "x" + std::to_string(j.at("cols").get<long long>()) +
                      " nnz=" + std::to_string(j.at("nnz").get<long long>())};
}

}  // namespace

TEST_CASE("peer_mtx: every peer Matrix Market test file gives what its manifest says", "[data][peer]") {
  const std::optional<std::string> dir = peer_dir();
  if (!dir) {
    WARN("peer Matrix Market folder absent (../shared/peer/mtx): skipped");
    return;
  }
  REQUIRE(fs::exists(waco::test::cli_binary()));
  const std::vector<Row> rows = read_manifest(*dir);
  REQUIRE(rows.size() >= 100);
  std::map<std::string, int> tally;  // "expectation -> outcome"
  int conformant = 0, documented = 0;
  for (const Row& r : rows) {
    const std::string& file = r.at("file");
    const std::string& want = r.at("expectation");
    REQUIRE((want == "read" || want == "reject" || want == "either"));
    const Outcome o = run_one(*dir, r);
    ++tally[want + " -> " + o.kind];
    const bool ok = (o.kind == "read" && want != "reject") || (o.kind == "reject" && want != "read");
    if (ok) {
      ++conformant;
      continue;
    }
    if (kDeviations.count(file)) {
      ++documented;
      continue;
    }
    INFO(file << " (" << want << "): " << o.kind << ": " << o.detail << "\n  manifest note: "
              << (r.count("note") ? r.at("note") : ""));
    CHECK(ok);
  }
  std::ostringstream table;
  table << "peer_mtx: " << rows.size() << " files, " << conformant << " conformant, " << documented
        << " documented deviations\n";
  for (const auto& [k, n] : tally) table << "  " << k << ": " << n << "\n";
  std::cout << table.str();
  CHECK(conformant + documented == static_cast<int>(rows.size()));
}
