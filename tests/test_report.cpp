// Unit "report": `waco-hybrid report` (experiments/src/report.hpp) on a results database with
// synthetic ablation rows: the per-matrix metrics and per-configuration summaries exactly, the
// CSV and JSON files, the HTML page (every plot drawn by gnuplot and inlined, nothing external,
// ids unique), the notes on a missing oracle and the errors on an empty database.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "report.hpp"
#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/error.hpp"

using namespace waco;
using nlohmann::json;

namespace {

kernels::CooMatrix diagonal(int n) {
  std::vector<kernels::index_t> r, c;
  std::vector<float> v;
  for (int i = 0; i < n; ++i) r.push_back(i), c.push_back(i), v.push_back(1.0f + i % 3);
  return test::from_triplets(n, n, r, c, v);
}

json context() {
  return {{"cpu", "Test CPU @ 1 GHz"}, {"compiler", "g++ 12"}, {"threads", 2},
          {"git_revision", "abc1234"}, {"date", "2026-01-01T00:00:00Z"}};
}

json run_row(const std::string& config, const std::string& kind, const std::string& name,
             const std::string& status, json extra) {
  json j = {{"format", "waco-ablation-run"}, {"version", 1}, {"config", config},
            {"description", "the " + config + " configuration"}, {"kind", kind},
            {"file", "/data/" + name}, {"name", name}, {"nnz", 50}, {"kernel", "spmv"},
            {"dense", 1}, {"threads", 2}, {"status", status}, {"error", nullptr},
            {"tune_args", json::array()}, {"winner", nullptr}, {"verdict", "gain"},
            {"search", config}, {"search_method", nullptr}, {"admissible", 36},
            {"candidates_measured", 0}, {"choice_s", 0.0}, {"measure_s", 0.0}, {"tune_s", 0.0},
            {"tune_speedup_over_csr", nullptr}, {"break_even_calls", nullptr},
            {"recall_at_10", nullptr}, {"spearman", nullptr}, {"context", context()}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

json bench_row(const std::string& name, json configs, json baselines) {
  return {{"format", "waco-ablation-bench"}, {"version", 1}, {"file", "/data/" + name},
          {"name", name}, {"nnz", 50}, {"kernel", "spmv"}, {"dense", 1}, {"threads", 2},
          {"repeats", 20}, {"warmup", 2}, {"configs", configs}, {"baselines", baselines},
          {"context", context()}};
}

json timed(double median, const std::string& schedule = "csr") {
  return {{"schedule", schedule}, {"median_s", median}, {"min_s", median * 0.9},
          {"max_s", median * 1.1}};
}
json lib(double median) { return {{"median_s", median}, {"min_s", median}, {"max_s", median}}; }

/// Two matrices, three configurations, rows of version 1 (one side-by-side run, no csr schedule,
/// claims without intervals): A.mtx has every time (random's tuning failed), B.mtx has no oracle
/// time (exhaustive's tuning failed there).
std::string fixture_db(const std::string& name) {
  const std::string path = test::scratch_dir(name) + "/a.sqlite";
  heuristics::ResultsDb db(path);
  const auto a = heuristics::matrix_record(diagonal(50), "/data/A.mtx");
  const auto b = heuristics::matrix_record(diagonal(60), "/data/B.mtx");
  db.record_matrix(a);
  db.record_matrix(b);
  auto rec = [&](const heuristics::MatrixRecord& m, const std::string& config, const json& row) {
    db.record_ablation(m.fingerprint, "spmv", 1, 2, config, row);
  };
  rec(a, "exhaustive", run_row("exhaustive", "pipeline", "A.mtx", "ok",
                               {{"winner", "dcsr"}, {"candidates_measured", 36}, {"tune_s", 10.0},
                                {"break_even_calls", 1000.0}, {"tune_speedup_over_csr", 2.5}}));
  rec(a, "hybrid", run_row("hybrid", "pipeline", "A.mtx", "ok",
                           {{"winner", "csr"}, {"candidates_measured", 12}, {"tune_s", 2.0},
                            {"break_even_calls", 200.0}, {"spearman", 0.9}, {"recall_at_10", 1.0},
                            {"tune_speedup_over_csr", 1.6}}));
  rec(a, "random", run_row("random", "baseline", "A.mtx", "failed",
                           {{"error", "every candidate failed to compile"},
                            {"candidates_measured", 5}, {"tune_s", 1.0}}));
  rec(a, "side-by-side",
      bench_row("A.mtx",
                {{"exhaustive", timed(1.0e-3, "dcsr")}, {"hybrid", timed(1.25e-3)},
                 {"random", {{"error", "the tuning failed"}}}},
                {{"csr", lib(2.0e-3)}, {"eigen", lib(1.6e-3)}, {"rsb-tuned", {{"error", "no rsb"}}}}));
  rec(b, "exhaustive", run_row("exhaustive", "pipeline", "B.mtx", "failed",
                               {{"error", "timed out"}, {"candidates_measured", 3}, {"tune_s", 7.0}}));
  rec(b, "hybrid", run_row("hybrid", "pipeline", "B.mtx", "ok",
                           {{"winner", "csr"}, {"candidates_measured", 10}, {"tune_s", 4.0},
                            {"verdict", "no-gain"}, {"spearman", 0.5}, {"recall_at_10", 0.8},
                            {"tune_speedup_over_csr", 1.0}}));
  rec(b, "random", run_row("random", "baseline", "B.mtx", "ok",
                           {{"winner", "csc"}, {"candidates_measured", 5}, {"tune_s", 0.5},
                            {"break_even_calls", 50.0}}));
  rec(b, "side-by-side",
      bench_row("B.mtx",
                {{"exhaustive", {{"error", "the tuning failed"}}}, {"hybrid", timed(4.0e-3)},
                 {"random", timed(8.0e-3, "csc")}},
                {{"csr", lib(4.0e-3)}, {"eigen", lib(5.0e-3)}}));
  return path;
}

/// A configuration row of version 2: the claim with its interval, maybe a busy tune.
json claim_row(const std::string& config, const std::string& name, double claimed,
               json interval, bool busy = false) {
  json r = run_row(config, "pipeline", name, "ok",
                   {{"winner", "csr"}, {"tune_s", 1.0}, {"tune_speedup_over_csr", claimed + 0.5},
                    {"claimed_speedup", claimed}, {"claim_reference", "csr schedule"},
                    {"claimed_interval", interval}, {"busy", busy},
                    {"busy_warning", busy ? json("the machine is busy") : json()}});
  r["version"] = 2;
  return r;
}

/// A winner's entry of a version-2 side-by-side row: its time and what it delivered.
json delivered(double median, double speedup, double lo, double hi, bool decided = true) {
  json t = timed(median);
  t["delivered"] = {{"speedup", speedup}, {"interval", {{"lo", lo}, {"hi", hi}, {"level", 0.9}}},
                    {"runs", decided ? 2 : 4}, {"per_run", {speedup, speedup}},
                    {"decided", decided}, {"band", "tie"}};
  return t;
}

json bench_row_v2(const std::string& name, json configs, bool busy = false) {
  json b = bench_row(name, configs, {{"csr", lib(1.0e-3)}, {"eigen", lib(1.2e-3)}});
  b["version"] = 2;
  b["csr_schedule"] = lib(0.9e-3);
  b["busy"] = busy;
  b["busy_reason"] = busy ? json("other processes disturbed 30 timed runs") : json();
  b["settled"] = !busy;
  return b;
}

/// An SpMV ablation row of an n x n diagonal matrix named `file` into db: rec(file, n, config, row).
auto recorder(heuristics::ResultsDb& db) {
  return [&db](const std::string& file, int n, const std::string& config, const json& row) {
    const auto m = heuristics::matrix_record(diagonal(n), "/data/" + file);
    db.record_matrix(m);
    db.record_ablation(m.fingerprint, "spmv", 1, 2, config, row);
  };
}

/// Three matrices of version 2, two configurations. C.mtx: hybrid claimed 1.2 [1.05, 1.35] and
/// delivered 0.9 (below 0.97); exhaustive claimed 1.3, delivered 1.25. D.mtx: its side-by-side
/// runs were busy (left out). E.mtx: hybrid's tune was busy (left out); exhaustive claimed 1.0
/// [0.95, 1.06] and delivered 1.02 [0.98, 1.05], undecided (both within noise).
std::string claims_db(const std::string& name) {
  const std::string path = test::scratch_dir(name) + "/c.sqlite";
  heuristics::ResultsDb db(path);
  const auto rec = recorder(db);
  const json iv = {{"lo", 1.05}, {"hi", 1.35}, {"level", 0.9}};
  rec("C.mtx", 70, "exhaustive", claim_row("exhaustive", "C.mtx", 1.3, iv));
  rec("C.mtx", 70, "hybrid", claim_row("hybrid", "C.mtx", 1.2, iv));
  rec("C.mtx", 70, "side-by-side",
      bench_row_v2("C.mtx", {{"exhaustive", delivered(0.72e-3, 1.25, 1.2, 1.3)},
                             {"hybrid", delivered(1.0e-3, 0.9, 0.85, 0.95)}}));
  rec("D.mtx", 80, "exhaustive", claim_row("exhaustive", "D.mtx", 2.0, iv));
  rec("D.mtx", 80, "hybrid", claim_row("hybrid", "D.mtx", 2.0, iv));
  rec("D.mtx", 80, "side-by-side",
      bench_row_v2("D.mtx", {{"exhaustive", delivered(8e-3, 0.1, 0.1, 0.1, false)},
                             {"hybrid", delivered(8e-3, 0.1, 0.1, 0.1, false)}},
                   true));
  rec("E.mtx", 90, "exhaustive",
      claim_row("exhaustive", "E.mtx", 1.0, {{"lo", 0.95}, {"hi", 1.06}, {"level", 0.9}}));
  rec("E.mtx", 90, "hybrid", claim_row("hybrid", "E.mtx", 3.0, iv, true));
  rec("E.mtx", 90, "side-by-side",
      bench_row_v2("E.mtx", {{"exhaustive", delivered(0.88e-3, 1.02, 0.98, 1.05, false)},
                             {"hybrid", delivered(0.3e-3, 3.0, 2.9, 3.1)}}));
  return path;
}

cli::ReportData claims_report(const std::string& name) {
  cli::ReportOptions o;
  o.db_path = claims_db(name);
  return cli::compute_report(heuristics::ResultsDb(o.db_path).ablation_rows(), o);
}

cli::ReportData fixture_report(const std::string& name, cli::ReportOptions o = {}) {
  const std::string path = fixture_db(name);
  o.db_path = path;
  return cli::compute_report(heuristics::ResultsDb(path).ablation_rows(), o);
}

const cli::MatrixConfigMetrics& row(const cli::KernelReport& k, const std::string& matrix,
                                    const std::string& config) {
  for (const auto& m : k.rows)
    if (m.matrix == matrix && m.config == config) return m;
  FAIL("no row " << matrix << " / " << config);
  throw std::logic_error("unreachable");
}
const cli::ConfigSummary& summary(const cli::KernelReport& k, const std::string& config) {
  for (const auto& s : k.summaries)
    if (s.config == config) return s;
  FAIL("no summary of " << config);
  throw std::logic_error("unreachable");
}

Approx exact(double v) { return Approx(v).epsilon(1e-12); }

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) out.push_back(cur), cur.clear();
    else cur += c;
  }
  out.push_back(cur);
  return out;
}

