// waco-hybrid ablate (issue 21): runs matrices through named configurations of the pipeline (the
// standard set is ablation_configs.def; --config adds more), then times every configuration's
// winner side by side with the library baselines, interleaved in one run, so that the
// configurations can be compared with each other (separate runs drift by tens of percent on a
// shared machine). Each configuration is one `waco-hybrid tune` child process with its own fresh
// database (no configuration reuses another's measurements; kernels compiled earlier are reused
// from the compile cache by all); the side-by-side run is one `waco-hybrid bench` child with the
// csr schedule and the library baselines beside the winners, repeated in fresh children until
// two consecutive undisturbed runs agree (final_runs.hpp: each winner's delivered speedup over
// the faster csr reference, with its interval). Each configuration's row keeps the tune's claim
// (speedup and interval) beside it, and the tune's busy warning. Results go to the results
// database's ablation table, one row per matrix and configuration and one "side-by-side" row per
// matrix; a run that stops resumes where it stopped. `waco-hybrid report` turns them into
// tables and plots.
//
// Children, not calls: the tune pipeline is not a library call yet (issue 34, tune-library).
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "cli_common.hpp"
#include "command.hpp"
#include "final_runs.hpp"
#include "waco/tune/searcher.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/ranking_metrics.hpp"

namespace waco::cli {
using namespace waco::kernels;
using heuristics::ResultsDb;

namespace {

namespace fs = std::filesystem;

constexpr int kRowVersion = kAblationRowVersion;
/// Timed runs of a kernel in the final side-by-side run that are taken again when another process
/// disturbed them: tune's default (heuristics::MeasureOptions::retake_disturbed).
constexpr int kRetakeDisturbed = 5;

struct Config {
  std::string name;
  std::string kind;  ///< "pipeline" or "baseline"
  std::string description;
  std::vector<std::string> args;  ///< tune arguments
};

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

const std::vector<Config>& standard_configs() {
  static const std::vector<Config> all = {
#define WACO_ABLATION(name, kind, description, args) \
  Config{name, kind, description, split_words(args)},
#include "ablation_configs.def"
#undef WACO_ABLATION
  };
  return all;
}

std::string standard_names() {
  std::string s;
  for (const Config& c : standard_configs()) s += (s.empty() ? "" : ",") + c.name;
  return s;
}

bool has_arg(const Config& c, const std::string& flag) {
  return std::find(c.args.begin(), c.args.end(), flag) != c.args.end();
}

std::optional<std::string> arg_value(const Config& c, const std::string& flag) {
  for (std::size_t i = 0; i + 1 < c.args.size(); ++i)
    if (c.args[i] == flag) return c.args[i + 1];
  return std::nullopt;
}

struct Options {
  std::string kernel;
  std::vector<std::string> files;
  std::string configs;             ///< comma-separated names
  std::vector<std::string> extra;  ///< --config NAME=ARGS
  std::string db;
  std::string work;  ///< per-run tune databases and outputs
  std::string cpu_lock;
  int dense = 0;
  int threads = 0;
  int bench_repeat = 20;
  int final_runs_max = 4;  ///< fresh side-by-side runs at most (at least 2)
  std::string model;      ///< passed to every model search without its own
  std::string tune_args;  ///< appended to every tune child's arguments
  std::string cache_dir;  ///< the kernel compile cache of every child
  bool list = false;
  bool json = false;
  bool quiet = false;
  bool redo = false;
  bool redo_busy = false;  ///< run stored rows marked busy again
  bool roofline = false;   ///< the side-by-side runs measure the machine's peaks beside them
  ReadOptions read;
};

/// A configuration's tune arguments with --tune-args: a stored row counts only for the same.
std::vector<std::string> stored_args(const Options& o, const Config& c) {
  std::vector<std::string> a = c.args;
  for (const std::string& w : split_words(o.tune_args)) a.push_back(w);
  return a;
}

std::vector<Config> chosen_configs(const Options& o) {
  std::map<std::string, Config> known;
  for (const Config& c : standard_configs()) known[c.name] = c;
  std::vector<std::string> order;
  for (const std::string& e : o.extra) {
    const std::size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--config '" + e + "' is not NAME=TUNE-ARGUMENTS",
                  "e.g. --config \"anns-1thread=--search anns --threads 1\"");
    Config c{e.substr(0, eq), "pipeline", "user configuration: " + e.substr(eq + 1),
             split_words(e.substr(eq + 1))};
    if (c.name == "side-by-side" || c.name.find_first_of(" ,/") != std::string::npos)
      throw Error("configuration name '" + c.name + "' is reserved or has a space, comma or slash");
    if (known.count(c.name) && !std::count(order.begin(), order.end(), c.name))
      throw Error("--config " + c.name + " redefines a standard configuration",
                  "choose another name (standard: " + standard_names() + ")");
    known[c.name] = c;
    order.push_back(c.name);
  }
  std::vector<Config> out;
  std::set<std::string> seen;
  const std::string list = o.configs.empty() ? standard_names() : o.configs;
  std::istringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    if (name.empty()) continue;
    const auto it = known.find(name);
    if (it == known.end())
      throw Error("unknown ablation configuration '" + name + "'",
                  "standard: " + standard_names() + "; add your own with --config NAME=ARGS");
    if (seen.insert(name).second) out.push_back(it->second);
  }
  for (const std::string& name : order)  // --config ones not named in --configs run too
    if (seen.insert(name).second) out.push_back(known[name]);
  if (out.empty()) throw Error("no ablation configuration to run", "give --configs");
  return out;
}

