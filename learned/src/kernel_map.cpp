// Sorted levels, downsampling and kernel maps of WACONet's sparse convolutions (WACO paper
// section 4.1.1; MinkowskiEngine's kernel-map convention). Torch-free: the network consumes the
// maps through learned/src/sparse_conv.cpp. See kernel_map.hpp for the conventions and for how
// the maps are built (row merges over sorted levels, in parallel, count then fill).
#include "kernel_map.hpp"

#include <omp.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::learned {
namespace {

constexpr int kMaxDims = 8;

int bits_for(std::int64_t extent) {
  int b = 1;
  while ((std::int64_t{1} << b) < extent) ++b;
  return b;
}

// Packs the prefix (all coordinates but the last) of a grid into 64 bits, preserving the
// lexicographic order.
struct PrefixPacker {
  int pd = 0;  // prefix dimensions
  int shift[kMaxDims] = {};
  std::int64_t extent[kMaxDims] = {};

  explicit PrefixPacker(const std::vector<std::int64_t>& ext) {
    pd = static_cast<int>(ext.size()) - 1;
    WACO_ASSERT(pd >= 0 && pd < kMaxDims, "sites need 1 to 8 dimensions");
    int total = 0;
    for (int m = pd - 1; m >= 0; --m) {
      extent[m] = ext[m];
      shift[m] = total;
      total += bits_for(std::max<std::int64_t>(ext[m], 1));
    }
    if (total > 63) {
      std::string e;
      for (auto v : ext) e += (e.empty() ? "" : "x") + std::to_string(v);
      throw kernels::Error("sparse pattern of extent " + e + " needs a " + std::to_string(total) +
                               "-bit row key; WACONet supports at most 63 bits",
                           "reduce the tensor's dimensions (e.g. relabel indices densely)");
    }
  }
  // False when p is outside the grid.
  bool pack(const std::int64_t* p, std::uint64_t& key) const {
    key = 0;
    for (int m = 0; m < pd; ++m) {
      if (p[m] < 0 || p[m] >= extent[m]) return false;
      key |= static_cast<std::uint64_t>(p[m]) << shift[m];
    }
    return true;
  }
};

// Row of `rows` with this key, or -1.
std::int64_t find_row(const SiteRows& rows, std::uint64_t key) {
  const auto it = std::lower_bound(rows.key.begin(), rows.key.end(), key);
  return it != rows.key.end() && *it == key ? it - rows.key.begin() : -1;
}

bool less_site(const std::int32_t* a, const std::int32_t* b, int d) {
  for (int m = 0; m < d; ++m)
    if (a[m] != b[m]) return a[m] < b[m];
  return false;
}

// Sorts the sites of s lexicographically if they are not; throws on duplicates.
void make_sorted(SiteSet& s) {
  const int d = s.dims;
  const std::int64_t n = s.sites();
  bool sorted = true;
  for (std::int64_t i = 1; i < n && sorted; ++i)
    sorted = less_site(&s.coords[(i - 1) * d], &s.coords[i * d], d);
  if (sorted) return;
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return less_site(&s.coords[a * d], &s.coords[b * d], d);
  });
  std::vector<std::int32_t> c(s.coords.size());
  for (std::int64_t i = 0; i < n; ++i)
    std::copy_n(&s.coords[order[i] * d], d, &c[i * d]);
  for (std::int64_t i = 1; i < n; ++i)
    if (!less_site(&c[(i - 1) * d], &c[i * d], d))
      throw kernels::Error("duplicate coordinate in a sparse pattern",
                           "canonicalize the operand (kernels::canonicalize) before WACONet");
  s.coords = std::move(c);
}

// Chunk t of `chunks` over rows, balanced by site count: rows [row_begin(t), row_begin(t+1)).
std::int64_t row_begin(const SiteRows& rows, int chunks, int t) {
  const std::int64_t n = rows.start.back();
  if (t >= chunks) return rows.rows();
  const std::int64_t target = n * t / chunks;
  return std::lower_bound(rows.start.begin(), rows.start.end() - 1, target) - rows.start.begin();
}

}  // namespace

SiteRows rows_of(const SiteSet& s) {
  SiteRows r;
  const int d = s.dims;
  const std::int64_t n = s.sites();
  const PrefixPacker pk(s.extent);
  r.start.push_back(0);
  std::int64_t p[kMaxDims];
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t* c = &s.coords[i * d];
    bool same = i > 0;
    for (int m = 0; m < d - 1 && same; ++m) same = c[m] == s.coords[(i - 1) * d + m];
    if (same) continue;
    if (i > 0) r.start.push_back(i);
    for (int m = 0; m < d - 1; ++m) p[m] = c[m];
    std::uint64_t key = 0;
    const bool inside = pk.pack(p, key);
    WACO_ASSERT(inside, "site outside its grid");
    r.key.push_back(key);
  }
  if (n > 0) r.start.push_back(n);
  return r;
}

