// Seeded synthetic sparse matrices and tensors (issue 2, "Matrix generators"; ARCHITECTURE.md §8).
//
// Every kind is deterministic in (parameters, seed): all randomness comes from SplitMix64
// (dense.hpp) through the small Rng below, except the two Boost.Graph generators, which are fed a
// boost::random engine seeded from the seed (Boost's engines are specified exactly; their output
// through Boost's distributions is fixed for a given Boost version). Coordinates are produced
// first; values are a pure function of (seed, row, col) (value_at()), so merging duplicate edges
// never pushes a value outside (-1, 1) and a value does not depend on generation order.
//
// Sizes are checked before anything is allocated: no dimension over kMaxIndex, no request whose
// (upper bound or expected) entry count exceeds kMaxIndex, the 32-bit storage limit, and none
// whose working memory would exceed the machine's physical memory.
//
// Exact counts: uniform and generate_tensor return exactly the requested number of distinct
// entries (sample_distinct); banded and blocks keep each position with probability fill; R-MAT,
// PLOD and small-world merge repeated edges, so they return at most the drawn edge count.
#include "waco/kernels/generators.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <sstream>
#include <utility>

#include <unistd.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/plod_generator.hpp>
#include <boost/graph/small_world_generator.hpp>
#include <boost/random/linear_congruential.hpp>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/seed_seq.hpp>

#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"

namespace waco::kernels {
namespace {

using u64 = std::uint64_t;
using u128 = unsigned __int128;

constexpr u64 kGolden = 0x9E3779B97F4A7C15ull;


/// The SplitMix64 sequence (Steele, Lea, Flood 2014) started from a key.
class Rng {
 public:
  explicit Rng(u64 key) : state_(splitmix64(key)) {}
  u64 next() {
    u64 r = splitmix64(state_);
    state_ += kGolden;
    return r;
  }
  /// Uniform in [0, n), n >= 1, exact (Lemire's multiply-shift with rejection).
  u64 below(u64 n) {
    u64 x = next();
    u128 m = static_cast<u128>(x) * n;
    u64 low = static_cast<u64>(m);
    if (low < n) {
      const u64 threshold = (0 - n) % n;
      while (low < threshold) {
        x = next();
        m = static_cast<u128>(x) * n;
        low = static_cast<u64>(m);
      }
    }
    return static_cast<u64>(m >> 64);
  }
  /// Uniform in [0, n), n >= 1, for 128-bit ranges (rejection on the bit length of n - 1).
  u128 below128(u128 n) {
    if (n <= (static_cast<u128>(1) << 64)) {
      if (n == (static_cast<u128>(1) << 64)) return next();
      return below(static_cast<u64>(n));
    }
    const u128 top = n - 1;
    int bits = 0;
    while (bits < 128 && (top >> bits) != 0) ++bits;
    const u128 mask = bits == 128 ? ~static_cast<u128>(0) : ((static_cast<u128>(1) << bits) - 1);
    for (;;) {
      const u128 r = ((static_cast<u128>(next()) << 64) | next()) & mask;
      if (r < n) return r;
    }
  }

 private:
  u64 state_;
};

/// The entry value at (row, col): 23 random bits mapped to the midpoints (k + 0.5) / 2^22 - 1,
/// uniform over (-1, 1), never exactly 0 (so no generated entry is an explicit zero).
float unit_value(u64 h) {
  const u64 k = h >> 41;  // 23 bits
  return static_cast<float>((static_cast<double>(k) + 0.5) / 4194304.0 - 1.0);
}

u64 coordinate_key(u64 row, u64 col) { return (row << 32) ^ col; }

float value_at(u64 value_key, u64 row, u64 col) {
  return unit_value(splitmix64(value_key ^ splitmix64(coordinate_key(row, col))));
}

/// A Bernoulli(fill) decision for (row, col), independent of the value stream.
class Keep {
 public:
  Keep(u64 key, double fill)
      : key_(key),
        all_(fill >= 1.0),
        threshold_(static_cast<u64>(std::ldexp(fill, 53))) {}
  bool operator()(u64 row, u64 col) const {
    if (all_) return true;
    return (splitmix64(key_ ^ splitmix64(coordinate_key(row, col) + kGolden)) >> 11) < threshold_;
  }

