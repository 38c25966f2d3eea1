// waco-hybrid precompile: kernels compiled ahead of time into a folder that compile_and_load
// consults before running a compiler (codegen::shipped_kernel_dirs). The build runs it on the
// committed lists (data/aot/<kernel>.txt) so that the schedules the tool nominates most often are
// ready when a tune or an adaptive plan needs them; `--from-dataset` makes such a list from the
// committed dataset's winners and reports what share of held-out groups it covers.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "cli_common.hpp"
#include "command.hpp"
#include "waco/codegen/compiler.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/shipped.hpp"
#include "waco/learned/training_data.hpp"

namespace waco::cli {
using namespace waco::kernels;

namespace {

/// A candidate within this share of its group's fastest counts as a near-winner (coverage).
constexpr double kNearShare = 0.03;

struct Options {
  std::string kernel;
  std::string list;
  bool from_dataset = false;
  std::vector<std::string> dataset_files;
  int top = 0;
  double coverage = 0.0;
  int scheduling_twins = 0;
  std::string write_list;
  std::string out;
  std::vector<std::string> dtypes = {"f32"};
  std::string compiler = "c++";
  double compile_timeout = 300.0;
  int jobs = 0;
  bool bundle = false;
  bool json = false;
  bool quiet = false;
};

/// One kernel source (what the compile cache keys), with a schedule that emits it.
struct Template {
  std::string schedule;  ///< text form of the first schedule seen with this source
  std::int64_t winners = 0;  ///< groups whose fastest candidate has this source
  std::int64_t train_winners = 0;  ///< of them, groups of the training split
  std::int64_t near = 0;     ///< groups with a candidate of this source within kNearShare
};

/// The source a schedule's kernel is keyed by (float, atomic updates: the other variants of one
/// template are compiled beside it).
std::string template_source(const codegen::SuperSchedule& s) {
  return codegen::emit_kernel_source(s, codegen::RaceStrategy::Atomic,
                                     codegen::SourceForm::SharedObject, Dtype::F32);
}

struct DatasetTemplates {
  std::vector<Template> templates;  ///< by winners, then near-winners, then text
  /// Per group: its split, its winner's template index, and the templates within kNearShare.
  struct Group {
    std::string split;
    std::size_t winner = 0;
    std::vector<std::size_t> near;
  };
  std::vector<Group> groups;
};

DatasetTemplates dataset_templates(KernelKind kind, const std::vector<std::string>& files) {
  std::unordered_map<std::string, std::size_t> by_source;  // source -> template index
  std::unordered_map<std::string, std::size_t> by_text;    // schedule text -> template index
  DatasetTemplates out;
  const auto index_of = [&](const codegen::SuperSchedule& s) {
    const std::string text = codegen::to_text(s);
    if (auto it = by_text.find(text); it != by_text.end()) return it->second;
    const std::string source = template_source(s);
    auto [it, fresh] = by_source.emplace(source, out.templates.size());
    if (fresh) out.templates.push_back(Template{text, 0, 0});
    by_text.emplace(text, it->second);
    return it->second;
  };
  for (const std::string& f : files)
    learned::for_each_export_group(f, [&](const nlohmann::json& j) {
      const learned::DatasetGroup g = learned::group_from_json(j);
      if (g.kind != kind) return;
      const learned::MeasuredCandidate* best = nullptr;
      for (const learned::MeasuredCandidate& c : g.candidates)
        if (!c.lower_bound && c.seconds > 0 && (!best || c.seconds < best->seconds)) best = &c;
      if (!best) return;
      DatasetTemplates::Group row;
      row.split = g.split;
      row.winner = index_of(best->schedule);
      std::set<std::size_t> near;
      for (const learned::MeasuredCandidate& c : g.candidates)
        if (!c.lower_bound && c.seconds > 0 && c.seconds <= best->seconds * (1 + kNearShare))
          near.insert(index_of(c.schedule));
      row.near.assign(near.begin(), near.end());
      ++out.templates[row.winner].winners;
      out.templates[row.winner].train_winners += g.split == "train";
      for (std::size_t t : row.near) ++out.templates[t].near;
      out.groups.push_back(std::move(row));
    });
  return out;
}

/// Shares of groups per split whose winner / some near-winner is among `chosen` (indices).
nlohmann::json coverage_json(const DatasetTemplates& d, const std::set<std::size_t>& chosen) {
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> win, near;  // covered, total
  for (const DatasetTemplates::Group& g : d.groups) {
    for (const std::string& split : {g.split, std::string("all")}) {
      win[split].second += 1;
      near[split].second += 1;
      win[split].first += chosen.count(g.winner);
      near[split].first += std::any_of(g.near.begin(), g.near.end(),
                                       [&](std::size_t t) { return chosen.count(t) > 0; });
    }
  }
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [split, counts] : win)
    j[split] = {{"groups", counts.second},
                {"winner_covered", static_cast<double>(counts.first) / counts.second},
                {"near_winner_covered",
                 static_cast<double>(near[split].first) / near[split].second}};
  return j;
}

int precompile(const Options& o) {
  const KernelKind kind = kernel_from_option(o.kernel);
  if (o.list.empty() == !o.from_dataset)
    throw Error("precompile takes either --list FILE or --from-dataset",
                "e.g. waco-hybrid precompile --kernel spmv --from-dataset --top 40");
  std::vector<Dtype> dtypes;
  for (const std::string& d : o.dtypes) {
    const auto dt = parse_dtype(d);
    if (!dt) throw Error("unknown --dtype '" + d + "'", "use f32 or f64");
    dtypes.push_back(*dt);
  }
  nlohmann::json report = {{"kernel", o.kernel}};
  std::vector<codegen::SuperSchedule> schedules;  // one per template
  if (o.from_dataset) {
    std::vector<std::string> files = o.dataset_files;
    if (files.empty())
      for (const std::string& f : learned::committed_exports())
        if (f.find("/" + std::string(kernel_name(kind)) + ".") != std::string::npos) files.push_back(f);
    if (files.empty()) throw Error("no dataset export for " + o.kernel, "pass --dataset FILE");
    const DatasetTemplates d = dataset_templates(kind, files);
    // Most frequent winners first; near-winners break ties (a template that is often within 3%
    // of the winner serves as well as the winner).
    std::vector<std::size_t> order(d.templates.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const Template& x = d.templates[a];
      const Template& y = d.templates[b];
      if (x.winners != y.winners) return x.winners > y.winners;
      if (x.near != y.near) return x.near > y.near;
      return x.schedule < y.schedule;
    });
    std::set<std::size_t> chosen;
    std::int64_t train_groups = 0, covered = 0;
    for (const DatasetTemplates::Group& g : d.groups) train_groups += g.split == "train";
    for (std::size_t t : order) {
      if (o.top > 0 && static_cast<int>(chosen.size()) >= o.top) break;
      if (o.top == 0 && o.coverage > 0 && covered >= o.coverage * train_groups) break;
      if (d.templates[t].winners == 0 && o.top == 0) break;
      chosen.insert(t);
      covered += d.templates[t].train_winners;
    }
    std::ostringstream list;
    list << "# " << o.kernel << ": " << chosen.size() << " kernel templates of the committed "
         << "dataset's group winners (waco-hybrid precompile --from-dataset";
    if (o.top > 0) list << " --top " << o.top;
    if (o.scheduling_twins > 0) list << " --scheduling-twins " << o.scheduling_twins;
    if (o.coverage > 0) list << " --coverage " << o.coverage;
    list << "); per line: the schedule, then how many groups it won and was within 3% of the "
            "fastest in\n";
    nlohmann::json rows = nlohmann::json::array();
    std::set<std::string> listed;
    for (std::size_t t : order) {
      if (!chosen.count(t)) continue;
      const Template& x = d.templates[t];
      schedules.push_back(codegen::schedule_from_string(kind, x.schedule));
      listed.insert(codegen::emit_kernel_source(schedules.back()));
      list << x.schedule << "  # won " << x.winners << ", near " << x.near << "\n";
      rows.push_back({{"schedule", x.schedule}, {"winners", x.winners}, {"near", x.near}});
    }
    // Which loop scheduling wins depends on the machine more than the rest of a schedule (on
    // the AMD EPYC VM the hybrid tune's SpMM winner was the static twin of the dataset's most
    // frequent template, dynamic on the Intel VMs that timed the dataset, on 14 of 22 held-out
    // matrices): the first N templates also in the other kind (static <-> dynamic chunks).
    const std::size_t firsts = std::min<std::size_t>(static_cast<std::size_t>(o.scheduling_twins),
                                                     schedules.size());
    nlohmann::json twins = nlohmann::json::array();
    for (std::size_t q = 0; q < firsts; ++q) {
      codegen::SuperSchedule twin = schedules[q];
      if (twin.threads == 1) continue;  // a serial kernel has no loop scheduling
      twin.chunk = twin.chunk == codegen::kStaticChunk ? 32 : codegen::kStaticChunk;
      twin = codegen::canonicalize(twin);
      if (!listed.insert(codegen::emit_kernel_source(twin)).second) continue;
      schedules.push_back(twin);
      list << codegen::to_text(twin) << "  # the other scheduling of " << codegen::to_text(schedules[q])
           << "\n";
      twins.push_back(codegen::to_text(twin));
    }
    if (o.scheduling_twins > 0) report["scheduling_twins"] = twins;
    report["templates_in_dataset"] = d.templates.size();
    report["chosen"] = rows;
    report["coverage"] = coverage_json(d, chosen);
    if (!o.write_list.empty()) {
      write_text_file(o.write_list, list.str());
      if (!o.quiet) std::cerr << "wrote " << o.write_list << "\n";
    }
  } else {
    schedules = codegen::read_schedule_list(kind, o.list);
  }

