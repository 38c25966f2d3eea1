// Private to experiments/src/report_*.cpp: the names and formatting helpers that more than one
// stage of the ablation report uses. The stages (report.hpp is the module's public header):
//   report_metrics.cpp  metrics from the ablation rows (compute_report, within_noise)
//   report_plots.cpp    plot planning (plan_plots), running gnuplot (draw_plots) and inlining
//                       its SVG (inline_svg)
//   report_render.cpp   HTML, CSV, JSON and text (render_html, report_csv, report_json,
//                       report_text, sibling_paths)
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "waco/kernels/error.hpp"

namespace waco::cli::report_detail {

using kernels::Error;
using nlohmann::json;
using opt = std::optional<double>;

inline std::string plural(long n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

inline std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
inline std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace waco::cli::report_detail
