// Unit "tuner": the parts of a search around the measurements (heuristics/tuner.hpp): racing
// (hopeless candidates abandoned early, with their partial timing, reused only while racing is
// on), the verdict of the side-by-side winner against csr (judge_gain), and the nomination of
// the csr-like schedule into the confirmation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/heuristics/tuner.hpp"
#include "waco/kernels/implementation.hpp"
#include "waco/kernels/timing.hpp"

using namespace waco;
using namespace waco::heuristics;

namespace {

/// 2000 x 2000 with 3 entries per row: a dense-storage schedule iterates 4M positions for 6k
/// nonzeros, hundreds of times the work of csr, on any machine.
kernels::CooMatrix sparse_matrix() {
  std::vector<kernels::index_t> r, c;
  std::vector<float> v;
  const int n = 2000;
  for (int i = 0; i < n; ++i)
    for (int k : {i, (i * 13 + 5) % n, (i * 101 + 7) % n}) {
      r.push_back(i);
      c.push_back(k);
      v.push_back(1.0f + static_cast<float>(k % 5));
    }
  return test::from_triplets(n, n, r, c, v);
}

Candidate spmv(const std::string& text) {
  return Candidate::generated(codegen::schedule_from_string(kernels::KernelKind::SpMV, text));
}

const char* kDense = "order=i,k format=UU parallel=i threads=1 chunk=16";
const char* kCsr = "order=i,k format=UC parallel=i threads=1 chunk=16";

struct Fixture {
  std::string dir;
  kernels::CooMatrix a = sparse_matrix();
  kernels::DenseOperands ops =
      kernels::make_dense_operands(kernels::KernelKind::SpMV, &a, nullptr, 1, 3);
  kernels::Problem p = kernels::make_problem(kernels::KernelKind::SpMV, &a, nullptr, ops);
  kernels::Reference ref = kernels::compute_reference(p);
  MeasureOptions mo;

  explicit Fixture(const std::string& name) : dir(test::scratch_dir(name)) {
    mo.warmup = 1;
    mo.repeats = 5;
    mo.threads = 1;
    mo.generated.compiler.cache_dir = dir + "/cache";
    mo.generated.storage.max_padding = 1e4;  // the dense format stores 4M values for 6k nonzeros
  }
};

/// A verified measurement with the given per-round times.
Measurement timed(std::vector<double> seconds) {
  Measurement m;
  m.status = MeasureStatus::Ok;
  m.seconds = seconds;
  const kernels::TimingStats t = kernels::summarize(seconds);
  m.median_s = t.median;
  m.min_s = t.min;
  m.max_s = t.max;
  m.verified = true;
  return m;
}

}  // namespace

TEST_CASE("tuner: a bound abandons a verified candidate after race_min_runs runs") {
  Fixture f("tuner-bound");
  Measurer m(f.p, f.ref, f.mo);
  const Measurement full = m.measure(spmv(kCsr), RaceBound{1e3, "", 0.0});  // a bound nothing reaches
  REQUIRE(full.status == MeasureStatus::Ok);
  CHECK(full.seconds.size() == 5);

  const Measurement cut = m.measure(spmv(kCsr), RaceBound{1e-12, "", 0.0});  // everything exceeds it
  INFO(cut.reason);
  REQUIRE(cut.status == MeasureStatus::Abandoned);
  CHECK(cut.verified);
  CHECK(cut.seconds.size() == 2);  // the warm-up run and one timed run (race_min_runs = 2)
  CHECK(cut.min_s > 0.0);
  CHECK(cut.median_s >= cut.min_s);
  CHECK(cut.reason.find("abandoned after 2 runs (1 timed)") != std::string::npos);

  // Without a bound nothing is abandoned.
  CHECK(m.measure(spmv(kCsr)).status == MeasureStatus::Ok);

  // The side-by-side check: the reference (the csr baseline) now is compared with its median
  // when the bound was set. A reference that took "1e-15 s" then makes the machine look
  // enormously slower now: the bound scales with that drift (to 1000x the reference's run now,
  // a margin no noise crosses; at 1x, the csr schedule against the csr baseline was a coin
  // toss under load) and the candidate is kept.
  const Measurement kept = m.measure(spmv(kCsr), RaceBound{1e-12, "csr", 1e-15});
  INFO(kept.reason);
  CHECK(kept.status == MeasureStatus::Ok);
  CHECK(kept.seconds.size() == 5);
  // A reference that took an hour then: no drift (at least 1), the plain bound decides, and the
  // reason says the check ran.
  const Measurement checked = m.measure(spmv(kCsr), RaceBound{1e-12, "csr", 3600.0});
  INFO(checked.reason);
  CHECK(checked.status == MeasureStatus::Abandoned);
  CHECK(checked.reason.find("beside csr") != std::string::npos);
  // A reference that cannot run here: the plain bound decides.
  const Measurement unknown = m.measure(spmv(kCsr), RaceBound{1e-12, "no-such-impl", 1.0});
  CHECK(unknown.status == MeasureStatus::Abandoned);
  CHECK(unknown.reason.find("beside") == std::string::npos);
}

