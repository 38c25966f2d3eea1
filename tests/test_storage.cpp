// Unit "storage": codegen::build_storage against a straightforward reference construction.
// The reference (reference_storage below) follows the definitions of storage.hpp literally: every
// nonzero's level coordinates by division, a U position = parent * dim + coordinate, a C position
// = the rank of its (parent position, coordinate) pair among the sorted distinct pairs; and the padding bound
// restated level by level. build_storage takes shortcuts (no sort when the canonical order is
// already the level order, segmented or combined-key counting sorts otherwise); every test here
// compares the whole Storage (levels' pos/crd/dim/size, vals, entry_position) or the refusal
// message with the reference, over enumerated and random schedules on edge-case matrices and
// tensors. A replaced global operator new records the largest allocation, to check that a refused
// format is refused before anything of its size is allocated.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <set>
#include <sstream>
#include <ctime>

#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/codegen/storage.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/timing.hpp"

using namespace waco::codegen;
using namespace waco::kernels;

// ---- the largest single allocation while tracking is on -----------------------------------------

namespace {
std::atomic<bool> g_track{false};
std::atomic<std::size_t> g_largest{0};

void* tracked_alloc(std::size_t n) {
  if (g_track.load(std::memory_order_relaxed)) {
    std::size_t seen = g_largest.load(std::memory_order_relaxed);
    while (n > seen && !g_largest.compare_exchange_weak(seen, n)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return tracked_alloc(n); }
void* operator new[](std::size_t n) { return tracked_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

// ---- the reference ----------------------------------------------------------------------------

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// The operand's coordinates per sparse variable (spec.sparse_vars order) and its values.
struct Operand {
  std::vector<std::vector<index_t>> x;
  std::vector<double> val;
};

Operand operand_of(const Problem& p) {
  if (needs_tensor(p.kind)) return {p.T->idx, p.T->val};
  return {{p.A->row, p.A->col}, p.A->val};
}

/// The storage by definition, or the refusal message the bound gives (same rule, same words).
StorageResult reference_storage(const SuperSchedule& s, const Problem& p, const StorageOptions& opts = {}) {
  const KernelSpec& spec = kernel_spec(p.kind);
  const std::vector<std::int64_t> ext = extents(spec, p);
  const Operand op = operand_of(p);
  const std::int64_t nnz = static_cast<std::int64_t>(op.val.size());
  const std::vector<Loop> loops = s.levels();
  const std::size_t L = loops.size();

  Storage st;
  st.nnz = nnz;
  st.levels.resize(L);
  std::vector<std::vector<std::int64_t>> c(L, std::vector<std::int64_t>(nnz));
  double dims_sum = 0;
  for (std::size_t l = 0; l < L; ++l) {
    const char v = loops[l].var;
    const std::size_t m = std::find(spec.sparse_vars.begin(), spec.sparse_vars.end(), v) - spec.sparse_vars.begin();
    const std::int64_t sx = s.split[spec.var_index(v)];
    const std::int64_t e_v = ext[spec.var_index(v)];
    Level& lv = st.levels[l];
    lv.format = s.formats[l];
    lv.loop = loops[l];
    lv.dim = loops[l].part == Loop::Part::Whole ? e_v : loops[l].part == Loop::Part::Outer ? ceil_div(e_v, sx) : sx;
    dims_sum += static_cast<double>(lv.dim);
    for (std::int64_t e = 0; e < nnz; ++e) {
      const std::int64_t xe = op.x[m][e];
      c[l][e] = loops[l].part == Loop::Part::Whole ? xe : loops[l].part == Loop::Part::Outer ? xe / sx : xe % sx;
    }
  }
  const double value_bound = opts.max_padding * static_cast<double>(std::max<std::int64_t>(nnz, 1));
  const double index_bound = value_bound + 2.0 * dims_sum + 2.0 * static_cast<double>(L);
  // An N level holds 16-bit coordinates: a level of more than 65536 coordinates is refused first.
  for (std::size_t l = 0; l < L; ++l)
    if (st.levels[l].format == LevelFormat::N && st.levels[l].dim > 65536) {
      std::ostringstream why;
      why << "format refused: level " << l << " (" << loops[l].name() << ", N) has " << st.levels[l].dim
          << " coordinates, more than 16-bit coordinates hold (65536): write the level C";
      return {std::nullopt, why.str(), {}};
    }

  std::vector<std::int64_t> position(nnz, 0);  // position of nonzero e at the current level
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
        return {std::nullopt, why.str(), {}};
      }
      for (std::int64_t e = 0; e < nnz; ++e) position[e] = position[e] * lv.dim + c[l][e];
      lv.size = parent_size * lv.dim;
    } else {
      index_words += static_cast<double>(parent_size) + 1;
      if (index_words > index_bound) {
        std::ostringstream why;
        why << "format refused: level " << l << " (" << lv.loop.name() << ", "
            << (lv.format == LevelFormat::N ? 'N' : 'C') << ") needs "
            << static_cast<long long>(parent_size + 1) << " positions for " << nnz
            << " nonzeros, over the padding bound of " << opts.max_padding << " x nnz";
        return {std::nullopt, why.str(), {}};
      }
      // The distinct (parent position, coordinate) pairs in order; a position is a pair's rank.
      std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
      for (std::int64_t e = 0; e < nnz; ++e) pairs.push_back({position[e], c[l][e]});
      std::sort(pairs.begin(), pairs.end());
      pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
      lv.pos.assign(static_cast<std::size_t>(parent_size) + 1, 0);
      for (const auto& pr : pairs) {
        lv.crd.push_back(static_cast<index_t>(pr.second));
        ++lv.pos[static_cast<std::size_t>(pr.first) + 1];
      }
      for (std::size_t q = 1; q < lv.pos.size(); ++q) lv.pos[q] += lv.pos[q - 1];
      for (std::int64_t e = 0; e < nnz; ++e)
        position[e] = std::lower_bound(pairs.begin(), pairs.end(), std::make_pair(position[e], c[l][e])) -
                      pairs.begin();
      lv.size = static_cast<std::int64_t>(pairs.size());
      index_words += static_cast<double>(lv.size);
      if (lv.format == LevelFormat::N) {  // the same coordinates in 16 bits
        lv.crd16.assign(lv.crd.begin(), lv.crd.end());
        lv.crd.clear();
      }
    }
    if (static_cast<double>(lv.size) > static_cast<double>(kMaxIndex))
      return {std::nullopt, "format refused: level " + std::to_string(l) +
                                " needs more positions than 32-bit indices hold", {}};
    parent_size = lv.size;
  }
  if (static_cast<double>(parent_size) > value_bound) {
    std::ostringstream why;
    why << "format refused: it would store " << parent_size << " values for " << nnz << " nonzeros ("
        << static_cast<double>(parent_size) / std::max<std::int64_t>(nnz, 1)
        << " x), over the padding bound of " << opts.max_padding << " x nnz";
    return {std::nullopt, why.str(), {}};
  }
  st.vals.assign(p.dtype(), static_cast<std::size_t>(parent_size));
  st.entry_position.resize(nnz);
  for (std::int64_t e = 0; e < nnz; ++e) {
    st.vals.set(static_cast<std::size_t>(position[e]), op.val[e]);
    st.entry_position[e] = static_cast<index_t>(position[e]);
  }
  return {std::move(st), {}, {}};
}

/// "" when the two results agree, else the first difference.
std::string compare(const StorageResult& got, const StorageResult& want) {
  if (!want.storage) {
    if (got.storage) return "built, but the reference refuses: " + want.refused;
    if (got.refused != want.refused) return "refused '" + got.refused + "', expected '" + want.refused + "'";
    return "";
  }
  if (!got.storage) return "refused: " + got.refused;
  const Storage& a = *got.storage;
  const Storage& b = *want.storage;
  if (a.nnz != b.nnz) return "nnz differs";
  if (a.levels.size() != b.levels.size()) return "level count differs";
  for (std::size_t l = 0; l < a.levels.size(); ++l) {
    const Level& x = a.levels[l];
    const Level& y = b.levels[l];
    const std::string at = " at level " + std::to_string(l);
    if (x.format != y.format || x.loop != y.loop) return "format or loop differs" + at;
    if (x.dim != y.dim) return "dim differs" + at;
    if (x.size != y.size)
      return "size " + std::to_string(x.size) + " != " + std::to_string(y.size) + at;
    if (x.pos != y.pos) return "pos differs" + at;
    if (x.crd != y.crd) return "crd differs" + at;
    if (x.crd16 != y.crd16) return "crd16 differs" + at;
    // Sized exactly (counted first), never grown by push_back.
    if (x.crd.capacity() != x.crd.size()) return "crd not sized exactly" + at;
    if (x.crd16.capacity() != x.crd16.size()) return "crd16 not sized exactly" + at;
  }
  if (a.vals != b.vals) return "vals differ";
  if (a.entry_position != b.entry_position) return "entry_position differs";
  return "";
}

// ---- schedules and operands -------------------------------------------------------------------

struct Rng {
  std::uint64_t state;
  std::uint64_t next() { return state = splitmix64(state); }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

/// The loops of kernel k for the given splits, in spec.vars order (x1 before x0).
std::vector<Loop> loops_of(const KernelSpec& spec, const std::vector<int>& split) {
  std::vector<Loop> loops;
  for (std::size_t v = 0; v < spec.vars.size(); ++v) {
    if (split[v] == 1) {
      loops.push_back({spec.vars[v], Loop::Part::Whole});
    } else {
      loops.push_back({spec.vars[v], Loop::Part::Outer});
      loops.push_back({spec.vars[v], Loop::Part::Inner});
    }
  }
  return loops;
}

/// Puts every x0 after its x1 (a stable fix-up of any permutation).
void outer_before_inner(std::vector<Loop>& order) {
  for (std::size_t a = 0; a < order.size(); ++a)
    for (std::size_t b = a + 1; b < order.size(); ++b)
      if (order[a].var == order[b].var && order[a].part == Loop::Part::Inner) std::swap(order[a], order[b]);
}

SuperSchedule make_schedule(KernelKind k, std::vector<int> split, std::vector<Loop> order,
                            std::vector<LevelFormat> formats) {
  SuperSchedule s;
  s.kind = k;
  s.split = std::move(split);
  s.order = std::move(order);
  s.formats = std::move(formats);
  s.parallel = s.order.front();
  s.threads = 1;
  s.chunk = 1;
  return s;
}

/// A random valid schedule for kernel k whose split sizes are at most 2^max_log2; with `narrow`,
/// each C level is N with probability 1/2 (those draws made only then).
SuperSchedule random_schedule(KernelKind k, Rng& rng, int max_log2, bool narrow = false) {
  const KernelSpec& spec = kernel_spec(k);
  std::vector<int> split;
  for (std::size_t v = 0; v < spec.vars.size(); ++v) split.push_back(1 << rng.below(max_log2 + 1));
  std::vector<Loop> order = loops_of(spec, split);
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(static_cast<int>(i))]);
  outer_before_inner(order);
  SuperSchedule s = make_schedule(k, split, order, {});
  for (std::size_t l = 0; l < s.levels().size(); ++l)
    s.formats.push_back(rng.below(2) ? LevelFormat::C : LevelFormat::U);
  if (narrow)
    for (LevelFormat& f : s.formats)
      if (f == LevelFormat::C && rng.below(2)) f = LevelFormat::N;
  return s;
}

