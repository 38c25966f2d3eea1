// The ablation report's first stage: metrics from the ablation rows (compute_report): per kernel,
// every configuration's per-matrix metrics and their per-configuration summaries. Pure.
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <tuple>

#include "cli_common.hpp"
#include "final_runs.hpp"
#include "report_internal.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {

using namespace report_detail;

namespace {

namespace fs = std::filesystem;

constexpr const char* kSideBySide = "side-by-side";

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
    const json& ref = member(bench, "reference");  // the one faster over the final runs
    m.delivered_reference = ref.is_string() ? ref.get<std::string>() + " (the faster over the final runs)"
                                            : "faster of the " + shortcut + " baseline and the " +
                                                  shortcut + " schedule in each final run";
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

}  // namespace waco::cli