TEST_CASE("tuner: racing abandons a candidate made slow on purpose and keeps the fast one") {
  Fixture f("tuner-race");
  ResultsDb db(f.dir + "/r.sqlite");
  const MatrixRecord rec = matrix_record(f.a, "sparse.mtx");
  db.record_matrix(rec);
  const MeasurementKey key{rec.fingerprint, kernels::KernelKind::SpMV, 1, f.mo.repeats};
  const std::vector<Candidate> candidates = {spmv(kCsr), spmv(kDense)};
  TuneOptions to;
  to.race_factor = 3.0;
  to.race_check = "csr";  // as tune sets it: the csr baseline's median before the search
  to.race_check_s = 1e-3;
  {
    Measurer m(f.p, f.ref, f.mo);
    const TuneResult r = run_candidates(db, key, m, candidates, to);
    REQUIRE(r.entries.size() == 2);
    INFO(r.entries[1].measurement.reason);
    CHECK(r.entries[0].measurement.status == MeasureStatus::Ok);
    CHECK(r.entries[1].measurement.status == MeasureStatus::Abandoned);
    CHECK(r.entries[1].measurement.seconds.size() == 2);
    CHECK(r.entries[1].measurement.min_s > 3.0 * r.entries[0].measurement.median_s);
    CHECK(r.status_counts.at(MeasureStatus::Abandoned) == 1);
    CHECK(r.abandoned_s > 0.0);
    REQUIRE(r.best.has_value());
    CHECK(*r.best == 0);
    // Stored with its partial timing.
    const auto stored = db.find_measurement(key, candidates[1], 1);
    REQUIRE(stored.has_value());
    CHECK(stored->measurement.status == MeasureStatus::Abandoned);
    CHECK(stored->measurement.median_s > 0.0);
    CHECK(stored->measurement.seconds.size() == 2);

    // While racing is on, the abandoned result is reused; without racing it is measured fully.
    const TuneResult again = run_candidates(db, key, m, candidates, to);
    CHECK(again.measured == 0);
    CHECK(again.reused == 2);
    const TuneResult full = run_candidates(db, key, m, candidates, {});
    CHECK(full.measured == 1);
    CHECK(full.entries[1].measurement.status == MeasureStatus::Ok);
    CHECK(full.entries[1].measurement.seconds.size() == 5);
  }
  {
    // A reference known before the search bounds the race from the first candidate on.
    ResultsDb fresh(f.dir + "/r2.sqlite");
    fresh.record_matrix(rec);
    Measurer m(f.p, f.ref, f.mo);
    TuneOptions bounded = to;
    bounded.race_reference_s = 1e-12;
    const TuneResult r = run_candidates(fresh, key, m, {spmv(kDense)}, bounded);
    REQUIRE(r.entries.size() == 1);
    CHECK(r.entries[0].measurement.status == MeasureStatus::Abandoned);
    CHECK_FALSE(r.best.has_value());  // an abandoned candidate is never the best
  }
}

TEST_CASE("tuner: judge_gain pairs the rounds and asks for more than their spread") {
  // Faster in every round by 20%, little noise: a gain.
  Verdict v = judge_gain(timed({0.8, 0.82, 0.79, 0.81, 0.8}), timed({1.0, 1.0, 1.0, 1.0, 1.0}));
  CHECK(v.gain);
  CHECK(v.rounds == 5);
  CHECK(v.ratio_median == Approx(0.8));
  CHECK(v.speedup == Approx(1.0 / 0.8));
  CHECK(v.spread < 0.02);

  // Drift common to both (the machine slowed down in rounds 3-5) cancels in the pairs.
  v = judge_gain(timed({0.9, 0.9, 1.8, 1.8, 1.8}), timed({1.0, 1.0, 2.0, 2.0, 2.0}));
  CHECK(v.gain);
  CHECK(v.ratio_median == Approx(0.9));
  CHECK(v.spread == Approx(0.0).margin(1e-12));

  // A 2% median gain inside +-10% noise of the ratios: no gain.
  v = judge_gain(timed({0.8, 1.2, 0.98, 0.85, 1.15}), timed({1.0, 1.0, 1.0, 1.0, 1.0}));
  CHECK_FALSE(v.gain);
  CHECK(v.spread > 0.1);

  // Slower: no gain; equal: no gain.
  CHECK_FALSE(judge_gain(timed({1.1, 1.1, 1.1}), timed({1.0, 1.0, 1.0})).gain);
  CHECK_FALSE(judge_gain(timed({1.0, 1.0, 1.0}), timed({1.0, 1.0, 1.0})).gain);

  // Unequal round counts: the ratio of medians, no spread.
  v = judge_gain(timed({0.5, 0.5}), timed({1.0, 1.0, 1.0}));
  CHECK(v.rounds == 0);
  CHECK(v.gain);
  CHECK(v.ratio_median == Approx(0.5));
}