KernelMap join_maps(const std::vector<const KernelMap*>& maps, int threads) {
  WACO_ASSERT(!maps.empty(), "join_maps needs at least one map");
  KernelMap j;
  j.dims = maps[0]->dims;
  j.kernel = maps[0]->kernel;
  j.stride = maps[0]->stride;
  j.offsets = maps[0]->offsets;
  j.offset_vectors = maps[0]->offset_vectors;
  const int K = j.offsets;
  const std::size_t B = maps.size();
  std::vector<std::int64_t> in_base(B, 0), out_base(B, 0);
  for (std::size_t b = 0; b < B; ++b) {
    const KernelMap& m = *maps[b];
    WACO_ASSERT(m.offsets == K && m.stride == j.stride && m.kernel == j.kernel && m.dims == j.dims,
                "join_maps: maps of different layers");
    in_base[b] = j.in_sites;
    out_base[b] = j.out_sites;
    j.in_sites += m.in_sites;
    j.out_sites += m.out_sites;
    j.pairs += m.pairs;
  }
  if (j.in_sites > kernels::kMaxIndex || j.out_sites > kernels::kMaxIndex)
    throw kernels::Error("a WACONet batch of " + std::to_string(j.in_sites) +
                             " sites exceeds the 32-bit site ids",
                         "split the batch");
  // Destination of (offset, map): offsets outer, maps inner.
  std::vector<std::int64_t> dst(static_cast<std::size_t>(K) * B + 1, 0);
  for (int o = 0; o < K; ++o)
    for (std::size_t b = 0; b < B; ++b)
      dst[o * B + b + 1] = dst[o * B + b] + maps[b]->pairs_of(o);
  j.offset_start.assign(K + 1, 0);
  for (int o = 0; o <= K; ++o) j.offset_start[o] = dst[o * B];
  j.in.resize(static_cast<std::size_t>(j.pairs));
  j.out.resize(static_cast<std::size_t>(j.pairs));
  const auto tasks = static_cast<std::int64_t>(K * B);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (std::int64_t t = 0; t < tasks; ++t) {
    const int o = static_cast<int>(t / static_cast<std::int64_t>(B));
    const std::size_t b = static_cast<std::size_t>(t % static_cast<std::int64_t>(B));
    const KernelMap& m = *maps[b];
    const auto ib = static_cast<std::int32_t>(in_base[b]);
    const auto ob = static_cast<std::int32_t>(out_base[b]);
    for (std::int64_t p = m.offset_start[o], q = dst[t]; p < m.offset_start[o + 1]; ++p, ++q) {
      j.in[q] = m.in[p] + ib;
      j.out[q] = m.out[p] + ob;
    }
  }
  return j;
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

std::vector<std::int32_t> dense_neighbors(const KernelMap& m) {
  std::vector<std::int32_t> nb(static_cast<std::size_t>(m.out_sites) * m.offsets, -1);
  for (int j = 0; j < m.offsets; ++j)
    for (std::int64_t p = m.offset_start[j]; p < m.offset_start[j + 1]; ++p)
      nb[static_cast<std::size_t>(m.out[p]) * m.offsets + j] = m.in[p];
  return nb;
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
  make_sorted(s);
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
  make_sorted(s);
  return s;
}

SiteSet downsample(const SiteSet& in, int threads) {
  SiteSet out;
  const int d = in.dims;
  out.dims = d;
  out.extent.resize(in.extent.size());
  for (std::size_t m = 0; m < in.extent.size(); ++m) out.extent[m] = (in.extent[m] + 1) / 2;
  const SiteRows rows = rows_of(in);
  const std::int64_t R = rows.rows();
  if (R == 0) return out;
  const PrefixPacker in_pk(in.extent), out_pk(out.extent);
  const int pd = d - 1;
  // The output rows: distinct halved prefixes, sorted (in 2-D they already are).
  std::vector<std::uint64_t> out_keys(static_cast<std::size_t>(R));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t r = 0; r < R; ++r) {
    std::int64_t p[kMaxDims];
    for (int m = 0; m < pd; ++m) p[m] = in.coords[rows.start[r] * d + m] >> 1;
    out_pk.pack(p, out_keys[r]);
  }
  if (!std::is_sorted(out_keys.begin(), out_keys.end()))
    std::sort(out_keys.begin(), out_keys.end());
  out_keys.erase(std::unique(out_keys.begin(), out_keys.end()), out_keys.end());
  const auto OR = static_cast<std::int64_t>(out_keys.size());
  const int E = 1 << pd;  // input rows per output row: 2 P + e, e in {0, 1}^pd
  std::vector<std::int64_t> count(static_cast<std::size_t>(OR) + 1, 0);
  // The prefix of output row q.
  auto out_prefix = [&](std::int64_t q, std::int64_t* P) {
    std::uint64_t key = out_keys[q];
    for (int m = pd - 1; m >= 0; --m) {
      const int bits = bits_for(std::max<std::int64_t>(out.extent[m], 1));
      P[m] = static_cast<std::int64_t>(key & ((std::uint64_t{1} << bits) - 1));
      key >>= bits;
    }
  };
  // Merges the halved columns of the input rows 2 P + e (e in {0, 1}^pd; any may be absent) of
  // output row q: emit(c) receives the distinct halved columns in increasing order.
  auto merge_row = [&](std::int64_t q, auto&& emit) {
    std::int64_t pos[1 << (kMaxDims - 1)], end[1 << (kMaxDims - 1)];
    int lists = 0;
    std::int64_t P[kMaxDims];
    out_prefix(q, P);
    for (int e = 0; e < E; ++e) {
      std::int64_t p[kMaxDims];
      for (int m = 0; m < pd; ++m) p[m] = 2 * P[m] + ((e >> (pd - 1 - m)) & 1);
      std::uint64_t key = 0;
      if (!in_pk.pack(p, key)) continue;
      const std::int64_t r = find_row(rows, key);
      if (r < 0) continue;
      pos[lists] = rows.start[r];
      end[lists] = rows.start[r + 1];
      ++lists;
    }
    while (true) {
      std::int64_t best = -1;
      for (int l = 0; l < lists; ++l)
        if (pos[l] < end[l]) {
          const std::int64_t c = in.coords[pos[l] * d + pd] >> 1;
          if (best < 0 || c < best) best = c;
        }
      if (best < 0) break;
      for (int l = 0; l < lists; ++l)
        while (pos[l] < end[l] && (in.coords[pos[l] * d + pd] >> 1) == best) ++pos[l];
      emit(best);
    }
  };
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
  for (std::int64_t q = 0; q < OR; ++q) {
    std::int64_t n = 0;
    merge_row(q, [&](std::int64_t) { ++n; });
    count[q + 1] = n;
  }
  for (std::int64_t q = 0; q < OR; ++q) count[q + 1] += count[q];
  out.coords.resize(static_cast<std::size_t>(count[OR] * d));
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
  for (std::int64_t q = 0; q < OR; ++q) {
    std::int64_t P[kMaxDims];
    out_prefix(q, P);
    std::int64_t at = count[q];
    merge_row(q, [&](std::int64_t c) {
      std::int32_t* dst = &out.coords[at * d];
      for (int m = 0; m < pd; ++m) dst[m] = static_cast<std::int32_t>(P[m]);
      dst[pd] = static_cast<std::int32_t>(c);
      ++at;
    });
  }
  return out;
}

