// waco-hybrid bench: several implementations side by side on one or more files, interleaved
// (round r times every implementation once before round r+1, starting one implementation later
// each round), so that machine noise hits all of them alike; reports median/min/max and the ratio of each median to the first implementation's.
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli_common.hpp"
#include "command.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/layout_pads.hpp"
#include "waco/kernels/peaks.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/codegen/super_schedule.hpp"

namespace waco::cli {
using namespace waco::kernels;

namespace {

struct Options {
  std::string kernel;
  std::vector<std::string> impls;
  std::vector<std::string> schedules;  ///< generated kernels, after the implementations
  codegen::GeneratedOptions generated;
  std::string cpu_lock;  ///< --cpu-lock: held from the first file until the process exits
  CacheOptions cache;  ///< the tile model's cache (jstream)
  std::vector<std::string> files;
  int dense = 0;
  int threads = 0;
  int repeat = 10;
  int warmup = 2;
  int settle = kDefaultSettleRuns;
  double settle_us = kDefaultSettleSeconds * 1e6;  ///< the settle runs take at least this long
  double settle_enough_us = kSettleEnoughSeconds * 1e6;  ///< ... and end once they took this long
  double min_run_us = kDefaultMinRunSeconds * 1e6;  ///< a timed run takes at least this long
  int retake_disturbed = 0;  ///< per implementation, disturbed timed runs taken again
  int layouts = 1;  ///< --layouts: memory layouts of each implementation of a small problem
  std::uint64_t seed = 1;
  double tolerance = kDefaultTolerance;
  bool json = false;
  bool csv = false;
  bool roofline = false;  ///< measure the machine's peaks first and report the fractions
  std::string save;  ///< also write the JSON here
  ReadOptions read;
};

struct Row {
  std::string file;
  std::string impl;
  std::string error;  ///< why this implementation has no time on this file (empty if none)
  TimingStats t;
  double gflops = 0, gbs = 0, ratio = 0, conversion = 0, tuning = 0, max_rel_error = 0;
  /// The problem's least memory traffic (CSR-equivalent bytes: cli_common's min_traffic_bytes),
  /// which GB/s counts, and its working set against the caches.
  double traffic_bytes = 0;
  std::int64_t nnz = 0;
  int layouts = 1;  ///< the memory layouts it was timed in (--layouts, small problems)
};

std::vector<Row> bench_file(const Options& o, KernelKind kind, const std::string& file, int threads) {
  const int dense = o.dense > 0 ? o.dense : default_dense_size(kind);
  const Operand op = load_operand(file, o.read, kind);
  const DenseOperands operands = dense_operands(kind, op, dense, o.seed, "", o.read.dtype);
  const Problem p = make_problem(kind, op.matrix ? &op.matrix->matrix : nullptr,
                                 op.tensor ? &op.tensor->tensor : nullptr, operands);
  const Reference ref = compute_reference(p);

  std::vector<Row> rows;
  // Per implementation its prepared copies, one a layout (--layouts: a small problem's
  // implementations each in several, a pad before each copy; round k runs copy k mod their
  // number); none when it failed.
  std::vector<std::vector<std::unique_ptr<Implementation>>> impls;
  const int layouts = layouts_for(p, o.layouts);
  LayoutPads pads;
  std::vector<std::string> names = o.impls;
  for (const std::string& s : o.schedules) names.push_back("gen:" + s);
  for (const std::string& name : names) {
    Row r;
    r.file = file;
    r.impl = name;
    r.nnz = p.nnz();
    r.traffic_bytes = min_traffic_bytes(p);
    std::vector<std::unique_ptr<Implementation>> copies;
    for (int k = 0; k < layouts && r.error.empty(); ++k) {
      std::unique_ptr<Implementation> impl =
          name.rfind("gen:", 0) == 0 ? std::unique_ptr<Implementation>(make_generated(kind, name.substr(4), o.generated))
                                     : make_implementation(all_implementations(), name, kind);
      apply_cache_options(*impl, o.cache);
      if (layouts > 1) pads.pad();
      try {
        impl->prepare(p, threads);
        impl->run();
        const Verification v = verify(impl->output(), ref, o.tolerance);
        r.max_rel_error = std::max(r.max_rel_error, v.max_rel_error);
        if (!v.ok) r.error = "wrong result" + std::string(k > 0 ? " in another layout" : "") + ": " + v.message;
      } catch (const Error& e) {  // an implementation that cannot run this input: a row, not a stop
        r.error = e.what();
      }
      if (k == 0) {
        r.conversion = impl->conversion_seconds();
        r.tuning = impl->tuning_seconds();
      }
      copies.push_back(std::move(impl));
    }
    r.layouts = static_cast<int>(copies.size());
    rows.push_back(r);
    if (!r.error.empty()) copies.clear();
    impls.push_back(std::move(copies));
  }

  LayoutRotation rotation;
  std::vector<std::function<void()>> runs(impls.size());
  for (std::size_t i = 0; i < impls.size(); ++i) {
    if (impls[i].empty()) continue;
    std::vector<Implementation*> copies;
    for (const auto& c : impls[i]) copies.push_back(c.get());
    runs[i] = rotation.runner(std::move(copies));
  }
  const std::vector<TimingStats> stats = time_interleaved(
      runs,
      {o.warmup, o.repeat, now_seconds, o.retake_disturbed, threads, o.settle_us * 1e-6,
       o.min_run_us * 1e-6, o.settle_enough_us * 1e-6},
      o.settle,
      layouts > 1 ? AfterRound([&rotation](int done, const auto&) {
        rotation.after_round(done);
        return std::vector<std::size_t>{};
      })
                  : AfterRound());
  const double flops = p.flops(), bytes = min_traffic_bytes(p);
  for (std::size_t i = 0; i < impls.size(); ++i) {
    if (impls[i].empty()) continue;
    rows[i].t = stats[i];
    rows[i].gflops = flops / rows[i].t.median * 1e-9;
    rows[i].gbs = bytes / rows[i].t.median * 1e-9;
    if (rows[0].error.empty()) rows[i].ratio = rows[i].t.median / rows[0].t.median;
  }
  return rows;
}

/// The machine's arithmetic peak in the problem's value type.
double peak_gflops(const MachinePeaks& p, Dtype dtype) {
  return dtype == Dtype::F64 ? p.fp64_gflops : p.fp32_gflops;
}

void print_table(const std::vector<Row>& rows, const Options& o, int threads,
                 const std::optional<MachinePeaks>& peaks) {
  std::printf("%s, dense %d, %d threads, %d warm-up + %d timed runs, interleaved; ratio = median / median of %s\n",
              o.kernel.c_str(), o.dense > 0 ? o.dense : default_dense_size(*parse_kernel(o.kernel)),
              threads, o.warmup, o.repeat, rows.empty() ? "-" : rows.front().impl.c_str());
  if (peaks)
    std::printf("roofline (%d threads): %s peak %.1f GFLOP/s (%s), bandwidth %.1f GB/s (STREAM "
                "triad); %%peak and %%bw are each row's fractions of them\n",
                peaks->threads, std::string(dtype_name(o.read.dtype)).c_str(), peak_gflops(*peaks, o.read.dtype),
                isa_name(peaks->isa), peaks->bandwidth_gbs);
  std::printf("%-28s %-14s %12s %12s %12s %9s %8s %7s%s\n", "file", "impl", "median", "min", "max",
              "GFLOP/s", "GB/s", "ratio", peaks ? "  %peak    %bw" : "");
  for (const Row& r : rows) {
    std::string f = r.file;
    if (f.size() > 28) f = "..." + f.substr(f.size() - 25);
    if (!r.error.empty()) {
      std::printf("%-28s %-14s  failed: %s\n", f.c_str(), r.impl.c_str(), r.error.c_str());
      continue;
    }
    std::printf("%-28s %-14s %12s %12s %12s %9.2f %8.2f %7.3f", f.c_str(), r.impl.c_str(),
                format_seconds(r.t.median).c_str(), format_seconds(r.t.min).c_str(),
                format_seconds(r.t.max).c_str(), r.gflops, r.gbs, r.ratio);
    if (peaks)
      std::printf(" %6.2f%% %6.1f%%", 100.0 * r.gflops / peak_gflops(*peaks, o.read.dtype),
                  100.0 * r.gbs / peaks->bandwidth_gbs);
    std::printf("\n");
  }
}

nlohmann::json row_json(const Row& r) {
  nlohmann::json j = {{"file", r.file}, {"impl", r.impl}, {"nnz", r.nnz},
                      {"traffic_bytes", r.traffic_bytes}};
  if (!r.error.empty()) {
    j["error"] = r.error;
    return j;
  }
  j.update({{"median_s", r.t.median}, {"min_s", r.t.min}, {"max_s", r.t.max},
            {"times_s", r.t.seconds}, {"calls_per_run", r.t.calls}, {"layouts", r.layouts},
            {"retaken", r.t.retaken},
            {"disturbed_kept", r.t.disturbed_kept},
            {"involuntary_switches", r.t.counts.involuntary_switches},
            {"cpu_s", r.t.counts.cpu_s},
            {"run_delay_s", r.t.counts.run_delay_s >= 0 ? nlohmann::json(r.t.counts.run_delay_s)
                                                        : nlohmann::json(nullptr)},
            {"gflops", r.gflops}, {"effective_gbs", r.gbs},
            {"ratio_to_first", r.ratio == 0 ? nlohmann::json(nullptr) : nlohmann::json(r.ratio)},
            {"verified", true}, {"max_rel_error", r.max_rel_error},
            {"conversion_s", r.conversion}, {"tuning_s", r.tuning}});
  return j;
}

/// Whether other processes disturbed the timed runs (an involuntary context switch during a run):
/// a warning when a disturbed run had to be kept (no retake left, --retake-disturbed) or when a
/// tenth of the timed runs or more were taken again; empty otherwise. The rule of tune's
/// side-by-side runs, so that `ablate` judges its final runs as tune judges its own.
std::string disturbed_warning(const std::vector<Row>& rows) {
  long long runs = 0, retaken = 0, kept = 0;
  for (const Row& r : rows) {
    if (!r.error.empty()) continue;
    runs += static_cast<long long>(r.t.seconds.size());
    retaken += r.t.retaken;
    kept += r.t.disturbed_kept;
  }
  if (runs == 0 || (kept == 0 && retaken * 10 < runs)) return {};
  return "other processes disturbed " + std::to_string(retaken + kept) + " timed runs (" +
         std::to_string(retaken) + " taken again, " + std::to_string(kept) + " of the " +
         std::to_string(runs) + " kept runs disturbed): the timings include waits for "
         "descheduled threads";
}

int bench(const Options& o) {
  const KernelKind kind = kernel_from_option(o.kernel);
  for (const std::string& name : o.impls) make_implementation(all_implementations(), name, kind);
  for (const std::string& s : o.schedules) codegen::schedule_from_string(kind, s);  // parse early
  if (o.impls.empty() && o.schedules.empty())
    throw Error("bench needs at least one --impl or --schedule");
  if (!o.save.empty()) check_writable(o.save);
  hold_cpu_lock(o.cpu_lock, false);
  const int threads = resolve_threads(o.threads);
  const std::string busy = busy_machine_warning(threads);
  if (!busy.empty()) std::cerr << "warning: " << busy << "\n";
  // How far apart the CPUs are (kernels::core_round_trip_ns), before and after the timings.
  const double round_trip_before = threads > 1 ? core_round_trip_ns() : -1.0;
  std::optional<MachinePeaks> peaks;
  if (o.roofline) peaks = measure_peaks(threads);
  std::vector<Row> rows;
  for (std::size_t f = 0; f < o.files.size(); ++f) {
    std::cerr << "[" << f + 1 << "/" << o.files.size() << "] " << o.files[f] << "\n";
    for (Row& r : bench_file(o, kind, o.files[f], threads)) rows.push_back(std::move(r));
  }
  bool failed = false;
  for (const Row& r : rows) failed |= r.error.rfind("wrong result", 0) == 0;
  const std::string disturbed = disturbed_warning(rows);
  if (!disturbed.empty()) std::cerr << "warning: " << disturbed << "\n";
  const double round_trip_after = threads > 1 ? core_round_trip_ns() : -1.0;
  const auto ns_or_null = [](double ns) { return ns > 0 ? nlohmann::json(ns) : nlohmann::json(); };

  const nlohmann::json busy_json = busy.empty() ? nlohmann::json(nullptr) : nlohmann::json(busy);
  nlohmann::json out = {{"kernel", o.kernel}, {"threads", threads}, {"busy_warning", busy_json},
                          {"disturbed_warning", disturbed.empty() ? nlohmann::json(nullptr)
                                                                  : nlohmann::json(disturbed)},
                          {"retake_disturbed", o.retake_disturbed},
                          {"warmup", o.warmup}, {"settle", o.settle}, {"settle_us", o.settle_us},
                          {"settle_enough_us", o.settle_enough_us},
                          {"min_run_us", o.min_run_us}, {"layouts", o.layouts},
                          {"core_round_trip_ns", {{"before", ns_or_null(round_trip_before)},
                                                  {"after", ns_or_null(round_trip_after)}}},
                          {"repeats", o.repeat}, {"interleaved", true},
                          {"dense", o.dense > 0 ? o.dense : default_dense_size(kind)},
                          {"dtype", std::string(dtype_name(o.read.dtype))},
                          {"results", nlohmann::json::array()},
                          {"context", context_json(threads, "none")}};
  for (const Row& r : rows) {
    nlohmann::json j = row_json(r);
    if (peaks && r.error.empty()) {
      // Of the peak in the problem's value type (and under the type's own name).
      j["fraction_of_peak"] = r.gflops / peak_gflops(*peaks, o.read.dtype);
      j[std::string("fraction_of_") + (o.read.dtype == Dtype::F64 ? "fp64" : "fp32") + "_peak"] =
          j["fraction_of_peak"];
      j["fraction_of_bandwidth"] = r.gbs / peaks->bandwidth_gbs;
    }
    out["results"].push_back(j);
  }
  out["roofline"] = peaks ? peaks->to_json() : nlohmann::json(nullptr);
  if (!o.save.empty()) write_text_file(o.save, out.dump(2) + "\n");
  if (o.json) {
    print_json(out);
  } else if (o.csv) {
    std::printf("file,impl,nnz,median_s,min_s,max_s,gflops,effective_gbs,ratio_to_first,conversion_s,tuning_s,error\n");
    for (const Row& r : rows)
      std::printf("%s,%s,%lld,%.9g,%.9g,%.9g,%.6g,%.6g,%.6g,%.6g,%.6g,\"%s\"\n", r.file.c_str(),
                  r.impl.c_str(), static_cast<long long>(r.nnz), r.t.median, r.t.min, r.t.max,
                  r.gflops, r.gbs, r.ratio, r.conversion, r.tuning, r.error.c_str());
  } else {
    print_table(rows, o, threads, peaks);
  }
  return failed ? kExitFailure : kExitOk;
}

}  // namespace

Command make_bench_command() {
  return {"bench", "Compare implementations side by side (interleaved runs, ratios to the first)",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            add_kernel_option(sub, o->kernel);
            sub.add_option("--impl", o->impls, "Comma-separated implementations; the first is the "
                                               "reference point of the ratios")
                ->delimiter(',')
                ->allow_extra_args(false);  // FILES may follow: one value per occurrence
            sub.add_option("--schedule", o->schedules,
                           "A generated kernel to compare (repeatable; text form or shortcut), "
                           "named gen:<schedule>, after the --impl ones")
                ->allow_extra_args(false);
            add_codegen_options(sub, o->generated);
            add_cache_options(sub, o->cache);
            sub.add_option("FILES", o->files, "Matrix Market or (mttkrp) FROSTT files")->required();
            sub.add_option("--dense", o->dense, "Dense size (default 256 spmm/sddmm, 16 mttkrp)")
                ->check(CLI::Range(1, 1 << 20));
            add_threads_option(sub, o->threads);
            sub.add_option("--repeat", o->repeat, "Timed rounds")->check(CLI::Range(1, 1000000))->capture_default_str();
            sub.add_option("--warmup", o->warmup, "Untimed rounds first")->check(CLI::Range(0, 1000000))->capture_default_str();
            sub.add_option("--settle", o->settle,
                           "Untimed runs of the same implementation right before each timed run, so that "
                           "it finds its own data in the caches as a repeatedly called kernel does (and as "
                           "tune's side-by-side runs time it), not the previous implementation's")
                ->check(CLI::Range(0, 100))
                ->capture_default_str();
            sub.add_option("--settle-us", o->settle_us,
                           "... and at least this many microseconds of them (with --settle > 0): a short "
                           "kernel timed right after another runs slower for a few hundred microseconds; "
                           "tune's side-by-side runs settle as long")
                ->check(CLI::Range(0.0, 1e6))
                ->capture_default_str();
            sub.add_option("--settle-enough-us", o->settle_enough_us,
                           "... but end after a settle run that brought them to this many microseconds, "
                           "however many --settle asks for (a long kernel needs one; 0: every --settle "
                           "run); tune's side-by-side runs settle so")
                ->check(CLI::Range(0.0, 1e7))
                ->capture_default_str();
            sub.add_option("--min-run-us", o->min_run_us,
                           "Each timed run takes at least this many microseconds: a shorter kernel is "
                           "called back to back in it and the run's time divided by the calls "
                           "(calls_per_run in --json), as tune times it; 0 times single calls, with the "
                           "clock reads around each (~0.1 us)")
                ->check(CLI::Range(0.0, 1e6))
                ->capture_default_str();
            sub.add_option("--retake-disturbed", o->retake_disturbed,
                           "Per implementation, timed runs that are taken again when another process "
                           "disturbed them (an involuntary context switch during the run; tune takes "
                           "5). Disturbed runs are counted in --json (disturbed_warning)")
                ->check(CLI::Range(0, 1000))
                ->capture_default_str();
            sub.add_option("--layouts", o->layouts,
                           "Time each implementation of a small problem (format and output up "
                           "to 1 MiB) in this many memory layouts, a round each in turn, as "
                           "tune's side-by-side runs do: a small kernel's layout moves its time "
                           "by several percent for a process's whole life; 1: one layout")
                ->check(CLI::Range(1, 64))
                ->capture_default_str();
            sub.add_option("--seed", o->seed, "Seed of the generated dense operands")->capture_default_str();
            sub.add_option("--tolerance", o->tolerance, "Verification tolerance")
                ->check(CLI::PositiveNumber)->capture_default_str();
            add_cpu_lock_option(sub, o->cpu_lock, "from reading the first file until bench ends");
            auto* json = sub.add_flag("--json", o->json, "Print JSON");
            sub.add_flag("--csv", o->csv, "Print CSV")->excludes(json);
            sub.add_option("--save", o->save, "Also write the JSON results to FILE");
            sub.add_flag("--roofline", o->roofline,
                         "Measure the machine's arithmetic peak (in --dtype) and memory bandwidth "
                         "first (info --peaks, about 0.5 s) and report each implementation's "
                         "fraction of them");
            add_read_options(sub, o->read);
            add_dtype_option(sub, o->read.dtype);
            sub.footer(
                "Each implementation is verified against the reference before it is timed; one that\n"
                "cannot run a file, or computes a wrong result, gets a 'failed' row (exit 1 if wrong).\n\n"
                "Implementations:\n" + implementations_help() + "\n" + schedule_help() +
                "\nExamples:\n"
                "  waco-hybrid bench --kernel spmv --impl csr,eigen,rsb,rsb-tuned examples/bcsstk13.mtx.gz\n"
                "  waco-hybrid bench --kernel spmm --impl csr,eigen --dense 128 --csv a.mtx b.mtx.gz\n"
                "  waco-hybrid bench --kernel spmv --impl csr --schedule csr --schedule bcsr4x4 A.mtx\n");
            return [o] { return bench(*o); };
          }};
}

}  // namespace waco::cli