/// Every valid SpMV schedule whose split sizes are in `sizes`: all orders, all formats.
std::vector<SuperSchedule> all_spmv_schedules(const std::vector<int>& sizes) {
  const KernelSpec& spec = kernel_spec(KernelKind::SpMV);
  std::vector<SuperSchedule> out;
  for (int si : sizes)
    for (int sk : sizes) {
      std::vector<Loop> order = loops_of(spec, {si, sk});
      auto key = [](const Loop& a) { return a.var * 4 + static_cast<int>(a.part); };
      std::sort(order.begin(), order.end(), [&](const Loop& a, const Loop& b) { return key(a) < key(b); });
      do {
        bool valid = true;
        for (std::size_t a = 0; a < order.size(); ++a)
          for (std::size_t b = a + 1; b < order.size(); ++b)
            if (order[a].var == order[b].var && order[a].part == Loop::Part::Inner) valid = false;
        if (!valid) continue;
        const std::size_t L = order.size();
        for (unsigned f = 0; f < (1u << L); ++f) {
          std::vector<LevelFormat> formats;
          for (std::size_t l = 0; l < L; ++l) formats.push_back(f >> l & 1 ? LevelFormat::C : LevelFormat::U);
          out.push_back(make_schedule(KernelKind::SpMV, {si, sk}, order, formats));
        }
      } while (std::next_permutation(order.begin(), order.end(),
                                     [&](const Loop& a, const Loop& b) { return key(a) < key(b); }));
    }
  return out;
}

