// waco-hybrid calibrate (issue 40): the shipped cost model fitted to this machine in minutes. A
// stratified sample of the committed dataset's training recipes (round robin over the kinds of
// matrices: each generator, the real files' families, tensors by size) is measured here with
// collect's machinery (collect_loop.hpp, heuristics::collect_one) within --minutes, into a
// database kept under this machine's identity (tune/calibration.hpp); the shipped model is then
// fine-tuned on three quarters of the groups (early stopping on half of the rest) and judged
// against the shipped model on the last quarter, which neither training nor early stopping saw.
// The fine-tuned model is kept only when it ranks those held-out groups better; the sidecar
// records the numbers either way. A killed calibrate resumes: measured groups are kept and the
// minutes already spent count.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "cli_common.hpp"
#include "collect_loop.hpp"
#include "command.hpp"
#include "dataset_files.hpp"
#include "model_data.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/shipped.hpp"
#include "waco/tune/calibration.hpp"

namespace waco::cli {
namespace {

using heuristics::CollectOutcome;
using kernels::Error;
using kernels::KernelKind;
using kernels::Recipe;
namespace fs = std::filesystem;

/// Share of --minutes spent measuring; the rest is left for preparing and fine-tuning.
constexpr double kMeasureShare = 0.9;

/// A new calibration's share of each group's schedules drawn from the admissible set (collect's
/// default, heuristics::kDefaultAdmissibleShare = 0.5, until session 82, which a calibration begun
/// then keeps). Measured on the AMD EPYC Zen 4 VM (learned/README.md, "Calibrating on the
/// admissible set" and "SpMV at both shares"): the admissible schedules run faster, so 9 minutes
/// hold about twice the groups (SpMV 722 against 371, MTTKRP 242 against 99, SpMM J=64 595
/// against 160); MTTKRP's model-alone rose from 68.8% to 82.6% of the oracle, SpMV's and SpMM's
/// moved within one run's noise.
constexpr double kCalibrationAdmissibleShare = 1.0;

struct Options {
  std::string kernel;
  double minutes = 5.0;
  std::string recipes;
  std::int64_t max_nnz = 200000;
  int dense = 0;  ///< J or K measured; 0: the kernel's default, the shipped dataset's
  /// How each group is measured (collect's options; fewer schedules a matrix, for more matrices).
  GroupOptions g = [] {
    GroupOptions g;
    g.schedules = 40;
    return g;
  }();
  /// Share of each group's schedules drawn from the admissible set (the rest from the legal
  /// space), as collect's --admissible-share; -1 (not given): kCalibrationAdmissibleShare for a
  /// new calibration, a resumed one's own.
  double admissible_share = -1.0;
  /// What fine-tuning trains: "all" the weights, or the scoring "head" only (a small correction;
  /// learned::TrainOptions::head_only).
  std::string fine_tune = "all";
  int epochs = 60;
  double lr = 3e-4;
  int patience = 10;
  bool restart = false;
  bool keep_fine_tuned = false;
  bool json = false;
  ModelDataOptions data;  ///< --data-dir, --threads, -q (the groups come from the calibration's db)
};

/// A recipe of the plan and the kind of matrix it makes (its stratum).
struct Planned {
  Recipe recipe;
  std::string stratum;
  std::string family;
  std::int64_t nnz = -1;  ///< the dataset group's, else -1
};

std::string stratum_of(const Recipe& r) {
  switch (r.source) {
    case Recipe::Source::Generator:
      return "generator:" + r.generator.kind;
    case Recipe::Source::File:
      return kernels::is_tensor_path(r.path) ? "tensor-file" : "real";
    case Recipe::Source::Tensor: {
      // By shape (a short third mode, like time, or not) and size.
      const bool short_mode = r.dims.size() == 3 && r.dims[2] * 10 < std::min(r.dims[0], r.dims[1]);
      const double n = static_cast<double>(std::max<std::int64_t>(1, r.nnz));
      return std::string("tensor:") + (short_mode ? "short-mode" : "even") + ":nnz~1e" +
             std::to_string(static_cast<int>(std::floor(std::log10(n))));
    }
  }
  return "other";
}

/// The recipes to sample from: a recipe file, else the committed dataset's training split (its
/// validation and test matrices stay unseen, so that `evaluate` on them remains fair).
std::vector<Planned> candidates(const Options& o, KernelKind kind, std::string* described) {
  std::vector<Planned> out;
  if (!o.recipes.empty()) {
    for (Recipe& r : kernels::read_recipes(o.recipes)) {
      const std::string f = learned::family_of(r, kernels::hex16(kernels::fnv1a(r.to_json().dump())));
      out.push_back({std::move(r), "", f, -1});
    }
    *described = o.recipes;
  } else {
    const std::string k(kernels::kernel_name(kind));
    const std::vector<std::string> dirs = recipe_data_dirs(o.data);
    for (const nlohmann::json& j : load_groups(k, "", {}, described)) {
      const learned::DatasetGroup g = learned::group_from_json(j);
      if (g.split != "train" || !g.recipe) continue;
      if (g.dense != kernels::default_dense_size(kind)) continue;
      try {
        out.push_back({learned::resolved_recipe(g, dirs), "", g.family, g.nnz});
      } catch (const Error&) {  // a real file absent here: not a candidate
      }
    }
  }
  std::vector<Planned> kept;
  for (Planned& p : out) {
    if (kernels::needs_tensor(kind) != (p.recipe.source == Recipe::Source::Tensor ||
                                        (p.recipe.source == Recipe::Source::File &&
                                         kernels::is_tensor_path(p.recipe.path))))
      continue;
    // The recipe's estimate, as collect --max-nnz reads it; a tensor file has none (it reads
    // matrices): its group's count when known, else it is kept.
    const bool tensor_file = p.recipe.source == Recipe::Source::File && kernels::is_tensor_path(p.recipe.path);
    const std::int64_t nnz = tensor_file ? std::max<std::int64_t>(0, p.nnz) : kernels::estimated_nnz(p.recipe);
    if (nnz > o.max_nnz) continue;
    p.stratum = stratum_of(p.recipe);
    kept.push_back(std::move(p));
  }
  return kept;
}

/// The order of collection: round robin over the strata (sorted by name), each stratum's
/// families in a seeded order, one recipe of a family at a time; deterministic for the seed, so a
/// resumed calibrate goes on along the same plan.
std::vector<Planned> stratified_plan(std::vector<Planned> all, std::uint64_t seed) {
  std::map<std::string, std::map<std::string, std::vector<Planned>>> by;
  for (Planned& p : all) by[p.stratum][p.family].push_back(std::move(p));
  auto key = [&](const std::string& s) { return kernels::splitmix64(seed ^ kernels::fnv1a(s)); };
  // Per stratum: its families in a seeded order, each family's recipes in a seeded order, taken
  // one family at a time (round robin); then the strata in turn.
  std::vector<std::vector<Planned>> strata;
  for (auto& [name, families] : by) {
    std::vector<std::pair<std::uint64_t, std::vector<Planned>>> fam;
    for (auto& [f, list] : families) {
      std::sort(list.begin(), list.end(), [&](const Planned& a, const Planned& b) {
        return key(a.recipe.to_json().dump()) < key(b.recipe.to_json().dump());
      });
      fam.emplace_back(key(name + "/" + f), std::move(list));
    }
    std::sort(fam.begin(), fam.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Planned> flat;
    for (std::size_t d = 0, left = 1; left > 0; ++d) {
      left = 0;
      for (auto& f : fam)
        if (d < f.second.size()) flat.push_back(f.second[d]), ++left;
    }
    strata.push_back(std::move(flat));
  }
  std::vector<Planned> plan;
  for (std::size_t d = 0, left = 1; left > 0; ++d) {
    left = 0;
    for (auto& s : strata)
      if (d < s.size()) plan.push_back(s[d]), ++left;
  }
  return plan;
}

nlohmann::json quality_json(const learned::RankingQuality& q) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return {{"spearman_median", num(q.spearman_median)}, {"pair_accuracy", num(q.pair_accuracy)},
          {"pairs", q.pairs}, {"groups", q.matrices}};
}

/// Whether the fine-tuned model ranks the held-out groups better: a higher pooled pair accuracy
/// (the more stable number on a few groups) without a lower median Spearman.
bool better(const learned::RankingQuality& after, const learned::RankingQuality& before) {
  if (!std::isfinite(after.pair_accuracy) || !std::isfinite(before.pair_accuracy)) return false;
  const double sa = std::isfinite(after.spearman_median) ? after.spearman_median : -2;
  const double sb = std::isfinite(before.spearman_median) ? before.spearman_median : -2;
  return after.pair_accuracy > before.pair_accuracy && sa >= sb;
}

/// The seconds a collected matrix cost this machine's owner: its outcome's time less the waits
/// for the CPU lock and for a calm machine (other processes' time, not the calibration's).
double work_seconds(const CollectOutcome& r) {
  const auto part = [&](const char* k) {
    return r.breakdown.contains(k) && r.breakdown[k].is_number() ? r.breakdown[k].get<double>() : 0.0;
  };
  return std::max(0.0, r.seconds - part("lock_wait_s") - part("calm_wait_s"));
}

double meta_number(heuristics::ResultsDb& db, const std::string& key) {
  const std::optional<std::string> v = db.meta(key);
  if (!v) return 0.0;
  try {
    return std::stod(*v);
  } catch (const std::exception&) {
    return 0.0;
  }
}

int calibrate(const Options& o) {
  // Fine-tuning needs LibTorch: the lite build runs this command as waco-hybrid-torch (main.cpp)
  // before any measuring.
  learned::require_torch("calibrate (it fine-tunes the cost model)");
  const KernelKind kind = kernel_from_option(o.kernel);
  const std::string k(kernels::kernel_name(kind));
  if (kind == KernelKind::SpMV && o.dense > 0)
    throw Error("--dense does not apply to spmv (it has no dense size)",
                "give --dense with spmm, sddmm or mttkrp");
  const nlohmann::json identity = tuning::calibration_identity(o.g.generated.compiler);
  const int default_dense = kernels::default_dense_size(kind);
  const int dense = o.dense > 0 ? o.dense : default_dense;  // spmv with --dense refused above
  // Each dense size its own files (calibration.hpp): a calibration ranks tunes of its size.
  const tuning::CalibrationPaths paths = tuning::calibration_paths(kind, identity, {}, dense);
  const std::string shipped = learned::model_path_or_default("", kind);
  std::error_code ec;
  fs::create_directories(paths.dir, ec);
  if (ec)
    throw Error("cannot create the calibration folder " + paths.dir + ": " + ec.message(),
                "set XDG_DATA_HOME to a writable folder");
  kernels::write_text_file(paths.dir + "/identity.json", identity.dump(2) + "\n");
  std::string described;
  const std::vector<Planned> plan = stratified_plan(candidates(o, kind, &described), o.g.seed);
  if (plan.empty())
    throw Error("no recipes to calibrate " + k + " with in " + described,
                "raise --max-nnz or give --recipes FILE");
  std::vector<Recipe> recipes;
  for (const Planned& p : plan) recipes.push_back(p.recipe);
  std::map<std::string, int> strata;
  for (const Planned& p : plan) ++strata[p.stratum];

  const std::unique_ptr<FileLock> lock = lock_collection(paths.db);
  if (o.restart)  // under the lock: never under another calibrate's feet
    for (const std::string& f : {paths.db, paths.db + "-wal", paths.db + "-shm", paths.model, paths.sidecar})
      fs::remove(f, ec);
  heuristics::CollectOptions co;
  co.kernel = kind;
  co.dense = dense;
  apply_group_options(o.g, resolve_threads(o.data.threads), co);
  co.repeat_share = 0.0;  // the minutes go to more matrices, not to repetitions
  co.context = kernels::context_json(co.measure.threads, "none");
  const std::string spent_key = "calibrate.spent_s", order_key = "calibrate.order";
  double spent = 0.0;
  nlohmann::json order = nlohmann::json::object();  // fingerprint -> plan index
  {
    heuristics::ResultsDb db(paths.db);
    nlohmann::json settings = {{"recipes", described}, {"plan_size", plan.size()},
                               {"max_nnz", o.max_nnz}, {"schedules", o.g.schedules},
                               {"rounds", o.g.rounds}, {"warmup", o.g.warmup},
                               {"threads", co.measure.threads}, {"seed", o.g.seed}};
    // Settings added later (the dense size, the admissible share of session 81) count only
    // when not their default or already stored, so that a calibration begun before they existed
    // (at the default) resumes; one begun at another value never mixes.
    const std::optional<std::string> stored_text = db.meta("calibrate_settings." + k);
    const nlohmann::json stored =
        stored_text ? nlohmann::json::parse(*stored_text, nullptr, false) : nlohmann::json();
    const auto later = [&](const char* key, const auto& value, bool is_default) {
      if (!is_default || (stored.is_object() && stored.contains(key))) settings[key] = value;
    };
    later("dense", dense, dense == default_dense);
    // Not given: a resumed calibration keeps its share (one begun before session 82 stored none:
    // collect's 0.5), a new one takes kCalibrationAdmissibleShare. 0.5 is still stored as none.
    co.admissible_share = o.admissible_share;
    if (co.admissible_share < 0)
      co.admissible_share =
          !stored.is_object() ? kCalibrationAdmissibleShare
          : stored.contains("admissible_share") && stored["admissible_share"].is_number()
              ? stored["admissible_share"].get<double>()
              : heuristics::kDefaultAdmissibleShare;
    later("admissible_share", co.admissible_share,
          co.admissible_share == heuristics::kDefaultAdmissibleShare);
    check_settings(db, "calibrate_settings." + k, settings, false, paths.db, k + " calibration",
                   "calibrate with the same settings to resume, or pass --restart to begin again");
    spent = meta_number(db, spent_key);
    if (const auto v = db.meta(order_key)) order = nlohmann::json::parse(*v, nullptr, false);
    if (!order.is_object()) order = nlohmann::json::object();
  }
  const double budget_s = std::max(0.0, o.minutes * 60.0 * kMeasureShare);
  const double spent_before = spent;
  const std::size_t measured_before = order.size();
  const bool quiet = o.data.quiet;
  if (!quiet)
    std::fprintf(stderr,
                 "calibrate %s on %s: %zu recipes in %zu strata from %s; %s of %s measuring "
                 "spent before; data in %s\n",
                 k.c_str(), identity.value("cpu", std::string("?")).c_str(), plan.size(),
                 strata.size(), described.c_str(), duration_text(spent).c_str(),
                 duration_text(budget_s).c_str(), paths.dir.c_str());

  // 1. Measuring, within the budget (counted across resumes).
  InterruptGuard interrupt_guard;
  co.stop = &interrupt_flag();
  const auto per_group = [&] {
    const int n = static_cast<int>(order.size());
    return n > 0 ? spent / n : -1.0;
  };
  const CollectTally t = collect_recipes(
      paths.db, recipes, co,
      [&](const CollectTally&) {
        const double per = per_group();
        return spent + std::max(0.0, per) <= budget_s && (per > 0 || spent < budget_s);
      },
      [&](std::size_t i, const CollectOutcome& r, const CollectTally& tally) {
        const bool measured = r.kind == CollectOutcome::Kind::Measured;
        if (measured || r.kind == CollectOutcome::Kind::Failed) spent += work_seconds(r);
        if (!r.fingerprint.empty() &&
            (measured || r.kind == CollectOutcome::Kind::Existing))
          order[r.fingerprint] = i;
        {
          heuristics::ResultsDb db(paths.db);
          db.set_meta(spent_key, std::to_string(spent));
          db.set_meta(order_key, order.dump());
        }
        if (quiet) return;
        const double per = per_group();
        const double eta = per > 0 ? std::max(0.0, budget_s - spent) : -1;
        std::fprintf(stderr, "[%zu] %s %s: %s%s%s (%.1f s, %.1f s waiting)  %zu groups, measuring "
                     "%s of %s, ETA %s\n",
                     i + 1, plan[i].stratum.c_str(), r.label.c_str(),
                     heuristics::outcome_name(r.kind), r.message.empty() ? "" : ": ",
                     r.message.c_str(), r.seconds, r.seconds - work_seconds(r), order.size(),
                     duration_text(spent).c_str(),
                     duration_text(budget_s).c_str(), duration_text(eta).c_str());
        (void)tally;
      });
  if (t.interrupted) {
    std::fprintf(stderr, "interrupted: %zu groups measured; run the same command again to resume "
                 "(the matrix being measured was not stored)\n", order.size());
    return kExitFailure;
  }
  if (!t.stopped.empty())
    throw Error("calibrate stopped measuring: " + t.stopped + " (" + std::to_string(order.size()) +
                    " groups measured are kept; nothing was fine-tuned)",
                "remove the cause and run the same command again to resume");

  // 2. The groups as examples, in plan order; every 4th held out for the decision, the one
  // before it for early stopping.
  learned::CostModel model = learned::CostModel::load(shipped, kind);
  ModelDataOptions md = o.data;
  md.db = paths.db;
  md.files.clear();
  const LoadedExamples data = load_examples(model, md, [](const learned::DatasetGroup&) { return true; });
  std::vector<std::size_t> idx(data.examples.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  const auto plan_index = [&](std::size_t i) {
    const std::string& fp = data.groups[i].fingerprint;
    return order.contains(fp) ? order[fp].get<std::size_t>() : plan.size() + i;
  };
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::size_t a, std::size_t b) { return plan_index(a) < plan_index(b); });
  std::vector<learned::RankingExample> tr, va, held;
  for (std::size_t r = 0; r < idx.size(); ++r)
    (r % 4 == 3 ? held : r % 4 == 2 ? va : tr).push_back(data.examples[idx[r]]);

