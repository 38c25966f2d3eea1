// Tests of the Matrix Market and FROSTT readers and writers (kernels/src/io_*.cpp): round trips,
// symmetric / skew / pattern / integer / gzip inputs, duplicate and zero handling, every kind of
// bad input named in issue 2 (each must give an Error naming the file and, where it applies, the
// line), and the real files of ../shared/data checked against MANIFEST.tsv when that folder exists.
#include <unistd.h>
#include <zlib.h>

#include <algorithm>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/kernel.hpp"

namespace fs = std::filesystem;
using namespace waco::kernels;
using waco::test::from_triplets;
using waco::test::scratch_dir;

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  REQUIRE(f.good());
}

void write_gz(const std::string& path, const std::string& text) {
  gzFile g = gzopen(path.c_str(), "wb");
  REQUIRE(g != nullptr);
  REQUIRE(gzwrite(g, text.data(), static_cast<unsigned>(text.size())) == static_cast<int>(text.size()));
  REQUIRE(gzclose(g) == Z_OK);
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void require_same(const CooMatrix& a, const CooMatrix& b) {
  REQUIRE(a.rows == b.rows);
  REQUIRE(a.cols == b.cols);
  REQUIRE(a.row == b.row);
  REQUIRE(a.col == b.col);
  REQUIRE(a.val.size() == b.val.size());
  for (std::size_t e = 0; e < a.val.size(); ++e) REQUIRE(a.val[e] == b.val[e]);  // bit-exact round trip
}

/// The message of the Error that `f` throws (fails the test if it throws nothing or another type).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected waco::kernels::Error, nothing was thrown");
  return {};
}

/// Checks "<path>:<line>: ...fragment..." (line < 0: "<path>: ...").
void require_error_at(const std::string& msg, const std::string& path, int line, const std::string& fragment) {
  INFO("message: " << msg);
  const std::string prefix = line >= 0 ? path + ":" + std::to_string(line) + ": " : path + ": ";
  CHECK(msg.rfind(prefix, 0) == 0);
  CHECK(msg.find(fragment) != std::string::npos);
}

struct BadFile {
  const char* name;
  const char* text;
  int line;  // -1: no line number in the message
  const char* fragment;
};

/// Row-indexed MANIFEST.tsv: name -> column -> value.
std::map<std::string, std::map<std::string, std::string>> read_manifest(const std::string& dir) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::ifstream f(dir + "/MANIFEST.tsv");
  std::string line;
  std::vector<std::string> header;
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    std::size_t b = 0;
    for (;;) {
      const std::size_t t = s.find('\t', b);
      v.push_back(s.substr(b, t == std::string::npos ? std::string::npos : t - b));
      if (t == std::string::npos) break;
      b = t + 1;
    }
    return v;
  };
  if (!std::getline(f, line)) return out;
  header = split(line);
  while (std::getline(f, line)) {
    const auto cells = split(line);
    std::map<std::string, std::string> row;
    for (std::size_t k = 0; k < header.size() && k < cells.size(); ++k) row[header[k]] = cells[k];
    out[row["name"]] = row;
  }
  return out;
}

}  // namespace

TEST_CASE("io: matrix round trip keeps every entry bit-exact", "[io]") {
  const std::string dir = scratch_dir("io_matrix_round_trip");
  for (const auto& nm : waco::test::edge_case_matrices()) {
    SECTION(nm.name) {
      for (const char* ext : {".mtx", ".mtx.gz"}) {
        const std::string path = dir + "/m" + ext;
        write_matrix_market(path, nm.matrix, "edge case: " + nm.name + "\nsecond comment line");
        const LoadedMatrix back = read_matrix_market(path);
        require_same(nm.matrix, back.matrix);
        CHECK(back.source.field == Field::Real);
        CHECK(back.source.symmetry == Symmetry::General);
        CHECK(back.source.stored_entries == nm.matrix.nnz());
        CHECK(back.source.duplicates_summed == 0);
        CHECK(back.source.gzip == (std::string(ext) == ".mtx.gz"));
        CHECK(back.source.path == path);
        CHECK(back.source.bytes > 0);
        CHECK(back.source.seconds >= 0.0);
      }
    }
  }
}

TEST_CASE("io: writer output is plain Matrix Market with the comment block", "[io]") {
  const std::string dir = scratch_dir("io_writer_text");
  const CooMatrix a = from_triplets(3, 4, {0, 2, 2}, {1, 0, 3}, {0.1f, -2.0f, 3.25e-7f});
  write_matrix_market(dir + "/a.mtx", a, "made by a test\nline two");
  const std::string text = read_bytes(dir + "/a.mtx");
  CHECK(text.rfind("%%MatrixMarket matrix coordinate real general\n% made by a test\n% line two\n3 4 3\n", 0) == 0);
  CHECK(text.find("1 2 0.1\n") != std::string::npos);
  CHECK(text.find("3 1 -2\n") != std::string::npos);
  // No temporary file is left behind next to the result.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);
  // Overwriting an existing file works.
  write_matrix_market(dir + "/a.mtx", from_triplets(1, 1, {0}, {0}, {7.0f}));
  CHECK(read_matrix_market(dir + "/a.mtx").matrix.val == std::vector<double>{7.0});
}

TEST_CASE("io: values round-trip exactly, including extreme floats", "[io]") {
  const std::string dir = scratch_dir("io_float_round_trip");
  std::vector<float> vals = {1.0f / 3.0f, 16777217.0f, 1e-45f, 1.17549435e-38f, 3.40282347e38f,
                             -0.0f, 0.1f, 123456.789f, -9.87654321e-12f};
  std::vector<index_t> r, c;
  for (std::size_t k = 0; k < vals.size(); ++k) {
    r.push_back(static_cast<index_t>(k));
    c.push_back(0);
  }
  const CooMatrix a = from_triplets(static_cast<index_t>(vals.size()), 1, r, c, vals);
  write_matrix_market(dir + "/v.mtx", a);
  const LoadedMatrix back = read_matrix_market(dir + "/v.mtx");
  require_same(a, back.matrix);
  CHECK(back.source.explicit_zeros == 1);  // -0.0 is a stored zero
}

TEST_CASE("io: dense round trip in both layouts", "[io]") {
  const std::string dir = scratch_dir("io_dense_round_trip");
  for (Layout src : {Layout::RowMajor, Layout::ColMajor}) {
    const DenseMatrix m = random_dense(7, 5, src, 42, "B");
    write_matrix_market_dense(dir + "/B.mtx", m, "dense operand B");
    for (Layout dst : {Layout::RowMajor, Layout::ColMajor}) {
      const DenseMatrix back = read_matrix_market_dense(dir + "/B.mtx", dst);
      REQUIRE(back.rows == 7);
      REQUIRE(back.cols == 5);
      REQUIRE(back.layout == dst);
      REQUIRE(back.data.size() == 35);
      for (index_t i = 0; i < 7; ++i)
        for (index_t j = 0; j < 5; ++j) REQUIRE(back.at(i, j) == m.at(i, j));
    }
  }
  // The file is column-major, as the format requires.
  DenseMatrix small(2, 2, Layout::RowMajor);
  small.set(0, 0, 1);
  small.set(0, 1, 2);
  small.set(1, 0, 3);
  small.set(1, 1, 4);
  write_matrix_market_dense(dir + "/s.mtx", small);
  CHECK(read_bytes(dir + "/s.mtx") == "%%MatrixMarket matrix array real general\n2 2\n1\n3\n2\n4\n");
  // A vector (n x 1), an integer array, and an empty (0 x 3) array.
  write_text(dir + "/x.mtx", "%%MatrixMarket matrix array integer general\n% c\n\n3 1\n4\n-5\n6\n");
  const DenseMatrix x = read_matrix_market_dense(dir + "/x.mtx");
  CHECK((x.at(0, 0) == 4 && x.at(1, 0) == -5 && x.at(2, 0) == 6));
  write_text(dir + "/e.mtx", "%%MatrixMarket matrix array real general\n0 3\n");
  const DenseMatrix e = read_matrix_market_dense(dir + "/e.mtx");
  CHECK(e.rows == 0);
  CHECK(e.cols == 3);
  CHECK(e.data.empty());
}

