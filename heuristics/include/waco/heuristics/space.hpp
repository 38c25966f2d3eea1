// The SuperSchedule space of a kernel on a problem (issue 5, ARCHITECTURE.md section 2) as a
// factored object: it is counted, enumerated by index and sampled without being materialized.
//
// A candidate is (split vector, loop order, level formats, parallel loop, threads, chunk). The
// space is the product of four *stages*, each restricted by constraints that look only at what
// that stage and the stages before it fix:
//   Split      the split vector sigma: every variable x has s_x in {1, 2, ..., min(2^ceil(log2
//              dim_x), 2^16)} (before any constraint);
//   Storage    the sparse variables' split sizes, the sparse operand's level sequence (the order
//              restricted to A's loops) and the U/C format of each level;
//   Nest       the split pattern (which variables are split), the full loop order and the
//              parallel loop (split sizes excluded);
//   Execution  the parallel loop and its variable's split size, threads in 1..cores and chunk in
//              {1, 2, ..., 256}.
// Trimming passes (pass.hpp) add constraints; nothing is enumerated to apply them. The count is
//   sum_sigma sum_lambda |formats(sigma, lambda)| * sum_p |orders(pattern, lambda, p)| * |exec(sigma, p)|
// Every stage result is cached by what its stage sees, in flat tables: the surviving split
// vectors (a flag per vector), formats as a 64-bit mask per (sparse split sizes, lambda), orders
// per (pattern, lambda, parallel loop), (threads, chunk) lists per (parallel loop, its split
// size). Adding a constraint filters the cached results of its stage with that one constraint
// (the other stages keep theirs), and constrain() evaluates a pass's constraint once per cached
// result for both its statistics and the filtering. So the whole default pipeline on MTTKRP
// (up to 1e12 candidates, four variables, 2520 orders per split pattern) runs in one to three
// seconds on the tensors of ../shared/data (it took 20-100 s when every constraint rebuilt every
// cache), and SpMM's in milliseconds. Counts are exact unsigned 64-bit integers; an overflow is an Error
// (it cannot happen for kMaxSplit = 2^16, 4 variables and 256 cores).
//
// Index order: sigma (product order, the last variable fastest), then lambda, the parallel loop,
// the order, the format, the (threads, chunk) pair. at(i) decodes an index, so uniform sampling is
// uniform indices (sample()).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/prefix_counts.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/signature/signature.hpp"

