// Training data collection (issue 17, `waco-hybrid collect`): for each matrix of a list (recipes or
// files), N schedules are sampled (a share from the legal space, the rest from the admissible set,
// always the csr-like schedule and the csr baseline), measured side by side in one isolated child
// (Measurer::compare: prepared and verified first, then timed in interleaved rounds, so that the
// machine's drift does not reorder them) and stored as one group of the results database, in one
// transaction. A share of the groups is measured twice to report how stable their pair order is:
// the ceiling of any model's pairwise accuracy.
//
// Each matrix is collected in a child process forked by collect_one(): a matrix that crashes the
// collector costs only itself, and its memory and CPU lock go with the child. The child runs
// OpenMP (signature, passes) and its Measurer spawns its own worker (measure.hpp), in
// either order; the parent never runs OpenMP, so that each child it forks starts clean.
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/heuristics/runner.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/kernels/recipe.hpp"

namespace waco::heuristics {

/// collect's default share of a group's schedules drawn from the admissible set.
inline constexpr double kDefaultAdmissibleShare = 0.5;

struct CollectOptions {
  kernels::KernelKind kernel = kernels::KernelKind::SpMV;
  int dense = 0;                  ///< 0: the kernel's default (spmm 256, mttkrp 16, sddmm 256)
  kernels::Dtype dtype = kernels::Dtype::F32;  ///< the value type the group is timed in
  int schedules = 100;            ///< sampled schedules per matrix (csr-like and baseline extra)
  double admissible_share = kDefaultAdmissibleShare;  ///< of them from the admissible set, the rest from the legal space
  double repeat_share = 0.05;     ///< groups measured a second time (pair-order stability)
  std::uint64_t seed = 1;         ///< sampling and dense operands
  /// How the group is measured: repeats = its interleaved timed rounds, warmup, threads of
  /// every candidate (resolved, >= 1), tolerance, time limits per candidate, generated-kernel
  /// options, and compare_race_factor (racing within the group: a schedule that many times
  /// slower than the group's fastest after two runs is abandoned with those runs; 0: off).
  MeasureOptions measure = [] {
    MeasureOptions m;
    m.repeats = 10;
    m.warmup = 1;
    m.threads = 1;
    m.compare_race_factor = 4.0;
    return m;
  }();
  PassParams params;                 ///< of the admissible set's pipeline
  /// Content fingerprints (16 hex digits) that must never be measured (a held-out set).
  std::vector<std::string> exclude;
  /// Seconds to wait for a busy machine to calm down before a group (and once before measuring a
  /// disturbed group again); 0: do not check.
  double busy_wait_s = 60.0;
  /// When set, a file the collecting process holds an exclusive flock on while it collects a
  /// matrix (computes its reference, compiles, measures; only making the operand comes before):
  /// builds and benchmarks that take the same lock never run beside it. Matrices already
  /// collected or excluded never wait for it.
  std::string cpu_lock;
  /// Stored with the group (the run's context block).
  nlohmann::json context = nlohmann::json::object();
  /// When set and non-zero (a SIGINT or SIGTERM handler's flag), collect_one ends the matrix it
  /// is collecting at once: its child is killed, nothing of the matrix is stored, and the outcome
  /// is Interrupted (a rerun collects it).
  const volatile std::sig_atomic_t* stop = nullptr;
};

/// How one matrix went.
struct CollectOutcome {
  enum class Kind { Measured, Existing, Excluded, Failed, Interrupted } kind = Kind::Failed;
  std::string label;        ///< the recipe's label
  std::string fingerprint;  ///< empty when the matrix could not be made
  std::string message;      ///< failures: what went wrong; measured: a one-line summary
  std::int64_t rows = 0, nnz = 0;
  int candidates = 0;  ///< measured in the group
  int ok = 0;          ///< of them verified and timed
  bool repeated = false;
  double seconds = 0.0;
  /// Where the time went (measured): making the matrix, sampling, the group, the repetition
  /// (make_s, sample_s, group_s, repetition_s), and waiting: for the CPU lock (lock_wait_s,
  /// before sampling) and for a calm machine (calm_wait_s, a part of group_s).
  nlohmann::json breakdown = nlohmann::json::object();
  nlohmann::json to_json() const;
};
const char* outcome_name(CollectOutcome::Kind k);

/// Collects one matrix into the database at db_path, in a forked child (see the file comment).
/// Never throws for a bad matrix: a recipe that cannot be made, an excluded fingerprint, or a
/// child that dies come back as the outcome. Throws kernels::Error only when fork/pipe fail.
/// The child dies with the calling process (PR_SET_PDEATHSIG), so that nothing goes on writing
/// the database after a collect was killed.
CollectOutcome collect_one(const std::string& db_path, const kernels::Recipe& recipe,
                           const CollectOptions& opts);

/// The share of pairs (a, b) of candidates verified in both measurements whose order (by median)
/// is the same in both: 1 = stable, 0.5 = random. nullopt with fewer than two such candidates.
std::optional<double> pair_agreement(const std::vector<double>& first,
                                     const std::vector<double>& second);

/// Whether a matrix's group is measured twice: a stable draw from its fingerprint and the seed.
bool repeat_group(const std::string& fingerprint, std::uint64_t seed, double share);

}  // namespace waco::heuristics
