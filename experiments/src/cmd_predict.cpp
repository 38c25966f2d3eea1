// waco-hybrid predict: a cost model's order of schedules for one matrix (or tensor), without
// measuring: a schedule list, or by default the admissible set (the space after the default
// trimming passes). Prints the best-predicted first, with the time the model took.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "waco/learned/shipped.hpp"
#include "cli_common.hpp"
#include "command.hpp"
#include "model_data.hpp"
#include "stderr_observer.hpp"
#include "waco/tune/calibration.hpp"
#include "waco/tune/searcher.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {
namespace {

using kernels::Error;

struct Options {
  std::string model;
  bool no_calibration = false;
  std::string kernel;
  std::string file;
  std::string schedules;
  std::string search = "model";
  std::string passes = "all";
  std::string index;
  bool check_recall = false;
  int top = 10;
  int dense = 0;
  int threads = 0;
  std::uint64_t max_candidates = 2000000;
  kernels::ReadOptions read;
  bool json = false;
};

/// --search / --passes: a search of tune's registry (model or anns) over the space the passes
/// leave, without measuring; its --top best and what it reports about itself.
int predict_by_search(const Options& o, const tuning::ModelChoice& model, kernels::KernelKind kind,
                      const Operand& op, int threads, int dense, double t0) {
  const tuning::Searcher& searcher = tuning::find_searcher(o.search);
  if (!searcher.by_model)
    throw Error("predict ranks with the cost model: --search model or anns, not " + o.search);
  heuristics::SpaceOptions so;
  so.cores = threads;
  const kernels::DenseOperands d = kernels::make_dense_operands(
      kind, op.matrix ? &op.matrix->matrix : nullptr, op.tensor ? &op.tensor->tensor : nullptr,
      dense, 1);
  kernels::Problem p = kernels::make_problem(
      kind, op.matrix ? &op.matrix->matrix : nullptr, op.tensor ? &op.tensor->tensor : nullptr, d);
  p.value_type = o.read.dtype;  // the model's value type (the search reads the sparse operand only)
  heuristics::Space space = heuristics::Space::for_problem(p, so);
  heuristics::PassParams params;
  params.dtype = o.read.dtype;  // the tile model's value size, as tune's
  const heuristics::PipelineResult pr =
      heuristics::run_pipeline(space, heuristics::parse_pipeline(o.passes), params);
  if (pr.final_count == 0)
    throw Error("the pipeline '" + o.passes + "' leaves no admissible schedule",
                "use fewer passes, e.g. --passes legality");
  tuning::SearchRequest req;
  req.space = &space;
  req.admissible = pr.final_count;
  req.problem = &p;
  req.dense = kind == kernels::KernelKind::SpMV ? 1 : dense;
  req.budget = static_cast<std::uint64_t>(o.top > 0 ? o.top : 10);
  req.model = model.path;
  req.index = o.index;
  req.check_recall = o.check_recall;
  StderrObserver observer(o.json);
  req.observer = &observer;
  const tuning::SearchChoice c = searcher.choose(req);
  if (o.json) {
    nlohmann::json ranked = nlohmann::json::array();
    for (std::size_t r = 0; r < c.schedules.size(); ++r)
      ranked.push_back({{"rank", r + 1}, {"schedule", codegen::to_text(c.schedules[r])}});
    print_json({{"file", o.file}, {"model", model.path}, {"model_choice", model.to_json()},
                {"search", o.search}, {"passes", o.passes},
                {"admissible", pr.final_count}, {"search_info", c.info},
                {"seconds", kernels::now_seconds() - t0}, {"ranked", ranked}});
    return kExitOk;
  }
  std::printf("model: %s\n", model.note.c_str());
  std::printf("%llu admissible schedules (passes %s); %s search: %s\n",
              static_cast<unsigned long long>(pr.final_count), o.passes.c_str(), o.search.c_str(),
              c.info.dump().c_str());
  for (std::size_t r = 0; r < c.schedules.size(); ++r)
    std::printf("%4zu  %s\n", r + 1, codegen::to_text(c.schedules[r]).c_str());
  return kExitOk;
}

int predict(const Options& o) {
  const double t0 = kernels::now_seconds();
  const kernels::KernelKind kind = kernel_from_option(o.kernel);
  // This machine's calibrated model unless --model, --no-calibration or WACO_NO_CALIBRATION.
  const tuning::ModelChoice choice =
      tuning::choose_model(o.model, kind, o.read.dtype, codegen::CompilerOptions{},
                           !o.no_calibration, {}, o.dense);
  if (!choice.warning.empty()) std::fprintf(stderr, "warning: %s\n", choice.warning.c_str());
  const std::string& path = choice.path;
  const learned::CostModel model = learned::CostModel::load(path, kind);
  const Operand op = load_operand(o.file, o.read, kind);
  const int threads = resolve_threads(o.threads);
  const int dense = o.dense > 0 ? o.dense : kernels::default_dense_size(kind);

  std::vector<codegen::SuperSchedule> list;
  std::string from;
  if (o.search != "model" || o.passes != "all") {
    if (!o.schedules.empty())
      throw Error("--schedules ranks a list with the model; it takes neither --search nor --passes");
    return predict_by_search(o, choice, kind, op, threads, dense, t0);
  }
  if (!o.schedules.empty()) {
    list = read_schedule_list(kind, o.schedules);
    from = o.schedules;
  } else {
    heuristics::SpaceOptions so;
    so.cores = threads;
    heuristics::Space space = heuristics::Space::for_operand(
        kind, op.matrix ? &op.matrix->matrix : nullptr, op.tensor ? &op.tensor->tensor : nullptr,
        dense, so);
    heuristics::PassParams params;
    params.dtype = o.read.dtype;
    const heuristics::PipelineResult pr =
        heuristics::run_pipeline(space, heuristics::default_pipeline(), params);
    if (pr.final_count > o.max_candidates)
      throw Error("the admissible set holds " + std::to_string(pr.final_count) +
                      " schedules, more than --max-candidates " + std::to_string(o.max_candidates),
                  "raise --max-candidates or give a list with --schedules");
    space.for_each([&](const codegen::SuperSchedule& s) {
      list.push_back(s);
      return true;
    });
    from = "the admissible set";
  }
  // Shown on the run's threads, a serial schedule as itself; scored as the model sees them.
  for (auto& s : list)
    if (s.threads != 1) s.threads = threads;
  const double t1 = kernels::now_seconds();
  const learned::ModelInput in = op.matrix
                                     ? model.prepare(op.matrix->matrix, nullptr, o.read.dtype, dense)
                                     : model.prepare(op.tensor->tensor, o.read.dtype, dense);
  const std::vector<double> scores = model.scores(in, learned::as_model_sees(list, threads));
  const double model_s = kernels::now_seconds() - t1;
  std::vector<std::size_t> idx(list.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](auto a, auto b) { return scores[a] < scores[b]; });
  const std::size_t shown = o.top > 0 ? std::min<std::size_t>(idx.size(), static_cast<std::size_t>(o.top))
                                      : idx.size();
  if (o.json) {
    nlohmann::json ranked = nlohmann::json::array();
    for (std::size_t r = 0; r < shown; ++r)
      ranked.push_back({{"rank", r + 1}, {"schedule", codegen::to_text(list[idx[r]])},
                        {"score", scores[idx[r]]}});
    print_json({{"model", path}, {"model_choice", choice.to_json()},
                {"encoder", learned::encoder_name(model.config().encoder)},
                {"file", o.file}, {"candidates", list.size()}, {"from", from},
                {"prepare_seconds", in.prepare_seconds()}, {"model_seconds", model_s},
                {"seconds", kernels::now_seconds() - t0}, {"ranked", ranked}});
    return kExitOk;
  }
  std::printf("model: %s\n", choice.note.c_str());
  std::printf("%zu candidates from %s; model %s (%s encoder): %s\n", list.size(), from.c_str(),
              path.c_str(), learned::encoder_name(model.config().encoder).c_str(),
              format_seconds(model_s).c_str());
  for (std::size_t r = 0; r < shown; ++r)
    std::printf("%4zu  %9.4f  %s\n", r + 1, scores[idx[r]], codegen::to_text(list[idx[r]]).c_str());
  return kExitOk;
}

}  // namespace