/// The edge cases plus larger generated matrices (long segments, many columns, power-law rows).
std::vector<waco::test::NamedMatrix> test_matrices() {
  std::vector<waco::test::NamedMatrix> out = waco::test::edge_case_matrices();
  GeneratorSpec g;
  g.kind = "powerlaw";
  g.rows = 3000;
  g.seed = 7;
  out.push_back({"powerlaw 3000", generate(g)});
  g = {};
  g.kind = "uniform";
  g.rows = 700;
  g.cols = 5000;
  g.nnz = 20000;
  g.seed = 8;
  out.push_back({"uniform 700x5000", generate(g)});
  return out;
}

Problem problem_for(KernelKind k, const CooMatrix* A, const CooTensor* T, DenseOperands& d) {
  d = make_dense_operands(k, A, T, 3, 1);
  return make_problem(k, A, T, d);
}

/// An SpMV problem without its dense x: build_storage reads only the sparse operand and its
/// extents, and x would not fit in memory for the huge dimensions used below.
Problem sparse_only(const CooMatrix& A) {
  Problem p;
  p.kind = KernelKind::SpMV;
  p.A = &A;
  return p;
}
}  // namespace

// ---- tests ------------------------------------------------------------------------------------

TEST_CASE("storage: every SpMV schedule equals the reference on every edge case") {
  const std::vector<SuperSchedule> schedules = all_spmv_schedules({1, 2, 8});
  REQUIRE(schedules.size() == 488);
  int built = 0, refused = 0;
  for (const auto& [name, A] : waco::test::edge_case_matrices()) {
    DenseOperands d;
    const Problem p = problem_for(KernelKind::SpMV, &A, nullptr, d);
    for (const SuperSchedule& s : schedules) {
      INFO(name << ": " << to_text(canonicalize(s)));
      const StorageResult got = build_storage(s, p);
      CHECK(compare(got, reference_storage(s, p)) == "");
      ++(got.storage ? built : refused);
    }
  }
  INFO(built << " built, " << refused << " refused");
  CHECK(built > refused);
}

