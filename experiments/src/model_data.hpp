// What train, evaluate and predict share: where the measurements come from (a database, export
// files, or the committed dataset), where operands' source files are looked up, where the
// shipped models live, and the groups turned into ranking examples for a model, with progress.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "waco/learned/cost_model.hpp"
#include "waco/learned/training_data.hpp"

namespace waco::cli {

struct ModelDataOptions {
  std::string db;                      ///< a results database (collect --db)
  std::vector<std::string> files;      ///< export files; neither: the committed dataset
  std::vector<std::string> data_dirs;  ///< where recipes' source files are looked up
  kernels::Dtype dtype = kernels::Dtype::F32;  ///< the groups timed in this value type
  bool every_dtype = false;  ///< the groups of every value type instead (a dtype_input model)
  int threads = 0;
  bool quiet = false;
};
/// --db, FILES, --data-dir, --threads, -q.
void add_model_data_options(CLI::App& app, ModelDataOptions& o);

/// Where recipes' source files are looked up by base name: --data-dir, $WACO_DATA_DIR, then
/// ../shared/data beside the source tree.
std::vector<std::string> recipe_data_dirs(const ModelDataOptions& o);

struct LoadedExamples {
  std::vector<learned::DatasetGroup> groups;      ///< the groups kept, same order as examples
  std::vector<learned::RankingExample> examples;
  std::vector<std::string> skipped;               ///< "<group>: <reason>" per group left out
  std::string described;                          ///< where the groups came from
  std::string data_hash;                          ///< of the kept groups' JSON (16 hex digits)
  double seconds = 0.0;                           ///< loading and preparing
};

/// The groups of the model's kernel that `keep` accepts (and that have two or more candidates),
/// with their operands made again and prepared by the model. Groups whose operand cannot be made
/// (source file missing) are skipped and listed. Progress with ETA on stderr unless quiet.
LoadedExamples load_examples(const learned::CostModel& model, const ModelDataOptions& o,
                             const std::function<bool(const learned::DatasetGroup&)>& keep);

}  // namespace waco::cli