KernelMap merge_map(const SiteSet& in, const SiteSet& out, int kernel, int stride, int threads) {
  KernelMap km;
  const int d = in.dims;
  km.dims = d;
  km.kernel = kernel;
  km.stride = stride;
  km.offset_vectors = kernel_offsets(d, kernel);
  km.offsets = static_cast<int>(km.offset_vectors.size()) / d;
  km.in_sites = in.sites();
  km.out_sites = out.sites();
  const int K = km.offsets;
  const int r = kernel / 2;
  const int pd = d - 1;
  const int G = K / kernel;  // offset groups that share a prefix offset
  km.offset_start.assign(K + 1, 0);
  const SiteRows in_rows = rows_of(in), out_rows = rows_of(out);
  const std::int64_t OR = out_rows.rows();
  if (OR == 0 || in_rows.rows() == 0) return km;
  const PrefixPacker in_pk(in.extent);
  const int T = std::max(1, threads);
  const int chunks = 4 * T;
  // One pass: chunk t writes the pairs of offset j into a slot of capacity "output sites of the
  // chunk" (an offset gives every output at most one pair) of an uninitialized scratch array of
  // K x out_sites entries; only the pages written become resident. The slots are then copied,
  // offset by offset and chunk by chunk, into the exact arrays.
  const std::int64_t n_out = km.out_sites;
  std::unique_ptr<std::int32_t[]> s_in(new std::int32_t[static_cast<std::size_t>(K) * n_out]);
  std::unique_ptr<std::int32_t[]> s_out(new std::int32_t[static_cast<std::size_t>(K) * n_out]);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(chunks) * K, 0);