/// The report's CSV: its header, the columns by name, and the lines by "matrix/config".
struct Csv {
  std::vector<std::string> header;
  std::map<std::string, std::size_t> col;
  std::map<std::string, std::vector<std::string>> lines;
};
Csv parse_csv(const std::string& text) {
  Csv c;
  std::istringstream in(text);
  std::string line;
  REQUIRE(std::getline(in, line));
  c.header = split_csv_line(line);
  for (std::size_t i = 0; i < c.header.size(); ++i) c.col[c.header[i]] = i;
  while (std::getline(in, line)) {
    const auto f = split_csv_line(line);
    REQUIRE(f.size() == c.header.size());
    c.lines[f[c.col["matrix"]] + "/" + f[c.col["config"]]] = f;
  }
  return c;
}

std::size_t count_of(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("report: per-matrix metrics come from the side-by-side rows") {
  const cli::ReportData d = fixture_report("report-metrics");
  REQUIRE(d.kernels.size() == 1);
  const cli::KernelReport& k = d.kernels[0];
  CHECK(k.label == "spmv");
  CHECK(k.matrices == std::vector<std::string>{"A.mtx", "B.mtx"});
  CHECK(k.configs == std::vector<std::string>{"exhaustive", "hybrid", "random"});
  CHECK(k.rows.size() == 6);
  CHECK(k.matrices_without_oracle == 1);
  CHECK(k.matrices_without_side_by_side == 0);
  CHECK(d.rows == 8);

  const auto& ae = row(k, "A.mtx", "exhaustive");
  CHECK(*ae.speedup_over_csr == exact(2.0));
  CHECK(*ae.speedup_over_best_library == exact(1.6));  // eigen; rsb-tuned has an error
  CHECK(ae.best_library == "eigen");
  CHECK(*ae.share_of_oracle == exact(1.0));
  // Rows of version 1: delivered over the csr baseline of their one run, the claim is tune's
  // speedup over csr, no intervals.
  CHECK(*ae.delivered_speedup == exact(2.0));
  CHECK(*ae.claimed_speedup == exact(2.5));
  CHECK(*ae.delivered_over_claimed == exact(0.8));
  CHECK_FALSE(ae.delivered_lo.has_value());
  CHECK_FALSE(ae.claimed_lo.has_value());
  CHECK(ae.delivered_runs == 1);
  CHECK_THAT(ae.delivered_reference, Catch::Contains("csr baseline"));
  CHECK_FALSE(ae.busy);
  CHECK_FALSE(ae.undecided);
  const auto& ah = row(k, "A.mtx", "hybrid");
  CHECK(*ah.speedup_over_csr == exact(1.6));
  CHECK(*ah.speedup_over_best_library == exact(1.28));
  CHECK(*ah.share_of_oracle == exact(0.8));
  CHECK(*ah.spearman == exact(0.9));
  const auto& ar = row(k, "A.mtx", "random");
  CHECK(ar.status == "failed");
  CHECK(ar.error == "every candidate failed to compile");
  CHECK_FALSE(ar.median_s.has_value());
  CHECK(ar.time_error == "the tuning failed");
  CHECK_FALSE(ar.speedup_over_csr.has_value());
  const auto& bh = row(k, "B.mtx", "hybrid");
  CHECK(*bh.speedup_over_csr == exact(1.0));
  CHECK(*bh.speedup_over_best_library == exact(1.0));  // csr is the fastest library on B
  CHECK(bh.best_library == "csr");
  CHECK_FALSE(bh.share_of_oracle.has_value());  // B has no oracle time
  const auto& br = row(k, "B.mtx", "random");
  CHECK(*br.speedup_over_csr == exact(0.5));
  CHECK(br.winner == "csc");
  CHECK(row(k, "B.mtx", "exhaustive").status == "failed");
}

TEST_CASE("report: summaries are geometric means, shares within 5% and medians") {
  const cli::ReportData d = fixture_report("report-summary");
  const cli::KernelReport& k = d.kernels[0];
  const auto& e = summary(k, "exhaustive");
  CHECK(e.kind == "pipeline");
  CHECK(e.description == "the exhaustive configuration");
  CHECK(e.matrices == 2);
  CHECK(e.failures == 1);
  CHECK(e.timed == 1);
  CHECK(*e.speedup_csr_geomean == exact(2.0));
  CHECK(*e.speedup_library_geomean == exact(1.6));
  CHECK(*e.share_geomean == exact(1.0));
  CHECK(*e.within_5pct == exact(1.0));
  CHECK(*e.median_candidates == exact(19.5));  // 36 and 3 (the failed run measured 3)
  CHECK(*e.median_tune_s == exact(8.5));
  CHECK(*e.median_break_even == exact(1000));
  CHECK_FALSE(e.median_spearman.has_value());

  const auto& h = summary(k, "hybrid");
  CHECK(h.failures == 0);
  CHECK(h.speedup_csr_count == 2);
  CHECK(*h.speedup_csr_geomean == exact(std::sqrt(1.6)));
  CHECK(*h.speedup_csr_min == exact(1.0));
  CHECK(*h.speedup_csr_max == exact(1.6));
  CHECK(*h.speedup_library_geomean == exact(std::sqrt(1.28)));
  CHECK(h.share_count == 1);
  CHECK(*h.share_geomean == exact(0.8));
  CHECK(*h.within_5pct == exact(0.0));
  CHECK(*h.median_candidates == exact(11));
  CHECK(*h.median_tune_s == exact(3));
  CHECK(*h.median_break_even == exact(200));
  CHECK(*h.median_spearman == exact(0.7));
  CHECK(*h.median_recall == exact(0.9));

  const auto& r = summary(k, "random");
  CHECK(r.kind == "baseline");
  CHECK(r.failures == 1);
  CHECK(r.timed == 1);
  CHECK(*r.speedup_csr_geomean == exact(0.5));
  CHECK_FALSE(r.share_geomean.has_value());
  CHECK_FALSE(r.within_5pct.has_value());
  CHECK(*r.median_tune_s == exact(0.75));
  CHECK(*r.median_break_even == exact(50));

  REQUIRE(k.notes.size() == 2);
  CHECK_THAT(k.notes[0], Catch::Contains("1 of 2 matrices have no side-by-side time of the oracle"));
  CHECK_THAT(k.notes[1], Catch::Contains("2 of 2 matrices have a side-by-side row of an older"));
  CHECK(d.context.at("cpu") == std::vector<std::string>{"Test CPU @ 1 GHz"});
  CHECK(d.context.at("git_revision") == std::vector<std::string>{"abc1234"});
}

TEST_CASE("report: another oracle, a kernel filter and a missing oracle") {
  cli::ReportOptions o;
  o.oracle = "hybrid";
  o.oracle_explicit = true;
  const cli::ReportData d = fixture_report("report-oracle", o);
  const cli::KernelReport& k = d.kernels[0];
  CHECK(*row(k, "A.mtx", "exhaustive").share_of_oracle == exact(1.25));
  CHECK(*row(k, "B.mtx", "random").share_of_oracle == exact(0.5));
  CHECK(k.matrices_without_oracle == 0);
  CHECK(*summary(k, "exhaustive").within_5pct == exact(1.0));

  const std::string path = fixture_db("report-oracle-missing");
  const auto rows = heuristics::ResultsDb(path).ablation_rows();
  o.db_path = path;
  o.oracle = "nonesuch";
  CHECK_THROWS_WITH(cli::compute_report(rows, o),
                    Catch::Contains("no configuration 'nonesuch'") && Catch::Contains(path));
  // The default oracle absent from a run is a note, and its plots say why they are missing.
  o.oracle_explicit = false;
  const cli::ReportData d2 = cli::compute_report(rows, o);
  CHECK_FALSE(d2.kernels[0].oracle_present);
  CHECK(d2.kernels[0].matrices_without_oracle == 2);
  CHECK_THAT(d2.kernels[0].notes.at(0), Catch::Contains("'nonesuch' is not in this run"));
  for (const auto& m : d2.kernels[0].rows) CHECK_FALSE(m.share_of_oracle.has_value());
  const cli::PlotPlan plan = cli::plan_plots(d2.kernels[0], o.oracle);
  std::set<std::string> omitted;
  for (const auto& [name, reason] : plan.omitted) omitted.insert(name);
  CHECK(omitted == std::set<std::string>{"share-of-oracle-cdf", "tune-time-vs-share"});
  CHECK(plan.plots.size() == 5);

  o.oracle = "exhaustive";
  o.kernel = "spmm";
  try {
    cli::compute_report(rows, o);
    FAIL("no error for a kernel without rows");
  } catch (const kernels::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("no ablation rows for kernel spmm"));
    CHECK_THAT(e.hint(), Catch::Contains("spmv"));
  }
}

