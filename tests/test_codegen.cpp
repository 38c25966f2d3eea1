// Unit "codegen": format storage and generated kernels against the reference kernels.
// The property test draws random valid SuperSchedules per kernel (seeded: all level formats, splits
// that do and do not divide the dimensions, every loop order, any parallel loop, 1 and 2 threads)
// and checks each generated kernel on small generated operands, both race strategies (atomic and
// private) when the parallel loop does not index the output. WACO_CODEGEN_CASES overrides the
// number of schedules per kernel (default 300). Narrow (N) levels: 40 random schedules per kernel
// with their C levels written N, the blocked narrow layout on a matrix wider than 16 bits, and the
// 16-bit boundary (65536 columns built, 65537 refused).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <future>
#include <set>
#include <tuple>

#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/storage.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/kernels/reference.hpp"
#include "waco/kernels/serial_bound.hpp"

using namespace waco::codegen;
using namespace waco::kernels;

namespace {

GeneratedOptions test_options() {
  GeneratedOptions o;
  // Shared across test runs of one build tree so that reruns hit the cache.
  o.compiler.cache_dir = std::string(WACO_BINARY_DIR) + "/test-kernel-cache";
  return o;
}

struct Rng {
  std::uint64_t state;
  std::uint64_t next() { return state = splitmix64(state); }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

/// A random valid schedule for kernel k whose split sizes are at most 2^max_log2.
SuperSchedule random_schedule(KernelKind k, Rng& rng, int max_log2) {
  const KernelSpec& spec = kernel_spec(k);
  SuperSchedule s;
  s.kind = k;
  for (char v : spec.vars) {
    const int s_v = 1 << rng.below(max_log2 + 1);
    s.split.push_back(s_v);
    if (s_v == 1) {
      s.order.push_back({v, Loop::Part::Whole});
    } else {
      s.order.push_back({v, Loop::Part::Outer});
      s.order.push_back({v, Loop::Part::Inner});
    }
  }
  for (std::size_t i = s.order.size(); i > 1; --i)
    std::swap(s.order[i - 1], s.order[rng.below(static_cast<int>(i))]);
  for (std::size_t a = 0; a < s.order.size(); ++a)  // x1 before x0
    for (std::size_t b = a + 1; b < s.order.size(); ++b)
      if (s.order[a].var == s.order[b].var && s.order[a].part == Loop::Part::Inner)
        std::swap(s.order[a], s.order[b]);
  for (std::size_t l = 0; l < s.levels().size(); ++l)
    s.formats.push_back(rng.below(2) ? LevelFormat::C : LevelFormat::U);
  s.parallel = s.order[rng.below(static_cast<int>(s.order.size()))];
  s.threads = 1 + rng.below(2);
  s.chunk = rng.below(5) == 0 ? kStaticChunk : 1 << rng.below(9);
  return s;
}

/// A random schedule with a two-dimensional register block (SpMM or MTTKRP): i0 (a U level) x j0
/// innermost, s_i x s_j <= 64, k split or not, any level formats outside i0, i1 or k1 parallel.
SuperSchedule random_row_block(KernelKind k, Rng& rng) {
  const int rows = 2 << rng.below(3);
  const int columns = std::min(2 << rng.below(6), kMaxRegisterBlock / rows);
  const bool split_k = rng.below(2) == 1;
  std::string text = "split=i:" + std::to_string(rows) + ",j:" + std::to_string(columns) +
                     (split_k ? ",k:" + std::to_string(2 << rng.below(2)) : "") + " order=i1,";
  std::vector<std::string> middle = {split_k ? "k0" : "k"};
  if (k == KernelKind::MTTKRP) middle.push_back("l");
  if (split_k && rng.below(2)) text += "k1,j1,";
  else if (split_k) middle.insert(middle.begin(), "k1"), text += "j1,";
  else text += "j1,";
  for (const std::string& m : middle) text += m + ",";
  text += "i0,j0 format=";
  const std::size_t levels = 3 + (split_k ? 1 : 0) + (k == KernelKind::MTTKRP ? 1 : 0);
  for (std::size_t l = 0; l + 1 < levels; ++l) text += rng.below(2) ? "C" : "U";
  text += "U parallel=";
  text += split_k && text.find("k1,j1") != std::string::npos && rng.below(2) ? "k1" : "i1";
  text += " threads=" + std::to_string(1 + rng.below(2)) + " chunk=" + std::to_string(1 << rng.below(6));
  return schedule_from_string(k, text);
}

struct Operands {
  std::string name;
  CooMatrix A;
  CooTensor T;
};

/// The edge cases; for double precision with values float cannot hold (with_double_values).
std::vector<Operands> operands_for(KernelKind k, Dtype dtype = Dtype::F32) {
  std::vector<Operands> out;
  const bool f64 = dtype == Dtype::F64;
  if (needs_tensor(k)) {
    for (auto& [name, t] : waco::test::edge_case_tensors())
      out.push_back({name, {}, f64 ? waco::test::with_double_values(t) : t});
  } else {
    for (auto& [name, a] : waco::test::edge_case_matrices())
      out.push_back({name, f64 ? waco::test::with_double_values(a) : a, {}});
  }
  return out;
}

/// `count` distinct canonical random schedules of kernel k (split sizes up to 16), seeded.
std::vector<SuperSchedule> distinct_random_schedules(KernelKind k, std::uint64_t seed, int count) {
  Rng rng{seed};
  std::vector<SuperSchedule> schedules;
  std::set<std::string> seen;
  while (static_cast<int>(schedules.size()) < count) {
    SuperSchedule s = canonicalize(random_schedule(k, rng, 4));
    if (seen.insert(to_text(s)).second) schedules.push_back(s);
  }
  return schedules;
}

/// Runs schedule s on operand op with dense size n; returns "" when correct or refused
/// (refused is counted), else the failure.
std::string check(const SuperSchedule& s, const Operands& op, int dense, int& refused,
                  RaceStrategy race = RaceStrategy::Atomic, Dtype dtype = Dtype::F32) {
  const CooMatrix* A = needs_tensor(s.kind) ? nullptr : &op.A;
  const CooTensor* T = needs_tensor(s.kind) ? &op.T : nullptr;
  const DenseOperands d = make_dense_operands(s.kind, A, T, dense, 3, dtype);
  const Problem p = make_problem(s.kind, A, T, d);
  GeneratedOptions o = test_options();
  o.race = race;
  GeneratedKernel g(s, o);
  try {
    g.prepare(p, 2);
  } catch (const Error& e) {
    if (std::string(e.what()).find("format refused") != std::string::npos) {
      ++refused;
      return "";
    }
    return std::string("prepare failed: ") + e.what();
  }
  const Reference ref = compute_reference(p);
  for (int rep = 0; rep < 2; ++rep) {
    g.run();
    if (g.output().dtype() != dtype) return "the output is not of the problem's value type";
    const Verification v = verify(g.output(), ref,
                                  dtype == Dtype::F64 ? waco::test::kDoubleTolerance
                                                      : kDefaultTolerance);
    if (!v.ok) return "run " + std::to_string(rep) + ": " + v.message;
  }
  return "";
}

}  // namespace

TEST_CASE("codegen: storage of CSR is CSR and of BCSR pads blocks with zeros") {
  const CooMatrix A = waco::test::from_triplets(5, 6, {0, 0, 2, 4}, {1, 5, 2, 0}, {1, 2, 3, 4});
  const DenseOperands d = make_dense_operands(KernelKind::SpMV, &A, nullptr, 1, 1);
  const Problem p = make_problem(KernelKind::SpMV, &A, nullptr, d);
  StorageResult r = build_storage(*schedule_shortcut(KernelKind::SpMV, "csr"), p);
  REQUIRE(r.storage);
  const CsrMatrix csr = to_csr(A);
  CHECK(r.storage->levels[1].pos == csr.rowptr);
  CHECK(r.storage->levels[1].crd == csr.colidx);
  CHECK(r.storage->vals.to_doubles() == csr.val);

  r = build_storage(*schedule_shortcut(KernelKind::SpMV, "bcsr2x2"), p);
  REQUIRE(r.storage);
  // blocks (i1, k1): (0,0) (0,2) (1,1) (2,0): 4 blocks of 4 values
  CHECK(r.storage->stored_values() == 16);
  CHECK(r.storage->levels[1].crd == std::vector<index_t>{0, 2, 1, 0});
  float sum = 0;
  for (double v : r.storage->vals.to_doubles()) sum += static_cast<float>(v);
  CHECK(sum == 10.0f);
  for (std::int64_t e = 0; e < A.nnz(); ++e) CHECK(r.storage->vals[r.storage->entry_position[e]] == A.val[e]);
}

TEST_CASE("codegen: the padding bound refuses with a reason before allocating") {
  const CooMatrix A = waco::test::from_triplets(1000, 1000, {0, 999}, {0, 999}, {1, 1});
  const DenseOperands d = make_dense_operands(KernelKind::SpMV, &A, nullptr, 1, 1);
  const Problem p = make_problem(KernelKind::SpMV, &A, nullptr, d);
  const StorageResult r =
      build_storage(parse_schedule(KernelKind::SpMV, "order=i,k format=UU parallel=i"), p);
  CHECK_FALSE(r.storage);
  CHECK(r.refused.find("padding bound of 20") != std::string::npos);
  StorageOptions loose;
  loose.max_padding = 1e6;
  CHECK(build_storage(parse_schedule(KernelKind::SpMV, "order=i,k format=UU parallel=i"), p, loose).storage);
}

TEST_CASE("codegen: a second prepare hits the cache and computes the identical result") {
  CooMatrix A;
  for (const auto& c : waco::test::edge_case_matrices())
    if (c.name == "odd sizes 37x53") A = c.matrix;
  REQUIRE(A.nnz() > 0);
  const DenseOperands d = make_dense_operands(KernelKind::SpMM, &A, nullptr, 9, 5);
  const Problem p = make_problem(KernelKind::SpMM, &A, nullptr, d);
  GeneratedOptions o;
  o.compiler.cache_dir = waco::test::scratch_dir("codegen-cache");  // empty: a real compile
  const SuperSchedule s = parse_schedule(KernelKind::SpMM, "split=i:2 order=i1,k,i0,j format=UCU parallel=i1 threads=2 chunk=4");
  const std::int64_t before = compiler_invocations();
  GeneratedKernel cold(s, o);
  cold.prepare(p, 2);
  CHECK_FALSE(cold.cache_hit());
  CHECK(compiler_invocations() == before + 1);
  GeneratedKernel warm(s, o);
  warm.prepare(p, 2);
  CHECK(warm.cache_hit());
  CHECK(compiler_invocations() == before + 1);
  cold.run();
  warm.run();
  CHECK(cold.output() == warm.output());  // bit for bit
  CHECK(cold.source_path() == warm.source_path());
}

TEST_CASE("codegen: named shortcuts equal the reference on every edge case") {
  const std::vector<std::pair<KernelKind, std::vector<std::string>>> shortcuts = {
      {KernelKind::SpMV, {"csr", "dcsr", "csc", "bcsr4x4", "ncsr", "bcsr2x8"}},
      {KernelKind::SpMM, {"csr", "dcsr", "csc", "bcsr4x4", "ncsr"}},
      {KernelKind::SDDMM, {"csr", "dcsr", "csc", "bcsr4x4", "ncsr"}},
      {KernelKind::MTTKRP, {"csf"}}};
  for (const auto& [k, names] : shortcuts)
    for (const std::string& name : names)
      for (const Operands& op : operands_for(k)) {
        int refused = 0;
        INFO(kernel_name(k) << " " << name << " on " << op.name);
        CHECK(check(*schedule_shortcut(k, name), op, 13, refused) == "");
        if (name == "csc")  // its parallel loop does not index the output
          CHECK(check(*schedule_shortcut(k, name), op, 13, refused, RaceStrategy::Private) == "");
      }
}

TEST_CASE("codegen: chunk=auto binds the csr SpMV baseline's rule, in the kernel of every dynamic chunk") {
  // The csr shortcut's chunk for SpMV (and dcsr's, csc's): the serial kernel up to the serial
  // bound's stored entries (kernels::csr_spmv_serial; this machine's, whatever it measured: a
  // small matrix below the probe's range, a big one above it), else about four dynamic chunks a thread of the parallel loop's iterations,
  // at least kCsrSpmvMinChunk; the source is the dynamic one (the chunk is a run-time argument).
  CHECK(to_text(*schedule_shortcut(KernelKind::SpMV, "csr")) ==
        "order=i,k format=UC parallel=i threads=0 chunk=auto");
  CHECK(emit_kernel_source(*schedule_shortcut(KernelKind::SpMV, "csr")) ==
        emit_kernel_source(schedule_from_string(KernelKind::SpMV, "order=i,k format=UC parallel=i chunk=128")));
  GeneratorSpec g;
  g.kind = "uniform";
  g.rows = 9000;
  g.cols = 7000;
  g.nnz = 320000;
  CooMatrix big = generate(g);
  g.rows = 500;
  g.nnz = 500;
  const CooMatrix small = generate(g);
  for (int threads : {2, 3}) REQUIRE(csr_spmv_serial(small.nnz(), threads, Dtype::F32));
  REQUIRE(small.nnz() <= kSerialProbeMinNnz / 2);
  // Every other row emptied: dcsr's chunks are sized from the 4,500 nonempty rows, not 9,000.
  {
    std::vector<index_t> r, c;
    std::vector<float> v;
    for (std::size_t e = 0; e < static_cast<std::size_t>(big.nnz()); ++e)
      if (big.row[e] % 2 == 0) {
        r.push_back(big.row[e]);
        c.push_back(big.col[e]);
        v.push_back(1.0f + 0.001f * static_cast<float>(e % 97));
      }
    big = waco::test::from_triplets(9000, 7000, r, c, v);
  }
  REQUIRE(big.nnz() > kSerialProbeMaxNnz);
  for (int threads : {2, 3}) REQUIRE(!csr_spmv_serial(big.nnz(), threads, Dtype::F32));
  index_t nonempty_rows = 0;
  {
    std::vector<bool> seen(9000, false);
    for (std::size_t e = 0; e < static_cast<std::size_t>(big.nnz()); ++e) seen[static_cast<std::size_t>(big.row[e])] = true;
    for (bool x : seen) nonempty_rows += x;
  }
  REQUIRE(nonempty_rows <= 4500);
  for (const std::string name : {"csr", "dcsr", "csc"})
    for (int threads : {2, 3}) {
      const SuperSchedule s = *schedule_shortcut(KernelKind::SpMV, name);
      INFO(name << ", " << threads << " threads");
      const DenseOperands d = make_dense_operands(KernelKind::SpMV, &big, nullptr, 1, 3);
      const Problem p = make_problem(KernelKind::SpMV, &big, nullptr, d);
      BoundKernel b = bind_schedule(s, p, 1, threads, test_options());
      CHECK(b.args.threads == threads);
      // dcsr's loop runs over the nonempty rows only.
      const index_t iterations = name == "csc" ? 7000 : name == "dcsr" ? nonempty_rows : 9000;
      CHECK(b.args.chunk == csr_spmv_chunk(iterations, threads));
      CHECK(b.args.chunk == std::max<index_t>(kCsrSpmvMinChunk, (iterations + 4 * threads - 1) / (4 * threads)));
      const DenseOperands ds = make_dense_operands(KernelKind::SpMV, &small, nullptr, 1, 3);
      const Problem ps = make_problem(KernelKind::SpMV, &small, nullptr, ds);
      BoundKernel bs = bind_schedule(s, ps, 1, threads, test_options());
      CHECK(bs.args.threads == 1);
      CHECK(bs.source.find("#pragma omp") == std::string::npos);  // the serial kernel
      CHECK(b.source.find("#pragma omp") != std::string::npos);
      for (BoundKernel* k : {&b, &bs}) {
        const Problem& q = k == &b ? p : ps;
        Values out;
        out.assign(Dtype::F32, static_cast<std::size_t>(k->out_size));
        k->run(q.B->data.raw(), nullptr, out.raw(), 1);
        CHECK(verify(out, compute_reference(q), kDefaultTolerance).ok);
      }
    }
  // A chunk of at least 128 rows however few the rows; a fixed chunk is bound as it is.
  CHECK(csr_spmv_chunk(300, 2) == kCsrSpmvMinChunk);
  const CooMatrix& A = big;
  const DenseOperands d = make_dense_operands(KernelKind::SpMV, &A, nullptr, 1, 3);
  const Problem p = make_problem(KernelKind::SpMV, &A, nullptr, d);
  CHECK(bind_schedule(schedule_from_string(KernelKind::SpMV, "order=i,k format=UC parallel=i chunk=128"), p, 1, 2,
                      test_options()).args.chunk == 128);
}

TEST_CASE("codegen: the bound baselines (csr, csf, dia) equal the reference on every edge case, "
          "in both types, writing every output entry, compiling nothing") {
  const std::vector<std::pair<KernelKind, std::string>> served = {{KernelKind::SpMV, "csr"},
                                                                  {KernelKind::SpMM, "csr"},
                                                                  {KernelKind::SDDMM, "csr"},
                                                                  {KernelKind::MTTKRP, "csf"},
                                                                  {KernelKind::SpMV, "dia"}};
  int dia_ran = 0, dia_refused = 0;
  for (const auto& [k, name] : served)
    for (const Dtype dtype : {Dtype::F32, Dtype::F64})
      for (const Operands& op : operands_for(k, dtype)) {
        INFO(kernel_name(k) << " " << name << " " << dtype_name(dtype) << " on " << op.name);
        const CooMatrix* A = needs_tensor(k) ? nullptr : &op.A;
        const CooTensor* T = needs_tensor(k) ? &op.T : nullptr;
        const int dense = k == KernelKind::SpMV ? 1 : 13;
        const DenseOperands d = make_dense_operands(k, A, T, dense, 3, dtype);
        const Problem p = make_problem(k, A, T, d);
        if (name == kDiaBaseline && waco::test::dia_refuses(op.A)) {  // too many diagonals
          CHECK_THROWS_WITH(bind_baseline(name, p, dense, 2, test_options()), Catch::Contains("diagonals"));
          ++dia_refused;
          continue;
        }
        dia_ran += name == kDiaBaseline;
        const BoundKernel b = bind_baseline(name, p, dense, 2, test_options());
        CHECK(b.baseline == name);
        CHECK(b.source.empty());
        CHECK(b.compile.library == nullptr);
        // The caller's output holds anything: NaN everywhere, which every entry must overwrite
        // (MTTKRP's rows without a slice too).
        Values out;
        out.assign(dtype, static_cast<std::size_t>(b.out_size));
        for (std::size_t i = 0; i < out.size(); ++i) {
          if (dtype == Dtype::F64)
            out.data<double>()[i] = std::numeric_limits<double>::quiet_NaN();
          else
            out.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
        }
        b.run(p.B->data.raw(), p.C ? p.C->data.raw() : nullptr, out.raw(), dense);
        const Verification v = verify(out, compute_reference(p),
                                      dtype == Dtype::F64 ? waco::test::kDoubleTolerance
                                                          : kDefaultTolerance);
        CHECK(v.message == "");
        CHECK(v.ok);
      }
  // A baseline for another kernel, or one that is not served, is a clear error.
  const std::vector<Operands> ops = operands_for(KernelKind::SpMV);
  const DenseOperands d = make_dense_operands(KernelKind::SpMV, &ops[0].A, nullptr, 1, 3, Dtype::F32);
  const Problem p = make_problem(KernelKind::SpMV, &ops[0].A, nullptr, d);
  CHECK_THROWS_WITH(bind_baseline("csf", p, 1, 2), Catch::Contains("cannot serve spmv"));
  CHECK_THROWS_WITH(bind_baseline("eigen", p, 1, 2), Catch::Contains("cannot serve"));
  CHECK_FALSE(servable_baseline("eigen"));
  CHECK(dia_ran > 2);
  CHECK(dia_refused > 0);
  CHECK_FALSE(servable_baseline(kDiaBaseline, KernelKind::SpMM));
  const DenseOperands dm = make_dense_operands(KernelKind::SpMM, &ops[0].A, nullptr, 4, 3, Dtype::F32);
  CHECK_THROWS_WITH(bind_baseline(kDiaBaseline, make_problem(KernelKind::SpMM, &ops[0].A, nullptr, dm), 4, 2),
                    Catch::Contains("cannot serve spmm"));
}

TEST_CASE("codegen: a baseline as an Implementation shares the csr (csf) schedule's format and "
          "output, and equals the reference") {
  const std::vector<std::pair<KernelKind, std::string>> served = {{KernelKind::SpMV, "csr"},
                                                                  {KernelKind::SpMM, "csr"},
                                                                  {KernelKind::SDDMM, "csr"},
                                                                  {KernelKind::MTTKRP, "csf"}};
  for (const auto& [k, name] : served)
    for (const Operands& op : operands_for(k, Dtype::F32)) {
      INFO(kernel_name(k) << " " << name << " on " << op.name);
      const CooMatrix* A = needs_tensor(k) ? nullptr : &op.A;
      const CooTensor* T = needs_tensor(k) ? &op.T : nullptr;
      const DenseOperands d = make_dense_operands(k, A, T, k == KernelKind::SpMV ? 1 : 13, 3);
      const Problem p = make_problem(k, A, T, d);
      const Reference ref = compute_reference(p);
      GeneratedOptions shared = test_options();
      shared.storages = std::make_shared<StorageCache>();
      shared.output = std::make_shared<Values>();
      // The baseline first, as a measuring child prepares it; the schedule then finds its format.
      const std::unique_ptr<GeneratedKernel> base = GeneratedKernel::baseline(name, k, shared);
      base->prepare(p, 2);
      GeneratedKernel schedule(*schedule_shortcut(k, name), shared);
      schedule.prepare(p, 2);
      CHECK(&base->storage() == &schedule.storage());
      CHECK(base->source_path().empty());
      CHECK(base->compile_seconds() == 0.0);
      base->run();
      CHECK(verify(base->output(), ref, kDefaultTolerance).ok);
      schedule.run();
      CHECK(verify(schedule.output(), ref, kDefaultTolerance).ok);
      if (!kernel_spec(k).sparse_output())  // one buffer, written by the last to run
        CHECK(&base->output() == &schedule.output());
      // Without a cache each holds its own format.
      const std::unique_ptr<GeneratedKernel> alone = GeneratedKernel::baseline(name, k, test_options());
      alone->prepare(p, 2);
      CHECK(&alone->storage() != &schedule.storage());
      alone->run();
      CHECK(verify(alone->output(), ref, kDefaultTolerance).ok);
    }
  // dia keeps its own storage; an unserved name or another kernel's baseline is an error.
  CHECK_THROWS_WITH(GeneratedKernel::baseline(kDiaBaseline, KernelKind::SpMV), Catch::Contains("dia"));
  CHECK_THROWS_WITH(GeneratedKernel::baseline("eigen", KernelKind::SpMV), Catch::Contains("eigen"));
  CHECK_THROWS_WITH(GeneratedKernel::baseline("csf", KernelKind::SpMV), Catch::Contains("spmv"));
}

TEST_CASE("codegen: run-time split sizes share one source, constant ones are in it") {
  auto source = [](KernelKind k, const std::string& schedule) {
    return emit_kernel_source(schedule_from_string(k, schedule));
  };
  // SpMM's innermost loop is the dense j: every split size is a run-time argument.
  CHECK(source(KernelKind::SpMM, "bcsr4x4") == source(KernelKind::SpMM, "bcsr8x2"));
  CHECK(source(KernelKind::SpMM, "bcsr4x4").find("split=i:s_i,k:s_k ") != std::string::npos);
  // Larger than kMaxConstantSplit, or over a C level: run-time.
  CHECK(source(KernelKind::SpMV, "split=i:64 order=i1,k,i0 format=UCU parallel=i1") ==
        source(KernelKind::SpMV, "split=i:128 order=i1,k,i0 format=UCU parallel=i1"));
  CHECK(source(KernelKind::SpMV, "split=k:4 order=i,k1,k0 format=UCC parallel=i") ==
        source(KernelKind::SpMV, "split=k:8 order=i,k1,k0 format=UCC parallel=i"));
  // Small U blocks at the innermost point of SpMV: constants, so 4x4 and 8x8 differ.
  const std::string b4 = source(KernelKind::SpMV, "bcsr4x4");
  CHECK(b4.find("constexpr long long s_i = 4;") != std::string::npos);
  CHECK(b4.find("constexpr long long s_k = 4;") != std::string::npos);
  CHECK(b4.find("waco_constant_split[4] = {4, 4, 0, 0};") != std::string::npos);
  CHECK(b4.find("split=i:4,k:4 ") != std::string::npos);
  CHECK(b4 != source(KernelKind::SpMV, "bcsr8x8"));
  // Mixed: i constant (U, 32), k run-time (64).
  const SuperSchedule mixed = schedule_from_string(KernelKind::SpMV, "bcsr32x64");
  CHECK(split_is_constant(mixed, 'i'));
  CHECK_FALSE(split_is_constant(mixed, 'k'));
  const std::string m = emit_kernel_source(mixed);
  CHECK(m.find("split=i:32,k:s_k ") != std::string::npos);
  CHECK(m.find("const long long s_k = a->split[1];") != std::string::npos);
  CHECK(m == source(KernelKind::SpMV, "bcsr32x128"));
  // Threads and chunk never change the source.
  CHECK(source(KernelKind::SpMV, "order=i,k format=UC parallel=i threads=2 chunk=8") ==
        source(KernelKind::SpMV, "csr"));
}

TEST_CASE("codegen: threads=1 is a serial kernel, and SDDMM multiplies by the nonzero once") {
  auto source = [](KernelKind k, const std::string& schedule) {
    return emit_kernel_source(schedule_from_string(k, schedule));
  };
  // One thread: no OpenMP region, no dynamic loop, no atomics (a csc SpMV updates rows of the
  // output from every column: serial, nothing races).
  const std::string serial =
      source(KernelKind::SpMV, "order=i,k format=UC parallel=i threads=1 chunk=8");
  CHECK(serial != source(KernelKind::SpMV, "csr"));
  CHECK(serial.find("#pragma omp") == std::string::npos);
  CHECK(serial.find("Serial (threads=1)") != std::string::npos);
  const std::string csc1 = source(KernelKind::SpMV, "order=k,i format=UC parallel=k threads=1");
  CHECK(csc1.find("omp atomic") == std::string::npos);
  CHECK(csc1.find("calloc") == std::string::npos);
  CHECK(source(KernelKind::SpMV, "order=k,i format=UC parallel=k threads=2").find("omp atomic") !=
        std::string::npos);
  // SDDMM's reduction over k runs within one nonzero: sum B*C, scale once at the flush.
  const std::string sddmm = source(KernelKind::SDDMM, "csr");
  CHECK(sddmm.find("acc += B_i[k] * C_j[k];") != std::string::npos);
  CHECK(sddmm.find("D_vals[p1] = A_vals[p1] * acc;") != std::string::npos);
  const std::string split_k =
      source(KernelKind::SDDMM, "split=k:32 order=k1,i,j,k0 format=UC parallel=i");
  CHECK(split_k.find("D_vals[p1] += A_vals[p1] * acc;") != std::string::npos);
}

TEST_CASE("codegen: an SpMV whose innermost loop walks a compressed level is compiled without loop vectorization") {
  // GCC 12 vectorized such a row sum in f32 as gathers and in-order adds, slower than the scalar
  // loop (codegen/README.md): the function carries WACO_SCALAR_ROW_SUM; dense inner levels (blocks)
  // and the other kernels keep the vectorizer.
  const auto source = [](KernelKind k, const char* schedule) {
    return emit_kernel_source(schedule_from_string(k, schedule));
  };
  const std::string entry = "extern \"C\" WACO_SCALAR_ROW_SUM int waco_kernel(const WacoArgs* a)";
  for (const char* scalar : {"order=i,k format=UC parallel=i chunk=static", "order=i,k format=CC parallel=i",
                             "split=i:256,k:65536 order=i1,k1,i0,k0 format=UCUN parallel=i1 chunk=static",
                             "split=i:1024 order=i1,i0,k format=UUC parallel=i1 chunk=1"}) {
    INFO(scalar);
    const std::string src = source(KernelKind::SpMV, scalar);
    CHECK(src.find(entry) != std::string::npos);
    CHECK(src.find("__attribute__((optimize(\"no-tree-vectorize\", \"align-loops=32\")))") != std::string::npos);
  }
  for (const auto& [k, vectorized] : std::vector<std::pair<KernelKind, const char*>>{
           {KernelKind::SpMV, "split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1 chunk=static"},
           {KernelKind::SpMM, "order=i,k,j format=UC parallel=i chunk=static"}}) {
    INFO(vectorized);
    const std::string src = source(k, vectorized);
    CHECK(src.find("WACO_SCALAR_ROW_SUM") == std::string::npos);
    CHECK(src.find("extern \"C\" int waco_kernel(const WacoArgs* a)") != std::string::npos);
  }
  // The drop-in header's form carries it too.
  const std::string header = emit_kernel_source(
      schedule_from_string(KernelKind::SpMV, "order=i,k format=UC parallel=i chunk=static"),
      RaceStrategy::Atomic, SourceForm::Header);
  CHECK(header.find("WACO_SCALAR_ROW_SUM inline int waco_kernel(const WacoArgs* a)") != std::string::npos);
}

TEST_CASE("codegen: the race strategy is part of the source only when it matters") {
  const SuperSchedule csc = *schedule_shortcut(KernelKind::SpMV, "csc");
  REQUIRE_FALSE(parallel_loop_is_race_free(csc));
  const std::string atomic = emit_kernel_source(csc, RaceStrategy::Atomic);
  const std::string priv = emit_kernel_source(csc, RaceStrategy::Private);
  CHECK(atomic.find("#pragma omp atomic") != std::string::npos);
  CHECK(priv.find("#pragma omp atomic") == std::string::npos);
  CHECK(priv.find("calloc") != std::string::npos);
  const SuperSchedule csr = *schedule_shortcut(KernelKind::SpMV, "csr");
  CHECK(emit_kernel_source(csr, RaceStrategy::Atomic) == emit_kernel_source(csr, RaceStrategy::Private));
  // Auto: private while the copies hold no more entries than there are updates.
  CHECK(resolve_race(RaceStrategy::Auto, csc, 1000, 5000, 2) == RaceStrategy::Private);
  CHECK(resolve_race(RaceStrategy::Auto, csc, 1000, 5000, 8) == RaceStrategy::Atomic);
  CHECK(resolve_race(RaceStrategy::Auto, csc, 1000000, 10, 1) == RaceStrategy::Private);
  CHECK(resolve_race(RaceStrategy::Auto, csc, 1LL << 29, 1e12, 3) == RaceStrategy::Atomic);  // 4 GiB
  CHECK(resolve_race(RaceStrategy::Atomic, csc, 1000, 5000, 2) == RaceStrategy::Atomic);
  CHECK(parse_race_strategy("private") == RaceStrategy::Private);
  CHECK_FALSE(parse_race_strategy("locks"));
}

TEST_CASE("codegen: random schedules equal the reference (property test)") {
  const char* env = std::getenv("WACO_CODEGEN_CASES");
  const int cases = env ? std::atoi(env) : 300;
  for (KernelKind k : kAllKernels) {
    const std::vector<Operands> ops = operands_for(k);
    const std::vector<SuperSchedule> schedules =
        distinct_random_schedules(k, 0x5EED0000ull + static_cast<std::uint64_t>(k), cases);
    // Compile everything first, two compilers at a time (the cache makes the runs below hits).
    std::vector<std::future<void>> jobs;
    for (int w = 0; w < 2; ++w)
      jobs.push_back(std::async(std::launch::async, [&, w] {
        for (std::size_t i = w; i < schedules.size(); i += 2) {
          compile_and_load(emit_kernel_source(schedules[i]), test_options().compiler);
          if (!parallel_loop_is_race_free(schedules[i]))
            compile_and_load(emit_kernel_source(schedules[i], RaceStrategy::Private),
                             test_options().compiler);
        }
      }));
    for (auto& j : jobs) j.get();
    int refused = 0, ran = 0, privatized = 0;
    for (std::size_t i = 0; i < schedules.size(); ++i) {
      const Operands& op = ops[i % ops.size()];
      const int dense = 1 + static_cast<int>(i % 17);
      INFO(kernel_name(k) << " schedule '" << to_text(schedules[i]) << "' on " << op.name
                          << ", dense " << dense);
      const int before = refused;
      CHECK(check(schedules[i], op, dense, refused) == "");
      ran += refused == before;
      if (!parallel_loop_is_race_free(schedules[i]) && refused == before) {
        INFO("race strategy private");
        CHECK(check(schedules[i], op, dense, refused, RaceStrategy::Private) == "");
        ++privatized;
      }
    }
    INFO(kernel_name(k) << ": " << ran << " ran (" << privatized << " also privatized), " << refused
                        << " refused by the padding bound");
    CHECK(ran >= cases / 2);
    CHECK(privatized >= cases / 10);
  }
}

TEST_CASE("codegen: random schedules in double precision equal the reference to 1e-12") {
  // The property test's schedules (a fifth of them) in double, on values float cannot hold: the
  // stored values, the register blocks (half the lanes of float's), the private copies and the
  // accumulators must all be double.
  const char* env = std::getenv("WACO_CODEGEN_CASES");
  const int cases = std::max(8, (env ? std::atoi(env) : 300) / 5);
  for (KernelKind k : kAllKernels) {
    const std::vector<Operands> ops = operands_for(k, Dtype::F64);
    const std::vector<SuperSchedule> schedules =
        distinct_random_schedules(k, 0xD0B1E000ull + static_cast<std::uint64_t>(k), cases);
    std::vector<std::future<void>> jobs;
    for (int w = 0; w < 2; ++w)
      jobs.push_back(std::async(std::launch::async, [&, w] {
        for (std::size_t i = w; i < schedules.size(); i += 2) {
          const RaceStrategy race = parallel_loop_is_race_free(schedules[i]) || i % 2 == 0
                                        ? RaceStrategy::Atomic
                                        : RaceStrategy::Private;
          compile_and_load(emit_kernel_source(schedules[i], race, SourceForm::SharedObject,
                                              Dtype::F64),
                           test_options().compiler);
        }
      }));
    for (auto& j : jobs) j.get();
    int refused = 0, ran = 0;
    for (std::size_t i = 0; i < schedules.size(); ++i) {
      const Operands& op = ops[i % ops.size()];
      const int dense = 1 + static_cast<int>(i % 17);
      const RaceStrategy race = parallel_loop_is_race_free(schedules[i]) || i % 2 == 0
                                    ? RaceStrategy::Atomic
                                    : RaceStrategy::Private;
      INFO(kernel_name(k) << " schedule '" << to_text(schedules[i]) << "' on " << op.name
                          << ", dense " << dense << ", " << race_strategy_name(race));
      const int before = refused;
      CHECK(check(schedules[i], op, dense, refused, race, Dtype::F64) == "");
      ran += refused == before;
    }
    INFO(kernel_name(k) << ": " << ran << " ran, " << refused << " refused");
    CHECK(ran >= cases / 2);
  }
}

TEST_CASE("codegen: a double kernel's source declares double values") {
  const SuperSchedule b = schedule_from_string(KernelKind::SpMM, "bcsr4x4");
  const std::string f = emit_kernel_source(b);
  const std::string d = emit_kernel_source(b, RaceStrategy::Atomic, SourceForm::SharedObject,
                                           Dtype::F64);
  CHECK(f.find("typedef float waco_value_t;") != std::string::npos);
  CHECK(d.find("typedef double waco_value_t;") != std::string::npos);
  CHECK(d.find("float") == std::string::npos);  // nothing computes in single precision
  CHECK(f != d);
}

TEST_CASE("codegen: static ranges (chunk=static) equal the reference on every edge case") {
  // Balanced by the entries of the first C level when the parallel loop is the outermost over a
  // U level (through U levels between them), else OpenMP's static split; 2 and 3 threads (more
  // threads than some matrices have rows), private copies where the loop does not index the output.
  const std::vector<std::tuple<KernelKind, std::string, bool>> cases = {
      {KernelKind::SpMV, "order=i,k format=UC parallel=i", true},
      {KernelKind::SpMV, "split=i:8 order=i1,i0,k format=UUC parallel=i1", true},
      {KernelKind::SpMV, "split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1", true},
      {KernelKind::SpMV, "split=i:4,k:4 order=i1,k1,i0,k0 format=UUCU parallel=i1", true},
      {KernelKind::SpMV, "order=i,k format=CC parallel=i", false},
      {KernelKind::SpMV, "order=k,i format=UC parallel=k", true},
      {KernelKind::SpMV, "split=i:4 order=i1,k,i0 format=UCU parallel=k", false},
      {KernelKind::SpMM, "order=i,k,j format=UC parallel=i", true},
      {KernelKind::SpMM, "split=j:8 order=i,j1,k,j0 format=UC parallel=i", true},
      {KernelKind::SpMM, "split=i:2 order=i1,i0,k,j format=UUC parallel=i1", true},
      {KernelKind::SDDMM, "order=i,j,k format=UC parallel=i", true},
      {KernelKind::SDDMM, "split=i:16 order=i1,i0,j,k format=UUU parallel=i1", false},
      {KernelKind::MTTKRP, "order=i,k,l,j format=CCC parallel=i", false},
      {KernelKind::MTTKRP, "order=i,k,l,j format=UCC parallel=i", true},
  };
  for (const auto& [k, text, balanced] : cases)
    for (int threads : {2, 3}) {
      const SuperSchedule s =
          schedule_from_string(k, text + " threads=" + std::to_string(threads) + " chunk=static");
      INFO(kernel_name(k) << " '" << to_text(s) << "'");
      CHECK((emit_kernel_source(s).find("balanced by the entries") != std::string::npos) == balanced);
      for (const Operands& op : operands_for(k))
        for (int dense : {1, 5, 17}) {
          INFO(op.name << ", dense " << dense);
          int refused = 0;
          CHECK(check(s, op, dense, refused) == "");
          if (!parallel_loop_is_race_free(s)) CHECK(check(s, op, dense, refused, RaceStrategy::Private) == "");
        }
    }
}

TEST_CASE("codegen: register blocks are recognised only where the output block is loop-invariant") {
  auto block = [](KernelKind k, const std::string& text) {
    return register_block(schedule_from_string(k, text));
  };
  const auto b = block(KernelKind::SpMM, "split=j:32 order=i,j1,k,j0 format=UC");
  REQUIRE(b);
  CHECK(b->var == 'j');
  CHECK(b->size == 32);
  CHECK(block(KernelKind::MTTKRP, "split=j:8 order=i,j1,k,l,j0 format=UCC"));
  // Two-dimensional: i0 over a U level just outside j0.
  const auto tile = block(KernelKind::SpMM, "split=i:4,j:16 order=i1,j1,k,i0,j0 format=UCU");
  REQUIRE(tile);
  CHECK(tile->row_var == 'i');
  CHECK(tile->rows == 4);
  CHECK(tile->size == 16);
  CHECK_FALSE(block(KernelKind::SpMM, "split=i:4,j:16 order=i1,j1,k,i0,j0 format=UCC"));  // C rows
  CHECK_FALSE(block(KernelKind::SpMM, "split=i:4,j:32 order=i1,j1,k,i0,j0 format=UCU"));  // > 64
  CHECK_FALSE(block(KernelKind::SpMM, "split=i:16,j:2 order=i1,j1,k,i0,j0 format=UCU"));  // rows > 8
  CHECK_FALSE(block(KernelKind::SpMM, "split=i:4,j:16 order=j1,i1,k,i0,j0 format=UCU"));  // i1 inside
  CHECK_FALSE(block(KernelKind::SpMM, "split=j:128 order=i,j1,k,j0 format=UC"));  // too large
  CHECK_FALSE(block(KernelKind::SpMM, "split=j:32 order=i,k,j1,j0 format=UC"));   // nothing between
  CHECK_FALSE(block(KernelKind::SpMM, "split=j:32 order=j1,i,k,j0 format=UC"));   // i indexes C
  CHECK_FALSE(block(KernelKind::SpMM, "split=j:32 order=i,j1,k,j0 format=UC parallel=k"));
  CHECK_FALSE(block(KernelKind::SDDMM, "split=k:32 order=i,j,k1,k0 format=UC"));  // sparse output
  // Its size is a compile-time constant (the array length), so 32 and 64 are two sources.
  const SuperSchedule s32 = schedule_from_string(KernelKind::SpMM, "split=j:32 order=i,j1,k,j0 format=UC");
  CHECK(split_is_constant(s32, 'j'));
  const std::string src = emit_kernel_source(s32);
  CHECK(src.find("constexpr long long s_j = 32;") != std::string::npos);
  CHECK(src.find("blk_vec blk_v[s_j / blk_w]") != std::string::npos);
  CHECK(src != emit_kernel_source(schedule_from_string(KernelKind::SpMM,
                                                       "split=j:64 order=i,j1,k,j0 format=UC")));
}

TEST_CASE("codegen: a register-blocked SpMM equals the unblocked csr kernel bit for bit") {
  // Both add a row's products in the order of its nonzeros, starting from zero, with fused
  // multiply-adds, so the results are identical, in full blocks (vectors), remainders (J not a
  // multiple of s_j) and J < s_j; with block rows too (their padding adds exact zeros, 0 * b, to
  // the same sums). Except for blocks of 2 floats: GCC 12 compiles 2-float vectors
  // with a mix of fused and unfused operations (vaddss beside vfmadd231ss in its assembly), which
  // moved results by up to 2.3e-6 relative.
  for (const auto& [name, A] : waco::test::edge_case_matrices()) {
    for (int dense : {1, 13, 40, 64, 100}) {
      for (const char* text : {"split=j:2 order=i,j1,k,j0 format=UC chunk=4",
                               "split=j:32 order=i,j1,k,j0 format=UC chunk=4",
                               "split=j:64 order=i,j1,k,j0 format=CC chunk=4",
                               "split=i:4,j:16 order=i1,j1,k,i0,j0 format=UCU chunk=2",
                               "split=i:2,j:32 order=i1,j1,k,i0,j0 format=CCU chunk=2"}) {
        INFO(name << ", J = " << dense << ", " << text);
        const DenseOperands d = make_dense_operands(KernelKind::SpMM, &A, nullptr, dense, 7);
        const Problem p = make_problem(KernelKind::SpMM, &A, nullptr, d);
        GeneratedKernel blocked(schedule_from_string(KernelKind::SpMM, text), test_options());
        GeneratedKernel plain(*schedule_shortcut(KernelKind::SpMM, "csr"), test_options());
        blocked.prepare(p, 2);
        plain.prepare(p, 2);
        blocked.run();
        plain.run();
        const auto& x = blocked.output();
        const auto& y = plain.output();
        REQUIRE(x.size() == y.size());
        double worst = 0;  // relative to the entry's magnitude
        for (std::size_t q = 0; q < x.size(); ++q)
          worst = std::max(worst, std::abs(double(x[q]) - y[q]) / std::max(1.0, std::abs(double(y[q]))));
        INFO("largest relative difference " << worst);
        if (std::string(text).find("j:2 ") == std::string::npos)
          CHECK(x == y);
        else
          CHECK(worst <= 1e-5);
      }
    }
  }
}

TEST_CASE("codegen: which register blocks stream their flush") {
  auto streams = [](KernelKind k, const std::string& text) {
    return streams_output(schedule_from_string(k, text));
  };
  CHECK(streams(KernelKind::SpMM, "split=j:64 order=i,j1,k,j0 format=UC"));
  CHECK(streams(KernelKind::SpMM, "split=i:4,j:32 order=i1,i0,j1,k,j0 format=UUC"));
  CHECK(streams(KernelKind::MTTKRP, "split=j:16 order=i,j1,k,l,j0 format=UCC"));
  CHECK_FALSE(streams(KernelKind::SpMM, "order=i,k,j format=UC"));                      // no block
  CHECK_FALSE(streams(KernelKind::SpMM, "split=j:64 order=i,j1,k,j0 format=CC"));        // C rows
  CHECK_FALSE(streams(KernelKind::SpMM, "split=i:4,j:16 order=i1,j1,k,i0,j0 format=UCU"));  // 2-D
  CHECK_FALSE(streams(KernelKind::SpMM, "split=j:64 order=i,j1,k,j0 format=UC parallel=j1"));
  CHECK_FALSE(streams(KernelKind::SDDMM, "split=k:32 order=i,j,k1,k0 format=UC"));
  // Only a streaming source carries the writer.
  const std::string src = emit_kernel_source(schedule_from_string(KernelKind::SpMM, "split=j:64 order=i,j1,k,j0 format=UC"));
  CHECK(src.find("waco_stream_store(&waco_writer") != std::string::npos);
  CHECK(emit_kernel_source(schedule_from_string(KernelKind::SpMM, "split=j:64 order=i,j1,k,j0 format=CC"))
            .find("waco_stream") == std::string::npos);
}

TEST_CASE("codegen: which sources add into the output's rows (staged when it is off a line)") {
  auto rows = [](KernelKind k, const std::string& text) {
    return updates_output_rows(schedule_from_string(k, text));
  };
  CHECK(rows(KernelKind::SpMM, "order=i,k,j format=UC"));                    // csr's loops
  CHECK(rows(KernelKind::SpMM, "order=k,i,j format=UC"));                    // csc's
  CHECK(rows(KernelKind::SpMM, "split=j:8 order=i,k,j1,j0 format=UC"));      // j0 innermost, no block
  CHECK(rows(KernelKind::MTTKRP, "order=i,k,l,j format=CCC"));
  CHECK(rows(KernelKind::MTTKRP, "split=i:16 order=i1,i0,l,k,j format=UCCC"));
  CHECK_FALSE(rows(KernelKind::SpMM, "split=j:64 order=i,j1,k,j0 format=UC"));  // a register block
  CHECK_FALSE(rows(KernelKind::SpMM, "order=i,j,k format=UC"));                 // a scalar sum
  CHECK_FALSE(rows(KernelKind::SpMV, "order=i,k format=UC"));
  CHECK_FALSE(rows(KernelKind::SpMV, "order=k,i format=UC"));
  CHECK_FALSE(rows(KernelKind::SDDMM, "order=i,j,k format=UC"));
  // Bound, the flag is the source's; a baseline's binding never stages (csr stages its rows
  // itself, csf sums a fibre before adding it).
  const CooMatrix a = waco::test::from_triplets(3, 4, {0, 1, 2}, {0, 3, 1}, {1.0f, 2.0f, 3.0f});
  const DenseOperands d = make_dense_operands(KernelKind::SpMM, &a, nullptr, 8, 5);
  const Problem p = make_problem(KernelKind::SpMM, &a, nullptr, d);
  CHECK(bind_schedule(schedule_from_string(KernelKind::SpMM, "order=i,k,j format=UC"), p, 8, 2, test_options())
            .stage_unaligned_output);
  CHECK_FALSE(bind_baseline("csr", p, 8, 2, test_options()).stage_unaligned_output);
}

namespace {

/// Runs schedule s (which streams_output) on op with plain stores and with streaming stores
/// (stream_min_bytes = 1 streams every output; the host streams only those beyond the LLC) into
/// an output 0-15 values off a 64-byte line; CHECKs that both write the same bytes and touch
/// nothing around the output, and that the result is the reference's. The kernel is compiled
/// with the writer's probe (-DWACO_STREAM_PROBE), which counts the lines it writes whole: none
/// with plain stores, and with streaming stores at least half the output's bytes when the
/// block's flushes average 256 bytes or more (X / ceil(X / s_x) values of the dense size X), else
/// none.
void check_streaming(const SuperSchedule& s, const Operands& op, int dense, Dtype dtype,
                     const GeneratedOptions& plain_options) {
  REQUIRE(streams_output(s));
  GeneratedOptions options = plain_options;
  options.compiler.flags.push_back("-DWACO_STREAM_PROBE");
  const CooMatrix* A = needs_tensor(s.kind) ? nullptr : &op.A;
  const CooTensor* T = needs_tensor(s.kind) ? &op.T : nullptr;
  const DenseOperands d = make_dense_operands(s.kind, A, T, dense, 5, dtype);
  const Problem p = make_problem(s.kind, A, T, d);
  BoundKernel b = bind_schedule(s, p, dense, 2, options);
  const std::size_t n = static_cast<std::size_t>(b.out_size), pad = 16;
  const std::size_t value = dtype_size(dtype);
  long long* const lines = static_cast<long long*>(b.compile.library->symbol("waco_stream_probe_lines"));
  const long long block = s.split_of('j');
  const long long flush = dense / ((dense + block - 1) / block);
  const bool streams = flush * static_cast<long long>(value) >= 256;
  // 64-byte-aligned storage with room for the offsets and guards on both sides.
  std::vector<unsigned char> plain((n + 2 * pad) * value + 64), streamed(plain.size());
  auto at = [&](std::vector<unsigned char>& v, std::size_t off) {
    const std::uintptr_t base = (reinterpret_cast<std::uintptr_t>(v.data()) + 63) & ~std::uintptr_t{63};
    return reinterpret_cast<unsigned char*>(base) + off * value;
  };
  for (std::size_t off : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{8}, std::size_t{15}}) {
    INFO(kernel_name(s.kind) << " " << to_text(s) << " " << dtype_name(dtype) << " on " << op.name << ", dense "
                             << dense << ", output " << off << " values off a line, " << n * value << " bytes");
    std::fill(plain.begin(), plain.end(), 0xA5);
    std::fill(streamed.begin(), streamed.end(), 0xA5);
    *lines = 0;
    b.stream_min_bytes = 0;
    b.run(p.B->data.raw(), p.C ? p.C->data.raw() : nullptr, at(plain, off), dense);
    CHECK(*lines == 0);
    b.stream_min_bytes = 1;
    b.run(p.B->data.raw(), p.C ? p.C->data.raw() : nullptr, at(streamed, off), dense);
    if (streams)
      CHECK(static_cast<std::size_t>(*lines) * 64 * 2 >= n * value);
    else
      CHECK(*lines == 0);
    // The first byte that differs, from the output's start (none: -1), over the output and the
    // values around it.
    long long first = -1;
    const unsigned char* x = at(plain, 0);
    const unsigned char* y = at(streamed, 0);
    for (std::size_t q = 0; q < (n + 2 * pad) * value && first < 0; ++q)
      if (x[q] != y[q]) first = static_cast<long long>(q) - static_cast<long long>(off * value);
    CHECK(first == -1);
  }
  Values out;
  out.assign(dtype, n);
  b.run(p.B->data.raw(), p.C ? p.C->data.raw() : nullptr, out.raw(), dense);
  const Verification v =
      verify(out, compute_reference(p), dtype == Dtype::F64 ? waco::test::kDoubleTolerance : kDefaultTolerance);
  CHECK(v.message == "");
}

}  // namespace