#pragma omp parallel for num_threads(T) schedule(dynamic, 1)
  for (int t = 0; t < chunks; ++t) {
    const std::int64_t R0 = row_begin(out_rows, chunks, t), R1 = row_begin(out_rows, chunks, t + 1);
    if (R0 >= R1) continue;
    const std::int64_t site0 = out_rows.start[R0];
    std::int64_t* cnt = &counts[static_cast<std::size_t>(t) * K];
    // Per offset group, the input row reached from the previous output row: the target keys
    // increase with the output row, so the search continues from there (galloping).
    std::int64_t cursor[64];
    WACO_ASSERT(G <= 64, "at most 64 offset groups");
    for (int g = 0; g < G; ++g) cursor[g] = 0;
    for (std::int64_t R = R0; R < R1; ++R) {
      const std::int64_t ob = out_rows.start[R], oe = out_rows.start[R + 1];
      for (int g = 0; g < G; ++g) {
        std::int64_t p[kMaxDims];
        for (int m = 0; m < pd; ++m)
          p[m] = static_cast<std::int64_t>(stride) * out.coords[ob * d + m] +
                 km.offset_vectors[(g * kernel) * d + m];
        std::uint64_t key = 0;
        if (!in_pk.pack(p, key)) continue;
        // Gallop from the cursor to the first row with a key >= key.
        std::int64_t lo = cursor[g], step = 1, hi = lo;
        const std::int64_t nr = in_rows.rows();
        while (hi < nr && in_rows.key[hi] < key) {
          lo = hi + 1;
          hi += step;
          step *= 2;
        }
        hi = std::min(hi, nr);
        const std::int64_t ir =
            std::lower_bound(in_rows.key.begin() + lo, in_rows.key.begin() + hi, key) -
            in_rows.key.begin();
        cursor[g] = ir;
        if (ir >= nr || in_rows.key[ir] != key) continue;
        std::int64_t i = in_rows.start[ir];
        const std::int64_t ie = in_rows.start[ir + 1];
        for (std::int64_t o = ob; o < oe; ++o) {
          const std::int64_t c = static_cast<std::int64_t>(stride) * out.coords[o * d + pd];
          while (i < ie && in.coords[i * d + pd] < c - r) ++i;
          for (std::int64_t q = i; q < ie; ++q) {
            const std::int64_t x = in.coords[q * d + pd];
            if (x > c + r) break;
            const int j = g * kernel + static_cast<int>(x - c + r);
            const std::size_t at = static_cast<std::size_t>(j) * n_out + site0 + cnt[j]++;
            s_in[at] = static_cast<std::int32_t>(q);
            s_out[at] = static_cast<std::int32_t>(o);
          }
        }
      }
    }
  }
  // Positions: offsets outer, chunks inner.
  std::vector<std::int64_t> pos(counts.size(), 0);
  std::int64_t total = 0;
  for (int j = 0; j < K; ++j) {
    km.offset_start[j] = total;
    for (int t = 0; t < chunks; ++t) {
      pos[static_cast<std::size_t>(t) * K + j] = total;
      total += counts[static_cast<std::size_t>(t) * K + j];
    }
  }
  km.offset_start[K] = total;
  km.pairs = total;
  km.in.resize(static_cast<std::size_t>(total));
  km.out.resize(static_cast<std::size_t>(total));
#pragma omp parallel for num_threads(T) schedule(dynamic, 1) collapse(2)
  for (int j = 0; j < K; ++j)
    for (int t = 0; t < chunks; ++t) {
      const std::int64_t R0 = row_begin(out_rows, chunks, t);
      if (R0 >= out_rows.rows()) continue;
      const std::size_t from = static_cast<std::size_t>(j) * n_out + out_rows.start[R0];
      const std::size_t k = static_cast<std::size_t>(t) * K + j;
      std::copy_n(&s_in[from], counts[k], km.in.data() + pos[k]);
      std::copy_n(&s_out[from], counts[k], km.out.data() + pos[k]);
    }
  return km;
}

KernelMap submanifold_map(const SiteSet& s, int kernel, int threads) {
  return merge_map(s, s, kernel, 1, threads);
}

KernelMap strided_map(const SiteSet& in, const SiteSet& out, int kernel, int threads) {
  return merge_map(in, out, kernel, 2, threads);
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
  make_sorted(level0);
  SparseGeometry g;
  g.shape = level0.extent;
  g.nnz = level0.sites();
  g.levels.reserve(strided_layers + 1);
  g.levels.push_back(std::move(level0));
  g.maps.push_back(
      std::make_shared<KernelMap>(submanifold_map(g.levels[0], first_kernel, threads)));
  for (int l = 1; l <= strided_layers; ++l) {
    SiteSet down = downsample(g.levels[l - 1], threads);
    g.maps.push_back(
        std::make_shared<KernelMap>(strided_map(g.levels[l - 1], down, kernel, threads)));
    g.levels.push_back(std::move(down));
  }
  g.build_seconds = kernels::now_seconds() - t0;
  return g;
}

}  // namespace waco::learned