TEST_CASE("io: tensor round trip", "[io]") {
  const std::string dir = scratch_dir("io_tensor_round_trip");
  for (const auto& nt : waco::test::edge_case_tensors()) {
    SECTION(nt.name) {
      for (const char* ext : {".tns", ".tns.gz"}) {
        const std::string path = dir + "/t" + ext;
        write_frostt(path, nt.tensor);
        if (nt.tensor.nnz() == 0) {  // FROSTT has no header: an empty file has no order
          CHECK_THROWS_AS(read_frostt(path), Error);
          continue;
        }
        const LoadedTensor back = read_frostt(path);
        REQUIRE(back.tensor.val.size() == nt.tensor.val.size());
        REQUIRE(back.tensor.order() == nt.tensor.order());
        REQUIRE(back.tensor.idx == nt.tensor.idx);
        for (std::size_t e = 0; e < nt.tensor.val.size(); ++e) REQUIRE(back.tensor.val[e] == nt.tensor.val[e]);
        // FROSTT stores no sizes: dims are the largest index present, at most the original dims.
        for (int m = 0; m < nt.tensor.order(); ++m) {
          index_t mx = 0;
          for (index_t v : nt.tensor.idx[m]) mx = std::max(mx, v + 1);
          CHECK(back.tensor.dims[m] == mx);
          CHECK(back.tensor.dims[m] <= nt.tensor.dims[m]);
        }
        CHECK(back.source.stored_entries == nt.tensor.nnz());
        CHECK(back.source.gzip == (std::string(ext) == ".tns.gz"));
      }
    }
  }
}

TEST_CASE("io: FROSTT order, comments, duplicates and zeros", "[io]") {
  const std::string dir = scratch_dir("io_frostt_basic");
  write_text(dir + "/a.tns",
             "# a comment\n"
             "2 3 1 4 1.5\n"
             "\n"
             "1 1 1 1 2\n"
             "   # indented comment\n"
             "2 3 1 4 0.5\r\n"
             "1 2 2 2 0\n");
  const LoadedTensor t = read_frostt(dir + "/a.tns");
  REQUIRE(t.tensor.order() == 4);
  CHECK(t.tensor.dims == std::vector<index_t>{2, 3, 2, 4});
  CHECK(t.tensor.nnz() == 3);
  CHECK(t.source.stored_entries == 4);
  CHECK(t.source.duplicates_summed == 1);
  CHECK(t.source.explicit_zeros == 1);
  CHECK(t.tensor.val == std::vector<double>{2, 0, 2});  // sorted: (1,1,1,1) (1,2,2,2) (2,3,1,4)
  CHECK(t.tensor.idx[3] == std::vector<index_t>{0, 1, 3});
  ReadOptions drop;
  drop.drop_explicit_zeros = true;
  const LoadedTensor d = read_frostt(dir + "/a.tns", drop);
  CHECK(d.tensor.nnz() == 2);
  CHECK(d.source.zeros_dropped == 1);
  CHECK(d.source.explicit_zeros == 0);
  // Order 1 (a sparse vector) is a valid tensor too.
  write_text(dir + "/v.tns", "3 1.0\n1 2.0\n");
  const LoadedTensor v = read_frostt(dir + "/v.tns");
  CHECK(v.tensor.order() == 1);
  CHECK(v.tensor.dims == std::vector<index_t>{3});
  CHECK(v.tensor.val == std::vector<double>{2, 1});
}

TEST_CASE("io: symmetric, skew-symmetric, pattern and integer files", "[io]") {
  const std::string dir = scratch_dir("io_symmetry");
  SECTION("symmetric real expands to both triangles") {
    write_text(dir + "/s.mtx",
               "%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 1.0\n2 1 2.0\n3 1 3.0\n3 3 4.0\n");
    const LoadedMatrix m = read_matrix_market(dir + "/s.mtx");
    require_same(m.matrix, from_triplets(3, 3, {0, 0, 0, 1, 2, 2}, {0, 1, 2, 0, 0, 2}, {1, 2, 3, 2, 3, 4}));
    CHECK(m.source.symmetry == Symmetry::Symmetric);
    CHECK(m.source.stored_entries == 4);
  }
  SECTION("skew-symmetric negates the mirrored entry") {
    write_text(dir + "/k.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 5\n3 2 -1.5\n");
    const LoadedMatrix m = read_matrix_market(dir + "/k.mtx");
    require_same(m.matrix, from_triplets(3, 3, {0, 1, 1, 2}, {1, 0, 2, 1}, {-5, 5, 1.5f, -1.5f}));
    CHECK(m.source.symmetry == Symmetry::SkewSymmetric);
  }
  SECTION("a file storing only the upper triangle describes the same matrix") {
    write_text(dir + "/u.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 2 2.0\n1 3 3.0\n2 2 7\n");
    const LoadedMatrix m = read_matrix_market(dir + "/u.mtx");
    require_same(m.matrix, from_triplets(3, 3, {0, 0, 1, 1, 2}, {1, 2, 0, 1, 0}, {2, 3, 2, 7, 3}));
    write_text(dir + "/ku.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 2 4\n");
    require_same(read_matrix_market(dir + "/ku.mtx").matrix, from_triplets(2, 2, {0, 1}, {1, 0}, {4, -4}));
  }
  SECTION("pattern values are 1.0") {
    write_text(dir + "/p.mtx", "%%MatrixMarket matrix coordinate pattern general\n2 3 3\n1 3\n2 1\n1 1\n");
    const LoadedMatrix m = read_matrix_market(dir + "/p.mtx");
    require_same(m.matrix, from_triplets(2, 3, {0, 0, 1}, {0, 2, 0}, {1, 1, 1}));
    CHECK(m.source.field == Field::Pattern);
  }
  SECTION("pattern symmetric") {
    write_text(dir + "/ps.mtx", "%%MatrixMarket matrix coordinate pattern symmetric\n2 2 2\n2 1\n2 2\n");
    const LoadedMatrix m = read_matrix_market(dir + "/ps.mtx");
    require_same(m.matrix, from_triplets(2, 2, {0, 1, 1}, {1, 0, 1}, {1, 1, 1}));
  }
  SECTION("integer field") {
    write_text(dir + "/i.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 2 -7\n2 2 +12\n");
    const LoadedMatrix m = read_matrix_market(dir + "/i.mtx");
    require_same(m.matrix, from_triplets(2, 2, {0, 1}, {1, 1}, {-7, 12}));
    CHECK(m.source.field == Field::Integer);
  }
  SECTION("banner words in any case, comments, blank lines, CRLF, tabs, Fortran exponents") {
    write_text(dir + "/c.mtx",
               "%%matrixmarket MATRIX Coordinate REAL General\r\n"
               "% comment\r\n"
               "\r\n"
               "%another\r\n"
               "  2 2 3  \r\n"
               "\r\n"
               "1\t1\t1.5D+01\r\n"
               "% a comment among entries\r\n"
               "  2 2 .25\r\n"
               "2 1 -1e-3");  // no final newline
    const LoadedMatrix m = read_matrix_market(dir + "/c.mtx");
    require_same(m.matrix, from_triplets(2, 2, {0, 1, 1}, {0, 0, 1}, {15.0f, -1e-3f, 0.25f}));
  }
  SECTION("empty matrices") {
    write_text(dir + "/z.mtx", "%%MatrixMarket matrix coordinate real general\n0 0 0\n");
    const LoadedMatrix m = read_matrix_market(dir + "/z.mtx");
    CHECK(m.matrix.rows == 0);
    CHECK(m.matrix.nnz() == 0);
    write_text(dir + "/z2.mtx", "%%MatrixMarket matrix coordinate real general\n5 4 0\n");
    CHECK(read_matrix_market(dir + "/z2.mtx").matrix.rows == 5);
  }
}