TEST_CASE("report: an empty database and a foreign row are errors") {
  const std::string path = test::scratch_dir("report-empty") + "/e.sqlite";
  heuristics::ResultsDb db(path);
  cli::ReportOptions o;
  o.db_path = path;
  try {
    cli::compute_report(db.ablation_rows(), o);
    FAIL("no error for an empty database");
  } catch (const kernels::Error& e) {
    CHECK(std::string(e.what()) == "no ablation rows in " + path);
    CHECK(e.hint() == "run waco-hybrid ablate first");
  }
  const auto m = heuristics::matrix_record(diagonal(50), "/data/A.mtx");
  db.record_matrix(m);
  db.record_ablation(m.fingerprint, "spmv", 1, 2, "hybrid", {{"winner", "csr"}});
  CHECK_THROWS_WITH(cli::compute_report(db.ablation_rows(), o),
                    Catch::Contains("is not a waco-ablation-run object"));
  json newer = run_row("hybrid", "pipeline", "A.mtx", "ok", json::object());
  newer["version"] = 3;
  db.record_ablation(m.fingerprint, "spmv", 1, 2, "hybrid", newer);
  CHECK_THROWS_WITH(cli::compute_report(db.ablation_rows(), o),
                    Catch::Contains("version 3") && Catch::Contains("versions 1 to 2"));
}

