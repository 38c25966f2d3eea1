// The searches of `tune`: which admissible schedules to measure. A search is one file
// (search_<name>.cpp defining search_<name>) plus one line in searchers.def; `--search` choices
// and help come from the registry. (A schedule list, --schedules, bypasses the space.)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/tune/observer.hpp"

namespace waco::learned {
class CostModel;
class ModelInput;
}  // namespace waco::learned

namespace waco::tuning {

/// What a search may use.
struct SearchRequest {
  const heuristics::Space* space = nullptr;  ///< the admissible set (passes applied)
  std::uint64_t admissible = 0;              ///< space->count(), or among->size()
  /// A short list to rank instead of the whole admissible set (schedules the space admits):
  /// an adaptive plan's shipped kernels (tuning::nominate). Only the model search takes one.
  const std::vector<codegen::SuperSchedule>* among = nullptr;
  /// The operands: the sparse one, and the dense ones when the caller measures (an adaptive
  /// plan's nomination has none: use `dense`, not problem->dense_size()).
  const kernels::Problem* problem = nullptr;
  std::int64_t dense = 1;                    ///< the dense size tuned for (1 for SpMV)
  std::uint64_t budget = 0;                  ///< --budget (0: the search's default)
  int per_structure = 0;                     ///< TuneRequest::per_structure (model search)
  double budget_seconds = 0.0;               ///< --budget-seconds (0: none)
  std::uint64_t seed = 1;
  std::string model;                         ///< --model (empty: the shipped model)
  std::string index;                         ///< --index (empty: the user cache)
  bool check_recall = false;                 ///< --check-recall (anns: recall against exact)
  TuneObserver* observer = nullptr;          ///< notes and warnings (never null in a search)
  /// Measures one schedule (verified, stored in tune's database, reused by tune afterwards) and
  /// returns its median seconds, nullopt when it failed; for searches that learn from
  /// measurements (bandit). Empty when the caller cannot measure.
  std::function<std::optional<double>(const codegen::SuperSchedule&)> measure;
  /// The input of the request's model (`model`, or the shipped one) for the operand, prepared
  /// beside the space's prefix counts (tune's choice on two threads or more); else null.
  const learned::ModelInput* input = nullptr;
};

/// The model's input for the request's operand: `r.input` when there is one, else prepared now
/// (a matrix's with the space's signature, not computed again).
learned::ModelInput model_input(const SearchRequest& r, const learned::CostModel& model);

/// The search's candidates, in the order to measure them, and what it reports about itself
/// (in tune --json as "search_info").
struct SearchChoice {
  std::vector<codegen::SuperSchedule> schedules;
  nlohmann::json info = nlohmann::json::object();
};

struct Searcher {
  std::string name;
  bool by_model = false;  ///< its list is a cost model's order, best first
  std::string summary;    ///< one line for --help
  SearchChoice (*choose)(const SearchRequest&);
};

#define WACO_SEARCHER(name, model, summary) SearchChoice search_##name(const SearchRequest& r);
#include "waco/tune/searchers.def"
#undef WACO_SEARCHER

/// How many of the model's best a model search (model, anns) measures when the request gives no
/// budget: 20, and 40 for MTTKRP, whose model ranks least well within the admissible set. On the
/// AMD EPYC Zen 4 VM (9 tensors never trained on, this machine's calibration, two ablations;
/// tune/README.md, "The model's nominees per loop structure"): 40 nominees reached 0.998 and
/// 0.962 of the exhaustive oracle, 20 reached 0.970 and 0.947, at ~2.35 s against ~1.8 s a tune
/// (the oracle: 15-18 s).
std::uint64_t default_model_budget(kernels::KernelKind kind);

/// How many a model search measures for `r`: its budget, else default_model_budget.
std::uint64_t model_budget(const SearchRequest& r);

/// Every registered search, in registry order.
const std::vector<Searcher>& searchers();
std::vector<std::string> searcher_names();
/// The search of that name; kernels::Error listing the names otherwise.
const Searcher& find_searcher(const std::string& name);
/// Whether `name` is a registered search that ranks with the cost model (false for others and
/// for names that are not searches, e.g. "list").
bool ranks_by_model(const std::string& name);

}  // namespace waco::tuning