/// Runs f holding the CPU lock (as `collect --cpu-lock`), so that two measuring programs never
/// share the cores.
template <typename F>
auto holding(kernels::FileLock& lock, F&& f) {
  struct Unlock {
    kernels::FileLock& l;
    ~Unlock() { l.unlock(); }
  };
  lock.lock();
  Unlock unlock{lock};
  return f();
}

/// The child's "error: ..." line, or its last line.
std::string child_error(const std::string& err, int status) {
  std::istringstream lines(err);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (line.rfind("error: ", 0) == 0) return line.substr(7);
    if (!line.empty()) last = line;
  }
  return "exit status " + std::to_string(status) + (last.empty() ? "" : ": " + last);
}

struct ChildResult {
  int status = 0;
  nlohmann::json out;  ///< parsed stdout (discarded when not JSON)
  std::string error;   ///< empty on success
  double seconds = 0;
};

ChildResult run_child(const std::vector<std::string>& argv, const std::string& stem,
                      kernels::FileLock& lock) {
  ChildResult r;
  const double t0 = now_seconds();
  // A SIGINT or SIGTERM to ablate reaches the child as one SIGTERM: it stops at a safe point.
  r.status = holding(lock, [&] {
    return run_process(argv, stem + ".json", stem + ".stderr", false, 0.0, &interrupt_flag());
  });
  r.seconds = now_seconds() - t0;
  r.out = nlohmann::json::parse(kernels::read_text_file(stem + ".json"), nullptr, false);
  if (r.status != 0 || r.out.is_discarded())
    r.error = child_error(kernels::read_text_file(stem + ".stderr"), r.status);
  return r;
}

nlohmann::json or_null(const nlohmann::json& j, const nlohmann::json::json_pointer& p) {
  return j.contains(p) ? j.at(p) : nlohmann::json(nullptr);
}

/// The schedule list of BestFormat: the fixed formats with the csr schedule.
std::string bestformat_list(KernelKind k) {
  if (k == KernelKind::MTTKRP) return "csf\n";
  return "# BestFormat (waco-hybrid ablate): fixed formats, csr's schedule\n"
         "csr\ndcsr\ncsc\nbcsr2x2\nbcsr4x4\nbcsr8x8\nbcsr4x1\nbcsr1x4\n";
}

/// The library baselines of the side-by-side run: the csr (csf) reference first.
std::vector<std::string> baseline_impls(KernelKind k) {
  std::vector<std::string> names;
  for (const char* n : {"csr", "csf", "eigen", "rsb-tuned"})
    for (const ImplementationInfo& info : all_implementations())
      if (info.name == n && info.supports(k)) names.push_back(n);
  return names;
}

std::string fmt_speedup(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%5.3f", x);
  return buf;
}

/// Canonical text of a schedule with "all cores" spelled out, to match schedules across outputs.
std::string schedule_key(KernelKind k, const std::string& text, int threads) {
  try {
    codegen::SuperSchedule s = codegen::schedule_from_string(k, text);
    if (s.threads == 0) s.threads = threads;
    return codegen::to_text(codegen::canonicalize(s));
  } catch (const Error&) {
    return text;
  }
}

struct MatrixRun {
  std::string file, name, fingerprint;
  std::int64_t nnz = 0;
  KernelKind kind = KernelKind::SpMV;
  int dense = 1, threads = 1;
  std::string dtype = "f32";           ///< the value type every child computes in
  std::vector<std::string> read_args;  ///< how every child reads the file (--dtype among them)
  std::string dir;  ///< work folder of this matrix
};

/// The matrix and setting every stored row names (run rows and the side-by-side row alike).
nlohmann::json matrix_fields(const MatrixRun& m) {
  return {{"file", m.file},   {"name", m.name},       {"nnz", m.nnz},
          {"kernel", kernel_name(m.kind)}, {"dense", m.dense}, {"threads", m.threads},
          {"dtype", m.dtype}};
}

