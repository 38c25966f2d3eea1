// Unit "choice": the model's choice without measuring (tuning::nominate, the choice step of tune and
// of adaptive plans) nominates the same schedules in the same order however it is computed
// (issue 35 "cheap choice"). Two pins:
//   - against the plain pipeline written out here (the space and its passes from scratch, a model
//     loaded from its file, the operand's features computed by the model, every admissible
//     schedule scored in one batch, stable order), on generated operands of every kernel, twice
//     in a row (the second call finds what the first one left in the process);
//   - against lists recorded by the unoptimized nominate (tests/goldens/choice/nominees.txt: per
//     case the best 20, the admissible count and a hash of the whole ordered list), on the vector
//     ISA they were recorded on (the scores are Eigen products whose rounding follows it; see
//     tests/tune_goldens.sh). WACO_RECORD_CHOICE=1 writes the file instead (a deliberate change of
//     what the model nominates only, said in the commit).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_paths.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/pass.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/kernels/io.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/shipped.hpp"
#include "waco/tune/searcher.hpp"
#include "waco/tune/tune.hpp"

namespace {

using namespace waco;
using kernels::KernelKind;

struct Case {
  std::string name;
  KernelKind kind;
  const kernels::CooMatrix* matrix = nullptr;
  const kernels::CooTensor* tensor = nullptr;
  int dense = 0;
  int threads = 2;
};

/// The request of a case: the tile model's cache pinned (as tests/tune_goldens.sh does), so that
/// the admissible set does not follow this machine's caches.
tuning::TuneRequest request_of(const Case& c) {
  tuning::TuneRequest r;
  r.kind = c.kind;
  r.threads = c.threads;
  r.dense = c.dense;
  r.params.cache_bytes = 1 << 20;
  r.per_structure = 0;  // the model's own order (the cap: its own test below)
  return r;
}

std::vector<codegen::SuperSchedule> nominate(const Case& c, std::size_t count) {
  tuning::TuneObserver quiet;
  tuning::TuneOperand op;
  op.matrix = c.matrix;
  op.tensor = c.tensor;
  return tuning::nominate(op, request_of(c), count, quiet).schedules;
}

/// The plain pipeline: nothing shared with an earlier call, nothing skipped.
std::vector<codegen::SuperSchedule> plain_nominees(const Case& c, std::size_t count) {
  const tuning::TuneRequest r = request_of(c);
  heuristics::SpaceOptions so;
  so.cores = c.threads;
  so.max_padding = r.generated.storage.max_padding;
  const int dense = c.dense > 0 ? c.dense : kernels::default_dense_size(c.kind);
  heuristics::Space space = heuristics::Space::for_operand(
      c.kind, c.matrix, c.tensor, c.kind == KernelKind::SpMV ? 1 : dense, so);
  heuristics::run_pipeline(space, heuristics::parse_pipeline(r.passes), r.params);
  const learned::CostModel model =
      learned::CostModel::load(learned::model_path_or_default("", c.kind), c.kind);
  const learned::ModelInput in = c.matrix ? model.prepare(*c.matrix) : model.prepare(*c.tensor);
  const std::vector<codegen::SuperSchedule> all = space.materialize();
  const std::vector<double> scores =
      model.scores(in, learned::as_model_sees(all, space.cores(), nullptr));
  std::vector<std::size_t> idx(all.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  std::vector<codegen::SuperSchedule> out;
  for (std::size_t q = 0; q < std::min(count, idx.size()); ++q) out.push_back(all[idx[q]]);
  return out;
}

std::vector<std::string> texts(const std::vector<codegen::SuperSchedule>& list) {
  std::vector<std::string> t;
  for (const auto& s : list) t.push_back(codegen::to_text(s));
  return t;
}

/// FNV-1a over the texts of an ordered list.
std::uint64_t list_hash(const std::vector<std::string>& list) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const std::string& s : list)
    for (char ch : s + "\n") {
      h ^= static_cast<unsigned char>(ch);
      h *= 1099511628211ULL;
    }
  return h;
}

