// `waco-hybrid report`: the ablation study of a results database as one self-contained HTML page
// (tables and gnuplot SVG plots inline), a CSV and a JSON file.
//
// Main types: ReportData (compute_report: per kernel, the per-matrix metrics of every
// configuration and their per-configuration summaries), PlotSpec (plan_plots: a gnuplot script and
// its data, pure) and the renderers (render_html, report_csv, report_json). Only draw_plots runs a
// process (gnuplot); everything else is a pure function of the database rows, for the tests.
//
// Timings that are compared come only from the "side-by-side" row of a matrix (every
// configuration's winner, the csr schedule and the library baselines timed interleaved, in runs
// repeated until they agree: final_runs.hpp): the per-configuration rows give what the search
// did (candidates, tuning time, break-even calls, the model's rank correlation) and what the
// tune claimed, never times to compare. Claimed against delivered: the tune's speedup over its
// faster csr reference, and the winner's over the faster of the csr baseline and the csr
// schedule in the side-by-side runs, each with its interval. Rows marked busy (a side-by-side
// run without two undisturbed runs: the whole matrix; a tune that warned of a busy machine: that
// configuration on that matrix) stay in the per-matrix table and are left out of every summary
// and plot, which the notes count.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/heuristics/results_db.hpp"

namespace waco::cli {

/// Version of report.json ("format": "waco-ablation-report"). 2: claimed and delivered speedups,
/// busy rows left out of the summaries.
inline constexpr int kReportVersion = 2;
/// A configuration is "within 5% of the oracle" on a matrix when its share of the oracle is at
/// least this.
inline constexpr double kWithinOracleShare = 0.95;

struct ReportOptions {
  std::string db_path;     ///< shown in the report
  std::string kernel;      ///< only this kernel; empty = every kernel in the database
  std::string oracle = "exhaustive";  ///< the configuration whose time is the reference
  /// The oracle was asked for explicitly: a name that no row has is an error (the default
  /// oracle missing from a run is only a note).
  bool oracle_explicit = false;
  std::string title = "waco-hybrid ablation report";
};

/// One configuration on one matrix.
struct MatrixConfigMetrics {
  std::string matrix;  ///< the matrix's file name
  std::string file;
  std::string fingerprint;
  std::int64_t nnz = 0;
  std::string config;
  std::string kind;    ///< "pipeline" or "baseline" ("" without a configuration row)
  std::string status;  ///< the configuration row's status; "missing" without one
  std::string error;   ///< its error, if any
  std::string winner;  ///< the winner's schedule text
  std::string verdict;
  // From the side-by-side row:
  std::optional<double> median_s;  ///< the winner's median there
  std::string time_error;          ///< why it has no time there
  std::optional<double> csr_median_s;
  std::string best_library;        ///< the fastest library baseline timed there
  std::optional<double> best_library_median_s;
  std::optional<double> oracle_median_s;
  std::optional<double> speedup_over_csr;           ///< csr median / median_s
  std::optional<double> speedup_over_best_library;  ///< best library median / median_s
  std::optional<double> share_of_oracle;            ///< oracle median / median_s
  // From the configuration row:
  std::optional<double> candidates_measured, choice_s, measure_s, tune_s, break_even_calls,
      spearman, recall_at_10, tune_speedup_over_csr;
  // Claimed against delivered:
  std::optional<double> claimed_speedup;         ///< the tune's, over its faster csr reference
  std::optional<double> claimed_lo, claimed_hi;  ///< its interval, when the tune judged one
  std::string claim_reference;                   ///< "csr schedule" / "csr baseline", if named
  /// Over the faster of the csr baseline and the csr schedule: the median of the side-by-side
  /// runs (rows of an older ablate: over the csr baseline of its single run, no interval).
  std::optional<double> delivered_speedup;
  std::optional<double> delivered_lo, delivered_hi;
  std::string delivered_reference;
  int delivered_runs = 0;
  bool undecided = false;  ///< the side-by-side runs never agreed on it
  std::optional<double> delivered_over_claimed;
  /// Left out of summaries and plots: the matrix's side-by-side runs or this tune were disturbed.
  bool busy = false;
  std::string busy_reason;
};

/// An interval that contains 1.0: the speedup is within noise.
bool within_noise(const std::optional<double>& lo, const std::optional<double>& hi);

/// Summary of one configuration over the matrices of a kernel. Geometric means, minima and
/// maxima are over the matrices where the value exists (`*_count`); medians likewise.
struct ConfigSummary {
  std::string config;
  std::string kind;
  std::string description;
  int matrices = 0;  ///< matrices with a row or a side-by-side entry for it
  int failures = 0;  ///< configuration rows whose status is not "ok"
  int timed = 0;     ///< matrices where its winner has a side-by-side time
  int speedup_csr_count = 0;
  std::optional<double> speedup_csr_geomean, speedup_csr_min, speedup_csr_max;
  int speedup_library_count = 0;
  std::optional<double> speedup_library_geomean, speedup_library_min, speedup_library_max;
  int share_count = 0;
  std::optional<double> share_geomean;
  std::optional<double> within_5pct;  ///< share of matrices (with a share) at >= 0.95
  std::optional<double> median_candidates, median_tune_s, median_break_even, median_spearman,
      median_recall;
  // Claimed against delivered (over the matrices not left out):
  int busy_left_out = 0;  ///< its rows left out as busy (not counted in `matrices`)
  int delivered_count = 0;
  std::optional<double> delivered_geomean;
  int delivered_below = 0;             ///< delivered below kBelowBand (0.97)
  std::optional<double> below_share;   ///< delivered_below / delivered_count
  int undecided = 0;                   ///< delivered speedups the runs never agreed on
  int claimed_count = 0;               ///< both claimed and delivered
  std::optional<double> delivered_over_claimed_median;
  std::optional<double> delivered_over_claimed_p05, delivered_over_claimed_p95;
  std::optional<double> delivered_over_claimed_dev95;  ///< 95th percentile of |d/c - 1|
};

/// One implementation's side-by-side time on one matrix, against the memory bandwidth.
struct RooflineEntry {
  std::string name;  ///< a library baseline, "<shortcut> schedule", or a configuration
  std::string schedule;  ///< a configuration's winner (empty for the others)
  double median_s = 0;
  std::optional<double> effective_gbs;    ///< CSR-equivalent bytes / median (bench's GB/s)
  std::optional<double> share_of_stream;  ///< effective_gbs / the STREAM bandwidth beside it
};

/// A matrix's working set against the last-level cache and its implementations' bandwidth
/// (ablate's side-by-side row; the STREAM bandwidth with ablate --roofline).
struct RooflineRow {
  std::string matrix;
  std::int64_t nnz = 0;
  std::optional<double> traffic_bytes;  ///< CSR-equivalent bytes of one kernel call
  std::optional<double> llc_bytes;      ///< the largest cache level of the run's machine
  std::optional<double> stream_gbs;     ///< STREAM triad measured beside the runs
  bool busy = false;
  std::vector<RooflineEntry> entries;   ///< baselines, the csr schedule, then configurations
};

/// One kernel (with one dense size and thread count) of the database.
struct KernelReport {
  std::string kernel;
  int dense = 0;
  int threads = 0;
  std::string label;  ///< "spmv", or "spmv (dense 32, 2 threads)" when a kernel has several
  /// The matrices' working set (ablate's side-by-side rows): beyond the last-level cache, or
  /// within it (and rows of an older ablate, which did not record it). A kernel with matrices of
  /// both is two reports, labelled ", beyond the LLC" and ", cache-resident".
  bool beyond_llc = false;
  std::vector<RooflineRow> roofline;  ///< one per matrix with a side-by-side row
  std::vector<std::string> matrices;      ///< file names, in the database's order
  std::vector<std::string> configs;       ///< in the database's order
  std::vector<std::string> baselines;     ///< library baselines seen in side-by-side rows
  int matrices_without_oracle = 0;        ///< matrices with a side-by-side row but no oracle time
  int matrices_without_side_by_side = 0;  ///< matrices with no side-by-side row at all
  bool oracle_present = false;            ///< some matrix has the oracle configuration
  int busy_matrices = 0;  ///< matrices whose side-by-side row is busy: left out
  int busy_rows = 0;      ///< other (matrix, configuration) rows left out: their tune was busy
  int old_side_by_side = 0;  ///< side-by-side rows of an older ablate (one run, no csr schedule)
  std::vector<ConfigSummary> summaries;   ///< one per configuration, in `configs` order
  std::vector<MatrixConfigMetrics> rows;  ///< matrix-major, configurations in `configs` order
  /// Per matrix fingerprint: the library baselines' side-by-side medians (absent: no time).
  std::map<std::string, std::map<std::string, double>> library_times;
  std::vector<std::string> notes;  ///< sentences for the reader (missing oracle times, ...)
};

struct ReportData {
  ReportOptions options;
  std::vector<KernelReport> kernels;
  /// Distinct values of the rows' context blocks: cpu, compiler, flags, build_type,
  /// git_revision, threads, waco_version.
  std::map<std::string, std::vector<std::string>> context;
  std::string first_created, last_created;  ///< dates of the oldest and newest row
  std::size_t rows = 0;                     ///< ablation rows read
};

/// The report of `rows` (ResultsDb::ablation_rows()). Throws kernels::Error when there are no
/// rows ("no ablation rows in <db>"), none for options.kernel, a row is not a waco-ablation-run /
/// waco-ablation-bench object of version 1 to kAblationRowVersion, or an explicit oracle names no
/// configuration.
ReportData compute_report(const std::vector<heuristics::AblationRow>& rows,
                          const ReportOptions& options);

/// One plot: a gnuplot script writing SVG to "@OUTPUT@" and reading its data from "@DATA@"
/// (both replaced by draw_plots), and the data file's text.
struct PlotSpec {
  std::string kernel_label;
  std::string name;     ///< data-plot attribute: speedup-over-csr, share-of-oracle-cdf, ...
  std::string caption;
  std::string script;
  std::string data;
};

/// Every plot of a kernel that has data, in page order, and sentences for the plots left out
/// for lack of data (plot name -> reason). Rows marked busy are drawn in none.
struct PlotPlan {
  std::vector<PlotSpec> plots;
  std::vector<std::pair<std::string, std::string>> omitted;  ///< (name, reason)
};
PlotPlan plan_plots(const KernelReport& k, const std::string& oracle);

/// Runs `gnuplot` (posix_spawnp, no shell; the script in a temporary file) for each plot and
/// returns the SVG file it wrote (render_html inlines it with inline_svg). Throws
/// kernels::Error naming gnuplot when it cannot be run or fails (with its stderr), with the hint
/// "scripts/setup.sh installs gnuplot-nox".
std::vector<std::string> draw_plots(const std::vector<PlotSpec>& plots,
                                    const std::string& gnuplot = "gnuplot");

/// An SVG as gnuplot wrote it made ready for inlining: everything before "<svg" dropped, ids
/// and their references prefixed with `prefix`, the <title> set to `title`.
std::string inline_svg(const std::string& svg, const std::string& prefix, const std::string& title);

/// The HTML page: `plans[i]` and `svgs[i]` belong to data.kernels[i] (svgs[i][j] draws
/// plans[i].plots[j]). Self-contained: inline CSS and SVG, one inline self-check script.
std::string render_html(const ReportData& data, const std::vector<PlotPlan>& plans,
                        const std::vector<std::vector<std::string>>& svgs);

/// One line per (kernel, matrix, configuration) with every metric, after a header line.
std::string report_csv(const ReportData& data);

/// {"format": "waco-ablation-report", "version", "db", "oracle", "context", "created",
///  "kernels": [{kernel, dense, threads, label, matrices, configs, baselines,
///  matrices_without_oracle, matrices_without_side_by_side, notes, summaries, rows, plots}],
///  "plots": total}. `plans` may be empty (no plot names then).
nlohmann::json report_json(const ReportData& data, const std::vector<PlotPlan>& plans = {});

/// The text summary printed on stdout.
std::string report_text(const ReportData& data);

/// The CSV and JSON paths beside an HTML path: report.html -> report.csv, report.json.
/// Throws kernels::Error unless the path ends in .html or .htm.
std::pair<std::string, std::string> sibling_paths(const std::string& html_path);

}  // namespace waco::cli
