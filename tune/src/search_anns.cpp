// tune --search anns: the cost model ranks the admissible schedules through an HNSW graph
// (learned/schedule_index.hpp). The graph's nodes are the kernel's *templates*: the schedules of
// the structural space (sparse extents unbounded, the problem's dense extent, this machine's
// cores) that pass the matrix-independent passes, sampled down to kMaxTemplates, plus every
// schedule of the committed dataset. The graph is built once per (model, template definition)
// and kept in the user cache (or at --index). A query walks it with the head as the distance,
// keeping the schedules this matrix's space admits (Space::admits) and widening ef until
// --budget of them are found.
//
// Where the admissible set is small (<= kExactBelow), scoring all of it is exact and cheaper than
// loading the graph and walking it: the search then does what `--search model` does and says so
// ("method": "exact"). Measured for SpMV on bcsstk13 (2 threads, Xeon VM, shipped model): exact
// scoring ~5.4 us a schedule (432: 2.5 ms, 23,544: 175 ms, 520,704: 2.82 s); the walk 3.3 ms
// (3,970 head evaluations, recall@10 1.0) after loading the 103k-node graph in 0.15 s. So a
// one-shot tune gains from the walk above ~30k admissible schedules. --check-recall also scores every graph node the space admits and
// reports recall@10 of the walk against it.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "waco/learned/cost_model.hpp"
#include "waco/learned/shipped.hpp"
#include "waco/tune/calibration.hpp"
#include "waco/tune/searcher.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/schedule_index.hpp"
#include "waco/learned/training_data.hpp"