/// `waco-hybrid COMMAND --kernel K` with the run's threads, (not for SpMV) dense size and reading
/// (value type, zeros, non-finite values), unless `own` (a configuration's tune arguments) gives
/// them itself.
std::vector<std::string> child_argv(const std::string& command, const MatrixRun& m,
                                    const std::vector<std::string>& own = {}) {
  std::vector<std::string> argv = {self_executable(), command, "--kernel",
                                   std::string(kernel_name(m.kind))};
  const auto has = [&](const char* flag) {
    return std::find(own.begin(), own.end(), flag) != own.end();
  };
  if (!has("--threads")) argv.insert(argv.end(), {"--threads", std::to_string(m.threads)});
  if (m.kind != KernelKind::SpMV && !has("--dense"))
    argv.insert(argv.end(), {"--dense", std::to_string(m.dense)});
  for (std::size_t i = 0; i < m.read_args.size(); ++i) {
    const std::string& a = m.read_args[i];
    const bool takes_value = a == "--dtype";
    if (!has(a.c_str())) {
      argv.push_back(a);
      if (takes_value) argv.push_back(m.read_args[i + 1]);
    }
    if (takes_value) ++i;
  }
  return argv;
}

/// Spearman of a model's scores against the exhaustive run's verified times (per model file).
std::optional<double> model_spearman(const MatrixRun& m, const std::string& exh_db,
                                     const std::string& model, kernels::FileLock& lock) {
  if (!fs::exists(exh_db)) return std::nullopt;
  std::vector<std::string> texts;
  std::map<std::string, double> measured;
  {
    ResultsDb db(exh_db);
    // Keyed as the exhaustive tune stored them: its --repeat (from its report; tune's default 10).
    const nlohmann::json report = nlohmann::json::parse(
        kernels::read_text_file(fs::path(exh_db).replace_extension(".json").string()), nullptr,
        false);
    const int repeats = report.is_object() ? report.value("repeats", 10) : 10;
    const heuristics::MeasurementKey key{m.fingerprint, m.kind,
                                         m.kind == KernelKind::SpMV ? 1 : m.dense, repeats};
    for (const heuristics::StoredMeasurement& s : db.measurements(key)) {
      if (!s.candidate.schedule || s.measurement.status != heuristics::MeasureStatus::Ok) continue;
      const std::string text = codegen::to_text(*s.candidate.schedule);
      if (measured.emplace(schedule_key(m.kind, text, m.threads), s.measurement.median_s).second)
        texts.push_back(text);
    }
  }
  if (texts.size() < 3) return std::nullopt;
  const std::string list = m.dir + "/spearman-schedules.txt";
  std::string body;
  for (const std::string& t : texts) body += t + "\n";
  write_text_file(list, body);
  std::vector<std::string> argv = child_argv("predict", m);
  argv.insert(argv.end(), {"--schedules", list, "--top", "0", "--json"});
  if (!model.empty()) argv.insert(argv.end(), {"--model", model});
  argv.push_back(m.file);
  // Scoring only: no CPU lock needed, but a quick one; take it so as not to disturb a timing.
  const ChildResult r = run_child(argv, m.dir + "/predict", lock);
  if (!r.error.empty() || !r.out.contains("ranked")) return std::nullopt;
  std::vector<double> predicted, times;
  for (const nlohmann::json& row : r.out.at("ranked")) {
    const auto it =
        measured.find(schedule_key(m.kind, row.at("schedule").get<std::string>(), m.threads));
    if (it == measured.end()) continue;
    predicted.push_back(row.at("score").get<double>());
    times.push_back(it->second);
  }
  if (predicted.size() < 3) return std::nullopt;
  const double rho = learned::spearman(predicted, times);
  return std::isfinite(rho) ? std::optional<double>(rho) : std::nullopt;
}

/// The tune's claim: its result's speedup over the faster csr reference (tune's claimed_speedup:
/// 1 when the result is csr). Tunes before that field: the winner's speedup over the reference
/// its verdict names ("csr schedule" or "csr baseline"; when it names none, the smaller of the
/// two speedups), null when it gives none.
nlohmann::json claimed_speedup(const nlohmann::json& t) {
  using P = nlohmann::json::json_pointer;
  if (t.contains("claimed_speedup")) return t.at("claimed_speedup");
  const nlohmann::json over_schedule = or_null(t, P("/speedup_over_csr"));
  const nlohmann::json over_baseline = or_null(t, P("/speedup_over_csr_baseline"));
  const nlohmann::json reference = or_null(t, P("/verdict_detail/reference"));
  if (reference.is_string())
    return reference.get<std::string>().find("baseline") != std::string::npos ? over_baseline
                                                                              : over_schedule;
  if (over_schedule.is_number() && over_baseline.is_number())
    return std::min(over_schedule.get<double>(), over_baseline.get<double>());
  return over_schedule.is_number() ? over_schedule : over_baseline;
}