  nlohmann::json sidecar = {
      {"format", tuning::kCalibrationFormat},
      {"version", tuning::kCalibrationVersion},
      {"identity", identity},
      {"kernel", k},
      {"dtype", "f32"},
      {"dense", dense},
      {"created_at", kernels::utc_timestamp()},
      {"minutes", o.minutes},
      {"measuring_seconds", spent},
      {"recipes_from", described},
      {"admissible_share", co.admissible_share},
      {"strata", strata},
      {"groups", {{"measured", data.examples.size()}, {"train", tr.size()},
                  {"early_stopping", va.size()}, {"held_out", held.size()}}},
      {"base_model", {{"path", shipped}, {"hash", tuning::file_hash(shipped)}}},
      {"db", paths.db}};
  learned::TrainSummary summary;
  std::string decision = "shipped", why;
  if (tr.empty() || va.empty() || held.empty()) {
    why = "too few groups (" + std::to_string(data.examples.size()) +
          ") to fine-tune and judge: at least 4 (give more --minutes)";
    sidecar["validation"] = {{"groups", held.size()}};
  } else {
    // 3. Fine-tuning from the shipped weights, judged on the held-out groups.
    const learned::RankingQuality before = learned::ranking_quality(model, held);
    learned::TrainOptions to;
    to.epochs = o.epochs;
    to.learning_rate = o.lr;
    to.patience = o.patience;
    to.schedules_per_matrix = 96;
    to.matrices_per_step = 4;
    to.threads = resolve_threads(o.data.threads);
    to.fine_tune = true;
    to.head_only = o.fine_tune == "head";
    const double t0 = kernels::now_seconds();
    summary = model.train(tr, va, to, [&](const learned::EpochReport& r) {
      if (quiet) return;
      std::fprintf(stderr, "fine-tune epoch %3d/%d  loss %.4f  val spearman %.3f  pair acc %.3f  "
                   "(%s, ETA %s)%s\n", r.epoch, to.epochs, r.train_loss, r.val_spearman,
                   r.val_pair_accuracy, duration_text(r.seconds).c_str(),
                   duration_text(r.eta_seconds).c_str(), r.best ? "  *" : "");
    });
    const learned::RankingQuality after = learned::ranking_quality(model, held);
    sidecar["validation"] = {{"groups", held.size()},
                             {"shipped", quality_json(before)},
                             {"calibrated", quality_json(after)}};
    sidecar["fine_tune"] = {{"part", o.fine_tune},
                            {"best_epoch", summary.best_epoch},
                            {"epochs_run", summary.history.size()},
                            {"learning_rate", o.lr},
                            {"seconds", kernels::now_seconds() - t0}};
    if (summary.best_epoch == 0)
      why = "no epoch ranked the early-stopping groups better than the shipped weights";
    else if (!better(after, before))
      why = "the fine-tuned model did not rank the held-out groups better";
    if (why.empty() || o.keep_fine_tuned) decision = "calibrated";
  }
  sidecar["decision"] = decision;
  sidecar["reason"] = decision != "calibrated" ? why
                      : why.empty()             ? "it ranks the held-out groups better"
                                                : "--keep-fine-tuned (" + why + ")";
  if (decision == "calibrated") {
    model.record()["calibration"] = {{"identity", identity}, {"groups", sidecar["groups"]},
                                     {"base_model", sidecar["base_model"]}};
    model.save(paths.model);
    sidecar["model"] = {{"path", paths.model}, {"hash", tuning::file_hash(paths.model)}};
  } else {
    fs::remove(paths.model, ec);  // a stale one of an earlier calibration
    sidecar["model"] = nullptr;
  }
  // The sidecar last: it is what tune reads, and it names the model file's hash.
  kernels::write_text_file(paths.sidecar, sidecar.dump(2) + "\n");

