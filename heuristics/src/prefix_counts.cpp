// Distinct shifted coordinate tuples for every shift combination (prefix_counts.hpp). The last two
// modes (mid, last) are handled hierarchically: groups of equal (head >> a, mid >> b) hold the
// sorted distinct last coordinates; the bit widths of consecutive differences give every last
// shift at once, and groups with equal mid >> (b + 1) are adjacent, so going to b + 1 is a linear
// merge. For 3-D tensors the head mode's shift a is an outer loop that re-sorts the tuples.
#include "waco/heuristics/prefix_counts.hpp"

#include "waco/codegen/storage.hpp"

#include <algorithm>
#include <array>
#include <sstream>

#include "waco/kernels/error.hpp"

namespace waco::heuristics {
using kernels::index_t;

namespace {

int bit_width_u64(std::uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

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
                                   const std::vector<std::int64_t>& dims) {
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

  for (int a = 0; a <= head_bits; ++a) {
    // Distinct (head >> a, mid, last), sorted.
    std::vector<std::array<index_t, 3>> t(nnz);
    for (std::size_t e = 0; e < nnz; ++e) {
      const index_t h = n == 3 ? static_cast<index_t>((*coords[0])[e] >> a) : 0;
      t[e] = {h, (*coords[n - 2])[e], (*coords[n - 1])[e]};
    }
    std::sort(t.begin(), t.end());
    t.erase(std::unique(t.begin(), t.end()), t.end());
    // Groups: key (head, mid >> b); flat lists of sorted distinct last coordinates.
    std::vector<index_t> key_h, key_m;
    std::vector<std::size_t> start;
    std::vector<index_t> last;
    last.reserve(t.size());
    for (std::size_t e = 0; e < t.size(); ++e) {
      if (e == 0 || t[e][0] != t[e - 1][0] || t[e][1] != t[e - 1][1]) {
        key_h.push_back(t[e][0]);
        key_m.push_back(t[e][1]);
        start.push_back(last.size());
      }
      last.push_back(t[e][2]);
    }
    start.push_back(last.size());
    for (int b = 0; b <= mid_bits; ++b) {
      // Histogram of bit widths between consecutive last coordinates within each group.
      std::array<std::int64_t, 34> hist{};
      const std::size_t groups = key_h.size();
      for (std::size_t g = 0; g < groups; ++g)
        for (std::size_t x = start[g] + 1; x < start[g + 1]; ++x)
          ++hist[static_cast<std::size_t>(bit_width_u64(
              static_cast<std::uint64_t>(last[x - 1]) ^ static_cast<std::uint64_t>(last[x])))];
      std::int64_t above = 0;  // pairs with bit width > c
      for (std::size_t w = 34; w-- > static_cast<std::size_t>(last_bits) + 1;) above += hist[w];
      for (int c = last_bits; c >= 0; --c) {
        pc.table_[static_cast<std::size_t>(a) * stride_head + static_cast<std::size_t>(b) * stride_mid +
                  static_cast<std::size_t>(c)] = static_cast<std::int64_t>(groups) + above;
        above += hist[static_cast<std::size_t>(c)];
      }
      if (b == mid_bits) break;
      // Merge adjacent groups whose (head, mid >> (b + 1)) agree.
      std::vector<index_t> nh, nm, nlast;
      std::vector<std::size_t> nstart;
      nlast.reserve(last.size());
      for (std::size_t g = 0; g < groups;) {
        std::size_t g2 = g + 1;
        const index_t m = key_m[g] >> 1;
        while (g2 < groups && key_h[g2] == key_h[g] && (key_m[g2] >> 1) == m) ++g2;
        nh.push_back(key_h[g]);
        nm.push_back(m);
        nstart.push_back(nlast.size());
        const std::size_t from = nlast.size();
        for (std::size_t x = g; x < g2; ++x) {
          const std::size_t mid_at = nlast.size();
          nlast.insert(nlast.end(), last.begin() + static_cast<std::ptrdiff_t>(start[x]),
                       last.begin() + static_cast<std::ptrdiff_t>(start[x + 1]));
          std::inplace_merge(nlast.begin() + static_cast<std::ptrdiff_t>(from),
                             nlast.begin() + static_cast<std::ptrdiff_t>(mid_at), nlast.end());
        }
        nlast.erase(std::unique(nlast.begin() + static_cast<std::ptrdiff_t>(from), nlast.end()),
                    nlast.end());
        g = g2;
      }
      nstart.push_back(nlast.size());
      key_h.swap(nh);
      key_m.swap(nm);
      start.swap(nstart);
      last.swap(nlast);
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
  return codegen::refusal_message(level, levels[l], formats[l], static_cast<long long>(v.size), nnz,
                                  max_padding, std::string(v.refusal) == "index-overflow");
}

}  // namespace waco::heuristics
