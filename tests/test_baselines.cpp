// Unit "baselines": every registered implementation against the reference kernels on every
// generated edge case, for each kernel it supports, with 1 and 2 threads and several dense sizes.
#include <algorithm>
#include <cstdint>
#include <catch2/catch.hpp>

#include "baselines.hpp"  // kernels/src: the csr SpMV row loops
#include "support/edge_cases.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/kernels/implementation.hpp"
#include "waco/kernels/reference.hpp"

using namespace waco::kernels;

namespace {

std::vector<int> dense_sizes(KernelKind k) {
  switch (k) {
    case KernelKind::SpMV: return {1};
    case KernelKind::SpMM: return {1, 7, 64};
    case KernelKind::SDDMM: return {1, 13, 64};
    case KernelKind::MTTKRP: return {1, 5, 16};
  }
  return {1};
}

void check_all(const ImplementationInfo& info, KernelKind k, const CooMatrix* A,
               const CooTensor* T, const std::string& name, Dtype dtype = Dtype::F32) {
  const double tolerance =
      dtype == Dtype::F64 ? waco::test::kDoubleTolerance : kDefaultTolerance;
  for (int dense : dense_sizes(k)) {
    const DenseOperands ops = make_dense_operands(k, A, T, dense, 7, dtype);
    const Problem p = make_problem(k, A, T, ops);
    const Reference ref = compute_reference(p);
    for (int threads : {1, 2}) {
      INFO(info.name << " " << kernel_name(k) << " on '" << name << "', dense " << dense << ", "
                     << threads << " threads, " << dtype_name(dtype));
      auto impl = info.make();
      if (info.name == "dia" && A != nullptr && waco::test::dia_refuses(*A)) {
        // Too many diagonals: refused with the reason, before anything is stored.
        CHECK_THROWS_WITH(impl->prepare(p, threads), Catch::Contains("diagonals"));
        continue;
      }
      impl->prepare(p, threads);
      for (int rep = 0; rep < 2; ++rep) {  // a second run must not accumulate onto the first
        impl->run();
        REQUIRE(impl->output().dtype() == dtype);
        const Verification v = verify(impl->output(), ref, tolerance);
        INFO("run " << rep << ": " << v.message);
        CHECK(v.ok);
      }
    }
  }
}

}  // namespace

TEST_CASE("baselines: the registry has csr, csf and eigen") {
  std::vector<std::string> names;
  for (const auto& info : implementations()) names.push_back(info.name);
  CHECK(std::find(names.begin(), names.end(), "csr") != names.end());
  CHECK(std::find(names.begin(), names.end(), "csf") != names.end());
  CHECK(std::find(names.begin(), names.end(), "eigen") != names.end());
}

TEST_CASE("baselines: matrix kernels equal the reference on edge cases") {
  const auto cases = waco::test::edge_case_matrices();
  for (const auto& info : implementations())
    for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM})
      if (info.supports(k))
        for (const auto& [name, a] : cases) check_all(info, k, &a, nullptr, name);
}

TEST_CASE("baselines: mttkrp implementations equal the reference on edge cases") {
  const auto cases = waco::test::edge_case_tensors();
  for (const auto& info : implementations())
    if (info.supports(KernelKind::MTTKRP))
      for (const auto& [name, t] : cases) check_all(info, KernelKind::MTTKRP, nullptr, &t, name);
}

TEST_CASE("baselines: every kernel in double precision equals the reference to 1e-12") {
  // Values float cannot hold: a baseline that stored or summed them in float would miss by ~1e-8.
  for (const auto& [name, a0] : waco::test::edge_case_matrices()) {
    const CooMatrix a = waco::test::with_double_values(a0);
    for (const auto& info : implementations())
      for (KernelKind k : {KernelKind::SpMV, KernelKind::SpMM, KernelKind::SDDMM})
        if (info.supports(k)) check_all(info, k, &a, nullptr, name, Dtype::F64);
  }
  for (const auto& [name, t0] : waco::test::edge_case_tensors()) {
    const CooTensor t = waco::test::with_double_values(t0);
    for (const auto& info : implementations())
      if (info.supports(KernelKind::MTTKRP))
        check_all(info, KernelKind::MTTKRP, nullptr, &t, name, Dtype::F64);
  }
}

TEST_CASE("baselines: a float kernel misses the double tolerance (the check can fail)") {
  auto cases = waco::test::edge_case_matrices();
  const auto largest = std::max_element(cases.begin(), cases.end(), [](const auto& x, const auto& y) {
    return x.matrix.nnz() < y.matrix.nnz();
  });
  const CooMatrix a = waco::test::with_double_values(largest->matrix);
  const DenseOperands ops64 = make_dense_operands(KernelKind::SpMV, &a, nullptr, 1, 7, Dtype::F64);
  const Reference ref = compute_reference(make_problem(KernelKind::SpMV, &a, nullptr, ops64));
  const DenseOperands ops32 = make_dense_operands(KernelKind::SpMV, &a, nullptr, 1, 7);
  auto impl = make_implementation("csr", KernelKind::SpMV);
  impl->prepare(make_problem(KernelKind::SpMV, &a, nullptr, ops32), 1);
  impl->run();
  INFO(largest->name);
  REQUIRE(a.nnz() > 0);
  CHECK(verify(impl->output(), ref).ok);
  CHECK_FALSE(verify(impl->output(), ref, waco::test::kDoubleTolerance).ok);
}

