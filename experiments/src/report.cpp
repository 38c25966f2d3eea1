// The ablation report: metrics from the ablation rows, gnuplot plots, HTML / CSV / JSON.
#include "report.hpp"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <tuple>
#include <sstream>

#include "cli_common.hpp"
#include "final_runs.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/process.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {
namespace {

namespace fs = std::filesystem;
using kernels::Error;
using nlohmann::json;
using opt = std::optional<double>;

constexpr const char* kSideBySide = "side-by-side";
constexpr const char* kSetupHint = "scripts/setup.sh installs gnuplot-nox";

// ---------------------------------------------------------------------------------------------
// Reading the rows.

/// A finite number field, or nothing.
opt number(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  return std::isfinite(v) ? opt(v) : std::nullopt;
}
/// A positive time field (median_s), or nothing.
opt seconds(const json& j, const char* key) {
  const opt v = number(j, key);
  return v && *v > 0 ? v : std::nullopt;
}
std::string text(const json& j, const char* key) {
  if (!j.is_object()) return {};
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
const json& member(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  const auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

void check_format(const heuristics::AblationRow& r, const std::string& db) {
  const char* want = r.config == kSideBySide ? "waco-ablation-bench" : "waco-ablation-run";
  const std::string where = "ablation row of " + r.path + " (" + r.kernel + ", " + r.config +
                            ") in " + db;
  if (!r.row.is_object() || text(r.row, "format") != want)
    throw Error(where + " is not a " + want + " object",
                "the database was written by another program; run waco-hybrid ablate again");
  const opt v = number(r.row, "version");
  if (!v || *v < 1 || *v > kAblationRowVersion)
    throw Error(where + " has version " + (v ? std::to_string(static_cast<int>(*v)) : "none") +
                    ", this waco-hybrid reads versions 1 to " +
                    std::to_string(kAblationRowVersion),
                "use the waco-hybrid that wrote the database, or run ablate again");
}

std::string basename_of(const std::string& path) { return fs::path(path).filename().string(); }

// ---------------------------------------------------------------------------------------------
// Statistics.

std::vector<double> present(const std::vector<opt>& v) {
  std::vector<double> out;
  for (const opt& x : v)
    if (x) out.push_back(*x);
  return out;
}
opt geomean(const std::vector<double>& v) {
  double s = 0;
  int n = 0;
  for (double x : v)
    if (x > 0) s += std::log(x), ++n;
  return n ? opt(std::exp(s / n)) : std::nullopt;
}
opt median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
opt min_of(const std::vector<double>& v) {
  return v.empty() ? std::nullopt : opt(*std::min_element(v.begin(), v.end()));
}
opt max_of(const std::vector<double>& v) {
  return v.empty() ? std::nullopt : opt(*std::max_element(v.begin(), v.end()));
}

template <class F>
std::vector<opt> column(const std::vector<const MatrixConfigMetrics*>& rows, F f) {
  std::vector<opt> out;
  for (const MatrixConfigMetrics* r : rows) out.push_back(f(*r));
  return out;
}

ConfigSummary summarize(const std::string& config, const std::vector<const MatrixConfigMetrics*>& rows) {
  ConfigSummary s;
  s.config = config;
  s.matrices = static_cast<int>(rows.size());
  for (const MatrixConfigMetrics* r : rows) {
    if (r->status != "ok" && r->status != "missing") ++s.failures;
    if (r->median_s) ++s.timed;
    if (s.kind.empty()) s.kind = r->kind;
  }
  const auto csr = present(column(rows, [](const auto& r) { return r.speedup_over_csr; }));
  s.speedup_csr_count = static_cast<int>(csr.size());
  s.speedup_csr_geomean = geomean(csr);
  s.speedup_csr_min = min_of(csr);
  s.speedup_csr_max = max_of(csr);
  const auto lib = present(column(rows, [](const auto& r) { return r.speedup_over_best_library; }));
  s.speedup_library_count = static_cast<int>(lib.size());
  s.speedup_library_geomean = geomean(lib);
  s.speedup_library_min = min_of(lib);
  s.speedup_library_max = max_of(lib);
  const auto share = present(column(rows, [](const auto& r) { return r.share_of_oracle; }));
  s.share_count = static_cast<int>(share.size());
  s.share_geomean = geomean(share);
  if (!share.empty()) {
    const auto within = std::count_if(share.begin(), share.end(),
                                      [](double x) { return x >= kWithinOracleShare; });
    s.within_5pct = static_cast<double>(within) / static_cast<double>(share.size());
  }
  s.median_candidates = median(present(column(rows, [](const auto& r) { return r.candidates_measured; })));
  s.median_tune_s = median(present(column(rows, [](const auto& r) { return r.tune_s; })));
  s.median_break_even = median(present(column(rows, [](const auto& r) { return r.break_even_calls; })));
  s.median_spearman = median(present(column(rows, [](const auto& r) { return r.spearman; })));
  s.median_recall = median(present(column(rows, [](const auto& r) { return r.recall_at_10; })));
  const auto delivered = present(column(rows, [](const auto& r) { return r.delivered_speedup; }));
  s.delivered_count = static_cast<int>(delivered.size());
  s.delivered_geomean = geomean(delivered);
  s.delivered_below = static_cast<int>(
      std::count_if(delivered.begin(), delivered.end(), [](double x) { return x < kBelowBand; }));
  if (!delivered.empty())
    s.below_share = static_cast<double>(s.delivered_below) / static_cast<double>(delivered.size());
  for (const MatrixConfigMetrics* r : rows) s.undecided += r->delivered_speedup && r->undecided;
  std::vector<double> ratio =
      present(column(rows, [](const auto& r) { return r.delivered_over_claimed; }));
  s.claimed_count = static_cast<int>(ratio.size());
  if (!ratio.empty()) {
    std::vector<double> dev;
    for (double x : ratio) dev.push_back(std::abs(x - 1.0));
    std::sort(ratio.begin(), ratio.end());
    std::sort(dev.begin(), dev.end());
    s.delivered_over_claimed_median = kernels::quantile(ratio, 0.5);
    s.delivered_over_claimed_p05 = kernels::quantile(ratio, 0.05);
    s.delivered_over_claimed_p95 = kernels::quantile(ratio, 0.95);
    s.delivered_over_claimed_dev95 = kernels::quantile(dev, 0.95);
  }
  return s;
}

std::string plural(long n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// ---------------------------------------------------------------------------------------------
// Formatting.

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
std::string html_escape(const std::string& s) {
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

/// An interval {"lo", "hi"} of a row (nothing unless both are numbers).
std::pair<opt, opt> interval_of(const json& j) {
  const opt lo = number(j, "lo"), hi = number(j, "hi");
  return lo && hi ? std::make_pair(lo, hi) : std::make_pair(opt(), opt());
}

/// The claim of a configuration row: its claimed speedup (rows before version 2: tune's speedup
/// over csr) and interval.
void read_claim(const json& run, MatrixConfigMetrics& m) {
  m.claimed_speedup = number(run, "claimed_speedup");
  if (!m.claimed_speedup) m.claimed_speedup = m.tune_speedup_over_csr;
  std::tie(m.claimed_lo, m.claimed_hi) = interval_of(member(run, "claimed_interval"));
  m.claim_reference = text(run, "claim_reference");
  if (member(run, "busy") == json(true)) {
    m.busy = true;
    const std::string why = text(run, "busy_warning");
    m.busy_reason = "the tune ran on a busy machine" + (why.empty() ? "" : ": " + why);
  }
}

/// What a side-by-side row delivered for one configuration (`c`, its entry under "configs"):
/// version 2, the replicated runs' median over the faster csr reference; version 1, the csr
/// baseline's median over the winner's of its one run.
void read_delivered(const json& bench, const json& c, const std::string& shortcut,
                    const opt& csr, MatrixConfigMetrics& m) {
  const json& d = member(c, "delivered");
  if (d.is_object()) {
    m.delivered_speedup = number(d, "speedup");
    std::tie(m.delivered_lo, m.delivered_hi) = interval_of(member(d, "interval"));
    m.delivered_runs = static_cast<int>(number(d, "runs").value_or(0));
    m.undecided = member(d, "decided") == json(false);
    m.delivered_reference = "faster of the " + shortcut + " baseline and the " + shortcut + " schedule";
  } else if (number(bench, "version").value_or(1) < 2 && m.median_s && csr) {
    m.delivered_speedup = *csr / *m.median_s;
    m.delivered_runs = 1;
    m.delivered_reference = shortcut + " baseline (one run, no " + shortcut + " schedule)";
  }
  if (m.delivered_speedup && m.claimed_speedup && *m.claimed_speedup > 0)
    m.delivered_over_claimed = *m.delivered_speedup / *m.claimed_speedup;
}

/// A matrix's roofline row from its side-by-side row: every timed implementation's bandwidth and
/// share of the STREAM bandwidth measured beside it.
RooflineRow roofline_row(const json& bench, const std::string& name, std::int64_t nnz,
                         const std::string& shortcut, bool busy) {
  RooflineRow r;
  r.matrix = name;
  r.nnz = nnz;
  r.busy = busy;
  const json& ws = member(bench, "working_set");
  r.traffic_bytes = number(ws, "traffic_bytes");
  r.llc_bytes = number(ws, "llc_bytes");
  r.stream_gbs = number(ws, "stream_gbs");
  const auto add = [&](const std::string& label, const json& t, const std::string& schedule) {
    const opt median = t.contains("error") ? std::nullopt : seconds(t, "median_s");
    if (!median) return;
    RooflineEntry e;
    e.name = label;
    e.schedule = schedule;
    e.median_s = *median;
    if (r.traffic_bytes) e.effective_gbs = *r.traffic_bytes / *median * 1e-9;
    if (e.effective_gbs && r.stream_gbs && *r.stream_gbs > 0)
      e.share_of_stream = *e.effective_gbs / *r.stream_gbs;
    r.entries.push_back(std::move(e));
  };
  for (const auto& [lib, t] : member(bench, "baselines").items()) add(lib, t, "");
  add(shortcut + " schedule", member(bench, "csr_schedule"), "");
  for (const auto& [config, t] : member(bench, "configs").items()) add(config, t, text(t, "schedule"));
  return r;
}

}  // namespace

bool within_noise(const opt& lo, const opt& hi) { return lo && hi && *lo <= 1.0 && 1.0 <= *hi; }

// ---------------------------------------------------------------------------------------------
// compute_report

ReportData compute_report(const std::vector<heuristics::AblationRow>& all_rows,
                          const ReportOptions& options) {
  ReportData data;
  data.options = options;
  if (all_rows.empty())
    throw Error("no ablation rows in " + options.db_path, "run waco-hybrid ablate first");
  std::vector<const heuristics::AblationRow*> rows;
  std::vector<std::string> kernels_seen;
  for (const auto& r : all_rows) {
    if (std::find(kernels_seen.begin(), kernels_seen.end(), r.kernel) == kernels_seen.end())
      kernels_seen.push_back(r.kernel);
    if (options.kernel.empty() || r.kernel == options.kernel) rows.push_back(&r);
  }
  if (rows.empty()) {
    std::string list;
    for (const auto& k : kernels_seen) list += (list.empty() ? "" : ", ") + k;
    throw Error("no ablation rows for kernel " + options.kernel + " in " + options.db_path,
                "its rows are for " + list + "; run waco-hybrid ablate --kernel " +
                    options.kernel + " first, or drop --kernel");
  }
  data.rows = rows.size();

  // The context blocks and dates.
  const char* kContextKeys[] = {"cpu", "cores_available", "threads", "compiler", "flags",
                                "build_type", "git_revision", "waco_version", "counters"};
  for (const auto* r : rows) {
    check_format(*r, options.db_path);
    const json& ctx = member(r->row, "context");
    for (const char* key : kContextKeys) {
      const json& v = member(ctx, key);
      if (v.is_null()) continue;
      const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
      auto& list = data.context[key];
      if (std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
    }
    if (!r->created.empty()) {
      if (data.first_created.empty() || r->created < data.first_created) data.first_created = r->created;
      if (data.last_created.empty() || r->created > data.last_created) data.last_created = r->created;
    }
  }

  // Groups: (kernel, dense, threads, working set beyond the LLC), in the database's order. A
  // matrix is beyond the LLC when its side-by-side row says so (ablate records the working set).
  std::set<std::tuple<std::string, std::string, int, int>> beyond;  // (fp, kernel, dense, threads)
  for (const auto* r : rows)
    if (r->config == kSideBySide && member(member(r->row, "working_set"), "beyond_llc") == json(true))
      beyond.insert({r->fingerprint, r->kernel, r->dense, r->threads});
  struct Group {
    std::string kernel;
    int dense, threads;
    bool beyond_llc;
    std::vector<const heuristics::AblationRow*> rows;
  };
  std::vector<Group> groups;
  for (const auto* r : rows) {
    const bool b = beyond.count({r->fingerprint, r->kernel, r->dense, r->threads}) > 0;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.kernel == r->kernel && g.dense == r->dense && g.threads == r->threads &&
             g.beyond_llc == b;
    });
    if (it == groups.end()) {
      groups.push_back({r->kernel, r->dense, r->threads, b, {}});
      it = groups.end() - 1;
    }
    it->rows.push_back(r);
  }

  bool oracle_anywhere = false;
  std::set<std::string> every_config;
  for (const Group& g : groups) {
    KernelReport k;
    k.kernel = g.kernel;
    k.dense = g.dense;
    k.threads = g.threads;
    k.beyond_llc = g.beyond_llc;
    const auto same_kernel = std::count_if(groups.begin(), groups.end(), [&](const Group& o) {
      return o.kernel == g.kernel && o.beyond_llc == g.beyond_llc;
    });
    const bool both_regimes = std::any_of(groups.begin(), groups.end(), [&](const Group& o) {
      return o.kernel == g.kernel && o.dense == g.dense && o.threads == g.threads &&
             o.beyond_llc != g.beyond_llc;
    });
    k.label = same_kernel > 1 ? g.kernel + " (dense " + std::to_string(g.dense) + ", " +
                                    plural(g.threads, "thread", "threads") + ")"
                              : g.kernel;
    if (g.beyond_llc) k.label += ", beyond the LLC";
    else if (both_regimes) k.label += ", cache-resident";

    std::vector<std::string> fingerprints;
    std::map<std::string, const heuristics::AblationRow*> bench;                          // fp ->
    std::map<std::pair<std::string, std::string>, const heuristics::AblationRow*> runs;  // (fp, config) ->
    std::map<std::string, std::string> descriptions;
    for (const auto* r : g.rows) {
      if (std::find(fingerprints.begin(), fingerprints.end(), r->fingerprint) == fingerprints.end())
        fingerprints.push_back(r->fingerprint);
      if (r->config == kSideBySide) {
        bench[r->fingerprint] = r;
        continue;
      }
      runs[{r->fingerprint, r->config}] = r;
      if (std::find(k.configs.begin(), k.configs.end(), r->config) == k.configs.end())
        k.configs.push_back(r->config);
      const std::string d = text(r->row, "description");
      if (!d.empty()) descriptions[r->config] = d;
    }
    for (const auto& [fp, b] : bench) {
      for (const auto& [name, v] : member(b->row, "configs").items()) {
        (void)v;
        if (std::find(k.configs.begin(), k.configs.end(), name) == k.configs.end())
          k.configs.push_back(name);
      }
      for (const auto& [name, v] : member(b->row, "baselines").items()) {
        (void)v;
        if (std::find(k.baselines.begin(), k.baselines.end(), name) == k.baselines.end())
          k.baselines.push_back(name);
      }
    }
    // The order of ablate's configuration list (each row's "position"), the rest after it.
    std::map<std::string, double> position;
    for (const auto* r : g.rows)
      if (const opt p = number(r->row, "position"); p && r->config != kSideBySide)
        position.emplace(r->config, *p);
    std::stable_sort(k.configs.begin(), k.configs.end(), [&](const std::string& a, const std::string& b) {
      const auto pa = position.find(a), pb = position.find(b);
      return (pa == position.end() ? 1e18 : pa->second) < (pb == position.end() ? 1e18 : pb->second);
    });
    k.oracle_present = std::find(k.configs.begin(), k.configs.end(), options.oracle) != k.configs.end();
    oracle_anywhere = oracle_anywhere || k.oracle_present;
    every_config.insert(k.configs.begin(), k.configs.end());

    for (const std::string& fp : fingerprints) {
      const auto bit = bench.find(fp);
      const json* b = bit == bench.end() ? nullptr : &bit->second->row;
      // Name: the side-by-side row's, a configuration row's, or the recorded path's file name.
      std::string name, file;
      std::int64_t nnz = 0;
      for (const auto* r : g.rows) {
        if (r->fingerprint != fp) continue;
        if (name.empty()) name = text(r->row, "name");
        if (file.empty()) file = text(r->row, "file");
        if (nnz == 0) nnz = r->nnz;
        if (file.empty()) file = r->path;
      }
      if (name.empty()) name = basename_of(file);
      k.matrices.push_back(name);
      if (!b) ++k.matrices_without_side_by_side;

      // The libraries' side-by-side times.
      opt csr, best;
      std::string best_name;
      if (b) {
        for (const auto& [lib, v] : member(*b, "baselines").items()) {
          const opt t = v.contains("error") ? std::nullopt : seconds(v, "median_s");
          if (!t) continue;
          k.library_times[fp][lib] = *t;
          if (lib == "csr" || lib == "csf") csr = t;  // the reference: csf for MTTKRP
          if (!best || *t < *best) best = t, best_name = lib;
        }
      }
      const std::string shortcut = g.kernel == "mttkrp" ? "csf" : "csr";
      if (b) {
        if (const opt t = seconds(member(*b, "csr_schedule"), "median_s"))
          k.library_times[fp][shortcut + " schedule"] = *t;
        if (number(*b, "version").value_or(1) < 2) ++k.old_side_by_side;
      }
      const bool busy_matrix = b && member(*b, "busy") == json(true);
      if (busy_matrix) ++k.busy_matrices;
      if (b) k.roofline.push_back(roofline_row(*b, name, nnz, shortcut, busy_matrix));
      static const json kNone;
      const json& bench_configs = b ? member(*b, "configs") : kNone;
      const opt oracle_t = b ? seconds(member(bench_configs, options.oracle.c_str()), "median_s")
                             : std::nullopt;
      if (!oracle_t) ++k.matrices_without_oracle;

      for (const std::string& config : k.configs) {
        const auto rit = runs.find({fp, config});
        const json* run = rit == runs.end() ? nullptr : &rit->second->row;
        const bool in_bench = b && bench_configs.is_object() && bench_configs.contains(config);
        if (!run && !in_bench) continue;
        MatrixConfigMetrics m;
        m.matrix = name;
        m.file = file;
        m.fingerprint = fp;
        m.nnz = nnz;
        m.config = config;
        m.csr_median_s = csr;
        m.best_library = best_name;
        m.best_library_median_s = best;
        m.oracle_median_s = oracle_t;
        if (run) {
          m.kind = text(*run, "kind");
          m.status = text(*run, "status");
          if (m.status.empty()) m.status = "unknown";
          m.error = text(*run, "error");
          m.winner = text(*run, "winner");
          m.verdict = text(*run, "verdict");
          m.candidates_measured = number(*run, "candidates_measured");
          m.choice_s = number(*run, "choice_s");
          m.measure_s = number(*run, "measure_s");
          m.tune_s = number(*run, "tune_s");
          m.break_even_calls = number(*run, "break_even_calls");
          m.spearman = number(*run, "spearman");
          m.recall_at_10 = number(*run, "recall_at_10");
          m.tune_speedup_over_csr = number(*run, "tune_speedup_over_csr");
          read_claim(*run, m);
        } else {
          m.status = "missing";
        }
        if (in_bench) {
          const json& c = bench_configs[config];
          if (m.winner.empty()) m.winner = text(c, "schedule");
          m.time_error = text(c, "error");
          if (m.time_error.empty()) m.median_s = seconds(c, "median_s");
          if (!m.median_s && m.time_error.empty()) m.time_error = "no time in the side-by-side run";
          read_delivered(*b, c, shortcut, csr, m);
        } else {
          m.time_error = b ? "not in the side-by-side run"
                           : "no side-by-side row (ablate did not finish this matrix)";
        }
        if (m.median_s) {
          if (csr) m.speedup_over_csr = *csr / *m.median_s;
          if (best) m.speedup_over_best_library = *best / *m.median_s;
          if (oracle_t) m.share_of_oracle = *oracle_t / *m.median_s;
        }
        if (busy_matrix) {
          const std::string why = text(*b, "busy_reason");
          m.busy = true;
          m.busy_reason = "its side-by-side runs were disturbed by other processes" +
                          (why.empty() ? "" : ": " + why);
        } else if (m.busy) {
          ++k.busy_rows;
        }
        k.rows.push_back(std::move(m));
      }
    }

    for (const std::string& config : k.configs) {
      std::vector<const MatrixConfigMetrics*> of;
      int busy = 0;
      for (const auto& m : k.rows)
        if (m.config != config) continue;
        else if (m.busy) ++busy;
        else of.push_back(&m);
      ConfigSummary s = summarize(config, of);
      s.busy_left_out = busy;
      if (const auto d = descriptions.find(config); d != descriptions.end()) s.description = d->second;
      k.summaries.push_back(std::move(s));
    }

    const std::string m_total = std::to_string(k.matrices.size());
    if (!k.oracle_present)
      k.notes.push_back("The oracle configuration '" + options.oracle +
                        "' is not in this run: no share of the oracle is computed (choose "
                        "another with --oracle).");
    else if (k.matrices_without_oracle > 0)
      k.notes.push_back(std::to_string(k.matrices_without_oracle) + " of " + m_total +
                        " matrices have no side-by-side time of the oracle (" + options.oracle +
                        "): their share of the oracle is empty.");
    if (k.busy_matrices > 0)
      k.notes.push_back(std::to_string(k.busy_matrices) + " of " + m_total +
                        " matrices left out of every summary and plot: other processes disturbed "
                        "their side-by-side runs (fewer than two undisturbed runs; ablate "
                        "--redo-busy times them again).");
    if (k.busy_rows > 0)
      k.notes.push_back(plural(k.busy_rows, "configuration row", "configuration rows") +
                        " (matrix and configuration) left out of every summary and plot: the "
                        "tune ran on a busy machine (ablate --redo-busy runs it again).");
    if (k.old_side_by_side > 0)
      k.notes.push_back(std::to_string(k.old_side_by_side) + " of " + m_total +
                        " matrices have a side-by-side row of an older ablate (one run, no " +
                        (k.kernel == "mttkrp" ? "csf" : "csr") +
                        " schedule): their delivered speedups are over the baseline alone, "
                        "without an interval.");
    if (k.matrices_without_side_by_side > 0)
      k.notes.push_back(std::to_string(k.matrices_without_side_by_side) + " of " + m_total +
                        " matrices have no side-by-side row (ablate did not finish them): no "
                        "speedups for them.");
    data.kernels.push_back(std::move(k));
  }

  if (options.oracle_explicit && !oracle_anywhere) {
    std::string list;
    for (const auto& c : every_config) list += (list.empty() ? "" : ", ") + c;
    throw Error("no configuration '" + options.oracle + "' in the ablation rows of " +
                    options.db_path,
                "--oracle takes one of: " + list);
  }
  return data;
}

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
