// Building the sparse operand in a SuperSchedule's format. A level's coordinate is read on the fly
// from the operand (split sizes are powers of two: x1 = x >> log2 s, x0 = x & (s - 1)); nothing is
// materialized per level. Steps:
// (1) Order. The canonical COO order is lexicographic over the sparse variables, i.e. over the
//     canonical parts (each variable whole, or x1 then x0). The level order agrees with it on a
//     leading run of levels [0, Q) that is a prefix of the canonical parts (i, or i1, ...), and on a
//     trailing run [P, L) that lists, in canonical order, the parts the levels before P leave free
//     (i0,k0 under i1,k1; i under k). So only the key of levels [Q, P) needs sorting, stably, within
//     each segment of equal [0, Q) coordinates. Q = L (csr, dcsr, csf, a split i1,i0,k): already in
//     order, no permutation at all. Q > 0 (bcsr): per segment, a packed (key << 32 | entry)
//     std::sort, or a counting sort when the segment is long against the key range. Q = 0 (csc):
//     stable counting passes over one key combining the levels [0, P) (one pass when the key
//     range is at most max(nnz, 1024)), or a comparison sort when the key does not fit 64 bits.
//     The permutation is 32-bit.
// (2) Sizes. A C level holds one position per distinct prefix of coordinates, counted in one scan
//     of the ordered nonzeros up to the last C level above the leaf (none for csr: the leaf holds
//     exactly nnz positions, the operand having no repeated coordinate); a U level holds its parent
//     size times its dimension. Every bound is checked on these sizes before anything of them is
//     allocated; the arrays are then allocated at their exact sizes.
// (3) Fill. One scan over the ordered nonzeros: the first level whose coordinate changes opens a
//     new position at that level and every level below it (U: parent * dim + coordinate; C: the
//     next crd slot, and pos of a new parent), and the leaf position gets the value.
#include "waco/codegen/storage.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <sstream>
#include <type_traits>
#include <utility>

#include "waco/kernels/error.hpp"
#include "waco/kernels/huge_pages.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::codegen {
using kernels::index_t;