  // The sources to compile: each template in each dtype, and with private output copies too
  // when its parallel loop does not own the output (tune's auto picks either). A chunk=auto
  // template (the csr schedule) also serially: the binding decides on the matrix (and the
  // machine's load) whether it runs without an OpenMP region (codegen::prepare_binding), a
  // kernel of its own.
  std::vector<std::pair<std::string, std::string>> sources;  // label, source
  std::set<std::string> seen;
  for (const codegen::SuperSchedule& listed_schedule : schedules) {
    const std::string text = codegen::to_text(listed_schedule);
    std::vector<codegen::SuperSchedule> variants = {listed_schedule};
    if (listed_schedule.chunk == codegen::kAutoChunk && listed_schedule.threads != 1) {
      variants.push_back(listed_schedule);
      variants.back().threads = 1;
    }
    for (const codegen::SuperSchedule& s : variants) {
      std::vector<codegen::RaceStrategy> races = {codegen::RaceStrategy::Atomic};
      if (!codegen::parallel_loop_is_race_free(s)) races.push_back(codegen::RaceStrategy::Private);
      for (Dtype dt : dtypes)
        for (codegen::RaceStrategy r : races) {
          std::string src = codegen::emit_kernel_source(s, r, codegen::SourceForm::SharedObject, dt);
          if (!seen.insert(src).second) continue;
          sources.emplace_back(text + (&s != &variants.front() ? " serially" : "") + " [" +
                                   std::string(dtype_name(dt)) + ", " +
                                   race_strategy_name(r) + "]",
                               std::move(src));
        }
    }
  }
  report["schedules"] = schedules.size();
  report["kernels"] = sources.size();
  if (o.bundle && o.out.empty())
    throw Error("--bundle needs --out: the folder whose kernels it bundles",
                "e.g. waco-hybrid precompile --kernel spmv --list spmv.txt --out DIR --bundle");
  if (o.out.empty()) {
    if (o.json) print_json(report);
    else if (!o.from_dataset || o.write_list.empty())
      std::cout << schedules.size() << " schedules, " << sources.size()
                << " kernels (no --out: nothing compiled)\n";
    if (!o.json && report.contains("coverage"))
      for (const auto& [split, c] : report["coverage"].items())
        std::printf("%s: %lld groups, winner covered %.1f%%, a kernel within 3%% of the winner "
                    "covered %.1f%%\n",
                    split.c_str(), c["groups"].get<long long>(),
                    100 * c["winner_covered"].get<double>(),
                    100 * c["near_winner_covered"].get<double>());
    return kExitOk;
  }
  codegen::CompilerOptions copts;
  copts.compiler = o.compiler;
  copts.cache_dir = o.out;
  copts.timeout_seconds = o.compile_timeout;
  // The folder is the compile cache of `--out` alone: what another folder holds is not taken
  // for done here.
  ::setenv("WACO_SHIPPED_KERNELS", "none", 1);
  const int jobs = o.jobs > 0 ? o.jobs : resolve_threads(0);
  const double t0 = now_seconds();
  int compiled = 0, cached = 0;
  double compile_s = 0;
  std::size_t next = 0, finished = 0;
  std::string failure;
  std::mutex mu;
  const auto work = [&] {
    for (;;) {
      std::size_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= sources.size() || !failure.empty() || interrupt_flag()) return;
        i = next++;
      }
      try {
        const codegen::CompileResult r = codegen::compile_and_load(sources[i].second, copts);
        std::lock_guard<std::mutex> lock(mu);
        ++finished;
        (r.cache_hit ? cached : compiled) += 1;
        compile_s += r.compile_seconds;
        if (!o.quiet && !r.cache_hit) {
          const double done = now_seconds() - t0;
          const double eta = done / static_cast<double>(finished) *
                             static_cast<double>(sources.size() - finished);
          std::fprintf(stderr, "[%zu/%zu] %s (%.2f s), ETA %s\n", finished, sources.size(),
                       sources[i].first.c_str(), r.compile_seconds, format_seconds(eta).c_str());
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (failure.empty()) failure = sources[i].first + ": " + e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < jobs; ++j) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  if (!failure.empty()) throw Error("precompile: " + failure, "compiled kernels are kept; run it again");
  if (interrupt_flag()) throw Error("interrupted", "run it again: compiled kernels are kept");
  // The compiler that compiled them, so that they are found without running one
  // (codegen::record_shipped_compiler).
  codegen::record_shipped_compiler(o.out, copts);
  // The folder's list of what it holds for this kernel (codegen::shipped_schedules: an adaptive
  // plan's short list), with what an earlier precompile into it listed.
  const std::string list_path = codegen::shipped_list_path(o.out, kind);
  std::vector<codegen::SuperSchedule> listed = codegen::shipped_list(o.out, kind);
  std::set<std::string> texts;
  for (const codegen::SuperSchedule& s : listed) texts.insert(codegen::to_text(s));
  for (const codegen::SuperSchedule& s : schedules)
    if (texts.insert(codegen::to_text(s)).second) listed.push_back(s);
  std::ostringstream list;
  list << "# " << o.kernel << ": the schedules whose kernels this folder holds (waco-hybrid "
       << "precompile; an adaptive plan's short list)\n";
  for (const codegen::SuperSchedule& s : listed) list << codegen::to_text(s) << "\n";
  write_text_file(list_path, list.str());
  report.update({{"out", o.out}, {"compiled", compiled}, {"cached", cached},
                 {"compile_s", compile_s}});
  if (o.bundle) {
    // Every kernel the folder holds (of every earlier run into it too), in one library: a
    // process opens it once for all of them (codegen::build_kernel_bundle).
    if (!o.quiet) std::fprintf(stderr, "bundling the folder's kernels into one library\n");
    const codegen::BundleResult b = codegen::build_kernel_bundle(o.out, copts, jobs);
    report["bundle"] = {{"path", b.path}, {"kernels", b.kernels}, {"seconds", b.seconds}};
  }
  report["seconds"] = now_seconds() - t0;
  if (o.json) print_json(report);
  else if (!o.quiet) {
    std::cout << o.kernel << ": " << sources.size() << " kernels in " << o.out << " (" << compiled
              << " compiled in " << format_seconds(compile_s) << ", " << cached
              << " already there)\n";
    if (o.bundle)
      std::cout << "bundle: " << report["bundle"]["kernels"].get<std::size_t>() << " kernels in "
                << report["bundle"]["path"].get<std::string>() << " ("
                << format_seconds(report["bundle"]["seconds"].get<double>()) << ")\n";
  }
  return kExitOk;
}

}  // namespace

