// The ablation report's plots: planning them (plan_plots: a gnuplot script and its data per plot,
// pure), running gnuplot (draw_plots, the report's one process) and inlining its SVG in the page
// (inline_svg).
#include "report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>

#include "cli_common.hpp"
#include "final_runs.hpp"
#include "report_internal.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/process.hpp"

namespace waco::cli {

using namespace report_detail;

namespace {


constexpr const char* kSetupHint = "scripts/setup.sh installs gnuplot-nox";

/// A gnuplot single-quoted string ('' inside).
std::string gp_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out + "'";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Plots

namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                         "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#00008b", "#556b2f"};
const int kPoints[] = {7, 5, 9, 11, 13, 15, 6, 4, 8, 10, 12, 14};
constexpr int kStyles = 12;

std::string prelude(int width, int height) {
  std::string s = "set terminal svg size " + std::to_string(width) + "," + std::to_string(height) +
                  " dynamic enhanced font 'sans,10' background rgb 'white'\n"
                  "set output '@OUTPUT@'\n"
                  "set encoding utf8\n"
                  "set border 3\nset tics nomirror\n"
                  "set grid lc rgb '#e0e0e0' lw 1\n"
                  "set key outside right top vertical Left reverse noenhanced samplen 2 spacing 1.1\n";
  for (int i = 0; i < kStyles; ++i)
    s += "set linetype " + std::to_string(i + 1) + " lc rgb '" + kColors[i] + "' lw 1.5 pt " +
         std::to_string(kPoints[i]) + " ps 0.9\n";
  s += "set linetype cycle " + std::to_string(kStyles) + "\n";
  return s;
}

/// The style index (1-based linetype) of a configuration: its position among the kernel's.
int style_of(const KernelReport& k, const std::string& config) {
  const auto it = std::find(k.configs.begin(), k.configs.end(), config);
  return static_cast<int>(it - k.configs.begin()) % kStyles + 1;
}

/// Per configuration (in order), the values of `f` present on its matrices.
template <class F>
std::vector<std::pair<std::string, std::vector<double>>> series(const KernelReport& k, F f) {
  std::vector<std::pair<std::string, std::vector<double>>> out;
  for (const std::string& c : k.configs) {
    std::vector<double> v;
    for (const auto& m : k.rows)
      if (m.config == c)
        if (const opt x = f(m)) v.push_back(*x);
    if (!v.empty()) out.push_back({c, std::move(v)});
  }
  return out;
}

std::string num_text(double v) { return fmt("%.10g", v); }

/// Appends a configuration's points (`rows`) as data block number `block` (then incremented) and
/// its plot clause, `using_with` giving the columns and style ("1:2 with points"), in the
/// configuration's colour.
void add_block(const KernelReport& k, const std::string& config, const std::string& rows,
               const std::string& using_with, int& block, std::string& data,
               std::string& clauses) {
  data += "# " + config + "\n" + rows + "\n\n";
  clauses += std::string(clauses.empty() ? "" : ", ") + "'@DATA@' index " +
             std::to_string(block++) + " using " + using_with + " lt " +
             std::to_string(style_of(k, config)) + " ps 1 title " + gp_quote(config) +
             " noenhanced";
}

/// Sorted values against their rank, one data block per configuration; returns the plot clause.
std::string ranked(const KernelReport& k,
                   const std::vector<std::pair<std::string, std::vector<double>>>& s,
                   std::string& data) {
  std::string clauses;
  for (std::size_t i = 0; i < s.size(); ++i) {
    std::vector<double> v = s[i].second;
    std::sort(v.begin(), v.end());
    data += "# " + s[i].first + "\n";
    for (std::size_t r = 0; r < v.size(); ++r)
      data += std::to_string(r + 1) + " " + num_text(v[r]) + "\n";
    data += "\n\n";
    clauses += std::string(clauses.empty() ? "" : ", ") + "'@DATA@' index " + std::to_string(i) +
               " using 1:2 with linespoints lt " + std::to_string(style_of(k, s[i].first)) +
               " title " + gp_quote(s[i].first) + " noenhanced";
  }
  return clauses;
}

/// A log-scale axis range around `values` (and 1 when `with_one`) with room at both ends, so
/// that no point sits on the border.
/// Followed by labelled tics for `axis` ("x" or "y") when the range spans less than three
/// decades (gnuplot labels only the powers of ten otherwise): 1, 2 and 5 times the powers of
/// ten, finer for narrower ranges.
std::string log_range(const std::vector<std::pair<std::string, std::vector<double>>>& s,
                      bool with_one, const char* axis = nullptr) {
  double lo = with_one ? 1.0 : HUGE_VAL, hi = with_one ? 1.0 : 0.0;
  for (const auto& x : s)
    for (double v : x.second)
      if (v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(lo <= hi)) lo = hi = 1.0;
  lo /= 1.6;
  hi *= 1.6;
  std::string out = "[" + num_text(lo) + ":" + num_text(hi) + "]\n";
  if (axis && hi / lo < 1000) {
    const std::vector<double> mantissas =
        hi / lo >= 30  ? std::vector<double>{1, 2, 5}
        : hi / lo >= 4 ? std::vector<double>{1, 1.5, 2, 3, 5, 7}
                       : std::vector<double>{1, 1.2, 1.4, 1.6, 1.8, 2, 2.5, 3, 4, 5, 6, 7, 8, 9};
    std::string tics;
    for (double decade = std::pow(10.0, std::floor(std::log10(lo))); decade <= hi; decade *= 10)
      for (double f : mantissas)
        if (f * decade >= lo && f * decade <= hi)
          tics += std::string(tics.empty() ? "" : ", ") + "'" + fmt("%g", f * decade) + "' " +
                  num_text(f * decade);
    if (!tics.empty()) out += std::string("set ") + axis + "tics (" + tics + ")\n";
  }
  return out;
}

std::size_t longest(const std::vector<std::pair<std::string, std::vector<double>>>& s) {
  std::size_t n = 0;
  for (const auto& x : s) n = std::max(n, x.second.size());
  return n;
}

std::string rank_axis(std::size_t n) {
  std::string s = "set xrange [0.5:" + num_text(static_cast<double>(n) + 0.5) + "]\n";
  if (n <= 20) s += "set xtics 1\n";
  return s + "set mxtics 1\n";
}

}  // namespace