 private:
  u64 key_;
  bool all_;
  u64 threshold_;
};

/// Per-spec keys: one for values, one for Bernoulli keep decisions, one for coordinates.
struct Keys {
  u64 value, keep, coords;
};
Keys make_keys(const std::string& kind, u64 seed) {
  const u64 base = splitmix64(seed ^ fnv1a(kind));
  return {splitmix64(base ^ 0x76616C7565ull), splitmix64(base ^ 0x6B656570ull),
          splitmix64(base ^ 0x636F6F7264ull)};
}

/// A number for a message: integers in full ("2000000000", not "2e+09"), others as ostream does.
std::string fmt(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::abs(x) < 9e15) {
    return std::to_string(static_cast<long long>(x));
  }
  std::ostringstream s;
  s << x;
  return s.str();
}

[[noreturn]] void bad(const std::string& kind, const std::string& what, const std::string& hint) {
  throw Error("generate " + kind + ": " + what, hint);
}

void check_range(const std::string& kind, const char* name, std::int64_t v, std::int64_t lo,
                 std::int64_t hi) {
  if (v < lo || v > hi) {
    bad(kind,
        std::string(name) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
            "] (got " + std::to_string(v) + ")",
        std::string("choose ") + name + " within the range");
  }
}

void check_fill(const std::string& kind, double fill) {
  if (!(fill > 0.0 && fill <= 1.0)) {
    bad(kind, "fill must be in (0, 1] (got " + fmt(fill) + ")",
        "fill is the fraction of positions kept");
  }
}

/// Bytes of working memory per generated entry: the COO output (12 B) plus, for kinds that
/// sample keys (3 x 8 B: keys, a batch, the radix buffer) or canonicalize unsorted edges, their
/// temporaries.
constexpr double kBytesSorted = 12.0, kBytesSampled = 36.0, kBytesUnsorted = 40.0;

/// Refuses entry counts over the 32-bit storage limit and requests whose working memory would
/// exceed this machine's physical memory (estimated before allocating anything).
void check_nnz_bound(const std::string& kind, double bound, const std::string& what,
                     double bytes_per_entry) {
  if (bound > static_cast<double>(kMaxIndex)) {
    bad(kind,
        what + " is " + fmt(bound) + ", over the 32-bit storage limit of " +
            std::to_string(kMaxIndex) + " entries",
        "choose smaller sizes");
  }
  const double need = bound * bytes_per_entry, have = physical_memory_bytes();
  if (need > have) {
    bad(kind,
        what + " is " + fmt(bound) + ", which needs about " + fmt(std::ceil(need / 1e9)) +
            " GB of memory; this machine has " + fmt(std::floor(have / 1e9)) + " GB",
        "choose smaller sizes");
  }
}

/// Sorts 64-bit keys below 2^bits with an LSD radix sort (11-bit digits): O(n * bits / 11).
void radix_sort(std::vector<u64>& a, int bits) {
  if (a.size() < 256) {
    std::sort(a.begin(), a.end());
    return;
  }
  constexpr int kDigit = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kDigit;
  std::vector<u64> tmp(a.size());
  std::vector<std::size_t> count(kBuckets);
  for (int shift = 0; shift < bits; shift += kDigit) {
    std::fill(count.begin(), count.end(), 0);
    for (u64 x : a) ++count[(x >> shift) & (kBuckets - 1)];
    std::size_t sum = 0;
    for (auto& c : count) {
      const std::size_t n = c;
      c = sum;
      sum += n;
    }
    for (u64 x : a) tmp[count[(x >> shift) & (kBuckets - 1)]++] = x;
    a.swap(tmp);
  }
}

int bit_length(u64 x) {
  int b = 0;
  while (b < 64 && (x >> b) != 0) ++b;
  return b;
}

/// Sorts and removes repeats.
void sort_unique(std::vector<u64>& a, int bits) {
  radix_sort(a, bits);
  a.erase(std::unique(a.begin(), a.end()), a.end());
}
void sort_unique(std::vector<u128>& a, int /*bits*/) {
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
}

template <typename Key>
Key draw(Rng& rng, Key n);
template <>
u64 draw<u64>(Rng& rng, u64 n) {
  return rng.below(n);
}
template <>
u128 draw<u128>(Rng& rng, u128 n) {
  return rng.below128(n);
}

/// Exactly k distinct keys from [0, n), sorted, uniformly over all k-subsets: the first k
/// distinct values of an i.i.d. uniform sequence, drawn in batches of the current deficit so
/// the set never overshoots. Each round costs a radix sort and a merge, O(k); while k <= n / 2
/// at most half of a round's draws repeat, so the deficit shrinks geometrically (callers take the
/// complement beyond that). For k << n one round plus a tiny top-up is the usual case.
template <typename Key>
std::vector<Key> sample_distinct(Rng& rng, Key n, std::size_t k, int bits) {
  std::vector<Key> have;
  have.reserve(k);
  std::vector<Key> batch, merged;
  while (have.size() < k) {
    const std::size_t deficit = k - have.size();
    batch.resize(deficit);
    for (auto& x : batch) x = draw<Key>(rng, n);
    sort_unique(batch, bits);
    if (have.empty()) {
      have.swap(batch);
      continue;
    }
    merged.clear();
    merged.reserve(have.size() + batch.size());
    std::merge(have.begin(), have.end(), batch.begin(), batch.end(), std::back_inserter(merged));
    merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
    have.swap(merged);
  }
  WACO_ASSERT(have.size() == k, "sample_distinct overshot");
  return have;
}

/// Exactly k distinct sorted keys of [0, n), k <= n, n <= 2^63: samples the complement when
/// k > n / 2 so the batch loop stays short.
std::vector<u64> sample_sorted_subset(Rng& rng, u64 n, u64 k) {
  WACO_ASSERT(k <= n, "sample_sorted_subset: k > n");
  const int bits = bit_length(n - 1 + (n == 0));
  if (k <= n / 2) return sample_distinct<u64>(rng, n, static_cast<std::size_t>(k), bits);
  const std::vector<u64> excluded =
      sample_distinct<u64>(rng, n, static_cast<std::size_t>(n - k), bits);
  std::vector<u64> out;
  out.reserve(static_cast<std::size_t>(k));
  std::size_t e = 0;
  for (u64 x = 0; x < n; ++x) {
    if (e < excluded.size() && excluded[e] == x) {
      ++e;
      continue;
    }
    out.push_back(x);
  }
  return out;
}

/// Fills the values of a coordinate-only matrix from the value stream.
void assign_values(CooMatrix& m, u64 value_key) {
  m.val.resize(m.row.size());
  for (std::size_t e = 0; e < m.row.size(); ++e) {
    m.val[e] = value_at(value_key, static_cast<u64>(m.row[e]), static_cast<u64>(m.col[e]));
  }
}

/// Canonicalizes coordinates produced in any order (duplicates merged), then assigns values.
CooMatrix finish_unsorted(CooMatrix m, u64 value_key) {
  m.val.assign(m.row.size(), 0.0f);
  canonicalize(m);
  assign_values(m, value_key);
  return m;
}

/// Checks the postcondition of the generators that emit coordinates in canonical order.
CooMatrix finish_sorted(CooMatrix m, u64 value_key) {
  assign_values(m, value_key);
  WACO_ASSERT(is_canonical(m), "a generator emitted entries out of canonical order");
  return m;
}

void push(CooMatrix& m, u64 r, u64 c) {
  m.row.push_back(static_cast<index_t>(r));
  m.col.push_back(static_cast<index_t>(c));
}

struct Dims {
  std::int64_t rows, cols;
};

Dims matrix_dims(const std::string& kind, const GeneratorSpec& s) {
  check_range(kind, "rows", s.rows, 1, kMaxIndex);
  if (s.cols != 0) check_range(kind, "cols", s.cols, 1, kMaxIndex);
  return {s.rows, s.cols == 0 ? s.rows : s.cols};
}

// ---- uniform ------------------------------------------------------------------------------

CooMatrix gen_uniform(const GeneratorSpec& s) {
  const std::string kind = "uniform";
  const Dims d = matrix_dims(kind, s);
  const u64 cells = static_cast<u64>(d.rows) * static_cast<u64>(d.cols);
  if (s.nnz < 0 || static_cast<u64>(s.nnz) > cells) {
    bad(kind,
        "nnz must be in [0, rows * cols = " + std::to_string(cells) + "] (got " +
            std::to_string(s.nnz) + ")",
        "lower nnz or enlarge the matrix");
  }
  check_nnz_bound(kind, static_cast<double>(s.nnz), "nnz", kBytesSampled);
  const Keys k = make_keys(kind, s.seed);
  Rng rng(k.coords);
  const std::vector<u64> cells_taken = sample_sorted_subset(rng, cells, static_cast<u64>(s.nnz));
  CooMatrix m;
  m.rows = static_cast<index_t>(d.rows);
  m.cols = static_cast<index_t>(d.cols);
  m.row.reserve(cells_taken.size());
  m.col.reserve(cells_taken.size());
  const u64 cols = static_cast<u64>(d.cols);
  for (u64 x : cells_taken) push(m, x / cols, x % cols);
  return finish_sorted(std::move(m), k.value);
}

// ---- banded -------------------------------------------------------------------------------

CooMatrix gen_banded(const GeneratorSpec& s) {
  const std::string kind = "banded";
  const Dims d = matrix_dims(kind, s);
  check_range(kind, "bandwidth", s.bandwidth, 0, std::max(d.rows, d.cols) - 1);
  check_fill(kind, s.fill);
  const std::int64_t bw = s.bandwidth;
  // Positions in the band, one diagonal offset at a time (O(bandwidth), stopping once the count
  // is certain to be refused).
  std::int64_t positions = 0;
  for (std::int64_t off = -bw; off <= bw && positions <= (std::int64_t{1} << 40); ++off) {
    const std::int64_t first = std::max<std::int64_t>(0, -off);
    const std::int64_t last = std::min<std::int64_t>(d.rows, d.cols - off);  // exclusive
    if (last > first) positions += last - first;
  }
  check_nnz_bound(kind, static_cast<double>(positions) * s.fill, "the expected nnz",
                  kBytesSorted);
  const Keys k = make_keys(kind, s.seed);
  const Keep keep(k.keep, s.fill);
  CooMatrix m;
  m.rows = static_cast<index_t>(d.rows);
  m.cols = static_cast<index_t>(d.cols);
  const auto expected = static_cast<std::size_t>(static_cast<double>(positions) * s.fill * 1.01);
  m.row.reserve(expected);
  m.col.reserve(expected);
  for (std::int64_t i = 0; i < d.rows; ++i) {
    const std::int64_t lo = std::max<std::int64_t>(0, i - bw);
    const std::int64_t hi = std::min<std::int64_t>(d.cols - 1, i + bw);
    for (std::int64_t j = lo; j <= hi; ++j) {
      if (keep(static_cast<u64>(i), static_cast<u64>(j))) push(m, i, j);
    }
  }
  return finish_sorted(std::move(m), k.value);
}

// ---- blocks -------------------------------------------------------------------------------

CooMatrix gen_blocks(const GeneratorSpec& s) {
  const std::string kind = "blocks";
  const Dims d = matrix_dims(kind, s);
  check_range(kind, "block", s.block, 1, std::min(d.rows, d.cols));
  check_fill(kind, s.fill);
  const std::int64_t b = s.block;
  const std::int64_t tile_rows = (d.rows + b - 1) / b;
  const std::int64_t tile_cols = (d.cols + b - 1) / b;
  const u64 tiles = static_cast<u64>(tile_rows) * static_cast<u64>(tile_cols);
  if (s.blocks < 0 || static_cast<u64>(s.blocks) > tiles) {
    bad(kind,
        "blocks must be in [0, " + std::to_string(tiles) + "], the number of " +
            std::to_string(b) + "x" + std::to_string(b) + " tiles (got " +
            std::to_string(s.blocks) + ")",
        "lower blocks or the block size");
  }
  check_nnz_bound(kind, static_cast<double>(s.blocks) * static_cast<double>(b * b) * s.fill,
                  "the expected nnz", kBytesSorted);
  const Keys k = make_keys(kind, s.seed);
  Rng rng(k.coords);
  const Keep keep(k.keep, s.fill);
  // Tiles as sorted linear indices (tile_row * tile_cols + tile_col): row-major tile order, so
  // emitting row by row within each tile row keeps the entries canonical.
  const std::vector<u64> chosen = sample_sorted_subset(rng, tiles, static_cast<u64>(s.blocks));
  CooMatrix m;
  m.rows = static_cast<index_t>(d.rows);
  m.cols = static_cast<index_t>(d.cols);
  const auto expected =
      static_cast<std::size_t>(static_cast<double>(s.blocks) * static_cast<double>(b * b) * s.fill);
  m.row.reserve(expected);
  m.col.reserve(expected);
  const u64 tcols = static_cast<u64>(tile_cols);
  std::size_t first = 0;
  while (first < chosen.size()) {
    const u64 tr = chosen[first] / tcols;
    std::size_t last = first;
    while (last < chosen.size() && chosen[last] / tcols == tr) ++last;
    const std::int64_t r0 = static_cast<std::int64_t>(tr) * b;
    const std::int64_t r1 = std::min(d.rows, r0 + b);
    for (std::int64_t i = r0; i < r1; ++i) {
      for (std::size_t t = first; t < last; ++t) {
        const std::int64_t c0 = static_cast<std::int64_t>(chosen[t] % tcols) * b;
        const std::int64_t c1 = std::min(d.cols, c0 + b);
        for (std::int64_t j = c0; j < c1; ++j) {
          if (keep(static_cast<u64>(i), static_cast<u64>(j))) push(m, i, j);
        }
      }
    }
    first = last;
  }
  return finish_sorted(std::move(m), k.value);
}

// ---- stencils -----------------------------------------------------------------------------

CooMatrix gen_stencil(const GeneratorSpec& s, bool three_d) {
  const std::string kind = three_d ? "stencil3d" : "stencil2d";
  check_range(kind, "nx", s.nx, 1, kMaxIndex);
  check_range(kind, "ny", s.ny, 1, kMaxIndex);
  const std::int64_t nz = three_d ? s.nz : 1;
  if (three_d) check_range(kind, "nz", s.nz, 1, kMaxIndex);
  const double points = static_cast<double>(s.nx) * static_cast<double>(s.ny) *
                        static_cast<double>(nz);
  if (points > static_cast<double>(kMaxIndex)) {
    bad(kind, "the grid has " + fmt(points) + " points, over the 32-bit limit of " +
                  std::to_string(kMaxIndex) + " rows",
        "choose a smaller grid");
  }
  check_nnz_bound(kind, points * (three_d ? 7.0 : 5.0), "the entry count", kBytesSorted);
  const std::int64_t nx = s.nx, ny = s.ny, n = nx * ny * nz, plane = nx * ny;
  const Keys k = make_keys(kind, s.seed);
  CooMatrix m;
  m.rows = m.cols = static_cast<index_t>(n);
  const auto upper = static_cast<std::size_t>(n * (three_d ? 7 : 5));
  m.row.reserve(upper);
  m.col.reserve(upper);
  // Point (x, y, z) is row x + nx * (y + ny * z); neighbours in ascending column order.
  for (std::int64_t z = 0; z < nz; ++z) {
    for (std::int64_t y = 0; y < ny; ++y) {
      for (std::int64_t x = 0; x < nx; ++x) {
        const std::int64_t r = x + nx * (y + ny * z);
        if (three_d && z > 0) push(m, r, r - plane);
        if (y > 0) push(m, r, r - nx);
        if (x > 0) push(m, r, r - 1);
        push(m, r, r);
        if (x + 1 < nx) push(m, r, r + 1);
        if (y + 1 < ny) push(m, r, r + nx);
        if (three_d && z + 1 < nz) push(m, r, r + plane);
      }
    }
  }
  return finish_sorted(std::move(m), k.value);
}

// ---- R-MAT --------------------------------------------------------------------------------

/// R-MAT (Chakrabarti, Zhan, Faloutsos, SDM 2004): each edge descends `scale` levels of the
/// adjacency matrix, choosing quadrant a (top-left), b (top-right), c (bottom-left) or
/// d = 1 - a - b - c. No noise and no vertex permutation, so the recursive block structure
/// stays visible to the formats being tuned. Repeated edges are merged.
CooMatrix gen_rmat(const GeneratorSpec& s) {
  const std::string kind = "rmat";
  check_range(kind, "scale", s.scale, 1, 30);
  check_range(kind, "edge_factor", s.edge_factor, 1, kMaxIndex);
  for (auto [name, p] : {std::pair<const char*, double>{"a", s.a}, {"b", s.b}, {"c", s.c}}) {
    if (!(p >= 0.0 && p < 1.0)) {
      bad(kind, std::string(name) + " must be in [0, 1) (got " + fmt(p) + ")",
          "a, b, c are quadrant probabilities");
    }
  }
  const double abc = s.a + s.b + s.c;
  if (!(abc < 1.0)) {
    bad(kind, "a + b + c must be < 1 (got " + fmt(abc) + ")",
        "d = 1 - a - b - c is the fourth quadrant's probability and must be positive");
  }
  const std::int64_t n = std::int64_t{1} << s.scale;
  const double edges = static_cast<double>(n) * static_cast<double>(s.edge_factor);
  check_nnz_bound(kind, edges, "the edge count edge_factor * 2^scale", kBytesUnsorted);
  // 32-bit fixed-point cumulative thresholds: exact and platform independent.
  const auto to_fixed = [](double p) { return static_cast<u64>(std::ldexp(p, 32)); };
  const u64 ta = to_fixed(s.a), tab = to_fixed(s.a + s.b), tabc = to_fixed(abc);
  const Keys k = make_keys(kind, s.seed);
  Rng rng(k.coords);
  CooMatrix m;
  m.rows = m.cols = static_cast<index_t>(n);
  const auto count = static_cast<std::size_t>(edges);
  m.row.resize(count);
  m.col.resize(count);
  for (std::size_t e = 0; e < count; ++e) {
    u64 r = 0, c = 0, bits = 0;
    int left = 0;
    for (int level = 0; level < s.scale; ++level) {
      if (left == 0) {
        bits = rng.next();
        left = 2;
      }
      const u64 u = bits & 0xFFFFFFFFull;
      bits >>= 32;
      --left;
      // Quadrant a: (0, 0); b: (0, 1); c: (1, 0); d: (1, 1). Branch-free: the quadrant is
      // unpredictable by design.
      const u64 rbit = u >= tab;
      const u64 cbit = static_cast<u64>(u >= ta) ^ rbit ^ static_cast<u64>(u >= tabc);
      r = (r << 1) | rbit;
      c = (c << 1) | cbit;
    }
    m.row[e] = static_cast<index_t>(r);
    m.col[e] = static_cast<index_t>(c);
  }
  return finish_unsorted(std::move(m), k.value);
}

// ---- Boost.Graph generators ---------------------------------------------------------------

using UndirectedGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;

/// Symmetric matrix from undirected edges (both (u, v) and (v, u)); repeated edges merged.
template <typename It>
CooMatrix symmetric_from_edges(const std::string& kind, It it, It end, std::int64_t n,
                               u64 value_key) {
  CooMatrix m;
  m.rows = m.cols = static_cast<index_t>(n);
  for (; it != end; ++it) {
    const u64 u = it->first, v = it->second;
    WACO_ASSERT(u < static_cast<u64>(n) && v < static_cast<u64>(n),
                "Boost generator produced a vertex out of range");
    if (m.row.size() + 2 > static_cast<std::size_t>(kMaxIndex)) {
      bad(kind, "the graph has more than " + std::to_string(kMaxIndex) + " edge entries",
          "choose smaller parameters");
    }
    push(m, u, v);
    if (u != v) push(m, v, u);
  }
  return finish_unsorted(std::move(m), value_key);
}

}  // namespace

