// Unit "measure": isolated measurement of candidates (heuristics/measure.hpp). A verified and
// timed schedule and baseline; refusals, compile errors, wrong results, crashes, hangs and
// exceptions in the measuring child come back as statuses with reasons and the caller survives;
// OpenMP works in the measuring children after the caller ran OpenMP (a Measurer made after it:
// tests/test_measure_worker.cpp). Also `waco-hybrid tune` end to end on the bundled example.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/codegen/storage.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/implementation.hpp"
#include "waco/kernels/serial_bound.hpp"
#include "waco/kernels/timing.hpp"

using namespace waco;
using namespace waco::heuristics;
namespace fs = std::filesystem;

namespace {

/// Everything a Measurer needs, kept alive together.
struct Fixture {
  Fixture() = default;
  explicit Fixture(int rows) : a(test::band_matrix(rows, 2)) {}
  kernels::CooMatrix a = test::band_matrix(600, 2);
  kernels::DenseOperands ops = kernels::make_dense_operands(kernels::KernelKind::SpMV, &a, nullptr, 1, 7);
  kernels::Problem p = kernels::make_problem(kernels::KernelKind::SpMV, &a, nullptr, ops);
  kernels::Reference ref = kernels::compute_reference(p);
};

MeasureOptions quick_options(const std::string& cache) {
  MeasureOptions o;
  o.warmup = 1;
  o.repeats = 3;
  o.threads = 2;
  o.run_timeout_s = 20.0;
  o.generated.compiler.cache_dir = cache;
  return o;
}

/// The build tree's kernel cache, shared by the test processes and never wiped: ctest runs test
/// cases in parallel processes, and a scratch directory (removed when created) taken here once
/// vanished under another process's compile ("cannot install compiled kernel"). The compile
/// cache itself is safe for concurrent processes (atomic rename).
const std::string& cache_dir() {
  static const std::string dir = [] {
    const std::string d = std::string(WACO_BINARY_DIR) + "/test-kernel-cache";
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

Candidate schedule(const std::string& text) {
  return Candidate::generated(codegen::schedule_from_string(kernels::KernelKind::SpMV, text));
}

/// Runs body in a forked child (so that OpenMP use there cannot affect this test process) and
/// returns its exit code, or -signal when it was killed. body returns the child's exit code.
template <class Body>
int in_child(Body body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 98;
    }
    _exit(code);
  }
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

}  // namespace

TEST_CASE("measure: status names round-trip") {
  for (MeasureStatus s : kAllStatuses) {
    const auto back = parse_status(status_name(s));
    REQUIRE(back.has_value());
    CHECK(*back == s);
  }
  CHECK_FALSE(parse_status("fine").has_value());
  CHECK(status_name(MeasureStatus::CompileError) == "compile-error");
  CHECK(status_name(MeasureStatus::WrongResult) == "wrong-result");
}

TEST_CASE("measure: a schedule and a baseline are verified and timed in a child") {
  Fixture f;
  Measurer m(f.p, f.ref, quick_options(cache_dir()));
  CHECK(m.worker_pid() > 0);
  CHECK(m.worker_pid() != getpid());
  CHECK(m.run_threads() == 2);

  const Measurement g = m.measure(schedule("csr"));
  INFO(g.reason);
  REQUIRE(g.status == MeasureStatus::Ok);
  CHECK(g.reason.empty());
  CHECK(g.verified);
  CHECK(g.max_rel_error >= 0.0);
  CHECK(g.max_rel_error <= kernels::kDefaultTolerance);
  CHECK(g.seconds.size() == 3);
  CHECK(g.repeats == 3);
  CHECK(g.warmup == 1);
  CHECK(g.min_s > 0.0);
  CHECK(g.min_s <= g.median_s);
  CHECK(g.median_s <= g.max_s);
  // csr says threads=0: the run's count, or one when its serial loop is the faster on this
  // matrix (kernels::csr_spmv_serial_for, timed in the child: either, under load)
  CHECK((g.threads == 1 || g.threads == 2));
  CHECK(g.stored_values == f.a.nnz());
  CHECK(fs::exists(g.kernel_source));
  CHECK(g.wall_s >= g.median_s * 3);

  // A schedule that fixes its thread count runs on it.
  const Measurement one = m.measure(schedule("order=i,k format=UC parallel=i threads=1 chunk=4"));
  REQUIRE(one.status == MeasureStatus::Ok);
  CHECK(one.threads == 1);

  const Measurement b = m.measure(Candidate::baseline("csr"));
  REQUIRE(b.status == MeasureStatus::Ok);
  CHECK(b.verified);
  CHECK(b.kernel_source.empty());
  CHECK(b.stored_values == -1);

  // JSON round trip of a result.
  const Measurement back = Measurement::from_json(g.to_json());
  CHECK(back.to_json() == g.to_json());
}

TEST_CASE("measure: compare times candidates side by side and keeps their failures apart") {
  Fixture f;
  MeasureOptions o = quick_options(cache_dir());
  o.generated.storage.max_padding = 1.5;
  Measurer m(f.p, f.ref, o);
  const std::vector<Candidate> cs = {
      schedule("csr"), Candidate::baseline("csr"), schedule("bcsr8x8"),
      schedule("order=i,k format=UC parallel=i threads=1 chunk=4"),
      Candidate::baseline("no-such-impl")};
  const std::vector<Measurement> ms = m.compare(cs, 5);
  REQUIRE(ms.size() == cs.size());
  for (std::size_t i : {0, 1, 3}) {
    INFO(cs[i].label() << ": " << ms[i].reason);
    REQUIRE(ms[i].status == MeasureStatus::Ok);
    CHECK(ms[i].verified);
    CHECK(ms[i].repeats == 5);
    CHECK(ms[i].seconds.size() == 5);
    CHECK(ms[i].min_s <= ms[i].median_s);
    CHECK(ms[i].median_s <= ms[i].max_s);
  }
  CHECK((ms[0].threads == 1 || ms[0].threads == 2));  // decided on the matrix (above)
  CHECK(ms[3].threads == 1);
  CHECK(fs::exists(ms[0].kernel_source));
  CHECK(ms[2].status == MeasureStatus::Refused);  // padding, refused by the worker
  CHECK(ms[4].status == MeasureStatus::Refused);  // unknown baseline, refused by the child
  CHECK(ms[4].reason.find("no-such-impl") != std::string::npos);
  CHECK(m.compare({}, 3).empty());

  // A wrong result fails that candidate only.
  kernels::Reference wrong = f.ref;
  wrong.value.set(17, wrong.value[17] + 1.0);
  Measurer mw(f.p, wrong, quick_options(cache_dir()));
  const std::vector<Measurement> w = mw.compare({schedule("csr"), Candidate::baseline("csr")}, 3);
  REQUIRE(w.size() == 2);
  CHECK(w[0].status == MeasureStatus::WrongResult);
  CHECK(w[1].status == MeasureStatus::WrongResult);

  // A crash or a hang while a candidate is prepared or first run (a kernel that segfaults or
  // spins) is that candidate's alone: the child that crashed is replaced and the others are
  // measured (before, every candidate got the crash). The hang is ended after a measure()'s
  // limits, prepare + run.
  MeasureOptions hooked = quick_options(cache_dir());
  hooked.run_timeout_s = 1.5;
  hooked.prepare_timeout_s = 10.0;
  hooked.child_hook = [](const Candidate& c) {
    if (c.schedule && c.schedule->chunk == 2) raise(SIGSEGV);
    if (c.schedule && c.schedule->chunk == 4) std::this_thread::sleep_for(std::chrono::seconds(120));
  };
  Measurer mc(f.p, f.ref, hooked);
  const double t0 = kernels::now_seconds();
  const std::vector<Measurement> crashed = mc.compare(
      {schedule("csr"), schedule("order=i,k format=UC parallel=i chunk=2"), Candidate::baseline("csr"),
       schedule("order=i,k format=UC parallel=i chunk=4"), schedule("order=i,k format=UC parallel=i chunk=8")},
      3);
  const double waited = kernels::now_seconds() - t0;
  REQUIRE(crashed.size() == 5);
  INFO(crashed[1].reason << " / " << crashed[3].reason);
  CHECK(crashed[1].status == MeasureStatus::Crashed);
  CHECK(crashed[1].reason.find("signal 11") != std::string::npos);
  CHECK(crashed[1].reason.find("first running it") != std::string::npos);
  CHECK(crashed[3].status == MeasureStatus::Timeout);
  CHECK(crashed[3].reason.find("11.5 s") != std::string::npos);
  CHECK(waited < 40.0);  // not the whole compare's prepare limit (5 x 10 s) after the hang
  for (std::size_t i : {0, 2, 4}) {
    INFO(i << ": " << crashed[i].reason);
    CHECK(crashed[i].status == MeasureStatus::Ok);
    CHECK(crashed[i].verified);
    CHECK(crashed[i].seconds.size() == 3);
  }
  CHECK(mc.measure(schedule("csr")).status == MeasureStatus::Ok);
}

TEST_CASE("measure: compare times a small problem's candidates in several layouts") {
  Fixture f;
  const std::vector<Candidate> cs = {schedule("csr"), Candidate::baseline("csr"),
                                     schedule("order=i,k format=UC parallel=i threads=1 chunk=4")};
  for (const int layouts : {1, 3}) {
    MeasureOptions o = quick_options(cache_dir());
    o.layouts = layouts;
    Measurer m(f.p, f.ref, o);
    const std::vector<Measurement> ms = m.compare(cs, 7);
    REQUIRE(ms.size() == cs.size());
    for (const Measurement& x : ms) {
      INFO(layouts << " layouts: " << x.reason);
      REQUIRE(x.status == MeasureStatus::Ok);
      CHECK(x.verified);
      CHECK(x.seconds.size() == 7);
      CHECK(x.counters.value("layouts", 0) == layouts);
    }
    // Every layout is verified: a wrong reference fails each candidate, whatever the layouts.
    kernels::Reference wrong = f.ref;
    wrong.value.set(17, wrong.value[17] + 1.0);
    Measurer mw(f.p, wrong, o);
    for (const Measurement& x : mw.compare(cs, 3)) CHECK(x.status == MeasureStatus::WrongResult);
  }
}

namespace {
/// Racing in compare() (factor 4) with dense formats admitted and atomic updates, on one thread:
/// a two-thread kernel on a loaded machine (tests run in parallel) can wait for a descheduled
/// thread at a barrier for milliseconds, and racing would abandon csr itself.
MeasureOptions racing_options() {
  MeasureOptions o = quick_options(cache_dir());
  o.generated.storage.max_padding = 1000;
  o.generated.race = codegen::RaceStrategy::Atomic;
  // 20x: the slow candidates of these tests are hundreds of times csr's time, and the fast ones a
  // few microseconds, where one preempted pair of runs under `ctest -j2` reached 4x the group's
  // fastest (a clean-clone CI run abandoned UC chunk=4 at 17 us against 4.2 us).
  o.compare_race_factor = 20;
  o.threads = 1;
  return o;
}
}  // namespace

TEST_CASE("measure: compare abandons hopeless candidates with their runs as a lower bound") {
  Fixture f;
  MeasureOptions o = racing_options();
  Measurer m(f.p, f.ref, o);
  // Dense storage of a 600 x 600 matrix with ~7 nonzeros a row, over columns in parallel: ~85x
  // the entries of csr, each an atomic update of y (hundreds of times csr's time).
  const std::vector<Candidate> cs = {schedule("csr"), Candidate::baseline("csr"),
                                     schedule("order=k,i format=UU parallel=k chunk=16")};
  const std::vector<Measurement> ms = m.compare(cs, 5);
  REQUIRE(ms.size() == 3);
  CHECK(ms[0].status == MeasureStatus::Ok);
  CHECK(ms[1].status == MeasureStatus::Ok);
  INFO(ms[2].reason);
  REQUIRE(ms[2].status == MeasureStatus::Abandoned);
  CHECK(ms[2].verified);
  CHECK(ms[2].seconds.size() == 4);  // two probes, then two more after the others
  CHECK(ms[2].min_s > o.compare_race_factor * ms[0].min_s);
  CHECK(ms[2].reason.find("abandoned after 4 timed runs (two, then two after the others)") !=
        std::string::npos);
  // Off (factor 0), it is timed like the others.
  o.compare_race_factor = 0;
  Measurer all(f.p, f.ref, o);
  const std::vector<Measurement> full = all.compare(cs, 3);
  CHECK(full[2].status == MeasureStatus::Ok);
  CHECK(full[2].seconds.size() == 3);
}

TEST_CASE("measure: racing takes a second look before abandoning: two slow probes alone (a "
          "descheduled thread) do not lose a candidate") {
  Fixture f;
  // racing_options' factor (20): the 20 ms probes are thousands of times csr's. With 3, a second
  // look beside another test (ctest -j2) on the AMD EPYC Zen 5 VM found the nominee's unslowed
  // probes of a few microseconds above 3x csr's in 2 of 6 runs, right after 20 ms asleep.
  MeasureOptions o = racing_options();
  // The nominee's first two probes each 20 ms slower, as a thread descheduled on a busy machine
  // makes them; its second look (probes 2 and 3) runs as it is.
  o.probe_hook = [](const Candidate& c, int probe) {
    if (c.is_generated() && c.schedule->chunk == 32 && probe < 2)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  Measurer m(f.p, f.ref, o);
  const std::vector<Candidate> cs = {Candidate::baseline("csr"),
                                     schedule("order=i,k format=UC parallel=i chunk=32")};
  const std::vector<Measurement> ms = m.compare(cs, 5);
  REQUIRE(ms.size() == 2);
  CHECK(ms[0].status == MeasureStatus::Ok);
  INFO(ms[1].reason);
  CHECK(ms[1].status == MeasureStatus::Ok);
  CHECK(ms[1].seconds.size() == 5);
  CHECK(ms[1].median_s < 0.01);
  // Slow on every probe: abandoned after the second look, with its four probes.
  o.probe_hook = [](const Candidate& c, int) {
    if (c.is_generated() && c.schedule->chunk == 32)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  Measurer slow(f.p, f.ref, o);
  const std::vector<Measurement> gone = slow.compare(cs, 5);
  INFO(gone[1].reason);
  CHECK(gone[1].status == MeasureStatus::Abandoned);
  CHECK(gone[1].seconds.size() == 4);
}

TEST_CASE("measure: compare's racing per call, and candidates always timed however slow") {
  Fixture f;
  MeasureOptions o = racing_options();
  o.compare_race_factor = 0;  // the Measurer's own: off
  Measurer m(f.p, f.ref, o);
  const Candidate slow = schedule("order=k,i format=UU parallel=k chunk=16");  // ~85x csr's work
  const std::vector<Candidate> cs = {schedule("csr"), slow};
  // On for this call: the slow one is abandoned.
  CompareOptions on;
  on.race_factor = racing_options().compare_race_factor;
  const std::vector<Measurement> raced = m.compare(cs, 3, on);
  CHECK(raced[0].status == MeasureStatus::Ok);
  CHECK(raced[1].status == MeasureStatus::Abandoned);
  // The same, with the slow one always timed (a reference): it takes part in every round.
  on.always_timed = {1};
  const std::vector<Measurement> kept = m.compare(cs, 3, on);
  CHECK(kept[0].status == MeasureStatus::Ok);
  INFO(kept[1].reason);
  CHECK(kept[1].status == MeasureStatus::Ok);
  CHECK(kept[1].seconds.size() == 3);
  CHECK(kept[1].median_s > on.race_factor * kept[0].median_s);
  // Off for the call (the default): timed like the others.
  const std::vector<Measurement> plain = m.compare(cs, 3);
  CHECK(plain[1].status == MeasureStatus::Ok);
}

TEST_CASE("measure: compare's successive halving stops the slower half, never a reference") {
  Fixture f;
  Measurer m(f.p, f.ref, quick_options(cache_dir()));
  // Three generated nominees, the csr schedule (always timed: the halving's reference) and the
  // csr baseline; 8 rounds, at least 1 kept: 1 nominee stops after 2 rounds (2 of 3 kept, the
  // faster half rounded up), 1 after 4, 1 runs all 8, whichever they are (distinct times).
  const std::vector<Candidate> cs = {
      schedule("order=i,k format=UC parallel=i chunk=4"), schedule("order=i,k format=UC parallel=i chunk=16"),
      schedule("order=i,k format=UC parallel=i chunk=64"), schedule("csr"), Candidate::baseline("csr")};
  CompareOptions co;
  co.always_timed = {3};
  co.halving_keep = 1;
  const std::vector<Measurement> ms = m.compare(cs, 8, co);
  REQUIRE(ms.size() == cs.size());
  std::multiset<std::size_t> rounds;
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(cs[i].label() << ": " << ms[i].reason);
    CHECK(ms[i].verified);
    CHECK(ms[i].status == (ms[i].seconds.size() == 8 ? MeasureStatus::Ok : MeasureStatus::Abandoned));
    CHECK(was_halved(ms[i]) == (ms[i].seconds.size() < 8));
    rounds.insert(ms[i].seconds.size());
  }
  CHECK(rounds == std::multiset<std::size_t>{2, 4, 8});
  for (std::size_t i : {3, 4}) {
    CHECK(ms[i].status == MeasureStatus::Ok);
    CHECK(ms[i].seconds.size() == 8);
  }
}

TEST_CASE("measure: compare's screening stops a run that overruns its deadline and goes on") {
  // 4,000 rows: csr takes ~10 us and the dense formats (16M entries, each an atomic update) tens
  // of milliseconds, so the deadline can sit far above a preempted fast run (a scheduler slice
  // is milliseconds: with 600 rows and a 0.5 ms deadline, csr itself overran it under load).
  Fixture f(4000);
  MeasureOptions o = racing_options();
  o.compare_screen_margin = 2;
  // A floor of 10 ms stops the dense formats and leaves the others room for a cold first run.
  o.compare_screen_min_s = 1e-2;
  // The dense formats overrun the deadline on their first run; the candidates after each go on
  // in a new child. The hook (in the measuring children, before a candidate's first screened run)
  // logs every screening: a candidate screened by an earlier child is not screened again.
  const std::string log = cache_dir() + "/screening-" + std::to_string(::getpid()) + ".log";
  std::remove(log.c_str());
  o.child_hook = [log](const Candidate& c) {
    std::ofstream(log, std::ios::app) << c.label() << "\n";
  };
  Measurer m(f.p, f.ref, o);
  const std::vector<Candidate> cs = {
      schedule("csr"),
      Candidate::baseline("csr"),
      schedule("order=k,i format=UU parallel=k chunk=16"),
      schedule("order=i,k format=UC parallel=i chunk=4"),
      schedule("order=k,i format=UU parallel=k chunk=32"),
      schedule("order=i,k format=UC parallel=i chunk=8")};
  const std::vector<Measurement> ms = m.compare(cs, 5);
  REQUIRE(ms.size() == cs.size());
  for (const std::size_t i : {0, 1, 3, 5}) {
    INFO(i << ": " << ms[i].reason);
    CHECK(ms[i].status == MeasureStatus::Ok);
    CHECK(ms[i].verified);
    CHECK(ms[i].seconds.size() == 5);
  }
  for (const std::size_t i : {2, 4}) {
    INFO(i << ": " << ms[i].reason);
    REQUIRE(ms[i].status == MeasureStatus::Abandoned);
    CHECK_FALSE(ms[i].verified);
    CHECK(ms[i].reason.find("screening deadline") != std::string::npos);
    // The lower bound is 20 x the group's fastest probe (~0.2 ms), not the deadline.
    CHECK(ms[i].min_s == ms[i].max_s);
    CHECK(ms[i].min_s > 0);
    CHECK(ms[i].min_s < o.compare_screen_min_s);
    CHECK(ms[i].compile_s >= 0);
  }
  std::map<std::string, int> screened;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) ++screened[line];
  for (const Candidate& c : cs) {
    INFO(c.label());
    CHECK(screened[c.label()] == 1);
  }
}

TEST_CASE("measure: refusals and compile errors are statuses with reasons") {
  Fixture f;
  MeasureOptions o = quick_options(cache_dir());
  o.generated.storage.max_padding = 1.5;  // 8x8 blocks of a band pad far beyond 1.5 x nnz
  Measurer m(f.p, f.ref, o);

  const Measurement padded = m.measure(schedule("bcsr8x8"));
  CHECK(padded.status == MeasureStatus::Refused);
  CHECK_FALSE(padded.reason.empty());
  CHECK_FALSE(padded.verified);
  // Refused by the worker from the prefix counts, before any child: build_storage's own words,
  // and nothing built or compiled.
  codegen::StorageOptions bound;
  bound.max_padding = 1.5;
  const codegen::StorageResult built =
      codegen::build_storage(*schedule("bcsr8x8").schedule, f.p, bound);
  REQUIRE_FALSE(built.storage.has_value());
  CHECK(padded.reason == built.refused);
  CHECK(padded.compile_s == 0.0);
  CHECK(padded.kernel_source.empty());
  CHECK(padded.stored_values == -1);
  CHECK(padded.threads == 2);
  // A format just inside the bound is built (once, by the child) and measured.
  const Measurement banded = m.measure(schedule("order=i,k format=UC parallel=i threads=0 chunk=8"));
  CHECK(banded.status == MeasureStatus::Ok);
  CHECK(banded.stored_values == f.a.nnz());

  const Measurement unknown = m.measure(Candidate::baseline("no-such-impl"));
  CHECK(unknown.status == MeasureStatus::Refused);
  CHECK(unknown.reason.find("no-such-impl") != std::string::npos);

  // A compiler that rejects the source: C++ compiled as C.
  MeasureOptions bad = quick_options(cache_dir());
  bad.generated.compiler.flags = {"-x", "c", "-O1", "-shared", "-fPIC"};
  Measurer mb(f.p, f.ref, bad);
  const Measurement ce = mb.measure(schedule("csr"));
  CHECK(ce.status == MeasureStatus::CompileError);
  CHECK_FALSE(ce.reason.empty());

  // The same measurers still work afterwards.
  CHECK(m.measure(schedule("csr")).status == MeasureStatus::Ok);
}

TEST_CASE("measure: a wrong result is detected and not timed") {
  Fixture f;
  kernels::Reference wrong = f.ref;
  wrong.value.set(17, wrong.value[17] + 1.0);  // the reference of another matrix, in one entry
  Measurer m(f.p, wrong, quick_options(cache_dir()));
  const Measurement w = m.measure(schedule("csr"));
  CHECK(w.status == MeasureStatus::WrongResult);
  CHECK_FALSE(w.verified);
  CHECK(w.max_rel_error > kernels::kDefaultTolerance);
  CHECK(w.seconds.empty());
  CHECK(w.reason.find("first run") != std::string::npos);
}

TEST_CASE("measure: crashes, hangs and exceptions in the child do not take the caller down") {
  Fixture f;
  MeasureOptions o = quick_options(cache_dir());
  o.run_timeout_s = 1.5;
  o.child_hook = [](const Candidate& c) {
    if (!c.schedule) return;
    if (c.schedule->chunk == 2) raise(SIGSEGV);
    if (c.schedule->chunk == 4) std::this_thread::sleep_for(std::chrono::seconds(120));
    if (c.schedule->chunk == 8) throw std::runtime_error("injected fault");
    if (c.schedule->chunk == 16) _exit(5);
  };
  Measurer m(f.p, f.ref, o);

  const Measurement crash = m.measure(schedule("order=i,k format=UC parallel=i chunk=2"));
  CHECK(crash.status == MeasureStatus::Crashed);
  CHECK(crash.reason.find("signal 11") != std::string::npos);
  CHECK(crash.reason.find("running") != std::string::npos);

  const double t0 = kernels::now_seconds();
  const Measurement hang = m.measure(schedule("order=i,k format=UC parallel=i chunk=4"));
  const double waited = kernels::now_seconds() - t0;
  CHECK(hang.status == MeasureStatus::Timeout);
  CHECK(hang.reason.find("1.5 s") != std::string::npos);
  CHECK(waited >= 1.5);
  CHECK(waited < 30.0);

  const Measurement thrown = m.measure(schedule("order=i,k format=UC parallel=i chunk=8"));
  CHECK(thrown.status == MeasureStatus::Crashed);
  CHECK(thrown.reason.find("injected fault") != std::string::npos);

  const Measurement exited = m.measure(schedule("order=i,k format=UC parallel=i chunk=16"));
  CHECK(exited.status == MeasureStatus::Crashed);
  CHECK(exited.reason.find("status 5") != std::string::npos);

  // Still alive, still measuring.
  const Measurement ok = m.measure(schedule("order=i,k format=UC parallel=i chunk=32"));
  CHECK(ok.status == MeasureStatus::Ok);
  CHECK(kill(m.worker_pid(), 0) == 0);
}

TEST_CASE("measure: children run OpenMP after the caller used OpenMP") {
  // In a forked child of the test, so that this test process never runs OpenMP itself.
  const int code = in_child([] {
    Fixture f;
    Measurer m(f.p, f.ref, quick_options(cache_dir()));
    // The caller now runs an OpenMP parallel region (the csr baseline on two threads).
    auto csr = kernels::make_implementation("csr", kernels::KernelKind::SpMV);
    csr->prepare(f.p, 2);
    csr->run();
    const Measurement g = m.measure(schedule("order=i,k format=UC parallel=i threads=2 chunk=8"));
    if (g.status != MeasureStatus::Ok || g.threads != 2) return 1;
    const Measurement b = m.measure(Candidate::baseline("csr"));
    return b.status == MeasureStatus::Ok ? 0 : 2;
  });
  CHECK(code == 0);
}

TEST_CASE("measure: cancel kills the worker and everything under it, also in another group") {
  // In a child of the test: it becomes a subreaper, so that the killed worker's orphans (the
  // measuring child, the "compiler" in a process group of its own) become its children and one
  // left running would show.
  const int code = in_child([] {
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return 10;
    Fixture f;
    MeasureOptions o = quick_options(cache_dir());
    o.child_hook = [](const Candidate&) {
      const pid_t g = fork();  // as the compiler: a process group of its own
      if (g == 0) {
        setpgid(0, 0);
        execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
        _exit(127);
      }
      std::this_thread::sleep_for(std::chrono::seconds(60));
    };
    double asked_at = 0, stopped_at = 0;
    o.cancel = [&] {
      if (asked_at == 0) asked_at = kernels::now_seconds();
      if (stopped_at == 0 && kernels::now_seconds() - asked_at > 0.5)
        stopped_at = kernels::now_seconds();
      return stopped_at > 0;
    };
    Measurer m(f.p, f.ref, o);
    asked_at = kernels::now_seconds();
    try {
      m.measure(schedule("order=i,k format=UC parallel=i chunk=4"));
      return 11;  // not cancelled
    } catch (const kernels::Cancelled&) {
    }
    if (stopped_at == 0 || kernels::now_seconds() - stopped_at > 1.0) return 12;
    // Nothing left but zombies (reaped here): the worker, its measuring child and the sleep.
    for (int i = 0; i < 100; ++i) {
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      std::ifstream in("/proc/self/task/" + std::to_string(getpid()) + "/children");
      std::string pid;
      if (!(in >> pid)) return 0;
      usleep(20000);
    }
    return 13;  // a process still running 2 s after
  });
  CHECK(code == 0);
}

TEST_CASE("measure: the worker exits with its owner") {
  pid_t worker = -1;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const int code = in_child([&] {
    close(fds[0]);
    Fixture f;
    Measurer m(f.p, f.ref, quick_options(cache_dir()));
    const pid_t w = m.worker_pid();
    if (write(fds[1], &w, sizeof w) != sizeof w) return 1;
    raise(SIGKILL);  // die without running any destructor
    return 2;
  });
  close(fds[1]);
  REQUIRE(read(fds[0], &worker, sizeof worker) == sizeof worker);
  close(fds[0]);
  CHECK(code == -SIGKILL);
  // The worker had PR_SET_PDEATHSIG: it is gone within moments (a zombie not yet reaped by
  // whoever inherited it counts as gone).
  const auto alive = [worker] {
    std::ifstream st("/proc/" + std::to_string(worker) + "/stat");
    std::string pid, comm, state;
    if (!(st >> pid >> comm >> state)) return false;
    return state != "Z" && state != "X";
  };
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    gone = !alive();
    if (!gone) usleep(10000);
  }
  CHECK(gone);
}