TEST_CASE("codegen: streaming stores write what plain stores write, bit for bit, at any alignment") {
  // Dense sizes whose flushes average 256 bytes or more stream (multiples of the block; in double
  // also J = 40 < s_j = 64 and J = 100, blocks of 64 and 36, which carry lines across flushes);
  // the others run the plain flush under the same flag.
  const std::vector<std::pair<KernelKind, const char*>> cases = {
      {KernelKind::SpMM, "split=j:64 order=i,j1,k,j0 format=UC chunk=4"},
      {KernelKind::SpMM, "split=j:64 order=i,j1,k,j0 format=UC chunk=static"},
      {KernelKind::SpMM, "split=j:64 order=i,j1,k,j0 format=UC threads=1"},
      {KernelKind::SpMM, "split=i:4,j:32 order=i1,i0,j1,k,j0 format=UUC chunk=2"},
      {KernelKind::MTTKRP, "split=j:64 order=i,j1,k,l,j0 format=UCC chunk=2"}};
  for (const auto& [kind, text] : cases)
    for (const Dtype dtype : {Dtype::F32, Dtype::F64})
      for (const Operands& op : operands_for(kind, dtype))
        for (const int dense : {40, 64, 100, 128})
          check_streaming(schedule_from_string(kind, text), op, dense, dtype, test_options());
}