double powerlaw_expected_nnz(std::int64_t rows, double alpha, double beta) {
  const double n = static_cast<double>(rows);
  // Parameters the generator refuses (a recipe file's, estimated before it runs): the baseline.
  if (!(rows >= 2 && alpha > 0 && std::isfinite(alpha) && beta > 0 && std::isfinite(beta)))
    return std::max(0.0, n);
  // Only x up to (beta / 2)^(1/alpha) have a degree of 2 or more, i.e. add beyond the
  // baseline 1 a vertex.
  const double cut = std::min(n, std::pow(beta / 2.0, 1.0 / alpha) + 1.0);
  const auto degree = [&](double x) { return std::min(n - 1.0, beta * std::pow(x, -alpha)); };
  constexpr double kTermByTerm = 65536.0;
  const double exact_end = std::min(std::floor(cut), kTermByTerm);
  double extra = 0.0;
  for (double x = 1.0; x < exact_end; x += 1.0) {
    const double deg = degree(x);
    if (deg > 1.0) extra += std::floor(deg) - 1.0;
  }
  if (std::floor(cut) > exact_end) {
    // x in [a, b), every degree 2 or more and falling. With few distinct degrees, by them: the
    // sum of floor(degree) is, over k >= 1, how many x have a degree of at least k, i.e. x <=
    // (beta / k)^(1/alpha). With many (each 2^16 or more), as an integral less 1.5 a term (the
    // baseline 1 and the floor's half), whose error is then a tiny share of each term.
    const double a = exact_end, b = std::floor(cut);
    const double top = std::floor(degree(a));
    if (top <= kTermByTerm) {
      double floors = 0.0;
      for (double k = 1.0; k <= top; k += 1.0)
        floors += std::clamp(std::floor(std::pow(beta / k, 1.0 / alpha)) - a + 1.0, 0.0, b - a);
      extra += floors - (b - a);
    } else {
      // Where beta x^-alpha >= n - 1 the degree is n - 1; beyond, the integral of beta x^-alpha
      // over [x - 1/2, x + 1/2) per x.
      const double capped_end = std::clamp(std::pow(beta / (n - 1.0), 1.0 / alpha), a, b);
      extra += (capped_end - a) * (n - 2.0);
      const double lo = capped_end - 0.5, hi = b - 0.5;
      if (hi > lo) {
        const double integral =
            alpha == 1.0
                ? beta * std::log(hi / lo)
                : beta * (std::pow(hi, 1.0 - alpha) - std::pow(lo, 1.0 - alpha)) / (1.0 - alpha);
        extra += std::max(0.0, integral - 1.5 * (hi - lo));
      }
    }
  }
  return n + extra;
}

