// Unit "sparse": canonical form, CSR conversion, transpose, fingerprint, dense generator.
#include <catch2/catch.hpp>

#include <set>

#include "support/edge_cases.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/sparse.hpp"

using namespace waco::kernels;
using waco::test::from_triplets;

TEST_CASE("sparse: canonicalize sorts row-major and sums duplicates") {
  CooMatrix a;
  a.rows = 3;
  a.cols = 4;
  a.row = {2, 0, 1, 0, 2, 0};
  a.col = {1, 3, 0, 3, 1, 0};
  a.val = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  REQUIRE_FALSE(is_canonical(a));
  const std::int64_t merged = canonicalize(a);
  CHECK(merged == 2);
  CHECK(is_canonical(a));
  CHECK(a.row == std::vector<index_t>{0, 0, 1, 2});
  CHECK(a.col == std::vector<index_t>{0, 3, 0, 1});
  CHECK(a.val == std::vector<double>{6, 6, 3, 6});
  CHECK(canonicalize(a) == 0);  // idempotent
  CHECK(a.val == std::vector<double>{6, 6, 3, 6});
}

TEST_CASE("sparse: canonicalize rejects out-of-range coordinates as a bug") {
  CooMatrix a;
  a.rows = 2;
  a.cols = 2;
  a.row = {0, 2};
  a.col = {0, 0};
  a.val = {1.f, 1.f};
  CHECK_THROWS_AS(canonicalize(a), InternalError);
}

TEST_CASE("sparse: tensor canonicalize is lexicographic with duplicates summed") {
  CooTensor t;
  t.dims = {2, 3, 4};
  t.idx = {{1, 0, 1, 0}, {0, 2, 0, 2}, {3, 1, 3, 0}};
  t.val = {1.f, 2.f, 3.f, 4.f};
  CHECK(canonicalize(t) == 1);
  CHECK(is_canonical(t));
  CHECK(t.idx[0] == std::vector<index_t>{0, 0, 1});
  CHECK(t.idx[1] == std::vector<index_t>{2, 2, 0});
  CHECK(t.idx[2] == std::vector<index_t>{0, 1, 3});
  CHECK(t.val == std::vector<double>{4, 2, 4});
}

TEST_CASE("sparse: to_csr matches the COO rows on every edge case") {
  for (const auto& [name, a] : waco::test::edge_case_matrices()) {
    INFO(name);
    const CsrMatrix c = to_csr(a);
    REQUIRE(c.rowptr.size() == static_cast<std::size_t>(a.rows) + 1);
    CHECK(c.rowptr.front() == 0);
    CHECK(c.rowptr.back() == a.nnz());
    for (index_t i = 0; i < a.rows; ++i)
      for (index_t p = c.rowptr[i]; p < c.rowptr[i + 1]; ++p) CHECK(a.row[p] == i);
    CHECK(c.colidx == a.col);
    CHECK(c.val == a.val);
  }
}

TEST_CASE("sparse: transpose twice is the identity") {
  for (const auto& [name, a] : waco::test::edge_case_matrices()) {
    INFO(name);
    const CooMatrix t = transpose(a);
    CHECK(t.rows == a.cols);
    CHECK(t.cols == a.rows);
    CHECK(is_canonical(t));
    const CooMatrix back = transpose(t);
    CHECK(back.row == a.row);
    CHECK(back.col == a.col);
    CHECK(back.val == a.val);
  }
}

TEST_CASE("sparse: fingerprint depends on content only") {
  const CooMatrix a = from_triplets(3, 3, {0, 1, 2}, {1, 2, 0}, {1.f, 2.f, 3.f});
  const CooMatrix same = from_triplets(3, 3, {2, 0, 1}, {0, 1, 2}, {3.f, 1.f, 2.f});
  const CooMatrix other_value = from_triplets(3, 3, {0, 1, 2}, {1, 2, 0}, {1.f, 2.f, 3.5f});
  const CooMatrix other_shape = from_triplets(3, 4, {0, 1, 2}, {1, 2, 0}, {1.f, 2.f, 3.f});
  CHECK(fingerprint(a) == fingerprint(same));
  CHECK(fingerprint(a) != fingerprint(other_value));
  CHECK(fingerprint(a) != fingerprint(other_shape));
}

