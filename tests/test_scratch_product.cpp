// Unit "scratch_product": the lite cost model's products with Eigen's packed panels in its
// workspace (learned/src/scratch_product.hpp) equal Eigen's own products bit for bit, on the
// shapes the model multiplies (row-major maps, a weight matrix transposed, an unaligned input)
// and on sizes that are not multiples of Eigen's register blocks; they decline, writing nothing,
// where Eigen would not run the blocked product on one thread (small and vector products, a
// product Eigen splits over threads) or the scratch is too small.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "../learned/src/scratch_product.hpp"

using waco::learned::detail::pack_floats;
using waco::learned::detail::PackScratch;
using waco::learned::detail::product_in_scratch;

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<Matrix, Eigen::AlignedMax>;
using ConstMatrixMap = Eigen::Map<const Matrix, Eigen::AlignedMax>;

Matrix random_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  Matrix m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = d(rng);
  return m;
}

/// 64-byte aligned floats (as a Workspace array).
struct Aligned {
  explicit Aligned(std::size_t n) : v(n + 16) {}
  float* data() {
    auto p = reinterpret_cast<std::uintptr_t>(v.data());
    return reinterpret_cast<float*>((p + 63) / 64 * 64);
  }
  std::vector<float> v;
};

/// Eigen's product and the scratch product of x [n x in] and w [out x in] transposed, as
/// Linear::into computes them; whether the scratch one ran, and whether the two are equal bit
/// for bit (or, when it declined, whether it left y as it was).
struct Outcome {
  bool ran = false;
  bool same = false;
};

template <class X>
Outcome compare(const X& x, const Matrix& w, std::size_t scratch_floats) {
  const ConstMatrixMap wm(w.data(), w.rows(), w.cols());
  Aligned expect_room(static_cast<std::size_t>(x.rows() * w.rows()));
  Aligned got_room(static_cast<std::size_t>(x.rows() * w.rows()));
  MatrixMap expect(expect_room.data(), x.rows(), w.rows());
  MatrixMap got(got_room.data(), x.rows(), w.rows());
  expect.noalias() = x * wm.transpose();
  got.setConstant(7.0f);
  Aligned scratch(scratch_floats);
  Outcome o;
  o.ran = product_in_scratch(got, x, wm.transpose(), PackScratch{scratch.data(), scratch_floats});
  if (o.ran)
    o.same = std::memcmp(expect.data(), got.data(), sizeof(float) * static_cast<std::size_t>(expect.size())) == 0;
  else
    o.same = (got.array() == 7.0f).all();
  return o;
}

/// Runs `f` with Eigen limited to one thread (as the cost model's SerialBelow does), restoring
/// the count after.
template <class F>
void on_one_thread(F f) {
  const int saved = Eigen::nbThreads();
  Eigen::setNbThreads(1);
  f();
  Eigen::setNbThreads(saved);
}

}  // namespace

TEST_CASE("scratch_product: equal to Eigen's product bit for bit on the model's shapes") {
  std::mt19937 rng(7);
  // (rows, in, out): the cost model's layers (order 16 -> 16, mlp1 144 -> 128, mlp2 128 -> 128,
  // head1 256 -> 128, head2 128 -> 64) at short-list batches, and sizes off Eigen's blocks.
  const int shapes[][3] = {{13, 16, 16},  {26, 144, 128}, {70, 128, 128}, {128, 256, 128},
                           {97, 128, 64}, {3, 37, 5},     {2, 300, 2},    {127, 513, 65},
                           {40, 1000, 300}};
  on_one_thread([&] {
    for (const auto& s : shapes) {
      CAPTURE(s[0], s[1], s[2]);
      Aligned x_room(static_cast<std::size_t>(s[0] * s[1]));
      MatrixMap x(x_room.data(), s[0], s[1]);
      x = random_matrix(s[0], s[1], rng);
      const Matrix w = random_matrix(s[2], s[1], rng);
      const std::size_t room = pack_floats(static_cast<std::size_t>(s[0]),
                                           static_cast<std::size_t>(s[2]), static_cast<std::size_t>(s[1]));
      const Outcome o = compare(x, w, room);
      CHECK(o.ran);
      CHECK(o.same);
      // An unaligned, read-only input (the order layer's).
      const Matrix xu = random_matrix(s[0], s[1], rng);
      const Outcome u = compare(Eigen::Map<const Matrix>(xu.data(), s[0], s[1]), w, room);
      CHECK(u.ran);
      CHECK(u.same);
    }
  });
}

TEST_CASE("scratch_product: declines, writing nothing, where Eigen would not pack on one thread") {
  std::mt19937 rng(11);
  on_one_thread([&] {
    // A vector result (head3: out = 1), a one-row input, a product small enough for Eigen's
    // coefficient-based path.
    const Matrix x = random_matrix(50, 64, rng);
    CHECK_FALSE(compare(x, random_matrix(1, 64, rng), 1 << 20).ran);
    const Matrix row = random_matrix(1, 64, rng);
    CHECK_FALSE(compare(row, random_matrix(32, 64, rng), 1 << 20).ran);
    const Matrix tiny = random_matrix(4, 5, rng);
    CHECK_FALSE(compare(tiny, random_matrix(3, 5, rng), 1 << 20).ran);
    // Scratch too small, or none: it leaves the product to Eigen.
    const Matrix w = random_matrix(128, 64, rng);
    const Outcome small = compare(x, w, 64);
    CHECK_FALSE(small.ran);
    CHECK(small.same);
    CHECK_FALSE(compare(x, w, 0).ran);
    CHECK(compare(x, w, pack_floats(50, 128, 64)).ran);
  });
#ifdef EIGEN_HAS_OPENMP
  // A product Eigen splits over two threads: left to Eigen (its blocking differs).
  const int saved = Eigen::nbThreads();
  Eigen::setNbThreads(2);
  const Matrix big = random_matrix(512, 256, rng);
  const Outcome o = compare(big, random_matrix(256, 256, rng), pack_floats(512, 256, 256));
  CHECK_FALSE(o.ran);
  CHECK(o.same);
  Eigen::setNbThreads(saved);
#endif
}