TEST_CASE("report: the CSV has one line per kernel, matrix and configuration with every metric") {
  const cli::ReportData d = fixture_report("report-csv");
  Csv csv = parse_csv(cli::report_csv(d));
  auto& col = csv.col;
  const auto& lines = csv.lines;
  for (const char* name : {"kernel", "matrix", "config", "status", "error", "median_s",
                           "speedup_over_csr", "speedup_over_best_library", "share_of_oracle",
                           "within_5pct", "candidates_measured", "choice_s", "measure_s",
                           "tune_s", "break_even_calls", "spearman", "recall_at_10"})
    CHECK(col.count(name) == 1);
  REQUIRE(lines.size() == 6);
  const auto& ah = lines.at("A.mtx/hybrid");
  CHECK(ah[col["kernel"]] == "spmv");
  CHECK(std::stod(ah[col["speedup_over_csr"]]) == exact(1.6));
  CHECK(std::stod(ah[col["speedup_over_best_library"]]) == exact(1.28));
  CHECK(std::stod(ah[col["share_of_oracle"]]) == exact(0.8));
  CHECK(ah[col["within_5pct"]] == "0");
  CHECK(ah[col["candidates_measured"]] == "12");
  CHECK(ah[col["spearman"]] == "0.9");
  CHECK(lines.at("A.mtx/exhaustive")[col["within_5pct"]] == "1");
  const auto& ar = lines.at("A.mtx/random");
  CHECK(ar[col["status"]] == "failed");
  CHECK(ar[col["error"]] == "every candidate failed to compile");
  CHECK(ar[col["speedup_over_csr"]].empty());
  CHECK(lines.at("B.mtx/hybrid")[col["share_of_oracle"]].empty());
}

