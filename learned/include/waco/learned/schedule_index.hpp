// The ANNS index of a cost model (WACO section 4.2, ARCHITECTURE.md section 5): an HNSW graph
// (hnswlib from Debian, unmodified) whose nodes are template schedules, stored as their node
// vectors (CostModel::node_vectors: the head's first layer applied to the schedule embedding).
// Built under L2 (M = 32, ef_construction = 200, as WACO); searched with the cost model's head as
// the "distance": a query is a matrix's query vector, and the distance to a node is the head's
// score of (query + node), so the walk heads for the schedules predicted fastest. Every head
// evaluation is counted.
//
// The graph knows nothing of a matrix's admissible set; a search takes a `keep` predicate
// (Space::admits) and widens ef until k kept schedules are found or the graph is exhausted,
// reporting the ef it needed and how many candidates it discarded. exact() scores every kept
// node (the brute-force reference for recall).
//
// Files: `<path>` is hnswlib's own index file, `<path>.json` the header (format version, kernel,
// the templates in text form, build parameters, the graph file's size and a hash of 64 blocks
// spread over it; templates are parsed on first use). load()
// refuses a truncated or foreign graph file, and a model whose node vectors differ from the ones
// the graph was built with (checked on a sample of nodes). Torch-free header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "waco/codegen/super_schedule.hpp"
#include "waco/learned/cost_model.hpp"

namespace waco::learned {

inline constexpr int kScheduleIndexFormatVersion = 2;

struct IndexBuildOptions {
  int M = 32;                 ///< hnswlib's M (WACO: 32)
  int ef_construction = 200;  ///< hnswlib's ef_construction (WACO: 200)
  std::uint64_t seed = 100;   ///< hnswlib's level generator
};

struct IndexSearchOptions {
  std::size_t k = 10;    ///< kept schedules wanted
  std::size_t ef = 200;  ///< the first search's ef (WACO: 200); at least k
  /// More walks of the base layer, each from one of the best `starts` kept nodes of `sample`
  /// spread over the graph (scored first): the head is no metric, and one walk from hnswlib's
  /// single entry can end in a local optimum far from the best nodes. 0: hnswlib's walk alone.
  std::size_t starts = 4;
  std::size_t sample = 256;
};

struct IndexResult {
  std::vector<codegen::SuperSchedule> schedules;  ///< kept ones, best predicted first, <= k
  std::vector<float> scores;                      ///< their head scores
  std::uint64_t evaluations = 0;  ///< head evaluations (graph walk, every widening included)
  std::size_t ef = 0;             ///< ef of the last search
  int searches = 0;               ///< searches made (1 + widenings); 0 for exact()
  std::size_t discarded = 0;      ///< nodes returned by the last search that `keep` refused
  double seconds = 0.0;
};

class ScheduleIndex {
 public:
  /// Builds the graph over `templates` (made canonical and de-duplicated here; at least one),
  /// deterministically (one insertion at a time). progress(done, total) every 1% or so.
  static ScheduleIndex build(const CostModel& model, std::vector<codegen::SuperSchedule> templates,
                             const IndexBuildOptions& options = {},
                             const std::function<void(std::size_t, std::size_t)>& progress = {});
  /// Loads `path` and `path`.json for `model` (see the file comment for what is refused:
  /// kernels::Error with the reason).
  static ScheduleIndex load(const std::string& path, const CostModel& model);
  /// Writes both files atomically (temporary files renamed; the header last).
  void save(const std::string& path) const;

  ScheduleIndex(ScheduleIndex&&) noexcept;
  ScheduleIndex& operator=(ScheduleIndex&&) noexcept;
  ~ScheduleIndex();

  kernels::KernelKind kind() const;
  std::size_t size() const;
  const std::vector<codegen::SuperSchedule>& templates() const;
  const IndexBuildOptions& build_options() const;
  /// Seconds build() took (0 after load()).
  double build_seconds() const;

  /// The k best-scored kept nodes by the HNSW walk (and options.starts more walks of the base
  /// layer from the best kept nodes of a sample), widening ef (x4 each time) until k are kept or
  /// ef reaches the graph size. Deterministic. `keep` empty: every node is kept. Measured with
  /// the session-14 models over the legal space (`predict --search anns --passes legality
  /// --check-recall`, 22 matrices each): recall@10 against exact scoring, SpMV 0.85 with the
  /// one walk, 0.995 with 4 more (10k head evaluations against 66k exact, 8 ms against 0.28 s);
  /// SpMM 0.991 (5k against 119k).
  IndexResult search(const std::vector<float>& query, const IndexSearchOptions& options,
                     const std::function<bool(const codegen::SuperSchedule&)>& keep = {}) const;
  /// The k best-scored kept nodes by scoring every node (ties by node order).
  IndexResult exact(const std::vector<float>& query, std::size_t k,
                    const std::function<bool(const codegen::SuperSchedule&)>& keep = {}) const;

  struct Impl;

 private:
  explicit ScheduleIndex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Recall@k: the share of `exact`'s schedules that `found` holds (1 when exact is empty).
double recall_at(const std::vector<codegen::SuperSchedule>& found,
                 const std::vector<codegen::SuperSchedule>& exact);

/// What an index header records of its graph file (graph_hash, 16 hex digits; `bytes`: its size):
/// ScheduleIndex::load refuses a graph whose hash or size differ. Throws Error when unreadable.
std::string index_graph_hash(const std::string& path, std::uint64_t& bytes);

}  // namespace waco::learned
