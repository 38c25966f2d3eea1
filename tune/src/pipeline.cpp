// The tune pipeline (tune.hpp): steps 1-9 of a tune, from the tuning cache to the report.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>

#include "memory_record.hpp"
#include "pipeline.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/narrow.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/kernels/timing.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/shipped.hpp"
#include "waco/tune/calibration.hpp"
#include "waco/tune/searcher.hpp"

namespace waco::tuning {

using namespace detail;

std::vector<std::size_t> detail::candidates_that_fit(const std::vector<Candidate>& candidates,
                                                     int wanted, double budget,
                                                     double format_bytes, double output_bytes,
                                                     const SharedData& shared,
                                                     const codegen::SuperSchedule* held) {
  budget -= 2 * (format_bytes + output_bytes);  // the references, each with its own
  if (shared.output) budget -= output_bytes;    // one output for every candidate
  const auto key = [](const codegen::SuperSchedule& s) {
    return codegen::StorageCache::key(codegen::canonicalize(s));
  };
  std::set<std::string> formats;
  if (shared.formats && held) formats.insert(key(*held));
  std::vector<std::size_t> chosen;
  const std::size_t total = std::max(candidates.size(), static_cast<std::size_t>(std::max(wanted, 0)));
  for (std::size_t i = 0; i < total && chosen.size() < static_cast<std::size_t>(wanted); ++i) {
    const Candidate* c = i < candidates.size() ? &candidates[i] : nullptr;
    const std::string k = shared.formats && c && c->schedule ? key(*c->schedule) : std::string();
    const bool new_format = k.empty() || !formats.count(k);
    const double need = (shared.output ? 0.0 : output_bytes) + (new_format ? format_bytes : 0.0);
    if (need > budget && !chosen.empty()) {
      if (!c) break;  // unknown candidates all need as much
      continue;
    }
    if (!k.empty()) formats.insert(k);
    budget -= need;
    chosen.push_back(i);
  }
  if (chosen.empty()) chosen.push_back(0);
  return chosen;
}

namespace {

/// Throws kernels::Cancelled when the caller asked to stop (TuneRequest::cancel).
void check_cancel(const TuneRequest& o) {
  if (o.cancel && o.cancel())
    throw kernels::Cancelled("tune stopped at the caller's request; nothing more was stored");
}

/// A tuning cache hit: the stored report, marked as such.
TuneOutcome cached_outcome(const TuneRequest& o, const CachedDecision& hit, const TuningKey& key,
                           double t_run, TuneObserver& obs) {
  TuneOutcome out;
  out.report = hit.report;
  out.report["from_cache"] = true;
  out.report["dtype"] = std::string(kernels::dtype_name(key.dtype));  // older entries lack it
  out.report["plan_cache"] = {{"path", hit.path}, {"saved_at", hit.saved_at}, {"key", key.to_json()}};
  out.report["decided_for_file"] = out.report.value("file", std::string());
  out.report["file"] = o.file;
  out.report["output"] = nullptr;
  out.report["cached_call_s"] = now_seconds() - t_run;  // this call, reading the operand aside
  out.schedule = hit.schedule;
  out.implementation = implementation_of(out.report);
  out.verdict = out.report.value("verdict", std::string());
  out.from_cache = true;
  // An adaptive plan's decision (api/) has no "best": it measured on the application's calls.
  const nlohmann::json best = out.report.value("best", nlohmann::json());
  if (best.is_object()) out.kernel_source = best.value("kernel_source", std::string());
  obs.note("tune: from cache (" + hit.path + ", decided " + hit.saved_at + "); --refresh tunes again");
  return out;
}

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

/// `p` needs its sparse operand only; `dense` is the size tuned for. With `among`, the search
/// ranks the schedules of that short list the space admits (admitted_variants) instead of the
/// whole admissible set: the passes add their constraints without counting what they remove.
CandidateChoice choose_candidates(const TuneRequest& o, KernelKind kind, int threads, int dense,
                                  const Problem& p, const Pipeline& pipeline, const Searcher& searcher,
                                  const decltype(SearchRequest::measure)& measure,
                                  TuneObserver& obs,
                                  const std::vector<codegen::SuperSchedule>* among = nullptr,
                                  std::int64_t diagonals = -1) {
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
    const bool names_dia = std::find(pipeline.begin(), pipeline.end(), "diagonal-storage") != pipeline.end();
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
        input = learned::CostModel::load_shared(path, kind)->prepare(*p.A, &sig, p.dtype());
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
    if (ranks_by_model(o.search) &&
        std::find(pipeline.begin(), pipeline.end(), "narrow-indices") != pipeline.end()) {
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


/// Step 5b of tune, --expected-calls: what the caller's calls can pay for, from the csr time
/// just measured. Not worth it: no candidate and no confirmation are left (csr is the result).
/// Otherwise the candidates, the search's time and the side-by-side stage are cut to the budget.
std::optional<CallsBudget> apply_calls_budget(TuneRequest& o, TuneObserver& obs, std::vector<Candidate>& candidates,
                                              TuneOptions& to, const Measurement& cm,
                                              double spent_s) {
  if (o.expected_calls <= 0) return std::nullopt;
  if (cm.status != MeasureStatus::Ok) {
    obs.warning("--expected-calls ignored: the csr schedule did not run (" + cm.reason + ")");
    return std::nullopt;
  }
  CallsBudgetInput in;
  in.calls = o.expected_calls;
  in.share = o.tuning_share;
  in.csr_s = cm.median_s;
  in.spent_s = spent_s;
  // A candidate costs what the csr schedule's measurement did (its compile included when it
  // was not cached). Kernels compiled earlier cost less, new ones more (0.3-0.9 s to
  // compile on the development VMs): the search's time limit below is what holds the budget,
  // overrun by at most the candidate measured when it expires.
  in.per_candidate_s = std::max(cm.wall_s, (o.warmup + o.repeat + 2) * cm.median_s);
  in.per_confirmed_s = cm.conversion_s + (o.warmup + o.confirm_rounds + 1) * cm.median_s;
  in.confirm_top = std::max(1, o.confirm);
  const CallsBudget budget = plan_calls_budget(in);
  if (!budget.worth_it) {
    candidates.clear();
    o.confirm = 0;
    obs.note("tune: " + budget.reason + "; the result is csr");
    return budget;
  }
  if (static_cast<std::int64_t>(candidates.size()) > budget.candidates)
    candidates.resize(static_cast<std::size_t>(budget.candidates));
  to.budget_seconds = to.budget_seconds > 0 ? std::min(to.budget_seconds, budget.search_s)
                                            : budget.search_s;
  if (o.confirm > 0) o.confirm = std::min(o.confirm, budget.confirm_top);
  return budget;
}


/// Which of `candidates` (at most `wanted`; unknown ones past the list count as a format each)
/// fit in one side-by-side child beside the two references, the csr schedule `held` among them
/// (candidates_that_fit): at most a quarter of the memory for them; says so when that is fewer.
std::vector<std::size_t> side_by_side_fit(const Problem& p, const std::vector<Candidate>& candidates,
                                          int wanted, TuneObserver& obs,
                                          const codegen::SuperSchedule* held = nullptr) {
  const double value = static_cast<double>(kernels::dtype_size(p.dtype()));
  // A format: a value, a coordinate and a position or some padding a nonzero (12 bytes in f32).
  const double format_bytes = (8.0 + value) * static_cast<double>(p.nnz());
  const double output_bytes = value * static_cast<double>(p.output_size());
  std::vector<std::size_t> chosen = candidates_that_fit(
      candidates, wanted, physical_memory_bytes() / 4, format_bytes, output_bytes, shared_data(p), held);
  const int top = static_cast<int>(chosen.size());
  if (top < wanted)
    obs.note(format("tune: only %d of %d side by side: more would not fit in a quarter of this "
                    "machine's memory", top, wanted));
  else if (!chosen.empty() && chosen.back() + 1 != chosen.size())
    obs.note(format("tune: %d of the first %zu side by side: the rest would not fit in a "
                    "quarter of this machine's memory beside them", top, chosen.back() + 1));
  return chosen;
}

/// Step 7 of tune: the search's best candidates and both references measured again side by
/// side in one child (interleaved rounds). The winner and the speedups come from these
/// timings: two separate measurements of one kernel drift by up to 1.5x on a shared machine,
/// more than the gap between the top candidates. Not stored (see confirm_best).
Confirmation confirm_top(const TuneRequest& o, TuneObserver& obs, const Problem& p, Runner& measurer,
                         const TuneResult& r, const TuneEntry& csr_schedule,
                         const TuneEntry& csr_baseline, const std::string& shortcut) {
  const std::int64_t ok = r.status_counts.at(MeasureStatus::Ok);  // r.best: at least one
  const int top = static_cast<int>(side_by_side_fit(p, {}, o.confirm, obs).size());
  obs.note(format("tune: measuring the best %lld side by side with %s (%d rounds)",
                  static_cast<long long>(std::min<std::int64_t>(top, ok)), shortcut.c_str(),
                  o.confirm_rounds));
  // The csr-like schedules of the search (the csr schedule with any chunk and thread count):
  // the fastest of them is always nominated, so that the winner is never slower than it.
  const codegen::SuperSchedule csr_shape = csr_schedule.candidate.schedule.value();
  ConfirmOptions co{top, o.confirm_rounds, [csr_shape](const Candidate& c) {
                      if (!c.schedule) return false;
                      codegen::SuperSchedule s = *c.schedule;
                      s.threads = csr_shape.threads;
                      s.chunk = csr_shape.chunk;
                      return s == csr_shape;
                    }, {}};
  return confirm_best(measurer, r, {csr_schedule.candidate, csr_baseline.candidate}, co);
}


Measured measure_and_confirm(const TuneRun& t, const std::vector<Candidate>& candidates,
                             TuneOptions& to, TuneEntry& csr_schedule, TuneEntry& csr_baseline,
                             bool references_first, bool not_worth_it,
                             std::optional<double> csr_s, std::string& busy) {
  const TuneRequest& o = t.o;
  const std::string kernel(kernel_name(t.kind));
  Measured m;
  if (t.side_by_side && !not_worth_it) {
    const int wanted = static_cast<int>(std::min<std::size_t>(
        candidates.size(), o.confirm_given ? static_cast<std::size_t>(std::max(1, o.confirm))
                                           : candidates.size()));
    if (wanted == 0) return m;
    const codegen::SuperSchedule* held =
        csr_schedule.candidate.schedule ? &*csr_schedule.candidate.schedule : nullptr;
    std::vector<std::size_t> chosen = side_by_side_fit(t.p, candidates, wanted, t.obs, held);
    const int top = static_cast<int>(chosen.size());
    if (chosen.back() + 1 == chosen.size()) chosen.clear();  // simply the first `top`
    t.obs.note(format("tune: %s %s search: the model's best %d measured side by side with %s "
                      "(%d rounds)",
                      kernel.c_str(), t.search.c_str(), top, t.shortcut.c_str(), o.confirm_rounds));
    RankedConfirmation rc = confirm_ranked(
        t.measurer, candidates, {csr_schedule.candidate, csr_baseline.candidate},
        ConfirmOptions{top, o.confirm_rounds, {}, std::move(chosen)}, o.abandon_factor);
    m.result = std::move(rc.result);
    m.confirmation = std::move(rc.confirmation);
    busy = disturbed_warning(*m.confirmation);
    if (!busy.empty()) t.obs.warning(busy);
  } else if (!t.side_by_side) {
    if (!not_worth_it) {
      t.obs.note(format("tune: %s %s search, %zu candidates, results in %s", kernel.c_str(),
                        t.search.c_str(), candidates.size(), t.db_path.c_str()));
      TuneObserver* obs = &t.obs;
      to.progress = [obs, csr_s](const TuneProgress& pr) { obs->progress(pr, csr_s); };
    }
    m.result = run_candidates(t.db, t.key, t.measurer, candidates, to);
    const TuneResult& r = m.result;
    if (o.confirm > 0 && r.best && r.stopped_by != "interrupted")
      m.confirmation =
          confirm_top(o, t.obs, t.p, t.measurer, r, csr_schedule, csr_baseline, t.shortcut);
  }
  if (t.memory) t.memory->stage("selection", &t.measurer);
  // 7b. Select on one run, decide on another: a gain in the selection run is timed again in
  // fresh side-by-side children, and only their rounds decide (FreshOptions says why). A
  // selection without a gain needs no second opinion: the selection favours its winner.
  const Decision selected = m.confirmation && m.result.stopped_by != "interrupted"
                                ? decide(m, csr_schedule, csr_baseline, t.shortcut, not_worth_it, o.rule)
                                : Decision{};
  if (selected.judged &&
      (o.decide_always || selected.judged->ratio_median <= 1.0 - o.rule.min_gain)) {
    t.obs.note(format("tune: deciding on fresh runs: the best %d and %s side by side again (%d "
                      "runs of %d rounds)",
                      o.decide_leaders, t.shortcut.c_str(), o.decide_runs, o.decide_rounds));
    m.fresh = time_fresh(t.measurer, m.result, *m.confirmation,
                         {csr_schedule.candidate, csr_baseline.candidate},
                         FreshOptions{o.decide_leaders, o.decide_rounds, o.decide_runs});
    if (!m.fresh->busy.empty()) t.obs.warning(m.fresh->busy);
  }
  // A model search that did not measure the references first: their only timings are the
  // side-by-side ones.
  if (t.side_by_side && !references_first && m.confirmation) {
    csr_schedule.measurement = m.confirmation->references[0];
    csr_baseline.measurement = m.confirmation->references[1];
  }
  return m;
}


/// The model a ranking search of `o` uses (calibration.hpp), written into o.model so that every
/// search loads that one; a calibration that cannot be used is a warning.
ModelChoice resolve_model(TuneRequest& o, TuneObserver& obs) {
  ModelChoice c = choose_model(o.model, o.kind, o.dtype, o.generated.compiler, o.use_calibration);
  if (!c.warning.empty()) obs.warning(c.warning);
  obs.note("tune: ranking with the " + c.note);
  o.model = c.path;
  return c;
}

}  // namespace

void check_request(const TuneRequest& o) {
  find_searcher(o.search);  // a typo fails before any work
  // A model that needs LibTorch: TorchRequired (the lite CLI runs waco-hybrid-torch instead).
  if (ranks_with_model(o)) learned::CostModel::check_backend(
      learned::model_path_or_default(o.model, o.kind, o.dtype));
  parse_pipeline(o.passes);
  // Made-up timings must not reach the user's results database or tuning cache.
  if (!o.runner.empty() && o.runner != "isolated" &&
      (o.db.empty() || (o.plan_cache.empty() && !o.no_plan_cache)))
    throw Error("a scripted runner needs a results database and a tuning cache folder of its own "
                "(or none)", "give --db and --plan-cache DIR (or --no-plan-cache): not the user's defaults");
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

std::string implementation_of(const nlohmann::json& report) {
  const nlohmann::json& i = report.is_object() ? report.value("implementation", nlohmann::json())
                                               : nlohmann::json();
  return i.is_string() && i.get<std::string>() != codegen::kGeneratedImplementation ? i.get<std::string>() : "";
}

bool ranks_with_model(const TuneRequest& o) { return o.schedules.empty() && ranks_by_model(o.search); }

TuneOutcome run(const TuneOperand& operand, const TuneRequest& request, TuneObserver& obs) {
  const double t_run = now_seconds();
  const double t_start = request.started_at > 0 ? request.started_at : t_run;
  WACO_ASSERT((operand.matrix != nullptr) != (operand.tensor != nullptr),
              "tuning::run needs a matrix or a tensor");
  check_request(request);
  // The memory record (report "memory"): the first stage is what the caller's reading of the
  // operand left (the CLI: the file parsed and canonicalized).
  MemoryRecord memory(request.reset_peak_per_stage);
  memory.stage("operand");
  // --confirm 0 with a model search: the model decides alone. Its best-predicted schedule is the
  // only candidate, and one side-by-side run against the csr references guards it (a tuned
  // kernel is never slower than csr).
  TuneRequest o = request;
  o.params.dtype = o.dtype;  // the tile model's value size (tile-window) is the kernels'
  const KernelKind kind = o.kind;
  if (needs_tensor(kind) != (operand.tensor != nullptr))
    throw Error(std::string(kernel_name(kind)) + " needs " +
                    (needs_tensor(kind) ? "a 3-D tensor" : "a matrix"),
                needs_tensor(kind) ? "give a FROSTT .tns file" : "give a Matrix Market file");
  const bool model_search = ranks_with_model(o);
  const bool model_alone = model_search && o.confirm == 0;
  if (model_alone) {
    o.budget = 1;
    o.confirm = 1;
  }
  // A model's nominees go side by side at once (confirm_ranked): the model already ranked them,
  // and one child that prepares, screens and times them all costs a fraction of measuring each
  // in its own child first (about 8 ms each for a microsecond SpMV kernel).
  const bool side_by_side = model_search && !o.measure_first;
  const Searcher& searcher = find_searcher(o.search);
  const Pipeline pipeline = parse_pipeline(o.passes);
  const int threads = o.threads > 0 ? o.threads : available_cpus();
  const int dense = o.dense > 0 ? o.dense : default_dense_size(kind);
  // No database for a library call that names none: an in-memory one (nothing is kept).
  const std::string db_path = !o.db.empty() ? o.db : o.db_default ? default_results_path() : ":memory:";

  // 1. The tuning cache: a decision for this matrix, kernel, dense size, threads and machine is
  // returned without searching (space searches only: a --schedules list is not a decision).
  const MatrixRecord rec = operand.matrix
                               ? matrix_record(*operand.matrix, o.file, operand.fingerprint)
                               : matrix_record(*operand.tensor, o.file, operand.fingerprint);
  // The results database opens first: an unusable database is an error whether or not the
  // tuning cache holds a decision (the user asked for results there).
  ResultsDb db(db_path);
  db.record_matrix(rec);
  std::optional<TuningCache> plan_cache;
  TuningKey tuning_key;
  if (o.schedules.empty() && !o.no_plan_cache) {
    plan_cache.emplace(o.plan_cache);
    const std::int64_t dense_key = kind == KernelKind::SpMV ? 1 : dense;
    tuning_key = TuningKey{rec.fingerprint, kind, static_cast<int>(dense_key), threads,
                           machine_identity(o.generated.compiler), o.dtype};
    if (!o.refresh) {
      const CacheLookup found = plan_cache->find(tuning_key);
      if (found.hit) return cached_outcome(o, *found.hit, tuning_key, t_run, obs);
      if (!found.problem.empty()) obs.warning(found.problem);
    }
  }
  // The model to rank with (not needed for a cached decision, which says what it was made with).
  const std::optional<ModelChoice> model =
      model_search ? std::optional(resolve_model(o, obs)) : std::nullopt;

  memory.stage("fingerprint");
  check_cancel(o);
  // The dense operands (not needed for a cache hit) and the reference.
  const DenseOperands operands =
      make_dense_operands(kind, operand.matrix, operand.tensor, dense, o.seed, o.dtype);
  const Problem p = make_problem(kind, operand.matrix, operand.tensor, operands);
  std::optional<Reference> ref(compute_reference(p));
  memory.stage("dense_and_reference");
  check_cancel(o);

  // 2. The measurement worker (spawned: heuristics/README.md, "The measurement processes").
  MeasureOptions mo;
  mo.warmup = o.warmup;
  mo.repeats = o.repeat;
  mo.threads = threads;
  mo.tolerance = o.tolerance;
  mo.prepare_timeout_s = o.compile_timeout;
  mo.run_timeout_s = o.timeout;
  mo.generated = o.generated;
  mo.cancel = o.cancel;
  const std::unique_ptr<Runner> runner = make_runner(o.runner, p, *ref, mo);
  Runner& measurer = *runner;
  // The worker keeps its own copy of the reference; none is needed here (two doubles an output
  // entry: 1 GiB for SpMM with J = 16 on a 4M-row matrix).
  ref.reset();
  memory.stage("worker_load", &measurer);

  // 3. The measurement key (the database was opened before the tuning cache was asked).
  const MeasurementKey key{rec.fingerprint, kind, static_cast<int>(p.dense_size()), o.repeat,
                           o.dtype};
  const nlohmann::json context = context_json(threads, "none");

  // 4. The candidates.
  // Searches that learn from measurements (bandit) measure through tune's database and worker;
  // the candidates they return are then reused, not measured again.
  const auto measure_one = [&](const codegen::SuperSchedule& s) -> std::optional<double> {
    TuneOptions single;
    single.context = context;
    single.stop = o.stop;
    const TuneEntry e = measure_or_reuse(db, key, measurer, Candidate::generated(s), single);
    if (e.measurement.status != MeasureStatus::Ok) return std::nullopt;
    return e.measurement.median_s;
  };
  CandidateChoice choice =
      choose_candidates(o, kind, threads, dense, p, pipeline, searcher, measure_one, obs, nullptr,
                        operand.diagonals);
  std::vector<Candidate>& candidates = choice.candidates;
  // The dia baseline, a rule's nominee (heuristics/diagonal.hpp), after the search's: not when
  // the model decides alone (its one nominee is the model's).
  if (choice.dia.admitted && !model_alone) {
    candidates.push_back(Candidate::baseline(codegen::kDiaBaseline));
    obs.note("tune: the dia baseline (diagonal storage) measured beside the nominees: " + choice.dia.note);
  }
  memory.stage("choice", &measurer);
  check_cancel(o);
  const nlohmann::json cache_json = tile_cache_json(o.params, threads);
  const TuneRun run{o, obs, kind, p, measurer, db, key, needs_tensor(kind) ? "csf" : "csr",
                    choice.search, side_by_side, db_path, &memory};

  // 5. The references: the csr schedule and the baseline implementation, measured alike.
  // Checked before the search: a busy machine makes every multi-threaded timing wait for
  // descheduled threads. A 50 ms sample (five 10 ms ticks a CPU) tells a machine whose other
  // processes keep a CPU busy; the default 0.2 s was 40% of a model-guided tune of a small
  // matrix (0.52 s in all on bcsstk09).
  // A model search's side-by-side run tells it from its own timed runs instead (see
  // disturbed_warning), without the 50 ms wait, a third of such a tune on a small matrix.
  std::string busy = side_by_side || !measurer.times_this_machine()
                         ? std::string()
                         : busy_machine_warning(threads, 0.05);
  if (!busy.empty()) obs.warning(busy);
  TuneOptions to;
  to.budget_seconds = o.budget_seconds;
  to.retry_failed = o.retry_failed;
  to.stop = o.stop;
  to.context = context;
  // A model search's side-by-side run times both references with its nominees: measured alone
  // first only when --expected-calls needs the csr time to plan (or there is no nominee), they
  // would cost two more children (a sixth of such a tune on a small matrix).
  const bool references_first = !side_by_side || o.expected_calls > 0 || candidates.empty();
  TuneEntry csr_schedule{Candidate::generated(*codegen::schedule_shortcut(kind, run.shortcut)),
                         {}, false};
  TuneEntry csr_baseline{Candidate::baseline(run.shortcut), {}, false};
  if (references_first) {
    csr_schedule = measure_or_reuse(db, key, measurer, csr_schedule.candidate, to);
    csr_baseline = measure_or_reuse(db, key, measurer, csr_baseline.candidate, to);
  }
  const std::optional<double> csr_s = csr_schedule.measurement.status == MeasureStatus::Ok
                                          ? std::optional<double>(csr_schedule.measurement.median_s)
                                          : std::nullopt;
  to.race_factor = o.abandon_factor;
  to.race_reference_s = csr_s.value_or(0.0);
  if (csr_baseline.measurement.status == MeasureStatus::Ok) {  // bursts of host noise: see RaceBound
    to.race_check = run.shortcut;
    to.race_check_s = csr_baseline.measurement.median_s;
  }

  // 5b. --expected-calls: what the caller's calls can pay for, from the csr time just measured.
  const std::optional<CallsBudget> calls_budget =
      apply_calls_budget(o, obs, candidates, to, csr_schedule.measurement, now_seconds() - t_start);
  const bool not_worth_it = calls_budget && !calls_budget->worth_it;
  memory.stage("references", &measurer);

  // 6-7. The search's measurements and the side-by-side confirmation; the decision.
  const Measured measured = measure_and_confirm(run, candidates, to, csr_schedule, csr_baseline,
                                                references_first, not_worth_it, csr_s, busy);
  check_cancel(o);  // nothing is cached after a request to stop
  const TuneResult& r = measured.result;
  const Decision decision = decide(measured, csr_schedule, csr_baseline, run.shortcut, not_worth_it,
                                   o.rule);
  const TuneEntry* best = decision.best;
  memory.stage("decide", &measurer);

  // 8. The report: one JSON object, printed as it is (--json) or as text read off it (below).
  ReportInput in;
  in.rec = &rec;
  in.threads = threads;
  in.choice = &choice;
  in.measured = &measured;
  in.decision = &decision;
  in.csr_schedule = &csr_schedule;
  in.csr_baseline = &csr_baseline;
  in.calls_budget = calls_budget;
  in.busy = busy;
  in.cache = cache_json;
  in.context = context;
  in.model_alone = model_alone;
  in.t_start = t_start;
  nlohmann::json report = tune_report(run, in);
  report["model"] = model ? model->to_json() : nlohmann::json();

  // 9. The decision into the tuning cache: a verdict from side-by-side timings only (not an
  // interrupted or unconfirmed run, nor a not-worth-it answer, which depends on the calls; a
  // search that --expected-calls cut short and that found a winner is a decision like another).
  // The result's schedule: the csr schedule's when the result is a hand-written baseline (the
  // csr reference, or the dia nominee; the report's "implementation" says which kernel serves
  // it).
  const bool baseline_result = best && !best->candidate.is_generated();
  const TuneEntry* scheduled = baseline_result ? &csr_schedule : best;
  report["implementation"] = baseline_result ? nlohmann::json(best->candidate.implementation)
                             : best          ? nlohmann::json(codegen::kGeneratedImplementation)
                                             : nlohmann::json(nullptr);
  if (plan_cache && (decision.verdict == "gain" || decision.verdict == "no-gain") && scheduled &&
      scheduled->candidate.schedule && r.stopped_by != "interrupted") {
    try {
      report["plan_cache"] = {
          {"path", plan_cache->store(tuning_key, *scheduled->candidate.schedule, report)}};
    } catch (const Error& e) {
      obs.warning(std::string("the decision was not cached: ") + e.what());
    }
  }
  memory.stage("report");
  report["memory"] = memory.to_json();
  TuneOutcome out;
  out.report = std::move(report);
  if (scheduled && scheduled->candidate.schedule) out.schedule = *scheduled->candidate.schedule;
  if (baseline_result) out.implementation = best->candidate.implementation;
  out.verdict = decision.verdict;
  out.interrupted = r.stopped_by == "interrupted";
  if (best) out.kernel_source = best->measurement.kernel_source;
  return out;
}

}  // namespace waco::tuning
