// Building the sparse operand in a SuperSchedule's format. Steps: (1) the split coordinate of
// every nonzero at every level; (2) a stable LSD counting sort of the nonzeros by their level
// coordinates (skipped when already in order); (3) level by level, the position of every nonzero:
// U: parent * dim + coordinate; C: the rank of its distinct (parent, coordinate) pair, with pos/crd
// built in the same scan. Sizes are checked against the padding bound before anything of that size
// is allocated.
#include "waco/codegen/storage.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::codegen {
using kernels::index_t;

namespace {

/// The coordinate arrays of the sparse operand, one per sparse variable (spec.sparse_vars order).
std::vector<const std::vector<index_t>*> sparse_coordinates(const kernels::Problem& p) {
  if (kernels::needs_tensor(p.kind)) return {&p.T->idx[0], &p.T->idx[1], &p.T->idx[2]};
  return {&p.A->row, &p.A->col};
}

std::vector<float> const& sparse_values(const kernels::Problem& p) {
  return kernels::needs_tensor(p.kind) ? p.T->val : p.A->val;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::int64_t Storage::bytes() const {
  std::int64_t b = static_cast<std::int64_t>(vals.size()) * 4;
  for (const Level& l : levels) b += static_cast<std::int64_t>(l.pos.size() + l.crd.size()) * 4;
  return b;
}

StorageResult build_storage(const SuperSchedule& s, const kernels::Problem& p,
                            const StorageOptions& opts) {
  const double t0 = kernels::now_seconds();
  WACO_ASSERT(s.kind == p.kind, "schedule and problem are for different kernels");
  const KernelSpec& spec = kernel_spec(p.kind);
  const std::vector<std::int64_t> ext = extents(spec, p);
  const auto coords = sparse_coordinates(p);
  const std::vector<float>& values = sparse_values(p);
  const std::int64_t nnz = static_cast<std::int64_t>(values.size());
  const std::vector<Loop> loops = s.levels();
  const std::size_t L = loops.size();
  WACO_ASSERT(L == s.formats.size(), "one format per level");

  // Bounds, in words: stored values, and index arrays (C levels: parent count + 1 + size).
  const double value_bound = opts.max_padding * static_cast<double>(std::max<std::int64_t>(nnz, 1));
  double dims_sum = 0;

  // (1) level coordinates and dimensions.
  std::vector<std::vector<index_t>> c(L);
  Storage st;
  st.nnz = nnz;
  st.levels.resize(L);
  for (std::size_t l = 0; l < L; ++l) {
    const Loop& loop = loops[l];
    const int v = spec.var_index(loop.var);
    const std::vector<index_t>& x = *coords[std::find(spec.sparse_vars.begin(), spec.sparse_vars.end(), loop.var) -
                                            spec.sparse_vars.begin()];
    const std::int64_t sx = s.split[v];
    Level& lv = st.levels[l];
    lv.format = s.formats[l];
    lv.loop = loop;
    lv.dim = loop.part == Loop::Part::Whole ? ext[v]
             : loop.part == Loop::Part::Outer ? ceil_div(ext[v], sx)
                                              : sx;
    dims_sum += static_cast<double>(lv.dim);
    c[l].resize(nnz);
    for (std::int64_t e = 0; e < nnz; ++e)
      c[l][e] = loop.part == Loop::Part::Whole ? x[e]
                : loop.part == Loop::Part::Outer ? static_cast<index_t>(x[e] / sx)
                                                 : static_cast<index_t>(x[e] % sx);
  }
  const double index_bound = value_bound + 2.0 * dims_sum + 2.0 * static_cast<double>(L);

  // Sizes first (no allocation beyond O(nnz)): refuse before building anything large.
  // (2) order of the nonzeros by level coordinates.
  std::vector<std::int64_t> order(nnz);
  std::iota(order.begin(), order.end(), 0);
  bool sorted = true;
  for (std::int64_t e = 1; e < nnz && sorted; ++e) {
    for (std::size_t l = 0; l < L; ++l) {
      if (c[l][e - 1] != c[l][e]) {
        sorted = c[l][e - 1] < c[l][e];
        break;
      }
    }
  }
  if (!sorted) {
    std::vector<std::int64_t> next(nnz);
    for (std::size_t l = L; l-- > 0;) {
      std::vector<std::int64_t> count(static_cast<std::size_t>(st.levels[l].dim) + 1, 0);
      for (std::int64_t e : order) ++count[static_cast<std::size_t>(c[l][e]) + 1];
      std::partial_sum(count.begin(), count.end(), count.begin());
      for (std::int64_t e : order) next[count[c[l][e]]++] = e;
      order.swap(next);
    }
  }

  // (3) positions, level by level, over the nonzeros in sorted order.
  std::vector<std::int64_t> parent(nnz, 0);  // position at the previous level, in sorted order
  std::int64_t parent_size = 1;
  double index_words = 0;
  for (std::size_t l = 0; l < L; ++l) {
    Level& lv = st.levels[l];
    if (lv.format == LevelFormat::U) {
      const double size = static_cast<double>(parent_size) * static_cast<double>(lv.dim);
      if (size > value_bound && size > index_bound) {
        std::ostringstream why;
        why << "format refused: level " << l << " (" << lv.loop.name() << ", U) would hold "
            << static_cast<long long>(size) << " positions for " << nnz
            << " nonzeros, over the padding bound of " << opts.max_padding << " x nnz";
        return {std::nullopt, why.str()};
      }
      for (std::int64_t r = 0; r < nnz; ++r) parent[r] = parent[r] * lv.dim + c[l][order[r]];
      lv.size = parent_size * lv.dim;
    } else {
      index_words += static_cast<double>(parent_size) + 1;
      if (index_words > index_bound) {
        std::ostringstream why;
        why << "format refused: level " << l << " (" << lv.loop.name() << ", C) needs "
            << static_cast<long long>(parent_size + 1) << " positions for " << nnz
            << " nonzeros, over the padding bound of " << opts.max_padding << " x nnz";
        return {std::nullopt, why.str()};
      }
      lv.pos.assign(static_cast<std::size_t>(parent_size) + 1, 0);
      std::int64_t size = 0;
      std::int64_t previous_parent = -1;  // parent[r - 1] before it was overwritten
      for (std::int64_t r = 0; r < nnz; ++r) {
        const index_t cr = c[l][order[r]];
        const bool fresh =
            r == 0 || parent[r] != previous_parent || cr != c[l][order[r - 1]];
        previous_parent = parent[r];
        if (fresh) {
          lv.crd.push_back(cr);
          ++lv.pos[static_cast<std::size_t>(parent[r]) + 1];
          ++size;
        }
        parent[r] = size - 1;
      }
      std::partial_sum(lv.pos.begin(), lv.pos.end(), lv.pos.begin());
      lv.size = size;
      index_words += static_cast<double>(size);
    }
    if (static_cast<double>(lv.size) > static_cast<double>(kernels::kMaxIndex))
      return {std::nullopt, "format refused: level " + std::to_string(l) +
                                " needs more positions than 32-bit indices hold"};
    parent_size = lv.size;
  }
  if (static_cast<double>(parent_size) > value_bound) {
    std::ostringstream why;
    why << "format refused: it would store " << parent_size << " values for " << nnz
        << " nonzeros (" << static_cast<double>(parent_size) / std::max<std::int64_t>(nnz, 1)
        << " x), over the padding bound of " << opts.max_padding << " x nnz";
    return {std::nullopt, why.str()};
  }

  st.vals.assign(static_cast<std::size_t>(parent_size), 0.0f);
  st.entry_position.assign(static_cast<std::size_t>(nnz), 0);
  for (std::int64_t r = 0; r < nnz; ++r) {
    st.vals[parent[r]] = values[order[r]];
    st.entry_position[order[r]] = static_cast<index_t>(parent[r]);
  }
  st.build_seconds = kernels::now_seconds() - t0;
  return {std::move(st), {}};
}

}  // namespace waco::codegen
