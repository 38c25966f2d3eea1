// Unit "jstream": the J-Stream tiled SpMM and SDDMM equal the reference kernels on the generated
// edge cases and on real matrices, with tile sizes that do not divide the dimensions, with 1 and 2
// threads, with model-chosen tiles, and repeated runs do not accumulate; the panel structure holds
// exactly nacs(T_i) (panel, column) pairs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/signature/jstream.hpp"
#include "waco/signature/signature.hpp"

using namespace waco::kernels;
using namespace waco::signature;

namespace {

void check_tiles(const CooMatrix& a, const std::string& name, KernelKind kind, int dense,
                 const std::vector<JStreamTiles>& tiles, Dtype dtype = Dtype::F32) {
  const DenseOperands ops = make_dense_operands(kind, &a, nullptr, dense, 5, dtype);
  const Problem p = make_problem(kind, &a, nullptr, ops);
  const Reference ref = compute_reference(p);
  const double tolerance = dtype == Dtype::F64 ? waco::test::kDoubleTolerance : kDefaultTolerance;
  for (int threads : {1, 2}) {
    for (const JStreamTiles& t : tiles) {
      INFO(kernel_name(kind) << " on '" << name << "' dense " << dense << ", T_i " << t.T_i
                             << ", T_k " << t.T_k << ", " << threads << " threads, "
                             << dtype_name(dtype));
      JStream impl(t);
      impl.prepare(p, threads);
      for (int rep = 0; rep < 2; ++rep) {
        impl.run();
        REQUIRE(impl.output().dtype() == dtype);
        const Verification v = verify(impl.output(), ref, tolerance);
        INFO("run " << rep << ": " << v.message);
        CHECK(v.ok);
      }
    }
    // Model-chosen tiles through the registry.
    INFO(kernel_name(kind) << " on '" << name << "' with model tiles, " << threads << " threads, "
                           << dtype_name(dtype));
    auto impl = waco::signature::implementations().front().make();
    impl->prepare(p, threads);
    impl->run();
    const Verification v = verify(impl->output(), ref, tolerance);
    INFO(v.message);
    CHECK(v.ok);
  }
}

const std::vector<JStreamTiles> kTiles = {{1, 1}, {3, 5}, {7, 16}, {16, 13}, {64, 48},
                                          {1000000, 1000}};

}  // namespace

TEST_CASE("jstream: the registry names jstream for spmm and sddmm") {
  REQUIRE(waco::signature::implementations().size() == 1);
  const ImplementationInfo& info = waco::signature::implementations().front();
  CHECK(info.name == "jstream");
  CHECK(info.supports(KernelKind::SpMM));
  CHECK(info.supports(KernelKind::SDDMM));
  CHECK_FALSE(info.supports(KernelKind::SpMV));
}

TEST_CASE("jstream: SpMM and SDDMM equal the reference on the edge cases") {
  for (const auto& m : waco::test::edge_case_matrices()) {
    check_tiles(m.matrix, m.name, KernelKind::SpMM, 37, kTiles);
    check_tiles(m.matrix, m.name, KernelKind::SDDMM, 37, kTiles);
    check_tiles(m.matrix, m.name, KernelKind::SpMM, 128, {{5, 64}, {32, 128}});
    check_tiles(m.matrix, m.name, KernelKind::SDDMM, 256, {{5, 96}, {32, 256}});
  }
}

TEST_CASE("jstream: SpMM and SDDMM equal the reference on real matrices") {
  const auto dir = waco::test::shared_data_dir();
  if (!dir) {
    WARN("shared data not found: skipped");
    return;
  }
  for (const char* name : {"494_bus.mtx", "Groebner_id2003_aug.mtx.gz", "cage10.mtx.gz"}) {
    const LoadedMatrix m = read_matrix_market(*dir + "/matrices/" + name);
    check_tiles(m.matrix, name, KernelKind::SpMM, 64, {{100, 48}, {1024, 64}});
    check_tiles(m.matrix, name, KernelKind::SDDMM, 64, {{100, 48}, {1024, 64}});
  }
}

TEST_CASE("jstream: double precision equals the reference to 1e-12, tiles sized for it") {
  // Values float cannot hold: a kernel that stored or summed them in float would miss by ~1e-8.
  for (const auto& m : waco::test::edge_case_matrices()) {
    const CooMatrix a = waco::test::with_double_values(m.matrix);
    check_tiles(a, m.name, KernelKind::SpMM, 37, kTiles, Dtype::F64);
    check_tiles(a, m.name, KernelKind::SDDMM, 40, kTiles, Dtype::F64);
  }
  // The model's tiles count 8-byte values: at a capacity that binds, the double tile is smaller.
  const auto cases = waco::test::edge_case_matrices();
  const auto largest = std::max_element(cases.begin(), cases.end(), [](const auto& x, const auto& y) {
    return x.matrix.nnz() < y.matrix.nnz();
  });
  const CooMatrix a = waco::test::with_double_values(largest->matrix);
  std::int64_t area[2] = {0, 0};
  for (Dtype d : {Dtype::F32, Dtype::F64}) {
    const DenseOperands ops = make_dense_operands(KernelKind::SpMM, &a, nullptr, 256, 5, d);
    JStream impl;
    impl.set_cache("l2", 16 * 1024);
    impl.prepare(make_problem(KernelKind::SpMM, &a, nullptr, ops), 1);
    REQUIRE(impl.selection().has_value());
    CHECK(impl.selection()->options.dtype == d);
    area[d == Dtype::F64] = impl.tiles().T_i * impl.tiles().T_k;
  }
  INFO("T_i x T_k: f32 " << area[0] << ", f64 " << area[1]);
  CHECK(area[1] < area[0]);
}

TEST_CASE("jstream: the panel structure holds nacs(T_i) active columns") {
  for (const auto& m : waco::test::edge_case_matrices()) {
    const LocalitySignature s = compute_signature(m.matrix);
    for (std::int64_t T : {1, 4, 32, 1024}) {
      INFO(m.name << " T_i " << T);
      const PanelStructure ps = build_panels(m.matrix, T);
      CHECK(static_cast<std::int64_t>(ps.col_id.size()) == s.nacs(T));
      CHECK(static_cast<std::int64_t>(ps.entry_row.size()) == m.matrix.nnz());
      CHECK(ps.panels() == (m.matrix.rows + T - 1) / T);
    }
  }
}

TEST_CASE("jstream: bad tiles and kernels are user errors") {
  CHECK_THROWS_AS(JStream(JStreamTiles{0, 16}), Error);
  CHECK_THROWS_AS(JStream(JStreamTiles{16, -1}), Error);
  const CooMatrix a = waco::test::from_triplets(3, 3, {0, 1}, {1, 2}, {1.0f, 2.0f});
  const DenseOperands ops = make_dense_operands(KernelKind::SpMV, &a, nullptr, 1, 1);
  const Problem p = make_problem(KernelKind::SpMV, &a, nullptr, ops);
  JStream impl;
  CHECK_THROWS_AS(impl.prepare(p, 1), Error);
}