namespace waco::heuristics {

using codegen::LevelFormat;
using codegen::Loop;
using codegen::SuperSchedule;

enum class Stage { Split, Storage, Nest, Execution };
/// "split", "storage", "nest", "execution".
const char* stage_name(Stage s);

class Space;

/// A restriction of one stage. check_* returns nullptr to keep the candidate, else the reason it is
/// removed (a static kebab-case string, e.g. "split-above-dimension"). Only the method of stage()
/// is called. A check must be a function of what its stage sees (the space caches it so).
class Constraint {
 public:
  virtual ~Constraint() = default;
  virtual Stage stage() const = 0;
  /// split: per KernelSpec::vars.
  virtual const char* check_split(const Space& space, const std::vector<int>& split) const;
  /// levels: the sparse operand's loops in level order; formats: one per level. Must depend on
  /// the sparse variables' split sizes only (split holds 1 for the dense variables).
  virtual const char* check_storage(const Space& space, const std::vector<int>& split,
                                    const std::vector<Loop>& levels,
                                    const std::vector<LevelFormat>& formats) const;
  /// order: the full loop order (it implies the split pattern); parallel: one of its loops.
  virtual const char* check_nest(const Space& space, const std::vector<Loop>& order,
                                 const Loop& parallel) const;
  /// Must depend on the parallel loop and its variable's split size only (split holds 1 for the
  /// other variables), e.g. through Space::trip_count(split, parallel).
  virtual const char* check_execution(const Space& space, const std::vector<int>& split,
                                      const Loop& parallel, int threads, int chunk) const;
};

struct SpaceOptions {
  /// Threads range over 1..cores (0: kernels::available_cpus()).
  int cores = 0;
  /// The padding bound of codegen::StorageOptions used by the legality pass.
  double max_padding = 20.0;
  /// SpMV: the matrix's diagonals (MatrixFacts::diagonals) when the caller counted them already
  /// (an adaptive plan's dia step); -1: for_operand counts them when count_diagonals is set.
  std::int64_t diagonals = -1;
  /// Whether for_operand counts an SpMV matrix's diagonals (O(nnz)) when not given: only the
  /// diagonal-storage pass reads them (a pipeline without it leaves MatrixFacts::diagonals -1).
  bool count_diagonals = true;
};

/// Per-matrix facts the signature-driven passes read (absent for the structural space).
struct MatrixFacts {
  PrefixCounts counts;
  signature::LocalitySignature signature;  ///< only for 2-D operands (SpMV, SpMM, SDDMM)
  bool has_signature = false;
  /// SpMV: the diagonals holding a nonzero (kernels::dia_offsets; the diagonal-storage pass);
  /// -1 for the other kernels.
  std::int64_t diagonals = -1;
};

class Space {
 public:
  /// The full space of kernel k for a problem (its extents and its sparsity statistics: prefix
  /// counts and, for matrices, the locality signature; computed here, O(bits x nnz)).
  static Space for_problem(const kernels::Problem& p, const SpaceOptions& opts = {});
  /// The same from the sparse operand alone, without dense operands: a canonical matrix for
  /// SpMV/SpMM/SDDMM or a canonical order-3 tensor for MTTKRP (the other pointer null), and the
  /// dense extent (SpMM/MTTKRP J, SDDMM K; ignored for SpMV). Throws Error on a mismatch.
  static Space for_operand(kernels::KernelKind k, const kernels::CooMatrix* a,
                           const kernels::CooTensor* t, std::int64_t dense,
                           const SpaceOptions& opts = {});
  /// The same, with the caller's work on the matrix's signature done beside the prefix counts
  /// (tune: the model's input, issue 34's cost of the choice): for a matrix of at least
  /// kBesideMinNnz nonzeros, an OpenMP region of two threads, one counting while the other
  /// computes the signature and calls `beside` with it (below, one after the other). Give it
  /// only to a process that may use two threads (tune's --threads) and may run OpenMP (not the
  /// measuring worker). `beside`'s exception is rethrown once the counts are done. Matrices
  /// only: for a tensor (MTTKRP) `beside` is not called.
  static Space for_operand(kernels::KernelKind k, const kernels::CooMatrix* a,
                           const kernels::CooTensor* t, std::int64_t dense,
                           const SpaceOptions& opts,
                           const std::function<void(const signature::LocalitySignature&)>& beside);
  /// From about here the two threads pay: `bench_choice --shortlist` (SpMV, 2 threads, Intel SPR
  /// VM, six alternations of the team for every matrix and of 32768), the short list's choice
  /// took a median 0.78x the time on 8 matrices of 1.9k-27k nonzeros (zenios 0.61x, G51 0.70x,
  /// west0479 0.89x), 0.93x on cage5 (233 nonzeros, range 0.69-1.17) and 1.15x on ash219 (438),
  /// where starting the team costs about what the counts do.
  static constexpr std::int64_t kBesideMinNnz = 1024;
  /// The structural space: no matrix, given extents per KernelSpec::vars (sparse extents unknown
  /// may be given as kMaxSplit). Passes that need the matrix do not apply (they say so).
  static Space structural(kernels::KernelKind k, std::vector<std::int64_t> extents,
                          const SpaceOptions& opts = {});

  kernels::KernelKind kind() const { return kind_; }
  const codegen::KernelSpec& spec() const { return *spec_; }
  const std::vector<std::int64_t>& extents() const { return extents_; }
  std::int64_t extent(char var) const;
  const SpaceOptions& options() const { return opts_; }
  int cores() const { return cores_; }
  /// The matrix facts, or nullptr for the structural space.
  const MatrixFacts* facts() const { return facts_.get(); }
  /// The split sizes before constraints for variable index v: 1, 2, ... up to the extent rounded
  /// up to a power of two, at most kMaxSplit.
  const std::vector<int>& split_choices(std::size_t v) const { return split_choices_[v]; }
  const std::vector<std::shared_ptr<const Constraint>>& constraints() const { return constraints_; }