TEST_CASE("storage: random schedules of every kernel equal the reference") {
  const char* env = std::getenv("WACO_STORAGE_CASES");
  const int cases = env ? std::atoi(env) : 300;
  std::vector<waco::test::NamedMatrix> matrices = test_matrices();
  std::vector<waco::test::NamedTensor> tensors = waco::test::edge_case_tensors();
  tensors.push_back({"uniform 40x300x50", generate_tensor({40, 300, 50}, 20000, 9)});
  tensors.push_back({"wide 3x5x70000", generate_tensor({3, 5, 70000}, 3000, 10)});
  for (KernelKind k : kAllKernels) {
    Rng rng{0x5708A6E0ull + static_cast<std::uint64_t>(k)};
    std::set<std::string> seen;
    int n = 0, built = 0;
    while (n < cases) {
      SuperSchedule s = canonicalize(random_schedule(k, rng, 4));
      if (!seen.insert(to_text(s)).second) continue;
      ++n;
      const CooMatrix* A = needs_tensor(k) ? nullptr : &matrices[n % matrices.size()].matrix;
      const CooTensor* T = needs_tensor(k) ? &tensors[n % tensors.size()].tensor : nullptr;
      DenseOperands d;
      const Problem p = problem_for(k, A, T, d);
      INFO(kernel_name(k) << " '" << to_text(s) << "' on "
                          << (A ? matrices[n % matrices.size()].name : tensors[n % tensors.size()].name));
      const StorageResult got = build_storage(s, p);
      CHECK(compare(got, reference_storage(s, p)) == "");
      built += got.storage.has_value();
    }
    INFO(kernel_name(k) << ": " << built << " of " << cases << " built");
    CHECK(built >= cases / 3);
  }
}

TEST_CASE("storage: level keys too wide for one counting pass (huge dimensions) equal the reference") {
  // 2^20 x 2^20 with 400 nonzeros: the product of several level dimensions exceeds 32 bits, so
  // build_storage must sort level by level; U levels over the big dimensions are refused.
  std::vector<index_t> r, c;
  std::vector<float> v;
  for (int e = 0; e < 400; ++e) {
    r.push_back(static_cast<index_t>(splitmix64(e) % (1u << 20)));
    c.push_back(static_cast<index_t>(splitmix64(e + 1000) % (1u << 20)));
    v.push_back(static_cast<float>(e + 1));
  }
  const CooMatrix A = waco::test::from_triplets(1 << 20, 1 << 20, r, c, v);
  const Problem p = sparse_only(A);
  int built = 0;
  for (const SuperSchedule& s : all_spmv_schedules({1, 4, 1024})) {
    INFO(to_text(canonicalize(s)));
    const StorageResult got = build_storage(s, p);
    CHECK(compare(got, reference_storage(s, p)) == "");
    built += got.storage.has_value();
  }
  CHECK(built > 50);
}