namespace {

/// 3 sparse variables (MTTKRP), each split in two.
constexpr std::size_t kMaxLevels = 6;

/// The coordinates of the sparse operand, one array per sparse variable (spec.sparse_vars order).
std::vector<const std::vector<index_t>*> sparse_coordinates(const kernels::Problem& p) {
  if (kernels::needs_tensor(p.kind)) return {&p.T->idx[0], &p.T->idx[1], &p.T->idx[2]};
  return {&p.A->row, &p.A->col};
}

std::vector<double> const& sparse_values(const kernels::Problem& p) {
  return kernels::needs_tensor(p.kind) ? p.T->val : p.A->val;
}

/// build_storage's answer when it refuses the format: why, and what to write instead.
StorageResult refusal(std::string why,
                      std::string hint = "choose another format, or raise the bound with --max-padding") {
  StorageResult r;
  r.refused = std::move(why);
  r.hint = std::move(hint);
  return r;
}

/// Bits needed to write x (0 for 0); C++17 has no bit_width.
int bit_width(std::uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

/// One level's coordinate of nonzero e: (x[e] >> shift) & mask.
struct Coord {
  const index_t* x = nullptr;
  unsigned shift = 0;
  std::uint32_t mask = ~0u;
  std::uint32_t operator()(std::size_t e) const { return (static_cast<std::uint32_t>(x[e]) >> shift) & mask; }
};

/// The level coordinates of the operand.
struct Coords {
  std::array<Coord, kMaxLevels> level{};
  std::array<std::uint64_t, kMaxLevels> dim{};
  std::size_t L = 0;

  /// The mixed-radix key of levels [a, b) (the caller checked that it fits).
  std::uint64_t key(std::size_t e, std::size_t a, std::size_t b) const {
    std::uint64_t k = 0;
    for (std::size_t l = a; l < b; ++l) k = k * dim[l] + level[l](e);
    return k;
  }
  /// The number of keys of levels [a, b), or nullopt above 2^64.
  std::optional<std::uint64_t> key_range(std::size_t a, std::size_t b) const {
    std::uint64_t k = 1;
    for (std::size_t l = a; l < b; ++l)
      if (__builtin_mul_overflow(k, std::max<std::uint64_t>(dim[l], 1), &k)) return std::nullopt;
    return k;
  }
};

/// Q and P of step (1): levels [0, Q) are a prefix of the canonical parts, and levels [P, L) are
/// the canonical parts that levels [0, P) leave free, in canonical order.
struct Agreement {
  std::size_t Q = 0;
  std::size_t P = 0;
};

Agreement agreement(const std::vector<Loop>& levels, const KernelSpec& spec, const SuperSchedule& s) {
  std::vector<Loop> canonical;
  for (char v : spec.sparse_vars) {
    if (s.split_of(v) == 1) {
      canonical.push_back({v, Loop::Part::Whole});
    } else {
      canonical.push_back({v, Loop::Part::Outer});
      canonical.push_back({v, Loop::Part::Inner});
    }
  }
  const std::size_t L = levels.size();
  WACO_ASSERT(canonical.size() == L, "the levels are the parts of the sparse variables");
  Agreement a;
  while (a.Q < L && levels[a.Q] == canonical[a.Q]) ++a.Q;
  for (a.P = 0; a.P < L; ++a.P) {
    std::vector<Loop> free;
    for (const Loop& part : canonical)
      if (std::find(levels.begin(), levels.begin() + a.P, part) == levels.begin() + a.P) free.push_back(part);
    if (std::equal(free.begin(), free.end(), levels.begin() + a.P, levels.end())) break;
  }
  return a;
}

/// Stable LSD counting sort of all nonzeros by key(e) < range: one pass when range <= limit,
/// otherwise passes over digits of at most log2(limit) bits of a stored 64-bit key.
template <class Key>
std::vector<std::uint32_t> counting_sort(std::size_t n, std::uint64_t range, std::uint64_t limit, Key key) {
  std::vector<std::uint32_t> order = kernels::huge_vector<std::uint32_t>(n);
  if (range <= limit) {  // one pass, the key recomputed rather than stored
    std::vector<std::uint32_t> count(range + 1, 0);
    for (std::size_t e = 0; e < n; ++e) ++count[key(e) + 1];
    std::partial_sum(count.begin(), count.end(), count.begin());
    for (std::size_t e = 0; e < n; ++e) order[count[key(e)]++] = static_cast<std::uint32_t>(e);
    return order;
  }
  const int bits = bit_width(range - 1);
  const int passes = (bits + bit_width(limit) - 2) / (bit_width(limit) - 1);
  const int width = (bits + passes - 1) / passes;
  std::vector<std::uint64_t> keys(n), keys_next(n);
  std::vector<std::uint32_t> next = kernels::huge_vector<std::uint32_t>(n);
  for (std::size_t e = 0; e < n; ++e) keys[e] = key(e);
  std::iota(order.begin(), order.end(), 0u);
  std::vector<std::uint32_t> count(std::size_t{1} << width);
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = pass * width;
    const std::uint64_t mask = (std::uint64_t{1} << width) - 1;
    std::fill(count.begin(), count.end(), 0u);
    for (std::size_t r = 0; r < n; ++r) ++count[keys[r] >> shift & mask];
    std::exclusive_scan(count.begin(), count.end(), count.begin(), 0u);
    for (std::size_t r = 0; r < n; ++r) {
      const std::uint32_t to = count[keys[r] >> shift & mask]++;
      keys_next[to] = keys[r];
      next[to] = order[r];
    }
    keys.swap(keys_next);
    order.swap(next);
  }
  return order;
}

/// Step (1): the nonzeros in level order, or an empty vector when the canonical order is already
/// the level order.
std::vector<std::uint32_t> level_order(const Coords& c, Agreement a, std::size_t n) {
  if (a.Q >= c.L || n < 2) return {};
  // Counting arrays up to this many entries cost no more than a pass over the nonzeros (and keep
  // the scratch memory O(nnz): a wide key on few nonzeros takes more, narrower passes instead).
  const std::uint64_t limit = std::max<std::uint64_t>(n, 1024);
  const std::optional<std::uint64_t> range = c.key_range(a.Q, a.P);

  if (a.Q > 0 && range && *range <= (std::uint64_t{1} << 32)) {
    // Segments of equal [0, Q) coordinates are contiguous and in order: sort each by the key of
    // [Q, P), ties (equal keys) in canonical order.
    std::vector<std::uint32_t> order = kernels::huge_vector<std::uint32_t>(n);
    std::vector<std::uint64_t> packed;
    std::vector<std::uint32_t> count;
    for (std::size_t b = 0, end; b < n; b = end) {
      for (end = b + 1; end < n; ++end) {
        bool same = true;
        for (std::size_t l = 0; l < a.Q && same; ++l) same = c.level[l](end - 1) == c.level[l](end);
        if (!same) break;
      }
      const std::size_t len = end - b;
      packed.resize(len);
      bool sorted = true;
      for (std::size_t j = 0; j < len; ++j) {
        packed[j] = c.key(b + j, a.Q, a.P) << 32 | (b + j);
        sorted = sorted && (j == 0 || packed[j] > packed[j - 1]);
      }
      if (!sorted && *range <= 2 * len) {  // long segment: counting sort, O(len + range)
        count.assign(*range + 1, 0);
        for (std::uint64_t k : packed) ++count[(k >> 32) + 1];
        std::partial_sum(count.begin(), count.end(), count.begin());
        for (std::uint64_t k : packed) order[b + count[k >> 32]++] = static_cast<std::uint32_t>(k);
        continue;
      }
      if (!sorted) std::sort(packed.begin(), packed.end());
      for (std::size_t j = 0; j < len; ++j) order[b + j] = static_cast<std::uint32_t>(packed[j]);
    }
    return order;
  }
  // No leading run, or a key too wide for packing: sort everything by the key of [0, P).
  if (const std::optional<std::uint64_t> full = c.key_range(0, a.P))
    return counting_sort(n, *full, limit, [&](std::size_t e) { return c.key(e, 0, a.P); });
  // Wider than 64 bits (several huge reordered dimensions): compare level by level.
  std::vector<std::uint32_t> order = kernels::huge_vector<std::uint32_t>(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
    for (std::size_t l = 0; l < a.P; ++l) {
      const std::uint32_t cx = c.level[l](x), cy = c.level[l](y);
      if (cx != cy) return cx < cy;
    }
    return x < y;
  });
  return order;
}