  /// Adds a constraint (the space shrinks): filters the cached results of its stage with it.
  /// Invalidates the index built by at().
  void add_constraint(std::shared_ptr<const Constraint> c);
  /// tally(*c) and then add_constraint(c), evaluating c once per cached stage result for both
  /// (run_pass uses it for the per-pass statistics).
  std::map<std::string, std::uint64_t> constrain(std::shared_ptr<const Constraint> c);

  /// Number of candidates (exact; cached until the next constraint).
  std::uint64_t count() const;
  /// What `probe` would do to the current space: candidates per reason, "" = kept. The sum is
  /// count(). Used for the per-pass statistics.
  std::map<std::string, std::uint64_t> tally(const Constraint& probe) const;

  /// The candidate of index i in [0, count()): canonical and valid. Builds an index of the
  /// split vectors on first use (O(count of split vectors)). Throws Error when out of range.
  SuperSchedule at(std::uint64_t index) const;
  /// Calls visit on every candidate in index order until it returns false.
  void for_each(const std::function<bool(const SuperSchedule&)>& visit) const;
  /// n distinct candidates uniformly at random (all of them, in index order, if n >= count()),
  /// reproducible for a seed on every platform (SplitMix64 + rejection, no std distributions).
  std::vector<SuperSchedule> sample(std::uint64_t n, std::uint64_t seed) const;
  /// Whether the space, with its constraints, holds schedule s (any thread count and chunk the
  /// space has; s is canonicalized first): nullopt when it does, else why not — the first
  /// failing constraint's reason (e.g. "tile-outside-window"), or "other-kernel", "invalid
  /// schedule: ...", "split-out-of-range", "threads-out-of-range", "chunk-out-of-range". Agrees
  /// with for_each (tested): the ANNS search uses it to keep only admissible neighbours.
  std::optional<std::string> admits(const SuperSchedule& s) const;
  /// Whether the storage stage's constraints admit the storage of schedule s (canonicalized
  /// first): nullopt when they do, else the first failing one's reason, or "other-kernel",
  /// "invalid schedule: ...". Unlike admits(), the other stages are not asked and s's formats
  /// may hold N levels, which the space does not enumerate: narrow twins (narrow.hpp) are
  /// judged by it.
  std::optional<std::string> storage_admits(const SuperSchedule& s) const;
  /// admits() of s with each of `chunks` as its chunk (s's own chunk is not read), element by
  /// element: true where admits() would say nullopt. What does not depend on the chunk (the
  /// schedule's validity, its canonical form, the ranges, the split, storage and nest stages) is
  /// checked once, the execution stage per chunk: a short list's chunk variants cost one check.
  std::vector<bool> admits_each_chunk(const SuperSchedule& s, const std::vector<int>& chunks) const;
  /// Every candidate (guarded: Error when count() > limit).
  std::vector<SuperSchedule> materialize(std::uint64_t limit = 1'000'000) const;

  /// The legality check of the storage stage (exact: it mirrors codegen::build_storage's size
  /// checks with sizes from the prefix counts). nullptr when the format is built, else the
  /// reason. Needs facts(); without them returns nullptr.
  const char* storage_refusal(const std::vector<int>& split, const std::vector<Loop>& levels,
                              const std::vector<LevelFormat>& formats) const;
  /// Values the format stores (explicit zeros included; from the prefix counts). Needs facts().
  double stored_values(const std::vector<int>& split, const std::vector<Loop>& levels,
                       const std::vector<LevelFormat>& formats) const;
  /// Iterations of the parallel loop (per enclosing iteration for an inner part x0: s_x).
  std::int64_t trip_count(const std::vector<int>& split, const Loop& loop) const;

  struct Pattern;      // per split pattern: orders grouped by level sequence and parallel loop
  struct Cursor;       // one split vector: its flat index, choices, pattern and sparse index
  struct StorageMemo;  // a storage probe's verdicts per cached format mask