Command make_precompile_command() {
  return {"precompile", "Compile the kernels of chosen schedules ahead of time (shipped kernels)",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            add_kernel_option(sub, o->kernel);
            sub.add_option("--list", o->list,
                           "Schedules to compile: one text form or shortcut a line, '#' comments");
            sub.add_flag("--from-dataset", o->from_dataset,
                         "Choose the schedules from a dataset's group winners (the committed one "
                         "by default) and report the share of groups per split they cover");
            sub.add_option("--dataset", o->dataset_files,
                           "Dataset export files for --from-dataset (default: the committed one)");
            sub.add_option("--top", o->top, "With --from-dataset: the N most frequent winners")
                ->check(CLI::Range(1, 100000));
            sub.add_option("--coverage", o->coverage,
                           "With --from-dataset: the fewest winners covering this share of the "
                           "training groups' winners")
                ->check(CLI::Range(0.0, 1.0));
            sub.add_option("--scheduling-twins", o->scheduling_twins,
                           "With --from-dataset: the first N chosen templates also with the other "
                           "loop scheduling (static <-> dynamic chunks), which wins depending on "
                           "the machine")
                ->check(CLI::Range(0, 100000));
            sub.add_option("--write-list", o->write_list,
                           "Write the chosen schedules as a --list file");
            sub.add_option("--out", o->out,
                           "Compile into this folder (a compile cache: <key>.so, <key>.cpp); "
                           "without it nothing is compiled");
            sub.add_option("--dtype", o->dtypes, "Value types to compile each schedule in")
                ->delimiter(',')
                ->capture_default_str();
            sub.add_option("--compiler", o->compiler, "C++ compiler for generated kernels")
                ->capture_default_str();
            sub.add_option("--compile-timeout", o->compile_timeout,
                           "Seconds a compile may take")
                ->check(CLI::PositiveNumber)
                ->capture_default_str();
            sub.add_option("--jobs,-j", o->jobs, "Compilers run at once (0: the available cores)")
                ->check(CLI::Range(0, 256))
                ->capture_default_str();
            sub.add_flag("--bundle", o->bundle,
                         "After compiling, build the folder's bundle: every kernel it holds in "
                         "one library (bundle.so, its keys in bundle.txt), which a process opens "
                         "once for all of them instead of one library a kernel");
            sub.add_flag("--json", o->json, "Print JSON (coverage, kernels compiled)");
            sub.add_flag("-q,--quiet", o->quiet, "No progress on stderr");
            sub.footer(
                "Kernels are keyed as the compile cache keys them (source, compiler version,\n"
                "flags, CPU): a folder built here serves this machine and this compiler only;\n"
                "elsewhere its kernels are simply not found and get compiled as usual. The build\n"
                "compiles data/aot/<kernel>.txt into <build>/share/waco-hybrid/kernels, installed\n"
                "as <prefix>/share/waco-hybrid/kernels; $WACO_SHIPPED_KERNELS (folders separated\n"
                "by ':', or none) replaces where they are looked up.\n\n"
                "Examples:\n"
                "  waco-hybrid precompile --kernel spmv --from-dataset --top 40      # coverage\n"
                "  waco-hybrid precompile --kernel spmv --from-dataset --top 40 --write-list spmv.txt\n"
                "  waco-hybrid precompile --kernel spmv --list spmv.txt --dtype f32,f64 --out DIR\n"
                "  waco-hybrid precompile --kernel spmm --list spmm.txt --out DIR --bundle\n");
            return [o] { return precompile(*o); };
          }};
}

}  // namespace waco::cli