/// Calls f(std::integral_constant<std::size_t, N>) for N = n in 1..kMaxLevels: the scans below
/// take the level count as a constant so that their per-level state lives in registers.
template <class F>
void with_level_count(std::size_t n, F&& f) {
  switch (n) {
    case 1: f(std::integral_constant<std::size_t, 1>{}); break;
    case 2: f(std::integral_constant<std::size_t, 2>{}); break;
    case 3: f(std::integral_constant<std::size_t, 3>{}); break;
    case 4: f(std::integral_constant<std::size_t, 4>{}); break;
    case 5: f(std::integral_constant<std::size_t, 5>{}); break;
    case 6: f(std::integral_constant<std::size_t, 6>{}); break;
    default: WACO_ASSERT(false, "a sparse operand has 1 to 6 levels");
  }
}

/// f(integral_constant<l>) for l = 0 .. N-1, unrolled: the scans' per-level arrays are then
/// indexed by constants and kept in registers (GCC does not unroll their loops by itself).
template <class F, std::size_t... I>
inline void for_each_level(F& f, std::index_sequence<I...>) {
  (f(std::integral_constant<std::size_t, I>{}), ...);
}
template <std::size_t N, class F>
inline void for_each_level(F&& f) {
  for_each_level(f, std::make_index_sequence<N>{});
}

/// Step (2)'s scan over the nonzeros in level order (ord; the identity when not Permuted): the
/// number of distinct prefixes of coordinates over levels [0, l], for l < N.
template <std::size_t N, bool Permuted>
std::array<std::int64_t, N> count_prefixes(const Coords& coords, const std::uint32_t* ord, std::size_t n) {
  std::array<Coord, N> level;  // local copies: the compiler need not reload them
  std::copy_n(coords.level.begin(), N, level.begin());
  std::array<std::uint32_t, N> prev{};
  std::array<std::int64_t, N> opened{};
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t e = Permuted ? ord[r] : r;
    bool changed = r == 0;
    for_each_level<N>([&](auto l) {
      const std::uint32_t x = level[l](e);
      changed = changed || x != prev[l];
      opened[l] += changed;
      prev[l] = x;
    });
  }
  return opened;
}

/// Where step (3) writes one level.
struct LevelOut {
  bool compressed = false;
  std::int64_t dim = 0;
  std::int64_t parents = 0;  ///< C: the parent level's size
  index_t* pos = nullptr;    ///< C: parents + 1 entries
  index_t* crd = nullptr;    ///< C: exactly one slot per position
  std::uint16_t* crd16 = nullptr;  ///< N (instead of crd): exactly one slot per position
};