namespace {

/// Boost's PLOD (Palmer & Steffan, "Generating network topologies that obey power laws",
/// GLOBECOM 2000): vertex degrees beta * x^-alpha with x uniform, clamped to [1, n - 1], then
/// random pairing of degree credits. Undirected, no self loops; the matrix is symmetric.
CooMatrix gen_powerlaw(const GeneratorSpec& s) {
  const std::string kind = "powerlaw";
  check_range(kind, "rows", s.rows, 2, kMaxIndex);
  if (s.cols != 0 && s.cols != s.rows) {
    bad(kind, "the matrix is square: cols must be 0 or equal rows (got " +
                  std::to_string(s.cols) + ")",
        "leave cols at 0");
  }
  if (!(s.alpha > 0.0 && std::isfinite(s.alpha))) {
    bad(kind, "alpha must be a positive number (got " + fmt(s.alpha) + ")",
        "typical power-law exponents are 2 to 3");
  }
  if (!(s.beta > 0.0 && s.beta <= 9007199254740992.0)) {  // 2^53: Boost converts to size_t
    bad(kind, "beta must be in (0, 2^53] (got " + fmt(s.beta) + ")",
        "beta is the nominal degree of the highest-degree vertex");
  }
  // Expected total degree (= expected stored entries): powerlaw_expected_nnz.
  const std::int64_t n = s.rows;
  check_nnz_bound(kind, powerlaw_expected_nnz(n, s.alpha, s.beta), "the expected nnz",
                  kBytesUnsorted);
  const Keys k = make_keys(kind, s.seed);
  boost::random::seed_seq seq{static_cast<std::uint32_t>(k.coords),
                              static_cast<std::uint32_t>(k.coords >> 32)};
  boost::random::mt19937 engine(seq);
  using Plod = boost::plod_iterator<boost::random::mt19937, UndirectedGraph>;
  return symmetric_from_edges(kind, Plod(engine, static_cast<std::size_t>(n), s.alpha, s.beta),
                              Plod(), n, k.value);
}

/// Boost's small-world generator (Watts & Strogatz, Nature 1998): a ring where each vertex links
/// to its neighbours / 2 successors, each edge rewired to a random non-neighbour with
/// probability rewire. Undirected, symmetric matrix. It is fed boost::minstd_rand because the
/// iterator copies its engine twice per edge (mt19937's 2.5 KB state made that dominate).
CooMatrix gen_smallworld(const GeneratorSpec& s) {
  const std::string kind = "smallworld";
  check_range(kind, "rows", s.rows, 4, kMaxIndex);
  if (s.cols != 0 && s.cols != s.rows) {
    bad(kind, "the matrix is square: cols must be 0 or equal rows (got " +
                  std::to_string(s.cols) + ")",
        "leave cols at 0");
  }
  // Boost's rewiring loop excludes the 2 * (k / 2) + 1 ring positions around the source; it
  // would spin forever if that left no vertex, hence neighbors <= rows - 2.
  check_range(kind, "neighbors", s.neighbors, 2, s.rows - 2);
  if (s.neighbors % 2 != 0) {
    bad(kind, "neighbors must be even (got " + std::to_string(s.neighbors) + ")",
        "each vertex links to neighbors / 2 vertices on each side of the ring");
  }
  if (!(s.rewire >= 0.0 && s.rewire <= 1.0)) {
    bad(kind, "rewire must be in [0, 1] (got " + fmt(s.rewire) + ")",
        "rewire is the probability of rewiring each ring edge");
  }
  check_nnz_bound(kind, static_cast<double>(s.rows) * s.neighbors, "the entry count",
                  kBytesUnsorted);
  const Keys k = make_keys(kind, s.seed);
  boost::minstd_rand engine(static_cast<std::uint32_t>(1 + k.coords % 2147483646ull));
  using SmallWorld = boost::small_world_iterator<boost::minstd_rand, UndirectedGraph>;
  const auto n = static_cast<std::size_t>(s.rows);
  return symmetric_from_edges(
      kind, SmallWorld(engine, n, static_cast<std::size_t>(s.neighbors), s.rewire),
      SmallWorld(), s.rows, k.value);
}

}  // namespace