#if defined(__x86_64__)
TEST_CASE("codegen: the streaming writer's AVX2 and SSE2 forms write what plain stores write") {
  // The writer assembles lines in a register with AVX-512 and in memory otherwise: compile the
  // kernel for the narrower instruction sets this CPU runs (x86-64-v3: AVX2; x86-64: SSE2).
  const SuperSchedule s = schedule_from_string(KernelKind::SpMM, "split=j:64 order=i,j1,k,j0 format=UC chunk=4");
  for (const char* march : {"-march=x86-64-v3", "-march=x86-64"}) {
    if (std::string(march) == "-march=x86-64-v3" && !__builtin_cpu_supports("avx2")) continue;
    GeneratedOptions o = test_options();
    std::replace(o.compiler.flags.begin(), o.compiler.flags.end(), std::string("-march=native"), std::string(march));
    INFO(march);
    for (const Dtype dtype : {Dtype::F32, Dtype::F64})
      for (const Operands& op : operands_for(KernelKind::SpMM, dtype))
        for (const int dense : {64, 100}) check_streaming(s, op, dense, dtype, o);
  }
}
#endif

TEST_CASE("codegen: random register-blocked schedules equal the reference (property test)") {
  // Schedules drawn until they have a register block: block sizes 2..64 (dividing J or not,
  // larger than J), with and without block rows (i0), outer loops split or not, C and U levels, 1 and 2 threads, a parallel loop
  // that does not index the output (atomic and private flushes).
  for (KernelKind k : {KernelKind::SpMM, KernelKind::MTTKRP}) {
    Rng rng{0xB10C0000ull + static_cast<std::uint64_t>(k)};
    const std::vector<Operands> ops = operands_for(k);
    std::set<std::string> seen;
    int ran = 0, refused = 0, racy = 0, rows = 0;
    for (int draws = 0; seen.size() < 40 && draws < 200000; ++draws) {
      SuperSchedule s =
          canonicalize(seen.size() % 2 ? random_row_block(k, rng) : random_schedule(k, rng, 6));
      if (!validate(s).empty() || !register_block(s) || !seen.insert(to_text(s)).second) continue;
      const Operands& op = ops[seen.size() % ops.size()];
      const int dense = 1 + rng.below(100);
      INFO(kernel_name(k) << " schedule '" << to_text(s) << "' on " << op.name << ", dense " << dense);
      const int before = refused;
      CHECK(check(s, op, dense, refused) == "");
      if (refused != before) continue;
      ++ran;
      rows += register_block(s)->rows > 1;
      if (!parallel_loop_is_race_free(s)) {
        ++racy;
        CHECK(check(s, op, dense, refused, RaceStrategy::Private) == "");
      }
    }
    INFO(kernel_name(k) << ": " << ran << " ran, " << racy << " with a racy parallel loop, " << rows
                        << " with block rows");
    CHECK(seen.size() == 40);
    CHECK(ran >= 20);
    CHECK(racy >= 2);
    CHECK(rows >= 2);
  }
}

