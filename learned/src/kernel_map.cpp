// Coordinate hash map, downsampling and kernel maps of WACONet's sparse convolutions (WACO paper
// section 4.1.1; MinkowskiEngine's kernel-map convention). Torch-free: the network consumes the
// maps through learned/src/sparse_conv.cpp. See kernel_map.hpp for the conventions.
#include "kernel_map.hpp"

#include <omp.h>

#include <algorithm>
#include <string>

#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::learned {
namespace {

int bits_for(std::int64_t extent) {
  int b = 1;
  while ((std::int64_t{1} << b) < extent) ++b;
  return b;
}

}  // namespace

CoordinateHash::CoordinateHash(const std::vector<std::int64_t>& extent,
                               std::int64_t capacity_hint)
    : dims_(static_cast<int>(extent.size())), extent_(extent), shift_(extent.size(), 0) {
  WACO_ASSERT(dims_ >= 1, "coordinate hash needs at least one dimension");
  int total = 0;
  for (int m = dims_ - 1; m >= 0; --m) {
    shift_[m] = total;
    total += bits_for(std::max<std::int64_t>(extent_[m], 1));
  }
  if (total > 63) {
    std::string ext;
    for (auto e : extent_) ext += (ext.empty() ? "" : "x") + std::to_string(e);
    throw kernels::Error("sparse pattern of extent " + ext + " needs a " + std::to_string(total) +
                             "-bit coordinate key; WACONet supports at most 63 bits",
                         "reduce the tensor's dimensions (e.g. relabel indices densely)");
  }
  std::uint64_t cap = 16;
  while (cap < static_cast<std::uint64_t>(2 * std::max<std::int64_t>(capacity_hint, 1))) cap *= 2;
  mask_ = cap - 1;
  slots_.assign(cap, Slot{kEmpty, -1});
}

std::int32_t CoordinateHash::insert(const std::int32_t* c, std::int32_t id) {
  std::uint64_t key = 0, slot = 0;
  WACO_ASSERT(pack(c, key, slot), "coordinate outside the grid inserted into a coordinate hash");
  while (true) {
    Slot& s = slots_[slot];
    if (s.key == kEmpty) {
      s.key = key;
      s.id = id;
      return id;
    }
    if (s.key == key) return s.id;
    slot = (slot + 1) & mask_;
  }
}

std::vector<std::int32_t> kernel_offsets(int dims, int kernel) {
  WACO_ASSERT(kernel % 2 == 1 && dims >= 1, "kernel offsets need an odd kernel size");
  int count = 1;
  for (int m = 0; m < dims; ++m) count *= kernel;
  std::vector<std::int32_t> off(static_cast<std::size_t>(count) * dims);
  const int r = kernel / 2;
  for (int j = 0; j < count; ++j) {
    int rest = j;
    for (int m = dims - 1; m >= 0; --m) {
      off[static_cast<std::size_t>(j) * dims + m] = rest % kernel - r;
      rest /= kernel;
    }
  }
  return off;
}

SiteSet sites_of(const kernels::CooMatrix& a) {
  SiteSet s;
  s.dims = 2;
  s.extent = {a.rows, a.cols};
  const std::int64_t n = a.nnz();
  s.coords.resize(static_cast<std::size_t>(2 * n));
  for (std::int64_t e = 0; e < n; ++e) {
    s.coords[2 * e] = a.row[e];
    s.coords[2 * e + 1] = a.col[e];
  }
  return s;
}

SiteSet sites_of(const kernels::CooTensor& t) {
  SiteSet s;
  s.dims = t.order();
  s.extent.assign(t.dims.begin(), t.dims.end());
  const std::int64_t n = t.nnz();
  s.coords.resize(static_cast<std::size_t>(s.dims * n));
  for (std::int64_t e = 0; e < n; ++e)
    for (int m = 0; m < s.dims; ++m) s.coords[e * s.dims + m] = t.idx[m][e];
  return s;
}

CoordinateHash build_hash(const SiteSet& s) {
  CoordinateHash h(s.extent, s.sites());
  const std::int64_t n = s.sites();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t got = h.insert(&s.coords[i * s.dims], static_cast<std::int32_t>(i));
    WACO_ASSERT(got == i, "duplicate coordinate in a site set (operand not canonical?)");
  }
  return h;
}

SiteSet downsample(const SiteSet& in, CoordinateHash* out_hash, std::vector<std::int32_t>* parent) {
  SiteSet out;
  out.dims = in.dims;
  out.extent.resize(in.extent.size());
  for (std::size_t m = 0; m < in.extent.size(); ++m) out.extent[m] = (in.extent[m] + 1) / 2;
  CoordinateHash h(out.extent, in.sites());
  const std::int64_t n = in.sites();
  const int d = in.dims;
  std::int32_t next = 0;
  std::int32_t c[8];
  WACO_ASSERT(d <= 8, "at most 8 dimensions");
  if (parent) parent->resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    for (int m = 0; m < d; ++m) c[m] = in.coords[i * d + m] >> 1;
    const std::int32_t id = h.insert(c, next);
    if (parent) (*parent)[i] = id;
    if (id == next) {
      out.coords.insert(out.coords.end(), c, c + d);
      ++next;
    }
  }
  if (out_hash) *out_hash = std::move(h);
  return out;
}

