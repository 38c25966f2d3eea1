// tune --search model: the learned cost model (learned/cost_model.hpp) scores every admissible
// schedule for this matrix (the exact reference of the ANNS search); its --budget best-predicted
// (model_budget: default 20, MTTKRP 40) are measured, best first, and the usual side-by-side
// confirmation picks the winner.
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <string>

#include "waco/learned/cost_model.hpp"
#include "waco/learned/shipped.hpp"
#include "waco/tune/searcher.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::tuning {

namespace {
/// Largest admissible set scored one schedule at a time (the ANNS search is for larger ones).
constexpr std::uint64_t kScoreLimit = 2000000;
/// Schedules scored per call (bounds the memory of one batch).
constexpr std::size_t kBatch = 32768;

/// A schedule's loop structure: its split sizes, loop order, parallel loop and threads (not its
/// formats or chunk).
std::string structure_key(const codegen::SuperSchedule& s) {
  std::string k;
  for (int v : s.split) k += std::to_string(v) + ",";
  k += "|";
  for (const codegen::Loop& l : s.order) k += l.name() + ",";
  return k + "|" + s.parallel.name() + "|" + std::to_string(s.threads);
}

/// The first n of `idx` (sorted by score, best first) taking at most `per` of one structure
/// before the next structures, then the ones passed over, in order, while fewer than n.
std::vector<std::size_t> diverse_prefix(const std::vector<std::size_t>& idx,
                                        const std::vector<codegen::SuperSchedule>& all,
                                        std::size_t n, int per) {
  std::vector<std::size_t> out, passed;
  std::map<std::string, int> taken;
  for (std::size_t i : idx) {
    if (out.size() == n) break;
    int& t = taken[structure_key(all[i])];
    if (t < per) {
      ++t;
      out.push_back(i);
    } else {
      passed.push_back(i);
    }
  }
  for (std::size_t i = 0; out.size() < n && i < passed.size(); ++i) out.push_back(passed[i]);
  return out;
}
}  // namespace

SearchChoice search_model(const SearchRequest& r) {
  const kernels::KernelKind kind = r.problem->kind;
  if (r.admissible > kScoreLimit)
    throw kernels::Error("the admissible set has " + std::to_string(r.admissible) +
                             " schedules, more than the model search scores (" +
                             std::to_string(kScoreLimit) + ")",
                         "trim more with --passes, or use --search random");
  const std::string path = learned::model_path_or_default(r.model, kind, r.problem->dtype());
  const double t0 = kernels::now_seconds();
  // The model of this process (loaded once per file), and its input: prepared beside the
  // space's prefix counts, or now from the space's signature (model_input).
  const std::shared_ptr<const learned::CostModel> shared = learned::CostModel::load_shared(path, kind);
  const learned::CostModel& model = *shared;
  const double t1 = kernels::now_seconds();
  const learned::ModelInput in = model_input(r, model);
  const double t2 = kernels::now_seconds();
  std::vector<codegen::SuperSchedule> all;
  if (r.among) {
    all = *r.among;
  } else {
    all.reserve(static_cast<std::size_t>(r.admissible));
    r.space->for_each([&](const codegen::SuperSchedule& s) {
      all.push_back(s);
      return true;
    });
  }
  std::size_t serial = 0;  // scored as their all-core twins (model_data.hpp)
  std::vector<double> scores;
  scores.reserve(all.size());
  for (std::size_t s = 0; s < all.size(); s += kBatch) {
    std::size_t n_serial = 0;
    const std::vector<codegen::SuperSchedule> part = learned::as_model_sees(
        {all.begin() + static_cast<std::ptrdiff_t>(s),
         all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), s + kBatch))},
        r.space->cores(), &n_serial);
    serial += n_serial;
    const std::vector<double> v = model.scores(in, part);
    scores.insert(scores.end(), v.begin(), v.end());
  }
  const double t3 = kernels::now_seconds();
  std::vector<std::size_t> idx(all.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  const std::size_t n = std::min<std::size_t>(all.size(), model_budget(r));
  const auto better = [&](std::size_t a, std::size_t b) {
    return scores[a] < scores[b] || (scores[a] == scores[b] && a < b);
  };
  const bool diverse = r.per_structure > 0 && n < all.size();
  if (diverse) {
    std::sort(idx.begin(), idx.end(), better);
    idx = diverse_prefix(idx, all, n, r.per_structure);
  } else {
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(), better);
  }
  SearchChoice c;
  std::set<std::string> structures;
  for (std::size_t q = 0; q < n; ++q) {
    c.schedules.push_back(all[idx[q]]);
    structures.insert(structure_key(all[idx[q]]));
  }
  c.info = {{"model", path},
            {"encoder", learned::encoder_name(model.config().encoder)},
            {"scored", all.size()},
            {"serial_scored_as_all_cores", serial},
            {"measured", n},
            {"structures", structures.size()},
            {"per_structure", r.per_structure > 0 ? nlohmann::json(r.per_structure) : nlohmann::json()},
            {"load_seconds", t1 - t0},
            {"prepare_seconds", t2 - t1},
            {"score_seconds", t3 - t2}};
  if (r.among) c.info["shortlist"] = true;
  r.observer->note(format("model: scored %zu admissible schedules in %.3f s (%s encoder, matrix "
                          "%.3f s), measuring the best %zu",
                          all.size(), t3 - t2,
                          learned::encoder_name(model.config().encoder).c_str(), t2 - t1, n));
  return c;
}

}  // namespace waco::tuning