Command make_predict_command() {
  return {"predict", "Rank schedules for a matrix with the learned cost model (no measuring)",
          [](CLI::App& sub) -> std::function<int()> {
            auto o = std::make_shared<Options>();
            add_kernel_option(sub, o->kernel);
            sub.add_option("FILE", o->file, "Matrix Market file (or FROSTT tensor for mttkrp)")
                ->required();
            sub.add_option("--model", o->model,
                           "Model file (default: this machine's calibrated model when `waco-hybrid "
                           "calibrate` made one, else the shipped model of the kernel, " +
                               learned::models_dir() + ")");
            sub.add_flag("--no-calibration", o->no_calibration,
                         "Rank with the shipped model even when this machine has a calibrated "
                         "one (also: WACO_NO_CALIBRATION=1)");
            sub.add_option("--schedules", o->schedules,
                           "Rank the schedules of this file (one per line) instead of the "
                           "admissible set");
            sub.add_option("--search", o->search,
                           "model: score every admissible schedule; anns: walk the HNSW graph "
                           "(see tune --help)")
                ->check(CLI::IsMember({"model", "anns"}))
                ->capture_default_str();
            sub.add_option("--passes", o->passes,
                           "Trimming pipeline of the admissible set ('all', 'legality', ...)")
                ->capture_default_str();
            sub.add_option("--index", o->index, "HNSW graph file of --search anns");
            sub.add_flag("--check-recall", o->check_recall,
                         "--search anns: recall_at_10 of the walk against exact scoring");
            sub.add_option("--top", o->top, "Print the N best-predicted (0: all)")
                ->capture_default_str()->check(CLI::NonNegativeNumber);
            sub.add_option("--dense", o->dense, "Dense size of the admissible set (J or K)");
            sub.add_option("--max-candidates", o->max_candidates,
                           "Refuse admissible sets larger than this")->capture_default_str();
            add_threads_option(sub, o->threads);
            add_read_options(sub, o->read);
            add_dtype_option(sub, o->read.dtype);
            sub.add_flag("--json", o->json, "Print JSON (ranked schedules with scores, times)");
            sub.footer("Scores are the model's: lower is predicted faster; only the order means "
                       "anything.\n\nExamples:\n"
                       "  waco-hybrid predict --kernel spmv examples/bcsstk13.mtx.gz\n"
                       "  waco-hybrid predict --kernel spmm --schedules list.txt --top 0 m.mtx --json\n"
                       "  waco-hybrid predict --kernel spmv --search anns --passes legality "
                       "--check-recall --json m.mtx");
            return [o] { return predict(*o); };
          }};
}

}  // namespace waco::cli