/// Step (3)'s scan over the nonzeros in level order (ord; the identity when not Permuted):
/// positions level by level, pos and crd of C levels, and (WriteLeaf) the leaf position of every
/// nonzero with its value. Positions only grow in level order, so a C level's pos is written
/// directly, once per parent, when the first child of a new parent opens (pos[p] = first child of
/// p; parents without children get the next one's start), rather than counted per nonzero:
/// consecutive increments of one counter would form a chain through memory. The template
/// parameters keep the loop's state in registers.
template <std::size_t N, bool Permuted, bool WriteLeaf, class V>
void fill_levels(const Coords& coords, const std::uint32_t* ord, std::size_t n,
                 const std::array<LevelOut, kMaxLevels>& out_levels, const double* values, V* vals,
                 index_t* entry_position) {
  std::array<Coord, N> level;  // local copies: stores through index_t* cannot alias them
  std::copy_n(coords.level.begin(), N, level.begin());
  std::array<LevelOut, N> out;
  std::copy_n(out_levels.begin(), N, out.begin());
  std::array<std::uint32_t, N> prev{};
  std::array<std::int64_t, N + 1> at{};  // at[l + 1]: current position at level l; at[0] = 0
  std::array<std::int64_t, N> next{};    // C levels: positions opened so far
  std::array<std::int64_t, N> written{};  // C levels: pos[0, written) is final
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t e = Permuted ? ord[r] : r;
    bool changed = r == 0;
    for_each_level<N>([&](auto l) {
      const bool new_parent = changed;
      const std::uint32_t x = level[l](e);
      if (!changed && x != prev[l]) {
        // One comparison guards the sizes counted in step (2): the order is strictly increasing.
        WACO_ASSERT(x > prev[l], "the sparse operand is not canonical (unsorted)");
        changed = true;
      }
      if (!changed) return;
      if (out[l].compressed) {
        const std::int64_t q = next[l]++;
        if (out[l].crd16)  // N: the range was checked against kMaxNarrowRange
          out[l].crd16[q] = static_cast<std::uint16_t>(x);
        else
          out[l].crd[q] = static_cast<index_t>(x);
        if (new_parent) {
          for (std::int64_t p = written[l]; p <= at[l]; ++p) out[l].pos[p] = static_cast<index_t>(q);
          written[l] = at[l] + 1;
        }
        at[l + 1] = q;
      } else {
        at[l + 1] = at[l] * out[l].dim + x;
      }
      prev[l] = x;
    });
    WACO_ASSERT(changed, "the sparse operand is not canonical (a repeated coordinate)");
    if constexpr (WriteLeaf) {
      vals[at[N]] = static_cast<V>(values[e]);
      entry_position[e] = static_cast<index_t>(at[N]);
    }
  }
  for (std::size_t l = 0; l < N; ++l)  // the parents after the last one with children
    if (out[l].compressed)
      for (std::int64_t p = written[l]; p <= out[l].parents; ++p) out[l].pos[p] = static_cast<index_t>(next[l]);
}

/// Step (3) for the csr layout: levels (i, U) and (k, C), neither split, in the operand's own
/// order (crd is a copy of the columns). pos (dim0 + 1 zeros) gets each row's end where its last
/// nonzero stores it, then a running maximum gives the empty rows theirs: no branch per nonzero
/// (a branch on "a new row" mispredicts on rows of random lengths). Checks the order first, as the
/// scan does (rows ascending and below dim0, columns strictly ascending within a row); false if
/// the operand is not canonical.
__attribute__((noinline)) bool fill_csr_pos(const index_t* rows, const index_t* cols,
                                            std::size_t n, std::int64_t dim0, index_t* pos) {
  if (n == 0) return true;
  if (rows[0] < 0 || rows[n - 1] >= dim0) return false;
  std::size_t unordered = 0;
  for (std::size_t e = 1; e < n; ++e)
    unordered += static_cast<std::size_t>((rows[e] < rows[e - 1]) |
                                          ((rows[e] == rows[e - 1]) & (cols[e] <= cols[e - 1])));
  if (unordered != 0) return false;
  for (std::size_t e = 0; e < n; ++e) pos[rows[e] + 1] = static_cast<index_t>(e + 1);
  index_t end = 0;
  for (std::int64_t q = 1; q <= dim0; ++q) pos[q] = end = std::max(end, pos[q]);
  return true;
}