/// The stored row of `config` for this matrix and setting. A row of the other value type (the
/// table keys rows without it) is an error, not a result to replace: one database per --dtype.
std::optional<nlohmann::json> find_row(const ResultsDb& db, const MatrixRun& m,
                                       const std::string& config) {
  std::optional<nlohmann::json> row = db.find_ablation(
      m.fingerprint, std::string(kernel_name(m.kind)), m.dense, m.threads, config);
  if (row && row->is_object() && row->value("dtype", std::string("f32")) != m.dtype)
    throw Error("the results database holds " + row->value("dtype", std::string("f32")) +
                    " ablation rows of " + m.name + " (" + config + "); this run is " + m.dtype,
                "give each --dtype its own database (--db)");
  return row;
}

nlohmann::json run_config(const Options& o, const MatrixRun& m, const Config& c,
                          std::size_t position, kernels::FileLock& lock) {
  const std::string stem = m.dir + "/" + c.name;
  const std::string tune_db = stem + ".sqlite";
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(tune_db + suffix);  // fresh
  std::vector<std::string> args = c.args;
  for (std::string& a : args)
    if (a == "@bestformat") {
      a = m.dir + "/bestformat.txt";
      write_text_file(a, bestformat_list(m.kind));
    }
  std::vector<std::string> argv = child_argv("tune", m, c.args);
  argv.insert(argv.end(), {"--json", "--quiet", "--no-plan-cache", "--db", tune_db});
  const std::string search =
      arg_value(c, "--search").value_or(has_arg(c, "--schedules") ? "list" : "random");
  const bool uses_model = tuning::ranks_by_model(search);
  if (uses_model && !o.model.empty() && !has_arg(c, "--model"))
    argv.insert(argv.end(), {"--model", o.model});
  if (!o.cache_dir.empty()) argv.insert(argv.end(), {"--cache-dir", o.cache_dir});
  argv.insert(argv.end(), args.begin(), args.end());
  for (const std::string& a : split_words(o.tune_args)) argv.push_back(a);
  argv.push_back(m.file);
  const ChildResult r = run_child(argv, stem, lock);
  const nlohmann::json& t = r.out;
  nlohmann::json row = matrix_fields(m);
  row.update({{"format", "waco-ablation-run"},
              {"version", kRowVersion},
              {"config", c.name},
              {"description", c.description},
              {"kind", c.kind},
              {"tune_args", stored_args(o, c)},
              {"search", search},
              {"uses_model", uses_model},
              {"child_s", r.seconds},
              {"position", position}});
  if (!r.error.empty()) {
    row.update({{"status", "failed"}, {"error", r.error}, {"winner", nullptr}});
    return row;
  }
  using P = nlohmann::json::json_pointer;
  const nlohmann::json measured = t.value("measured", 0) + t.value("reused", 0);
  row.update({{"status", "ok"},
              {"error", nullptr},
              {"winner", or_null(t, P("/best/schedule"))},
              {"verdict", or_null(t, P("/verdict"))},
              {"search_method", or_null(t, P("/search_info/method"))},
              {"admissible", or_null(t, P("/space/admissible_count"))},
              {"candidates_measured", measured},
              {"confirmed_top", or_null(t, P("/confirm/top"))},
              {"choice_s", or_null(t, P("/economy/choice_s"))},
              {"measure_s", or_null(t, P("/economy/measure_s"))},
              {"confirm_s", or_null(t, P("/economy/confirm_s"))},
              {"tune_s", or_null(t, P("/time_s"))},
              {"tune_speedup_over_csr", or_null(t, P("/speedup_over_csr"))},
              {"claimed_speedup", claimed_speedup(t)},
              {"claim_reference", or_null(t, P("/verdict_detail/reference"))},
              {"claimed_interval", or_null(t, P("/speedup_interval"))},
              {"busy", or_null(t, P("/busy_warning")).is_string()},
              {"busy_warning", or_null(t, P("/busy_warning"))},
              {"break_even_calls", or_null(t, P("/economy/break_even_calls"))},
              {"recall_at_10", or_null(t, P("/search_info/recall_at_10"))},
              {"spearman", nullptr},
              {"model", uses_model ? or_null(t, P("/search_info/model")) : nlohmann::json(nullptr)},
              {"context", or_null(t, P("/context"))}});
  return row;
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

/// The final side-by-side run: every distinct winner, the csr schedule and the library baselines
/// interleaved in one bench child, replicated in fresh children until two consecutive
/// undisturbed runs agree (final_runs.hpp) or --final-runs-max runs were made. Null when
/// interrupted.
nlohmann::json run_side_by_side(const Options& o, const MatrixRun& m,
                                const std::map<std::string, nlohmann::json>& rows,
                                kernels::FileLock& lock) {
  const SideBySidePlan plan = plan_side_by_side(m, rows);
  std::string impl_list;
  for (const std::string& i : plan.impls) impl_list += (impl_list.empty() ? "" : ",") + i;
  std::vector<std::string> argv = child_argv("bench", m);
  argv.insert(argv.end(), {"--impl", impl_list, "--json", "--repeat", std::to_string(o.bench_repeat),
                           "--warmup", "2", "--retake-disturbed", std::to_string(kRetakeDisturbed)});
  if (o.roofline) argv.push_back("--roofline");
  if (!o.cache_dir.empty()) argv.insert(argv.end(), {"--cache-dir", o.cache_dir});
  for (const std::string& text : plan.schedules) argv.insert(argv.end(), {"--schedule", text});
  argv.push_back(m.file);
  const volatile std::sig_atomic_t& interrupted = interrupt_flag();
  std::vector<nlohmann::json> outs;
  std::vector<double> seconds;
  const Replication rep = replicate(o.final_runs_max, [&](int i) {
    FinalRun f;
    if (!interrupted) {
      const std::string stem = m.dir + "/side-by-side-" + std::to_string(i + 1);
      const ChildResult r = run_child(argv, stem, lock);
      // bench exits 1 when a kernel computed a wrong result; its JSON still has every row.
      if (!interrupted && (!r.out.is_object() || !r.out.contains("results")))
        throw Error("the side-by-side run on " + m.file + " failed: " + r.error,
                    "run the bench command it names in " + stem + ".stderr by hand");
      outs.push_back(r.out);
      seconds.push_back(r.seconds);
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
      std::fprintf(stderr, "ablate: %s side by side, run %d: over the %s:%s%s\n", m.name.c_str(),
                   i + 1, f.reference.c_str(), line.c_str(),
                   f.busy ? ("  (busy: " + f.busy_reason + ")").c_str() : "");
    }
    return f;
  });
  if (interrupted) return nullptr;

  std::vector<const nlohmann::json*> used;
  for (std::size_t i : runs_used(rep)) used.push_back(&outs[i]);
  nlohmann::json baselines = nlohmann::json::object(), configs = nlohmann::json::object();
  for (std::size_t i = 0; i < plan.impls.size(); ++i)
    baselines[plan.impls[i]] = timing_over_runs(used, static_cast<int>(i));
  const std::map<std::string, Delivered> delivered = delivered_speedups(rep);
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
  nlohmann::json runs = nlohmann::json::array();
  std::string busy_reason;
  for (std::size_t i = 0; i < rep.runs.size(); ++i) {
    runs.push_back(final_run_json(rep.runs[i], seconds[i]));
    if (busy_reason.empty()) busy_reason = rep.runs[i].busy_reason;
  }
  double total_s = 0;
  for (double x : seconds) total_s += x;
  nlohmann::json row = matrix_fields(m);
  row.update({{"format", "waco-ablation-bench"},
              {"version", kRowVersion},
              {"repeats", o.bench_repeat},
              {"warmup", 2},
              {"retake_disturbed", kRetakeDisturbed},
              {"distinct_schedules", plan.schedules.size()},
              {"final_runs", rep.runs.size()},
              {"final_runs_max", o.final_runs_max},
              {"settled", rep.settled},
              {"busy", rep.busy},
              {"busy_reason", rep.busy ? nlohmann::json(busy_reason) : nlohmann::json()},
              {"undecided", rep.undecided},
              {"agree_rule", kAgreeRule},
              {"configs", configs},
              {"baselines", baselines},
              {"csr_schedule", timing_over_runs(used, plan.layout.schedule)},
              {"runs", runs},
              {"working_set", working_set_json(used)},
              {"seconds", total_s},
              {"context", used.back()->value("context", nlohmann::json(nullptr))}});
  return row;
}

/// A delivered speedup for the text table: "1.234", "1.234?" when the runs never agreed on it,
/// "busy" when the row has no two undisturbed runs.
std::string delivered_text(const nlohmann::json& bench, const std::string& config) {
  const nlohmann::json& c = bench.at("configs").value(config, nlohmann::json::object());
  const nlohmann::json d = c.value("delivered", nlohmann::json());
  if (!d.is_object()) return "   -  ";
  if (bench.value("busy", false)) return "  busy";
  return fmt_speedup(d.at("speedup").get<double>()) + (d.value("decided", false) ? " " : "?");
}

int run_ablate(const Options& o) {
  if (o.list) {
    for (const Config& c : standard_configs()) {
      std::string args;
      for (const std::string& a : c.args) args += (args.empty() ? "" : " ") + a;
      std::printf("%-20s %-9s %s\n%-30s tune %s\n", c.name.c_str(), c.kind.c_str(),
                  c.description.c_str(), "", args.c_str());
    }
    return kExitOk;
  }
  if (o.kernel.empty()) throw Error("--kernel is required", "give --kernel spmv|spmm|sddmm|mttkrp");
  if (o.files.empty()) throw Error("no matrix given", "give one or more matrix files");
  const KernelKind kind = kernel_from_option(o.kernel);
  const std::vector<Config> configs = chosen_configs(o);
  const int threads = resolve_threads(o.threads);
  const int dense =
      kind == KernelKind::SpMV ? 1 : (o.dense > 0 ? o.dense : default_dense_size(kind));
  const std::string db_path = o.db.empty() ? heuristics::default_results_path() : o.db;
  const std::string work = o.work.empty() ? db_path + ".ablate" : o.work;
  for (const std::string& f : o.files)
    if (!fs::exists(f)) throw Error("no such file: " + f);
  ResultsDb db(db_path);
  fs::create_directories(work);
  kernels::FileLock lock(o.cpu_lock);
  InterruptGuard interrupt_guard;
  const volatile std::sig_atomic_t& interrupted = interrupt_flag();

  const std::size_t units = o.files.size() * (configs.size() + 1);
  std::size_t done_units = 0, run_units = 0;
  double run_seconds = 0;
  const std::string kname(kernel_name(kind));
  nlohmann::json summary = nlohmann::json::array();
  if (!o.quiet)
    std::fprintf(stderr,
                 "ablate: %s, %zu matrices x %zu configurations + side by side, %d threads, "
                 "results in %s (work files in %s)\n",
                 kname.c_str(), o.files.size(), configs.size(), threads, db_path.c_str(),
                 work.c_str());
  for (std::size_t fi = 0; fi < o.files.size(); ++fi) {
    MatrixRun m;
    m.file = o.files[fi];
    m.name = fs::path(m.file).filename().string();
    m.kind = kind;
    m.dense = dense;
    m.threads = threads;
    m.dtype = std::string(kernels::dtype_name(o.read.dtype));
    m.read_args = read_option_args(o.read);
    {
      const Operand op = load_operand(m.file, o.read, kind);
      const heuristics::MatrixRecord rec =
          op.matrix ? heuristics::matrix_record(op.matrix->matrix, m.file)
                    : heuristics::matrix_record(op.tensor->tensor, m.file);
      m.fingerprint = rec.fingerprint;
      m.nnz = rec.nnz;
      db.record_matrix(rec);
    }
    m.dir = work + "/" + m.fingerprint + "-" + kname + "-" + std::to_string(dense) + "-t" +
            std::to_string(threads) + (o.read.dtype == kernels::Dtype::F32 ? "" : "-" + m.dtype);
    fs::create_directories(m.dir);
    std::map<std::string, nlohmann::json> rows;
    bool changed = false;
    for (std::size_t ci = 0; ci < configs.size(); ++ci) {
      const Config& c = configs[ci];
      if (interrupted) break;
      std::optional<nlohmann::json> have = find_row(db, m, c.name);
      if (o.redo) have.reset();
      if (have && have->value("status", "") == "ok" &&
          have->value("tune_args", nlohmann::json()) == nlohmann::json(stored_args(o, c)) &&
          !(o.redo_busy && have->value("busy", false))) {
        rows[c.name] = *have;
        ++done_units;
        continue;
      }
      const double t0 = now_seconds();
      nlohmann::json row = run_config(o, m, c, ci, lock);
      if (interrupted) break;  // the child was interrupted too: not a result
      rows[c.name] = row;
      changed = true;
      run_seconds += now_seconds() - t0;
      ++run_units;
      ++done_units;
      db.record_ablation(m.fingerprint, kname, dense, threads, c.name, row);
      if (!o.quiet) {
        const double eta =
            run_units ? run_seconds / run_units * static_cast<double>(units - done_units) : 0;
        std::fprintf(stderr, "ablate: [%zu/%zu] %s %-20s %6.1f s  %s  (%zu/%zu done, %s left)\n",
                     fi + 1, o.files.size(), m.name.c_str(), c.name.c_str(), now_seconds() - t0,
                     row.value("status", "") == "ok"
                         ? ("winner " + row.at("winner").dump()).c_str()
                         : ("failed: " + row.value("error", std::string())).c_str(),
                     done_units, units, duration_text(eta).c_str());
      }
    }
    if (interrupted) break;
    // Spearman of each model the configurations used, against the exhaustive timings.
    const auto exh = std::find_if(configs.begin(), configs.end(),
                                  [](const Config& c) { return c.name == "exhaustive"; });
    if (exh != configs.end()) {
      std::map<std::string, std::optional<double>> by_model;
      for (auto& [name, row] : rows) {
        if (!row.value("uses_model", false) || row.value("status", "") != "ok" ||
            !row.at("spearman").is_null())
          continue;
        const Config& c = *std::find_if(configs.begin(), configs.end(),
                                        [&](const Config& x) { return x.name == name; });
        const std::string model = arg_value(c, "--model").value_or(o.model);
        if (!by_model.count(model))
          by_model[model] = model_spearman(m, m.dir + "/exhaustive.sqlite", model, lock);
        if (by_model[model]) {
          row["spearman"] = *by_model[model];
          db.record_ablation(m.fingerprint, kname, dense, threads, name, row);
        }
      }
    }
    // The side-by-side run, unless one of exactly these configurations' winners is stored by
    // this version of ablate (an older row has no csr schedule and no replication: timed again).
    std::optional<nlohmann::json> bench = find_row(db, m, "side-by-side");
    if (changed || o.redo) bench.reset();
    std::set<std::string> want, have;
    for (const auto& [name, row] : rows) want.insert(name);
    if (bench && bench->contains("configs"))
      for (const auto& [name, t] : bench->at("configs").items()) have.insert(name);
    if (!bench || want != have || bench->value("version", 0) < kRowVersion ||
        (o.redo_busy && bench->value("busy", false))) {
      const double t0 = now_seconds();
      bench = run_side_by_side(o, m, rows, lock);
      if (interrupted || bench->is_null()) break;
      db.record_ablation(m.fingerprint, kname, dense, threads, "side-by-side", *bench);
      run_seconds += now_seconds() - t0;
      ++run_units;
      if (!o.quiet) {
        const std::string undecided = bench->at("undecided").empty()
                                          ? std::string()
                                          : ", undecided: " + bench->at("undecided").dump();
        std::fprintf(stderr,
                     "ablate: [%zu/%zu] %s side by side: %zu schedules + %zu baselines, %d runs "
                     "(%s)%s, %.1f s\n",
                     fi + 1, o.files.size(), m.name.c_str(),
                     bench->value("distinct_schedules", 0ul), bench->at("baselines").size(),
                     bench->value("final_runs", 0),
                     bench->value("busy", false) ? "busy: no two undisturbed runs"
                     : bench->value("settled", false) ? "the last two agree"
                                                      : "never agreed",
                     undecided.c_str(), now_seconds() - t0);
      }
    }
    ++done_units;
    nlohmann::json line = {
        {"file", m.file}, {"fingerprint", m.fingerprint}, {"side_by_side", *bench}, {"runs", rows}};
    summary.push_back(line);
  }
  if (interrupted) {
    std::fprintf(stderr,
                 "ablate: interrupted; run the same command again to resume (results so far "
                 "are in %s)\n",
                 db_path.c_str());
    return kExitFailure;
  }
  if (o.json) {
    print_json({{"kernel", kname},
                {"dense", dense},
                {"threads", threads},
                {"dtype", std::string(kernels::dtype_name(o.read.dtype))},
                {"db", db_path},
                {"matrices", summary}});
    return kExitOk;
  }
  std::printf(
      "%s %s, dense %d, %d threads: delivered speedup of each configuration's winner over the faster "
      "%s reference (baseline or schedule), side by side, median of the final runs (? = the runs "
      "never agreed on it; busy = no two undisturbed runs)\n%-28s",
      kname.c_str(), std::string(kernels::dtype_name(o.read.dtype)).c_str(), dense, threads,
      kind == KernelKind::MTTKRP ? "csf" : "csr", "matrix");
  for (const Config& c : configs)
    std::printf(" %*s", static_cast<int>(std::max<std::size_t>(6, c.name.size())), c.name.c_str());
  std::printf("\n");
  for (const nlohmann::json& line : summary) {
    std::string f = fs::path(line.at("file").get<std::string>()).filename().string();
    if (f.size() > 28) f = f.substr(0, 25) + "...";
    std::printf("%-28s", f.c_str());
    for (const Config& c : configs)
      std::printf(" %*s", static_cast<int>(std::max<std::size_t>(6, c.name.size())),
                  delivered_text(line.at("side_by_side"), c.name).c_str());
    std::printf("\n");
  }
  std::printf("(waco-hybrid report --db %s -o report.html draws the plots and tables)\n",
              db_path.c_str());
  return kExitOk;
}

}  // namespace