  if (o.json) {
    nlohmann::json out = sidecar;
    out["sidecar"] = paths.sidecar;
    out["collection"] = {{"outcomes", t.outcomes}, {"measured_now", t.collected},
                         {"breakdown_s", t.breakdown},
                         {"measuring_seconds_before", spent_before},
                         {"groups_before", measured_before}, {"seconds", t.seconds}};
    print_json(out);
    return kExitOk;
  }
  const nlohmann::json v = sidecar["validation"];
  auto f = [](const nlohmann::json& j, const char* key) {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::string("-");
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", j[key].get<double>());
    return std::string(b);
  };
  std::printf("calibrated %s on %s: %zu groups (%zu train, %zu early stopping, %zu held out), %s "
              "measuring\n", k.c_str(), identity.value("cpu", std::string("?")).c_str(),
              data.examples.size(), tr.size(), va.size(), held.size(), duration_text(spent).c_str());
  if (v.contains("shipped"))
    std::printf("  held-out groups: Spearman median %s shipped -> %s fine-tuned, pair accuracy %s "
                "-> %s\n", f(v["shipped"], "spearman_median").c_str(),
                f(v["calibrated"], "spearman_median").c_str(), f(v["shipped"], "pair_accuracy").c_str(),
                f(v["calibrated"], "pair_accuracy").c_str());
  if (decision == "calibrated")
    std::printf("  kept the fine-tuned model %s: tune, predict and waco::tune rank with it on this "
                "machine (--no-calibration or WACO_NO_CALIBRATION=1: the shipped model)\n",
                paths.model.c_str());
  else
    std::printf("  kept the shipped model: %s\n", why.c_str());
  std::printf("  sidecar %s\n", paths.sidecar.c_str());
  return kExitOk;
}

}  // namespace