/// The leaf positions are the canonical order (no padding, no permutation): the values copied in
/// the storage's type, and with `entry_positions` the identity map.
void values_in_canonical_order(Storage& st, kernels::Dtype dtype, const std::vector<double>& values,
                               bool entry_positions) {
  st.vals.assign(dtype, values.data(), values.size());
  if (!entry_positions) return;
  kernels::resize_huge(st.entry_position, values.size());
  std::iota(st.entry_position.begin(), st.entry_position.end(), index_t{0});
}

}  // namespace

std::int64_t Storage::bytes() const {
  std::int64_t b = static_cast<std::int64_t>(vals.size() * kernels::dtype_size(vals.dtype()));
  for (const Level& l : levels)
    b += static_cast<std::int64_t>(l.pos.size() + l.crd.size()) * 4 +
         static_cast<std::int64_t>(l.crd16.size()) * 2;
  return b;
}

std::string narrow_refusal_message(int level, const Loop& loop, std::int64_t dim) {
  std::ostringstream why;
  why << "format refused: level " << level << " (" << loop.name() << ", N) has " << dim
      << " coordinates, more than 16-bit coordinates hold (" << kMaxNarrowRange
      << "): write the level C";
  return why.str();
}

std::string refusal_message(int level, const Loop& loop, LevelFormat format, long long size,
                            std::int64_t nnz, double max_padding, bool index_overflow) {
  std::ostringstream why;
  why << "format refused: ";
  if (level < 0) {
    why << "it would store " << size << " values for " << nnz << " nonzeros ("
        << static_cast<double>(size) / static_cast<double>(std::max<std::int64_t>(nnz, 1))
        << " x), over the padding bound of " << max_padding << " x nnz";
  } else if (index_overflow) {
    why << "level " << level << " needs more positions than 32-bit indices hold";
  } else {
    why << "level " << level << " (" << loop.name() << ", "
        << format_letter(format) << (format == LevelFormat::U ? ") would hold " : ") needs ") << size
        << " positions for " << nnz << " nonzeros, over the padding bound of " << max_padding
        << " x nnz";
  }
  return why.str();
}