TEST_CASE("baselines: unknown or unsupported implementations are user errors") {
  CHECK_THROWS_AS(make_implementation("no-such-impl", KernelKind::SpMV), Error);
  CHECK_THROWS_WITH(make_implementation("csf", KernelKind::SpMV),
                    Catch::Contains("does not support spmv"));
  try {
    make_implementation("nope", KernelKind::SpMM);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.hint()).find("csr") != std::string::npos);  // the hint lists them
  }
}

TEST_CASE("baselines: the csr loops start on a 64-byte boundary in every binary") {
  // kernels/CMakeLists.txt compiles baseline_csr.cpp with -falign-functions=64 (its loops unpadded),
  // so that the reference of every verdict runs at one code alignment in the measuring worker,
  // the CLI and libwaco.so (kernels/README.md, "Code alignment"). GCC's default 16 left it at
  // another offset in each binary.
  const auto offset = [](auto* fn) { return reinterpret_cast<std::uintptr_t>(fn) % 64; };
  CHECK(offset(&csr_spmv_rows<float>) == 0);
  CHECK(offset(&csr_spmv_rows<double>) == 0);
  CHECK(offset(&csr_spmm<float>) == 0);
  CHECK(offset(&csr_spmm<double>) == 0);
  // The SpMV row loops themselves: the serial one unpadded (baseline_csr.cpp), the parallel one
  // padded as the generated csr schedule's (baseline_csr_parallel.cpp); both on a line boundary.
  CHECK(offset(&detail::csr_spmv_serial_rows<float>) == 0);
  CHECK(offset(&detail::csr_spmv_serial_rows<double>) == 0);
  CHECK(offset(&detail::csr_spmv_parallel_rows<float>) == 0);
  CHECK(offset(&detail::csr_spmv_parallel_rows<double>) == 0);
  // The serial loop's copies (serial_bound.hpp), each on a line boundary: their no-ops, not the
  // linker, set where their inner loops lie.
  for (const auto& copy : detail::csr_spmv_serial_copies<float>()) CHECK(offset(copy) == 0);
  for (const auto& copy : detail::csr_spmv_serial_copies<double>()) CHECK(offset(copy) == 0);
}

TEST_CASE("baselines: dia equals the reference on stencils, bands and rectangles, and refuses scattered matrices") {
  // Matrices on few diagonals, past the serial bound and across several blocks of 512 rows on two
  // threads: 2-D and 3-D stencils, a band with holes (fill 0.7), a band of a wide and of a tall
  // rectangle (diagonals that leave the matrix), a dense 600x600 (1199 diagonals, all full), a
  // 3-D stencil of 34,040 rows (the rows whose diagonals all lie inside run as register tiles:
  // several a thread, between edge blocks, on a row count no tile size divides).
  std::vector<std::pair<std::string, GeneratorSpec>> specs;
  auto add = [&](const std::string& name, GeneratorSpec g) { specs.emplace_back(name, g); };
  GeneratorSpec g;
  g.kind = "stencil2d", g.nx = 61, g.ny = 47, add("stencil2d 61x47", g);
  g = {}, g.kind = "stencil3d", g.nx = 13, g.ny = 11, g.nz = 9, add("stencil3d 13x11x9", g);
  g = {}, g.kind = "stencil3d", g.nx = 40, g.ny = 37, g.nz = 23, add("stencil3d 40x37x23", g);
  g = {}, g.kind = "banded", g.rows = 3001, g.bandwidth = 4, g.fill = 0.7, g.seed = 3, add("banded 3001, fill 0.7", g);
  g = {}, g.kind = "banded", g.rows = 1500, g.cols = 4100, g.bandwidth = 3, add("banded 1500x4100", g);
  g = {}, g.kind = "banded", g.rows = 1200, g.cols = 900, g.bandwidth = 2, add("banded 1200x900", g);
  g = {}, g.kind = "banded", g.rows = 600, g.bandwidth = 599, add("dense 600x600", g);
  for (const auto& [name, spec] : specs) {
    const CooMatrix a = generate(spec);
    REQUIRE_FALSE(waco::test::dia_refuses(a));
    const ImplementationInfo* dia = nullptr;
    for (const auto& info : implementations())
      if (info.name == "dia") dia = &info;
    REQUIRE(dia != nullptr);
    check_all(*dia, KernelKind::SpMV, &a, nullptr, name);
    check_all(*dia, KernelKind::SpMV, &a, nullptr, name, Dtype::F64);
  }
  // A random matrix: its nonzeros lie on most diagonals.
  GeneratorSpec u;
  u.kind = "uniform", u.rows = 2000, u.nnz = 20000, u.seed = 5;
  const CooMatrix scattered = generate(u);
  REQUIRE(waco::test::dia_refuses(scattered));
  const DenseOperands ops = make_dense_operands(KernelKind::SpMV, &scattered, nullptr, 1, 7, Dtype::F32);
  auto impl = make_implementation("dia", KernelKind::SpMV);
  CHECK_THROWS_WITH(impl->prepare(make_problem(KernelKind::SpMV, &scattered, nullptr, ops), 2),
                    Catch::Contains("3608 diagonals") && Catch::Contains("more than 2 a nonzero"));
  CHECK_THROWS_WITH(make_implementation("dia", KernelKind::SpMM), Catch::Contains("does not support"));
}