/// The operands of the pins: generated matrices of several shapes, the bundled example, two
/// tensors.
struct Operands {
  std::vector<std::pair<std::string, kernels::CooMatrix>> matrices;
  std::vector<std::pair<std::string, kernels::CooTensor>> tensors;
};

const Operands& operands() {
  static const Operands o = [] {
    Operands r;
    auto gen = [&](const std::string& name, kernels::GeneratorSpec s) {
      r.matrices.emplace_back(name, kernels::generate(s));
    };
    kernels::GeneratorSpec s;
    s.kind = "uniform", s.rows = 1500, s.nnz = 15000, s.seed = 3;
    gen("uniform", s);
    s = {}, s.kind = "uniform", s.rows = 800, s.cols = 3000, s.nnz = 12000, s.seed = 4;
    gen("uniform-wide", s);
    s = {}, s.kind = "banded", s.rows = 2000, s.bandwidth = 8, s.fill = 0.7, s.seed = 5;
    gen("banded", s);
    s = {}, s.kind = "blocks", s.rows = 1200, s.block = 4, s.blocks = 300, s.seed = 6;
    gen("blocks", s);
    s = {}, s.kind = "rmat", s.scale = 11, s.edge_factor = 8, s.seed = 7;
    gen("rmat", s);
    s = {}, s.kind = "powerlaw", s.rows = 3000, s.seed = 8;
    gen("powerlaw", s);
    s = {}, s.kind = "stencil2d", s.nx = 40, s.ny = 40;
    gen("stencil2d", s);
    r.matrices.emplace_back(
        "bcsstk13", kernels::read_matrix_market(test::examples_dir() + "/bcsstk13.mtx.gz").matrix);
    r.tensors.emplace_back("tensor-60x50x40", kernels::generate_tensor({60, 50, 40}, 6000, 9));
    r.tensors.emplace_back("tensor-200x30x20", kernels::generate_tensor({200, 30, 20}, 5000, 10));
    return r;
  }();
  return o;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& [name, m] : operands().matrices) {
    out.push_back({name + " spmv", KernelKind::SpMV, &m, nullptr, 0, 2});
    out.push_back({name + " spmv threads 1", KernelKind::SpMV, &m, nullptr, 0, 1});
    out.push_back({name + " spmm 64", KernelKind::SpMM, &m, nullptr, 64, 2});
    out.push_back({name + " sddmm 64", KernelKind::SDDMM, &m, nullptr, 64, 2});
  }
  for (const auto& [name, t] : operands().tensors)
    out.push_back({name + " mttkrp 16", KernelKind::MTTKRP, nullptr, &t, 16, 2});
  return out;
}

std::string this_isa() {
  std::ifstream in("/proc/cpuinfo");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto has = [&](const std::string& flag) {
    std::istringstream words(text);
    std::string w;
    while (words >> w)
      if (w == flag) return true;
    return false;
  };
  if (has("avx512f")) return "avx512";
  if (has("avx2")) return "avx2";
  return "other";
}

constexpr std::size_t kTop = 20;
constexpr std::size_t kAll = static_cast<std::size_t>(-1);

/// One case's golden block: "case NAME", "admissible N", "hash H", then the best kTop.
std::string golden_block(const Case& c) {
  const std::vector<std::string> all = texts(nominate(c, kAll));
  std::ostringstream b;
  b << "case " << c.name << "\nadmissible " << all.size() << "\nhash " << list_hash(all) << "\n";
  for (std::size_t q = 0; q < std::min(kTop, all.size()); ++q) b << all[q] << "\n";
  return b.str();
}

std::string golden_path() { return std::string(WACO_SOURCE_DIR) + "/tests/goldens/choice/nominees.txt"; }

}  // namespace