TEST_CASE("report: the JSON holds the summaries, the rows and the plot names") {
  const cli::ReportData d = fixture_report("report-json");
  std::vector<cli::PlotPlan> plans = {cli::plan_plots(d.kernels[0], "exhaustive")};
  const json j = cli::report_json(d, plans);
  CHECK(j["format"] == "waco-ablation-report");
  CHECK(j["version"] == cli::kReportVersion);
  CHECK(j["oracle"] == "exhaustive");
  CHECK(j["plots"] == 7);
  const json& k = j["kernels"][0];
  CHECK(k["kernel"] == "spmv");
  CHECK(k["matrices"] == 2);
  CHECK(k["matrices_without_oracle"] == 1);
  CHECK(k["rows"].size() == 6);
  CHECK(k["plots"] == json::array({"speedup-over-csr", "claimed-vs-delivered",
                                   "share-of-oracle-cdf", "tune-time-vs-share", "spearman",
                                   "recall-at-10", "break-even-calls"}));
  const json& h = k["summaries"][1];
  CHECK(h["config"] == "hybrid");
  CHECK(h["speedup_over_csr"]["geomean"].get<double>() == exact(std::sqrt(1.6)));
  CHECK(h["share_of_oracle"]["geomean"].get<double>() == exact(0.8));
  CHECK(h["within_5pct_of_oracle"].get<double>() == exact(0.0));
  CHECK(h["median_spearman"].get<double>() == exact(0.7));
  CHECK(k["summaries"][2]["share_of_oracle"]["geomean"].is_null());
  CHECK(j["context"]["cpu"] == "Test CPU @ 1 GHz");
}

TEST_CASE("report: the HTML page is self-contained with every plot inline") {
  const cli::ReportData d = fixture_report("report-html");
  const std::vector<cli::PlotPlan> plans = {cli::plan_plots(d.kernels[0], "exhaustive")};
  REQUIRE(plans[0].plots.size() == 7);
  CHECK(plans[0].omitted.empty());
  const std::vector<std::vector<std::string>> svgs = {cli::draw_plots(plans[0].plots)};
  const std::string html = cli::render_html(d, plans, svgs);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("data-expected-plots=\"7\"") != std::string::npos);
  for (const auto& p : plans[0].plots) {
    const std::size_t at = html.find("<figure class=\"plot\" data-plot=\"" + p.name + "\"");
    INFO(p.name);
    REQUIRE(at != std::string::npos);
    const std::size_t end = html.find("</figure>", at);
    const std::string fig = html.substr(at, end - at);
    CHECK(fig.find("<svg") != std::string::npos);
    CHECK(fig.find("gnuplot_plot_1") != std::string::npos);  // a data set was drawn
    CHECK(fig.find("<figcaption>") != std::string::npos);
  }
  CHECK(count_of(html, "<figure class=\"plot\"") == 7);
  // Nothing external, no XML prolog inside the page.
  for (const char* bad : {"src=", "<link", "@import", "url(http", "<?xml", "<!DOCTYPE svg"})
    CHECK(html.find(bad) == std::string::npos);
  std::string rest = html;
  for (const char* ns : {"xmlns=\"http://www.w3.org/2000/svg\"",
                         "xmlns:xlink=\"http://www.w3.org/1999/xlink\""})
    for (std::size_t at; (at = rest.find(ns)) != std::string::npos;) rest.erase(at, std::strlen(ns));
  CHECK(rest.find("http") == std::string::npos);
  CHECK(count_of(html, "<script") == 1);
  // Ids unique across the seven inline SVGs.
  std::map<std::string, int> ids;
  const std::regex id_re("\\sid=['\"]([^'\"]+)['\"]");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), id_re); it != std::sregex_iterator(); ++it)
    ++ids[(*it)[1]];
  for (const auto& [id, n] : ids) {
    INFO(id);
    CHECK(n == 1);
  }
  CHECK(ids.size() > 20);
  // The tables and the notes.
  CHECK(html.find("1 of 2 matrices have no side-by-side time of the oracle") != std::string::npos);
  CHECK(html.find("every candidate failed to compile") != std::string::npos);
  CHECK(html.find("Test CPU @ 1 GHz") != std::string::npos);
  CHECK(html.find("abc1234") != std::string::npos);
  CHECK(html.find("How to read this report") != std::string::npos);
  CHECK(html.find("id=\"selfcheck\"") != std::string::npos);
  CHECK(html.find("document.body.dataset.selfcheck") != std::string::npos);
}

TEST_CASE("report: plots without data are left out and said so") {
  const std::string path = test::scratch_dir("report-no-model") + "/n.sqlite";
  heuristics::ResultsDb db(path);
  const auto m = heuristics::matrix_record(diagonal(50), "/data/A.mtx");
  db.record_matrix(m);
  db.record_ablation(m.fingerprint, "spmv", 1, 2, "exhaustive",
                     run_row("exhaustive", "pipeline", "A.mtx", "ok", {{"tune_s", 3.0}}));
  db.record_ablation(m.fingerprint, "spmv", 1, 2, "random",
                     run_row("random", "baseline", "A.mtx", "ok", {{"tune_s", 1.0}}));
  db.record_ablation(m.fingerprint, "spmv", 1, 2, "side-by-side",
                     bench_row("A.mtx", {{"exhaustive", timed(1e-3)}, {"random", timed(2e-3)}},
                               {{"csr", lib(1e-3)}}));
  cli::ReportOptions o;
  o.db_path = path;
  const cli::ReportData d = cli::compute_report(db.ablation_rows(), o);
  const std::vector<cli::PlotPlan> plans = {cli::plan_plots(d.kernels[0], "exhaustive")};
  std::set<std::string> drawn, omitted;
  for (const auto& p : plans[0].plots) drawn.insert(p.name);
  for (const auto& [name, reason] : plans[0].omitted) omitted.insert(name);
  CHECK(drawn == std::set<std::string>{"speedup-over-csr", "share-of-oracle-cdf", "tune-time-vs-share"});
  CHECK(omitted == std::set<std::string>{"claimed-vs-delivered", "spearman", "recall-at-10",
                                         "break-even-calls"});
  const std::string html = cli::render_html(d, plans, {cli::draw_plots(plans[0].plots)});
  CHECK(count_of(html, "<figure class=\"plot\"") == 3);
  CHECK(html.find("data-expected-plots=\"3\"") != std::string::npos);
  CHECK(html.find("Not drawn: <b>spearman</b>") != std::string::npos);
  CHECK(html.find("no model ran") != std::string::npos);
}

