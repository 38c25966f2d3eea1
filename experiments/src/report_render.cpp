// The ablation report's rendering: the self-contained HTML page (render_html: tables, the inlined
// SVG plots and their self-check), the CSV, the JSON and the terminal summary.
#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli_common.hpp"
#include "final_runs.hpp"
#include "report_internal.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {

using namespace report_detail;

namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Formatting.

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
std::string csv_num(const opt& v) { return v ? fmt("%.10g", *v) : std::string(); }
json jnum(const opt& v) { return v ? json(*v) : json(); }
std::string times_text(const opt& v) { return v ? fmt("%.2f", *v) + "&times;" : "&ndash;"; }
std::string pct_text(const opt& v) { return v ? fmt("%.1f", 100 * *v) + "%" : "&ndash;"; }
std::string plain_pct(const opt& v) { return v ? fmt("%.1f", 100 * *v) + "%" : "-"; }
std::string plain_times(const opt& v) { return v ? fmt("%.2f", *v) + "x" : "-"; }
std::string secs_text(const opt& v) { return v ? format_seconds(*v) : "&ndash;"; }
std::string count_text(const opt& v) {
  if (!v) return "&ndash;";
  return std::abs(*v) >= 1e6 ? fmt("%.3g", *v) : fmt("%.0f", *v);
}
std::string corr_text(const opt& v) { return v ? fmt("%.3f", *v) : "&ndash;"; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// HTML

namespace {

constexpr const char* kStyle = R"CSS(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       margin: 1.5em auto; max-width: 1400px; padding: 0 1em; color: #1a1a1a; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.3em; border-bottom: 2px solid #ccc; padding-bottom: 0.15em; margin-top: 2em; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #d0d0d0; padding: 0.25em 0.5em; vertical-align: top; }
th { background: #f2f2f2; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.failed td { background: #fff0f0; }
tr.busy td { background: #f4f4f4; color: #777; }
.noise { color: #777; font-style: italic; }
.undecided { color: #7a4a00; font-size: 0.85em; }
.below { color: #a00000; font-weight: bold; }
table.context th { width: 11em; }
.desc { color: #555; font-size: 0.9em; }
.kind { color: #777; font-size: 0.85em; }
code.sched { font-size: 0.85em; word-break: break-all; display: inline-block; max-width: 32em; }
.err { color: #a00000; }
.notes li { color: #7a4a00; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(600px, 1fr)); gap: 1em; }
figure.plot { margin: 0; border: 1px solid #e0e0e0; padding: 0.5em; background: #fff; }
figure.plot svg { width: 100%; height: auto; display: block; }
figcaption { font-size: 0.85em; color: #333; margin-top: 0.3em; }
p.omitted { font-size: 0.9em; color: #555; }
#selfcheck { font-size: 0.8em; color: #777; margin-top: 3em; }
nav a { margin-right: 1em; }
)CSS";

constexpr const char* kSelfCheck = R"JS(
(function () {
  "use strict";
  var reasons = [];
  var figures = document.querySelectorAll("figure.plot");
  var expected = parseInt(document.body.getAttribute("data-expected-plots") || "0", 10);
  if (figures.length !== expected)
    reasons.push("expected " + expected + " plots, found " + figures.length);
  var good = 0;
  for (var i = 0; i !== figures.length; ++i) {
    var f = figures[i];
    var name = f.getAttribute("data-kernel") + "/" + f.getAttribute("data-plot");
    var svg = f.querySelector("svg");
    if (!svg) { reasons.push(name + ": no svg"); continue; }
    var box;
    try { box = svg.getBBox(); } catch (e) { reasons.push(name + ": getBBox: " + e.message); continue; }
    if (!(box.width > 0 && box.height > 0)) { reasons.push(name + ": empty bounding box"); continue; }
    if (svg.querySelectorAll("path, polyline, circle, text").length === 0) {
      reasons.push(name + ": nothing drawn"); continue;
    }
    if (!svg.querySelector("g[id$='gnuplot_plot_1']")) { reasons.push(name + ": no data set"); continue; }
    ++good;
  }
  var result = reasons.length ? "fail: " + reasons.join("; ") : "ok " + good;
  document.body.dataset.selfcheck = result;
  var p = document.getElementById("selfcheck");
  if (p) p.textContent = "Self-check of the plots: " + result;
})();
)JS";

std::string join_values(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : "; ") + s;
  return out;
}

std::string anchor(const std::string& label) {
  std::string out = "kernel-";
  for (char c : label) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return out;
}

void summary_table(std::ostringstream& h, const KernelReport& k, const std::string& oracle) {
  h << "<table class=\"summary\">\n<thead><tr><th>Configuration</th><th>Matrices</th>"
       "<th>Failures</th><th>Speedup over csr<br>geomean [min, max]</th>"
       "<th>Speedup over best library<br>geomean [min, max]</th>"
       "<th>Share of oracle<br>geomean</th><th>Within 5% of oracle</th>"
       "<th>Candidates measured<br>median</th><th>Tuning time<br>median</th>"
       "<th>Break-even calls<br>median</th><th>Spearman<br>median</th>"
       "<th>Recall@10<br>median</th><th>Delivered<br>geomean</th>"
       "<th>Delivered below 0.97&times;</th><th>Delivered / claimed<br>median</th>"
       "<th>|Delivered / claimed &minus; 1|<br>95th percentile</th><th>Left out<br>(busy)</th>"
       "</tr></thead>\n<tbody>\n";
  for (const ConfigSummary& s : k.summaries) {
    h << "<tr" << (s.failures ? " class=\"failed\"" : "") << "><td><b>" << html_escape(s.config)
      << "</b>" << (s.config == oracle ? " (oracle)" : "");
    if (!s.kind.empty()) h << " <span class=\"kind\">" << html_escape(s.kind) << "</span>";
    if (!s.description.empty()) h << "<br><span class=\"desc\">" << html_escape(s.description) << "</span>";
    h << "</td><td class=\"num\">" << s.matrices << "</td><td class=\"num\">" << s.failures
      << "</td><td class=\"num\">" << times_text(s.speedup_csr_geomean);
    if (s.speedup_csr_count)
      h << " [" << times_text(s.speedup_csr_min) << ", " << times_text(s.speedup_csr_max) << "]";
    h << "</td><td class=\"num\">" << times_text(s.speedup_library_geomean);
    if (s.speedup_library_count)
      h << " [" << times_text(s.speedup_library_min) << ", " << times_text(s.speedup_library_max) << "]";
    h << "</td><td class=\"num\">" << pct_text(s.share_geomean) << "</td><td class=\"num\">"
      << pct_text(s.within_5pct);
    if (s.share_count)
      h << " (" << static_cast<int>(std::lround(*s.within_5pct * s.share_count)) << "/"
        << s.share_count << ")";
    h << "</td><td class=\"num\">" << count_text(s.median_candidates) << "</td><td class=\"num\">"
      << secs_text(s.median_tune_s) << "</td><td class=\"num\">" << count_text(s.median_break_even)
      << "</td><td class=\"num\">" << corr_text(s.median_spearman) << "</td><td class=\"num\">"
      << corr_text(s.median_recall) << "</td><td class=\"num\">" << times_text(s.delivered_geomean);
    if (s.undecided) h << "<br><span class=\"undecided\">" << s.undecided << " undecided</span>";
    h << "</td><td class=\"num\">";
    if (s.below_share)
      h << "<span" << (s.delivered_below ? " class=\"below\"" : "") << ">"
        << pct_text(s.below_share) << "</span> (" << s.delivered_below << "/" << s.delivered_count
        << ")";
    else
      h << "&ndash;";
    h << "</td><td class=\"num\">" << corr_text(s.delivered_over_claimed_median);
    if (s.claimed_count) h << " (" << s.claimed_count << ")";
    h << "</td><td class=\"num\">" << pct_text(s.delivered_over_claimed_dev95)
      << "</td><td class=\"num\">" << s.busy_left_out << "</td></tr>\n";
  }
  h << "</tbody></table>\n";
}

/// "1.16&times; [1.02, 1.31]", in grey italics when the interval holds 1.0 (within noise).
std::string speedup_cell(const opt& v, const opt& lo, const opt& hi) {
  if (!v) return "&ndash;";
  std::string t = times_text(v);
  if (lo && hi) t += " <span class=\"desc\">[" + fmt("%.2f", *lo) + ", " + fmt("%.2f", *hi) + "]</span>";
  if (within_noise(lo, hi))
    return "<span class=\"noise\" title=\"the interval holds 1.0: within noise\">" + t +
           " &asymp;</span>";
  return t;
}

/// Whether a kernel report has a roofline table: its matrices are beyond the LLC, or ablate
/// measured the STREAM bandwidth beside them (--roofline).
bool has_roofline(const KernelReport& k) {
  if (k.beyond_llc) return true;
  return std::any_of(k.roofline.begin(), k.roofline.end(),
                     [](const RooflineRow& r) { return r.stream_gbs.has_value(); });
}

std::string mib_text(const opt& bytes) {
  return bytes ? fmt("%.1f MiB", *bytes / (1024.0 * 1024.0)) : "-";
}

void roofline_table(std::ostringstream& h, const KernelReport& k) {
  h << "<p>Working set: the bytes one call must move at least (CSR-equivalent: index and value of "
       "each nonzero, the row pointers, the dense operands once), against the largest cache of "
       "the machine. GB/s = those bytes / the side-by-side median; share of STREAM = that over "
       "the STREAM triad bandwidth measured beside the runs (ablate --roofline). Above 100% is "
       "possible only where a format moves fewer bytes, or the working set stays in a cache.</p>\n"
       "<table class=\"matrices\">\n<thead><tr><th>matrix</th><th>nnz</th><th>working set</th>"
       "<th>LLC</th><th>STREAM</th><th>implementation</th><th>median</th><th>GB/s</th>"
       "<th>of STREAM</th></tr></thead>\n<tbody>\n";
  for (const RooflineRow& r : k.roofline) {
    const std::size_t n = std::max<std::size_t>(1, r.entries.size());
    for (std::size_t i = 0; i < n; ++i) {
      h << "<tr" << (r.busy ? " class=\"busy\"" : "") << ">";
      if (i == 0) {
        const std::string span = " rowspan=\"" + std::to_string(n) + "\"";
        h << "<td" << span << ">" << html_escape(r.matrix) << (r.busy ? " <i>(busy)</i>" : "")
          << "</td><td" << span << ">" << r.nnz << "</td><td" << span << ">"
          << mib_text(r.traffic_bytes) << "</td><td" << span << ">" << mib_text(r.llc_bytes)
          << "</td><td" << span << ">"
          << (r.stream_gbs ? fmt("%.1f GB/s", *r.stream_gbs) : std::string("-")) << "</td>";
      }
      if (r.entries.empty()) {
        h << "<td colspan=\"4\">no time</td></tr>\n";
        continue;
      }
      const RooflineEntry& e = r.entries[i];
      h << "<td>" << html_escape(e.name)
        << (e.schedule.empty() ? "" : " <code>" + html_escape(e.schedule) + "</code>") << "</td><td>"
        << html_escape(format_seconds(e.median_s)) << "</td><td>"
        << (e.effective_gbs ? fmt("%.1f", *e.effective_gbs) : std::string("-")) << "</td><td>"
        << plain_pct(e.share_of_stream) << "</td></tr>\n";
    }
  }
  h << "</tbody>\n</table>\n";
}

void matrix_table(std::ostringstream& h, const KernelReport& k) {
  h << "<table class=\"matrices\">\n<thead><tr><th>Matrix</th><th>Configuration</th>"
       "<th>Status</th><th>Winner</th><th>Side-by-side time</th><th>&times; csr</th>"
       "<th>Claimed &rarr; delivered<br>(&times; faster csr)</th>"
       "<th>&times; best library</th><th>Share of oracle</th><th>Candidates</th>"
       "<th>Tuning time</th><th>Break-even calls</th><th>Spearman</th><th>Recall@10</th>"
       "</tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < k.rows.size();) {
    std::size_t j = i;
    while (j < k.rows.size() && k.rows[j].fingerprint == k.rows[i].fingerprint) ++j;
    const MatrixConfigMetrics& first = k.rows[i];
    for (std::size_t r = i; r < j; ++r) {
      const MatrixConfigMetrics& m = k.rows[r];
      const bool failed = m.status != "ok" && m.status != "missing";
      h << "<tr" << (m.busy ? " class=\"busy\"" : failed ? " class=\"failed\"" : "") << ">";
      if (r == i) {
        h << "<td rowspan=\"" << (j - i) << "\"><b>" << html_escape(first.matrix) << "</b><br>"
          << "<span class=\"desc\">nnz " << first.nnz;
        const auto lt = k.library_times.find(first.fingerprint);
        if (lt != k.library_times.end())
          for (const auto& [lib, t] : lt->second)
            h << "<br>" << html_escape(lib) << " " << format_seconds(t);
        h << "</span></td>";
      }
      h << "<td>" << html_escape(m.config) << "</td><td>" << html_escape(m.status);
      if (!m.verdict.empty()) h << "<br><span class=\"desc\">" << html_escape(m.verdict) << "</span>";
      if (!m.error.empty()) h << "<br><span class=\"err\">" << html_escape(m.error) << "</span>";
      if (m.busy)  // the reason in full on hover (and in report.csv / report.json)
        h << "<br><span class=\"err\" title=\"" << html_escape(m.busy_reason)
          << "\">busy: left out of the summaries and plots</span>";
      h << "</td><td>"
        << (m.winner.empty() ? std::string("&ndash;")
                             : "<code class=\"sched\">" + html_escape(m.winner) + "</code>")
        << "</td><td class=\"num\">";
      if (m.median_s) h << format_seconds(*m.median_s);
      else h << "<span class=\"err\">" << html_escape(m.time_error) << "</span>";
      h << "</td><td class=\"num\">" << times_text(m.speedup_over_csr) << "</td><td class=\"num\">"
        << speedup_cell(m.claimed_speedup, m.claimed_lo, m.claimed_hi) << "<br>&rarr; ";
      if (m.delivered_speedup && *m.delivered_speedup < kBelowBand && !m.undecided)
        h << "<span class=\"below\">"
          << speedup_cell(m.delivered_speedup, m.delivered_lo, m.delivered_hi) << "</span>";
      else
        h << speedup_cell(m.delivered_speedup, m.delivered_lo, m.delivered_hi);
      if (m.undecided && !m.busy)  // a busy row's runs were too disturbed to compare
        h << "<br><span class=\"undecided\">undecided: the " << m.delivered_runs
          << " runs never agreed</span>";
      h << "</td><td class=\"num\">" << times_text(m.speedup_over_best_library);
      if (m.speedup_over_best_library) h << "<br><span class=\"desc\">" << html_escape(m.best_library) << "</span>";
      h << "</td><td class=\"num\">" << pct_text(m.share_of_oracle) << "</td><td class=\"num\">"
        << count_text(m.candidates_measured) << "</td><td class=\"num\">" << secs_text(m.tune_s)
        << "</td><td class=\"num\">" << count_text(m.break_even_calls) << "</td><td class=\"num\">"
        << corr_text(m.spearman) << "</td><td class=\"num\">" << corr_text(m.recall_at_10)
        << "</td></tr>\n";
    }
    i = j;
  }
  h << "</tbody></table>\n";
}

}  // namespace

std::string render_html(const ReportData& data, const std::vector<PlotPlan>& plans,
                        const std::vector<std::vector<std::string>>& svgs) {
  WACO_ASSERT(plans.size() == data.kernels.size() && svgs.size() == data.kernels.size(),
              "render_html needs one plot plan and one SVG list per kernel");
  std::size_t expected = 0;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    WACO_ASSERT(plans[i].plots.size() == svgs[i].size(), "one SVG per planned plot");
    expected += plans[i].plots.size();
  }
  const std::string& oracle = data.options.oracle;
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"
    << html_escape(data.options.title) << "</title>\n<style>" << kStyle << "</style>\n</head>\n"
    << "<body data-expected-plots=\"" << expected << "\">\n<h1>" << html_escape(data.options.title)
    << "</h1>\n";

  // Context.
  h << "<table class=\"context\">\n<tr><th>Database</th><td><code>"
    << html_escape(data.options.db_path) << "</code> (" << data.rows << " ablation rows)</td></tr>\n";
  const std::pair<const char*, const char*> labels[] = {
      {"cpu", "CPU"}, {"cores_available", "Cores available"}, {"threads", "Threads"},
      {"compiler", "Compiler"}, {"flags", "Flags"}, {"build_type", "Build type"},
      {"git_revision", "Git revision"}, {"waco_version", "waco-hybrid version"},
      {"counters", "Counters"}};
  for (const auto& [key, label] : labels) {
    const auto it = data.context.find(key);
    if (it == data.context.end()) continue;
    h << "<tr><th>" << label << "</th><td>" << html_escape(join_values(it->second)) << "</td></tr>\n";
  }
  h << "<tr><th>Dates (UTC)</th><td>" << html_escape(data.first_created)
    << (data.last_created != data.first_created ? " to " + html_escape(data.last_created) : "")
    << "</td></tr>\n<tr><th>Matrices</th><td>";
  for (std::size_t i = 0; i < data.kernels.size(); ++i)
    h << (i ? ", " : "") << html_escape(data.kernels[i].label) << ": "
      << data.kernels[i].matrices.size();
  h << "</td></tr>\n<tr><th>Oracle</th><td>" << html_escape(oracle) << "</td></tr>\n</table>\n";
  if (data.kernels.size() > 1) {
    h << "<nav>";
    for (const auto& k : data.kernels)
      h << "<a href=\"#" << anchor(k.label) << "\">" << html_escape(k.label) << "</a>";
    h << "</nav>\n";
  }

  h << "<section class=\"howto\">\n<h2>How to read this report</h2>\n<p>Every configuration tuned "
       "each matrix on its own (its row gives what the search did: candidates measured, tuning "
       "time, break-even calls, the model's rank correlation). Afterwards every configuration's "
       "winner and the library baselines were timed <b>side by side</b>, interleaved, in one run "
       "per matrix; the speedups and shares in this report come only from those side-by-side "
       "medians, the only timings that may be compared with each other. Speedup over csr = csr's "
       "median / the winner's median; over the best library = the fastest library baseline's "
       "median / the winner's median. The <b>oracle</b> is the configuration <code>"
    << html_escape(oracle)
    << "</code> (choose another with <code>--oracle</code>); share of the oracle = the oracle "
       "winner's median / this winner's median (1 = as fast as the oracle, above 1 = faster, "
       "which measurement noise allows); &ldquo;within 5%&rdquo; counts matrices with a share of "
       "at least 0.95. Geometric means and medians are over the matrices that have the value. "
       "Break-even calls: how many kernel calls the tuning time takes to pay for itself by the "
       "winner's gain over csr.</p>\n<p><b>Claimed &rarr; delivered</b>: the speedup the tune "
       "claimed over the faster csr reference of its own side-by-side run, and the speedup its "
       "winner delivered over the faster of the csr baseline and the csr schedule in the final "
       "side-by-side runs (repeated in fresh processes until "
    << html_escape(kAgreeRule)
    << "; the median of the runs), each with its interval (claims: the tune's; delivered: from "
       "the lowest to the highest of the runs' 90% intervals of the median per-round ratio). "
       "An interval that holds 1.0 is within noise (grey, &asymp;); a delivered speedup the runs "
       "never agreed on is <i>undecided</i>; below 0.97&times; is in red. Delivered / claimed "
       "1 means the claim held. Rows marked <i>busy</i> (their side-by-side runs, or their "
       "tune, were disturbed by other processes) are listed but left out of every summary and "
       "plot; the notes say how many.</p>\n</section>\n";

  for (std::size_t ki = 0; ki < data.kernels.size(); ++ki) {
    const KernelReport& k = data.kernels[ki];
    h << "<section class=\"kernel\" id=\"" << anchor(k.label) << "\">\n<h2>" << html_escape(k.label)
      << "</h2>\n<p>" << plural(static_cast<long>(k.matrices.size()), "matrix", "matrices") << ", "
      << plural(static_cast<long>(k.configs.size()), "configuration", "configurations")
      << "; dense " << k.dense << ", " << plural(k.threads, "thread", "threads")
      << "; library baselines: ";
    for (std::size_t i = 0; i < k.baselines.size(); ++i)
      h << (i ? ", " : "") << html_escape(k.baselines[i]);
    if (k.baselines.empty()) h << "none";
    h << ".</p>\n";
    if (!k.notes.empty()) {
      h << "<ul class=\"notes\">\n";
      for (const auto& n : k.notes) h << "<li>" << html_escape(n) << "</li>\n";
      h << "</ul>\n";
    }
    h << "<h3>Summary</h3>\n";
    summary_table(h, k, oracle);
    h << "<h3>Plots</h3>\n<div class=\"plots\">\n";
    for (std::size_t pi = 0; pi < plans[ki].plots.size(); ++pi) {
      const PlotSpec& p = plans[ki].plots[pi];
      h << "<figure class=\"plot\" data-plot=\"" << html_escape(p.name) << "\" data-kernel=\""
        << html_escape(k.label) << "\">\n"
        << inline_svg(svgs[ki][pi], "k" + std::to_string(ki) + "p" + std::to_string(pi) + "-",
                      p.caption)
        << "\n<figcaption>" << html_escape(p.caption) << "</figcaption>\n</figure>\n";
    }
    h << "</div>\n";
    for (const auto& [name, reason] : plans[ki].omitted)
      h << "<p class=\"omitted\">Not drawn: <b>" << html_escape(name) << "</b> &mdash; "
        << html_escape(reason) << ".</p>\n";
    h << "<h3>Per matrix</h3>\n";
    matrix_table(h, k);
    if (has_roofline(k)) {
      h << "<h3>Roofline</h3>\n";
      roofline_table(h, k);
    }
    h << "</section>\n";
  }
  h << "<p id=\"selfcheck\">Self-check of the plots: did not run (JavaScript is off?)</p>\n"
    << "<script>" << kSelfCheck << "</script>\n</body>\n</html>\n";
  return h.str();
}

// ---------------------------------------------------------------------------------------------
// CSV, JSON, text

std::string report_csv(const ReportData& data) {
  std::ostringstream c;
  c << "kernel,dense,threads,matrix,file,fingerprint,nnz,config,kind,status,error,verdict,winner,"
       "median_s,time_error,csr_median_s,best_library,best_library_median_s,oracle_median_s,"
       "speedup_over_csr,speedup_over_best_library,share_of_oracle,within_5pct,"
       "candidates_measured,choice_s,measure_s,tune_s,break_even_calls,spearman,recall_at_10,"
       "tune_speedup_over_csr,claimed_speedup,claimed_lo,claimed_hi,claim_reference,"
       "claimed_within_noise,delivered_speedup,delivered_lo,delivered_hi,delivered_reference,"
       "delivered_runs,delivered_within_noise,undecided,delivered_below_0.97,"
       "delivered_over_claimed,busy,busy_reason\n";
  const auto flag = [](bool b) { return b ? "1" : "0"; };
  for (const KernelReport& k : data.kernels)
    for (const MatrixConfigMetrics& m : k.rows) {
      c << csv_field(k.kernel) << "," << k.dense << "," << k.threads << "," << csv_field(m.matrix)
        << "," << csv_field(m.file) << "," << m.fingerprint << "," << m.nnz << ","
        << csv_field(m.config) << "," << csv_field(m.kind) << "," << csv_field(m.status) << ","
        << csv_field(m.error) << "," << csv_field(m.verdict) << "," << csv_field(m.winner) << ","
        << csv_num(m.median_s) << "," << csv_field(m.time_error) << "," << csv_num(m.csr_median_s)
        << "," << csv_field(m.best_library) << "," << csv_num(m.best_library_median_s) << ","
        << csv_num(m.oracle_median_s) << "," << csv_num(m.speedup_over_csr) << ","
        << csv_num(m.speedup_over_best_library) << "," << csv_num(m.share_of_oracle) << ","
        << (m.share_of_oracle ? (*m.share_of_oracle >= kWithinOracleShare ? "1" : "0") : "") << ","
        << csv_num(m.candidates_measured) << "," << csv_num(m.choice_s) << ","
        << csv_num(m.measure_s) << "," << csv_num(m.tune_s) << "," << csv_num(m.break_even_calls)
        << "," << csv_num(m.spearman) << "," << csv_num(m.recall_at_10) << ","
        << csv_num(m.tune_speedup_over_csr) << "," << csv_num(m.claimed_speedup) << ","
        << csv_num(m.claimed_lo) << "," << csv_num(m.claimed_hi) << ","
        << csv_field(m.claim_reference) << ","
        << (m.claimed_lo ? flag(within_noise(m.claimed_lo, m.claimed_hi)) : "") << ","
        << csv_num(m.delivered_speedup) << "," << csv_num(m.delivered_lo) << ","
        << csv_num(m.delivered_hi) << "," << csv_field(m.delivered_reference) << ","
        << m.delivered_runs << ","
        << (m.delivered_lo ? flag(within_noise(m.delivered_lo, m.delivered_hi)) : "") << ","
        << flag(m.undecided) << ","
        << (m.delivered_speedup ? flag(*m.delivered_speedup < kBelowBand) : "") << ","
        << csv_num(m.delivered_over_claimed) << "," << flag(m.busy) << ","
        << csv_field(m.busy_reason) << "\n";
    }
  return c.str();
}

nlohmann::json report_json(const ReportData& data, const std::vector<PlotPlan>& plans) {
  json kernels = json::array();
  std::size_t total = 0;
  for (std::size_t ki = 0; ki < data.kernels.size(); ++ki) {
    const KernelReport& k = data.kernels[ki];
    json summaries = json::array(), rows = json::array(), plots = json::array(),
         omitted = json::object();
    for (const ConfigSummary& s : k.summaries)
      summaries.push_back(
          {{"config", s.config}, {"kind", s.kind}, {"description", s.description},
           {"matrices", s.matrices}, {"failures", s.failures}, {"timed", s.timed},
           {"speedup_over_csr", {{"count", s.speedup_csr_count}, {"geomean", jnum(s.speedup_csr_geomean)},
                                 {"min", jnum(s.speedup_csr_min)}, {"max", jnum(s.speedup_csr_max)}}},
           {"speedup_over_best_library",
            {{"count", s.speedup_library_count}, {"geomean", jnum(s.speedup_library_geomean)},
             {"min", jnum(s.speedup_library_min)}, {"max", jnum(s.speedup_library_max)}}},
           {"share_of_oracle", {{"count", s.share_count}, {"geomean", jnum(s.share_geomean)}}},
           {"within_5pct_of_oracle", jnum(s.within_5pct)},
           {"median_candidates_measured", jnum(s.median_candidates)},
           {"median_tune_s", jnum(s.median_tune_s)},
           {"median_break_even_calls", jnum(s.median_break_even)},
           {"median_spearman", jnum(s.median_spearman)},
           {"median_recall_at_10", jnum(s.median_recall)},
           {"busy_left_out", s.busy_left_out},
           {"delivered", {{"count", s.delivered_count}, {"geomean", jnum(s.delivered_geomean)},
                          {"below_0.97", s.delivered_below}, {"below_0.97_share", jnum(s.below_share)},
                          {"undecided", s.undecided}}},
           {"delivered_over_claimed",
            {{"count", s.claimed_count}, {"median", jnum(s.delivered_over_claimed_median)},
             {"p05", jnum(s.delivered_over_claimed_p05)},
             {"p95", jnum(s.delivered_over_claimed_p95)},
             {"abs_deviation_p95", jnum(s.delivered_over_claimed_dev95)}}}});
    for (const MatrixConfigMetrics& m : k.rows)
      rows.push_back({{"matrix", m.matrix}, {"file", m.file}, {"fingerprint", m.fingerprint},
                      {"nnz", m.nnz}, {"config", m.config}, {"kind", m.kind},
                      {"status", m.status}, {"error", m.error.empty() ? json() : json(m.error)},
                      {"verdict", m.verdict}, {"winner", m.winner}, {"median_s", jnum(m.median_s)},
                      {"time_error", m.time_error.empty() ? json() : json(m.time_error)},
                      {"csr_median_s", jnum(m.csr_median_s)}, {"best_library", m.best_library},
                      {"best_library_median_s", jnum(m.best_library_median_s)},
                      {"oracle_median_s", jnum(m.oracle_median_s)},
                      {"speedup_over_csr", jnum(m.speedup_over_csr)},
                      {"speedup_over_best_library", jnum(m.speedup_over_best_library)},
                      {"share_of_oracle", jnum(m.share_of_oracle)},
                      {"candidates_measured", jnum(m.candidates_measured)},
                      {"choice_s", jnum(m.choice_s)}, {"measure_s", jnum(m.measure_s)},
                      {"tune_s", jnum(m.tune_s)}, {"break_even_calls", jnum(m.break_even_calls)},
                      {"spearman", jnum(m.spearman)}, {"recall_at_10", jnum(m.recall_at_10)},
                      {"tune_speedup_over_csr", jnum(m.tune_speedup_over_csr)},
                      {"claimed", {{"speedup", jnum(m.claimed_speedup)},
                                   {"lo", jnum(m.claimed_lo)}, {"hi", jnum(m.claimed_hi)},
                                   {"reference", m.claim_reference},
                                   {"within_noise", within_noise(m.claimed_lo, m.claimed_hi)}}},
                      {"delivered", {{"speedup", jnum(m.delivered_speedup)},
                                     {"lo", jnum(m.delivered_lo)}, {"hi", jnum(m.delivered_hi)},
                                     {"reference", m.delivered_reference},
                                     {"runs", m.delivered_runs}, {"undecided", m.undecided},
                                     {"within_noise", within_noise(m.delivered_lo, m.delivered_hi)}}},
                      {"delivered_over_claimed", jnum(m.delivered_over_claimed)},
                      {"busy", m.busy},
                      {"busy_reason", m.busy_reason.empty() ? json() : json(m.busy_reason)}});
    if (ki < plans.size()) {
      for (const auto& p : plans[ki].plots) plots.push_back(p.name);
      for (const auto& [name, reason] : plans[ki].omitted) omitted[name] = reason;
      total += plans[ki].plots.size();
    }
    json roofline = json::array();
    for (const RooflineRow& r : k.roofline) {
      json entries = json::array();
      for (const RooflineEntry& e : r.entries)
        entries.push_back({{"name", e.name},
                           {"schedule", e.schedule.empty() ? json() : json(e.schedule)},
                           {"median_s", e.median_s},
                           {"effective_gbs", jnum(e.effective_gbs)},
                           {"share_of_stream", jnum(e.share_of_stream)}});
      roofline.push_back({{"matrix", r.matrix}, {"nnz", r.nnz},
                          {"traffic_bytes", jnum(r.traffic_bytes)},
                          {"llc_bytes", jnum(r.llc_bytes)}, {"stream_gbs", jnum(r.stream_gbs)},
                          {"busy", r.busy}, {"entries", entries}});
    }
    kernels.push_back({{"kernel", k.kernel}, {"dense", k.dense}, {"threads", k.threads},
                       {"label", k.label}, {"beyond_llc", k.beyond_llc},
                       {"roofline", roofline}, {"matrices", k.matrices.size()},
                       {"matrix_names", k.matrices}, {"configs", k.configs},
                       {"baselines", k.baselines}, {"oracle_present", k.oracle_present},
                       {"matrices_without_oracle", k.matrices_without_oracle},
                       {"matrices_without_side_by_side", k.matrices_without_side_by_side},
                       {"busy_matrices_left_out", k.busy_matrices},
                       {"busy_rows_left_out", k.busy_rows},
                       {"old_side_by_side_rows", k.old_side_by_side},
                       {"notes", k.notes}, {"summaries", summaries}, {"rows", rows},
                       {"plots", plots}, {"plots_omitted", omitted}});
  }
  json context = json::object();
  for (const auto& [key, values] : data.context)
    context[key] = values.size() == 1 ? json(values[0]) : json(values);
  return {{"format", "waco-ablation-report"}, {"version", kReportVersion},
          {"title", data.options.title}, {"db", data.options.db_path},
          {"oracle", data.options.oracle}, {"rows_read", data.rows}, {"context", context},
          {"created", {{"first", data.first_created}, {"last", data.last_created}}},
          {"kernels", kernels}, {"plots", total}};
}

std::string report_text(const ReportData& data) {
  std::ostringstream t;
  for (const KernelReport& k : data.kernels) {
    t << k.label << ": " << plural(static_cast<long>(k.matrices.size()), "matrix", "matrices")
      << ", " << plural(static_cast<long>(k.configs.size()), "configuration", "configurations")
      << " (oracle: " << data.options.oracle << ")\n";
    for (const auto& n : k.notes) t << "  note: " << n << "\n";
    char line[320];
    std::snprintf(line, sizeof line, "  %-22s %8s %5s %10s %10s %8s %8s %10s %9s %7s %7s %7s\n",
                  "configuration", "matrices", "fail", "x csr", "x best lib", "oracle",
                  "within5%", "tune (med)", "delivered", "<0.97x", "d/c med", "dev95");
    t << line;
    for (const ConfigSummary& s : k.summaries) {
      const std::string below =
          s.delivered_count ? std::to_string(s.delivered_below) + "/" +
                                  std::to_string(s.delivered_count)
                            : "-";
      std::snprintf(line, sizeof line,
                    "  %-22.22s %8d %5d %10s %10s %8s %8s %10s %9s %7s %7s %7s\n",
                    s.config.c_str(), s.matrices, s.failures,
                    plain_times(s.speedup_csr_geomean).c_str(),
                    plain_times(s.speedup_library_geomean).c_str(),
                    plain_pct(s.share_geomean).c_str(), plain_pct(s.within_5pct).c_str(),
                    s.median_tune_s ? format_seconds(*s.median_tune_s).c_str() : "-",
                    plain_times(s.delivered_geomean).c_str(), below.c_str(),
                    s.delivered_over_claimed_median
                        ? fmt("%.3f", *s.delivered_over_claimed_median).c_str()
                        : "-",
                    plain_pct(s.delivered_over_claimed_dev95).c_str());
      t << line;
    }
    t << "  (delivered: geomean of the speedups over the faster of csr and the csr schedule; "
         "<0.97x: matrices delivered below 0.97x; d/c med: median of delivered / claimed; dev95: "
         "95th percentile of |delivered / claimed - 1|)\n";
    if (!has_roofline(k)) continue;
    t << "  roofline (working set against the LLC; GB/s: CSR-equivalent bytes / side-by-side "
         "median; % of the STREAM triad measured beside the runs):\n";
    for (const RooflineRow& r : k.roofline) {
      t << "  " << r.matrix << (r.busy ? " (busy)" : "") << ": " << r.nnz << " nnz, working set "
        << mib_text(r.traffic_bytes) << ", LLC " << mib_text(r.llc_bytes) << ", STREAM "
        << (r.stream_gbs ? fmt("%.1f GB/s", *r.stream_gbs) : std::string("-")) << "\n";
      for (const RooflineEntry& e : r.entries) {
        char line[320];
        std::snprintf(line, sizeof line, "    %-24.24s %12s %8s GB/s %7s\n", e.name.c_str(),
                      format_seconds(e.median_s).c_str(),
                      e.effective_gbs ? fmt("%.1f", *e.effective_gbs).c_str() : "-",
                      plain_pct(e.share_of_stream).c_str());
        t << line;
      }
    }
  }
  return t.str();
}

std::pair<std::string, std::string> sibling_paths(const std::string& html_path) {
  const fs::path p(html_path);
  const std::string ext = p.extension().string();
  if (ext != ".html" && ext != ".htm")
    throw Error("the report's output '" + html_path + "' does not end in .html",
                "give -o NAME.html; NAME.csv and NAME.json are written beside it");
  fs::path csv = p, js = p;
  csv.replace_extension(".csv");
  js.replace_extension(".json");
  return {csv.string(), js.string()};
}

}  // namespace waco::cli
