// Unit "sparse": canonical form, CSR conversion, transpose, fingerprint, dense generator.
#include <catch2/catch.hpp>

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
