// Distinct shifted coordinate tuples for every shift combination (prefix_counts.hpp). The last two
// modes (mid, last) are handled hierarchically: groups of equal (head >> a, mid >> b) hold the
// sorted distinct last coordinates; the bit widths of consecutive differences give every last
// shift at once, and groups with equal mid >> (b + 1) are adjacent, so going to b + 1 is a linear
// merge. For 3-D tensors the head mode's shift a is an outer loop; going to a + 1 merges the
// tuples of adjacent heads, also linearly. Sorted input (a canonical operand) is not sorted again.
// A matrix is counted in chunks of whole 2^k-row blocks up to level k (each chunk's levels in
// the cores' caches, only level k's lists kept for the whole matrix), a large one's chunks on two
// threads.
#include "waco/heuristics/prefix_counts.hpp"

#include "waco/codegen/storage.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <iterator>
#include <limits>
#include <type_traits>
#include <sstream>

#include "waco/kernels/error.hpp"

namespace waco::heuristics {
using kernels::index_t;

namespace {

int bit_width_u64(std::uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

using Tuple = std::array<index_t, 3>;
/// An allocator that leaves an element made without a value uninitialized, so that a list
/// resized before it is written holds resident only the pages written (a merge's output is
/// sized by its input and often half as long; the chunks' level-k output is sized by the
/// operand).
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
using List = std::vector<index_t, UninitializedAllocator<index_t>>;
/// Offsets into the flat lists: an operand holds fewer than 2^32 nonzeros (its coordinates
/// are 32-bit and kernels refuse more than kMaxIndex entries), so 4 bytes a group.
using Offset = std::uint32_t;
/// Pairs of consecutive last coordinates in a group, per bit width of their xor.
using Histogram = std::array<std::int64_t, 34>;
void add(Histogram& to, const Histogram& h) {
  for (std::size_t w = 0; w < to.size(); ++w) to[w] += h[w];
}
/// Tuples from which a matrix's two halves are counted on two threads (below, the thread start
/// costs more than it saves).
constexpr std::size_t kParallelMinTuples = 1 << 15;

/// Sorted distinct (head, mid, last) tuples as Levels::build reads them: a list made for them.
struct TupleList {
  static constexpr bool kHeads = true;
  const std::vector<Tuple>& t;
  index_t head(std::size_t e) const { return t[e][0]; }
  index_t mid(std::size_t e) const { return t[e][1]; }
  index_t last(std::size_t e) const { return t[e][2]; }
};
/// ... or a canonical matrix's own coordinates, read in place (head 0): no copy of the operand
/// (12 bytes a nonzero).
struct MatrixCoordinates {
  static constexpr bool kHeads = false;
  const index_t* row;
  const index_t* col;
  index_t head(std::size_t) const { return 0; }
  index_t mid(std::size_t e) const { return row[e]; }
  index_t last(std::size_t e) const { return col[e]; }
};

/// The groups of one level b: key (head, mid >> b), each with its sorted distinct last
/// coordinates (a flat list), and the histogram of the level. A canonical matrix's level 0 reads
/// the operand's own column array (no copy); the first merge writes the one list the levels
/// own, and every later merge rewrites it in place (the union of two groups never runs ahead of
/// what it has read: below), so the counts hold one list of at most nnz coordinates, not two
/// (at 20M nonzeros 80 MB instead of 240).
class Levels {
 public:
  Histogram hist{};
  std::size_t groups() const { return key_m_.size(); }

  /// Level 0 of the sorted distinct tuples [lo, hi) of t: one group per (head, mid); the
  /// histogram is taken while the groups are built (and so at every level while merging).
  template <class Tuples>
  void build(const Tuples& t, std::size_t lo, std::size_t hi) {
    heads_ = Tuples::kHeads;
    key_h_.clear();
    key_m_.clear();
    start_.clear();
    if constexpr (std::is_same_v<Tuples, MatrixCoordinates>) {
      last_.clear();
      src_ = t.col + lo;
    } else {
      last_.resize(hi - lo);
      src_ = nullptr;
    }
    hist = {};
    for (std::size_t e = lo; e < hi; ++e) {
      if (e == lo || t.head(e) != t.head(e - 1) || t.mid(e) != t.mid(e - 1)) {
        if (heads_) key_h_.push_back(t.head(e));
        key_m_.push_back(t.mid(e));
        start_.push_back(static_cast<Offset>(e - lo));
      } else {
        ++hist[static_cast<std::size_t>(bit_width_u64(static_cast<std::uint64_t>(t.last(e - 1)) ^
                                                      static_cast<std::uint64_t>(t.last(e))))];
      }
      if constexpr (!std::is_same_v<Tuples, MatrixCoordinates>) last_[e - lo] = t.last(e);
    }
    start_.push_back(static_cast<Offset>(hi - lo));
  }

  /// Level b + 1: adjacent groups whose (head, mid >> (b + 1)) agree merged. Keys are distinct,
  /// so a group meets at most its sibling (mid 2m and 2m + 1). Their lists are strictly
  /// increasing; the union is written without repeats, the histogram taken on the way.
  /// In place: the output so far is no longer than the input read (n_out <= start of the group
  /// pair), so the k-th value written lands at n_out + k <= start_[g + 1] + (values read of the
  /// second list) - 1, before the second list's next unread value; the first list is read in
  /// place while the writes cannot reach it (below), else from a copy. Keys and starts are
  /// written at an index no larger than the group's, after it was read.
  void merge() {
    const bool aliased = src_ == nullptr;
    const index_t* in = aliased ? last_.data() : src_;
    if (!aliased) last_.resize(start_.back());
    index_t* out = last_.data();
    std::size_t n_out = 0, g_out = 0;
    // Four histograms taken in turn: one counter incremented at every step would chain each
    // increment on the store of the last (most widths fall in a few bins).
    std::array<Histogram, 4> part{};
    index_t prev = 0;         // the group's last value written
    std::int64_t inside = 0;  // 1 once the group has one
    const auto emit = [&](index_t v) {
      const std::size_t w = static_cast<std::size_t>(
          bit_width_u64(static_cast<std::uint64_t>(prev) ^ static_cast<std::uint64_t>(v)));
      part[n_out & 3][w] += inside;
      inside = 1;
      prev = v;
      out[n_out++] = v;
    };
    const std::size_t groups = key_m_.size();
    for (std::size_t g = 0; g < groups;) {
      const index_t m = key_m_[g] >> 1;
      const index_t h = heads_ ? key_h_[g] : 0;
      const bool pair = g + 1 < groups && (!heads_ || key_h_[g + 1] == h) &&
                        (key_m_[g + 1] >> 1) == m;
      const std::size_t s0 = start_[g], s1 = start_[g + 1], s2 = pair ? start_[g + 2] : s1;
      if (heads_) key_h_[g_out] = h;
      key_m_[g_out] = m;
      start_[g_out] = static_cast<Offset>(n_out);
      ++g_out;
      inside = 0;
      const index_t* x_list = in + s0;
      // Written so far within the pair: at most what was read of both lists, so the k-th value
      // lands at n_out + k <= s0 + (read of the first) + (read of the second) - 1 - (s0 - n_out):
      // behind the first list's next unread value as long as the second list is no longer than
      // the repeats dropped so far (s0 - n_out). Otherwise the first list is copied aside.
      if (aliased && pair && s2 - s1 > s0 - n_out) {
        tmp_.assign(in + s0, in + s1);
        x_list = tmp_.data();
      }
      std::size_t i = 0, j = s1;
      const std::size_t ie = s1 - s0, je = s2;
      while (i < ie && j < je) {
        const index_t x = x_list[i], y = in[j];
        i += x <= y;
        j += y <= x;
        emit(x < y ? x : y);
      }
      for (; i < ie; ++i) emit(x_list[i]);
      for (; j < je; ++j) emit(in[j]);
      g += pair ? 2 : 1;
    }
    start_[g_out] = static_cast<Offset>(n_out);
    start_.resize(g_out + 1);
    key_m_.resize(g_out);
    if (heads_) key_h_.resize(g_out);
    last_.resize(n_out);
    src_ = nullptr;
    hist = {};
    for (const Histogram& p : part)
      add(hist, p);
  }

  /// This level's groups after those of `keys`/`starts`: their keys, their starts offset by
  /// `written`, their lists copied to out + written (`written` advanced). A matrix's groups only.
  void take(std::vector<index_t>& keys, std::vector<Offset>& starts, index_t* out,
            std::size_t& written) const {
    keys.insert(keys.end(), key_m_.begin(), key_m_.end());
    for (std::size_t g = 0; g < key_m_.size(); ++g)
      starts.push_back(static_cast<Offset>(written + start_[g]));
    const std::size_t n = start_.back();
    if (n > 0) std::memcpy(out + written, lists(), n * sizeof(index_t));
    written += n;
  }

  /// Appends the groups of `o` (of the same level, keys all after this one's; both lists
  /// owned, as after `adopt`).
  void append(const Levels& o) {
    WACO_ASSERT(src_ == nullptr && o.src_ == nullptr, "append joins owned lists");
    const Offset offset = static_cast<Offset>(last_.size());
    key_m_.insert(key_m_.end(), o.key_m_.begin(), o.key_m_.end());
    start_.pop_back();
    for (Offset s : o.start_) start_.push_back(s + offset);
    last_.insert(last_.end(), o.last_.begin(), o.last_.end());
    add(hist, o.hist);
  }

  /// A matrix's level made elsewhere (the chunks' `take`): its keys, starts (with the end),
  /// lists and histogram.
  void adopt(std::vector<index_t> keys, std::vector<Offset> starts, List lists,
             const Histogram& h) {
    heads_ = false;
    src_ = nullptr;
    key_h_.clear();
    key_m_ = std::move(keys);
    start_ = std::move(starts);
    last_ = std::move(lists);
    hist = h;
  }

 private:
  const index_t* lists() const { return src_ != nullptr ? src_ : last_.data(); }
  /// Whether tuples have a head mode (3-D tensors); a matrix's groups keep no head keys.
  bool heads_ = true;
  /// The lists of level 0 when they are a canonical matrix's column array (not owned), else null.
  const index_t* src_ = nullptr;
  std::vector<index_t> key_h_, key_m_;
  List last_;
  std::vector<index_t> tmp_;  ///< the first list of a pair, copied aside while merging in place
  std::vector<Offset> start_;
};

/// Entries a chunk holds at least: whole 2^k-row blocks, k chosen so that a block holds about
/// this many on average, so that a chunk's keys, starts and lists (~12 bytes an entry) stay in
/// the cores' caches through levels 0 .. k.
constexpr std::size_t kChunkEntries = std::size_t{1} << 15;

/// The first of the sorted tuples [from, to) in row `row` or after (`to` if none).
template <class Tuples>
std::size_t first_at(const Tuples& t, std::size_t from, std::size_t to, std::int64_t row) {
  while (from < to) {
    const std::size_t m = from + (to - from) / 2;
    if (t.mid(m) < row) from = m + 1; else to = m;
  }
  return from;
}

/// The chunks' shift k: the largest (at most mid_bits) whose 2^k-row blocks hold at most
/// kChunkEntries on average.
int chunk_shift(std::size_t tuples, std::int64_t rows, int mid_bits) {
  int k = 0;
  while (k < mid_bits && (static_cast<std::uint64_t>(tuples) << (k + 1)) <=
                             static_cast<std::uint64_t>(kChunkEntries) *
                                 static_cast<std::uint64_t>(rows))
    ++k;
  return k;
}

/// One part of a matrix's levels: per level 0 .. top its groups and histogram, and the part's
/// groups of level top.
struct PartLevels {
  std::vector<std::size_t> groups;
  std::vector<Histogram> hists;
  Levels levels;
};

/// Levels 0 .. top of the sorted distinct tuples [lo, hi) of a matrix (head 0), rows that share
/// no 2^top-row block with tuples outside: chunk by chunk up to level k <= top (groups of a level
/// never straddle a 2^k-row block, so a chunk of whole blocks goes through levels 0 .. k on its
/// own, in the cores' caches, and only level k's lists are kept for the part), then the part's
/// groups merged up to top. Its lists have room for `capacity` entries (>= hi - lo;
/// uninitialized, so only what is written is resident): another part's are appended to them at
/// level top.
template <class Tuples>
void count_part(const Tuples& t, std::size_t lo, std::size_t hi, int k, int top,
                std::size_t capacity, PartLevels& out) {
  out.groups.assign(static_cast<std::size_t>(top) + 1, 0);
  out.hists.assign(static_cast<std::size_t>(top) + 1, Histogram{});
  List lists(capacity);
  std::vector<index_t> keys;
  std::vector<Offset> starts;
  std::size_t written = 0;
  Levels chunk;
  // Chunk by chunk: at least kChunkEntries tuples, ending at a 2^k-row block's end.
  for (std::size_t c0 = lo; c0 < hi;) {
    const std::size_t at = std::min(hi - 1, c0 + kChunkEntries - 1);
    const std::size_t c1 =
        first_at(t, at, hi, ((static_cast<std::int64_t>(t.mid(at)) >> k) + 1) << k);
    chunk.build(t, c0, c1);
    for (std::size_t lb = 0;; ++lb) {
      out.groups[lb] += chunk.groups();
      add(out.hists[lb], chunk.hist);
      if (lb == static_cast<std::size_t>(k)) break;
      chunk.merge();
    }
    chunk.take(keys, starts, lists.data(), written);
    c0 = c1;
  }
  starts.push_back(static_cast<Offset>(written));
  lists.resize(written);
  out.levels.adopt(std::move(keys), std::move(starts), std::move(lists),
                   out.hists[static_cast<std::size_t>(k)]);
  for (std::size_t lb = static_cast<std::size_t>(k) + 1; lb <= static_cast<std::size_t>(top);
       ++lb) {
    out.levels.merge();
    out.groups[lb] = out.levels.groups();
    out.hists[lb] = out.levels.hist;
  }
}

/// Levels 0 .. top of a matrix's sorted distinct tuples, in chunks (count_part). `parallel`:
/// the rows below and above a cut at a multiple of 2^top, which never share a group at levels
/// 0 .. top, as two parts on two threads, joined at level top. The cut is the median row
/// rounded to a multiple of 2^top, for the largest top that leaves each side at least a third
/// of the entries (or the best balance). Fills `groups` and `hists` for levels 0 .. top and
/// `levels` with level top; returns top.
template <class Tuples>
int count_matrix(const Tuples& t, std::size_t tuples, std::int64_t rows, int mid_bits,
                 bool parallel, Levels& levels, std::vector<std::size_t>& groups,
                 std::vector<Histogram>& hists) {
  const int k = chunk_shift(tuples, rows, mid_bits);
  std::array<PartLevels, 2> part;
  if (!parallel) {
    count_part(t, 0, tuples, k, k, tuples, part[0]);
    levels = std::move(part[0].levels);
    groups = std::move(part[0].groups);
    hists = std::move(part[0].hists);
    return k;
  }
  const std::int64_t median = t.mid(tuples / 2);
  int top = 0;
  std::size_t cut = 0, best = 0;
  for (int kk = mid_bits - 1; kk >= 1; --kk) {
    const std::int64_t step = std::int64_t{1} << kk;
    const std::size_t c =
        first_at(t, 0, tuples, std::max(step, (median + step / 2) / step * step));
    const std::size_t side = std::min(c, tuples - c);
    if (side > best) best = side, cut = c, top = kk;
    if (3 * side >= tuples) break;
  }
  const int chunk_k = std::min(k, top);
  // An exception may not leave an OpenMP region: each part's is rethrown after it.
  std::array<std::exception_ptr, 2> failed;
#pragma omp parallel for num_threads(2) schedule(static, 1)
  for (int q = 0; q < 2; ++q) {
    try {
      if (q == 0) count_part(t, 0, cut, chunk_k, top, tuples, part[0]);
      else count_part(t, cut, tuples, chunk_k, top, tuples - cut, part[1]);
    } catch (...) {
      failed[static_cast<std::size_t>(q)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  levels = std::move(part[0].levels);
  levels.append(part[1].levels);
  groups = std::move(part[0].groups);
  hists = std::move(part[0].hists);
  for (std::size_t lb = 0; lb < groups.size(); ++lb) {
    groups[lb] += part[1].groups[lb];
    add(hists[lb], part[1].hists[lb]);
  }
  return top;
}

}  // namespace

PrefixCounts PrefixCounts::compute(const kernels::Problem& p) {
  if (kernels::needs_tensor(p.kind)) {
    WACO_ASSERT(p.T != nullptr, "the problem has no tensor");
    if (p.T->order() != 3)
      throw kernels::Error("prefix counts need an order-3 tensor", "mttkrp takes 3-D tensors");
    std::vector<const std::vector<index_t>*> c{&p.T->idx[0], &p.T->idx[1], &p.T->idx[2]};
    return compute(c, {p.T->dims[0], p.T->dims[1], p.T->dims[2]});
  }
  WACO_ASSERT(p.A != nullptr, "the problem has no matrix");
  return compute({&p.A->row, &p.A->col}, {p.A->rows, p.A->cols});
}

PrefixCounts PrefixCounts::compute(const std::vector<const std::vector<index_t>*>& coords,
                                   const std::vector<std::int64_t>& dims, int threads) {
  const std::size_t n = coords.size();
  if (n != 2 && n != 3)
    throw kernels::Error("prefix counts support 2 or 3 modes, not " + std::to_string(n),
                         "give a matrix or a 3-D tensor");
  WACO_ASSERT(dims.size() == n, "one dimension per mode");
  PrefixCounts pc;
  pc.nnz_ = static_cast<std::int64_t>(coords[0]->size());
  for (std::size_t m = 0; m < n; ++m) {
    WACO_ASSERT(static_cast<std::int64_t>(coords[m]->size()) == pc.nnz_, "ragged coordinates");
    pc.bits_.push_back(dims[m] <= 1 ? 0 : bit_width_u64(static_cast<std::uint64_t>(dims[m] - 1)));
  }
  if (static_cast<std::uint64_t>(pc.nnz_) > std::numeric_limits<std::uint32_t>::max())
    throw kernels::Error("prefix counts of " + std::to_string(pc.nnz_) +
                             " nonzeros: more than 32-bit offsets hold",
                         "an operand holds at most " + std::to_string(kernels::kMaxIndex) +
                             " nonzeros");
  std::size_t cells = 1;
  for (int b : pc.bits_) cells *= static_cast<std::size_t>(b + 1);
  pc.table_.assign(cells, 0);
  if (pc.nnz_ == 0) return pc;

  const int head_bits = n == 3 ? pc.bits_[0] : 0;
  const int mid_bits = pc.bits_[n - 2];
  const int last_bits = pc.bits_[n - 1];
  const std::size_t stride_mid = static_cast<std::size_t>(last_bits + 1);
  const std::size_t stride_head = stride_mid * static_cast<std::size_t>(mid_bits + 1);
  const std::size_t nnz = static_cast<std::size_t>(pc.nnz_);

  // Distinct (head, mid, last), sorted; a canonical operand's coordinates already are (one check
  // instead of a sort), and a canonical matrix's are read where they are. Going from head shift
  // a to a + 1 merges the runs of heads 2h and 2h + 1.
  const MatrixCoordinates matrix{coords[0]->data(), n == 2 ? coords[1]->data() : nullptr};
  bool in_place = n == 2;
  for (std::size_t e = 1; in_place && e < nnz; ++e)
    in_place = matrix.row[e - 1] < matrix.row[e] ||
               (matrix.row[e - 1] == matrix.row[e] && matrix.col[e - 1] < matrix.col[e]);
  std::vector<Tuple> t, t_next;
  if (!in_place) {
    t.resize(nnz);
    for (std::size_t e = 0; e < nnz; ++e)
      t[e] = {n == 3 ? (*coords[0])[e] : 0, (*coords[n - 2])[e], (*coords[n - 1])[e]};
    if (std::adjacent_find(t.begin(), t.end(), [](const Tuple& x, const Tuple& y) {
          return !(x < y);
        }) != t.end()) {
      std::sort(t.begin(), t.end());
      t.erase(std::unique(t.begin(), t.end()), t.end());
    }
  }
  const TupleList list{t};
  const std::size_t tuples = in_place ? nnz : t.size();
  const auto tail_less = [](const Tuple& x, const Tuple& y) {
    return x[1] < y[1] || (x[1] == y[1] && x[2] < y[2]);
  };
  // The row (count) of one level: groups + the pairs of consecutive last coordinates with bit
  // width > c, for every c.
  const auto write_level = [&](int a, int b, std::size_t groups, const Histogram& hist) {
    std::int64_t above = 0;
    for (std::size_t w = hist.size(); w-- > static_cast<std::size_t>(last_bits) + 1;) above += hist[w];
    for (int c = last_bits; c >= 0; --c) {
      pc.table_[static_cast<std::size_t>(a) * stride_head + static_cast<std::size_t>(b) * stride_mid +
                static_cast<std::size_t>(c)] = static_cast<std::int64_t>(groups) + above;
      above += hist[static_cast<std::size_t>(c)];
    }
  };
  Levels levels;
  for (int a = 0; a <= head_bits; ++a) {
    if (a > 0) {
      // (head >> a, mid, last) from (head >> (a - 1), mid, last): heads 2h and 2h + 1 are
      // adjacent runs, each sorted by (mid, last) without repeats; their union is run h.
      t_next.clear();
      for (std::size_t r = 0; r < t.size();) {
        const index_t h = t[r][0] >> 1;
        std::size_t r2 = r;
        while (r2 < t.size() && t[r2][0] == t[r][0]) ++r2;
        std::size_t r3 = r2;
        while (r3 < t.size() && (t[r3][0] >> 1) == h) ++r3;
        const std::size_t from = t_next.size();
        std::set_union(t.begin() + static_cast<std::ptrdiff_t>(r),
                       t.begin() + static_cast<std::ptrdiff_t>(r2),
                       t.begin() + static_cast<std::ptrdiff_t>(r2),
                       t.begin() + static_cast<std::ptrdiff_t>(r3), std::back_inserter(t_next),
                       tail_less);
        for (std::size_t x = from; x < t_next.size(); ++x) t_next[x][0] = h;
        r = r3;
      }
      t.swap(t_next);
    }
    int b = 0;
    if (n == 2) {
      std::vector<std::size_t> groups;
      std::vector<Histogram> hists;
      const bool parallel = mid_bits >= 2 && tuples >= kParallelMinTuples &&
                            (threads == 0 ? omp_get_max_threads() : threads) >= 2;
      const int k = in_place ? count_matrix(matrix, tuples, dims[0], mid_bits, parallel, levels,
                                            groups, hists)
                             : count_matrix(list, tuples, dims[0], mid_bits, parallel, levels,
                                            groups, hists);
      for (int lb = 0; lb < k; ++lb)
        write_level(a, lb, groups[static_cast<std::size_t>(lb)],
                    hists[static_cast<std::size_t>(lb)]);
      b = k;
    } else {
      levels.build(list, 0, t.size());
    }
    for (;; ++b) {
      write_level(a, b, levels.groups(), levels.hist);
      if (b == mid_bits) break;
      levels.merge();
    }
  }
  return pc;
}

std::int64_t PrefixCounts::distinct(const std::vector<int>& shift) const {
  WACO_ASSERT(shift.size() == bits_.size(), "one shift per mode");
  return distinct(shift.data());
}

std::int64_t PrefixCounts::distinct(const int* shift) const {
  std::size_t idx = 0;
  for (std::size_t m = 0; m < bits_.size(); ++m) {
    const int s = std::clamp(shift[m], 0, bits_[m]);
    idx = idx * static_cast<std::size_t>(bits_[m] + 1) + static_cast<std::size_t>(s);
  }
  return table_[idx];
}

// ---- format sizes (mirrors codegen::build_storage) ----------------------------------------

namespace {

int log2_floor(std::int64_t v) {
  int r = 0;
  while ((std::int64_t{1} << (r + 1)) <= v) ++r;
  return r;
}

}  // namespace

LevelShapes level_shapes(const PrefixCounts& pc, const codegen::KernelSpec& spec,
                         const std::vector<std::int64_t>& extents, const std::vector<int>& split,
                         const std::vector<codegen::Loop>& levels) {
  using codegen::Loop;
  constexpr std::size_t kMaxModes = 3;
  WACO_ASSERT(pc.modes() == static_cast<int>(spec.sparse_vars.size()) &&
                  spec.sparse_vars.size() <= kMaxModes && levels.size() <= LevelShapes::kMaxLevels,
              "the prefix counts do not describe this kernel's sparse operand");
  LevelShapes ls;
  ls.count = levels.size();
  // The prefix through each level as a shift per mode: absent (bits), x1 (log2 s) or whole (0).
  std::array<int, kMaxModes> shift{};
  for (int m = 0; m < pc.modes(); ++m) shift[static_cast<std::size_t>(m)] = pc.bits(m);
  for (std::size_t l = 0; l < levels.size(); ++l) {
    const Loop& lp = levels[l];
    const std::size_t v = static_cast<std::size_t>(spec.var_index(lp.var));
    std::size_t m = 0;
    while (spec.sparse_vars[m] != lp.var) ++m;
    const std::int64_t e = extents[v];
    const std::int64_t s = split[v];
    if (lp.part == Loop::Part::Whole) {
      ls.dims[l] = static_cast<double>(e);
      shift[m] = 0;
    } else if (lp.part == Loop::Part::Outer) {
      ls.dims[l] = static_cast<double>((e + s - 1) / s);
      shift[m] = std::min(log2_floor(s), pc.bits(static_cast<int>(m)));
    } else {
      ls.dims[l] = static_cast<double>(s);
      shift[m] = 0;
    }
    ls.compressed[l] = static_cast<double>(pc.distinct(shift.data()));
  }
  return ls;
}

FormatVerdict check_format(const LevelShapes& ls, const std::vector<codegen::LevelFormat>& formats,
                           std::int64_t nnz_count, double max_padding) {
  const double nnz = static_cast<double>(std::max<std::int64_t>(nnz_count, 1));
  const double value_bound = max_padding * nnz;
  double dims_sum = 0;
  for (std::size_t l = 0; l < ls.count; ++l) dims_sum += ls.dims[l];
  const double index_bound = value_bound + 2.0 * dims_sum + 2.0 * static_cast<double>(ls.count);
  FormatVerdict v;
  // N levels first, from the dims alone (build_storage checks them before anything else).
  for (std::size_t l = 0; l < ls.count; ++l)
    if (formats[l] == codegen::LevelFormat::N &&
        ls.dims[l] > static_cast<double>(codegen::kMaxNarrowRange)) {
      v.refusal = "narrow-overflow";
      v.level = static_cast<int>(l);
      v.size = ls.dims[l];
      return v;
    }
  double parent = 1, index_words = 0;
  for (std::size_t l = 0; l < ls.count; ++l) {
    double size = 0;
    v.level = static_cast<int>(l);
    if (formats[l] == codegen::LevelFormat::U) {
      size = parent * ls.dims[l];
      if (size > value_bound && size > index_bound) {
        v.refusal = "padding-bound";
        v.size = size;
        return v;
      }
    } else {
      index_words += parent + 1;
      if (index_words > index_bound) {
        v.refusal = "padding-bound";
        v.size = parent + 1;
        return v;
      }
      size = ls.compressed[l];
      index_words += size;
    }
    if (size > static_cast<double>(kernels::kMaxIndex)) {
      v.refusal = "index-overflow";
      v.size = size;
      return v;
    }
    parent = size;
  }
  v.level = -1;
  v.size = parent;
  if (parent > value_bound) {
    v.refusal = "padding-bound";
    return v;
  }
  v.stored_values = parent;
  return v;
}

FormatVerdict check_format(const PrefixCounts& pc, const codegen::KernelSpec& spec,
                           const std::vector<std::int64_t>& extents, const std::vector<int>& split,
                           const std::vector<codegen::Loop>& levels,
                           const std::vector<codegen::LevelFormat>& formats, double max_padding) {
  return check_format(level_shapes(pc, spec, extents, split, levels), formats, pc.nnz(),
                      max_padding);
}

double format_stored_values(const LevelShapes& ls,
                            const std::vector<codegen::LevelFormat>& formats) {
  double parent = 1;
  for (std::size_t l = 0; l < ls.count; ++l)
    parent = formats[l] == codegen::LevelFormat::U ? parent * ls.dims[l] : ls.compressed[l];
  return parent;
}

std::string describe_refusal(const FormatVerdict& v, const std::vector<codegen::Loop>& levels,
                             const std::vector<codegen::LevelFormat>& formats, std::int64_t nnz,
                             double max_padding) {
  if (v.refusal == nullptr) return {};
  const int level = v.level;
  const std::size_t l = static_cast<std::size_t>(std::max(level, 0));
  if (std::string(v.refusal) == "narrow-overflow")
    return codegen::narrow_refusal_message(level, levels[l], static_cast<std::int64_t>(v.size));
  return codegen::refusal_message(level, levels[l], formats[l], static_cast<long long>(v.size), nnz,
                                  max_padding, std::string(v.refusal) == "index-overflow");
}

}  // namespace waco::heuristics
