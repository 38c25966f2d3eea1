// waco-hybrid evaluate: how well a cost model orders measured schedules it did not train on:
// per matrix Spearman and Kendall correlations, pairwise accuracy beside the dataset's own
// pair-order stability (groups measured twice), top-1 and top-10 regret, and the query cost.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "waco/learned/shipped.hpp"
#include "cli_common.hpp"
#include "command.hpp"
#include "model_data.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/ranking_metrics.hpp"

namespace waco::cli {
namespace {

using kernels::Error;

struct Options {
  std::string model;
  std::string kernel;
  std::string split = "test";
  ModelDataOptions data;
  double min_gap = 0.02;
  bool json = false;
};

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

double mean_finite(const std::vector<double>& v) {
  double s = 0;
  int n = 0;
  for (double x : v)
    if (std::isfinite(x)) s += x, ++n;
  return n ? s / n : std::nan("");
}

int evaluate(const Options& o) {
  std::string path = o.model;
  std::optional<kernels::KernelKind> kind;
  if (!o.kernel.empty()) kind = kernel_from_option(o.kernel);
  if (path.empty()) {
    if (!kind) throw Error("evaluate needs --model or --kernel (for the shipped model)");
    path = learned::model_path_or_default(path, *kind, o.data.dtype);
  }
  const learned::CostModel model = learned::CostModel::load(path, kind);
  const LoadedExamples data = load_examples(model, o.data, [&](const learned::DatasetGroup& g) {
    return o.split == "all" || g.split == o.split;
  });
  if (data.examples.empty())
    throw Error("no " + o.split + " matrices for " +
                    std::string(kernels::kernel_name(model.config().kind)) + " in " + data.described,
                "use --split all for data the model was not trained on, or another --db");

  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> rho, tau, acc, stab, r1, r10, cost;
  learned::PairCount pooled;
  for (std::size_t i = 0; i < data.examples.size(); ++i) {
    const auto& ex = data.examples[i];
    const auto& g = data.groups[i];
    const double t0 = kernels::now_seconds();
    const std::vector<double> s = model.scores(ex.input, ex.schedules);
    const double score_s = kernels::now_seconds() - t0;
    std::vector<double> ps, ms;
    for (std::size_t q = 0; q < s.size(); ++q)
      if (!ex.lower_bound[q]) ps.push_back(s[q]), ms.push_back(ex.seconds[q]);
    const double sp = learned::spearman(ps, ms), kt = learned::kendall_tau_b(ps, ms);
    const learned::PairCount pc = learned::pairwise_agreement(s, ex.seconds, ex.lower_bound, o.min_gap);
    pooled.agree2 += pc.agree2;
    pooled.pairs += pc.pairs;
    const double reg1 = learned::top_k_regret(s, ex.seconds, ex.lower_bound, 1);
    const double reg10 = learned::top_k_regret(s, ex.seconds, ex.lower_bound, 10);
    const double query = ex.input.prepare_seconds() + score_s;
    const double calls = g.csr_seconds > 0 ? query / g.csr_seconds : std::nan("");
    rho.push_back(sp);
    tau.push_back(kt);
    acc.push_back(pc.accuracy());
    r1.push_back(reg1);
    r10.push_back(reg10);
    cost.push_back(calls);
    if (g.pair_agreement) stab.push_back(*g.pair_agreement);
    rows.push_back({{"matrix", ex.name}, {"fingerprint", g.fingerprint}, {"split", g.split},
                    {"family", g.family}, {"candidates", ex.schedules.size()},
                    {"exact", ms.size()}, {"spearman", num(sp)}, {"kendall", num(kt)},
                    {"pair_accuracy", num(pc.accuracy())}, {"pairs", pc.pairs},
                    {"dataset_pair_agreement",
                     g.pair_agreement ? nlohmann::json(*g.pair_agreement) : nlohmann::json()},
                    {"top1_regret", num(reg1)}, {"top10_regret", num(reg10)},
                    {"query_seconds", query}, {"query_csr_calls", num(calls)}});
  }
  auto share_within = [](const std::vector<double>& v, double lim) {
    int n = 0, k = 0;
    for (double x : v)
      if (!std::isnan(x)) ++n, k += x <= lim;
    return n ? static_cast<double>(k) / n : std::nan("");
  };
  const nlohmann::json summary = {
      {"matrices", data.examples.size()},
      {"spearman_median", num(learned::median_finite(rho))},
      {"kendall_median", num(learned::median_finite(tau))},
      {"pair_accuracy", num(pooled.accuracy())},
      {"dataset_pair_agreement_mean", num(mean_finite(stab))},
      {"dataset_repeated_groups", stab.size()},
      {"top1_regret_median", num(learned::median_finite(r1))},
      {"top10_regret_median", num(learned::median_finite(r10))},
      {"top10_regret_mean", num(mean_finite(r10))},
      {"top10_within_5pct", num(share_within(r10, 0.05))},
      {"query_csr_calls_median", num(learned::median_finite(cost))}};
  if (o.json) {
    print_json({{"model", path}, {"kernel", std::string(kernels::kernel_name(model.config().kind))},
                {"encoder", learned::encoder_name(model.config().encoder)}, {"split", o.split},
                {"data", data.described}, {"dtype", std::string(kernels::dtype_name(o.data.dtype))},
                {"skipped", data.skipped.size()},
                {"summary", summary}, {"spearman_median", summary["spearman_median"]},
                {"rows", rows}});
    return kExitOk;
  }
  std::printf("%-44s %5s %8s %8s %8s %8s %8s %8s\n", "matrix", "cand", "spearman", "kendall",
              "pair-acc", "top1", "top10", "csr-call");
  for (const auto& r : rows) {
    auto f = [&](const char* k, bool pct) -> std::string {
      if (r[k].is_null()) return "-";
      const double v = r[k].get<double>();
      char b[32];
      if (std::isinf(v)) return "inf";
      std::snprintf(b, sizeof b, pct ? "%.1f%%" : "%.3f", pct ? 100 * v : v);
      return b;
    };
    std::printf("%-44.44s %5d %8s %8s %8s %8s %8s %8s\n", r["matrix"].get<std::string>().c_str(),
                r["candidates"].get<int>(), f("spearman", false).c_str(), f("kendall", false).c_str(),
                f("pair_accuracy", false).c_str(), f("top1_regret", true).c_str(),
                f("top10_regret", true).c_str(), f("query_csr_calls", false).c_str());
  }
  std::printf("\n%s (%s encoder) on %zu %s matrices of %s:\n", path.c_str(),
              learned::encoder_name(model.config().encoder).c_str(), data.examples.size(),
              o.split.c_str(), data.described.c_str());
  std::printf("  Spearman median %.3f, Kendall median %.3f, pair accuracy %.3f",
              learned::median_finite(rho), learned::median_finite(tau), pooled.accuracy());
  if (!stab.empty())
    std::printf(" (the data's own pair-order agreement: %.3f over %zu repeated groups)",
                mean_finite(stab), stab.size());
  std::printf("\n  top-1 regret median %.1f%%, top-10 regret median %.1f%% (mean %.1f%%, within 5%% "
              "on %.0f%% of matrices)\n  query cost median %.1f csr calls\n",
              100 * learned::median_finite(r1), 100 * learned::median_finite(r10),
              100 * mean_finite(r10), 100 * share_within(r10, 0.05),
              learned::median_finite(cost));
  return kExitOk;
}

}  // namespace

Command make_evaluate_command() {
  return {"evaluate", "Rank correlations and regret of a cost model on measured groups",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            sub.add_option("--model", o->model,
                           "Model file (default: the shipped model of --kernel, " + learned::models_dir() + ")");
            sub.add_option("--kernel", o->kernel, "Kernel (picks the shipped model; checked "
                                                  "against --model)")
                ->check(CLI::IsMember({"spmv", "spmm", "sddmm", "mttkrp"}));
            sub.add_option("--split", o->split,
                           "Which matrices: test (never trained on), validation, train, or all "
                           "(e.g. data collected on another machine)")
                ->capture_default_str()
                ->check(CLI::IsMember({"test", "validation", "train", "all"}));
            sub.add_option("--min-gap", o->min_gap, "Pairs closer than this share are not counted")
                ->capture_default_str()->check(CLI::Range(0.0, 10.0));
            add_model_data_options(sub, o->data);
            sub.add_flag("--json", o->json, "Print JSON (summary with spearman_median, and rows)");
            sub.footer("Spearman and Kendall use the candidates timed to the end; pair accuracy "
                       "also counts pairs with an abandoned (lower-bound) candidate. Regret: the "
                       "best measured time among the model's top k over the best measured, minus 1."
                       "\n\nExamples:\n"
                       "  waco-hybrid evaluate --kernel spmv                 # shipped model, test split\n"
                       "  waco-hybrid evaluate --model m.model --db other-machine.sqlite --split all --json");
            return [o] { return evaluate(*o); };
          }};
}

}  // namespace waco::cli