TEST_CASE("report: a missing gnuplot is a clear error") {
  const cli::ReportData d = fixture_report("report-no-gnuplot");
  const cli::PlotPlan plan = cli::plan_plots(d.kernels[0], "exhaustive");
  try {
    cli::draw_plots(plan.plots, "/nonexistent/gnuplot");
    FAIL("no error without gnuplot");
  } catch (const kernels::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("cannot run gnuplot"));
    CHECK(e.hint() == "scripts/setup.sh installs gnuplot-nox");
  }
  // A failing gnuplot (here: a program that exits 1) names the plot.
  try {
    cli::draw_plots(plan.plots, "false");
    FAIL("no error for a failing gnuplot");
  } catch (const kernels::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("failed drawing plot speedup-over-csr") &&
                             Catch::Contains("exit 1"));
  }
}

TEST_CASE("report: inline_svg drops the prolog and makes ids unique") {
  const std::string svg =
      "<?xml version=\"1.0\"?>\n<svg viewBox=\"0 0 10 10\"><title>Gnuplot</title><defs>"
      "<path id='gpPt0' d='M0,0'/><g id=\"c\"/></defs><use xlink:href='#gpPt0'/>"
      "<rect fill=\"url(#c)\"/></svg>\n";
  const std::string s = cli::inline_svg(svg, "p1-", "A <caption>");
  CHECK(s.rfind("<svg class=\"gp\"", 0) == 0);
  CHECK(s.find("<?xml") == std::string::npos);
  CHECK(s.find("id='p1-gpPt0'") != std::string::npos);
  CHECK(s.find("id=\"p1-c\"") != std::string::npos);
  CHECK(s.find("href='#p1-gpPt0'") != std::string::npos);
  CHECK(s.find("url(#p1-c)") != std::string::npos);
  CHECK(s.find("<title>A &lt;caption&gt;</title>") != std::string::npos);
}

TEST_CASE("report: the CSV and JSON paths are the HTML path's siblings") {
  CHECK(cli::sibling_paths("out/r.html") == std::make_pair(std::string("out/r.csv"),
                                                           std::string("out/r.json")));
  CHECK(cli::sibling_paths("r.htm").second == "r.json");
  CHECK_THROWS_WITH(cli::sibling_paths("r.json"), Catch::Contains("does not end in .html"));
}

TEST_CASE("report: MTTKRP speedups are over csf and configurations follow ablate's order") {
  const std::string path = test::scratch_dir("report-mttkrp") + "/m.sqlite";
  heuristics::ResultsDb db(path);
  const auto t = heuristics::matrix_record(diagonal(40), "/data/T.tns");
  db.record_matrix(t);
  json second = run_row("random", "baseline", "T.tns", "ok", {{"winner", "csf"}, {"position", 1}});
  json first = run_row("exhaustive", "pipeline", "T.tns", "ok", {{"winner", "csf"}, {"position", 0}});
  for (json* r : {&second, &first}) {
    (*r)["kernel"] = "mttkrp";
    (*r)["dense"] = 16;
  }
  // Written in the other order: the report follows "position".
  db.record_ablation(t.fingerprint, "mttkrp", 16, 2, "random", second);
  db.record_ablation(t.fingerprint, "mttkrp", 16, 2, "exhaustive", first);
  json bench = bench_row("T.tns", {{"exhaustive", timed(1.0, "csf")}, {"random", timed(2.0, "csf")}},
                         {{"csf", lib(1.5)}});
  bench["kernel"] = "mttkrp";
  bench["dense"] = 16;
  db.record_ablation(t.fingerprint, "mttkrp", 16, 2, "side-by-side", bench);
  const cli::ReportData data = cli::compute_report(db.ablation_rows(), cli::ReportOptions{});
  REQUIRE(data.kernels.size() == 1);
  const auto& k = data.kernels[0];
  REQUIRE(k.configs == std::vector<std::string>{"exhaustive", "random"});
  REQUIRE(k.rows.size() == 2);
  CHECK(k.rows[0].speedup_over_csr.value() == Approx(1.5));
  CHECK(k.rows[1].speedup_over_csr.value() == Approx(0.75));
  CHECK(k.rows[1].share_of_oracle.value() == Approx(0.5));
}

TEST_CASE("report: claimed against delivered, with intervals, per matrix and configuration") {
  const cli::ReportData d = claims_report("report-claims");
  const cli::KernelReport& k = d.kernels[0];
  CHECK(k.matrices == std::vector<std::string>{"C.mtx", "D.mtx", "E.mtx"});
  const auto& ch = row(k, "C.mtx", "hybrid");
  CHECK(*ch.claimed_speedup == exact(1.2));  // claimed_speedup, not tune_speedup_over_csr
  CHECK(*ch.claimed_lo == exact(1.05));
  CHECK(*ch.claimed_hi == exact(1.35));
  CHECK(ch.claim_reference == "csr schedule");
  CHECK(*ch.delivered_speedup == exact(0.9));
  CHECK(*ch.delivered_lo == exact(0.85));
  CHECK(*ch.delivered_over_claimed == exact(0.75));
  CHECK_THAT(ch.delivered_reference, Catch::Contains("csr schedule"));
  CHECK_FALSE(ch.busy);
  CHECK_FALSE(cli::within_noise(ch.claimed_lo, ch.claimed_hi));
  CHECK(*ch.speedup_over_csr == exact(1.0));  // over the csr baseline's median, as before
  const auto& ee = row(k, "E.mtx", "exhaustive");
  CHECK(ee.undecided);
  CHECK(cli::within_noise(ee.claimed_lo, ee.claimed_hi));
  CHECK(cli::within_noise(ee.delivered_lo, ee.delivered_hi));
  CHECK(ee.delivered_runs == 4);
  // Busy: every row of D.mtx (its side-by-side runs), hybrid on E.mtx (its tune).
  CHECK(row(k, "D.mtx", "exhaustive").busy);
  CHECK_THAT(row(k, "D.mtx", "hybrid").busy_reason,
             Catch::Contains("side-by-side runs were disturbed") &&
                 Catch::Contains("30 timed runs"));
  CHECK(row(k, "E.mtx", "hybrid").busy);
  CHECK_THAT(row(k, "E.mtx", "hybrid").busy_reason, Catch::Contains("tune ran on a busy machine"));
  CHECK(k.busy_matrices == 1);
  CHECK(k.busy_rows == 1);
  CHECK(k.library_times.at(ch.fingerprint).at("csr schedule") == exact(0.9e-3));
}