const std::vector<GeneratorKind>& generator_kinds() {
  static const std::vector<GeneratorKind> kinds = {
      {"uniform", "exactly nnz distinct positions, uniform over rows x cols (rows, cols, nnz)"},
      {"banded", "positions with |i - j| <= bandwidth, each kept with probability fill "
                 "(rows, cols, bandwidth, fill)"},
      {"blocks", "blocks distinct block-aligned block x block tiles, each position kept with "
                 "probability fill (rows, cols, block, blocks, fill)"},
      {"stencil2d", "5-point stencil on an nx x ny grid, row x + nx*y (nx, ny)"},
      {"stencil3d", "7-point stencil on an nx x ny x nz grid, row x + nx*(y + ny*z) (nx, ny, nz)"},
      {"rmat", "R-MAT graph, 2^scale vertices, edge_factor * 2^scale edges drawn, repeats merged "
               "(scale, edge_factor, a, b, c)"},
      {"powerlaw", "Boost.Graph PLOD power-law graph, symmetric (rows, alpha, beta)"},
      {"smallworld", "Boost.Graph Watts-Strogatz small-world graph, symmetric "
                     "(rows, neighbors, rewire)"},
  };
  return kinds;
}

CooMatrix generate(const GeneratorSpec& spec) {
  const std::string& k = spec.kind;
  if (k == "uniform") return gen_uniform(spec);
  if (k == "banded") return gen_banded(spec);
  if (k == "blocks") return gen_blocks(spec);
  if (k == "stencil2d") return gen_stencil(spec, false);
  if (k == "stencil3d") return gen_stencil(spec, true);
  if (k == "rmat") return gen_rmat(spec);
  if (k == "powerlaw") return gen_powerlaw(spec);
  if (k == "smallworld") return gen_smallworld(spec);
  std::string names;
  for (const auto& g : generator_kinds()) names += (names.empty() ? "" : ", ") + g.name;
  throw Error("generate: unknown kind '" + k + "'", "known kinds: " + names);
}