TEST_CASE("storage: level keys wider than 64 bits (huge 3-D tensor) equal the reference") {
  // kMaxIndex^3 with 300 nonzeros: e.g. levels l, i1, k before i0 must be compared level by level.
  // Sorted here: kernels::canonicalize counts over each dimension, which would take gigabytes.
  std::vector<std::array<index_t, 3>> entries;
  for (int e = 0; e < 300; ++e) {
    std::array<index_t, 3> x;
    for (int m = 0; m < 3; ++m)
      x[m] = static_cast<index_t>(splitmix64(e * 3 + m) % (e % 3 == 0 ? 4 : kMaxIndex));
    entries.push_back(x);
  }
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  CooTensor T;
  T.dims.assign(3, static_cast<index_t>(kMaxIndex));
  T.idx.assign(3, {});
  for (const auto& x : entries) {
    for (int m = 0; m < 3; ++m) T.idx[m].push_back(x[m]);
    T.val.push_back(static_cast<float>(T.val.size() + 1));
  }
  REQUIRE(is_canonical(T));
  DenseMatrix B;  // only its column count (J) is read: build_storage touches no dense data
  B.cols = 1;
  Problem p;
  p.kind = KernelKind::MTTKRP;
  p.T = &T;
  p.B = &B;
  p.C = &B;
  const auto loop = [](char v, Loop::Part part) { return Loop{v, part}; };
  const SuperSchedule wide = make_schedule(
      KernelKind::MTTKRP, {2, 1, 1, 1},
      {loop('l', Loop::Part::Whole), loop('i', Loop::Part::Outer), loop('k', Loop::Part::Whole),
       loop('i', Loop::Part::Inner), loop('j', Loop::Part::Whole)},
      {LevelFormat::C, LevelFormat::C, LevelFormat::C, LevelFormat::C});
  REQUIRE(validate(wide).empty());
  const StorageResult got = build_storage(wide, p);
  CHECK(got.storage);
  CHECK(compare(got, reference_storage(wide, p)) == "");
  Rng rng{0xB16D1A5ull};
  int built = 0;
  for (int n = 0; n < 200; ++n) {
    // U only on inner parts (at most 16 wide): a U level over a 2^31 dimension is within the
    // bound (index words allow 2 x the dimensions) and a C level under it would need gigabytes.
    SuperSchedule s = canonicalize(random_schedule(KernelKind::MTTKRP, rng, 4));
    const std::vector<Loop> levels = s.levels();
    for (std::size_t l = 0; l < levels.size(); ++l)
      if (levels[l].part != Loop::Part::Inner) s.formats[l] = LevelFormat::C;
    INFO(to_text(s));
    const StorageResult r = build_storage(s, p);
    CHECK(compare(r, reference_storage(s, p)) == "");
    built += r.storage.has_value();
  }
  CHECK(built > 100);
}

TEST_CASE("storage: shortcuts are the formats they name") {
  const CooMatrix A = waco::test::from_triplets(5, 6, {0, 0, 2, 4, 4}, {1, 5, 2, 0, 5}, {1, 2, 3, 4, 5});
  DenseOperands d;
  const Problem p = problem_for(KernelKind::SpMV, &A, nullptr, d);
  const StorageResult csr = build_storage(*schedule_shortcut(KernelKind::SpMV, "csr"), p);
  REQUIRE(csr.storage);
  const CsrMatrix want = to_csr(A);
  CHECK(csr.storage->levels[1].pos == want.rowptr);
  CHECK(csr.storage->levels[1].crd == want.colidx);
  CHECK(csr.storage->vals.to_doubles() == want.val);
  CHECK(csr.storage->entry_position == std::vector<index_t>{0, 1, 2, 3, 4});

  const StorageResult csc = build_storage(*schedule_shortcut(KernelKind::SpMV, "csc"), p);
  REQUIRE(csc.storage);
  CHECK(csc.storage->levels[1].pos == std::vector<index_t>{0, 1, 2, 3, 3, 3, 5});
  CHECK(csc.storage->levels[1].crd == std::vector<index_t>{4, 0, 2, 0, 4});
  CHECK(csc.storage->vals.to_doubles() == std::vector<double>{4, 1, 3, 2, 5});
  CHECK(csc.storage->entry_position == std::vector<index_t>{1, 3, 2, 0, 4});

  const StorageResult dcsr = build_storage(*schedule_shortcut(KernelKind::SpMV, "dcsr"), p);
  REQUIRE(dcsr.storage);
  CHECK(dcsr.storage->levels[0].crd == std::vector<index_t>{0, 2, 4});
  CHECK(dcsr.storage->levels[1].pos == std::vector<index_t>{0, 2, 3, 5});
}