TEST_CASE("report: busy rows are left out of every summary and plot, and counted") {
  const cli::ReportData d = claims_report("report-busy");
  const cli::KernelReport& k = d.kernels[0];
  const auto& e = summary(k, "exhaustive");
  CHECK(e.matrices == 2);  // C and E; D left out
  CHECK(e.busy_left_out == 1);
  CHECK(e.delivered_count == 2);
  CHECK(*e.delivered_geomean == exact(std::sqrt(1.25 * 1.02)));
  CHECK(e.delivered_below == 0);
  CHECK(*e.below_share == exact(0.0));
  CHECK(e.undecided == 1);
  CHECK(e.claimed_count == 2);
  // delivered / claimed: 1.25 / 1.3 and 1.02 / 1.0.
  CHECK(*e.delivered_over_claimed_median == exact((1.25 / 1.3 + 1.02) / 2));
  CHECK(*e.delivered_over_claimed_dev95 ==
        Approx(0.02 + 0.95 * (1 - 1.25 / 1.3 - 0.02)).epsilon(1e-9));
  CHECK(*e.speedup_csr_geomean == exact(std::sqrt(1.0e-3 / 0.72e-3 * 1.0e-3 / 0.88e-3)));
  const auto& h = summary(k, "hybrid");
  CHECK(h.matrices == 1);  // C only: D's side-by-side and E's tune were busy
  CHECK(h.busy_left_out == 2);
  CHECK(h.delivered_below == 1);
  CHECK(*h.below_share == exact(1.0));
  CHECK(*h.delivered_over_claimed_median == exact(0.75));
  CHECK(*h.median_tune_s == exact(1.0));
  // The notes say how many were left out.
  std::string notes;
  for (const auto& n : k.notes) notes += n + "\n";
  CHECK_THAT(notes, Catch::Contains("1 of 3 matrices left out of every summary and plot"));
  CHECK_THAT(notes, Catch::Contains("1 configuration row (matrix and configuration) left out"));
  CHECK_THAT(cli::report_text(d), Catch::Contains("1 of 3 matrices left out"));
  // No plot draws a busy row: the speedup plot has C and E for exhaustive, C for hybrid.
  const cli::PlotPlan plan = cli::plan_plots(k, "exhaustive");
  std::map<std::string, std::string> data;
  for (const auto& p : plan.plots) data[p.name] = p.data;
  REQUIRE(data.count("speedup-over-csr"));
  REQUIRE(data.count("claimed-vs-delivered"));
  const auto points = [](const std::string& text) {
    std::size_t n = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) n += !line.empty() && line[0] != '#';
    return n;
  };
  CHECK(points(data["speedup-over-csr"]) == 3);
  CHECK(points(data["claimed-vs-delivered"]) == 3);
  CHECK(data["claimed-vs-delivered"].find(" 0.1 ") == std::string::npos);  // D's numbers
  CHECK(data["claimed-vs-delivered"].find("3 3 ") == std::string::npos);   // E's busy hybrid
  // Claimed 1.2 [1.05, 1.35], delivered 0.9 [0.85, 0.95]: x y xlo xhi ylo yhi.
  CHECK(data["claimed-vs-delivered"].find("1.2 0.9 1.05 1.35 0.85 0.95\n") != std::string::npos);
}

TEST_CASE("report: claimed against delivered in the page, the CSV and the JSON") {
  const cli::ReportData d = claims_report("report-claims-out");
  const std::vector<cli::PlotPlan> plans = {cli::plan_plots(d.kernels[0], "exhaustive")};
  const std::vector<std::vector<std::string>> svgs = {cli::draw_plots(plans[0].plots)};
  const std::string html = cli::render_html(d, plans, svgs);
  const std::size_t at = html.find("<figure class=\"plot\" data-plot=\"claimed-vs-delivered\"");
  REQUIRE(at != std::string::npos);
  const std::string fig = html.substr(at, html.find("</figure>", at) - at);
  CHECK(fig.find("gnuplot_plot_1") != std::string::npos);
  CHECK(fig.find("gnuplot_plot_2") != std::string::npos);  // one data set per configuration
  CHECK(html.find("Claimed &rarr; delivered") != std::string::npos);
  CHECK(html.find("Delivered below 0.97&times;") != std::string::npos);
  CHECK(html.find("1.20&times; <span class=\"desc\">[1.05, 1.35]</span>") != std::string::npos);
  CHECK(html.find("class=\"below\"") != std::string::npos);  // hybrid on C: 0.90x
  CHECK(html.find("within noise") != std::string::npos);     // E's exhaustive
  CHECK(html.find("&asymp;") != std::string::npos);
  CHECK(html.find("undecided: the 4 runs never agreed") != std::string::npos);
  CHECK(html.find("<tr class=\"busy\">") != std::string::npos);
  CHECK(html.find("busy: left out of the summaries and plots") != std::string::npos);
  CHECK(html.find("title=\"the tune ran on a busy machine: the machine is busy\"") !=
        std::string::npos);
  CHECK(html.find("1 of 3 matrices left out of every summary and plot") != std::string::npos);
  CHECK(html.find("csr schedule 900") != std::string::npos);  // the csr schedule's time

  Csv csv = parse_csv(cli::report_csv(d));
  auto& col = csv.col;
  const auto& lines = csv.lines;
  for (const char* name : {"claimed_speedup", "claimed_lo", "claimed_hi", "claimed_within_noise",
                           "delivered_speedup", "delivered_lo", "delivered_hi",
                           "delivered_within_noise", "undecided", "delivered_below_0.97",
                           "delivered_over_claimed", "busy", "busy_reason"})
    CHECK(col.count(name) == 1);
  CHECK(std::stod(lines.at("C.mtx/hybrid")[col["delivered_over_claimed"]]) == exact(0.75));
  CHECK(lines.at("C.mtx/hybrid")[col["delivered_below_0.97"]] == "1");
  CHECK(lines.at("E.mtx/exhaustive")[col["delivered_within_noise"]] == "1");
  CHECK(lines.at("E.mtx/exhaustive")[col["undecided"]] == "1");
  CHECK(lines.at("D.mtx/hybrid")[col["busy"]] == "1");
  CHECK(lines.at("C.mtx/hybrid")[col["busy"]] == "0");

  const json j = cli::report_json(d, plans);
  CHECK(j["version"] == 2);
  const json& k = j["kernels"][0];
  CHECK(k["busy_matrices_left_out"] == 1);
  CHECK(k["busy_rows_left_out"] == 1);
  const json& h = k["summaries"][1];
  CHECK(h["config"] == "hybrid");
  CHECK(h["busy_left_out"] == 2);
  CHECK(h["delivered"]["below_0.97"] == 1);
  CHECK(h["delivered_over_claimed"]["median"].get<double>() == exact(0.75));
  bool seen = false;
  for (const json& r : k["rows"])
    if (r["matrix"] == "E.mtx" && r["config"] == "exhaustive") {
      seen = true;
      CHECK(r["claimed"]["within_noise"] == true);
      CHECK(r["delivered"]["undecided"] == true);
      CHECK(r["delivered"]["lo"].get<double>() == exact(0.98));
    }
  CHECK(seen);
}