CooMatrix replicate_diagonal(const CooMatrix& a, std::int64_t copies) {
  const std::string kind = "--from";
  WACO_ASSERT(is_canonical(a), "replicate_diagonal needs a canonical matrix");
  check_range(kind, "copies", copies, 1, kMaxIndex);
  const auto fits = [&](const char* what, std::int64_t n) {
    if (static_cast<double>(n) * static_cast<double>(copies) > static_cast<double>(kMaxIndex))
      bad(kind,
          std::string(what) + " times " + std::to_string(copies) + " copies is over the 32-bit limit of " +
              std::to_string(kMaxIndex),
          "use fewer copies (at most " + std::to_string(kMaxIndex / std::max<std::int64_t>(1, n)) + ")");
  };
  fits("the rows", a.rows);
  fits("the columns", a.cols);
  check_nnz_bound(kind, static_cast<double>(a.nnz()) * static_cast<double>(copies), "the nonzeros",
                  kBytesSorted);
  CooMatrix m;
  m.rows = static_cast<index_t>(a.rows * copies);
  m.cols = static_cast<index_t>(a.cols * copies);
  const std::size_t n = static_cast<std::size_t>(a.nnz()) * static_cast<std::size_t>(copies);
  m.row.reserve(n);
  m.col.reserve(n);
  m.val.reserve(n);
  for (std::int64_t c = 0; c < copies; ++c) {  // copy c's rows follow copy c - 1's: canonical
    const auto dr = static_cast<index_t>(c * a.rows), dc = static_cast<index_t>(c * a.cols);
    for (std::size_t e = 0; e < a.val.size(); ++e) {
      m.row.push_back(a.row[e] + dr);
      m.col.push_back(a.col[e] + dc);
      m.val.push_back(a.val[e]);
    }
  }
  WACO_ASSERT(is_canonical(m), "replicate_diagonal emitted entries out of canonical order");
  return m;
}

