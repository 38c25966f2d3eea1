#include "support/edge_cases.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/dense.hpp"

namespace waco::test {
using namespace waco::kernels;

namespace {

float value_at(std::uint64_t seed, std::uint64_t e) {
  return static_cast<float>(splitmix64(seed * 0x9E37u + e) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

/// Rows with power-law lengths: row i holds about n / (i+1)^alpha entries, at pseudo-random columns.
CooMatrix power_law_rows(index_t rows, index_t cols, double alpha, std::uint64_t seed) {
  std::vector<index_t> r, c;
  std::vector<float> v;
  for (index_t i = 0; i < rows; ++i) {
    const auto len = static_cast<index_t>(cols / std::pow(i + 1.0, alpha));
    for (index_t t = 0; t < len; ++t) {
      r.push_back(i);
      c.push_back(static_cast<index_t>(splitmix64(seed + i * 7919u + t) % cols));
      v.push_back(value_at(seed, r.size()));
    }
  }
  return from_triplets(rows, cols, r, c, v);
}

CooMatrix random_sparse(index_t rows, index_t cols, double density, std::uint64_t seed) {
  std::vector<index_t> r, c;
  std::vector<float> v;
  for (index_t i = 0; i < rows; ++i)
    for (index_t j = 0; j < cols; ++j)
      if (static_cast<double>(splitmix64(seed ^ (static_cast<std::uint64_t>(i) * cols + j)) >> 11) *
              0x1.0p-53 < density) {
        r.push_back(i);
        c.push_back(j);
        v.push_back(value_at(seed, r.size()));
      }
  return from_triplets(rows, cols, r, c, v);
}

}  // namespace

CooMatrix from_triplets(index_t rows, index_t cols, const std::vector<index_t>& r,
                        const std::vector<index_t>& c, const std::vector<float>& v) {
  CooMatrix a;
  a.rows = rows;
  a.cols = cols;
  a.row = r;
  a.col = c;
  a.val.assign(v.begin(), v.end());
  canonicalize(a);
  return a;
}

namespace {
void perturb(std::vector<double>& val) {
  for (std::size_t e = 0; e < val.size(); ++e)
    val[e] *= 1.0 + std::ldexp(1.0, -30) * (static_cast<double>(e % 7) - 3.0);
}
}  // namespace

CooMatrix with_double_values(CooMatrix a) {
  perturb(a.val);
  return a;
}

CooTensor with_double_values(CooTensor t) {
  perturb(t.val);
  return t;
}

std::vector<NamedMatrix> edge_case_matrices() {
  std::vector<NamedMatrix> out;
  out.push_back({"empty 0 nnz", from_triplets(7, 5, {}, {}, {})});
  out.push_back({"1x1", from_triplets(1, 1, {0}, {0}, {2.5f})});
  {  // every other row empty, and the last rows empty
    std::vector<index_t> r, c;
    std::vector<float> v;
    for (index_t i = 0; i < 40; i += 2)
      for (index_t j = i % 3; j < 33; j += 5) {
        r.push_back(i);
        c.push_back(j);
        v.push_back(value_at(3, r.size()));
      }
    out.push_back({"empty rows", from_triplets(45, 33, r, c, v)});
  }
  {  // one dense row among short ones
    std::vector<index_t> r, c;
    std::vector<float> v;
    for (index_t j = 0; j < 301; ++j) {
      r.push_back(17);
      c.push_back(j);
      v.push_back(value_at(5, j));
    }
    for (index_t i = 0; i < 61; ++i) {
      r.push_back(i);
      c.push_back((i * 37) % 301);
      v.push_back(value_at(6, i));
    }
    out.push_back({"one dense row", from_triplets(61, 301, r, c, v)});
  }
  {  // a single column
    std::vector<index_t> r, c;
    std::vector<float> v;
    for (index_t i = 0; i < 50; i += 3) {
      r.push_back(i);
      c.push_back(0);
      v.push_back(value_at(7, i));
    }
    out.push_back({"single column", from_triplets(50, 1, r, c, v)});
  }
  out.push_back({"single row", random_sparse(1, 97, 0.3, 8)});
  out.push_back({"odd sizes 37x53", random_sparse(37, 53, 0.1, 9)});
  out.push_back({"rectangular tall 129x17", random_sparse(129, 17, 0.2, 10)});
  out.push_back({"rectangular wide 13x200", random_sparse(13, 200, 0.15, 11)});
  out.push_back({"power-law rows", power_law_rows(150, 130, 1.2, 12)});
  out.push_back({"dense 16x16", random_sparse(16, 16, 1.0, 13)});
  // Above Eigen's threshold for its OpenMP path (nnz x J > 20000 even for J = 1).
  out.push_back({"random 400x300 (30k nnz)", random_sparse(400, 300, 0.25, 15)});
  {  // explicit zeros stored as entries
    CooMatrix a = random_sparse(23, 23, 0.2, 14);
    for (std::size_t e = 0; e < a.val.size(); e += 3) a.val[e] = 0.0f;
    out.push_back({"explicit zeros", a});
  }
  {  // symmetric pattern (both triangles), values 1 (as a pattern file reads)
    std::vector<index_t> r, c;
    std::vector<float> v;
    for (index_t i = 0; i < 30; ++i)
      for (index_t j = 0; j <= i; j += 1 + i % 4) {
        r.push_back(i);
        c.push_back(j);
        v.push_back(1.0f);
        if (i != j) {
          r.push_back(j);
          c.push_back(i);
          v.push_back(1.0f);
        }
      }
    out.push_back({"symmetric pattern", from_triplets(30, 30, r, c, v)});
  }
  return out;
}

std::vector<NamedTensor> edge_case_tensors() {
  auto tensor = [](std::vector<index_t> dims, double density, std::uint64_t seed) {
    CooTensor t;
    t.dims = dims;
    t.idx.assign(3, {});
    for (index_t i = 0; i < dims[0]; ++i)
      for (index_t k = 0; k < dims[1]; ++k)
        for (index_t l = 0; l < dims[2]; ++l) {
          const std::uint64_t lin = (static_cast<std::uint64_t>(i) * dims[1] + k) * dims[2] + l;
          if (static_cast<double>(splitmix64(seed ^ lin) >> 11) * 0x1.0p-53 < density) {
            t.idx[0].push_back(i);
            t.idx[1].push_back(k);
            t.idx[2].push_back(l);
            t.val.push_back(value_at(seed, lin));
          }
        }
    canonicalize(t);
    return t;
  };
  std::vector<NamedTensor> out;
  out.push_back({"empty tensor", tensor({4, 5, 6}, 0.0, 1)});
  out.push_back({"odd sizes 7x9x11", tensor({7, 9, 11}, 0.1, 2)});
  out.push_back({"one slice 1x20x20", tensor({1, 20, 20}, 0.3, 3)});
  {  // empty slices (i odd) and one dense fibre
    CooTensor t = tensor({12, 10, 40}, 0.05, 4);
    CooTensor u;
    u.dims = t.dims;
    u.idx.assign(3, {});
    for (std::int64_t e = 0; e < t.nnz(); ++e) {
      if (t.idx[0][e] % 2) continue;
      for (int m = 0; m < 3; ++m) u.idx[m].push_back(t.idx[m][e]);
      u.val.push_back(t.val[e]);
    }
    for (index_t l = 0; l < 40; ++l) {
      u.idx[0].push_back(2);
      u.idx[1].push_back(3);
      u.idx[2].push_back(l);
      u.val.push_back(value_at(5, l));
    }
    canonicalize(u);
    out.push_back({"empty slices + dense fibre", u});
  }
  return out;
}

CooMatrix band_matrix(int n, int half) {
  std::vector<index_t> r, c;
  std::vector<float> v;
  for (int i = 0; i < n; ++i) {
    for (int k = std::max(0, i - half); k <= std::min(n - 1, i + half); ++k) {
      r.push_back(i);
      c.push_back(k);
      v.push_back(0.5f + static_cast<float>((i * 31 + k * 17) % 13) / 13.0f);
    }
    const int far = (i * 7919 + 13) % n;
    if (far < i - half || far > i + half) {
      r.push_back(i);
      c.push_back(far);
      v.push_back(-0.25f);
    }
  }
  return from_triplets(n, n, r, c, v);  // canonicalizes (sorts) the entries
}

std::int64_t diagonal_storage_values(const kernels::CooMatrix& a) {
  std::set<std::int64_t> offsets;
  for (std::int64_t e = 0; e < a.nnz(); ++e) offsets.insert(std::int64_t{a.col[e]} - a.row[e]);
  return static_cast<std::int64_t>(offsets.size()) * a.rows;
}

bool dia_refuses(const kernels::CooMatrix& a) {
  return diagonal_storage_values(a) > kernels::kDiaMaxFill * std::max<std::int64_t>(a.nnz(), 1);
}

}  // namespace waco::test
