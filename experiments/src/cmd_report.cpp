// waco-hybrid report: the ablation study of a results database (waco-hybrid ablate) as one
// self-contained HTML page with gnuplot plots, plus a CSV and a JSON file beside it. The
// computation and rendering are in report.hpp; this file parses, checks and writes.
#include <filesystem>
#include <iostream>

#include "cli_common.hpp"
#include "command.hpp"
#include "report.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/error.hpp"

namespace waco::cli {
namespace {

using kernels::Error;

struct Options {
  std::string db;
  std::string output;
  std::string kernel;
  std::string oracle = "exhaustive";
  bool oracle_given = false;
  std::string title = "waco-hybrid ablation report";
  std::string gnuplot = "gnuplot";
  bool json = false;
};

int report(const Options& o) {
  // Every output path is checked before any work.
  const auto [csv_path, json_path] = sibling_paths(o.output);
  for (const std::string& p : {o.output, csv_path, json_path}) kernels::check_writable(p);
  if (!std::filesystem::is_regular_file(o.db))
    throw Error("no results database " + o.db, "run waco-hybrid ablate --db " + o.db + " first");

  ReportOptions ro;
  ro.db_path = o.db;
  ro.kernel = o.kernel;
  ro.oracle = o.oracle;
  ro.oracle_explicit = o.oracle_given;
  ro.title = o.title;
  const heuristics::ResultsDb db(o.db);
  const ReportData data = compute_report(db.ablation_rows(), ro);

  std::vector<PlotPlan> plans;
  std::vector<PlotSpec> all;
  for (const KernelReport& k : data.kernels) {
    plans.push_back(plan_plots(k, ro.oracle));
    all.insert(all.end(), plans.back().plots.begin(), plans.back().plots.end());
  }
  const std::vector<std::string> drawn = draw_plots(all, o.gnuplot);
  std::vector<std::vector<std::string>> svgs;
  std::size_t next = 0;
  for (const PlotPlan& p : plans) {
    svgs.emplace_back(drawn.begin() + static_cast<std::ptrdiff_t>(next),
                      drawn.begin() + static_cast<std::ptrdiff_t>(next + p.plots.size()));
    next += p.plots.size();
  }

  nlohmann::json j = report_json(data, plans);
  kernels::write_text_file(o.output, render_html(data, plans, svgs));
  kernels::write_text_file(csv_path, report_csv(data));
  kernels::write_text_file(json_path, j.dump(2) + "\n");

  if (o.json) {
    j["files"] = {{"html", o.output}, {"csv", csv_path}, {"json", json_path}};
    print_json(j);
  } else {
    std::cout << report_text(data) << "wrote " << o.output << " (" << all.size() << " plots), "
              << csv_path << ", " << json_path << "\n";
  }
  return kExitOk;
}

}  // namespace

Command make_report_command() {
  return {"report", "The ablation study of a results database as an HTML page, CSV and JSON",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            sub.add_option("--db", o->db, "Results database written by waco-hybrid ablate")
                ->required();
            sub.add_option("-o,--output", o->output,
                           "The HTML page (NAME.html); NAME.csv and NAME.json are written beside it")
                ->required();
            sub.add_option("--kernel", o->kernel, "Only this kernel (default: every kernel there)")
                ->check(CLI::IsMember({"spmv", "spmm", "sddmm", "mttkrp"}));
            sub.add_option("--oracle", o->oracle,
                           "The configuration whose side-by-side time is the reference of "
                           "\"share of the oracle\"")
                ->capture_default_str();
            sub.add_option("--title", o->title, "Title of the page")->capture_default_str();
            sub.add_option("--gnuplot", o->gnuplot, "The gnuplot program that draws the plots")
                ->capture_default_str();
            sub.add_flag("--json", o->json, "Print the report's JSON (as NAME.json) on stdout");
            sub.footer(
                "The page is one self-contained file (inline CSS, inline SVG plots drawn by "
                "gnuplot, no network). Speedups and shares come only from each matrix's "
                "side-by-side run, where every configuration's winner and the library baselines "
                "were timed interleaved.\n\n"
                "Examples:\n"
                "  waco-hybrid ablate --kernel spmv --db a.sqlite examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid report --db a.sqlite -o report.html\n"
                "  waco-hybrid report --db a.sqlite --kernel spmv --oracle hybrid-confirm20 "
                "-o spmv.html --json\n");
            return [o, &sub] {
              o->oracle_given = sub.count("--oracle") > 0;
              return report(*o);
            };
          }};
}

}  // namespace waco::cli
