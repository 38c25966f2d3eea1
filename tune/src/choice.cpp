// Step 4 of a tune (pipeline.hpp): the candidates to measure, from a list or a search of the
// admissible set (choose_candidates), the model the search ranks with (resolve_model), the
// short list's variants (kernel_variants, admitted_variants), and the choice alone, without
// measuring (nominate: an adaptive plan's).
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <unordered_set>

#include "pipeline.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/heuristics/narrow.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/shipped.hpp"
#include "waco/tune/calibration.hpp"
#include "waco/tune/searcher.hpp"

namespace waco::tuning {

using namespace detail;

namespace {

/// The split variants of kernel_variants: s with `threads` threads and each combination of split
/// sizes its kernel takes at run time (s's chunk kept).
std::vector<codegen::SuperSchedule> split_variants(const codegen::SuperSchedule& s, int threads,
                                                   const std::vector<std::vector<int>>& split_choices,
                                                   bool vary_splits) {
  // Per variable the sizes to try: the listed one where it is not split or its size is a
  // compile-time constant of the source (codegen::split_is_constant: small U blocks, register
  // blocks), else its powers of two from a quarter to four times it that split_choices holds
  // and that stay run-time sizes (checked below).
  const codegen::KernelSpec& spec = codegen::kernel_spec(s.kind);
  std::vector<std::vector<int>> sizes(s.split.size());
  for (std::size_t v = 0; v < s.split.size(); ++v) {
    sizes[v] = {s.split[v]};
    if (!vary_splits || s.split[v] <= 1 || v >= split_choices.size() ||
        codegen::split_is_constant(s, spec.vars[v]))
      continue;
    const std::vector<int>& allowed = split_choices[v];
    sizes[v].clear();  // in increasing order, the listed size among them
    for (const int size : {s.split[v] >> 2, s.split[v] >> 1, s.split[v], s.split[v] << 1, s.split[v] << 2})
      if (size == s.split[v] ||
          (size > 1 && std::find(allowed.begin(), allowed.end(), size) != allowed.end()))
        sizes[v].push_back(size);
  }
  std::vector<codegen::SuperSchedule> out;
  codegen::SuperSchedule v = s;
  v.threads = threads;
  std::vector<std::size_t> at(sizes.size(), 0);
  for (;;) {
    for (std::size_t k = 0; k < sizes.size(); ++k) v.split[k] = sizes[k][at[k]];
    bool same_kernel = true;  // s's own sizes are its kernel's: only other sizes are asked
    for (std::size_t k = 0; k < sizes.size() && same_kernel && v.split != s.split; ++k)
      same_kernel = codegen::split_is_constant(v, spec.vars[k]) == codegen::split_is_constant(s, spec.vars[k]);
    if (same_kernel) out.push_back(v);
    std::size_t k = 0;
    while (k < at.size() && ++at[k] == sizes[k].size()) at[k++] = 0;
    if (k == at.size()) break;
  }
  return out;
}

/// The chunks of s's kind that one kernel serves: static alone, or every dynamic chunk.
std::vector<int> chunks_like(const codegen::SuperSchedule& s) {
  std::vector<int> out;
  for (const int chunk : heuristics::chunk_choices())
    if ((chunk == codegen::kStaticChunk) == (s.chunk == codegen::kStaticChunk)) out.push_back(chunk);
  return out;
}

}  // namespace

std::vector<codegen::SuperSchedule> kernel_variants(const codegen::SuperSchedule& s, int threads,
                                                    const std::vector<std::vector<int>>& split_choices,
                                                    bool vary_splits) {
  const std::vector<int> chunks = chunks_like(s);
  std::vector<codegen::SuperSchedule> out;
  for (codegen::SuperSchedule& v : split_variants(s, threads, split_choices, vary_splits))
    for (const int chunk : chunks) {
      v.chunk = chunk;
      out.push_back(v);
    }
  return out;
}

namespace {

/// The schedules of `listed` that `space` admits, in every variant its kernel serves
/// (kernel_variants), canonical, without repeats: each split variant's chunks are one check
/// (Space::admits_each_chunk).
std::vector<codegen::SuperSchedule> admitted_variants(const Space& space,
                                                      const std::vector<codegen::SuperSchedule>& listed,
                                                      int threads, bool vary_splits) {
  std::vector<codegen::SuperSchedule> out;
  std::unordered_set<codegen::SuperSchedule> seen;
  std::vector<std::vector<int>> split_choices;
  for (std::size_t v = 0; v < space.spec().vars.size(); ++v) split_choices.push_back(space.split_choices(v));
  for (const codegen::SuperSchedule& s : listed) {
    if (s.kind != space.kind()) continue;
    const std::vector<int> chunks = chunks_like(s);
    for (const codegen::SuperSchedule& v : split_variants(s, threads, split_choices, vary_splits)) {
      const std::vector<bool> admitted = space.admits_each_chunk(v, chunks);
      if (std::find(admitted.begin(), admitted.end(), true) == admitted.end()) continue;
      codegen::SuperSchedule c = codegen::canonicalize(v);
      for (std::size_t k = 0; k < chunks.size(); ++k) {
        if (!admitted[k]) continue;
        c.chunk = chunks[k];
        if (seen.insert(c).second) out.push_back(c);
      }
    }
  }
  return out;
}

}  // namespace

CandidateChoice detail::choose_candidates(const TuneRequest& o, KernelKind kind, int threads, int dense,
                                  const Problem& p, const Pipeline& pipeline, const Searcher& searcher,
                                  const decltype(SearchRequest::measure)& measure,
                                  TuneObserver& obs,
                                  const std::vector<codegen::SuperSchedule>* among,
                                  std::int64_t diagonals) {
  CandidateChoice c;
  c.search = o.search;
  std::vector<Candidate>& candidates = c.candidates;
  nlohmann::json& space_json = c.space;
  nlohmann::json& search_info = c.search_info;
  std::uint64_t admissible = 0;
  if (!o.schedules.empty()) {
    c.search = "list";
    for (const auto& sch : codegen::read_schedule_list(kind, o.schedules))
      candidates.push_back(Candidate::generated(sch));
    if (o.budget > 0 && candidates.size() > o.budget) candidates.resize(o.budget);
  } else {
    const bool names_dia = names_pass(pipeline, "diagonal-storage");
    SpaceOptions so;
    so.cores = threads;
    so.max_padding = o.generated.storage.max_padding;
    so.diagonals = diagonals;
    so.count_diagonals = names_dia;
    const double s0 = now_seconds();
    // A model's search: its input (the matrix's features) is prepared beside the prefix counts
    // (Space::for_operand: one OpenMP team of two threads), on the threads the tune may use.
    // The model is the one the search loads: learned::model_path_or_default of o.model.
    std::optional<learned::ModelInput> input;
    std::function<void(const signature::LocalitySignature&)> beside;
    if ((among != nullptr || searcher.by_model) && p.A != nullptr && threads > 1) {
      beside = [&](const signature::LocalitySignature& sig) {
        const std::string path = learned::model_path_or_default(o.model, kind, p.dtype());
        input = learned::CostModel::load_shared(path, kind)->prepare(*p.A, &sig, p.dtype(), dense);
      };
    }
    Space space = Space::for_operand(kind, p.A, p.T, kind == KernelKind::SpMV ? 1 : dense, so, beside);
    // What every search is asked with; the rest is the search's own.
    const auto request = [&](std::uint64_t admissible_count) {
      SearchRequest req;
      req.space = &space;
      req.admissible = admissible_count;
      req.problem = &p;
      req.dense = kind == KernelKind::SpMV ? 1 : dense;
      req.budget = o.budget;
      req.per_structure = o.per_structure;
      req.model = o.model;
      req.observer = &obs;
      req.input = input ? &*input : nullptr;
      return req;
    };
    if (names_dia) c.dia = dia_admission(space);
    if (among) {
      add_pipeline_constraints(space, pipeline, o.params);
      const std::vector<codegen::SuperSchedule> listed =
          admitted_variants(space, *among, threads, p.nnz() >= o.shortlist_splits_min_nnz);
      space_json = {{"shortlist", among->size()},
                    {"admissible_count", listed.size()},
                    {"pipeline", print_pipeline(pipeline)}};
      if (names_dia) space_json["dia"] = {{"admitted", c.dia.admitted}, {"note", c.dia.note}};
      SearchChoice choice;
      if (!listed.empty()) {  // none admitted: no nominee
        SearchRequest req = request(listed.size());
        req.among = &listed;
        choice = search_model(req);  // the short list is the model's to rank
      }
      c.search = "model";
      search_info = std::move(choice.info);
      space_json["seconds"] = now_seconds() - s0;
      for (const codegen::SuperSchedule& s : choice.schedules)
        candidates.push_back(Candidate::generated(s));
      return c;
    }
    const bool legality_first = !pipeline.empty() && pipeline.front() == "legality";
    const std::uint64_t legal_alone = legality_first ? 0 : legal_count(space, o.params);
    const PipelineResult pr = run_pipeline(space, pipeline, o.params);
    const std::uint64_t legal = legality_first ? pr.passes.front().out : legal_alone;
    admissible = pr.final_count;
    nlohmann::json passes = nlohmann::json::array();
    for (const PassStats& s : pr.passes) passes.push_back(s.to_json());
    space_json = {{"full_count", pr.initial_count},
                  {"legal_count", legal},
                  {"admissible_count", admissible},
                  {"pipeline", print_pipeline(pipeline)},
                  {"passes", passes}};
    if (admissible == 0)
      throw Error("the pipeline '" + print_pipeline(pipeline) + "' leaves no admissible schedule",
                  "use fewer passes (--passes), e.g. --passes legality");
    SearchRequest req = request(admissible);
    req.budget_seconds = o.budget_seconds;
    req.seed = o.seed;
    req.index = o.index;
    req.check_recall = o.check_recall;
    req.measure = measure;
    SearchChoice choice = searcher.choose(req);
    std::vector<codegen::SuperSchedule>& chosen = choice.schedules;
    search_info = std::move(choice.info);
    // The narrow-indices pass admits narrow twins of the model's nominees (heuristics/narrow.hpp):
    // each goes right after its nominee, measured beside it like any nominee.
    if (ranks_by_model(o.search) && names_pass(pipeline, "narrow-indices")) {
      NarrowTwins twins = with_narrow_twins(space, chosen);
      space_json["narrow_twins"] = {{"added", twins.added},
                                    {"note", twins.note.empty() ? nlohmann::json() : nlohmann::json(twins.note)}};
      if (twins.added > 0)
        obs.note(format("tune: %d narrow (16-bit coordinate) twin%s of the nominees measured beside them",
                        twins.added, twins.added == 1 ? "" : "s"));
      chosen = std::move(twins.schedules);
    }
    if (names_dia) space_json["dia"] = {{"admitted", c.dia.admitted}, {"note", c.dia.note}};
    space_json["seconds"] = now_seconds() - s0;
    candidates.reserve(chosen.size());
    for (const codegen::SuperSchedule& s : chosen) candidates.push_back(Candidate::generated(s));
  }

  return c;
}

ModelChoice detail::resolve_model(TuneRequest& o, TuneObserver& obs) {
  ModelChoice c = choose_model(o.model, o.kind, o.dtype, o.generated.compiler,
                               o.use_calibration, {}, o.dense);
  if (!c.warning.empty()) obs.warning(c.warning);
  obs.note("tune: ranking with the " + c.note);
  o.model = c.path;
  return c;
}

Nomination nominate(const TuneOperand& operand, const TuneRequest& request, std::size_t count,
                     TuneObserver& obs, const std::vector<codegen::SuperSchedule>* among) {
  WACO_ASSERT((operand.matrix != nullptr) != (operand.tensor != nullptr),
              "tuning::nominate needs a matrix or a tensor");
  const double t0 = now_seconds();
  TuneRequest o = request;
  o.params.dtype = o.dtype;  // the tile model's value size (tile-window) is the kernels'
  o.budget = count;
  WACO_ASSERT(ranks_with_model(o), "tuning::nominate needs a search that ranks with the model");
  check_request(o);
  const ModelChoice model = resolve_model(o, obs);
  const int threads = o.threads > 0 ? o.threads : available_cpus();
  const int dense = o.dense > 0 ? o.dense : default_dense_size(o.kind);
  Problem p;  // the sparse operand alone: a search by the model needs no dense operand
  p.kind = o.kind;
  p.A = operand.matrix;
  p.T = operand.tensor;
  p.value_type = o.dtype;  // the model of the value type
  CandidateChoice c = choose_candidates(o, o.kind, threads, dense, p, parse_pipeline(o.passes),
                                        find_searcher(o.search), {}, obs, among, operand.diagonals);
  Nomination n;
  for (const Candidate& cand : c.candidates) n.schedules.push_back(*cand.schedule);
  n.info = {{"space", c.space}, {"search", c.search}, {"search_info", c.search_info},
            {"model", model.to_json()}};
  n.seconds = now_seconds() - t0;
  return n;
}

}  // namespace waco::tuning
