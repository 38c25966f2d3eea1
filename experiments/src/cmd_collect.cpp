// waco-hybrid collect: training data. Matrices come from files, a recipe file or the built-in
// mix (kernels/recipe.hpp); each is collected as one measurement group in its own process
// (heuristics/collector.hpp). A second collector on the same database is refused; a killed run
// resumes where it stopped (collected groups are skipped), losing at most the group in flight.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <iostream>
#include <memory>
#include <optional>

#include "cli_common.hpp"
#include "collect_loop.hpp"
#include "command.hpp"
#include "waco/heuristics/collector.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/recipe.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {
namespace {

using heuristics::CollectOptions;
using heuristics::CollectOutcome;
using kernels::Error;
using kernels::KernelKind;
using kernels::Recipe;

struct Options {
  std::string kernel;
  std::vector<std::string> files;
  std::string recipes;
  int mix = 0;
  std::uint64_t mix_seed = 1;
  std::int64_t max_nnz = 200000;
  std::vector<std::string> real;
  std::string shard;
  std::string exclude;
  std::string db;
  int dense = 0;
  double admissible_share = heuristics::kDefaultAdmissibleShare;
  int threads = 0;
  double repeat_share = 0.05;
  double abandon_factor = 4.0;
  double screen_margin = 4.0;
  double screen_min = 0.05;
  std::size_t limit = 0;
  kernels::Dtype dtype = kernels::Dtype::F32;
  bool json = false;
  bool quiet = false;
  bool new_settings = false;
  GroupOptions g;  ///< --schedules, --rounds, --warmup, --seed, limits, --cpu-lock, codegen
  heuristics::PassParams params;
};

/// What makes one collection of a kernel consistent across resumes: the mix's recipes (its seed,
/// size bound and real files; --mix N only says how far along the same stream to go) and how
/// each group is sampled and timed. Kept in the database's meta table per kernel.
nlohmann::json collect_settings(const Options& o, KernelKind kind) {
  std::vector<std::string> real;
  for (const std::string& f : o.real) real.push_back(std::filesystem::path(f).filename().string());
  std::sort(real.begin(), real.end());
  return {{"dense", o.dense > 0 ? o.dense : kernels::default_dense_size(kind)},
          {"mix_seed", o.mix_seed},
          {"max_nnz", o.max_nnz},
          {"real", real},
          {"schedules", o.g.schedules},
          {"admissible_share", o.admissible_share},
          {"rounds", o.g.rounds},
          {"warmup", o.g.warmup},
          {"threads", resolve_threads(o.threads)},
          {"seed", o.g.seed},
          {"abandon_factor", o.abandon_factor},
          {"pass_params", o.params.to_json()}};
}

/// Refuses a run whose settings differ from the ones the database was collected with (a resume
/// with another --max-nnz measures other recipes; another --rounds times groups differently),
/// naming each difference; --new-settings accepts them and records the new ones.
void check_collect_settings(heuristics::ResultsDb& db, const Options& o, KernelKind kind,
                            const std::string& db_path) {
  // Per kernel and value type: a collection in double is another collection.
  const std::string key = "collect_settings." + std::string(kernels::kernel_name(kind)) +
                          (o.dtype == kernels::Dtype::F64 ? ".f64" : "");
  check_settings(db, key, collect_settings(o, kind), o.new_settings, db_path,
                 std::string(kernels::kernel_name(kind)) + " collection",
                 "resume with the same settings (only --mix N may grow), collect into another "
                 "--db, or pass --new-settings to accept the change");
}

/// The exclusion list: one fingerprint (16 hex digits) or operand file per line, '#' comments.
std::vector<std::string> read_exclusions(const std::string& path, KernelKind kind) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the exclusion list " + path, "check the path");
  std::vector<std::string> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    line = line.substr(0, line.find('#'));
    line.erase(0, line.find_first_not_of(" \t\r"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (line.empty()) continue;
    const bool hex = line.size() == 16 && line.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (hex) {
      out.push_back(line);
      continue;
    }
    try {  // a file: its content fingerprint (read serially, in this process)
      const Operand op = load_operand(line, {}, kind);
      out.push_back(op.matrix ? kernels::fingerprint_hex(op.matrix->matrix)
                              : kernels::fingerprint_hex(op.tensor->tensor));
    } catch (const Error& e) {
      throw Error(path + ":" + std::to_string(n) + ": neither a fingerprint nor a readable file: " +
                      e.what(),
                  "give 16 lower-case hex digits or the path of a matrix or tensor");
    }
  }
  return out;
}

/// The recipes to collect, in order: files, then the recipe file, then the built-in mix.
std::vector<Recipe> gather_recipes(const Options& o, KernelKind kind) {
  std::vector<Recipe> out;
  for (const std::string& f : o.files) {
    Recipe r;
    r.source = Recipe::Source::File;
    r.path = f;
    out.push_back(r);
  }
  if (!o.recipes.empty())
    for (Recipe& r : kernels::read_recipes(o.recipes)) out.push_back(std::move(r));
  if (o.mix > 0) {
    const std::vector<Recipe> mix =
        kernels::needs_tensor(kind) ? kernels::default_tensor_mix(o.mix, o.mix_seed, o.max_nnz)
                                    : kernels::default_mix(o.mix, o.mix_seed, o.real, o.max_nnz);
    out.insert(out.end(), mix.begin(), mix.end());
  }
  if (out.empty())
    throw Error("nothing to collect", "give matrix files, --recipes FILE or --mix N");
  for (const Recipe& r : out)
    if (kernels::needs_tensor(kind) != (r.source == Recipe::Source::Tensor ||
                                        (r.source == Recipe::Source::File &&
                                         kernels::is_tensor_path(r.path))))
      throw Error("recipe '" + r.label() + "' does not make " +
                      (kernels::needs_tensor(kind) ? "a 3-D tensor" : "a matrix"),
                  std::string(kernels::kernel_name(kind)) + " needs " +
                      (kernels::needs_tensor(kind) ? "tensors (.tns files or tensor recipes)"
                                                   : "matrices"));
  return out;
}

int collect(const Options& o) {
  const KernelKind kind = kernel_from_option(o.kernel);
  int shard_i = 0, shard_n = 1;
  if (!o.shard.empty()) {
    char slash = 0;
    if (std::sscanf(o.shard.c_str(), "%d%c%d", &shard_i, &slash, &shard_n) != 3 || slash != '/' ||
        shard_n < 1 || shard_i < 0 || shard_i >= shard_n)
      throw Error("bad --shard '" + o.shard + "'", "give i/N with 0 <= i < N, e.g. --shard 0/4");
  }
  const std::string db_path = o.db.empty() ? heuristics::default_results_path() : o.db;
  const std::unique_ptr<FileLock> lock = lock_collection(db_path);
  {
    heuristics::ResultsDb db(db_path);
    check_collect_settings(db, o, kind, db_path);
  }
  std::vector<Recipe> recipes = gather_recipes(o, kind);
  std::vector<Recipe> mine;
  for (std::size_t k : kernels::shard_indices(recipes.size(), shard_i, shard_n))
    mine.push_back(recipes[k]);
  if (o.limit > 0 && mine.size() > o.limit) mine.resize(o.limit);

  CollectOptions co;
  co.kernel = kind;
  co.dense = o.dense;
  co.dtype = o.dtype;
  apply_group_options(o.g, resolve_threads(o.threads), co);
  co.admissible_share = o.admissible_share;
  co.repeat_share = o.repeat_share;
  co.measure.compare_race_factor = o.abandon_factor;
  co.measure.compare_screen_margin = o.screen_margin;
  co.measure.compare_screen_min_s = o.screen_min;
  co.params = o.params;
  if (!o.exclude.empty()) co.exclude = read_exclusions(o.exclude, kind);
  co.context = kernels::context_json(co.measure.threads, "none");

  // SIGINT and SIGTERM end the matrix being collected (nothing of it is stored) and stop the
  // run, which a rerun resumes; a second signal stops at once.
  InterruptGuard interrupt_guard;
  co.stop = &interrupt_flag();
  const CollectTally t = collect_recipes(
      db_path, mine, co, {}, [&](std::size_t i, const CollectOutcome& r, const CollectTally& t) {
        if (o.quiet) return;
        const double per_item = t.seconds_per_group();
        const double eta = per_item < 0 ? -1 : per_item * static_cast<double>(mine.size() - i - 1);
        std::fprintf(stderr, "[%zu/%zu] %s: %s%s%s (%.1f s)  %.0f measurements/h, ETA %s\n", i + 1,
                     mine.size(), r.label.c_str(), heuristics::outcome_name(r.kind),
                     r.message.empty() ? "" : ": ", r.message.c_str(), r.seconds,
                     t.seconds > 0 ? 3600.0 * static_cast<double>(t.measurements) / t.seconds : 0.0,
                     duration_text(eta).c_str());
      });
  const bool interrupted = t.interrupted;
  const std::map<std::string, int>& outcomes = t.outcomes;
  const std::int64_t measurements = t.measurements, measured_ok = t.measured_ok;
  const double seconds = t.seconds;
  if (interrupted)
    std::fprintf(stderr, "interrupted: %zu of %zu matrices done; run the same command again to "
                 "resume (the matrix being collected was not stored)\n", t.done, mine.size());
  if (!t.stopped.empty())
    std::fprintf(stderr, "stopped after %zu of %zu matrices: %s\n  what was collected is kept; "
                 "remove the cause and run the same command again to resume\n", t.done,
                 mine.size(), t.stopped.c_str());
  if (o.json) {
    print_json({{"kernel", o.kernel},
                {"db", db_path},
                {"shard", {{"index", shard_i}, {"count", shard_n}}},
                {"recipes", recipes.size()},
                {"collected_here", mine.size()},
                {"outcomes", outcomes},
                {"measurements", measurements},
                {"measurements_ok", measured_ok},
                {"seconds", seconds},
                {"measurements_per_hour", seconds > 0 ? 3600.0 * static_cast<double>(measurements) / seconds : 0.0},
                {"breakdown_s", t.breakdown},
                {"items", t.items},
                {"complete", !interrupted && t.stopped.empty()},
                {"stopped_by", interrupted ? "interrupted" : t.stopped.empty() ? "" : "repeated-failure"},
                {"stopped", t.stopped},
                {"context", co.context}});
  } else {
    std::printf("collected %s into %s: %zu matrices (", o.kernel.c_str(), db_path.c_str(),
                mine.size());
    bool first = true;
    for (const auto& [k, v] : outcomes) {
      std::printf("%s%d %s", first ? "" : ", ", v, k.c_str());
      first = false;
    }
    std::printf("), %lld measurements (%lld ok) in %s: %.0f per hour\n",
                static_cast<long long>(measurements), static_cast<long long>(measured_ok),
                duration_text(seconds).c_str(),
                seconds > 0 ? 3600.0 * static_cast<double>(measurements) / seconds : 0.0);
  }
  return outcomes.count("failed") || interrupted ? kExitFailure : kExitOk;
}

}  // namespace