TEST_CASE("io: gzip input is detected by content, not name", "[io]") {
  const std::string dir = scratch_dir("io_gzip");
  const std::string text = "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1\n2 2 2\n3 3 3\n";
  write_gz(dir + "/a.mtx.gz", text);
  write_gz(dir + "/named_plain.mtx", text);  // gzip data under a plain name
  write_text(dir + "/plain.mtx.gz", text);   // plain text under a .gz name
  for (const char* name : {"a.mtx.gz", "named_plain.mtx", "plain.mtx.gz"}) {
    const LoadedMatrix m = read_matrix_market(dir + "/" + name);
    require_same(m.matrix, from_triplets(3, 3, {0, 1, 2}, {0, 1, 2}, {1, 2, 3}));
    CHECK(m.source.gzip == (std::string(name) != "plain.mtx.gz"));
    CHECK(m.source.bytes == static_cast<std::int64_t>(text.size()));
  }
  write_gz(dir + "/t.tns.gz", "1 1 1 1.0\n2 2 2 2.0\n");
  const LoadedTensor t = read_frostt(dir + "/t.tns.gz");
  CHECK(t.tensor.nnz() == 2);
  CHECK(t.source.gzip);
}

TEST_CASE("io: duplicates are summed and counted, zeros kept or dropped", "[io]") {
  const std::string dir = scratch_dir("io_duplicates");
  write_text(dir + "/d.mtx",
             "%%MatrixMarket matrix coordinate real general\n3 3 6\n"
             "1 1 1.0\n3 2 0\n1 1 2.0\n2 2 5.0\n2 2 -5.0\n1 1 4.0\n");
  const LoadedMatrix m = read_matrix_market(dir + "/d.mtx");
  CHECK(m.source.stored_entries == 6);
  CHECK(m.source.duplicates_summed == 3);
  // (2,2) sums to zero: it and the stored zero at (3,2) are explicit zeros.
  require_same(m.matrix, from_triplets(3, 3, {0, 1, 2}, {0, 1, 1}, {7, 0, 0}));
  CHECK(m.source.explicit_zeros == 2);
  CHECK(m.source.zeros_dropped == 0);

  ReadOptions drop;
  drop.drop_explicit_zeros = true;
  const LoadedMatrix d = read_matrix_market(dir + "/d.mtx", drop);
  require_same(d.matrix, from_triplets(3, 3, {0}, {0}, {7}));
  CHECK(d.source.zeros_dropped == 2);
  CHECK(d.source.explicit_zeros == 0);

  // Zeros of a symmetric file count after expansion.
  write_text(dir + "/sz.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n2 1 0\n3 3 0\n3 1 1\n");
  const LoadedMatrix s = read_matrix_market(dir + "/sz.mtx");
  CHECK(s.matrix.nnz() == 5);
  CHECK(s.source.explicit_zeros == 3);
  CHECK(read_matrix_market(dir + "/sz.mtx", drop).matrix.nnz() == 2);
}

TEST_CASE("io: entries in any order, with duplicates, read as the canonical matrix", "[io]") {
  // Files written row by row, column by column and shuffled; general and symmetric; compared with
  // the canonical form of the same triplets built by from_triplets (canonicalize).
  const std::string dir = scratch_dir("io_entry_order");
  const index_t n = 257;
  std::vector<index_t> r, c;
  std::vector<float> v;
  for (std::uint64_t k = 0; k < 3000; ++k) {
    const auto i = static_cast<index_t>(splitmix64(k) % n);
    const auto j = static_cast<index_t>(splitmix64(k + 77777) % n);
    r.push_back(std::max(i, j));  // lower triangle, so the same triplets serve the symmetric case
    c.push_back(std::min(i, j));
    v.push_back(static_cast<float>(splitmix64(k + 5) % 1000) / 8.0f - 60.0f);
  }
  std::vector<std::size_t> perm(r.size());
  for (std::size_t k = 0; k < perm.size(); ++k) perm[k] = k;
  auto write = [&](const std::string& path, const char* sym, auto less) {
    std::vector<std::size_t> p = perm;
    std::stable_sort(p.begin(), p.end(), less);
    std::string text = std::string("%%MatrixMarket matrix coordinate real ") + sym + "\n" + std::to_string(n) + " " +
                       std::to_string(n) + " " + std::to_string(r.size()) + "\n";
    for (std::size_t k : p)
      text += std::to_string(r[k] + 1) + " " + std::to_string(c[k] + 1) + " " + std::to_string(v[k]) + "\n";
    write_text(path, text);
  };
  auto by_row = [&](std::size_t x, std::size_t y) { return std::pair(r[x], c[x]) < std::pair(r[y], c[y]); };
  auto by_col = [&](std::size_t x, std::size_t y) { return std::pair(c[x], r[x]) < std::pair(c[y], r[y]); };
  auto shuffled = [&](std::size_t x, std::size_t y) { return splitmix64(x) < splitmix64(y); };

  // std::to_string prints 6 decimals: the values (multiples of 1/8) are exact.
  const CooMatrix general = from_triplets(n, n, r, c, v);
  std::vector<index_t> sr = r, sc = c;
  std::vector<float> sv = v;
  for (std::size_t k = 0; k < r.size(); ++k)
    if (r[k] != c[k]) {
      sr.push_back(c[k]);
      sc.push_back(r[k]);
      sv.push_back(v[k]);
    }
  const CooMatrix symmetric = from_triplets(n, n, sr, sc, sv);
  int variant = 0;
  for (const std::function<bool(std::size_t, std::size_t)>& order :
       {std::function<bool(std::size_t, std::size_t)>(by_row), std::function<bool(std::size_t, std::size_t)>(by_col),
        std::function<bool(std::size_t, std::size_t)>(shuffled)}) {
    const std::string g = dir + "/g" + std::to_string(variant) + ".mtx";
    const std::string s = dir + "/s" + std::to_string(variant) + ".mtx";
    write(g, "general", order);
    write(s, "symmetric", order);
    const LoadedMatrix lg = read_matrix_market(g);
    const LoadedMatrix ls = read_matrix_market(s);
    INFO("variant " << variant);
    require_same(lg.matrix, general);
    require_same(ls.matrix, symmetric);
    CHECK(lg.source.duplicates_summed == static_cast<std::int64_t>(r.size()) - general.nnz());
    // The same lines: the same duplicates, whatever the symmetry (a repeated off-diagonal line of
    // the symmetric file merges twice in the expanded matrix, and counts once).
    CHECK(ls.source.duplicates_summed == static_cast<std::int64_t>(r.size()) - general.nnz());
    ++variant;
  }
}