TEST_CASE("tune: nominate equals the plain pipeline (space, passes, fresh model, full scoring), "
          "on every kernel, also on a second call") {
  for (const Case& c : cases()) {
    INFO(c.name);
    const std::vector<std::string> plain = texts(plain_nominees(c, kAll));
    REQUIRE(!plain.empty());
    const std::vector<std::string> first = texts(nominate(c, kAll));
    CHECK(first == plain);
    CHECK(texts(nominate(c, kAll)) == plain);  // what the first call left in the process
    CHECK(texts(nominate(c, kTop)) ==
          std::vector<std::string>(plain.begin(),
                                   plain.begin() + static_cast<std::ptrdiff_t>(std::min(kTop, plain.size()))));
  }
}

TEST_CASE("tune: per_structure caps the nominees of one loop structure, the model's order kept "
          "otherwise") {
  // A structure as TuneRequest::per_structure reads it: splits, order, parallel loop, threads.
  const auto key = [](const codegen::SuperSchedule& s) {
    std::string k;
    for (int v : s.split) k += std::to_string(v) + ",";
    for (const codegen::Loop& l : s.order) k += l.name() + ",";
    return k + "|" + s.parallel.name() + "|" + std::to_string(s.threads);
  };
  for (const Case& c : cases()) {
    INFO(c.name);
    const std::vector<codegen::SuperSchedule> all = nominate(c, kAll);
    for (const int per : {1, 2, 3}) {
      INFO("per_structure " << per);
      // Expected: the full order, at most `per` of a structure, then those passed over in order.
      std::vector<codegen::SuperSchedule> expected, passed;
      std::map<std::string, int> taken;
      for (const codegen::SuperSchedule& s : all) {
        if (expected.size() == kTop) break;
        if (taken[key(s)]++ < per) expected.push_back(s); else passed.push_back(s);
      }
      for (std::size_t q = 0; expected.size() < std::min(kTop, all.size()); ++q)
        expected.push_back(passed.at(q));
      tuning::TuneRequest r = request_of(c);
      r.per_structure = per;
      tuning::TuneObserver quiet;
      tuning::TuneOperand op;
      op.matrix = c.matrix;
      op.tensor = c.tensor;
      const tuning::Nomination n = tuning::nominate(op, r, kTop, quiet);
      CHECK(texts(n.schedules) == texts(expected));
      REQUIRE(!n.schedules.empty());
      CHECK(codegen::to_text(n.schedules.front()) == codegen::to_text(all.front()));
      std::map<std::string, int> count;
      for (const codegen::SuperSchedule& s : n.schedules) ++count[key(s)];
      CHECK(n.info.at("search_info").at("structures") == count.size());
      std::set<std::string> structures;
      for (const codegen::SuperSchedule& s : all) structures.insert(key(s));
      if (structures.size() * static_cast<std::size_t>(per) >= n.schedules.size())
        for (const auto& [k, m] : count) CHECK(m <= per);
    }
  }
}

TEST_CASE("tune: without a budget the model search measures its kernel's default: 20, MTTKRP 40") {
  for (const Case& c : cases()) {
    INFO(c.name);
    const std::vector<codegen::SuperSchedule> all = nominate(c, kAll);
    const std::size_t n = c.kind == KernelKind::MTTKRP ? 40 : 20;
    CHECK(tuning::default_model_budget(c.kind) == n);
    const std::vector<codegen::SuperSchedule> got = nominate(c, 0);
    CHECK(got.size() == std::min(n, all.size()));
    const std::vector<codegen::SuperSchedule> first(
        all.begin(), all.begin() + static_cast<std::ptrdiff_t>(got.size()));
    CHECK(texts(got) == texts(first));
  }
}