Command make_ablate_command() {
  return {
      "ablate",
      "Run matrices through configurations of the pipeline and baselines; compare side by side",
      [](CLI::App& sub) -> std::function<int()> {
        auto o = std::make_shared<Options>();
        sub.add_option("--kernel", o->kernel, "Kernel: spmv, spmm, sddmm or mttkrp")
            ->check(CLI::IsMember({"spmv", "spmm", "sddmm", "mttkrp"}));
        sub.add_option("FILES", o->files, "Matrix Market (or FROSTT for mttkrp) files");
        sub.add_option("--configs", o->configs,
                       "Comma-separated configurations (default: the standard set, " +
                           standard_names() + "; see --list-configs)");
        sub.add_option("--config", o->extra,
                       "Define a configuration: NAME=TUNE-ARGUMENTS (repeatable), e.g. "
                       "\"waconet=--search anns --model m.model\"")
            ->allow_extra_args(false);  // FILES may follow: one value per occurrence
        sub.add_flag("--list-configs", o->list,
                     "List the standard configurations and their tune arguments");
        sub.add_option("--db", o->db,
                       "Results database (default: " + heuristics::default_results_path() + ")");
        sub.add_option("--work", o->work,
                       "Folder for each run's tune database and output (default: the database's "
                       "path + .ablate)");
        sub.add_option("--model", o->model,
                       "Cost model for the model searches without their own --model (default: the "
                       "shipped one)");
        sub.add_option("--dense", o->dense, "Dense size: J for spmm and mttkrp, K for sddmm")
            ->check(CLI::Range(1, 1 << 20));
        add_threads_option(sub, o->threads);
        sub.add_option("--bench-repeat", o->bench_repeat,
                       "Interleaved timed rounds of the side-by-side run")
            ->check(CLI::Range(3, 100000))
            ->capture_default_str();
        sub.add_option("--final-runs-max", o->final_runs_max,
                       "Fresh side-by-side runs at most: the final run is repeated until two "
                       "consecutive undisturbed runs agree (at least 2 runs)")
            ->check(CLI::Range(2, 100))
            ->capture_default_str();
        sub.add_option(
            "--tune-args", o->tune_args,
            "More tune arguments for every configuration, e.g. \"--repeat 5 --confirm-rounds 10\"");
        sub.add_option("--cache-dir", o->cache_dir,
                       "Kernel compile cache of every child (default: tune's)");
        add_cpu_lock_option(sub, o->cpu_lock, "around every measuring child");
        sub.add_flag("--redo", o->redo, "Run every configuration again, replacing stored rows");
        sub.add_flag("--redo-busy", o->redo_busy,
                     "Run the stored rows marked busy again (a tune or side-by-side run that other "
                     "processes disturbed)");
        sub.add_flag("--roofline", o->roofline,
                     "The side-by-side runs measure the machine's peak and STREAM bandwidth beside "
                     "them (bench --roofline, about 0.5 s a run): report gives each "
                     "implementation's share of STREAM");
        sub.add_flag("--json", o->json, "Print JSON (every row)");
        sub.add_flag("--quiet,-q", o->quiet, "No progress on stderr");
        add_read_options(sub, o->read);
        add_dtype_option(sub, o->read.dtype);
        sub.footer(
            "Each configuration is one `waco-hybrid tune --json` child with a fresh database of\n"
            "its own (in --work); then every configuration's winner, the csr schedule and the\n"
            "library baselines (csr, eigen, rsb-tuned where they exist) are timed side by side,\n"
            "interleaved, in one `bench` child: only those timings compare configurations. That\n"
            "run is repeated in fresh children until two consecutive undisturbed runs agree\n"
            "(every winner's speedup over the faster of csr and the csr schedule changed by\n"
            "less than 5% or kept its band: below 0.97x, 0.97-1.03x, above 1.03x), at most\n"
            "--final-runs-max; a winner they never agree on is 'undecided', a matrix without two\n"
            "undisturbed runs 'busy' (report leaves it out). Rows go to the results database\n"
            "(table ablation); a stopped run resumes, skipping what is stored. Spearman: each\n"
            "model's scores against the exhaustive run's timings.\n"
            "Kernels compiled by an earlier configuration are reused from the compile cache.\n\n"
            "Examples:\n"
            "  waco-hybrid ablate --kernel spmv --db abl.sqlite A.mtx B.mtx\n"
            "  waco-hybrid ablate --kernel spmm --configs exhaustive,hybrid,random,bandit --db "
            "abl.sqlite A.mtx\n"
            "  waco-hybrid ablate --kernel spmv --config \"hybrid-1t=--search anns --threads 1\" "
            "A.mtx\n"
            "  waco-hybrid ablate --kernel spmm --dense 64 --dtype f64 --db abl-f64.sqlite A.mtx"
            "   # one database per value type\n"
            "  waco-hybrid ablate --list-configs\n"
            "  waco-hybrid report --db abl.sqlite -o report.html\n");
        return [o] { return run_ablate(*o); };
      }};
}

}  // namespace waco::cli