StorageResult build_storage(const SuperSchedule& s, const kernels::Problem& p,
                            const StorageOptions& opts) {
  const double t0 = kernels::now_seconds();
  WACO_ASSERT(s.kind == p.kind, "schedule and problem are for different kernels");
  const KernelSpec& spec = kernel_spec(p.kind);
  // Only the sparse variables' extents matter here: the dense operands may be absent.
  const std::vector<std::int64_t> ext = extents(spec, p.A, p.T, 1);
  const auto coords = sparse_coordinates(p);
  const std::vector<double>& values = sparse_values(p);
  const std::int64_t nnz = static_cast<std::int64_t>(values.size());
  const std::vector<Loop> loops = s.levels();
  const std::size_t L = loops.size();
  WACO_ASSERT(L == s.formats.size(), "one format per level");
  WACO_ASSERT(L >= 1 && L <= kMaxLevels, "a sparse operand has 1 to 6 levels");

  // Bounds, in words: stored values, and index arrays (C levels: parent count + 1 + size).
  const double value_bound = opts.max_padding * static_cast<double>(std::max<std::int64_t>(nnz, 1));
  double dims_sum = 0;

  Storage st;
  st.nnz = nnz;
  st.levels.resize(L);
  Coords c;
  c.L = L;
  for (std::size_t l = 0; l < L; ++l) {
    const Loop& loop = loops[l];
    const int v = spec.var_index(loop.var);
    const std::size_t m = static_cast<std::size_t>(
        std::find(spec.sparse_vars.begin(), spec.sparse_vars.end(), loop.var) - spec.sparse_vars.begin());
    const int sx = s.split[v];
    WACO_ASSERT(sx >= 1 && (sx & (sx - 1)) == 0, "split sizes are powers of two");
    Level& lv = st.levels[l];
    lv.format = s.formats[l];
    lv.loop = loop;
    lv.dim = level_dim(loop, ext[v], sx);
    dims_sum += static_cast<double>(lv.dim);
    c.level[l].x = coords[m]->data();
    if (loop.part == Loop::Part::Outer) c.level[l].shift = static_cast<unsigned>(bit_width(static_cast<std::uint64_t>(sx)) - 1);
    if (loop.part == Loop::Part::Inner) c.level[l].mask = static_cast<std::uint32_t>(sx - 1);
    c.dim[l] = static_cast<std::uint64_t>(lv.dim);
  }
  const double index_bound = value_bound + 2.0 * dims_sum + 2.0 * static_cast<double>(L);
  // N levels: their coordinates must fit 16 bits (known from the dims alone, so checked first).
  for (std::size_t l = 0; l < L; ++l)
    if (st.levels[l].format == LevelFormat::N && st.levels[l].dim > kMaxNarrowRange)
      return refusal(narrow_refusal_message(static_cast<int>(l), loops[l], st.levels[l].dim),
                     "write that level C, or split its variable and write the inner part N");
  // The leaf level holds at least nnz positions; refusing here keeps the permutation 32-bit.
  if (nnz > kernels::kMaxIndex)
    return refusal(refusal_message(static_cast<int>(L - 1), loops.back(), s.formats.back(), nnz,
                                   nnz, opts.max_padding, true));

  // (1) order.
  const std::vector<std::uint32_t> order = level_order(c, agreement(loops, spec, s), static_cast<std::size_t>(nnz));
  const std::uint32_t* ord = order.empty() ? nullptr : order.data();

  // (2) sizes: distinct[l] = distinct prefixes of coordinates over levels [0, l], counted for
  // levels up to the last C level above the leaf; the leaf's prefixes are the nonzeros themselves.
  std::array<std::int64_t, kMaxLevels> distinct{};
  distinct[L - 1] = nnz;
  std::size_t counted = 0;  // levels [0, counted) need the scan
  for (std::size_t l = 0; l + 1 < L; ++l)
    if (is_compressed(st.levels[l].format)) counted = l + 1;
  if (counted > 0 && nnz > 0)
    with_level_count(counted, [&](auto N) {
      const auto opened = ord ? count_prefixes<decltype(N)::value, true>(c, ord, static_cast<std::size_t>(nnz))
                              : count_prefixes<decltype(N)::value, false>(c, ord, static_cast<std::size_t>(nnz));
      std::copy(opened.begin(), opened.end(), distinct.begin());
    });

  // Bounds on the sizes, level by level, before allocating anything of them.
  std::array<std::int64_t, kMaxLevels> parent_of{};  // parent size of each level
  std::int64_t parent_size = 1;
  double index_words = 0;
  for (std::size_t l = 0; l < L; ++l) {
    Level& lv = st.levels[l];
    parent_of[l] = parent_size;
    double size = static_cast<double>(distinct[l]);
    if (lv.format == LevelFormat::U) {
      size = static_cast<double>(parent_size) * static_cast<double>(lv.dim);
      if (size > value_bound && size > index_bound) {
        return refusal(refusal_message(static_cast<int>(l), lv.loop, lv.format,
                                       static_cast<long long>(size), nnz, opts.max_padding));
      }
    } else {
      index_words += static_cast<double>(parent_size) + 1;
      if (index_words > index_bound) {
        return refusal(refusal_message(static_cast<int>(l), lv.loop, lv.format,
                                       parent_size + 1, nnz, opts.max_padding));
      }
      index_words += size;
    }
    if (size > static_cast<double>(kernels::kMaxIndex))
      return refusal(refusal_message(static_cast<int>(l), lv.loop, lv.format,
                                     static_cast<long long>(size), nnz, opts.max_padding,
                                     true));
    lv.size = static_cast<std::int64_t>(size);
    parent_size = lv.size;
  }
  if (static_cast<double>(parent_size) > value_bound) {
    return refusal(refusal_message(-1, loops.back(), s.formats.back(), parent_size, nnz,
                                   opts.max_padding));
  }

  // (3) fill, every array allocated at its exact size.
  const std::size_t n = static_cast<std::size_t>(nnz);
  // csr (the reference every tune is measured against, and every unsplit row-major U C
  // schedule) needs no scan: a 1.4M-nonzero csr plan took ~13 ms, mostly in the scan. Nor does
  // csr in blocks of rows (i1, i0, k as U U C: SpMV's most frequent winners after csr): the
  // leaf's parent i1 x dim(i0) + i0 is the row itself, among rows padded to whole blocks (a
  // 12k-nonzero matrix's block formats took 150-190 us in an adaptive plan, ~15 ns a nonzero,
  // most of it the scan).
  const bool rows_over_leaf =
      (L == 2 && loops[0].part == Loop::Part::Whole) ||
      (L == 3 && loops[0].var == spec.sparse_vars[0] && loops[1].var == loops[0].var &&
       loops[0].part == Loop::Part::Outer && loops[1].part == Loop::Part::Inner &&
       st.levels[1].dim == (std::int64_t{1} << c.level[0].shift));
  bool dense_above = true;
  for (std::size_t l = 0; l + 1 < L; ++l) dense_above = dense_above && st.levels[l].format == LevelFormat::U;
  if (!ord && rows_over_leaf && dense_above && st.levels[L - 1].format == LevelFormat::C &&
      loops[L - 1].part == Loop::Part::Whole) {
    Level& lv = st.levels[L - 1];
    const std::int64_t rows = L == 2 ? st.levels[0].dim : st.levels[0].dim * st.levels[1].dim;
    kernels::resize_huge(lv.pos, static_cast<std::size_t>(rows) + 1);
    const bool canonical = fill_csr_pos(c.level[0].x, c.level[L - 1].x, n, rows, lv.pos.data());
    kernels::assign_huge(lv.crd, c.level[L - 1].x, c.level[L - 1].x + n);
    WACO_ASSERT(canonical, "the sparse operand is not canonical");
    values_in_canonical_order(st, p.dtype(), values, opts.entry_positions);
    st.build_seconds = kernels::now_seconds() - t0;
    return {std::move(st), {}, {}};
  }
  std::array<LevelOut, kMaxLevels> out{};
  for (std::size_t l = 0; l < L; ++l) {
    Level& lv = st.levels[l];
    out[l].compressed = is_compressed(lv.format);
    out[l].dim = lv.dim;
    if (!out[l].compressed) continue;
    out[l].parents = parent_of[l];
    kernels::resize_huge(lv.pos, static_cast<std::size_t>(parent_of[l]) + 1);
    out[l].pos = lv.pos.data();
    if (lv.format == LevelFormat::N) {
      kernels::resize_huge(lv.crd16, static_cast<std::size_t>(lv.size));
      out[l].crd16 = lv.crd16.data();
    } else {
      kernels::resize_huge(lv.crd, static_cast<std::size_t>(lv.size));
      out[l].crd = lv.crd.data();
    }
  }
  // Without padding the leaf positions are 0 .. nnz-1 in level order: nonzero ord[r] sits at r.
  // Values and entry positions are then written outside the scan (a copy and a count when the
  // order is the canonical one), and the scan has less to carry.
  const bool leaf_is_rank = parent_size == nnz;
  kernels::with_value_type(p.dtype(), [&](auto value_type) {
    using V = decltype(value_type);
    with_level_count(L, [&](auto N) {
      constexpr std::size_t kN = decltype(N)::value;
      V* vals = nullptr;
      index_t* positions = nullptr;
      if (!leaf_is_rank) {
        st.vals.assign(p.dtype(), static_cast<std::size_t>(parent_size));
        kernels::resize_huge(st.entry_position, n);
        vals = st.vals.data<V>();
        positions = st.entry_position.data();
      }
      const double* v = values.data();
      if (ord && leaf_is_rank) fill_levels<kN, true, false>(c, ord, n, out, v, vals, positions);
      if (ord && !leaf_is_rank) fill_levels<kN, true, true>(c, ord, n, out, v, vals, positions);
      if (!ord && leaf_is_rank) fill_levels<kN, false, false>(c, ord, n, out, v, vals, positions);
      if (!ord && !leaf_is_rank) fill_levels<kN, false, true>(c, ord, n, out, v, vals, positions);
    });
    if (!leaf_is_rank) return;
    if (ord) {
      kernels::resize_huge(st.entry_position, n);
      st.vals.assign(p.dtype(), n);
      V* out_vals = st.vals.data<V>();
      for (std::size_t r = 0; r < n; ++r) {
        out_vals[r] = static_cast<V>(values[ord[r]]);
        st.entry_position[ord[r]] = static_cast<index_t>(r);
      }
    } else {
      values_in_canonical_order(st, p.dtype(), values, opts.entry_positions);
    }
  });
  st.build_seconds = kernels::now_seconds() - t0;
  return {std::move(st), {}, {}};
}

}  // namespace waco::codegen