TEST_CASE("storage: the csr layout's fill (no scan) equals the reference in both value types") {
  // build_storage fills row-major U C formats without its scan (fill_csr_pos), unsplit or in
  // blocks of rows (U U C: the rows padded to whole blocks): every csr-like schedule, every edge
  // case (empty rows, a dense row, one column, rows not a multiple of the block), f32 and f64.
  std::vector<SuperSchedule> csr_like{*schedule_shortcut(KernelKind::SpMV, "csr")};
  for (const char* text : {"order=i,k format=UC parallel=i threads=2 chunk=static",
                           "order=i,k format=UC parallel=i threads=1 chunk=8",
                           "split=i:128 order=i1,i0,k format=UUC parallel=i1 threads=2 chunk=4",
                           "split=i:2 order=i1,i0,k format=UUC parallel=i1 threads=2 chunk=static"})
    csr_like.push_back(parse_schedule(KernelKind::SpMV, text));
  for (const auto& [name, A] : waco::test::edge_case_matrices())
    for (const Dtype dtype : {Dtype::F32, Dtype::F64}) {
      const DenseOperands d = make_dense_operands(KernelKind::SpMV, &A, nullptr, 1, 1, dtype);
      const Problem p = make_problem(KernelKind::SpMV, &A, nullptr, d);
      for (const SuperSchedule& s : csr_like) {
        INFO(name << " " << dtype_name(dtype) << ": " << to_text(s));
        const StorageResult got = build_storage(s, p);
        REQUIRE(got.storage);
        CHECK(got.storage->vals.dtype() == dtype);
        CHECK(compare(got, reference_storage(s, p)) == "");
        // Without entry positions (kernels with a dense output): the same storage less them.
        StorageOptions lean_options;
        lean_options.entry_positions = false;
        StorageResult lean = build_storage(s, p, lean_options);
        REQUIRE(lean.storage);
        CHECK(lean.storage->entry_position.empty());
        lean.storage->entry_position = got.storage->entry_position;
        CHECK(compare(lean, got) == "");
      }
    }
}

TEST_CASE("storage: the csr layout's fill refuses an operand out of canonical order") {
  const SuperSchedule csr = *schedule_shortcut(KernelKind::SpMV, "csr");
  const auto build = [&](std::vector<index_t> row, std::vector<index_t> col) {
    CooMatrix A;  // made by hand: make_problem would check the order first
    A.rows = 3;
    A.cols = 3;
    A.row = std::move(row);
    A.col = std::move(col);
    A.val.assign(A.row.size(), 1.0);
    return build_storage(csr, sparse_only(A));
  };
  CHECK(build({0, 1, 1, 2}, {2, 0, 1, 1}).storage);
  CHECK_THROWS_AS(build({0, 2, 1}, {0, 0, 0}), InternalError);     // rows out of order
  CHECK_THROWS_AS(build({0, 1, 1}, {0, 2, 1}), InternalError);     // columns out of order
  CHECK_THROWS_AS(build({0, 1, 1}, {0, 1, 1}), InternalError);     // a repeated coordinate
  CHECK_THROWS_AS(build({0, 1, 3}, {0, 0, 0}), InternalError);     // a row beyond the matrix
}

TEST_CASE("storage: refused formats give the reference's reason before allocating their size") {
  // kMaxIndex x kMaxIndex with 3 nonzeros: any U level over a whole dimension would need gigabytes.
  const CooMatrix A = waco::test::from_triplets(static_cast<index_t>(kMaxIndex), static_cast<index_t>(kMaxIndex),
                                                {0, 5, 70000}, {3, 2, 1 << 30}, {1, 2, 3});
  const Problem p = sparse_only(A);
  struct Case {
    const char* schedule;
    const char* reason;
  };
  const Case cases[] = {
      {"order=i,k format=UU parallel=i",
       "format refused: level 1 (k, U) would hold 4611686014132420608 positions for 3 nonzeros, over the "
       "padding bound of 20 x nnz"},
      {"order=k,i format=CU parallel=k", "format refused: level 1 needs more positions than 32-bit indices hold"},
      {"split=i:16,k:16 order=i1,k1,i0,k0 format=CCUU parallel=i1",
       "format refused: it would store 512 values for 3 nonzeros (170.667 x), over the padding bound of 20 x "
       "nnz"},
      {"split=k:1024 order=k1,i,k0 format=CCU parallel=i",
       "format refused: it would store 3072 values for 3 nonzeros (1024 x), over the padding bound of 20 x "
       "nnz"},
  };
  for (const Case& c : cases) {
    const SuperSchedule s = parse_schedule(KernelKind::SpMV, c.schedule);
    INFO(c.schedule);
    g_largest = 0;
    g_track = true;
    const StorageResult r = build_storage(s, p);
    g_track = false;
    CHECK_FALSE(r.storage);
    CHECK(r.refused == c.reason);
    CHECK(r.refused == reference_storage(s, p).refused);
    // Scratch of O(nnz + 1024) words at most; anything of the format's size would be gigabytes.
    CHECK(g_largest.load() < 16384);
  }
  // A C level whose index words go over the bound (the U level above it stays just under it):
  // 30 x 3, split i:2, bound 1 x nnz = 3 values and 3 + 2 (3 + 15 + 2) + 6 = 49 index words;
  // k (C) takes 2 + 3 words, i1 (U) holds 45 positions, i0 (C) then needs 46 + 5 = 51 words.
  const CooMatrix B = waco::test::from_triplets(30, 3, {0, 10, 29}, {0, 1, 2}, {1, 2, 3});
  const Problem q = sparse_only(B);
  StorageOptions tight;
  tight.max_padding = 1;
  const SuperSchedule s = parse_schedule(KernelKind::SpMV, "split=i:2 order=k,i1,i0 format=CUC parallel=k");
  const StorageResult r = build_storage(s, q, tight);
  CHECK(r.refused ==
        "format refused: level 2 (i0, C) needs 46 positions for 3 nonzeros, over the padding bound of 1 x nnz");
  CHECK(r.refused == reference_storage(s, q, tight).refused);
}

