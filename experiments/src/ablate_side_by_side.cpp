// The final side-by-side run of `waco-hybrid ablate` (run_side_by_side): every configuration's
// winner, the csr schedule and the library baselines timed interleaved in one `waco-hybrid bench`
// child, repeated in fresh children until two consecutive undisturbed runs agree (final_runs.hpp:
// each winner's delivered speedup over the faster csr reference, with its interval), in
// --final-passes passes apart in time (pass p of a matrix runs after pass p - 1 of every matrix;
// the earlier passes read back from their bench files), and the matrix's side-by-side row: the
// timings over the runs used, the delivered speedups over the passes, the runs and the working
// set against the last-level cache.
#include "ablate_internal.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "final_runs.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {
using namespace waco::kernels;
using namespace ablate_detail;

namespace {

/// Timed runs of a kernel in the final side-by-side run that are taken again when another process
/// disturbed them: tune's default (heuristics::MeasureOptions::retake_disturbed).
constexpr int kRetakeDisturbed = 5;

/// The library baselines of the side-by-side run: the csr (csf) reference first.
std::vector<std::string> baseline_impls(KernelKind k) {
  std::vector<std::string> names;
  for (const char* n : {"csr", "csf", "eigen", "rsb-tuned"})
    for (const ImplementationInfo& info : all_implementations())
      if (info.name == n && info.supports(k)) names.push_back(n);
  return names;
}

/// What the final side-by-side run times, in bench's order: the library baselines (--impl), then
/// the generated kernels (--schedule): the csr (csf) schedule first, then every distinct winner.
/// A winner that is an implementation ("impl=NAME": a tune that returned a baseline) is timed
/// as that implementation.
struct SideBySidePlan {
  std::vector<std::string> impls;
  std::vector<std::string> schedules;  ///< texts
  BenchLayout layout;
};

SideBySidePlan plan_side_by_side(const MatrixRun& m,
                                 const std::map<std::string, nlohmann::json>& rows) {
  SideBySidePlan p;
  p.impls = baseline_impls(m.kind);
  p.layout.shortcut = m.kind == KernelKind::MTTKRP ? "csf" : "csr";
  std::map<std::string, std::size_t> position;  // schedule key -> index in p.schedules
  const auto add_schedule = [&](const std::string& text) {
    const auto [it, added] =
        position.emplace(schedule_key(m.kind, text, m.threads), p.schedules.size());
    if (added) p.schedules.push_back(text);
    return it->second;
  };
  const std::size_t reference = add_schedule(p.layout.shortcut);
  std::map<std::string, std::string> impl_of;  // config -> implementation
  std::map<std::string, std::size_t> schedule_of;
  for (const auto& [name, row] : rows) {
    if (row.value("status", "") != "ok" || !row.at("winner").is_string()) continue;
    const std::string text = row.at("winner").get<std::string>();
    if (text.rfind("impl=", 0) == 0) {
      impl_of[name] = text.substr(5);
      if (std::find(p.impls.begin(), p.impls.end(), impl_of[name]) == p.impls.end())
        p.impls.push_back(impl_of[name]);
    } else {
      schedule_of[name] = add_schedule(text);
    }
  }
  const auto impl_index = [&](const std::string& name) {
    const auto it = std::find(p.impls.begin(), p.impls.end(), name);
    return it == p.impls.end() ? -1 : static_cast<int>(it - p.impls.begin());
  };
  const auto schedule_index = [&](std::size_t s) { return static_cast<int>(p.impls.size() + s); };
  p.layout.baseline = impl_index(p.layout.shortcut);
  p.layout.schedule = schedule_index(reference);
  for (const auto& [name, impl] : impl_of) p.layout.configs[name] = impl_index(impl);
  for (const auto& [name, s] : schedule_of) p.layout.configs[name] = schedule_index(s);
  return p;
}

/// One kernel's timing over the runs used: the median of their medians, the least minimum and
/// the largest maximum; its error when no run timed it.
nlohmann::json timing_over_runs(const std::vector<const nlohmann::json*>& outs, int index) {
  if (index < 0) return {{"error", "not timed"}};
  std::vector<double> medians, gflops, gbs;
  double lo = HUGE_VAL, hi = 0;
  nlohmann::json error = "no time in the side-by-side runs";
  for (const nlohmann::json* out : outs) {
    const nlohmann::json& x = out->at("results").at(static_cast<std::size_t>(index));
    if (x.contains("error")) {
      error = x.at("error");
      continue;
    }
    medians.push_back(x.at("median_s").get<double>());
    gflops.push_back(x.value("gflops", 0.0));
    gbs.push_back(x.value("effective_gbs", 0.0));
    lo = std::min(lo, x.at("min_s").get<double>());
    hi = std::max(hi, x.at("max_s").get<double>());
  }
  if (medians.empty()) return {{"error", error}};
  std::sort(medians.begin(), medians.end());
  std::sort(gflops.begin(), gflops.end());
  std::sort(gbs.begin(), gbs.end());
  return {{"median_s", quantile(medians, 0.5)}, {"min_s", lo}, {"max_s", hi},
          {"gflops", quantile(gflops, 0.5)}, {"effective_gbs", quantile(gbs, 0.5)},
          {"runs", medians.size()}};
}

nlohmann::json interval_json(const Interval& i) {
  return {{"lo", i.lo}, {"hi", i.hi}, {"level", i.level}};
}

nlohmann::json delivered_json(const Delivered& d) {
  return {{"speedup", d.speedup},          {"interval", interval_json(d.interval)},
          {"runs", d.runs},                {"per_run", d.per_run},
          {"decided", d.decided},          {"band", band_name(band_of(d.speedup))}};
}

nlohmann::json final_run_json(const FinalRun& f, double seconds) {
  nlohmann::json speedups = nlohmann::json::object();
  for (const auto& [name, s] : f.speedups)
    speedups[name] = {{"speedup", s.speedup},
                      {"interval", s.interval ? interval_json(*s.interval) : nlohmann::json()}};
  return {{"busy", f.busy},
          {"busy_reason", f.busy ? nlohmann::json(f.busy_reason) : nlohmann::json()},
          {"reference", f.reference.empty() ? nlohmann::json() : nlohmann::json(f.reference)},
          {"core_round_trip_ns", f.core_round_trip_ns},
          {"seconds", seconds},
          {"speedups", speedups}};
}

/// The problem's working set against the last-level cache, from the side-by-side runs' JSON:
/// {"traffic_bytes" (CSR-equivalent bytes, as bench counts GB/s), "llc_bytes" (the largest cache
/// level of the runs' context), "beyond_llc" (traffic_bytes > llc_bytes), "stream_gbs" (the median
/// STREAM triad bandwidth measured beside the runs, null without --roofline)}. Report tables a
/// kernel's matrices beyond the LLC apart from the cache-resident ones.
nlohmann::json working_set_json(const std::vector<const nlohmann::json*>& outs) {
  double traffic = 0;
  std::int64_t llc = 0;
  std::vector<double> stream;
  for (const nlohmann::json* out : outs) {
    for (const nlohmann::json& x : out->at("results"))
      traffic = std::max(traffic, x.value("traffic_bytes", 0.0));
    const nlohmann::json cb = out->value("context", nlohmann::json::object())
                                  .value("cache_bytes", nlohmann::json::object());
    for (const char* level : {"l1d", "l2", "l3"})
      if (cb.contains(level) && cb.at(level).is_number_integer())
        llc = std::max(llc, cb.at(level).get<std::int64_t>());
    const nlohmann::json roof = out->value("roofline", nlohmann::json());
    if (roof.is_object()) stream.push_back(roof.value("bandwidth_gbs", 0.0));
  }
  std::sort(stream.begin(), stream.end());
  nlohmann::json j = {{"traffic_bytes", traffic > 0 ? nlohmann::json(traffic) : nlohmann::json()},
                      {"llc_bytes", llc > 0 ? nlohmann::json(llc) : nlohmann::json()},
                      {"stream_gbs", stream.empty() ? nlohmann::json() : nlohmann::json(quantile(stream, 0.5))}};
  j["beyond_llc"] = traffic > 0 && llc > 0 ? nlohmann::json(traffic > static_cast<double>(llc))
                                           : nlohmann::json();
  return j;
}

/// One pass of the final run: the replication and, per run, its bench JSON, seconds and the
/// number of its files (side-by-side-N).
struct Pass {
  Replication rep;
  std::vector<nlohmann::json> outs;
  std::vector<double> seconds;
  std::vector<int> files;
};

/// Whether a bench output times what `plan` times, in its order (the baselines by name, then
/// one generated kernel per schedule): a file of another plan's run is not read as this one's.
bool times_plan(const nlohmann::json& bench, const SideBySidePlan& plan) {
  if (!bench.is_object() || !bench.contains("results") || !bench.at("results").is_array()) return false;
  const nlohmann::json& r = bench.at("results");
  if (r.size() != plan.impls.size() + plan.schedules.size()) return false;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const std::string impl = r[i].value("impl", "");
    if (i < plan.impls.size() ? impl != plan.impls[i] : impl.rfind("gen:", 0) != 0) return false;
  }
  return true;
}