TEST_CASE("codegen: narrow (N) levels equal the reference (property test and the 16-bit boundary)") {
  // Random schedules of every kernel with every C level written N (16-bit coordinates; the edge
  // cases' extents all fit them), both race strategies where the parallel loop does not index
  // the output.
  for (KernelKind k : kAllKernels) {
    const std::vector<Operands> ops = operands_for(k);
    std::vector<SuperSchedule> schedules =
        distinct_random_schedules(k, 0x4A770000ull + static_cast<std::uint64_t>(k), 40);
    int narrow = 0, refused = 0;
    for (std::size_t i = 0; i < schedules.size(); ++i) {
      SuperSchedule& s = schedules[i];
      for (LevelFormat& f : s.formats)
        if (f == LevelFormat::C) f = LevelFormat::N;
      if (std::count(s.formats.begin(), s.formats.end(), LevelFormat::N) == 0) continue;
      ++narrow;
      CHECK(emit_kernel_source(s).find("const unsigned short* __restrict") != std::string::npos);
      const Operands& op = ops[i % ops.size()];
      const int dense = 1 + static_cast<int>(i % 7);
      INFO(kernel_name(k) << " schedule '" << to_text(s) << "' on " << op.name << ", dense " << dense);
      CHECK(check(s, op, dense, refused) == "");
      if (!parallel_loop_is_race_free(s)) CHECK(check(s, op, dense, refused, RaceStrategy::Private) == "");
    }
    CHECK(narrow >= 25);
    CHECK(refused < narrow / 2);
  }

  // Beyond 16 bits: the blocked narrow layout (blocks of 256 rows by 65536 columns, the columns'
  // block-local offsets in 16 bits) on a matrix of 700 x 200000 (neither a multiple of its block)
  // with a dense and an empty column block, static and dynamic, SpMV and SpMM; an N level over the
  // whole 200000 columns is refused.
  GeneratorSpec g;
  g.kind = "uniform";
  g.rows = 700;
  g.cols = 200000;
  g.nnz = 30000;
  g.seed = 17;
  CooMatrix wide = generate(g);
  for (std::size_t e = 0; e < wide.row.size(); ++e)  // columns 65536.. 131071 left empty
    if (wide.col[e] >= 65536 && wide.col[e] < 131072) wide.col[e] -= 65536;
  for (index_t c = 131072; c < 131072 + 400; ++c) {  // one dense row segment in the third block
    wide.row.push_back(5);
    wide.col.push_back(c);
    wide.val.push_back(0.5f);
  }
  waco::kernels::canonicalize(wide);
  const Operands op{"uniform 700x200000", wide, {}};
  int refused = 0;
  for (const char* text :
       {"split=i:256,k:65536 order=i1,k1,i0,k0 format=UCUN parallel=i1 threads=2 chunk=static",
        "split=i:256,k:65536 order=i1,k1,i0,k0 format=UCUN parallel=i1 threads=2 chunk=1",
        "split=k:65536 order=i,k1,k0 format=UCN parallel=i threads=2 chunk=static",
        "split=i:65536,k:65536 order=i1,k1,i0,k0 format=UCNN parallel=i1 threads=2 chunk=static",
        "split=i:65536,k:65536 order=i1,k1,i0,k0 format=UCNN parallel=i1 threads=2 chunk=1"}) {
    const SuperSchedule s = parse_schedule(KernelKind::SpMV, text);
    INFO(text);
    CHECK(check(s, op, 1, refused) == "");
  }
  // The tiled layout (heuristics' tiled narrow twin) over several row tiles, the last one short
  // (150000 rows: 65536 + 65536 + 18928), rows 70000..99999 empty and one dense row.
  g.rows = 150000;
  g.cols = 140000;
  g.nnz = 40000;
  CooMatrix tall = generate(g);
  for (std::size_t e = 0; e < tall.row.size(); ++e)
    if (tall.row[e] >= 70000 && tall.row[e] < 100000) tall.row[e] -= 30000;
  for (index_t c = 0; c < 140000; c += 7) {
    tall.row.push_back(149999);
    tall.col.push_back(c);
    tall.val.push_back(0.25f);
  }
  waco::kernels::canonicalize(tall);
  const Operands tiles{"uniform 150000x140000", tall, {}};
  for (const char* text : {"split=i:65536,k:65536 order=i1,k1,i0,k0 format=UCNN parallel=i1 threads=2 chunk=static",
                           "split=i:65536,k:65536 order=i1,k1,i0,k0 format=UCNN parallel=i1 threads=2 chunk=1"}) {
    INFO(text);
    CHECK(check(parse_schedule(KernelKind::SpMV, text), tiles, 1, refused) == "");
  }
  CHECK(check(parse_schedule(KernelKind::SpMM,
                             "split=i:65536,k:65536 order=i1,k1,i0,k0,j format=UCNN parallel=i1 threads=2 chunk=1"),
              tiles, 5, refused) == "");
  const SuperSchedule spmm = parse_schedule(
      KernelKind::SpMM, "split=i:256,k:65536 order=i1,k1,i0,k0,j format=UCUN parallel=i1 threads=2 chunk=static");
  CHECK(check(spmm, op, 5, refused) == "");
  CHECK(refused == 0);
  CHECK(check(parse_schedule(KernelKind::SpMV, "order=i,k format=UN parallel=i threads=2"), op, 1, refused) == "");
  CHECK(refused == 1);

  // The 16-bit boundary of a whole variable: 65536 columns run (coordinate 65535 included), 65537
  // are refused.
  for (const index_t cols : {index_t{65536}, index_t{65537}}) {
    const Operands edge{std::to_string(cols) + " columns",
                        waco::test::from_triplets(3, cols, {0, 0, 1, 2}, {0, 65535, 3, cols - 1}, {1, 2, 3, 4}),
                        {}};
    refused = 0;
    INFO(edge.name);
    CHECK(check(parse_schedule(KernelKind::SpMV, "order=i,k format=UN parallel=i threads=2 chunk=static"),
                edge, 1, refused) == "");
    CHECK(refused == (cols == 65536 ? 0 : 1));
  }
}