namespace waco::tuning {

namespace {
namespace fs = std::filesystem;

/// Admissible sets up to this size are scored exactly (see the file comment).
constexpr std::uint64_t kExactBelow = 30000;
/// Largest graph: larger template sets are sampled (seeded) down to this.
constexpr std::uint64_t kMaxTemplates = 300000;
constexpr std::size_t kEf = 200;  // WACO's ef
constexpr const char* kTemplatePasses =
    "legality,sparse-iteration,parallelize-one,parallelize-outer,no-useless-partition,"
    "concordant-dense,vectorizable-inner";

/// 16 hex digits of a file's bytes: file_hash (calibration.hpp), kept per process while the file
/// stays, so that a tune does not read the model and every dataset export again to name the graph.
std::string file_digest(const std::string& path) {
  std::string h = file_hash(path);
  if (h.empty()) throw kernels::Error("cannot read " + path);
  return h;
}

/// The committed dataset's export files of kernel k (named "<kernel>.*").
std::vector<std::string> kernel_exports(kernels::KernelKind k) {
  const std::string prefix = std::string(kernels::kernel_name(k)) + ".";
  std::vector<std::string> out;
  for (const std::string& f : learned::committed_exports())
    if (fs::path(f).filename().string().rfind(prefix, 0) == 0) out.push_back(f);
  return out;
}

/// What the templates are made from: the graph is built again when any of it changes.
std::string template_definition(const SearchRequest& r) {
  std::string d = std::string(kernels::kernel_name(r.problem->kind)) +
                  " dense=" + std::to_string(r.dense) +
                  " cores=" + std::to_string(r.space->cores()) + " passes=" + kTemplatePasses +
                  " max=" + std::to_string(kMaxTemplates) + " chunks=";
  for (int c : heuristics::chunk_choices()) d += std::to_string(c) + ",";
  d += " dataset=";
  for (const std::string& f : kernel_exports(r.problem->kind))
    d += file_digest(f) + ",";
  return d;
}

/// The model search's exact scoring of the admissible set, saying why it was used.
SearchChoice exact_choice(const SearchRequest& r, const std::string& why) {
  SearchChoice c = search_model(r);
  c.info["method"] = "exact";
  c.info["why"] = why;
  return c;
}

std::vector<codegen::SuperSchedule> make_templates(const SearchRequest& r, nlohmann::json& info) {
  const kernels::KernelKind kind = r.problem->kind;
  const codegen::KernelSpec& spec = r.space->spec();
  std::vector<std::int64_t> extents;
  for (std::size_t v = 0; v < spec.vars.size(); ++v)
    extents.push_back(spec.is_sparse_var(spec.vars[v]) ? codegen::kMaxSplit : r.space->extents()[v]);
  heuristics::SpaceOptions so = r.space->options();
  heuristics::Space space = heuristics::Space::structural(kind, extents, so);
  heuristics::run_pipeline(space, heuristics::parse_pipeline(kTemplatePasses));
  std::vector<codegen::SuperSchedule> out =
      space.sample(std::min<std::uint64_t>(space.count(), kMaxTemplates), 1);
  info["structural_templates"] = space.count();
  std::size_t from_data = 0;
  for (const std::string& f : kernel_exports(kind)) {
    learned::for_each_export_group(f, [&](const nlohmann::json& g) {
      const learned::DatasetGroup group = learned::group_from_json(g);
      if (group.kind != kind || group.dense != r.dense) return;
      for (const learned::MeasuredCandidate& c : group.candidates)
        if (c.schedule.threads <= r.space->cores()) {
          out.push_back(c.schedule);
          ++from_data;
        }
    });
  }
  info["dataset_schedules"] = from_data;
  return out;
}

/// The index for this model and template definition: loaded from `path` (or the cache), else
/// built and saved there. A stale or corrupt file is rebuilt with a message.
learned::ScheduleIndex index_for(const SearchRequest& r, const learned::CostModel& model,
                                 const std::string& model_path, nlohmann::json& info) {
  const std::string key = kernels::hex16(std::stoull(file_digest(model_path), nullptr, 16) ^
                              kernels::splitmix64(kernels::fnv1a(template_definition(r))));
  std::string path = r.index;
  if (path.empty()) {
    const fs::path dir = fs::path(kernels::user_cache_dir()) / "anns";
    std::error_code ec;
    fs::create_directories(dir, ec);
    path = (dir / (std::string(kernels::kernel_name(r.problem->kind)) + "-" + key + ".hnsw")).string();
  }
  info["index"] = path;
  if (fs::exists(path) && fs::exists(path + ".json")) {
    try {
      learned::ScheduleIndex idx = learned::ScheduleIndex::load(path, model);
      info["index_built"] = false;
      return idx;
    } catch (const kernels::Error& e) {
      r.observer->warning(format("anns: %s; building it again", e.what()));
    }
  }
  nlohmann::json tinfo = nlohmann::json::object();
  std::vector<codegen::SuperSchedule> templates = make_templates(r, tinfo);
  r.observer->note(format("anns: building the HNSW graph over %zu template schedules (once per "
                          "model; kept in %s)", templates.size(), path.c_str()));
  const double t0 = kernels::now_seconds();
  learned::ScheduleIndex idx = learned::ScheduleIndex::build(
      model, std::move(templates), {}, [&](std::size_t done, std::size_t total) {
        if (done % std::max<std::size_t>(1, total / 10) != 0) return;
        const double t = kernels::now_seconds() - t0;
        r.observer->note(format("anns: %zu / %zu nodes, %.0f s, ETA %.0f s", done, total, t,
                                t / static_cast<double>(done) * static_cast<double>(total - done)));
      });
  try {
    idx.save(path);
  } catch (const kernels::Error& e) {
    r.observer->warning(format("anns: the graph is not kept (%s); the next search builds it again",
                               e.what()));
  }
  info["index_built"] = true;
  info["build_seconds"] = idx.build_seconds();
  info["templates"] = tinfo;
  return idx;
}

}  // namespace

SearchChoice search_anns(const SearchRequest& r) {
  const kernels::KernelKind kind = r.problem->kind;
  const std::size_t k = static_cast<std::size_t>(model_budget(r));
  if (r.admissible <= kExactBelow && !r.check_recall)
    return exact_choice(r, "the admissible set (" + std::to_string(r.admissible) +
                               ") is at most " + std::to_string(kExactBelow) +
                               ": scoring all of it is exact and cheaper");
  const std::string path = learned::model_path_or_default(r.model, kind, r.problem->dtype());
  const double t0 = kernels::now_seconds();
  const learned::CostModel model = learned::CostModel::load(path, kind);
  SearchChoice c;
  c.info = {{"method", "anns"}, {"model", path},
            {"encoder", learned::encoder_name(model.config().encoder)}};
  const learned::ScheduleIndex index = index_for(r, model, path, c.info);
  const double t1 = kernels::now_seconds();
  const learned::ModelInput in = model_input(r, model);
  const std::vector<float> query = model.query_vector(in);
  const double t2 = kernels::now_seconds();
  const auto admitted = [&](const codegen::SuperSchedule& s) { return !r.space->admits(s); };
  // --check-recall compares ten: the walk then looks for at least ten kept schedules.
  const std::size_t walk_k = r.check_recall ? std::max<std::size_t>(k, 10) : k;
  const learned::IndexResult found = index.search(query, {walk_k, std::max(kEf, walk_k)}, admitted);
  c.schedules.assign(found.schedules.begin(),
                     found.schedules.begin() + static_cast<std::ptrdiff_t>(std::min(k, found.schedules.size())));
  c.info["scores"] = std::vector<float>(found.scores.begin(),
                                        found.scores.begin() + static_cast<std::ptrdiff_t>(c.schedules.size()));
  c.info["nodes"] = index.size();
  c.info["measured"] = c.schedules.size();
  c.info["head_evaluations"] = found.evaluations;
  c.info["ef"] = found.ef;
  c.info["searches"] = found.searches;
  c.info["discarded"] = found.discarded;
  c.info["index_seconds"] = t1 - t0;
  c.info["prepare_seconds"] = t2 - t1;
  c.info["walk_seconds"] = found.seconds;
  if (r.check_recall) {
    const learned::IndexResult exact = index.exact(query, 10, admitted);
    std::vector<codegen::SuperSchedule> top(found.schedules.begin(),
                                            found.schedules.begin() +
                                                static_cast<std::ptrdiff_t>(std::min<std::size_t>(10, found.schedules.size())));
    c.info["recall_at_10"] = learned::recall_at(top, exact.schedules);
    c.info["exact_scores"] = exact.scores;  // the ten best scores: the walk's beside them
    c.info["exact_evaluations"] = exact.evaluations;
    c.info["exact_seconds"] = exact.seconds;
  }
  r.observer->note(format("anns: %zu of %zu graph nodes kept after %llu head evaluations (ef %zu, "
                          "%zu discarded as inadmissible) in %.3f s; matrix %.3f s",
                          c.schedules.size(), index.size(),
                          static_cast<unsigned long long>(found.evaluations), found.ef,
                          found.discarded, found.seconds, t2 - t1));
  if (c.schedules.empty()) {  // no template fits this matrix: score the admissible set
    SearchChoice exact = exact_choice(r, "no node of the ANNS graph is admissible for this matrix");
    exact.info["anns"] = c.info;
    return exact;
  }
  return c;
}

}  // namespace waco::tuning
