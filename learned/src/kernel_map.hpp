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
// A kernel map stores, for every output site and offset, the input site or -1 ("neighbors"), and
// for strided maps the inverse, for every input site and offset, the output site or -1
// ("reverse"); for stride 1 the inverse is neighbors with the mirrored offset (K-1-j).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "waco/kernels/sparse.hpp"

namespace waco::learned {

/// The active sites of one level: coordinates [sites][dims] and the grid extent per dimension.
struct SiteSet {
  int dims = 2;
  std::vector<std::int64_t> extent;
  std::vector<std::int32_t> coords;

  std::int64_t sites() const { return dims ? static_cast<std::int64_t>(coords.size()) / dims : 0; }
};

/// Open-addressing (linear probing) map from a coordinate to a site id. The slot of a coordinate
/// is hash(all but the last coordinate) + last coordinate, so the neighbours of a site along the
/// last dimension sit in neighbouring slots: a row-major sweep of lookups walks the table almost
/// sequentially instead of missing the cache once per lookup.
class CoordinateHash {
 public:
  /// A table for up to `capacity_hint` sites on a grid of the given extent. Throws kernels::Error
  /// when the packed coordinate needs more than 63 bits.
  CoordinateHash(const std::vector<std::int64_t>& extent, std::int64_t capacity_hint);
  /// Inserts c -> id unless c is present; returns the id stored for c (the old one if present).
  std::int32_t insert(const std::int32_t* c, std::int32_t id);
  /// The id of c, or -1 when c is absent or outside the grid. Inline: the kernel-map loops
  /// call it hundreds of millions of times.
  std::int32_t find(const std::int32_t* c) const {
    std::uint64_t key = 0, slot = 0;
    if (!pack(c, key, slot)) return -1;
    while (true) {
      const Slot& s = slots_[slot];
      if (s.key == key) return s.id;
      if (s.key == kEmpty) return -1;
      slot = (slot + 1) & mask_;
    }
  }
  std::int64_t bytes() const { return static_cast<std::int64_t>(slots_.size() * sizeof(Slot)); }

 private:
  struct Slot {
    std::uint64_t key;
    std::int32_t id;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  bool pack(const std::int32_t* c, std::uint64_t& key, std::uint64_t& slot) const {
    key = 0;
    for (int m = 0; m < dims_; ++m) {
      if (c[m] < 0 || c[m] >= extent_[m]) return false;
      key |= static_cast<std::uint64_t>(c[m]) << shift_[m];
    }
    const std::uint64_t prefix = dims_ > 1 ? key >> shift_[dims_ - 2] : 0;
    slot = (mix(prefix) + static_cast<std::uint64_t>(c[dims_ - 1])) & mask_;
    return true;
  }
  // splitmix64's finalizer: a cheap, well-mixing 64-bit hash.
  static std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
  }

  int dims_;
  std::vector<std::int64_t> extent_;
  std::vector<int> shift_;
  std::uint64_t mask_ = 0;
  std::vector<Slot> slots_;
};

/// The kernel map of one layer (see the file comment).
struct KernelMap {
  int dims = 2;
  int kernel = 1;
  int stride = 1;
  int offsets = 1;                      ///< kernel^dims
  std::int64_t in_sites = 0;
  std::int64_t out_sites = 0;
  std::int64_t pairs = 0;               ///< entries of neighbors that are not -1
  std::vector<std::int32_t> neighbors;  ///< [out_sites][offsets]
  std::vector<std::int32_t> reverse;    ///< [in_sites][offsets]; empty when stride == 1
  std::vector<std::int32_t> offset_vectors;  ///< [offsets][dims]

  std::int64_t bytes() const {
    return static_cast<std::int64_t>((neighbors.size() + reverse.size()) * sizeof(std::int32_t));
  }
};

/// Offsets of a kernel of size k in `dims` dimensions, row-major, [k^dims][dims].
std::vector<std::int32_t> kernel_offsets(int dims, int kernel);

/// Level 0 of a matrix (dims 2) or tensor (its order). Precondition: canonical operand.
SiteSet sites_of(const kernels::CooMatrix& a);
SiteSet sites_of(const kernels::CooTensor& t);

/// The hash map of a level's sites (site id = position in `s`).
CoordinateHash build_hash(const SiteSet& s);

/// floor(c / 2) of every site, deduplicated in order of first appearance; when out_hash is given
/// it receives the hash map of the result (built anyway while deduplicating), and when parent is
/// given, parent[i] = the output site of input site i.
SiteSet downsample(const SiteSet& in, CoordinateHash* out_hash = nullptr,
                   std::vector<std::int32_t>* parent = nullptr);

/// Stride-1 map (output sites = input sites), lookups in the level's hash. Looks up only the
/// offsets before the centre: (o, j) -> i gives (i, K-1-j) -> o by symmetry.
KernelMap submanifold_map(const SiteSet& s, const CoordinateHash& hash, int kernel, int threads);
/// Stride-2 map from `in` to `out` = downsample(in, &out_hash, &parent). Input-driven: input c
/// can only feed outputs q = (c - d) / 2 with c - d even (1 to 2^dims candidates for k = 3
/// instead of k^dims lookups per output); the candidate floor(c / 2) is parent[i] (no lookup).
KernelMap strided_map(const SiteSet& in, const SiteSet& out, const CoordinateHash& out_hash,
                      const std::vector<std::int32_t>& parent, int kernel, int threads);

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

/// Builds all levels and maps of a geometry; `threads` OpenMP threads for the lookups.
SparseGeometry build_geometry(SiteSet level0, int first_kernel, int strided_layers, int kernel,
                              int threads);

}  // namespace waco::learned
