// Trimming passes (seed 003 section 2.5, ARCHITECTURE.md section 4, STYLE.md item 4): small
// objects that restrict a Space by adding constraints to one of its stages, never by filtering
// enumerated candidates, so they apply to spaces of billions of candidates. Every pass is marked
// sound (removes only illegal candidates or candidates equivalent to a kept one) or heuristic (may
// remove the best). The list of passes is in ONE place, src/passes.def; the pipeline parser,
// list_passes() (--list-passes) and the pipeline printer all come from it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/heuristics/space.hpp"
#include "waco/kernels/values.hpp"
#include "waco/signature/model.hpp"

namespace waco::heuristics {

/// The tunable parameters of the passes (units in the names; defaults justified in README.md).
struct PassParams {
  /// tile-window: keep split sizes within 2^tile_window of the model's tile (log2 distance).
  int tile_window = 0;
  /// block-fill: keep formats storing at most this many values per nonzero (1 / minimum fill).
  double max_block_padding = 2.0;
  /// chunk-rows: every thread should get at least this many chunks of the parallel loop.
  /// 1 with chunk_window 2 keeps the chunks giving a thread 1, 2 and 4 of them (at most 256):
  /// measured side by side (2 threads, Xeon VM), the exhaustive winners over that set ran
  /// 1.03-1.16x faster than with 16 chunks a thread and no window (SpMM J=256 on bcsstk09,
  /// dwt_1005, lp_ship04l, west0479: OpenMP's dynamic dispatch costs more than the imbalance it
  /// avoids on small matrices), and the window still holds chunk 128 for Groebner_id2003_aug
  /// (4967 rows), where 256 took 1.18-1.20x the time of 128 (imbalanced rows).
  int min_chunks_per_thread = 1;
  /// chunk-rows: how many powers of two below the largest such chunk are kept too.
  int chunk_window = 2;
  /// parallelize-one: a kernel of at most this many multiply-adds (nonzeros x dense size) also
  /// keeps threads = 1, a serial kernel without an OpenMP region.
  std::int64_t max_serial_work = 16384;
  /// tile-window: the cache level the tile model uses (as `tile --cache-level`: "l1", "l2",
  /// "l3", "llc-core"); cache_bytes > 0 overrides it; cache_fraction of it is usable.
  std::string cache_level = signature::kDefaultCacheLevel;
  std::int64_t cache_bytes = 0;
  double cache_fraction = signature::kDefaultCacheFraction;
  /// tile-window: the problem's value type, whose size the tile model counts (a double tile
  /// takes twice a float tile's cache). Not an option of its own: the caller copies its
  /// problem's (tune: TuneRequest::dtype, collect: CollectOptions::dtype, space: --dtype).
  kernels::Dtype dtype = kernels::Dtype::F32;

  /// Every parameter by name (as the CLI options without the dashes, in snake case), so that a
  /// run can be reproduced from its JSON output; "dtype" only when it is not f32 (as the
  /// results database and the tuning cache: what says nothing is single precision).
  nlohmann::json to_json() const;
};

/// What one pass did, as a value.
struct PassStats {
  std::string name;
  bool sound = false;
  std::uint64_t in = 0;
  std::uint64_t out = 0;
  /// Removed candidates per reason (kebab-case), in = out + sum of these.
  std::vector<std::pair<std::string, std::uint64_t>> removed;
  double seconds = 0.0;
  /// Why the pass removed nothing when it does not apply (e.g. "needs the matrix"), else empty.
  std::string note;

  nlohmann::json to_json() const;
};

class Pass {
 public:
  virtual ~Pass() = default;
  /// kebab-case name, as in pipelines.
  virtual std::string name() const = 0;
  /// One or two sentences: what it keeps and why (with the paper section).
  virtual std::string description() const = 0;
  /// True when it removes only illegal candidates or candidates equivalent to a kept one.
  virtual bool sound() const = 0;
  /// The constraints this pass adds to `space` (empty with a note when it does not apply).
  /// May throw kernels::Error (e.g. no cache size for the tile model).
  virtual std::vector<std::shared_ptr<const Constraint>> constraints(const Space& space,
                                                                     std::string& note) const = 0;
};

/// One registry entry (from passes.def).
struct PassInfo {
  std::string name;
  std::string description;
  bool sound = false;
  /// A restriction for comparisons (ablate's baselines), not a trimming rule: not in "all".
  bool restriction = false;
};

/// Every pass, in registry order (the default pipeline is the trimming rules among them, in
/// that order; the restrictions come last).
std::vector<PassInfo> list_passes();
/// A pass by name; throws kernels::Error listing the known names when unknown.
std::unique_ptr<Pass> make_pass(const std::string& name, const PassParams& params = {});

/// A pipeline: pass names in order.
using Pipeline = std::vector<std::string>;
/// Whether pipeline `p` runs the pass `name`.
inline bool names_pass(const Pipeline& p, const std::string& name) {
  return std::find(p.begin(), p.end(), name) != p.end();
}
/// Parses "a,b,c" (spaces around names allowed; "all" = the default pipeline, also as an item
/// of a list such as "all,csr-storage"; "" or
/// "none" = no pass). Throws kernels::Error naming an unknown pass and listing the known ones, or
/// a pass given twice.
Pipeline parse_pipeline(const std::string& text);
/// "a,b,c" ("none" for the empty pipeline); parse_pipeline(print_pipeline(p)) == p.
std::string print_pipeline(const Pipeline& p);
/// Every trimming pass in registry order (the restrictions left out).
Pipeline default_pipeline();

/// Applies one pass to the space (adds its constraints) and returns its statistics.
PassStats run_pass(Space& space, const Pass& pass);

struct PipelineResult {
  std::uint64_t initial_count = 0;  ///< the space before any pass
  std::vector<PassStats> passes;
  std::uint64_t final_count = 0;
};
/// Runs the passes in order on `space` (which keeps their constraints).
PipelineResult run_pipeline(Space& space, const Pipeline& pipeline, const PassParams& params = {});

/// Adds the passes' constraints to `space` in order, without their statistics (nothing is
/// counted: what a short list is checked against, Space::admits).
void add_pipeline_constraints(Space& space, const Pipeline& pipeline,
                              const PassParams& params = {});

/// The legal space's size: the space restricted by the legality pass alone.
std::uint64_t legal_count(const Space& space, const PassParams& params = {});

}  // namespace waco::heuristics