TEST_CASE("io: NaN and Inf are refused unless allowed", "[io]") {
  const std::string dir = scratch_dir("io_nonfinite");
  write_text(dir + "/n.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 nan\n2 2 -Inf\n");
  require_error_at(error_of([&] { read_matrix_market(dir + "/n.mtx"); }), dir + "/n.mtx", 3, "not finite");
  ReadOptions allow;
  allow.allow_nonfinite = true;
  const LoadedMatrix m = read_matrix_market(dir + "/n.mtx", allow);
  REQUIRE(m.matrix.nnz() == 2);
  CHECK(std::isnan(m.matrix.val[0]));
  CHECK(std::isinf(m.matrix.val[1]));
  write_text(dir + "/n.tns", "1 1 1 1\n1 2 1 inf\n");
  require_error_at(error_of([&] { read_frostt(dir + "/n.tns"); }), dir + "/n.tns", 2, "not finite");
  CHECK(read_frostt(dir + "/n.tns", allow).tensor.nnz() == 2);
  write_text(dir + "/d.mtx", "%%MatrixMarket matrix array real general\n2 1\n1\nNaN\n");
  require_error_at(error_of([&] { read_matrix_market_dense(dir + "/d.mtx"); }), dir + "/d.mtx", 4, "not finite");
  CHECK(std::isnan(read_matrix_market_dense(dir + "/d.mtx", Layout::RowMajor, allow).data.get(1)));
}

