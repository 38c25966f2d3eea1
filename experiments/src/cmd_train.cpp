// waco-hybrid train: the learned cost model from measured groups (cost_model.hpp): one progress
// line per epoch with the validation Spearman and an ETA, a checkpoint every epoch (--resume
// continues it after a kill), early stopping, and a model file that records its data and command.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "cli_common.hpp"
#include "command.hpp"
#include "model_data.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {
namespace {

using kernels::Error;

struct Options {
  std::string kernel;
  std::string encoder = "signature";
  std::string waconet_variant = "small";
  bool encoder_given = false;  ///< --encoder was on the command line
  bool dtype_input = false;    ///< --dtype-input: the value type one more feature, both types' groups
  bool dense_input = false;    ///< --dense-input: the dense size one more feature
  std::string init;            ///< --init MODEL: fine-tune this model's weights
  std::string output;
  std::string checkpoint;
  bool resume = false;
  learned::TrainOptions train;
  std::uint64_t seed = 1;
  ModelDataOptions data;
  double holdout = 0.0;  ///< --holdout: share of the training families for early stopping
  bool json = false;
};

/// The families whose groups early stopping reads when the data has no validation split
/// (--holdout SHARE: calibration groups, for one, all come from the training split): a share
/// of the training families, at least one and never all, chosen by a hash of the family and the
/// seed, so that one family's groups (a file's augmentations, a matrix's dense sizes) stay on one
/// side.
std::set<std::string> holdout_families(const std::vector<std::string>& train_families,
                                       double share, std::uint64_t seed) {
  std::vector<std::string> f(train_families);
  std::sort(f.begin(), f.end());
  f.erase(std::unique(f.begin(), f.end()), f.end());
  if (f.size() < 2 || share <= 0) return {};
  const auto key = [seed](const std::string& x) {
    return kernels::splitmix64(kernels::fnv1a(x) ^ kernels::splitmix64(seed));
  };
  std::sort(f.begin(), f.end(), [&](const std::string& a, const std::string& b) {
    const std::uint64_t ka = key(a), kb = key(b);
    return ka != kb ? ka < kb : a < b;
  });
  const auto n = std::clamp<std::size_t>(
      static_cast<std::size_t>(std::ceil(share * static_cast<double>(f.size()))), 1, f.size() - 1);
  return {f.begin(), f.begin() + static_cast<std::ptrdiff_t>(n)};
}

/// The command that trains this model again (the data source as given).
std::string command_of(const Options& o, const learned::TrainOptions& t, const std::string& encoder) {
  std::string c = "waco-hybrid train --kernel " + o.kernel + " --encoder " + encoder;
  if (!o.init.empty()) c += " --init " + o.init;
  if (encoder.find("waconet") != std::string::npos) c += " --waconet " + o.waconet_variant;
  c += " --epochs " + std::to_string(t.epochs) + " --lr " + std::to_string(t.learning_rate) +
       " --batch " + std::to_string(t.schedules_per_matrix) + " --matrices-per-step " +
       std::to_string(t.matrices_per_step) + " --patience " + std::to_string(t.patience) +
       " --seed " + std::to_string(o.seed) + " --threads " + std::to_string(t.threads);
  if (o.dense_input) c += " --dense-input";
  if (o.dtype_input) c += " --dtype-input";
  else if (o.data.dtype != kernels::Dtype::F32)
    c += " --dtype " + std::string(kernels::dtype_name(o.data.dtype));
  if (o.holdout > 0) c += " --holdout " + std::to_string(o.holdout);
  if (!o.data.db.empty()) c += " --db " + o.data.db;
  for (const auto& f : o.data.files) c += " " + f;
  return c + " -o " + o.output;
}

nlohmann::json finite_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

int train(const Options& given) {
  learned::require_torch("training");  // the lite build runs waco-hybrid-torch (main.cpp)
  Options o = given;
  const kernels::KernelKind kind = kernel_from_option(o.kernel);
  if (o.output.empty()) throw Error("train needs -o MODEL", "name the model file to write");
  if (o.dtype_input && o.data.dtype != kernels::Dtype::F32)
    throw Error("--dtype-input trains on the groups of both value types; --dtype chooses one",
                "give one of them");
  kernels::check_writable(o.output);
  learned::CostModel model = [&] {
    if (!o.init.empty()) {
      // The model's own kernel and encoder (checked against --kernel and a given --encoder).
      learned::CostModel init = learned::CostModel::load(
          o.init, kind,
          o.encoder_given ? std::optional(learned::parse_encoder(o.encoder)) : std::nullopt);
      if (!o.dense_input || init.config().dense_input) return init;
      if (!o.data.quiet)
        std::fprintf(stderr, "--dense-input: %s reads the dense size from now on (its weight "
                             "zero before training)\n", o.init.c_str());
      return init.with_dense_input();
    }
    learned::CostModelConfig config;
    config.kind = kind;
    config.encoder = learned::parse_encoder(o.encoder);
    config.waconet_variant = o.waconet_variant;
    config.seed = o.seed;
    config.dtype_input = o.dtype_input;
    config.dense_input = o.dense_input;
    return learned::CostModel::create(config);
  }();
  // A model reading the value type learns from the groups of both (--init's model decides).
  o.dtype_input = model.config().dtype_input;
  o.data.every_dtype = o.dtype_input;
  o.dense_input = model.config().dense_input;
  const std::string encoder = learned::encoder_name(model.config().encoder);

  const LoadedExamples data = load_examples(model, o.data, [](const learned::DatasetGroup&) { return true; });
  // Without a validation split in the data, --holdout's families validate (holdout_families).
  const bool has_validation = std::any_of(data.groups.begin(), data.groups.end(),
                                          [](const learned::DatasetGroup& g) { return g.split == "validation"; });
  std::set<std::string> held;
  if (!has_validation && o.holdout > 0) {
    std::vector<std::string> families;
    for (const learned::DatasetGroup& g : data.groups)
      if (g.split == "train") families.push_back(g.family);
    held = holdout_families(families, o.holdout, o.seed);
  }
  const std::size_t held_families = held.size();
  std::vector<learned::RankingExample> tr, va;
  std::map<std::string, int> counts;
  for (std::size_t i = 0; i < data.examples.size(); ++i) {
    const std::string& split = data.groups[i].split;
    ++counts[split];
    if (split == "train") (held.count(data.groups[i].family) ? va : tr).push_back(data.examples[i]);
    else if (split == "validation") va.push_back(data.examples[i]);
  }
  if (tr.empty())
    throw Error("no training matrices for " + o.kernel + " in " + data.described,
                "collect measurements first (waco-hybrid collect --kernel " + o.kernel + ")");
  if (!has_validation && o.holdout > 0) {
    if (!o.data.quiet && held_families == 0)
      std::fprintf(stderr,
                   "%s has no validation split and one training family: --holdout cannot hold "
                   "any out, no early stopping\n",
                   data.described.c_str());
    else if (!o.data.quiet)
      std::fprintf(stderr,
                   "%s has no validation split: --holdout %.2f holds out %zu of its training "
                   "families (%zu groups) for early stopping\n",
                   data.described.c_str(), o.holdout, held_families, va.size());
  } else if (!has_validation && !o.data.quiet) {
    std::fprintf(stderr,
                 "%s has no validation split: no early stopping, the weights of the last of %d "
                 "epochs are written (--holdout SHARE holds out a share of the training "
                 "families for it)\n",
                 data.described.c_str(), o.train.epochs);
  } else if (o.holdout > 0 && !o.data.quiet) {
    std::fprintf(stderr, "--holdout ignored: %s has its own validation split\n",
                 data.described.c_str());
  }
  if (!o.data.quiet)
    std::fprintf(stderr,
                 "%s: %zu train, %zu validation matrices (%d test held back), encoder %s, %lld "
                 "parameters, %d threads\n",
                 data.described.c_str(), tr.size(), va.size(), counts["test"], encoder.c_str(),
                 static_cast<long long>(model.parameter_count()), resolve_threads(o.data.threads));
  if (!o.init.empty() && !o.data.quiet)
    std::fprintf(stderr, "fine-tuning %s: its standardization kept, its weights epoch 0's candidate\n",
                 o.init.c_str());

  learned::TrainOptions to = o.train;
  to.threads = resolve_threads(o.data.threads);
  to.checkpoint = o.checkpoint.empty() ? o.output + ".checkpoint" : o.checkpoint;
  to.resume = o.resume;
  to.fine_tune = !o.init.empty();
  // --seed chooses the training order, with --init's weights too (a new model's config.seed
  // is the same seed).
  to.order_seed = o.seed;
  if (o.resume && !o.data.quiet && !std::filesystem::exists(to.checkpoint))
    std::fprintf(stderr, "--resume: no checkpoint at %s yet, starting from epoch 1\n",
                 to.checkpoint.c_str());
  const double t0 = kernels::now_seconds();
  const learned::TrainSummary s = model.train(tr, va, to, [&](const learned::EpochReport& r) {
    if (o.data.quiet) return;
    std::fprintf(stderr, "epoch %3d/%d  loss %.4f  val spearman %.3f  pair acc %.3f  (%s, ETA %s)%s\n",
                 r.epoch, to.epochs, r.train_loss, r.val_spearman, r.val_pair_accuracy,
                 duration_text(r.seconds).c_str(), duration_text(r.eta_seconds).c_str(),
                 r.best ? "  *" : "");
  });
  const double seconds = kernels::now_seconds() - t0;

  nlohmann::json& rec = model.record();
  rec["data"] = {{"source", data.described}, {"hash", data.data_hash},
                 {"matrices", {{"train", tr.size()}, {"validation", va.size()}, {"test", counts["test"]}}},
                 {"skipped", data.skipped.size()}};
  if (held_families > 0) rec["data"]["holdout"] = {{"share", o.holdout}, {"families", held_families}};
  if (!o.init.empty()) rec["fine_tuned_from"] = o.init;
  rec["command"] = command_of(o, to, encoder);
  rec["train_options"] = {{"epochs", to.epochs}, {"schedules_per_matrix", to.schedules_per_matrix},
                          {"matrices_per_step", to.matrices_per_step},
                          {"learning_rate", to.learning_rate}, {"margin", to.margin},
                          {"min_gap", to.min_gap}, {"patience", to.patience}, {"threads", to.threads}};
  rec["train_seconds"] = seconds;
  rec["prepare_seconds"] = data.seconds;
  rec["best_val_spearman"] = finite_or_null(s.best_val_spearman);
  rec["context"] = kernels::context_json(to.threads, "none");
  model.save(o.output);
  if (!o.data.quiet)
    std::fprintf(stderr, "wrote %s: best epoch %d of %zu, validation Spearman %.3f, %s training%s\n",
                 o.output.c_str(), s.best_epoch, s.history.size(), s.best_val_spearman,
                 duration_text(seconds).c_str(), s.stopped_early ? " (stopped early)" : "");
  if (o.json) {
    nlohmann::json hist = rec.value("history", nlohmann::json::array());
    print_json({{"model", o.output}, {"kernel", o.kernel}, {"encoder", encoder},
                {"best_epoch", s.best_epoch}, {"best_val_spearman", finite_or_null(s.best_val_spearman)},
                {"epochs_run", s.history.size()}, {"stopped_early", s.stopped_early},
                {"resumed", s.resumed}, {"train_seconds", seconds}, {"data", rec["data"]},
                {"history", hist}});
  }
  return kExitOk;
}

}  // namespace

