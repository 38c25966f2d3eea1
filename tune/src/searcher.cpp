#include "waco/tune/searcher.hpp"

#include "waco/kernels/error.hpp"
#include "waco/learned/cost_model.hpp"

namespace waco::tuning {

const std::vector<Searcher>& searchers() {
  static const std::vector<Searcher> all = {
#define WACO_SEARCHER(name, model, summary) Searcher{#name, model, summary, &search_##name},
#include "waco/tune/searchers.def"
#undef WACO_SEARCHER
  };
  return all;
}

std::vector<std::string> searcher_names() {
  std::vector<std::string> n;
  for (const Searcher& s : searchers()) n.push_back(s.name);
  return n;
}

std::uint64_t default_model_budget(kernels::KernelKind kind) {
  return kind == kernels::KernelKind::MTTKRP ? 40 : 20;
}

std::uint64_t model_budget(const SearchRequest& r) {
  return r.budget > 0 ? r.budget : default_model_budget(r.problem->kind);
}

const Searcher& find_searcher(const std::string& name) {
  for (const Searcher& s : searchers())
    if (s.name == name) return s;
  std::string known;
  for (const Searcher& s : searchers()) known += (known.empty() ? "" : ", ") + s.name;
  throw kernels::Error("unknown search '" + name + "'", "use one of: " + known);
}

bool ranks_by_model(const std::string& name) {
  for (const Searcher& s : searchers())
    if (s.name == name) return s.by_model;
  return false;
}

learned::ModelInput model_input(const SearchRequest& r, const learned::CostModel& model) {
  if (r.input != nullptr) return *r.input;
  if (r.problem->A == nullptr) return model.prepare(*r.problem->T, r.problem->dtype(), r.dense);
  const heuristics::MatrixFacts* facts = r.space->facts();
  return model.prepare(*r.problem->A, facts && facts->has_signature ? &facts->signature : nullptr,
                       r.problem->dtype(), r.dense);
}

}  // namespace waco::tuning
