// The geometry of a sparse convolutional network over a sparsity pattern (internal, torch-free):
// active sites of every level, a coordinate hash map, and the kernel map of every layer.
//
// Conventions (those of MinkowskiEngine, which the WACO artifact used, and of a dense
// convolution with padding kernel/2):
// - Level 0 holds the nonzero coordinates. Level l >= 1 holds floor(c / 2) of level l-1's sites
//   (deduplicated, in order of first appearance, so row-major input gives row-major-ish levels).
// - Offsets of a kernel of size k (odd) are d in {-k/2 .. k/2}^dims, enumerated row-major (the
//   first dimension slowest); offset index j corresponds to dense weight position d + k/2.
// - Submanifold (stride 1): output site o (coordinate c) reads input site at c + d_j.
// - Strided (stride 2): output site o (coordinate q, level l) reads the level-(l-1) site at
//   2 q + d_j. This is a dense conv with stride 2 and padding k/2, evaluated at the active sites.
// A kernel map is a compact list of (input site, output site) pairs grouped by offset. For one
// offset the map is injective both ways (o determines i = o + d_j or 2 o + d_j, and i determines
// o), so a pass over one offset's pairs may scatter into outputs (forward) or into inputs
// (input gradient) from several threads without atomics.
//
// Every level is kept sorted lexicographically (a canonical operand is; downsampling keeps it),
// so no coordinate hashing is needed: a level is a sequence of "rows" (runs of sites that share
// all but the last coordinate), the row a kernel offset leads to is found by binary search over
// the rows' packed 64-bit prefix keys, and the neighbours within that row by a two-pointer merge
// of the two sorted column lists. Every step reads memory sequentially (a hash probe of a sparse
// row missed the cache once per lookup: 3-6 s for 2M nonzeros, against 0.1-0.2 s now).
// Building runs in parallel over chunks of output rows, in two passes (count, then fill at the
// counted positions), so nothing is allocated per site or probe and the order of a map's pairs
// (by offset, then output site) does not depend on the thread count. Downsampling merges the
// (at most 2^(dims-1)) input rows of every output row, deduplicating halved columns: sorted
// output, no sequential deduplication pass.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "waco/kernels/sparse.hpp"

namespace waco::learned {

/// The active sites of one level: coordinates [sites][dims] (sorted lexicographically, distinct)
/// and the grid extent per dimension.
struct SiteSet {
  int dims = 2;
  std::vector<std::int64_t> extent;
  std::vector<std::int32_t> coords;

  std::int64_t sites() const { return dims ? static_cast<std::int64_t>(coords.size()) / dims : 0; }
};

/// The rows of a sorted site set: row r holds sites [start[r], start[r+1]) and all of them have
/// the prefix (coordinates but the last) whose packed key is key[r]; keys are increasing.
struct SiteRows {
  std::vector<std::int64_t> start;  ///< [rows + 1]
  std::vector<std::uint64_t> key;   ///< [rows]
  std::int64_t rows() const { return static_cast<std::int64_t>(key.size()); }
};

/// Rows of a sorted site set. Throws kernels::Error when a prefix needs more than 63 bits.
SiteRows rows_of(const SiteSet& s);

/// The kernel map of one layer (see the file comment): pairs grouped by offset.
struct KernelMap {
  int dims = 2;
  int kernel = 1;
  int stride = 1;
  int offsets = 1;                      ///< kernel^dims
  std::int64_t in_sites = 0;
  std::int64_t out_sites = 0;
  std::int64_t pairs = 0;               ///< number of (input, output, offset) triples
  std::vector<std::int64_t> offset_start;  ///< [offsets + 1]: pairs of offset j are [s_j, s_j+1)
  std::vector<std::int32_t> in;         ///< [pairs] input site of each pair
  std::vector<std::int32_t> out;        ///< [pairs] output site of each pair
  std::vector<std::int32_t> offset_vectors;  ///< [offsets][dims]

  std::int64_t pairs_of(int j) const { return offset_start[j + 1] - offset_start[j]; }
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((in.size() + out.size()) * sizeof(std::int32_t) +
                                     offset_start.size() * sizeof(std::int64_t));
  }
};

/// The map as a dense table [out_sites][offsets] (input site or -1): for tests and reports.
std::vector<std::int32_t> dense_neighbors(const KernelMap& m);

/// The block-diagonal join of maps of the same kernel and stride: the sites of map b follow
/// those of maps 0..b-1 (inputs and outputs separately); pairs stay grouped by offset.
KernelMap join_maps(const std::vector<const KernelMap*>& maps, int threads);

/// Offsets of a kernel of size k in `dims` dimensions, row-major, [k^dims][dims].
std::vector<std::int32_t> kernel_offsets(int dims, int kernel);

/// Level 0 of a matrix (dims 2) or tensor (its order): sorted, distinct (sorted here if the
/// operand is not canonical; duplicates are an error).
SiteSet sites_of(const kernels::CooMatrix& a);
SiteSet sites_of(const kernels::CooTensor& t);

/// floor(c / 2) of every site, distinct and sorted. Precondition: `in` sorted and distinct.
SiteSet downsample(const SiteSet& in, int threads);

/// The map of a layer from `in` to `out` (both sorted): output o at q reads input stride q + d_j.
/// Stride 1 with out == in is the submanifold map.
KernelMap merge_map(const SiteSet& in, const SiteSet& out, int kernel, int stride, int threads);
/// Stride-1 map (output sites = input sites).
KernelMap submanifold_map(const SiteSet& s, int kernel, int threads);
/// Stride-2 map from `in` to `out` = downsample(in).
KernelMap strided_map(const SiteSet& in, const SiteSet& out, int kernel, int threads);

/// Every level and every layer's map for WACONet-shaped networks: layer 0 is submanifold with
/// first_kernel on level 0; layer l >= 1 is strided with `kernel` from level l-1 to level l.
struct SparseGeometry {
  std::vector<SiteSet> levels;                         ///< strided_layers + 1 levels
  std::vector<std::shared_ptr<const KernelMap>> maps;  ///< strided_layers + 1 maps
  std::vector<std::int64_t> shape;                     ///< extents of the operand
  std::int64_t nnz = 0;
  double build_seconds = 0.0;

  std::int64_t bytes() const;
};

/// Builds all levels and maps of a geometry with `threads` OpenMP threads. Throws
/// kernels::Error when level 0 has duplicate sites or more than 2^31 - 1 of them.
SparseGeometry build_geometry(SiteSet level0, int first_kernel, int strided_layers, int kernel,
                              int threads);

}  // namespace waco::learned