Command make_calibrate_command() {
  return {"calibrate", "Fit the cost model to this machine: measure a stratified sample, fine-tune",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            add_kernel_option(sub, o->kernel);
            sub.add_option("--minutes", o->minutes,
                           "Time budget: measuring takes 90% of it (waits for --cpu-lock or a "
                           "calm machine not counted), preparing and fine-tuning the rest; counted "
                           "across resumes, so a larger one goes on measuring")
                ->check(CLI::Range(0.0, 100000.0))
                ->capture_default_str();
            sub.add_option("--recipes", o->recipes,
                           "Sample this recipe file (collect --recipes) instead of the committed "
                           "dataset's training recipes");
            sub.add_option("--max-nnz", o->max_nnz, "Leave out recipes estimated above N nonzeros")
                ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
                ->capture_default_str();
            sub.add_option("--dense", o->dense,
                           "Dense size measured: J for spmm and mttkrp, K for sddmm (default: the "
                           "shipped dataset's, spmm 256, mttkrp 16, sddmm 256). Each size is a "
                           "calibration of its own (<kernel>-<J>.* beside <kernel>.*), and tune, "
                           "predict and waco::tune rank with it at that size only (other sizes: "
                           "the shipped model): give the size the application uses")
                ->check(CLI::Range(1, 1 << 20));
            add_group_options(sub, o->g);  // --seed also orders the plan
            sub.add_option("--admissible-share", o->admissible_share,
                           "Share of each matrix's schedules drawn from the admissible set (the "
                           "schedules the trimming passes keep, among which tunes choose), the "
                           "rest from the legal space (default: 1 for a new calibration; a "
                           "resumed one keeps its own, 0.5 for one begun before this default)")
                ->check(CLI::Range(0.0, 1.0));
            sub.add_option("--fine-tune", o->fine_tune,
                           "What fine-tuning trains: all the model's weights, or only its scoring "
                           "head (a small correction; the encoders of matrices and schedules stay "
                           "the shipped model's)")
                ->check(CLI::IsMember({"all", "head"}))
                ->capture_default_str();
            sub.add_option("--epochs", o->epochs, "Fine-tuning epochs at most")
                ->check(CLI::Range(1, 100000))
                ->capture_default_str();
            sub.add_option("--lr", o->lr, "Fine-tuning learning rate")
                ->check(CLI::PositiveNumber)
                ->capture_default_str();
            sub.add_option("--patience", o->patience, "Stop after this many epochs without progress")
                ->check(CLI::Range(1, 100000))
                ->capture_default_str();
            sub.add_flag("--restart", o->restart,
                         "Discard this machine's calibration of the kernel at this dense size "
                         "(groups, model, sidecar) and begin again");
            sub.add_flag("--keep-fine-tuned", o->keep_fine_tuned,
                         "Keep the fine-tuned model even when it does not rank the held-out "
                         "groups better (for studies; the sidecar says so)");
            sub.add_option("--data-dir", o->data.data_dirs,
                           "Folders where real recipes' source files (.mtx) are looked up");
            add_threads_option(sub, o->data.threads);
            sub.add_flag("-q,--quiet", o->data.quiet, "No progress on stderr");
            sub.add_flag("--json", o->json, "Print JSON (the sidecar, and what was measured now)");
            sub.footer(
                "Measures a stratified sample of the committed dataset's training recipes on this\n"
                "machine (round robin over generators, real files' families and tensor sizes; as\n"
                "`collect` does, with --cpu-lock), then fine-tunes the shipped model on 3/4 of the\n"
                "groups and compares it with the shipped model on the last 1/4, which it never\n"
                "saw. The fine-tuned model is kept only when it ranks those better. Everything is\n"
                "kept in $XDG_DATA_HOME/waco-hybrid/calibration/<identity>/ (else\n"
                "~/.local/share/...), keyed by this machine's identity (CPU, caches, compilers):\n"
                "the groups (resumable: a killed or repeated calibrate goes on where it stopped),\n"
                "the model, and <kernel>.json with the held-out numbers before and after (at\n"
                "another --dense J than the default: <kernel>-J.*, a calibration of its own).\n"
                "tune, predict and waco::tune then rank with it on this machine, at that dense\n"
                "size, and say so;\n"
                "--model, --no-calibration or WACO_NO_CALIBRATION=1 use another.\n\n"
                "Examples:\n"
                "  waco-hybrid calibrate --kernel spmv --minutes 5\n"
                "  waco-hybrid calibrate --kernel spmv --minutes 10     # 5 more minutes on top\n"
                "  waco-hybrid calibrate --kernel spmm --minutes 10 --cpu-lock /tmp/cpu.lock --json\n"
                "  waco-hybrid calibrate --kernel spmm --dense 64 --minutes 5   # for tunes at J=64\n"
                "  waco-hybrid calibrate --kernel spmv --restart --minutes 2\n");
            return [o] { return calibrate(*o); };
          }};
}

}  // namespace waco::cli