TEST_CASE("tuner: the csr-like schedule is nominated even outside the top, and loses to no one "
          "unfairly") {
  Fixture f("tuner-always");
  // A search result made by hand: the dense schedule appears faster in the search (a stale
  // timing), csr slower; with top = 1 only the dense one would be nominated.
  TuneResult r;
  TuneEntry dense{spmv(kDense), timed({1e-6}), false};
  TuneEntry csr{spmv(kCsr), timed({1.0}), false};
  r.entries = {dense, csr};
  r.best = 0;
  Measurer m(f.p, f.ref, f.mo);
  ConfirmOptions co;
  co.top = 1;
  co.rounds = 3;
  const Confirmation plain = confirm_best(m, r, {}, co);
  REQUIRE(plain.ranking.size() == 1);
  CHECK(plain.ranking[0].entry == 0);

  const codegen::SuperSchedule csr_shape = *spmv(kCsr).schedule;
  co.always = [&](const Candidate& c) { return c.schedule && *c.schedule == csr_shape; };
  const Confirmation c = confirm_best(m, r, {}, co);
  REQUIRE(c.ranking.size() == 2);
  REQUIRE(c.best.has_value());
  // Side by side the csr schedule wins, and keeps its search rank (2).
  CHECK(c.ranking[0].entry == 1);
  CHECK(c.ranking[0].search_rank == 2);
  CHECK(c.ranking[1].entry == 0);
  CHECK(judge_gain(c.ranking[0].measurement, c.ranking[1].measurement).gain);
}

TEST_CASE("tuner: confirm_ranked measures a ranked list side by side, in list order, once each") {
  Fixture f("tuner-ranked");
  Measurer m(f.p, f.ref, f.mo);
  // The ranker's order: the dense schedule first (a bad guess), csr second, csr again (a
  // duplicate, measured once), and a third beyond top.
  const Candidate csr = spmv(kCsr);
  const Candidate chunked = spmv("order=i,k format=UC parallel=i threads=1 chunk=64");
  const std::vector<Candidate> ranked = {spmv(kDense), csr, csr, chunked,
                                         spmv("order=i,k format=UC parallel=i threads=1 chunk=4")};
  ConfirmOptions co;
  co.top = 3;
  co.rounds = 3;
  // Racing at 3x: the dense schedule (hundreds of times csr's work) is abandoned; the csr
  // baseline reference is timed in every round; csr is also a reference here: measured once.
  const RankedConfirmation rc = confirm_ranked(m, ranked, {csr, Candidate::baseline("csr")}, co, 3.0);
  const TuneResult& r = rc.result;
  REQUIRE(r.entries.size() == 3);
  CHECK(r.entries[0].candidate.label() == spmv(kDense).label());
  CHECK(r.entries[1].candidate.label() == csr.label());
  CHECK(r.entries[2].candidate.label() == chunked.label());
  CHECK(r.measured == 3);
  CHECK(r.entries[0].measurement.status == MeasureStatus::Abandoned);
  CHECK(r.status_counts.at(MeasureStatus::Abandoned) == 1);
  REQUIRE(r.best.has_value());
  CHECK(*r.best != 0);
  const Confirmation& c = rc.confirmation;
  REQUIRE(c.ranking.size() == 3);
  REQUIRE(c.best.has_value());
  CHECK(c.ranking[0].measurement.status == MeasureStatus::Ok);
  CHECK(c.ranking[0].entry == *r.best);
  CHECK(c.ranking[0].search_rank == *r.best + 1);  // the list's rank
  CHECK(c.ranking[2].entry == 0);                  // the abandoned one last
  REQUIRE(c.references.size() == 2);
  CHECK(c.references[0].status == MeasureStatus::Ok);
  CHECK(c.references[1].status == MeasureStatus::Ok);
  // The csr nominee and the csr reference are one measurement.
  CHECK(c.references[0].seconds == r.entries[1].measurement.seconds);
  CHECK(c.rounds == 3);
  // An empty list measures nothing.
  const RankedConfirmation none = confirm_ranked(m, {}, {csr}, co, 3.0);
  CHECK(none.result.entries.empty());
  CHECK_FALSE(none.confirmation.best.has_value());
}