TEST_CASE("storage: narrow (N) levels equal the reference on every edge case and every kernel") {
  // Every SpMV schedule over splits {1, 2, 8} with each of its C levels written N (the edge cases'
  // extents are all below 2^16, so every N level is built), and random schedules of every kernel
  // with N levels on the matrices and tensors of the random test (one of them 70000 wide: N on a
  // whole or outer level of that mode is refused, as the reference says).
  int built = 0;
  for (const auto& [name, A] : waco::test::edge_case_matrices()) {
    DenseOperands d;
    const Problem p = problem_for(KernelKind::SpMV, &A, nullptr, d);
    for (SuperSchedule s : all_spmv_schedules({1, 2, 8})) {
      for (LevelFormat& f : s.formats)
        if (f == LevelFormat::C) f = LevelFormat::N;
      INFO(name << ": " << to_text(canonicalize(s)));
      const StorageResult got = build_storage(s, p);
      CHECK(compare(got, reference_storage(s, p)) == "");
      built += got.storage.has_value();
    }
  }
  CHECK(built > 3000);
  std::vector<waco::test::NamedMatrix> matrices = test_matrices();
  std::vector<waco::test::NamedTensor> tensors = waco::test::edge_case_tensors();
  tensors.push_back({"wide 3x5x70000", generate_tensor({3, 5, 70000}, 3000, 10)});
  for (KernelKind k : kAllKernels) {
    Rng rng{0x4A77011ull + static_cast<std::uint64_t>(k)};
    int narrow = 0;
    for (int n = 0; n < 150; ++n) {
      const SuperSchedule s = canonicalize(random_schedule(k, rng, 4, true));
      narrow += std::count(s.formats.begin(), s.formats.end(), LevelFormat::N) > 0;
      const CooMatrix* A = needs_tensor(k) ? nullptr : &matrices[n % matrices.size()].matrix;
      const CooTensor* T = needs_tensor(k) ? &tensors[n % tensors.size()].tensor : nullptr;
      DenseOperands d;
      const Problem p = problem_for(k, A, T, d);
      INFO(kernel_name(k) << " '" << to_text(s) << "'");
      CHECK(compare(build_storage(s, p), reference_storage(s, p)) == "");
    }
    CHECK(narrow > 40);
  }
}

TEST_CASE("storage: an N level holds coordinates up to 65535 and refuses 65537 columns before allocating") {
  // The 16-bit boundary: 65536 columns (coordinates 0 .. 65535) are built, the last one intact;
  // 65537 are refused with the level and the numbers, before anything of the format is allocated;
  // split by 65536 the same columns are built (k0 < 65536, k1 small), the remainder block included.
  for (const index_t cols : {index_t{65536}, index_t{65537}}) {
    const CooMatrix A = waco::test::from_triplets(3, cols, {0, 0, 1, 2, 2}, {0, 65535, 7, 1, cols - 1},
                                                  {1, 2, 3, 4, 5});
    DenseOperands d;
    const Problem p = problem_for(KernelKind::SpMV, &A, nullptr, d);
    const SuperSchedule whole = parse_schedule(KernelKind::SpMV, "order=i,k format=UN parallel=i");
    g_largest = 0;
    g_track = true;
    const StorageResult r = build_storage(whole, p);
    g_track = false;
    CHECK(compare(r, reference_storage(whole, p)) == "");
    if (cols == 65536) {
      REQUIRE(r.storage);
      CHECK(r.storage->levels[1].crd16 == std::vector<std::uint16_t>{0, 65535, 7, 1, 65535});
      CHECK(r.storage->levels[1].crd.empty());
      CHECK(r.storage->bytes() == 5 * 4 + 4 * 4 + 5 * 2);  // values, pos, 16-bit coordinates
    } else {
      CHECK_FALSE(r.storage);
      CHECK(r.refused ==
            "format refused: level 1 (k, N) has 65537 coordinates, more than 16-bit coordinates hold "
            "(65536): write the level C");
      CHECK(g_largest.load() < 1024);
    }
    const SuperSchedule split = parse_schedule(KernelKind::SpMV, "split=k:65536 order=i,k1,k0 format=UCN");
    const StorageResult b = build_storage(split, p);
    REQUIRE(b.storage);
    CHECK(compare(b, reference_storage(split, p)) == "");
    // An outer part fits where the whole does not: k1 of k split by 2 has at most 32769.
    const SuperSchedule outer = parse_schedule(KernelKind::SpMV, "split=k:2 order=i,k1,k0 format=UNU");
    CHECK(compare(build_storage(outer, p), reference_storage(outer, p)) == "");
  }
}