namespace {

/// Claimed (x) against delivered (y) speedups, one point per matrix and colour per
/// configuration, with their intervals as error bars where they exist; the diagonal is
/// "delivered as claimed", the dotted line 0.97.
void claimed_vs_delivered(const KernelReport& k, PlotPlan& plan) {
  std::vector<std::pair<std::string, std::vector<double>>> values;  // for the axis range
  std::string data, clauses;
  int block = 0;
  for (const std::string& c : k.configs) {
    std::string rows;
    std::vector<double> v;
    for (const auto& m : k.rows) {
      if (m.config != c || !m.claimed_speedup || !m.delivered_speedup) continue;
      const double x = *m.claimed_speedup, y = *m.delivered_speedup;
      if (!(x > 0 && y > 0)) continue;
      const double xlo = m.claimed_lo.value_or(x), xhi = m.claimed_hi.value_or(x);
      const double ylo = m.delivered_lo.value_or(y), yhi = m.delivered_hi.value_or(y);
      rows += num_text(x) + " " + num_text(y) + " " + num_text(std::min(x, xlo)) + " " +
              num_text(std::max(x, xhi)) + " " + num_text(std::min(y, ylo)) + " " +
              num_text(std::max(y, yhi)) + "\n";
      v.insert(v.end(), {std::min(x, xlo), std::max(x, xhi), std::min(y, ylo), std::max(y, yhi)});
    }
    if (rows.empty()) continue;
    values.push_back({c, v});
    add_block(k, c, rows, "1:2:3:4:5:6 with xyerrorbars", block, data, clauses);
  }
  if (clauses.empty()) {
    plan.omitted.push_back({"claimed-vs-delivered",
                            "no configuration has both a claimed (tune) and a delivered "
                            "(side-by-side) speedup"});
    return;
  }
  PlotSpec p{k.label, "claimed-vs-delivered",
             "Claimed against delivered: the speedup each tune claimed (x) and the one its "
             "winner delivered over the faster of csr and the csr schedule in the side-by-side "
             "runs (y), one point per matrix, bars: their intervals; log scales. On the diagonal "
             "a claim held; below it the tune claimed too much; the dotted line is 0.97.",
             prelude(680, 420), data};
  // The same range on both axes (the diagonal at 45 degrees), labelled tics on each.
  p.script += "set logscale xy 2\nset format x '%g'\nset format y '%g'\nset xrange " +
              log_range(values, true, "x") + "set yrange " + log_range(values, true, "y") +
              "set size ratio -1\n"
              "set xlabel 'claimed speedup (tune, log scale)'\n"
              "set ylabel 'delivered speedup (side by side, log scale)'\n"
              "plot " + clauses + ", x with lines dt 2 lw 1 lc rgb '#444444' title "
              "'delivered = claimed', " + num_text(kBelowBand) +
              " with lines dt 3 lw 1 lc rgb '#a00000' title '0.97'\n";
  plan.plots.push_back(std::move(p));
}

}  // namespace