 private:
  /// admits() (every stage and the space's ranges) or, with storage_only, storage_admits().
  std::optional<std::string> check(const SuperSchedule& s, bool storage_only) const;
  /// The space's ranges of split sizes and threads for canonical s (the chunk aside): nullptr when
  /// they hold it, else why not.
  const char* range_refusal(const SuperSchedule& s) const;
  /// The first refusal, in the constraints' order, of those whose stage is in `stages` (a bit
  /// 1 << Stage each) for canonical s; nullptr when none refuses.
  const char* constraint_refusal(const SuperSchedule& s, unsigned stages) const;
  Space() = default;
  void init(kernels::KernelKind k, std::vector<std::int64_t> extents, const SpaceOptions& opts);
  void decode(std::size_t flat, Cursor& c) const;
  const Pattern& pattern(unsigned mask) const;
  /// The kept formats of level sequence `lambda` of c's pattern: bit m = format m (bit l of m
  /// set = level l is C).
  std::uint64_t formats_of(const Cursor& c, std::size_t lambda) const;
  const std::vector<std::pair<int, int>>& exec_of(const Cursor& c, const Loop& parallel) const;
  std::uint64_t split_count(const Cursor& c) const;
  std::map<std::string, std::uint64_t> tally_impl(const Constraint& probe, StorageMemo* memo) const;
  /// The level shapes of (split, levels), memoized for the last pair asked. Needs facts_.
  const LevelShapes& shapes(const std::vector<int>& split, const std::vector<Loop>& levels) const;
  /// Filters the cached results of c's stage with c (memo: c's verdicts from tally_impl).
  void filter_caches(const Constraint& c, const StorageMemo* memo);
  void build_index() const;

  kernels::KernelKind kind_ = kernels::KernelKind::SpMV;
  const codegen::KernelSpec* spec_ = nullptr;
  std::vector<std::int64_t> extents_;
  SpaceOptions opts_;
  int cores_ = 1;
  std::shared_ptr<const MatrixFacts> facts_;
  std::vector<std::vector<int>> split_choices_;
  std::vector<std::shared_ptr<const Constraint>> constraints_;

  // The split vectors in product order (flat index = sum of choice index x stride).
  std::vector<std::size_t> split_stride_;   ///< per variable
  std::vector<std::size_t> sparse_stride_;  ///< per variable; 0 for dense variables
  std::size_t split_total_ = 0;             ///< split vectors before constraints
  std::size_t sparse_total_ = 0;            ///< sparse split-size vectors
  std::size_t max_lambdas_ = 0;             ///< level sequences of the all-split pattern
  std::size_t max_choices_ = 0;             ///< largest split_choices_[v].size()
  unsigned sparse_bits_ = 0;                ///< mask of the sparse variables
  std::vector<std::uint8_t> split_alive_;   ///< per split vector: passes the split constraints
  /// Level sequences per sparse split pattern (mask & sparse_bits_): legal orders of A's loops.
  std::vector<std::vector<std::vector<Loop>>> lambdas_;

  // Caches (mutable: counting is logically const; a Space is not thread-safe). Patterns are
  // shared between copies of a Space and copied before they are filtered.
  mutable std::map<unsigned, std::shared_ptr<Pattern>> patterns_;
  mutable std::vector<std::uint64_t> formats_;       ///< sparse_total_ x max_lambdas_
  mutable std::vector<std::uint8_t> formats_known_;
  mutable std::vector<std::vector<std::pair<int, int>>> exec_;  ///< (loop code, choice)
  mutable std::vector<std::uint8_t> exec_known_;
  mutable std::optional<std::uint64_t> count_;
  mutable std::vector<int> shape_split_;  ///< the memo of shapes()
  mutable std::vector<Loop> shape_levels_;
  mutable LevelShapes shape_;
  mutable std::vector<std::size_t> index_splits_;   ///< flat indices of nonempty split vectors
  mutable std::vector<std::uint64_t> index_cum_;    ///< cumulative counts, index_splits_.size() + 1
};

/// The chunk choices of the space before constraints: static scheduling (codegen::kStaticChunk)
/// and the dynamic chunks 1, 2, 4, ..., codegen::kMaxChunk.
std::vector<int> chunk_choices();

}  // namespace waco::heuristics
