// The children of `waco-hybrid ablate` (run_child: one waco-hybrid command holding the CPU lock,
// its JSON and its error line; child_argv: its command line with the run's setting), and what runs
// in them before the side-by-side run: one configuration's tune and its stored row with the tune's
// claim (run_config), a cost model's Spearman against the exhaustive run's timings
// (model_spearman: a predict child), and the rows stored for a matrix (find_row).
//
// Children, not calls: the tune pipeline is not a library call yet (issue 34, tune-library).
#include "ablate_internal.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_common.hpp"
#include "waco/tune/searcher.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/ranking_metrics.hpp"

namespace waco::cli {
using namespace waco::kernels;
using heuristics::ResultsDb;

namespace {

namespace fs = std::filesystem;

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

nlohmann::json or_null(const nlohmann::json& j, const nlohmann::json::json_pointer& p) {
  return j.contains(p) ? j.at(p) : nlohmann::json(nullptr);
}

/// The schedule list of BestFormat: the fixed formats with the csr schedule.
std::string bestformat_list(KernelKind k) {
  if (k == KernelKind::MTTKRP) return "csf\n";
  return "# BestFormat (waco-hybrid ablate): fixed formats, csr's schedule\n"
         "csr\ndcsr\ncsc\nbcsr2x2\nbcsr4x4\nbcsr8x8\nbcsr4x1\nbcsr1x4\n";
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

}  // namespace

namespace ablate_detail {

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

std::string schedule_key(KernelKind k, const std::string& text, int threads) {
  try {
    codegen::SuperSchedule s = codegen::schedule_from_string(k, text);
    if (s.threads == 0) s.threads = threads;
    return codegen::to_text(codegen::canonicalize(s));
  } catch (const Error&) {
    return text;
  }
}

nlohmann::json matrix_fields(const MatrixRun& m) {
  return {{"file", m.file},   {"name", m.name},       {"nnz", m.nnz},
          {"kernel", kernel_name(m.kind)}, {"dense", m.dense}, {"threads", m.threads},
          {"dtype", m.dtype}};
}

std::vector<std::string> child_argv(const std::string& command, const MatrixRun& m,
                                    const std::vector<std::string>& own) {
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
  std::vector<std::string> args = concrete_args(c.args, m.kind);
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
              {"core_round_trip_ns", or_null(t, P("/core_round_trip_ns"))},
              {"break_even_calls", or_null(t, P("/economy/break_even_calls"))},
              {"recall_at_10", or_null(t, P("/search_info/recall_at_10"))},
              {"spearman", nullptr},
              {"model", uses_model ? or_null(t, P("/search_info/model")) : nlohmann::json(nullptr)},
              {"context", or_null(t, P("/context"))}});
  return row;
}

}  // namespace ablate_detail

}  // namespace waco::cli