/// The passes a stored side-by-side row holds, read back from their bench files in the matrix's
/// work folder (a row before --final-passes: one pass of runs 1..final_runs). Nothing when a
/// file is gone, damaged or of another plan: the caller runs the final run again from the start.
std::optional<std::vector<Pass>> stored_passes(const MatrixRun& m, const nlohmann::json& row,
                                               const SideBySidePlan& plan) {
  nlohmann::json passes = row.value("passes", nlohmann::json());
  if (!passes.is_array()) {
    nlohmann::json files = nlohmann::json::array();
    for (int i = 1; i <= row.value("final_runs", 0); ++i) files.push_back(i);
    passes = nlohmann::json::array({{{"runs", files},
                                     {"settled", row.value("settled", false)},
                                     {"busy", row.value("busy", false)},
                                     {"undecided", row.value("undecided", nlohmann::json::array())}}});
  }
  const nlohmann::json runs = row.value("runs", nlohmann::json::array());
  std::vector<Pass> out;
  std::size_t k = 0;  // index into the row's runs, which list every pass's in order
  try {
    for (const nlohmann::json& p : passes) {
      Pass pass;
      for (const nlohmann::json& n : p.at("runs")) {
        const std::string path = m.dir + "/side-by-side-" + std::to_string(n.get<int>()) + ".json";
        nlohmann::json j = nlohmann::json::parse(read_text_file(path));
        if (!times_plan(j, plan)) return std::nullopt;
        pass.rep.runs.push_back(final_run_of(j, plan.layout));
        pass.outs.push_back(std::move(j));
        pass.seconds.push_back(k < runs.size() ? runs[k].value("seconds", 0.0) : 0.0);
        pass.files.push_back(n.get<int>());
        ++k;
      }
      if (pass.files.empty()) return std::nullopt;
      pass.rep.settled = p.value("settled", false);
      pass.rep.busy = p.value("busy", false);
      for (const nlohmann::json& c : p.value("undecided", nlohmann::json::array()))
        pass.rep.undecided.insert(c.get<std::string>());
      out.push_back(std::move(pass));
    }
  } catch (const std::exception&) {  // a file gone, damaged or of another shape
    return std::nullopt;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

/// The matrix's side-by-side row from all its passes.
nlohmann::json side_by_side_row(const Options& o, const MatrixRun& m,
                                const std::map<std::string, nlohmann::json>& rows,
                                const SideBySidePlan& plan, const std::vector<Pass>& passes) {
  std::vector<const nlohmann::json*> used;
  std::vector<Replication> reps;
  for (const Pass& p : passes) {
    reps.push_back(p.rep);
    for (std::size_t i : runs_used(p.rep)) used.push_back(&p.outs[i]);
  }
  // Every run over the reference that was faster over all of them, and judged on it.
  const std::optional<bool> schedule_faster = schedule_faster_over(reps);
  const nlohmann::json reference =
      schedule_faster ? nlohmann::json(reference_name(plan.layout.shortcut, *schedule_faster)) : nlohmann::json();
  reps = with_common_reference(std::move(reps), schedule_faster);
  nlohmann::json baselines = nlohmann::json::object(), configs = nlohmann::json::object();
  for (std::size_t i = 0; i < plan.impls.size(); ++i)
    baselines[plan.impls[i]] = timing_over_runs(used, static_cast<int>(i));
  const std::map<std::string, Delivered> delivered = delivered_over_passes(reps);
  std::set<std::string> undecided;
  for (const auto& [name, d] : delivered)
    if (!d.decided) undecided.insert(name);
  for (const auto& [name, index] : plan.layout.configs) {
    // Each configuration's own text (threads=0 and threads=<cores> are one kernel, timed once).
    nlohmann::json t = timing_over_runs(used, index);
    t["schedule"] = rows.at(name).at("winner");
    const auto d = delivered.find(name);
    t["delivered"] = d == delivered.end() ? nlohmann::json() : delivered_json(d->second);
    configs[name] = t;
  }
  for (const auto& [name, row] : rows)
    if (!configs.contains(name))
      configs[name] = {
          {"error", row.value("status", "") == "ok" ? "no winner" : "the configuration failed"}};
  nlohmann::json runs = nlohmann::json::array(), pass_rows = nlohmann::json::array();
  std::string busy_reason;
  bool busy = true, settled = true;
  double total_s = 0;
  int total_runs = 0;
  for (std::size_t p = 0; p < passes.size(); ++p) {
    const Pass& pass = passes[p];
    const Replication& rep = reps[p];
    double pass_s = 0;
    for (std::size_t i = 0; i < rep.runs.size(); ++i) {
      nlohmann::json r = final_run_json(rep.runs[i], pass.seconds[i]);
      r["pass"] = p + 1;
      runs.push_back(std::move(r));
      if (busy_reason.empty()) busy_reason = rep.runs[i].busy_reason;
      pass_s += pass.seconds[i];
    }
    busy = busy && rep.busy;
    if (!rep.busy) settled = settled && rep.settled;
    total_s += pass_s;
    total_runs += static_cast<int>(rep.runs.size());
    pass_rows.push_back({{"runs", pass.files},
                         {"settled", rep.settled},
                         {"busy", rep.busy},
                         {"undecided", rep.undecided},
                         {"seconds", pass_s}});
  }
  if (busy) settled = false;
  nlohmann::json row = matrix_fields(m);
  row.update({{"format", "waco-ablation-bench"},
              {"version", kRowVersion},
              {"repeats", o.bench_repeat},
              {"warmup", 2},
              {"retake_disturbed", kRetakeDisturbed},
              {"distinct_schedules", plan.schedules.size()},
              {"final_runs", total_runs},
              {"final_runs_max", o.final_runs_max},
              {"final_passes", o.final_passes},
              {"final_layouts", o.final_layouts},
              {"passes", pass_rows},
              {"settled", settled},
              {"busy", busy},
              {"busy_reason", busy ? nlohmann::json(busy_reason) : nlohmann::json()},
              {"undecided", undecided},
              {"agree_rule", kAgreeRule},
              {"reference_rule", kReferenceRule},
              {"reference", reference},
              {"pass_rule", kPassRule},
              {"configs", configs},
              {"baselines", baselines},
              {"csr_schedule", timing_over_runs(used, plan.layout.schedule)},
              {"runs", runs},
              {"working_set", working_set_json(used)},
              {"seconds", total_s},
              {"context", used.back()->value("context", nlohmann::json(nullptr))}});
  return row;
}

}  // namespace

namespace ablate_detail {

int passes_of(const nlohmann::json& row) {
  const nlohmann::json p = row.value("passes", nlohmann::json());
  return p.is_array() ? static_cast<int>(p.size()) : 1;
}

nlohmann::json run_side_by_side(const Options& o, const MatrixRun& m,
                                const std::map<std::string, nlohmann::json>& rows,
                                kernels::FileLock& lock, const nlohmann::json* earlier) {
  const SideBySidePlan plan = plan_side_by_side(m, rows);
  std::vector<Pass> passes;
  if (earlier) {
    std::optional<std::vector<Pass>> stored = stored_passes(m, *earlier, plan);
    if (stored) {
      passes = std::move(*stored);
    } else if (!o.quiet) {
      std::fprintf(stderr,
                   "ablate: %s: the earlier side-by-side runs' files in %s are gone, damaged or "
                   "of other winners: the final run starts again\n",
                   m.name.c_str(), m.dir.c_str());
    }
  }
  int next_file = 1;
  for (const Pass& p : passes)
    for (int f : p.files) next_file = std::max(next_file, f + 1);
  std::string impl_list;
  for (const std::string& i : plan.impls) impl_list += (impl_list.empty() ? "" : ",") + i;
  std::vector<std::string> argv = child_argv("bench", m);
  argv.insert(argv.end(), {"--impl", impl_list, "--json", "--layouts", std::to_string(o.final_layouts),
                           "--repeat", std::to_string(o.bench_repeat),
                           "--warmup", "2", "--retake-disturbed", std::to_string(kRetakeDisturbed)});
  if (o.roofline) argv.push_back("--roofline");
  if (!o.cache_dir.empty()) argv.insert(argv.end(), {"--cache-dir", o.cache_dir});
  for (const std::string& text : plan.schedules) argv.insert(argv.end(), {"--schedule", text});
  argv.push_back(m.file);
  const volatile std::sig_atomic_t& interrupted = interrupt_flag();
  Pass pass;
  const int pass_number = static_cast<int>(passes.size()) + 1;
  pass.rep = replicate(o.final_runs_max, [&](int i) {
    FinalRun f;
    if (!interrupted) {
      const int file = next_file + i;
      const std::string stem = m.dir + "/side-by-side-" + std::to_string(file);
      const ChildResult r = run_child(argv, stem, lock);
      // bench exits 1 when a kernel computed a wrong result; its JSON still has every row.
      if (!interrupted && (!r.out.is_object() || !r.out.contains("results")))
        throw Error("the side-by-side run on " + m.file + " failed: " + r.error,
                    "run the bench command it names in " + stem + ".stderr by hand");
      pass.outs.push_back(r.out);
      pass.seconds.push_back(r.seconds);
      pass.files.push_back(file);
      if (!interrupted) f = final_run_of(r.out, plan.layout);
    }
    if (interrupted) {  // not a result: the caller stops
      f.busy = true;
      f.busy_reason = "interrupted";
      return f;
    }
    if (!o.quiet) {
      std::string line;
      for (const auto& [name, s] : f.speedups) line += " " + name + " " + fmt_speedup(s.speedup);
      std::fprintf(stderr, "ablate: %s side by side, pass %d, run %d: over the %s:%s%s\n",
                   m.name.c_str(), pass_number, i + 1, f.reference.c_str(), line.c_str(),
                   f.busy ? ("  (busy: " + f.busy_reason + ")").c_str() : "");
    }
    return f;
  });
  if (interrupted) return nullptr;
  passes.push_back(std::move(pass));
  return side_by_side_row(o, m, rows, plan, passes);
}

}  // namespace ablate_detail

}  // namespace waco::cli