TEST_CASE("report: matrices beyond the LLC are a report of their own, with a roofline table") {
  const std::string path = test::scratch_dir("report-llc") + "/l.sqlite";
  {
    heuristics::ResultsDb db(path);
    const auto rec = recorder(db);
    const json iv = {{"lo", 1.05}, {"hi", 1.35}, {"level", 0.9}};
    // Small.mtx: 1 MiB against a 32 MiB LLC; Big.mtx: 320 MiB, STREAM 40 GB/s beside it.
    const double mib = 1024.0 * 1024.0;
    rec("Small.mtx", 70, "hybrid", claim_row("hybrid", "Small.mtx", 1.2, iv));
    json small = bench_row_v2("Small.mtx", {{"hybrid", delivered(0.8e-3, 1.12, 1.1, 1.15)}});
    small["working_set"] = {{"traffic_bytes", 1 * mib}, {"llc_bytes", 32 * mib},
                            {"beyond_llc", false}, {"stream_gbs", nullptr}};
    rec("Small.mtx", 70, "side-by-side", small);
    rec("Big.mtx", 80, "hybrid", claim_row("hybrid", "Big.mtx", 2.0, iv));
    json big = bench_row_v2("Big.mtx", {{"hybrid", delivered(0.5e-3, 1.8, 1.7, 1.9)}});
    big["working_set"] = {{"traffic_bytes", 320 * mib}, {"llc_bytes", 32 * mib},
                          {"beyond_llc", true}, {"stream_gbs", 40.0}};
    rec("Big.mtx", 80, "side-by-side", big);
  }
  cli::ReportOptions o;
  o.db_path = path;
  o.oracle = "hybrid";
  const cli::ReportData d = cli::compute_report(heuristics::ResultsDb(path).ablation_rows(), o);
  REQUIRE(d.kernels.size() == 2);
  const cli::KernelReport& small = d.kernels[0];
  const cli::KernelReport& big = d.kernels[1];
  CHECK(small.label == "spmv, cache-resident");
  CHECK_FALSE(small.beyond_llc);
  CHECK(small.matrices == std::vector<std::string>{"Small.mtx"});
  CHECK(big.label == "spmv, beyond the LLC");
  CHECK(big.beyond_llc);
  CHECK(big.matrices == std::vector<std::string>{"Big.mtx"});
  // The summaries are apart: each holds its own matrix only.
  CHECK(small.summaries.at(0).delivered_count == 1);
  CHECK(*small.summaries.at(0).delivered_geomean == exact(1.12));
  CHECK(*big.summaries.at(0).delivered_geomean == exact(1.8));
  // The roofline: csr 1 ms, eigen 1.2 ms, the csr schedule 0.9 ms, the hybrid 0.5 ms on 320 MiB.
  REQUIRE(big.roofline.size() == 1);
  const cli::RooflineRow& r = big.roofline[0];
  CHECK(*r.stream_gbs == exact(40.0));
  std::map<std::string, const cli::RooflineEntry*> by;
  for (const auto& e : r.entries) by[e.name] = &e;
  REQUIRE(by.count("csr"));
  REQUIRE(by.count("csr schedule"));
  REQUIRE(by.count("hybrid"));
  const double gb = 320.0 * 1024 * 1024 * 1e-9;
  CHECK(*by["csr"]->effective_gbs == exact(gb / 1.0e-3));
  CHECK(*by["hybrid"]->effective_gbs == exact(gb / 0.5e-3));
  CHECK(*by["hybrid"]->share_of_stream == exact(gb / 0.5e-3 / 40.0));
  CHECK(by["hybrid"]->schedule == "csr");
  CHECK_FALSE(small.roofline.at(0).entries.at(0).share_of_stream.has_value());  // no STREAM

  const std::string text = cli::report_text(d);
  CHECK(text.find("spmv, beyond the LLC: 1 matrix") != std::string::npos);
  CHECK(text.find("working set 320.0 MiB, LLC 32.0 MiB, STREAM 40.0 GB/s") != std::string::npos);
  const json j = cli::report_json(d);
  CHECK(j["kernels"][1]["beyond_llc"] == true);
  CHECK(j["kernels"][1]["roofline"][0]["stream_gbs"].get<double>() == exact(40.0));
  const std::vector<cli::PlotPlan> plans = {cli::plan_plots(d.kernels[0], "hybrid"),
                                            cli::plan_plots(d.kernels[1], "hybrid")};
  const std::vector<std::vector<std::string>> svgs = {cli::draw_plots(plans[0].plots),
                                                      cli::draw_plots(plans[1].plots)};
  const std::string html = cli::render_html(d, plans, svgs);
  CHECK(html.find("<h3>Roofline</h3>") != std::string::npos);
  CHECK(html.find("320.0 MiB") != std::string::npos);
}