Command make_train_command() {
  return {"train", "Train the learned cost model on measured groups",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            add_kernel_option(sub, o->kernel);
            sub.add_option("--encoder", o->encoder,
                           "Matrix encoder: stats, signature, waconet or signature+waconet")
                ->capture_default_str()
                ->check(CLI::IsMember(learned::encoder_names()))
                ->each([o](const std::string&) { o->encoder_given = true; });
            sub.add_option("--init", o->init,
                           "Fine-tune this model (e.g. a shipped one): start from its weights and "
                           "feature standardization; it must be of --kernel (and of --encoder when "
                           "given). Its weights stay unless an epoch validates better");
            sub.add_option("--waconet", o->waconet_variant,
                           "WACONet variant for the waconet encoders: full, small, tiny")
                ->capture_default_str();
            sub.add_option("-o,--output", o->output, "The model file to write")->required();
            sub.add_option("--epochs", o->train.epochs, "At most this many epochs")
                ->capture_default_str()->check(CLI::Range(1, 100000));
            sub.add_option("--lr", o->train.learning_rate, "Adam learning rate")
                ->capture_default_str()->check(CLI::PositiveNumber);
            sub.add_option("--batch", o->train.schedules_per_matrix,
                           "Schedules of one matrix per step (all their pairs; WACO: 32)")
                ->capture_default_str()->check(CLI::Range(2, 100000));
            sub.add_option("--matrices-per-step", o->train.matrices_per_step,
                           "Matrices whose losses make one Adam step")
                ->capture_default_str()->check(CLI::Range(1, 100000));
            sub.add_option("--margin", o->train.margin, "Hinge margin")->capture_default_str()
                ->check(CLI::PositiveNumber);
            sub.add_option("--min-gap", o->train.min_gap,
                           "Pairs whose times differ by less than this share are not used")
                ->capture_default_str()->check(CLI::Range(0.0, 10.0));
            sub.add_option("--patience", o->train.patience,
                           "Stop after this many epochs without a better validation Spearman")
                ->capture_default_str()->check(CLI::Range(1, 100000));
            sub.add_option("--seed", o->seed, "Seed of the weights (not with --init: its weights) and of the training order")
                ->capture_default_str();
            sub.add_option("--checkpoint", o->checkpoint,
                           "Checkpoint written after every epoch (default: MODEL.checkpoint)");
            sub.add_flag("--resume", o->resume, "Continue from the checkpoint when it exists");
            sub.add_option("--holdout", o->holdout,
                           "When the data has no validation split (calibration groups, a database of "
                           "training recipes): hold out this share of its training families, chosen "
                           "by the seed, for early stopping (0: none, every epoch trains and the "
                           "last is written)")
                ->capture_default_str()->check(CLI::Range(0.0, 0.5));
            add_model_data_options(sub, o->data);
            sub.add_flag("--dtype-input", o->dtype_input,
                         "The model reads the value type (f32 or f64) as one more matrix feature "
                         "and trains on the groups of both (without it: the groups of --dtype)");
            sub.add_flag("--dense-input", o->dense_input,
                         "The model reads the dense size (log2 J or K) as one more matrix feature, "
                         "so that one model ranks groups of several sizes (spmm, sddmm, mttkrp; "
                         "with --init: a model without it learns it, starting from its ranking)");
            sub.add_flag("--json", o->json, "Print JSON (history, best epoch, data)");
            sub.footer(
                "Groups of every dense size the data holds are trained on (without "
                "--dense-input the model cannot tell them apart). "
                "Groups are split by family (all augmentations of one real file together): 80% "
                "train, 10% validation (early stopping), 10% test (never read here; see "
                "`waco-hybrid evaluate --split test`). Deterministic for a seed and thread "
                "count.\n\nExamples:\n"
                "  waco-hybrid train --kernel spmv -o spmv.model            # committed dataset\n"
                "  waco-hybrid train --kernel spmm --db results.sqlite --encoder stats -o m.model\n"
                "  waco-hybrid train --kernel spmv -o spmv.model --resume   # after an interruption\n"
                "  waco-hybrid train --kernel spmv --dtype-input data/dataset/spmv.jsonl.gz "
                "data/dtype/spmv-zen5.jsonl.gz -o both.model\n"
                "  waco-hybrid train --kernel spmv --init data/models/spmv.model --db here.sqlite "
                "--lr 0.0003 -o tuned.model\n"
                "  waco-hybrid train --kernel spmm --init data/models/spmm.model --dense-input "
                "--holdout 0.2 data/dense/spmm-epyc.jsonl.gz -o sized.model");
            return [o] { return train(*o); };
          }};
}

}  // namespace waco::cli