TEST_CASE("tune: nominate gives the lists the unoptimized nominate recorded "
          "(tests/goldens/choice/nominees.txt)") {
  std::string actual = "isa " + this_isa() + "\n";
  for (const Case& c : cases()) actual += golden_block(c);
  if (const char* rec = std::getenv("WACO_RECORD_CHOICE"); rec != nullptr && std::string(rec) == "1") {
    std::ofstream(golden_path()) << actual;
    WARN("recorded " << golden_path());
    return;
  }
  std::ifstream in(golden_path());
  REQUIRE(in.good());
  const std::string expected((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string recorded_isa = expected.substr(0, expected.find('\n'));
  if (recorded_isa != "isa " + this_isa()) {
    WARN("skipped: recorded on " << recorded_isa << ", this CPU is " << this_isa());
    return;
  }
  // Case by case, so that a difference names its case.
  std::istringstream e(expected), a(actual);
  std::string le, la;
  std::string current;
  while (std::getline(e, le)) {
    REQUIRE(std::getline(a, la));
    if (le.rfind("case ", 0) == 0) current = le;
    INFO(current);
    REQUIRE(la == le);
  }
  CHECK(!std::getline(a, la));
}

TEST_CASE("tune: a short list scored again (its schedule embeddings kept) scores as a fresh model does") {
  kernels::GeneratorSpec g;
  g.kind = "uniform";
  g.rows = 3000;
  g.nnz = 30000;
  g.seed = 7;
  const kernels::CooMatrix a = kernels::generate(g);
  const std::string path = learned::default_model_path(KernelKind::SpMV);
  const auto shared = learned::CostModel::load_shared(path, KernelKind::SpMV);
  const learned::ModelInput in = shared->prepare(a);
  std::vector<codegen::SuperSchedule> part, list;
  for (const char* text : {"csr", "order=i,k format=UC parallel=i threads=2 chunk=static",
                           "order=i,k format=UC parallel=i threads=2 chunk=4",
                           "split=i:128 order=i1,i0,k format=UUC parallel=i1 threads=2 chunk=2",
                           "split=k:256 order=k1,i,k0 format=UUC parallel=i threads=2 chunk=8"})
    part.push_back(codegen::schedule_from_string(KernelKind::SpMV, text));
  list = part;
  list.push_back(codegen::schedule_from_string(KernelKind::SpMV, "order=i,k format=CC parallel=i threads=1 chunk=1"));
  const std::vector<double> first = shared->scores(in, part);
  CHECK(shared->scores(in, list).size() == list.size());  // another list between
  CHECK(shared->scores(in, part) == first);
  const learned::CostModel fresh = learned::CostModel::load(path, KernelKind::SpMV);
  CHECK(fresh.scores(fresh.prepare(a), part) == first);
  // Another matrix, the same list: its own scores (the kept part is the schedules' alone).
  g.kind = "banded";
  g.seed = 8;
  const kernels::CooMatrix b = kernels::generate(g);
  CHECK(shared->scores(shared->prepare(b), part) == fresh.scores(fresh.prepare(b), part));
  CHECK(shared->scores(shared->prepare(b), part) != first);
}

TEST_CASE("tune: the model is loaded once per process and file, again when the file changes") {
  namespace fs = std::filesystem;
  const std::string dir = test::scratch_dir("choice-shared-model");
  const std::string path = dir + "/model";
  fs::copy_file(learned::default_model_path(KernelKind::SpMV), path);
  const auto a = learned::CostModel::load_shared(path, KernelKind::SpMV);
  const auto b = learned::CostModel::load_shared(path);
  CHECK(a == b);
  CHECK(a->config().kind == KernelKind::SpMV);
  // Another model written in its place (a new file, as `train` writes: a rename).
  fs::copy_file(learned::default_model_path(KernelKind::SpMM), dir + "/model.tmp");
  fs::rename(dir + "/model.tmp", path);
  const auto c = learned::CostModel::load_shared(path);
  CHECK(c != a);
  CHECK(c->config().kind == KernelKind::SpMM);
  CHECK_THROWS_AS(learned::CostModel::load_shared(path, KernelKind::SpMV), kernels::Error);
  CHECK(a->config().kind == KernelKind::SpMV);  // a holder of the old one keeps it
  fs::remove(path);
  CHECK_THROWS_AS(learned::CostModel::load_shared(path), kernels::Error);
}

TEST_CASE("tune: nominate among a short list ranks exactly the list's variants the admissible set "
          "holds (passes added without their statistics), on every kernel") {
  for (const Case& c : cases()) {
    INFO(c.name);
    const std::string list =
        std::string(WACO_SOURCE_DIR) + "/data/aot/" + std::string(kernels::kernel_name(c.kind)) + ".txt";
    const std::vector<codegen::SuperSchedule> among = codegen::read_schedule_list(c.kind, list);
    // The variants a listed schedule's kernel serves: this case's threads, every chunk of the
    // same kind (static or dynamic), and every split size the kernel takes at run time (one
    // source for all: the kernel compiled or shipped for the listed one runs each of them).
    std::set<std::string> variants;
    std::vector<std::vector<int>> splits;
    for (std::size_t v = 0; v < codegen::kernel_spec(c.kind).vars.size(); ++v)
      splits.push_back({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768});
    for (const codegen::SuperSchedule& s : among) {
      codegen::SuperSchedule own = s;  // the listed schedule on this case's threads
      own.threads = c.threads;
      const std::string source = codegen::emit_kernel_source(own);
      for (const codegen::SuperSchedule& v : tuning::kernel_variants(s, c.threads, splits)) {
        CHECK(v.threads == c.threads);
        CHECK((v.chunk == codegen::kStaticChunk) == (s.chunk == codegen::kStaticChunk));
        for (std::size_t x = 0; x < s.split.size(); ++x)
          CHECK((v.split[x] == s.split[x] ||
                 (s.split[x] > 1 && v.split[x] * 4 >= s.split[x] && v.split[x] <= 4 * s.split[x])));
        if (codegen::emit_kernel_source(v) != source) {
          FAIL_CHECK("another kernel: " << codegen::to_text(v) << " of " << codegen::to_text(s));
          continue;
        }
        variants.insert(codegen::to_text(codegen::canonicalize(v)));
      }
    }
    std::set<std::string> want;
    for (const std::string& t : texts(plain_nominees(c, kAll)))
      if (variants.count(t)) want.insert(t);
    tuning::TuneObserver quiet;
    tuning::TuneOperand op;
    op.matrix = c.matrix;
    op.tensor = c.tensor;
    tuning::TuneRequest every_size = request_of(c);
    every_size.shortlist_splits_min_nnz = 0;  // these matrices are small: vary the splits anyway
    const tuning::Nomination n = tuning::nominate(op, every_size, kAll, quiet, &among);
    const std::vector<std::string> got = texts(n.schedules);
    CHECK(std::set<std::string>(got.begin(), got.end()) == want);
    CHECK(got.size() == want.size());  // no repeats
    CHECK(n.info.at("space").at("admissible_count") == want.size());
    // The best few, as the whole set's order has them among the variants (ties aside: chunk
    // twins the model scores alike may come in either order).
    const tuning::Nomination top = tuning::nominate(op, every_size, 4, quiet, &among);
    CHECK(top.schedules.size() == std::min<std::size_t>(4, want.size()));
    // Below the threshold only the listed split sizes are ranked: a subset.
    const tuning::Nomination listed_sizes = tuning::nominate(op, request_of(c), kAll, quiet, &among);
    CHECK(listed_sizes.schedules.size() <= got.size());
    for (const std::string& t : texts(listed_sizes.schedules)) CHECK(want.count(t) == 1);
  }
  // A list with nothing the space admits (another kernel's schedules): no nominee, no error.
  const Case c = cases().front();
  const std::vector<codegen::SuperSchedule> none = {
      codegen::schedule_from_string(KernelKind::SpMM, "csr")};
  tuning::TuneObserver quiet;
  tuning::TuneOperand op;
  op.matrix = c.matrix;
  CHECK(tuning::nominate(op, request_of(c), 4, quiet, &none).schedules.empty());
}