TEST_CASE("sparse: content_key depends on the content fingerprint reads and tells apart one "
          "entry changed anywhere") {
  const CooMatrix a = from_triplets(3, 3, {0, 1, 2}, {1, 2, 0}, {1.f, 2.f, 3.f});
  const CooMatrix same = from_triplets(3, 3, {2, 0, 1}, {0, 1, 2}, {3.f, 1.f, 2.f});
  CHECK(content_key(a) == content_key(same));
  CHECK(content_key_hex(a) == content_key_hex(same));
  CHECK(content_key_hex(a).size() == 16);
  CHECK(content_key(a) != content_key(from_triplets(3, 4, {0, 1, 2}, {1, 2, 0}, {1.f, 2.f, 3.f})));
  CHECK(content_key(a) != content_key(from_triplets(4, 3, {0, 1, 2}, {1, 2, 0}, {1.f, 2.f, 3.f})));
  // Values differing beyond float's precision share a key, as they share a fingerprint.
  CooMatrix near = a;
  near.val[0] += 1e-12;
  CHECK(content_key(near) == content_key(a));
  CHECK(fingerprint(near) == fingerprint(a));
  // One entry's row, column or value changed, in each of the four lanes (entries 0..7), and
  // an entry more or fewer: every key differs from the original's and from each other's.
  std::vector<index_t> rows, cols;
  std::vector<float> vals;
  for (index_t e = 0; e < 8; ++e) {
    rows.push_back(e);
    cols.push_back((3 * e) % 8);
    vals.push_back(static_cast<float>(e + 1));
  }
  const CooMatrix base = from_triplets(10, 10, rows, cols, vals);
  std::set<std::uint64_t> keys{content_key(base)};
  std::size_t made = 1;
  for (std::size_t e = 0; e < 8; ++e) {
    CooMatrix m = base;
    m.val[e] = -m.val[e];
    keys.insert(content_key(m));
    m = base;
    m.col[e] = 9;  // canonical still: one entry a row
    keys.insert(content_key(m));
    m = base;
    std::swap(m.row[e], m.col[e]);
    canonicalize(m);
    keys.insert(content_key(m));
    made += 3;
  }
  CooMatrix fewer = base;
  fewer.row.pop_back(), fewer.col.pop_back(), fewer.val.pop_back();
  keys.insert(content_key(fewer));
  ++made;
  CooMatrix more = base;
  more.row.push_back(9), more.col.push_back(0), more.val.push_back(1.0);
  keys.insert(content_key(more));
  ++made;
  std::size_t same_as_base = 0;  // a swap on the diagonal (entry 0: (0, 0)) changes nothing
  for (std::size_t e = 0; e < 8; ++e) same_as_base += base.row[e] == base.col[e];
  CHECK(keys.size() == made - same_as_base);

  // Tensors: a coordinate of each mode, a value and an extent.
  CooTensor t;
  t.dims = {2, 3, 4};
  t.idx = {{0, 0, 1}, {2, 2, 0}, {0, 1, 3}};
  t.val = {4, 2, 4};
  std::set<std::uint64_t> tkeys{content_key(t)};
  for (std::size_t m = 0; m < 3; ++m) {
    CooTensor u = t;
    u.idx[m][2] = u.idx[m][2] == 0 ? 1 : 0;
    tkeys.insert(content_key(u));
  }
  CooTensor u = t;
  u.val[1] = 5;
  tkeys.insert(content_key(u));
  u = t;
  u.dims[2] = 5;
  tkeys.insert(content_key(u));
  CHECK(tkeys.size() == 6);
  CHECK(content_key(t) == content_key(CooTensor(t)));
}

TEST_CASE("sparse: random_dense is seeded, layout-independent and within -1 <= x < 1") {
  const DenseMatrix r = random_dense(17, 5, Layout::RowMajor, 42, "B");
  const DenseMatrix c = random_dense(17, 5, Layout::ColMajor, 42, "B");
  const DenseMatrix other_seed = random_dense(17, 5, Layout::RowMajor, 43, "B");
  const DenseMatrix other_name = random_dense(17, 5, Layout::RowMajor, 42, "C");
  int differ_seed = 0, differ_name = 0;
  for (index_t i = 0; i < 17; ++i)
    for (index_t j = 0; j < 5; ++j) {
      CHECK(r.at(i, j) == c.at(i, j));
      CHECK(r.at(i, j) >= -1.0f);
      CHECK(r.at(i, j) < 1.0f);
      differ_seed += r.at(i, j) != other_seed.at(i, j);
      differ_name += r.at(i, j) != other_name.at(i, j);
    }
  CHECK(differ_seed > 80);
  CHECK(differ_name > 80);
  CHECK(with_layout(r, Layout::ColMajor).data == c.data);
}