CooTensor generate_tensor(const std::vector<index_t>& dims, std::int64_t nnz, std::uint64_t seed) {
  const std::string kind = "tensor";
  if (dims.empty() || dims.size() > 4) {
    bad(kind, "the order must be 1 to 4 (got " + std::to_string(dims.size()) + " dims)",
        "MTTKRP uses 3-D tensors");
  }
  u128 cells = 1;
  for (std::size_t m = 0; m < dims.size(); ++m) {
    if (dims[m] < 1) {
      bad(kind, "dim " + std::to_string(m) + " must be >= 1 (got " + std::to_string(dims[m]) + ")",
          "every mode needs at least one index");
    }
    cells *= static_cast<u128>(dims[m]);
  }
  if (nnz < 0 || static_cast<u128>(nnz) > cells) {
    bad(kind, "nnz must be in [0, product of dims] (got " + std::to_string(nnz) + ")",
        "lower nnz or enlarge the dims");
  }
  check_nnz_bound(kind, static_cast<double>(nnz), "nnz", kBytesSampled);
  const Keys k = make_keys(kind, seed);
  Rng rng(k.coords);
  CooTensor t;
  t.dims = dims;
  const std::size_t order = dims.size();
  t.idx.assign(order, std::vector<index_t>(static_cast<std::size_t>(nnz)));
  t.val.resize(static_cast<std::size_t>(nnz));
  // Linear keys in row-major (mode 0 slowest) order are sorted exactly when the coordinates
  // are lexicographically sorted, so the sampled set comes out canonical.
  const auto emit = [&](std::size_t e, u128 key) {
    const u128 full_key = key;
    for (std::size_t m = order; m-- > 0;) {
      const auto dm = static_cast<u128>(dims[m]);
      t.idx[m][e] = static_cast<index_t>(key % dm);
      key /= dm;
    }
    const u64 mix = static_cast<u64>(full_key) ^ splitmix64(static_cast<u64>(full_key >> 64));
    t.val[e] = unit_value(splitmix64(k.value ^ splitmix64(mix)));
  };
  if (cells <= (static_cast<u128>(1) << 62)) {
    const std::vector<u64> keys =
        sample_sorted_subset(rng, static_cast<u64>(cells), static_cast<u64>(nnz));
    for (std::size_t e = 0; e < keys.size(); ++e) emit(e, keys[e]);
  } else {
    // More than 2^62 cells: nnz <= 2^31 is far below half of them, no complement needed.
    const std::vector<u128> keys =
        sample_distinct<u128>(rng, cells, static_cast<std::size_t>(nnz), 128);
    for (std::size_t e = 0; e < keys.size(); ++e) emit(e, keys[e]);
  }
  WACO_ASSERT(is_canonical(t), "generate_tensor produced a non-canonical tensor");
  return t;
}

}  // namespace waco::kernels