TEST_CASE("io: every bad Matrix Market coordinate file gives a located error", "[io]") {
  const std::string dir = scratch_dir("io_bad_mtx");
  const std::vector<BadFile> cases = {
      {"empty", "", -1, "empty file"},
      {"banner_missing", "3 3 1\n1 1 1\n", 1, "%%MatrixMarket"},
      {"banner_word", "%%MatrixMarket matrx coordinate real general\n1 1 1\n1 1 1\n", 1, "unsupported object"},
      {"banner_short", "%%MatrixMarket matrix coordinate real\n1 1 1\n1 1 1\n", 1, "incomplete banner"},
      {"banner_long", "%%MatrixMarket matrix coordinate real general extra\n1 1 1\n1 1 1\n", 1, "after the banner"},
      {"format_unknown", "%%MatrixMarket matrix sparse real general\n1 1 1\n1 1 1\n", 1, "unknown format"},
      {"field_complex", "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n", 1, "complex"},
      {"field_unknown", "%%MatrixMarket matrix coordinate quaternion general\n1 1 1\n1 1 1\n", 1, "unknown field"},
      {"hermitian", "%%MatrixMarket matrix coordinate real hermitian\n1 1 1\n1 1 1\n", 1, "hermitian"},
      {"symmetry_unknown", "%%MatrixMarket matrix coordinate real diagonal\n1 1 1\n1 1 1\n", 1, "unknown symmetry"},
      {"array_for_sparse", "%%MatrixMarket matrix array real general\n% c\n2 1\n1\n2\n", 3, "coordinate"},
      {"size_missing", "%%MatrixMarket matrix coordinate real general\n% only comments\n\n", -1, "missing size line"},
      {"size_two_numbers", "%%MatrixMarket matrix coordinate real general\n3 3\n", 2, "missing the number of entries"},
      {"size_not_number", "%%MatrixMarket matrix coordinate real general\n3 x 3\n", 2, "not an integer"},
      {"size_float", "%%MatrixMarket matrix coordinate real general\n3.0 3 1\n1 1 1\n", 2, "not an integer"},
      {"size_trailing", "%%MatrixMarket matrix coordinate real general\n3 3 1 9\n1 1 1\n", 2, "after the sizes"},
      {"size_negative", "%%MatrixMarket matrix coordinate real general\n-3 3 1\n1 1 1\n", 2, "negative"},
      {"size_negative_nnz", "%%MatrixMarket matrix coordinate real general\n3 3 -1\n", 2, "negative"},
      {"size_over_32bit", "%%MatrixMarket matrix coordinate real general\n3000000000 3 1\n1 1 1\n", 2, "2147483647"},
      {"size_over_int64", "%%MatrixMarket matrix coordinate real general\n99999999999999999999 3 1\n", 2, "too large"},
      {"nnz_over_32bit", "%%MatrixMarket matrix coordinate pattern general\n2000000000 2000000000 3000000000\n1 1\n", 2,
       "are not supported"},
      {"symmetric_not_square", "%%MatrixMarket matrix coordinate real symmetric\n3 4 1\n1 1 1\n", 2, "square"},
      {"fewer_entries", "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1\n2 2 2\n\n", 5, "2 of the 3"},
      {"more_entries", "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n2 2 2\n3 3 3\n", 5, "more entries"},
      {"row_zero", "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n0 2 2\n", 4, "row index 0 is outside"},
      {"row_past", "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n4 2 2\n", 4, "row index 4 is outside 1..3"},
      {"col_past", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 9 1\n", 3, "column index 9 is outside 1..3"},
      {"row_negative", "%%MatrixMarket matrix coordinate real general\n3 3 1\n-1 1 1\n", 3, "outside"},
      {"row_not_number", "%%MatrixMarket matrix coordinate real general\n3 3 1\nx 1 1\n", 3, "not an integer"},
      {"row_huge", "%%MatrixMarket matrix coordinate real general\n3 3 1\n123456789012345678901 1 1\n", 3, "not an integer"},
      {"col_missing", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1\n", 3, "no column"},
      {"value_missing", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1\n", 3, "no value"},
      {"value_text", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 abc\n", 3, "not a number"},
      {"value_half", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 1.5e\n", 3, "not a number"},
      {"value_nan", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 NaN\n", 3, "not finite"},
      {"value_inf", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 -inf\n", 3, "not finite"},
      {"value_overflow", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 1e39\n", 3, "single-precision"},
      {"integer_not_integer", "%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 1.5\n", 3, "not an integer"},
      {"trailing_garbage", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 1.0 x\n", 3, "unexpected 'x'"},
      {"pattern_with_value", "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 1 1.0\n", 3, "unexpected '1.0'"},
      {"symmetric_upper", "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n2 1 1\n3 3 1\n1 2 2\n", 5,
       "(1, 2) lies above the diagonal, but the entry on line 3 lies below"},
      {"symmetric_lower_after_upper", "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n1 3 1\n2 1 2\n", 4,
       "lies below the diagonal"},
      {"skew_upper", "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n3 1 1\n2 3 2\n", 4,
       "above the diagonal"},
      {"skew_diagonal", "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1\n2 2 2\n", 4, "diagonal entry"},
      {"binary_junk", "\x7f" "ELF\x02\x01\x01\x00\x00\x00", 1, "found '\\x7fELF\\x02\\x01\\x01'"},
  };
  for (const BadFile& b : cases) {
    SECTION(b.name) {
      const std::string path = dir + "/" + b.name + ".mtx";
      write_text(path, b.text);
      require_error_at(error_of([&] { read_matrix_market(path); }), path, b.line, b.fragment);
      // The same text gzip-compressed gives the same error.
      const std::string gz = dir + "/" + b.name + ".mtx.gz";
      write_gz(gz, b.text);
      require_error_at(error_of([&] { read_matrix_market(gz); }), gz, b.line, b.fragment);
    }
  }
}

TEST_CASE("io: missing files, directories and broken gzip give errors naming the file", "[io]") {
  const std::string dir = scratch_dir("io_bad_files");
  require_error_at(error_of([&] { read_matrix_market(dir + "/nope.mtx"); }), dir + "/nope.mtx", -1, "no such file");
  require_error_at(error_of([&] { read_frostt(dir + "/nope.tns"); }), dir + "/nope.tns", -1, "no such file");
  require_error_at(error_of([&] { read_matrix_market_dense(dir + "/nope.mtx"); }), dir + "/nope.mtx", -1,
                   "no such file");
  require_error_at(error_of([&] { read_matrix_market(dir); }), dir, -1, "directory");
  require_error_at(error_of([&] { read_frostt(dir); }), dir, -1, "directory");
  write_text(dir + "/x.mtx.xz", std::string("\xfd" "7zXZ\0\0\x04\xe6", 10));
  require_error_at(error_of([&] { read_matrix_market(dir + "/x.mtx.xz"); }), dir + "/x.mtx.xz", -1,
                   "compressed with xz");
  write_text(dir + "/x.tns.bz2", "BZh91AY&SY");
  require_error_at(error_of([&] { read_frostt(dir + "/x.tns.bz2"); }), dir + "/x.tns.bz2", -1, "compressed with bzip2");

  // A gzip file large enough to span several buffers, truncated at several points, or corrupted.
  std::string text = "%%MatrixMarket matrix coordinate real general\n100000 100000 200000\n";
  for (std::int64_t e = 0; e < 200000; ++e)
    text += std::to_string(1 + (e * 7919) % 100000) + " " + std::to_string(1 + (e * 104729) % 100000) + " " +
            std::to_string(static_cast<double>(e) * 0.001) + "\n";
  write_gz(dir + "/good.mtx.gz", text);
  REQUIRE(read_matrix_market(dir + "/good.mtx.gz").source.stored_entries == 200000);
  const std::string gz = read_bytes(dir + "/good.mtx.gz");
  for (std::size_t cut : {std::size_t{2}, std::size_t{10}, std::size_t{30}, gz.size() / 3, gz.size() - 9,
                          gz.size() - 1}) {
    const std::string path = dir + "/cut" + std::to_string(cut) + ".mtx.gz";
    write_text(path, gz.substr(0, cut));
    const std::string msg = error_of([&] { read_matrix_market(path); });
    INFO("cut at " << cut << ": " << msg);
    CHECK(msg.rfind(path + ":", 0) == 0);
    CHECK((msg.find("truncated") != std::string::npos || msg.find("corrupt") != std::string::npos ||
           msg.find("ends after") != std::string::npos));
  }
  {
    std::string bad = gz;
    for (std::size_t k = bad.size() / 2; k < bad.size() / 2 + 64; ++k) bad[k] = static_cast<char>(bad[k] ^ 0x5a);
    write_text(dir + "/corrupt.mtx.gz", bad);
    const std::string msg = error_of([&] { read_matrix_market(dir + "/corrupt.mtx.gz"); });
    INFO(msg);
    CHECK(msg.rfind(dir + "/corrupt.mtx.gz", 0) == 0);
  }
  {  // a bad CRC in the trailer only: every entry parses, the check must still fail
    std::string bad = gz;
    bad[bad.size() - 6] = static_cast<char>(bad[bad.size() - 6] ^ 0xff);
    write_text(dir + "/crc.mtx.gz", bad);
    const std::string msg = error_of([&] { read_matrix_market(dir + "/crc.mtx.gz"); });
    INFO(msg);
    CHECK(msg.rfind(dir + "/crc.mtx.gz: ", 0) == 0);
    CHECK(msg.find("corrupt") != std::string::npos);
  }
  {  // truncated FROSTT gzip
    std::string t;
    for (int e = 0; e < 50000; ++e) t += std::to_string(1 + e % 97) + " " + std::to_string(1 + e % 89) + " 1 2.5\n";
    write_gz(dir + "/t.tns.gz", t);
    const std::string tgz = read_bytes(dir + "/t.tns.gz");
    write_text(dir + "/tcut.tns.gz", tgz.substr(0, tgz.size() / 2));
    require_error_at(error_of([&] { read_frostt(dir + "/tcut.tns.gz"); }), dir + "/tcut.tns.gz", -1, "truncated");
  }
}

TEST_CASE("io: an empty dense array of 2^31-2 columns or rows is read and written at once", "[io]") {
  // fuzz_matrix_market's timeout: a 58-byte file '0 2147483646' took 1.3 CPU-s in the GCC build
  // (10 s under ASan) to pass over the empty columns, reading and again writing. Timed in CPU
  // time, which a busy machine does not stretch.
  const std::string dir = scratch_dir("io_dense_empty");
  for (const std::string size : {"0 2147483646", "2147483646 0"}) {
    INFO(size);
    write_text(dir + "/e.mtx", "%%MatrixMarket matrix array integer general\n" + size + "\n");
    const std::clock_t c0 = std::clock();
    const DenseMatrix m = read_matrix_market_dense(dir + "/e.mtx", Layout::RowMajor);
    CHECK(m.data.empty());
    write_matrix_market_dense(dir + "/back.mtx", m);
    const DenseMatrix back = read_matrix_market_dense(dir + "/back.mtx", Layout::ColMajor);
    const double cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    CHECK(back.rows == m.rows);
    CHECK(back.cols == m.cols);
    CHECK(m.rows * std::int64_t{m.cols} == 0);
    CHECK(m.rows + std::int64_t{m.cols} == 2147483646);
    CHECK(cpu_s < 0.25);
  }
}

TEST_CASE("io: every bad dense (array) file gives a located error", "[io]") {
  const std::string dir = scratch_dir("io_bad_dense");
  const std::vector<BadFile> cases = {
      {"empty", "", -1, "empty file"},
      {"coordinate_for_dense", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n", 2, "array format"},
      {"pattern_array", "%%MatrixMarket matrix array pattern general\n2 1\n", 1, "pattern"},
      {"symmetric_array", "%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n", 2, "general"},
      {"complex_array", "%%MatrixMarket matrix array complex general\n1 1\n1 0\n", 1, "complex"},
      {"size_three_numbers", "%%MatrixMarket matrix array real general\n2 1 2\n1\n2\n", 2, "after the sizes"},
      {"size_missing", "%%MatrixMarket matrix array real general\n", -1, "missing size line"},
      {"fewer_values", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n", 5, "3 of the 4"},
      {"fewer_values_absurd", "%%MatrixMarket matrix array real general\n2000000000 2000000000\n1\n", 2,
       "room for at most"},
      {"fewer_values_than_bytes", "%%MatrixMarket matrix array real general\n30 1\n1\n2\n", 2,
       "declares 30 values (rows x columns), but the file has 50 bytes, room for at most 25"},
      {"more_values", "%%MatrixMarket matrix array real general\n2 1\n1\n2\n3\n", 5, "more values"},
      {"two_per_line", "%%MatrixMarket matrix array real general\n2 1\n1 2\n", 3, "after the value"},
      {"value_text", "%%MatrixMarket matrix array real general\n2 1\n1\nzz\n", 4, "not a number"},
      {"integer_field_real", "%%MatrixMarket matrix array integer general\n1 1\n0.5\n", 3, "not an integer"},
  };
  for (const BadFile& b : cases) {
    SECTION(b.name) {
      const std::string path = dir + "/" + b.name + ".mtx";
      write_text(path, b.text);
      require_error_at(error_of([&] { read_matrix_market_dense(path); }), path, b.line, b.fragment);
    }
  }
}

TEST_CASE("io: every bad FROSTT file gives a located error", "[io]") {
  const std::string dir = scratch_dir("io_bad_tns");
  const std::vector<BadFile> cases = {
      {"empty", "", -1, "empty file"},
      {"only_comments", "# nothing\n\n# here\n", -1, "no entry lines"},
      {"one_field", "# c\n7\n", 2, "at least one index and a value"},
      {"fewer_fields", "1 1 1 1.0\n2 2 2.0\n", 2, "expected 4"},
      {"more_fields", "1 1 1 1.0\n2 2 2 2 2.0\n", 2, "expected 4"},
      {"index_zero", "1 1 1 1.0\n1 0 1 1.0\n", 2, "mode-2 index 0 is below 1"},
      {"index_negative", "1 1 1 1.0\n1 1 -4 1.0\n", 2, "below 1"},
      {"index_text", "1 1 1 1.0\n1 a 1 1.0\n", 2, "not an integer"},
      {"index_float", "1 1.5 1 1.0\n", 1, "not an integer"},
      {"index_over_32bit", "1 1 3000000000 1.0\n", 1, "above 2147483647"},
      {"value_text", "1 1 1 1.0\n2 2 2 x\n", 2, "not a number"},
      {"value_nan", "# c\n1 1 1 nan\n", 2, "not finite"},
      {"value_overflow", "1 1 1 -1e40\n", 1, "single-precision"},
  };
  for (const BadFile& b : cases) {
    SECTION(b.name) {
      const std::string path = dir + "/" + b.name + ".tns";
      write_text(path, b.text);
      require_error_at(error_of([&] { read_frostt(path); }), path, b.line, b.fragment);
    }
  }
}

TEST_CASE("io: duplicates may make the entry count exceed what the shape holds", "[io]") {
  // fast_matrix_market's GraphBLAS matrices: 3 x 1 declaring 4 entries, (3,1) stored twice.
  // Duplicates are summed everywhere, so the count is not bounded by rows x cols (SciPy reads
  // them too); issue 39's conformance defect.
  const std::string dir = scratch_dir("io_duplicates_over_cells");
  const std::string text =
      "%%MatrixMarket matrix coordinate integer general\n3 1 4\n1 1 1\n2 1 2\n3 1 3\n3 1 4\n";
  write_text(dir + "/v.mtx", text);
  write_gz(dir + "/v.mtx.gz", text);
  for (const std::string name : {"v.mtx", "v.mtx.gz"}) {
    INFO(name);
    const LoadedMatrix m = read_matrix_market(dir + "/" + name);
    require_same(m.matrix, from_triplets(3, 1, {0, 1, 2}, {0, 0, 0}, {1, 2, 7}));
    CHECK(m.source.stored_entries == 4);
    CHECK(m.source.duplicates_summed == 1);
  }
  // A symmetric 2 x 2 holds 3 lower-triangle entries; 5 stored, the diagonal twice and (2,1) twice.
  write_text(dir + "/s.mtx",
             "%%MatrixMarket matrix coordinate real symmetric\n2 2 5\n1 1 1\n2 1 2\n2 2 3\n2 1 4\n1 1 5\n");
  const LoadedMatrix s = read_matrix_market(dir + "/s.mtx");
  require_same(s.matrix, from_triplets(2, 2, {0, 0, 1, 1}, {0, 1, 0, 1}, {6, 6, 6, 3}));
  CHECK(s.source.stored_entries == 5);
  CHECK(s.source.duplicates_summed == 2);  // lines 4 and 5, not 3 (the mirror of (2,1) again)
  // Skew-symmetric: the repeated (2,1) is one duplicate, not two (it and its negated mirror).
  write_text(dir + "/k.mtx",
             "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 3\n2 1 1\n3 1 4\n2 1 2\n");
  const LoadedMatrix k = read_matrix_market(dir + "/k.mtx");
  require_same(k.matrix, from_triplets(3, 3, {0, 0, 1, 2}, {1, 2, 0, 0}, {-3, -4, 3, 4}));
  CHECK(k.source.stored_entries == 3);
  CHECK(k.source.duplicates_summed == 1);
}

TEST_CASE("io: sizes beyond the 32-bit limit, the file or the memory limit are refused early", "[io]") {
  const std::string dir = scratch_dir("io_limits");
  const auto at = [&](const std::string& name, const std::string& text, bool gz) {
    const std::string path = dir + "/" + name + (gz ? ".mtx.gz" : ".mtx");
    if (gz)
      write_gz(path, text);
    else
      write_text(path, text);
    return path;
  };
  ReadOptions small;
  small.max_memory = std::int64_t{1} << 20;  // 1 MiB

  SECTION("a header declaring 10^12 entries") {
    for (bool gz : {false, true}) {
      const std::string p = at("tera", "%%MatrixMarket matrix coordinate real general\n1000000 1000000 1000000000000\n1 1 1\n", gz);
      require_error_at(error_of([&] { read_matrix_market(p); }), p, 2,
                       "declares 1000000000000 entries; more than 2147483647 are not supported");
    }
  }
  SECTION("a size line promising more entries than a plain file holds") {
    const std::string text = "%%MatrixMarket matrix coordinate real general\n1000 1000 2000000000\n1 1 1\n2 2 2\n";
    const std::string p = at("promise", text, false);
    require_error_at(error_of([&] { read_matrix_market(p); }), p, 2,
                     "declares 2000000000 entries, but the file has " + std::to_string(text.size()) +
                         " bytes, room for at most " + std::to_string((text.size() + 1) / 6));
    // gzip hides the size: the memory limit refuses it at the size line (48 GB), or the end of
    // the stream does.
    ReadOptions big;
    big.max_memory = std::int64_t{1} << 40;
    const std::string g = at("promise", text, true);
    require_error_at(error_of([&] { read_matrix_market(g, small); }), g, 2, "more than the input memory limit of 1 MiB");
    require_error_at(error_of([&] { read_matrix_market(g, big); }), g, 4, "the file ends after 2 of the 2000000000 entries");
  }
  SECTION("the memory limit: its estimate and its message, for every kind of file") {
    // 50,000 entries x 36 bytes + (1000 + 1000) x 8 = 1.73 MiB > 1 MiB.
    const std::string p = at("mem", "%%MatrixMarket matrix coordinate real general\n1000 1000 50000\n1 1 1\n", true);
    require_error_at(error_of([&] { read_matrix_market(p, small); }), p, 2,
                     "a 1000 x 1000 matrix of 50000 entries needs about 1.73 MiB of memory, more than the "
                     "input memory limit of 1 MiB (ReadOptions::max_memory)");
    // Symmetric files count both triangles: 25,000 stored entries are 50,000.
    const std::string s = at("mem_sym", "%%MatrixMarket matrix coordinate real symmetric\n1000 1000 25000\n1 1 1\n", true);
    require_error_at(error_of([&] { read_matrix_market(s, small); }), s, 2, "(both triangles) needs about 1.73 MiB");
    // 28,000 entries fit.
    const std::string ok = at("mem_ok", "%%MatrixMarket matrix coordinate real general\n1000 1000 28000\n1 1 1\n", true);
    require_error_at(error_of([&] { read_matrix_market(ok, small); }), ok, 3, "the file ends after 1 of the 28000");
    // Dimensions count: an empty 2^31 x 2^31 matrix needs 32 GiB of positions and vectors.
    const std::string d = at("dims", "%%MatrixMarket matrix coordinate real general\n2147483647 2147483647 0\n", false);
    require_error_at(error_of([&] { read_matrix_market(d, small); }), d, 2, "a 2147483647 x 2147483647 matrix of 0 entries needs about 32 GiB");
    // Array files: 12 bytes a value in single precision (8 as read, 4 stored).
    const std::string a = at("dense", "%%MatrixMarket matrix array real general\n1000 200\n1\n", true);
    require_error_at(error_of([&] { read_matrix_market_dense(a, Layout::RowMajor, small); }), a, 2,
                     "a 1000 x 200 array needs about 2.29 MiB");
  }
  SECTION("WACO_MAX_INPUT_MEMORY sets the default limit; a malformed value is an error") {
    const std::string p = at("env", "%%MatrixMarket matrix coordinate real general\n1000 1000 50000\n1 1 1\n", true);
    ::setenv("WACO_MAX_INPUT_MEMORY", "1M", 1);
    CHECK(input_memory_limit() == std::int64_t{1} << 20);
    const std::string msg = error_of([&] { read_matrix_market(p); });
    ::setenv("WACO_MAX_INPUT_MEMORY", "2MiB", 1);
    CHECK(input_memory_limit() == std::int64_t{2} << 20);
    const std::string fits = error_of([&] { read_matrix_market(p); });
    ::setenv("WACO_MAX_INPUT_MEMORY", "lots", 1);
    const std::string bad = error_of([&] { input_memory_limit(); });
    ::setenv("WACO_MAX_INPUT_MEMORY", "64g", 1);
    CHECK(input_memory_limit() == std::int64_t{64} << 30);
    ::unsetenv("WACO_MAX_INPUT_MEMORY");
    require_error_at(msg, p, 2, "more than the input memory limit of 1 MiB (WACO_MAX_INPUT_MEMORY)");
    require_error_at(fits, p, 3, "the file ends after 1 of the 50000");
    CHECK(bad.find("WACO_MAX_INPUT_MEMORY='lots' is not a size") != std::string::npos);
    CHECK(input_memory_limit() > 0);  // the memory available now
    CHECK(input_memory_limit() <= physical_memory_bytes());
    CHECK(input_memory_limit(small) == std::int64_t{1} << 20);
  }
  SECTION("a gzip bomb of FROSTT entries stops at the memory limit, at its line") {
    // No header to check: the limit is checked as entries arrive. 1 MiB / 56 bytes an entry of
    // order 3 (8 x 4 and 24) = 18724 entries; the next line is refused.
    std::string text;
    for (int k = 0; k < 100000; ++k) text += "1 2 3 1.5\n";
    const std::string p = dir + "/bomb.tns.gz";
    write_gz(p, text);
    require_error_at(error_of([&] { read_frostt(p, small); }), p, 18725,
                     "a tensor of order 3 with more than 18724 entries needs about 1 MiB of memory, more "
                     "than the input memory limit of 1 MiB");
  }
  SECTION("a tensor of 2^40 positions reads in O(nnz) memory, and its dimensions count") {
    // Unsorted, so canonicalize sorts: by comparison at such sizes (a counting sort would
    // allocate 16 GiB per mode).
    write_text(dir + "/t.tns", "2147483647 1048576 1048576 1.0\n1 1 1 2.0\n2147483647 1 1 3.0\n");
    ReadOptions big;
    big.max_memory = std::int64_t{1} << 40;
    const LoadedTensor t = read_frostt(dir + "/t.tns", big);
    CHECK(t.tensor.dims == std::vector<index_t>{2147483647, 1048576, 1048576});
    CHECK(t.tensor.val == std::vector<double>{2, 3, 1});
    CHECK(t.tensor.idx[0] == std::vector<index_t>{0, 2147483646, 2147483646});
    require_error_at(error_of([&] { read_frostt(dir + "/t.tns", small); }), dir + "/t.tns", -1,
                     "a 2147483647 x 1048576 x 1048576 tensor of 3 entries needs about 16 GiB");
    // The same for a matrix of 2^31 - 1 rows: no per-row arrays of that size while reading.
    write_text(dir + "/m.mtx", "%%MatrixMarket matrix coordinate real symmetric\n2147483647 2147483647 2\n"
                               "2147483647 1 1\n1 1 2\n");
    const LoadedMatrix m = read_matrix_market(dir + "/m.mtx", big);
    require_same(m.matrix, from_triplets(2147483647, 2147483647, {0, 0, 2147483646}, {0, 2147483646, 0}, {2, 1, 1}));
  }
}

TEST_CASE("io: unwritable output paths are refused", "[io]") {
  const std::string dir = scratch_dir("io_unwritable");
  const CooMatrix a = from_triplets(2, 2, {0}, {1}, {1.0f});
  const std::string missing_dir = dir + "/no/such/dir/out.mtx";
  require_error_at(error_of([&] { check_writable(missing_dir); }), missing_dir, -1, "does not exist");
  require_error_at(error_of([&] { write_matrix_market(missing_dir, a); }), missing_dir, -1, "does not exist");
  require_error_at(error_of([&] { write_frostt(dir + "/no/x.tns", CooTensor{}); }), dir + "/no/x.tns", -1,
                   "does not exist");
  require_error_at(error_of([&] { write_matrix_market_dense(dir + "/no/x.mtx", DenseMatrix(1, 1, Layout::RowMajor)); }),
                   dir + "/no/x.mtx", -1, "does not exist");
  require_error_at(error_of([&] { check_writable(dir); }), dir, -1, "is a directory");
  require_error_at(error_of([&] { write_matrix_market(dir, a); }), dir, -1, "is a directory");
  write_text(dir + "/file", "x");
  require_error_at(error_of([&] { check_writable(dir + "/file/out.mtx"); }), dir + "/file/out.mtx", -1,
                   "not a directory");
  CHECK_THROWS_AS(check_writable(""), Error);
  // Creating a file in /proc fails even for root, after check_writable's access() test passes.
  const std::string proc = "/proc/waco-io-test.mtx";
  const std::string msg = error_of([&] { write_matrix_market(proc, a); });
  CHECK(msg.rfind(proc + ": ", 0) == 0);
  if (::geteuid() != 0) {
    fs::create_directories(dir + "/ro");
    fs::permissions(dir + "/ro", fs::perms::owner_read | fs::perms::owner_exec);
    require_error_at(error_of([&] { check_writable(dir + "/ro/out.mtx"); }), dir + "/ro/out.mtx", -1, "not writable");
    fs::permissions(dir + "/ro", fs::perms::owner_all);
  } else {
    WARN("running as root: the read-only-directory case cannot be tested");
  }
  check_writable(dir + "/fine.mtx");  // a fresh file in a writable directory is fine
  CHECK_FALSE(fs::exists(dir + "/fine.mtx"));
}

TEST_CASE("io: is_tensor_path and names", "[io]") {
  CHECK(is_tensor_path("a.tns"));
  CHECK(is_tensor_path("dir/x.TNS.gz"));
  CHECK_FALSE(is_tensor_path("a.mtx"));
  CHECK_FALSE(is_tensor_path("a.mtx.gz"));
  CHECK_FALSE(is_tensor_path("tns"));
  CHECK(field_name(Field::Pattern) == "pattern");
  CHECK(field_name(Field::Integer) == "integer");
  CHECK(field_name(Field::Real) == "real");
  CHECK(symmetry_name(Symmetry::SkewSymmetric) == "skew-symmetric");
  CHECK(symmetry_name(Symmetry::Symmetric) == "symmetric");
  CHECK(symmetry_name(Symmetry::General) == "general");
}

TEST_CASE("io: real files of the shared data match MANIFEST.tsv", "[io][data]") {
  const auto data = waco::test::shared_data_dir();
  if (!data) {
    WARN("shared data folder absent: real-file checks skipped");
    return;
  }
  const auto manifest = read_manifest(*data);
  REQUIRE(!manifest.empty());
  int checked = 0;
  for (const auto& [name, row] : manifest) {
    const std::string path = *data + "/" + row.at("file");
    if (!fs::exists(path)) continue;
    INFO(path);
    const std::int64_t nnz = std::stoll(row.at("nnz"));
    const std::int64_t stored = std::stoll(row.at("entries_stored"));
    if (row.at("type") == "tensor") {
      const LoadedTensor t = read_frostt(path);
      CHECK(t.tensor.nnz() == nnz);
      CHECK(t.source.stored_entries == stored);
      CHECK(t.tensor.order() == 3);
    } else {
      const LoadedMatrix m = read_matrix_market(path);
      CHECK(m.matrix.nnz() == nnz);
      CHECK(m.source.stored_entries == stored);
      CHECK(m.matrix.rows == std::stoll(row.at("rows_or_dims")));
      CHECK(m.matrix.cols == std::stoll(row.at("cols_or_order")));
      CHECK(field_name(m.source.field) == row.at("field"));
      CHECK(symmetry_name(m.source.symmetry) == row.at("mm_symmetry"));
      CHECK(m.source.duplicates_summed == 0);
    }
    ++checked;
  }
  CHECK(checked == static_cast<int>(manifest.size()));

  // Specific files the brief names.
  const LoadedMatrix b = read_matrix_market(*data + "/matrices/bcsstk13.mtx.gz");
  CHECK(b.source.gzip);
  CHECK(b.source.symmetry == Symmetry::Symmetric);
  CHECK(b.matrix.nnz() == 83883);
  const LoadedMatrix z = read_matrix_market(*data + "/matrices/zenios.mtx");
  CHECK(z.matrix.nnz() == 27191);
  CHECK(z.matrix.nnz() - z.source.explicit_zeros == 1314);  // README: 1,314 true nonzeros
  ReadOptions drop;
  drop.drop_explicit_zeros = true;
  const LoadedMatrix zd = read_matrix_market(*data + "/matrices/zenios.mtx", drop);
  CHECK(zd.matrix.nnz() == 1314);
  CHECK(zd.source.zeros_dropped == 27191 - 1314);
  const LoadedMatrix p = read_matrix_market(*data + "/matrices/3elt.mtx");
  CHECK(p.source.field == Field::Pattern);
  CHECK(p.matrix.nnz() == 27444);
  const LoadedTensor u = read_frostt(*data + "/tensors/umls_sub_rel_obj.tns");
  CHECK(u.tensor.dims == std::vector<index_t>{135, 46, 135});
  CHECK(u.tensor.nnz() == 6529);
}

// Reading speed on the largest shared matrices, as stored and gunzipped (parsing alone). Wall
// MB/s is SourceInfo.bytes / SourceInfo.seconds; CPU MB/s uses the process CPU time, which is
// less disturbed by other work on a shared machine. Best of 10 reads each.
// Hidden: run with `test_io "[.benchmark]"`.
TEST_CASE("io: read throughput on the largest shared matrices", "[.benchmark]") {
  const auto data = waco::test::shared_data_dir();
  if (!data) {
    WARN("shared data folder absent");
    return;
  }
  auto manifest = read_manifest(*data);
  std::vector<std::pair<std::int64_t, std::string>> bynnz;
  for (const auto& [name, row] : manifest)
    if (row.at("type") == "matrix") bynnz.push_back({std::stoll(row.at("nnz")), row.at("file")});
  std::sort(bynnz.rbegin(), bynnz.rend());
  const std::string dir = scratch_dir("io_benchmark");
  auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  struct Best {
    double wall = 1e30;
    double cpu = 1e30;
  };
  auto best_of = [&](const std::string& p, LoadedMatrix& keep) {
    Best b;
    for (int rep = 0; rep < 10; ++rep) {
      const double c0 = cpu_seconds();
      LoadedMatrix m = read_matrix_market(p);
      b.cpu = std::min(b.cpu, cpu_seconds() - c0);
      b.wall = std::min(b.wall, m.source.seconds);
      keep = std::move(m);
    }
    return b;
  };
  std::printf("%-36s %9s %7s | %-26s | %-26s\n", "file", "nnz", "MB", "as stored: s, MB/s wall/cpu",
              "gunzipped: s, MB/s wall/cpu");
  for (std::size_t k = 0; k < std::min<std::size_t>(5, bynnz.size()); ++k) {
    const std::string path = *data + "/" + bynnz[k].second;
    LoadedMatrix as_is;
    const Best b1 = best_of(path, as_is);
    const std::string plain = dir + "/plain.mtx";
    {
      gzFile g = gzopen(path.c_str(), "rb");  // reads plain files as they are, too
      REQUIRE(g != nullptr);
      std::ofstream o(plain, std::ios::binary);
      std::vector<char> buf(1 << 20);
      int n;
      while ((n = gzread(g, buf.data(), static_cast<unsigned>(buf.size()))) > 0) o.write(buf.data(), n);
      REQUIRE(gzclose(g) == Z_OK);
    }
    LoadedMatrix pl;
    const Best b2 = best_of(plain, pl);
    REQUIRE(pl.matrix.nnz() == as_is.matrix.nnz());
    REQUIRE(!pl.source.gzip);
    const double mb = static_cast<double>(as_is.source.bytes) / 1e6;
    std::printf("%-36s %9lld %7.2f | %s %.4f %6.1f %6.1f | %.4f %6.1f %6.1f\n", bynnz[k].second.c_str(),
                static_cast<long long>(bynnz[k].first), mb, as_is.source.gzip ? "gz" : "  ", b1.wall, mb / b1.wall,
                mb / b1.cpu, b2.wall, mb / b2.wall, mb / b2.cpu);
  }
}

TEST_CASE("io: values read in double are exact, in single rounded, beyond float's range refused",
          "[io]") {
  const std::string dir = scratch_dir("io_dtype");
  write_text(dir + "/a.mtx",
             "%%MatrixMarket matrix coordinate real general\n3 2 4\n1 1 0.1\n2 1 1e300\n"
             "3 2 -2.5e-310\n3 2 0.30000000000000004\n");
  ReadOptions f64;
  f64.dtype = Dtype::F64;
  const LoadedMatrix d = read_matrix_market(dir + "/a.mtx", f64);
  REQUIRE(d.matrix.nnz() == 3);
  CHECK(d.matrix.val[0] == 0.1);
  CHECK(d.matrix.val[1] == 1e300);
  CHECK(d.matrix.val[2] == -2.5e-310 + 0.30000000000000004);  // a duplicate, summed in double
  // Single precision: the value beyond float's range is refused, at its line, with the way out.
  const std::string err = error_of([&] { read_matrix_market(dir + "/a.mtx"); });
  require_error_at(err, dir + "/a.mtx", 4, "outside the single-precision range");
  try {
    read_matrix_market(dir + "/a.mtx");
  } catch (const Error& e) {
    CHECK(std::string(e.hint()).find("--dtype f64") != std::string::npos);
  }
  write_text(dir + "/b.mtx",
             "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 0.1\n");
  CHECK(read_matrix_market(dir + "/b.mtx").matrix.val[0] == static_cast<double>(0.1f));
  CHECK(read_matrix_market(dir + "/b.mtx", f64).matrix.val[0] == 0.1);
  // What is written reads back bit for bit in double too (shortest round-trip form).
  write_matrix_market(dir + "/c.mtx", d.matrix);
  CHECK(read_matrix_market(dir + "/c.mtx", f64).matrix.val == d.matrix.val);
  // Dense operands and FROSTT tensors alike.
  write_text(dir + "/x.mtx", "%%MatrixMarket matrix array real general\n2 1\n0.1\n1e300\n");
  const DenseMatrix x = read_matrix_market_dense(dir + "/x.mtx", Layout::RowMajor, f64);
  CHECK(x.dtype() == Dtype::F64);
  CHECK(x.at(0, 0) == 0.1);
  CHECK(x.at(1, 0) == 1e300);
  CHECK(error_of([&] { read_matrix_market_dense(dir + "/x.mtx"); })
            .find("outside the single-precision range") != std::string::npos);
  write_text(dir + "/t.tns", "1 1 1 0.1\n2 2 2 1e300\n");
  CHECK(read_frostt(dir + "/t.tns", f64).tensor.val == std::vector<double>{0.1, 1e300});
  CHECK(error_of([&] { read_frostt(dir + "/t.tns"); }).find("single-precision") !=
        std::string::npos);
  // A problem in single precision over a matrix read in double that float cannot hold.
  const DenseOperands ops = make_dense_operands(KernelKind::SpMV, &d.matrix, nullptr, 1, 1);
  CHECK_THROWS_WITH(make_problem(KernelKind::SpMV, &d.matrix, nullptr, ops),
                    Catch::Contains("outside the single-precision range"));
  const DenseOperands ops64 =
      make_dense_operands(KernelKind::SpMV, &d.matrix, nullptr, 1, 1, Dtype::F64);
  CHECK(make_problem(KernelKind::SpMV, &d.matrix, nullptr, ops64).dtype() == Dtype::F64);
}
