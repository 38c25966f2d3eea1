// The cost model's training data: measurement groups as `dataset export` writes them and
// ResultsDb::for_each_group yields them (one JSON object per group: the matrix, its recipe and
// the candidates timed side by side), read into typed values, with the operand made again from
// its recipe. Torch-free.
//
// Splits. The model is judged on matrices it never saw, so the split is drawn per *family*, not
// per matrix: every augmentation of one real file (window, resize, permutation) shares the file's
// family, so a permuted copy of a test matrix is never in training; a generated matrix is its
// own family. split_of_family maps the family name to train (80%) / validation (10%) / test
// (10%) by a hash, stable across machines and runs. (The exported "split" field is per matrix
// fingerprint, ResultsDb::split_of; it is kept but not used for training.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/recipe.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/learned/cost_model.hpp"

namespace waco::learned {

/// One generated candidate of a group: its schedule and median seconds, or, when racing
/// abandoned it, a lower bound of its seconds.
struct MeasuredCandidate {
  codegen::SuperSchedule schedule;
  double seconds = 0.0;
  bool lower_bound = false;
};

/// One measurement group: one matrix (or tensor), one kernel, one dense size, one thread count.
struct DatasetGroup {
  kernels::KernelKind kind = kernels::KernelKind::SpMV;
  int dense = 1;
  int threads = 0;
  kernels::Dtype dtype = kernels::Dtype::F32;  ///< the value type it was timed in
  std::string fingerprint;  ///< the operand's (16 hex digits)
  std::string source;       ///< "generator:rmat", "file:<path>", "tensor"
  std::optional<kernels::Recipe> recipe;
  std::string family;  ///< family_of()
  std::string split;   ///< split_of_family(family)
  std::int64_t rows = 0, cols = 0, nnz = 0;
  /// The generated candidates that ran or were abandoned (failed ones and the hand-written
  /// baselines are left out), in the group's order.
  std::vector<MeasuredCandidate> candidates;
  std::optional<double> pair_agreement;  ///< of the group's repetition, when it was repeated
  /// Median seconds of the hand-written csr baseline in the group (0 when it did not run): the
  /// unit of query costs ("in csr calls").
  double csr_seconds = 0.0;

  /// "generator:rmat 0123abcd..." or the file's base name and the fingerprint.
  std::string label() const;
};

/// Reads one group object (export_version 1). Throws kernels::Error naming the field on a
/// malformed object or an unparsable schedule.
DatasetGroup group_from_json(const nlohmann::json& g);

/// The family of a group: "file:<base name of the source file>" for a file recipe (every
/// augmentation of the file), "tensor-file:<base name>" for a FROSTT file, else
/// "matrix:<fingerprint>".
std::string family_of(const std::optional<kernels::Recipe>& recipe, const std::string& fingerprint);

/// "train", "validation" or "test" from a hash of the family name (80 / 10 / 10).
std::string split_of_family(const std::string& family);

/// The group's recipe with a file recipe's path replaced by one that exists: as stored, else its
/// base name in one of `data_dirs` (or their matrices/ and tensors/ subfolders). Throws
/// kernels::Error when the group has no recipe or the file is found nowhere.
kernels::Recipe resolved_recipe(const DatasetGroup& g, const std::vector<std::string>& data_dirs);

/// Makes the group's matrix again from its recipe. A file recipe's path is tried as stored, then
/// its base name in each of `data_dirs`. The result's fingerprint must be the group's. Throws
/// kernels::Error when there is no recipe, the file is not found, or the fingerprint differs.
kernels::CooMatrix make_group_matrix(const DatasetGroup& g, const std::vector<std::string>& data_dirs);
/// The same for a tensor group (MTTKRP).
kernels::CooTensor make_group_tensor(const DatasetGroup& g, const std::vector<std::string>& data_dirs);

/// The group as a ranking example for `model`: the operand made again (make_group_matrix /
/// make_group_tensor) and prepared by the model, with the group's candidates.
RankingExample make_example(const CostModel& model, const DatasetGroup& g,
                            const std::vector<std::string>& data_dirs);

}  // namespace waco::learned