KernelMap submanifold_map(const SiteSet& s, const CoordinateHash& hash, int kernel, int threads) {
  KernelMap km;
  km.dims = s.dims;
  km.kernel = kernel;
  km.stride = 1;
  km.offset_vectors = kernel_offsets(s.dims, kernel);
  km.offsets = static_cast<int>(km.offset_vectors.size()) / s.dims;
  km.in_sites = km.out_sites = s.sites();
  const int d = s.dims;
  const int K = km.offsets;
  const int centre = K / 2;  // offset 0
  km.neighbors.assign(static_cast<std::size_t>(km.out_sites) * K, -1);
  std::int64_t pairs = 0;
  // Writes: (o, j < centre) by o's iteration, (i, K-1-j > centre) by the o with i = o + d_j,
  // which is unique; so no two iterations write the same entry.
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : pairs)
  for (std::int64_t o = 0; o < km.out_sites; ++o) {
    std::int32_t c[8];
    km.neighbors[o * K + centre] = static_cast<std::int32_t>(o);
    ++pairs;
    for (int j = 0; j < centre; ++j) {
      for (int m = 0; m < d; ++m) c[m] = s.coords[o * d + m] + km.offset_vectors[j * d + m];
      const std::int32_t i = hash.find(c);
      if (i < 0) continue;
      km.neighbors[o * K + j] = i;
      km.neighbors[static_cast<std::int64_t>(i) * K + (K - 1 - j)] = static_cast<std::int32_t>(o);
      pairs += 2;
    }
  }
  km.pairs = pairs;
  return km;
}

KernelMap strided_map(const SiteSet& in, const SiteSet& out, const CoordinateHash& out_hash,
                      const std::vector<std::int32_t>& parent, int kernel, int threads) {
  KernelMap km;
  km.dims = in.dims;
  km.kernel = kernel;
  km.stride = 2;
  km.offset_vectors = kernel_offsets(in.dims, kernel);
  km.offsets = static_cast<int>(km.offset_vectors.size()) / in.dims;
  km.in_sites = in.sites();
  km.out_sites = out.sites();
  const int d = in.dims;
  const int K = km.offsets;
  const int r = kernel / 2;
  WACO_ASSERT(static_cast<std::int64_t>(parent.size()) == km.in_sites,
              "strided_map: parent array does not match the input sites");
  km.neighbors.assign(static_cast<std::size_t>(km.out_sites) * K, -1);
  km.reverse.assign(static_cast<std::size_t>(km.in_sites) * K, -1);
  std::int64_t pairs = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : pairs)
  for (std::int64_t i = 0; i < km.in_sites; ++i) {
    const std::int32_t* ci = &in.coords[i * d];
    // Per dimension, the offsets with c - d even (d in [-r, r]); enumerate their product.
    int first[8], count[8], idx[8];
    std::int64_t combos = 1;
    for (int m = 0; m < d; ++m) {
      first[m] = ((ci[m] - (-r)) % 2 == 0) ? -r : -r + 1;
      count[m] = (r - first[m]) / 2 + 1;
      idx[m] = 0;
      combos *= count[m];
    }
    for (std::int64_t t = 0; t < combos; ++t) {
      std::int32_t q[8];
      int j = 0;
      bool own = true;
      for (int m = 0; m < d; ++m) {
        const int dm = first[m] + 2 * idx[m];
        q[m] = (ci[m] - dm) / 2;
        own = own && q[m] == (ci[m] >> 1);
        j = j * kernel + (dm + r);
      }
      const std::int32_t o = own ? parent[i] : out_hash.find(q);
      if (o >= 0) {
        // (o, j) determines i (c = 2 q + d_j): no two iterations write the same entry.
        km.neighbors[static_cast<std::int64_t>(o) * K + j] = static_cast<std::int32_t>(i);
        km.reverse[i * K + j] = o;
        ++pairs;
      }
      for (int m = d - 1; m >= 0; --m) {  // next combination (odometer)
        if (++idx[m] < count[m]) break;
        idx[m] = 0;
      }
    }
  }
  km.pairs = pairs;
  return km;
}

std::int64_t SparseGeometry::bytes() const {
  std::int64_t b = 0;
  for (const auto& l : levels) b += static_cast<std::int64_t>(l.coords.size() * sizeof(std::int32_t));
  for (const auto& m : maps) b += m->bytes();
  return b;
}

SparseGeometry build_geometry(SiteSet level0, int first_kernel, int strided_layers, int kernel,
                              int threads) {
  const double t0 = kernels::now_seconds();
  if (level0.sites() > kernels::kMaxIndex)
    throw kernels::Error("pattern has " + std::to_string(level0.sites()) +
                         " nonzeros; WACONet's site ids are 32-bit");
  SparseGeometry g;
  g.shape = level0.extent;
  g.nnz = level0.sites();
  g.levels.reserve(strided_layers + 1);
  g.levels.push_back(std::move(level0));
  {
    const CoordinateHash hash = build_hash(g.levels[0]);
    g.maps.push_back(std::make_shared<KernelMap>(
        submanifold_map(g.levels[0], hash, first_kernel, threads)));
  }
  for (int l = 1; l <= strided_layers; ++l) {
    CoordinateHash out_hash({1}, 1);
    std::vector<std::int32_t> parent;
    SiteSet down = downsample(g.levels[l - 1], &out_hash, &parent);
    g.maps.push_back(std::make_shared<KernelMap>(
        strided_map(g.levels[l - 1], down, out_hash, parent, kernel, threads)));
    g.levels.push_back(std::move(down));
  }
  g.build_seconds = kernels::now_seconds() - t0;
  return g;
}

}  // namespace waco::learned
