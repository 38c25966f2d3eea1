// J-Stream tiled SpMM and SDDMM (SC'20 Alg. 6 and its SDDMM counterpart): the sparse matrix is
// cut into row panels of height T_i; each panel stores its nonzeros column by column (the active
// columns of the panel, each with its rows). For every dense tile of width T_k a thread streams
// the panel's active columns, so the panel's output tile (SpMM: T_i x T_k of C; SDDMM: the T_i x
// T_k slice of the row-major dense operand B) stays in cache while one dense row/column segment
// per active column is read -- the "N-stream" of model.hpp. OpenMP runs the panels in parallel.
//
// Tile sizes come from the model (signature + select_tiles, timed as tuning_seconds()) unless set
// explicitly; the tiled structure is built once in prepare() (conversion_seconds()).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "waco/kernels/implementation.hpp"
#include "waco/signature/model.hpp"

namespace waco::signature {

/// J-Stream tile sizes: T_i rows per panel, T_k dense columns per tile.
struct JStreamTiles {
  std::int64_t T_i = 0;
  std::int64_t T_k = 0;
};

/// The panel-by-column tiled structure of a matrix (built once, shared by SpMM and SDDMM).
struct PanelStructure {
  std::int64_t T_i = 1;
  std::vector<index_t> panel_cols;  ///< panels + 1 offsets into col_id / col_ptr
  std::vector<index_t> col_id;      ///< active column of each (panel, column) pair
  std::vector<index_t> col_ptr;     ///< pairs + 1 offsets into the entry arrays
  std::vector<index_t> entry_row;   ///< row of each entry (absolute)
  kernels::Values entry_val;        ///< in the problem's value type
  std::vector<index_t> entry_pos;   ///< position of the entry in A's canonical order

  std::int64_t panels() const { return static_cast<std::int64_t>(panel_cols.size()) - 1; }
};

/// Builds the panel structure of a canonical matrix with panels of height T_i >= 1 in
/// O(nnz + rows + cols): a counting sort by column, then a stable bucket by panel; the values in
/// `dtype`.
PanelStructure build_panels(const kernels::CooMatrix& a, std::int64_t T_i,
                            kernels::Dtype dtype = kernels::Dtype::F32);

/// J-Stream as a kernels::Implementation for SpMM and SDDMM, in the problem's value type (the
/// model's tiles sized for it).
class JStream : public kernels::Implementation {
 public:
  /// Tiles chosen by the model at prepare() time (cache level kDefaultCacheLevel unless
  /// set_cache() says otherwise).
  JStream() = default;
  /// Explicit tiles (T_i, T_k >= 1; clamped to the matrix rows / dense width in prepare()).
  /// Throws Error when a size is < 1.
  explicit JStream(JStreamTiles tiles);

  /// Sets the cache the model uses when tiles are not given (as cache_capacity() takes it).
  void set_cache(std::string level, std::int64_t bytes,
                 double fraction = kDefaultCacheFraction);

  /// Changes the dense tile width of a prepared instance (clamped to the dense size). The panel
  /// structure depends on T_i only, so a sweep over T_k reuses it. Throws Error when T_k < 1;
  /// precondition: prepare() was called.
  void set_dense_tile(std::int64_t T_k);

  void prepare(const kernels::Problem& p, int threads) override;
  void run() override;
  const kernels::Values& output() const override { return out_; }

  /// The tiles in use (after prepare()).
  const JStreamTiles& tiles() const { return tiles_; }
  /// The model's selection when the tiles came from it (after prepare()).
  const std::optional<TileSelection>& selection() const { return selection_; }

 private:
  template <class V>
  void run_spmm();
  template <class V>
  void run_sddmm();

  std::optional<JStreamTiles> requested_;
  std::string cache_level_ = kDefaultCacheLevel;
  std::int64_t cache_bytes_ = 0;
  double cache_fraction_ = kDefaultCacheFraction;
  JStreamTiles tiles_;
  std::optional<TileSelection> selection_;
  kernels::Problem problem_;
  int threads_ = 1;
  PanelStructure panels_;
  kernels::Values acc_;  ///< SDDMM partial dot products, in panel order
  kernels::Values out_;
};

/// The implementations of this library, for `--impl`: "jstream" (spmm, sddmm).
const std::vector<kernels::ImplementationInfo>& implementations();

}  // namespace waco::signature
