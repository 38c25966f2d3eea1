// Canonical form, checks and conversions of sparse operands. Sorting is a stable two-pass
// counting sort (by column, then by row), O(nnz + rows + cols), so building CSR from any COO
// never costs an O(nnz log nnz) comparison sort.
#include "waco/kernels/sparse.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>

#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/huge_pages.hpp"

namespace waco::kernels {
namespace {

/// Stable counting-sort permutation of `keys` (values in [0, range)) applied after `order`. A
/// range much larger than the keys (a few entries of a 2^31-row matrix) is sorted by comparison
/// instead, so that the memory stays O(nnz) whatever the dimensions.
std::vector<std::int64_t> counting_order(const std::vector<index_t>& keys, index_t range,
                                         const std::vector<std::int64_t>& order) {
  if (static_cast<std::int64_t>(range) > 4 * static_cast<std::int64_t>(order.size()) + 4096) {
    std::vector<std::int64_t> out = order;
    std::stable_sort(out.begin(), out.end(),
                     [&](std::int64_t x, std::int64_t y) { return keys[x] < keys[y]; });
    return out;
  }
  std::vector<std::int64_t> count(static_cast<std::size_t>(range) + 1, 0);
  for (index_t k : keys) ++count[static_cast<std::size_t>(k) + 1];
  std::partial_sum(count.begin(), count.end(), count.begin());
  std::vector<std::int64_t> out = huge_vector<std::int64_t>(order.size());
  for (std::int64_t e : order) out[count[keys[e]]++] = e;
  return out;
}

template <typename T>
std::vector<T> permuted(const std::vector<T>& v, const std::vector<std::int64_t>& order) {
  std::vector<T> out = huge_vector<T>(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) out[i] = v[order[i]];
  return out;
}

std::vector<std::int64_t> identity(std::int64_t n) {
  std::vector<std::int64_t> v = huge_vector<std::int64_t>(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

void check_bounds(const CooMatrix& a) {
  WACO_ASSERT(a.rows >= 0 && a.cols >= 0, "negative dimension");
  WACO_ASSERT(a.row.size() == a.val.size() && a.col.size() == a.val.size(),
              "row/col/val arrays differ in length");
  for (std::size_t e = 0; e < a.val.size(); ++e) {
    WACO_ASSERT(a.row[e] >= 0 && a.row[e] < a.rows && a.col[e] >= 0 && a.col[e] < a.cols,
                "coordinate (" + std::to_string(a.row[e]) + ", " + std::to_string(a.col[e]) +
                    ") outside " + std::to_string(a.rows) + " x " + std::to_string(a.cols));
  }
}

void check_bounds(const CooTensor& t) {
  WACO_ASSERT(t.idx.size() == t.dims.size(), "index arrays do not match the order");
  for (std::size_t m = 0; m < t.dims.size(); ++m) {
    WACO_ASSERT(t.dims[m] >= 0, "negative dimension");
    WACO_ASSERT(t.idx[m].size() == t.val.size(), "index/value arrays differ in length");
    for (index_t i : t.idx[m])
      WACO_ASSERT(i >= 0 && i < t.dims[m], "mode-" + std::to_string(m) + " index " +
                                               std::to_string(i) + " outside dimension " +
                                               std::to_string(t.dims[m]));
  }
}

bool is_canonical(const CooMatrix& a) {
  for (std::size_t e = 1; e < a.val.size(); ++e) {
    if (a.row[e - 1] > a.row[e]) return false;
    if (a.row[e - 1] == a.row[e] && a.col[e - 1] >= a.col[e]) return false;
  }
  return true;
}

bool is_canonical(const CooTensor& t) {
  for (std::size_t e = 1; e < t.val.size(); ++e) {
    int cmp = 0;
    for (std::size_t m = 0; m < t.idx.size() && cmp == 0; ++m)
      cmp = (t.idx[m][e - 1] < t.idx[m][e]) ? -1 : (t.idx[m][e - 1] > t.idx[m][e]) ? 1 : 0;
    if (cmp >= 0) return false;
  }
  return true;
}

namespace {

/// a + b rounded to the type duplicates are summed in.
double add_in(Dtype sum_in, double a, double b) {
  return sum_in == Dtype::F32 ? static_cast<double>(static_cast<float>(a) + static_cast<float>(b))
                              : a + b;
}

}  // namespace

std::int64_t canonicalize(CooMatrix& a, Dtype sum_in) {
  check_bounds(a);
  if (is_canonical(a)) return 0;
  std::vector<std::int64_t> order = counting_order(a.col, a.cols, identity(a.nnz()));
  order = counting_order(a.row, a.rows, order);
  a.row = permuted(a.row, order);
  a.col = permuted(a.col, order);
  a.val = permuted(a.val, order);
  // Merge runs of equal coordinates (adjacent after sorting).
  std::size_t out = 0;
  for (std::size_t e = 0; e < a.val.size(); ++e) {
    if (out > 0 && a.row[out - 1] == a.row[e] && a.col[out - 1] == a.col[e]) {
      a.val[out - 1] = add_in(sum_in, a.val[out - 1], a.val[e]);
      continue;
    }
    a.row[out] = a.row[e];
    a.col[out] = a.col[e];
    a.val[out] = a.val[e];
    ++out;
  }
  const std::int64_t merged = static_cast<std::int64_t>(a.val.size() - out);
  a.row.resize(out);
  a.col.resize(out);
  a.val.resize(out);
  return merged;
}

std::int64_t canonicalize(CooTensor& t, Dtype sum_in) {
  check_bounds(t);
  const int order_n = t.order();
  if (!is_canonical(t)) {
    // LSD radix: sort by the last mode first, the first mode last (each pass stable).
    std::vector<std::int64_t> order = identity(t.nnz());
    for (int m = order_n - 1; m >= 0; --m) order = counting_order(t.idx[m], t.dims[m], order);
    for (int m = 0; m < order_n; ++m) t.idx[m] = permuted(t.idx[m], order);
    t.val = permuted(t.val, order);
  }
  auto same = [&](std::size_t x, std::size_t y) {
    for (int m = 0; m < order_n; ++m)
      if (t.idx[m][x] != t.idx[m][y]) return false;
    return true;
  };
  std::size_t out = 0;
  for (std::size_t e = 0; e < t.val.size(); ++e) {
    if (out > 0 && same(out - 1, e)) {
      t.val[out - 1] = add_in(sum_in, t.val[out - 1], t.val[e]);
      continue;
    }
    for (int m = 0; m < order_n; ++m) t.idx[m][out] = t.idx[m][e];
    t.val[out] = t.val[e];
    ++out;
  }
  const std::int64_t merged = static_cast<std::int64_t>(t.val.size() - out);
  for (int m = 0; m < order_n; ++m) t.idx[m].resize(out);
  t.val.resize(out);
  return merged;
}

void reserve_entries(CooMatrix& a, std::size_t n) {
  reserve_huge(a.row, n);
  reserve_huge(a.col, n);
  reserve_huge(a.val, n);
}

std::vector<index_t> row_pointers(const CooMatrix& a) {
  WACO_ASSERT(is_canonical(a), "CSR needs a canonical COO matrix");
  std::vector<index_t> rowptr = huge_vector<index_t>(static_cast<std::size_t>(a.rows) + 1);
  for (index_t r : a.row) ++rowptr[static_cast<std::size_t>(r) + 1];
  std::partial_sum(rowptr.begin(), rowptr.end(), rowptr.begin());
  return rowptr;
}

CsrMatrix to_csr(const CooMatrix& a) {
  CsrMatrix c;
  c.rows = a.rows;
  c.cols = a.cols;
  c.rowptr = row_pointers(a);
  assign_huge(c.colidx, a.col.begin(), a.col.end());
  assign_huge(c.val, a.val.begin(), a.val.end());
  return c;
}

namespace {

/// Order-dependent mixing of 64-bit words (SplitMix64 finalizer over a running state).
class Hasher {
 public:
  void add(std::uint64_t w) { h_ = splitmix64(h_ ^ (w + 0x9E3779B97F4A7C15ull + (h_ << 6))); }
  void add_float(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    add(bits);
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0x243F6A8885A308D3ull;
};

}  // namespace

std::uint64_t fingerprint(const CooMatrix& a) {
  Hasher h;
  h.add(2);
  h.add(static_cast<std::uint64_t>(a.rows));
  h.add(static_cast<std::uint64_t>(a.cols));
  for (std::size_t e = 0; e < a.val.size(); ++e) {
    h.add((static_cast<std::uint64_t>(a.row[e]) << 32) | static_cast<std::uint32_t>(a.col[e]));
    h.add_float(static_cast<float>(a.val[e]));
  }
  return h.value();
}

std::string hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string fingerprint_hex(const CooMatrix& a) { return hex16(fingerprint(a)); }
std::string fingerprint_hex(const CooTensor& t) { return hex16(fingerprint(t)); }

std::uint64_t fingerprint(const CooTensor& t) {
  Hasher h;
  h.add(static_cast<std::uint64_t>(t.order()));
  for (index_t d : t.dims) h.add(static_cast<std::uint64_t>(d));
  for (std::size_t e = 0; e < t.val.size(); ++e) {
    for (const auto& mode : t.idx) h.add(static_cast<std::uint64_t>(mode[e]));
    h.add_float(static_cast<float>(t.val[e]));
  }
  return h.value();
}

namespace {

/// content_key's lanes: a multiply-rotate round per word (xxHash64's), four chains side by side.
class LaneHasher {
 public:
  static constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full;

  static std::uint64_t round(std::uint64_t acc, std::uint64_t w) {
    acc += w * kP2;
    acc = (acc << 31) | (acc >> 33);
    return acc * kP1;
  }
  /// Entry e's words go to lane e % 4.
  void add(std::size_t e, std::uint64_t w0, std::uint64_t w1) {
    std::uint64_t& l = lane_[e & 3];
    l = round(round(l, w0), w1);
  }
  std::uint64_t value(std::uint64_t tag, const std::vector<std::uint64_t>& dims,
                      std::uint64_t n) const {
    std::uint64_t h = splitmix64(tag);
    for (int k = 0; k < 4; ++k) h = splitmix64(h ^ lane_[k]);
    for (std::uint64_t d : dims) h = splitmix64(h ^ d);
    return splitmix64(h ^ n);
  }

 private:
  std::uint64_t lane_[4] = {kP1, kP2, kP1 ^ kP2, ~kP1};
};

std::uint64_t float_bits(double v) {
  const auto f = static_cast<float>(v);
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

}  // namespace

std::uint64_t content_key(const CooMatrix& a) {
  LaneHasher h;
  const std::size_t n = a.val.size();
  for (std::size_t e = 0; e < n; ++e)
    h.add(e, (static_cast<std::uint64_t>(a.row[e]) << 32) | static_cast<std::uint32_t>(a.col[e]),
          float_bits(a.val[e]));
  return h.value(2, {static_cast<std::uint64_t>(a.rows), static_cast<std::uint64_t>(a.cols)}, n);
}

std::uint64_t content_key(const CooTensor& t) {
  LaneHasher h;
  const std::size_t n = t.val.size();
  const std::size_t order = t.idx.size();
  // An entry's 32-bit words (its coordinates, then its value's bits) two to a 64-bit word, two
  // such words a round pair (order 3: one pair).
  std::vector<std::uint64_t> words((order + 2) / 2 + 1, 0);
  for (std::size_t e = 0; e < n; ++e) {
    std::fill(words.begin(), words.end(), 0);
    for (std::size_t m = 0; m <= order; ++m) {
      const std::uint64_t v =
          m < order ? static_cast<std::uint32_t>(t.idx[m][e]) : float_bits(t.val[e]);
      words[m / 2] |= (m % 2 == 0) ? v << 32 : v;
    }
    for (std::size_t w = 0; w + 1 < words.size(); w += 2) h.add(e, words[w], words[w + 1]);
  }
  std::vector<std::uint64_t> dims;
  for (index_t d : t.dims) dims.push_back(static_cast<std::uint64_t>(d));
  return h.value(3 + order, dims, n);
}

std::string content_key_hex(const CooMatrix& a) { return hex16(content_key(a)); }
std::string content_key_hex(const CooTensor& t) { return hex16(content_key(t)); }

CooMatrix transpose(const CooMatrix& a) {
  CooMatrix t;
  t.rows = a.cols;
  t.cols = a.rows;
  t.row = a.col;
  t.col = a.row;
  t.val = a.val;
  canonicalize(t);
  return t;
}

}  // namespace waco::kernels