// ---- benchmark (not run by default): conversion rates against kernels::to_csr ------------------
// WACO_STORAGE_BENCH_FILES: matrices under <shared data>/matrices; WACO_STORAGE_BENCH_ONLY: only
// the schedules whose "kernel schedule" contains this text; WACO_STORAGE_BENCH_REPS: repetitions
// (default 5). One thread; median (min .. max).

TEST_CASE("storage: conversion throughput against to_csr", "[.benchmark]") {
  const auto dir = waco::test::shared_data_dir();
  if (!dir) {
    WARN("shared data folder absent: skipped");
    return;
  }
  const char* env = std::getenv("WACO_STORAGE_BENCH_FILES");
  std::vector<std::string> files;
  std::stringstream list(env ? env : "loc-Gowalla.mtx.gz copter2.mtx.gz delaunay_n16.mtx.gz");
  for (std::string f; list >> f;) files.push_back(*dir + "/matrices/" + f);
  const std::vector<std::pair<std::string, std::string>> schedules = {
      {"spmv", "csr"}, {"spmv", "dcsr"}, {"spmv", "csc"}, {"spmv", "bcsr4x4"},
      {"spmm", "split=i:32 order=i1,i0,k,j format=UUC parallel=i1"}};
  const char* reps_env = std::getenv("WACO_STORAGE_BENCH_REPS");
  const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 5;
  const char* only = std::getenv("WACO_STORAGE_BENCH_ONLY");  // a substring of "kernel schedule"
  // Rates in M nonzeros/s: median (min .. max) over the repetitions.
  // Wall time, and this thread's CPU time (the machine may be shared: time slices lost to other
  // processes do not count there).
  const auto cpu_seconds = waco::kernels::thread_cpu_seconds;
  auto report = [&](const std::string& file, const std::string& what, double nnz, std::vector<double> t,
                    std::vector<double> cpu) {
    std::sort(t.begin(), t.end());
    std::sort(cpu.begin(), cpu.end());
    std::printf("%-20s %-52s %7.1f (%.1f .. %.1f) M nnz/s, on CPU time %.1f\n",
                file.substr(file.rfind('/') + 1).c_str(), what.c_str(), nnz / t[t.size() / 2] * 1e-6,
                nnz / t.back() * 1e-6, nnz / t.front() * 1e-6, nnz / cpu[cpu.size() / 2] * 1e-6);
  };
  for (const std::string& file : files) {
    const LoadedMatrix m = read_matrix_market(file);
    const CooMatrix& A = m.matrix;
    const double nnz = static_cast<double>(A.nnz());
    std::vector<double> t, cpu;
    for (int rep = 0; rep < reps; ++rep) {
      const double c0 = cpu_seconds();
      const double t0 = now_seconds();
      const CsrMatrix csr = to_csr(A);
      t.push_back(now_seconds() - t0);
      cpu.push_back(cpu_seconds() - c0);
      CHECK(csr.nnz() == A.nnz());
    }
    report(file, "kernels::to_csr", nnz, t, cpu);
    for (const auto& [kernel, text] : schedules) {
      if (only && (kernel + " " + text).find(only) == std::string::npos) continue;
      const KernelKind k = *parse_kernel(kernel);
      DenseOperands d = make_dense_operands(k, &A, nullptr, 4, 1);
      const Problem p = make_problem(k, &A, nullptr, d);
      const SuperSchedule s = schedule_from_string(k, text);
      t.clear();
      cpu.clear();
      for (int rep = 0; rep < reps; ++rep) {
        const double c0 = cpu_seconds();
        const StorageResult r = build_storage(s, p);
        cpu.push_back(cpu_seconds() - c0);
        REQUIRE(r.storage);
        t.push_back(r.storage->build_seconds);
      }
      report(file, kernel + " " + text, nnz, t, cpu);
    }
  }
}
