// What collect and calibrate share: a list of recipes collected into one results database, one
// matrix at a time (heuristics::collect_one), behind the lock that keeps a second collector of
// the database out, with the settings check that keeps a resumed collection consistent.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "waco/codegen/generated_kernel.hpp"
#include "waco/heuristics/collector.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/recipe.hpp"

namespace waco::cli {

/// How each matrix's group is sampled and measured, as collect and calibrate take it.
struct GroupOptions {
  int schedules = 100;
  int rounds = 10;
  int warmup = 1;
  std::uint64_t seed = 1;
  double busy_wait = 60.0;
  double timeout = 60.0;
  double compile_timeout = 300.0;
  std::string cpu_lock;
  codegen::GeneratedOptions generated;
};
/// --schedules, --rounds, --warmup, --seed, --busy-wait, --timeout, --compile-timeout,
/// --cpu-lock and the generated kernels' options (defaults: the fields' values).
void add_group_options(CLI::App& sub, GroupOptions& g);
/// Copies them into `co`, its groups measured on `threads` (resolved, >= 1).
void apply_group_options(const GroupOptions& g, int threads, heuristics::CollectOptions& co);

/// An exclusive flock on a file for the life of the object; a lock held elsewhere throws
/// `busy` (with `hint`).
class FileLock {
 public:
  FileLock(const std::string& path, const std::string& busy, const std::string& hint);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

/// Opens the database at db_path (a bad file fails here, before any work) and takes its
/// collector lock (beside the database's real file, so that two names of one file exclude each
/// other too); throws kernels::Error when another collector holds it.
std::unique_ptr<FileLock> lock_collection(const std::string& db_path);

/// Refuses a collection whose settings (`now`) differ from the ones the database's meta key
/// `key` recorded, naming each difference (`hint` says what to do); with `accept` (or none
/// recorded) records `now`.
void check_settings(heuristics::ResultsDb& db, const std::string& key, const nlohmann::json& now,
                    bool accept, const std::string& db_path, const std::string& what,
                    const std::string& hint);

/// What a run of collect_recipes did.
struct CollectTally {
  std::map<std::string, int> outcomes;  ///< per outcome name
  std::int64_t measurements = 0;        ///< candidates measured in new groups
  std::int64_t measured_ok = 0;
  nlohmann::json breakdown = nlohmann::json::object();  ///< seconds per step, summed
  nlohmann::json items = nlohmann::json::array();       ///< CollectOutcome::to_json per recipe
  double collected_s = 0.0;  ///< seconds of the newly measured groups
  int collected = 0;         ///< newly measured groups
  std::size_t done = 0;      ///< recipes handled (any outcome)
  bool interrupted = false;  ///< SIGINT/SIGTERM (interrupt_flag) ended it
  /// Why the run stopped before its recipes ran out, when the same failure repeated
  /// kSameFailuresStop times in a row (a broken installation, a full disk): empty otherwise.
  std::string stopped;
  double seconds = 0.0;      ///< wall time
  /// Mean seconds of a newly measured group (-1 before the first).
  double seconds_per_group() const { return collected > 0 ? collected_s / collected : -1.0; }
};

/// Recipes in a row that fail with the same message before collect_recipes stops: a cause that
/// is not the recipes' (every later one would fail alike, each counted as tried).
constexpr int kSameFailuresStop = 8;

/// Collects `recipes` in order into db_path with `co` (co.stop should be interrupt_flag(): an
/// InterruptGuard of the caller). Before each recipe, `go_on(tally)` may end the run (false);
/// after each, `after(i, outcome, tally)` reports it. Stops at an interruption, and after
/// kSameFailuresStop failures in a row with one message (CollectTally::stopped).
CollectTally collect_recipes(const std::string& db_path, const std::vector<kernels::Recipe>& recipes,
                             const heuristics::CollectOptions& co,
                             const std::function<bool(const CollectTally&)>& go_on,
                             const std::function<void(std::size_t, const heuristics::CollectOutcome&,
                                                      const CollectTally&)>& after);

}  // namespace waco::cli