Command make_collect_command() {
  return {"collect", "Measure sampled schedules side by side on many matrices: training data",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            add_kernel_option(sub, o->kernel);
            sub.add_option("FILES", o->files, "Matrix Market files (or, for mttkrp, FROSTT tensors)");
            sub.add_option("--recipes", o->recipes,
                           "Recipe file: one JSON recipe per line (generator + seed, or file + "
                           "augmentation + seed)");
            sub.add_option("--mix", o->mix, "Also collect N recipes of the built-in default mix")
                ->check(CLI::Range(1, 10000000));
            sub.add_option("--mix-seed", o->mix_seed, "Seed of the default mix")->capture_default_str();
            sub.add_option("--max-nnz", o->max_nnz, "Largest estimated nonzeros of a mix recipe")
                ->check(CLI::Range(std::int64_t{1000}, std::int64_t{1} << 40))
                ->capture_default_str();
            sub.add_option("--real", o->real,
                           "Real matrices the mix augments (permutation, resizing, blocks, windows)");
            sub.add_flag("--new-settings", o->new_settings,
                         "Accept settings (--max-nnz, --real, --mix-seed, --dense, --schedules, "
                         "--rounds, ...) that differ from the ones this database's collection of "
                         "the kernel was made with, and record them (refused otherwise)");
            sub.add_option("--shard", o->shard,
                           "Collect shard i of N (i/N): recipe k belongs to shard k mod N");
            sub.add_option("--exclude", o->exclude,
                           "Refuse operands listed here: fingerprints (16 hex digits) or files, "
                           "one per line (a held-out set)");
            sub.add_option("--db", o->db,
                           "Results database (default: " + heuristics::default_results_path() + ")");
            sub.add_option("--dense", o->dense,
                           "Dense size: J for spmm and mttkrp, K for sddmm (defaults: spmm 256, mttkrp 16, sddmm 256)")
                ->check(CLI::Range(1, 1 << 20));
            add_dtype_option(sub, o->dtype);
            add_group_options(sub, o->g);
            sub.add_option("--admissible-share", o->admissible_share,
                           "Share of the sample drawn from the admissible set (the rest from the "
                           "legal space)")
                ->check(CLI::Range(0.0, 1.0))
                ->capture_default_str();
            add_threads_option(sub, o->threads);
            sub.add_option("--repeat-share", o->repeat_share,
                           "Share of groups measured twice (pair-order stability)")
                ->check(CLI::Range(0.0, 1.0))
                ->capture_default_str();
            sub.add_option("--abandon-factor", o->abandon_factor,
                           "Racing in a group: a schedule this many times slower than the group's "
                           "fastest after two runs is stored as abandoned with those runs (a "
                           "lower bound) and not timed further; 0: time every one")
                ->check(CLI::Range(0.0, 1e6))
                ->capture_default_str();
            sub.add_option("--screen-margin", o->screen_margin,
                           "Racing before timing: once the group has a fastest run, a schedule's "
                           "verification or probe run still going after max(--screen-min, this x "
                           "the abandon factor x the fastest) is stopped and stored as abandoned "
                           "with the factor x the fastest as its lower bound")
                ->check(CLI::Range(1.0, 1e6))
                ->capture_default_str();
            sub.add_option("--screen-min", o->screen_min,
                           "Seconds a screened run is always given (a floor for cold first runs)")
                ->check(CLI::Range(0.0, 3600.0))
                ->capture_default_str();
            sub.add_option("--limit", o->limit, "Collect at most N matrices of this shard");
            sub.add_flag("--json", o->json, "Print JSON (outcomes, measurements per hour, time breakdown)");
            sub.add_flag("-q,--quiet", o->quiet, "No progress on stderr");
            add_pass_options(sub, o->params);
            sub.footer(
                "Each matrix is one group: the csr-like schedule, the hand-written baseline and\n"
                "--schedules sampled schedules (--admissible-share of them from the admissible set,\n"
                "the rest from the legal space), all on --threads, prepared and verified, then\n"
                "timed in --rounds interleaved rounds in one isolated child, stored in one\n"
                "transaction with the matrix's recipe and split (train/validation/test, from its\n"
                "fingerprint). Collected matrices are skipped, so a killed run resumes.\n\n"
                "Examples:\n"
                "  waco-hybrid collect --kernel spmv --db d.sqlite --mix 200 --max-nnz 200000\n"
                "  waco-hybrid collect --kernel spmm --db d.sqlite --recipes r.jsonl --shard 1/4\n"
                "  waco-hybrid collect --kernel spmv --db eval.sqlite --schedules 50 A.mtx B.mtx\n");
            return [o] { return collect(*o); };
          }};
}

}  // namespace waco::cli