PlotPlan plan_plots(const KernelReport& all, const std::string& oracle) {
  // Rows marked busy are in no plot.
  KernelReport k = all;
  k.rows.erase(std::remove_if(k.rows.begin(), k.rows.end(),
                              [](const MatrixConfigMetrics& m) { return m.busy; }),
               k.rows.end());
  PlotPlan plan;
  const std::string no_time =
      "no configuration has a side-by-side time (no side-by-side rows, or every winner failed)";

  // (1) Speedup over csr, figure-13 style.
  {
    const auto s = series(k, [](const MatrixConfigMetrics& m) { return m.speedup_over_csr; });
    if (s.empty()) {
      plan.omitted.push_back({"speedup-over-csr", no_time + " beside csr"});
    } else {
      PlotSpec p{k.label, "speedup-over-csr",
                 "Speedup over csr per configuration: each configuration's matrices sorted by "
                 "speedup (x: rank), log scale; the dashed line is csr (1.0).",
                 prelude(680, 360), ""};
      p.script += rank_axis(longest(s)) +
                  "set logscale y 2\nset format y '%g'\nset yrange " + log_range(s, true, "y") +
                  "set xlabel 'matrices, sorted by speedup (rank)'\n"
                  "set ylabel 'speedup over csr (side by side, log scale)'\n";
      p.script += "plot " + ranked(k, s, p.data) +
                  ", 1 with lines dt 2 lw 1 lc rgb '#444444' title 'csr = 1'\n";
      plan.plots.push_back(std::move(p));
    }
  }

  // (1b) Claimed against delivered.
  claimed_vs_delivered(k, plan);

  // (2) CDF of the share of the oracle.
  const auto shares = series(k, [](const MatrixConfigMetrics& m) { return m.share_of_oracle; });
  const std::string no_share =
      k.oracle_present ? "no matrix has side-by-side times of both the oracle (" + oracle +
                             ") and another configuration"
                       : "the oracle configuration '" + oracle + "' is not in this run";
  double share_lo = 0.9, share_hi = 1.05;
  for (const auto& [c, v] : shares)
    for (double x : v) share_lo = std::min(share_lo, x * 0.95), share_hi = std::max(share_hi, x * 1.03);
  const std::string share_range = "[" + num_text(share_lo) + ":" + num_text(share_hi) + "]";
  if (shares.empty()) {
    plan.omitted.push_back({"share-of-oracle-cdf", no_share});
  } else {
    PlotSpec p{k.label, "share-of-oracle-cdf",
               "Share of the oracle (" + oracle +
                   "), as a CDF: the fraction of matrices (y) on which a configuration reaches "
                   "at most that share (x) of the oracle's speed; the dotted line is 95%.",
               prelude(680, 360), ""};
    p.script += "set xrange " + share_range + "\nset yrange [0:1.06]\n"
                "set xlabel 'share of the oracle (oracle time / configuration time; 1 = as fast)'\n"
                "set ylabel 'fraction of matrices'\n"
                "set arrow from " + num_text(kWithinOracleShare) + ", graph 0 to " +
                num_text(kWithinOracleShare) + ", graph 1 nohead dt 3 lc rgb '#444444'\n";
    std::string clauses;
    for (std::size_t i = 0; i < shares.size(); ++i) {
      std::vector<double> v = shares[i].second;
      std::sort(v.begin(), v.end());
      p.data += "# " + shares[i].first + "\n" + num_text(v[0]) + " 0\n";
      for (std::size_t r = 0; r < v.size(); ++r)
        p.data += num_text(v[r]) + " " + num_text(static_cast<double>(r + 1) / v.size()) + "\n";
      p.data += num_text(share_hi) + " 1\n\n\n";
      clauses += std::string(clauses.empty() ? "" : ", ") + "'@DATA@' index " + std::to_string(i) +
                 " using 1:2 with steps lt " + std::to_string(style_of(k, shares[i].first)) +
                 " title " + gp_quote(shares[i].first) + " noenhanced, '@DATA@' index " +
                 std::to_string(i) + " every ::1::" + std::to_string(v.size()) +
                 " using 1:2 with points lt " + std::to_string(style_of(k, shares[i].first)) +
                 " notitle";
    }
    p.script += "plot " + clauses + "\n";
    plan.plots.push_back(std::move(p));
  }

  // (3) Tuning time against the share of the oracle.
  {
    std::vector<std::pair<std::string, std::vector<double>>> tune_times;
    std::string data, clauses;
    int block = 0;
    for (const std::string& c : k.configs) {
      std::string rows;
      for (const auto& m : k.rows)
        if (m.config == c && m.tune_s && *m.tune_s > 0 && m.share_of_oracle) {
          rows += num_text(*m.tune_s) + " " + num_text(*m.share_of_oracle) + "\n";
          tune_times.push_back({c, {*m.tune_s}});
        }
      if (rows.empty()) continue;
      add_block(k, c, rows, "1:2 with points", block, data, clauses);
    }
    if (clauses.empty()) {
      plan.omitted.push_back({"tune-time-vs-share",
                              shares.empty() ? no_share
                                             : "no configuration row has a tuning time"});
    } else {
      PlotSpec p{k.label, "tune-time-vs-share",
                 "What the tuning costs and what it gets: tuning time (log scale) against the "
                 "share of the oracle, one point per matrix; the dotted line is 95%.",
                 prelude(680, 360), data};
      p.script += "set logscale x 10\nset format x '%g'\nset xrange " +
                  log_range(tune_times, false, "x") + "set yrange " + share_range + "\n"
                  "set xlabel 'tuning time (s, log scale)'\n"
                  "set ylabel 'share of the oracle'\n"
                  "set arrow from graph 0, first " + num_text(kWithinOracleShare) +
                  " to graph 1, first " + num_text(kWithinOracleShare) +
                  " nohead dt 3 lc rgb '#444444'\n"
                  "plot " + clauses + "\n";
      plan.plots.push_back(std::move(p));
    }
  }

  // (4) Spearman and (5) recall@10 per matrix, where a model ran.
  auto model_plot = [&](const char* name, const std::string& why_none, opt MatrixConfigMetrics::*f,
                        const char* range, const char* ylabel, const std::string& caption) {
    const auto s = series(k, [f](const MatrixConfigMetrics& m) { return m.*f; });
    if (s.empty()) {
      plan.omitted.push_back({name, why_none});
      return;
    }
    PlotSpec p{k.label, name, caption, prelude(680, 340), ""};
    p.script += rank_axis(longest(s)) + "set yrange " + range + "\n"
                "set xlabel 'matrices, sorted by value (rank)'\nset ylabel '" + ylabel + "'\n";
    p.script += "plot " + ranked(k, s, p.data) + "\n";
    plan.plots.push_back(std::move(p));
  };
  model_plot("spearman", "no configuration has a Spearman value (no model ran)",
             &MatrixConfigMetrics::spearman, "[-1.05:1.05]",
             "Spearman rank correlation",
             "How well the cost model ordered the candidates it measured: Spearman correlation "
             "of its ranking with the measured times, per matrix (sorted, x: rank).");
  model_plot("recall-at-10",
             "no configuration has a recall@10 value (no approximate nearest-neighbour search "
             "ran, e.g. every model search scored its space exactly)",
             &MatrixConfigMetrics::recall_at_10, "[0:1.05]",
             "recall at 10",
             "Recall@10 of the approximate nearest-neighbour search against the exact top 10, "
             "per matrix (sorted, x: rank).");

  // (6) Break-even calls per configuration.
  {
    const auto s = series(k, [](const MatrixConfigMetrics& m) {
      return m.break_even_calls && *m.break_even_calls > 0 ? m.break_even_calls : std::nullopt;
    });
    if (s.empty()) {
      plan.omitted.push_back({"break-even-calls",
                              "no configuration has a break-even count (none gained over csr)"});
    } else {
      PlotSpec p{k.label, "break-even-calls",
                 "Break-even calls: how many kernel calls the tuning time takes to pay off by "
                 "the winner's gain over csr (log scale), one point per matrix; matrices without "
                 "a gain are left out.",
                 prelude(680, 360), ""};
      std::string tics, clauses;
      for (std::size_t i = 0; i < s.size(); ++i) {
        tics += std::string(tics.empty() ? "" : ", ") + gp_quote(s[i].first) + " " +
                std::to_string(i + 1);
        p.data += "# " + s[i].first + "\n";
        for (std::size_t j = 0; j < s[i].second.size(); ++j) {
          const double jitter = 0.08 * (static_cast<double>(j % 5) - 2.0);
          p.data += num_text(static_cast<double>(i + 1) + jitter) + " " +
                    num_text(s[i].second[j]) + "\n";
        }
        p.data += "\n\n";
        clauses += std::string(clauses.empty() ? "" : ", ") + "'@DATA@' index " +
                   std::to_string(i) + " using 1:2 with points lt " +
                   std::to_string(style_of(k, s[i].first)) + " ps 1 title " +
                   gp_quote(s[i].first) + " noenhanced";
      }
      p.script += "set xrange [0.4:" + num_text(static_cast<double>(s.size()) + 0.6) + "]\n"
                  "set xtics (" + tics + ") rotate by -25 noenhanced\n"
                  "set logscale y 10\nset format y '%g'\nset yrange " + log_range(s, false, "y") +
                  "set grid noxtics\n"
                  "set xlabel 'configuration' offset 0,-1\n"
                  "set ylabel 'kernel calls to break even (log scale)'\n"
                  "plot " + clauses + "\n";
      plan.plots.push_back(std::move(p));
    }
  }
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Running gnuplot

namespace {


void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

std::vector<std::string> draw_plots(const std::vector<PlotSpec>& plots, const std::string& gnuplot) {
  std::vector<std::string> svgs;
  if (plots.empty()) return svgs;
  kernels::TempDir dir("waco-report", "the plots");
  for (std::size_t i = 0; i < plots.size(); ++i) {
    const PlotSpec& p = plots[i];
    const std::string stem = dir.path() + "/plot" + std::to_string(i);
    std::string script = p.script;
    replace_all(script, "@OUTPUT@", stem + ".svg");
    replace_all(script, "@DATA@", stem + ".dat");
    kernels::write_text_file(stem + ".dat", p.data);  // in the plots' temporary folder
    kernels::write_text_file(stem + ".gp", script);
    int status = 0;
    try {
      status = kernels::run_process({gnuplot, stem + ".gp"}, "/dev/null", stem + ".err",
                                    /*live_stderr=*/false, /*timeout_s=*/120);
    } catch (const Error& e) {  // not startable, or no plot within the timeout
      throw Error("cannot run gnuplot ('" + gnuplot + "'): " + e.what() +
                      "; it draws the report's plots",
                  kSetupHint);
    }
    std::string err = kernels::read_text_file(stem + ".err");
    if (err.size() > 2000) err = "..." + err.substr(err.size() - 2000);
    while (!err.empty() && std::isspace(static_cast<unsigned char>(err.back()))) err.pop_back();
    if (status != 0)  // run_process: 128 + the signal when killed
      throw Error("gnuplot ('" + gnuplot + "') failed drawing plot " + p.name + " of " +
                      p.kernel_label + " (" +
                      (status < 128 ? "exit " + std::to_string(status)
                                    : "signal " + std::to_string(status - 128)) +
                      ")" + (err.empty() ? std::string() : ": " + err),
                  kSetupHint);
    const std::string svg = kernels::read_text_file(stem + ".svg");
    if (svg.find("<svg") == std::string::npos)
      throw Error("gnuplot ('" + gnuplot + "') wrote no SVG for plot " + p.name + " of " +
                      p.kernel_label + (err.empty() ? std::string() : ": " + err),
                  "does this gnuplot have the svg terminal? " + std::string(kSetupHint));
    svgs.push_back(svg);
  }
  return svgs;
}

std::string inline_svg(const std::string& svg, const std::string& prefix, const std::string& title) {
  const std::size_t start = svg.find("<svg");
  WACO_ASSERT(start != std::string::npos, "inline_svg needs an <svg element");
  std::string s = svg.substr(start);
  // Ids and their references, unique per plot (several SVGs share one document).
  for (const char* pat : {" id='", " id=\"", "href='#", "href=\"#", "url(#"}) {
    const std::string from = pat;
    replace_all(s, from, from + prefix);
  }
  const std::size_t t0 = s.find("<title>"), t1 = s.find("</title>");
  if (t0 != std::string::npos && t1 != std::string::npos && t0 < t1)
    s.replace(t0, t1 - t0, "<title>" + html_escape(title));
  s.insert(4, " class=\"gp\" role=\"img\" aria-label=\"" + html_escape(title) + "\"");
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

}  // namespace waco::cli