TEST_CASE("tuner: replicate_leaders times the leaders again and decides on both runs' rounds") {
  Fixture f("tuner-replicate");
  Measurer m(f.p, f.ref, f.mo);
  const Candidate csr = spmv(kCsr);
  const Candidate chunked = spmv("order=i,k format=UC parallel=i threads=1 chunk=64");
  const Candidate small = spmv("order=i,k format=UC parallel=i threads=1 chunk=4");
  const std::vector<Candidate> refs = {csr, Candidate::baseline("csr")};
  ConfirmOptions co;
  co.top = 4;
  co.rounds = 3;
  // The dense schedule is abandoned by the racing: a failed nominee is not a leader.
  RankedConfirmation rc = confirm_ranked(m, {spmv(kDense), chunked, small, csr}, refs, co, 3.0);
  Confirmation& c = rc.confirmation;
  REQUIRE(c.ranking.size() == 4);
  REQUIRE(c.best.has_value());
  const std::vector<ConfirmEntry> before = c.ranking;
  const std::vector<Measurement> refs_before = c.references;
  const double seconds_before = c.seconds;
  replicate_leaders(m, rc.result, c, refs, 2);
  CHECK(c.replicated == 2);
  CHECK(c.rounds == 3);  // rounds of one run
  CHECK(c.seconds > seconds_before);
  REQUIRE(c.ranking.size() == 4);
  REQUIRE(c.best.has_value());
  CHECK(*c.best == 0);
  std::size_t doubled = 0;
  for (const ConfirmEntry& e : c.ranking) {
    const auto was = std::find_if(before.begin(), before.end(),
                                  [&](const ConfirmEntry& b) { return b.entry == e.entry; });
    REQUIRE(was != before.end());
    CHECK(e.search_rank == was->search_rank);
    if (e.measurement.status != MeasureStatus::Ok) continue;
    const std::vector<double>& s = e.measurement.seconds;
    if (s.size() == 6) {  // a leader: its first run's rounds, then the second run's
      ++doubled;
      CHECK(std::equal(was->measurement.seconds.begin(), was->measurement.seconds.end(), s.begin()));
      std::vector<double> sorted = s;
      std::sort(sorted.begin(), sorted.end());
      CHECK(e.measurement.median_s == Approx((sorted[2] + sorted[3]) / 2));
      CHECK(e.measurement.min_s == sorted.front());
      CHECK(e.measurement.max_s == sorted.back());
    } else {
      CHECK(s == was->measurement.seconds);  // not a leader: untouched
    }
  }
  CHECK(doubled == 2);
  // Sorted again: the two leaders first (fastest over both runs first), then the other verified
  // nominee, the abandoned one last.
  CHECK(c.ranking[0].measurement.seconds.size() == 6);
  CHECK(c.ranking[1].measurement.seconds.size() == 6);
  CHECK(c.ranking[0].measurement.median_s <= c.ranking[1].measurement.median_s);
  CHECK(c.ranking[2].measurement.status == MeasureStatus::Ok);
  CHECK(c.ranking[2].measurement.seconds.size() == 3);
  CHECK(c.ranking.back().measurement.status == MeasureStatus::Abandoned);
  // The references' rounds were extended alike, so the verdict pairs 6 rounds.
  REQUIRE(c.references.size() == 2);
  CHECK(c.references[0].seconds.size() == 6);
  CHECK(c.references[1].seconds.size() == 6);
  CHECK(std::equal(refs_before[1].seconds.begin(), refs_before[1].seconds.end(),
                   c.references[1].seconds.begin()));
  CHECK(judge_gain(c.ranking[0].measurement, c.references[1]).rounds == 6);
}

TEST_CASE("tuner: disturbed_warning reads the side-by-side runs' software counts") {
  const auto with = [](int retaken, int kept) {
    Measurement m = timed({1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3});
    m.counters = {{"retaken", retaken}, {"disturbed_kept", kept}};
    return m;
  };
  Confirmation c;
  c.ranking = {{0, 1, with(0, 0)}, {1, 2, with(1, 0)}};
  c.references = {with(0, 0), Measurement{}};  // a failed reference counts no runs
  CHECK(disturbed_warning(c).empty());  // 1 retake in 30 runs: a quiet machine
  c.ranking[0].measurement = with(3, 0);
  const std::string w = disturbed_warning(c);  // 4 retakes in 30 runs
  CHECK(w.find("the machine is busy") != std::string::npos);
  CHECK(w.find("disturbed 4 timed runs") != std::string::npos);
  c.ranking[0].measurement = with(0, 1);  // a disturbed run kept: its timing is off
  CHECK(disturbed_warning(c).find("1 of the 30 kept runs") != std::string::npos);
  c.ranking[0].measurement.counters = nullptr;  // no counts: nothing to say about it
  CHECK(disturbed_warning(c).empty());
}
