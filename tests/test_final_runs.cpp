// Unit "final_runs": the final side-by-side run of `waco-hybrid ablate` (experiments/src/
// final_runs.hpp) on scripted numbers: the interval of a median, the bands, the rule that two
// runs agree, the replication until they do (busy runs skipped, undecided when they never agree)
// and one bench JSON reduced to its delivered speedups over the faster csr reference.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "final_runs.hpp"

using namespace waco;
using nlohmann::json;

namespace {

/// A run with these speedups (no intervals).
cli::FinalRun run(std::map<std::string, double> speedups, bool busy = false) {
  cli::FinalRun f;
  f.busy = busy;
  if (busy) f.busy_reason = "scripted busy";
  f.reference = "csr schedule";
  for (const auto& [c, s] : speedups) f.speedups[c].speedup = s;
  return f;
}

/// replicate() over a script: run i returns script[i]; counts the calls.
struct Script {
  std::vector<cli::FinalRun> runs;
  int calls = 0;
  cli::Replication operator()(int max_runs) {
    return cli::replicate(max_runs, [this](int i) {
      ++calls;
      REQUIRE(static_cast<std::size_t>(i) < runs.size());
      return runs[static_cast<std::size_t>(i)];
    });
  }
};

json result(double median, std::vector<double> times) {
  return {{"impl", "x"},
          {"median_s", median},
          {"min_s", median},
          {"max_s", median},
          {"times_s", times}};
}

}  // namespace

TEST_CASE("final runs: the interval of a median is a pair of order statistics") {
  std::vector<double> v;
  for (int i = 20; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  const auto i20 = cli::median_interval(v);
  REQUIRE(i20);
  // Binomial(20, 1/2): P(X <= 5) = 0.0207 <= 0.05 < P(X <= 6) = 0.0577: the 6th and 15th.
  CHECK(i20->lo == 6);
  CHECK(i20->hi == 15);
  CHECK(i20->level == Approx(0.9));
  const auto wider = cli::median_interval(v, 0.99);  // P(X <= 3) = 0.0013 <= 0.005 < P(X <= 4)
  CHECK(wider->lo == 4);
  CHECK(wider->hi == 17);
  const auto few = cli::median_interval({3, 1, 2, 4});  // too few for 90%: min and max
  CHECK(few->lo == 1);
  CHECK(few->hi == 4);
  CHECK_FALSE(cli::median_interval({}).has_value());
  CHECK(cli::median_interval({2.5})->lo == 2.5);
  CHECK(cli::Interval{0.98, 1.05}.contains(1.0));
  CHECK_FALSE(cli::Interval{1.01, 1.05}.contains(1.0));
}

TEST_CASE("final runs: bands around csr") {
  CHECK(cli::band_of(0.969) == cli::Band::Below);
  CHECK(cli::band_of(0.97) == cli::Band::Tie);
  CHECK(cli::band_of(1.03) == cli::Band::Tie);
  CHECK(cli::band_of(1.031) == cli::Band::Above);
  CHECK(std::string(cli::band_name(cli::Band::Below)) == "below");
}

TEST_CASE("final runs: two runs agree when every speedup is close or keeps its band") {
  // Close (less than 5%) across a band edge: agree. Far in the same band: agree.
  CHECK(cli::disagreeing(run({{"a", 0.96}}), run({{"a", 0.99}})).empty());
  CHECK(cli::disagreeing(run({{"a", 1.10}}), run({{"a", 1.50}})).empty());
  CHECK(cli::disagreeing(run({{"a", 0.80}}), run({{"a", 0.70}})).empty());
  // Far and in another band: disagree (the 0.80x against 1.30x).
  CHECK(cli::disagreeing(run({{"a", 0.80}}), run({{"a", 1.30}})) == std::vector<std::string>{"a"});
  CHECK(cli::disagreeing(run({{"a", 1.00}}), run({{"a", 1.10}})) == std::vector<std::string>{"a"});
  // Only the configurations timed in both are judged; the list is sorted.
  CHECK(cli::disagreeing(run({{"z", 1.5}, {"b", 0.9}, {"only-a", 1.0}}),
                         run({{"z", 0.9}, {"b", 1.5}, {"only-b", 2.0}})) ==
        std::vector<std::string>{"b", "z"});
}

TEST_CASE("final runs: replicated until two consecutive undisturbed runs agree") {
  SECTION("the first two agree: two runs") {
    Script s{{run({{"h", 1.20}, {"e", 1.00}}), run({{"h", 1.22}, {"e", 1.01}}), run({{"h", 9.0}})}};
    const cli::Replication r = s(4);
    CHECK(s.calls == 2);
    CHECK(r.settled);
    CHECK_FALSE(r.busy);
    CHECK(r.undecided.empty());
    const auto d = cli::delivered_speedups(r);
    CHECK(d.at("h").speedup == Approx(1.21));
    CHECK(d.at("h").runs == 2);
    CHECK(d.at("h").decided);
    CHECK(d.at("h").interval.lo == Approx(1.20));
    CHECK(d.at("h").interval.hi == Approx(1.22));
  }
  SECTION("a third run settles what the first two did not") {
    Script s{{run({{"h", 0.80}}), run({{"h", 1.30}}), run({{"h", 1.40}}), run({{"h", 0.5}})}};
    const cli::Replication r = s(4);
    CHECK(s.calls == 3);
    CHECK(r.settled);
    const auto d = cli::delivered_speedups(r);
    CHECK(d.at("h").speedup == Approx(1.30));  // the median of the three
    CHECK(d.at("h").decided);
    CHECK(d.at("h").interval.lo == Approx(0.80));
    CHECK(d.at("h").interval.hi == Approx(1.40));
  }
  SECTION("runs that never agree stop at the maximum and are undecided") {
    Script s{{run({{"h", 1.20}, {"e", 1.10}}), run({{"h", 0.90}, {"e", 1.11}}),
              run({{"h", 1.20}, {"e", 1.09}})}};
    const cli::Replication r = s(3);
    CHECK(s.calls == 3);
    CHECK_FALSE(r.settled);
    CHECK_FALSE(r.busy);
    CHECK(r.undecided == std::set<std::string>{"h"});
    const auto d = cli::delivered_speedups(r);
    CHECK(d.at("h").speedup == Approx(1.20));
    CHECK_FALSE(d.at("h").decided);
    CHECK(d.at("e").decided);  // the last two runs agree on it
  }
  SECTION("a busy run is run again and not compared") {
    Script s{{run({{"h", 1.20}}), run({{"h", 3.0}}, true), run({{"h", 1.21}}), run({{"h", 9.0}})}};
    const cli::Replication r = s(4);
    CHECK(s.calls == 3);  // runs 1 and 3 are consecutive undisturbed runs: they agree
    CHECK(r.settled);
    CHECK_FALSE(r.busy);
    const auto d = cli::delivered_speedups(r);
    CHECK(d.at("h").speedup == Approx(1.205));  // the busy run's 3.0 left out
    CHECK(d.at("h").runs == 2);
    CHECK(d.at("h").interval.hi == Approx(1.21));
  }
  SECTION("fewer than two undisturbed runs: busy, every configuration undecided") {
    Script s{{run({{"h", 2.0}, {"e", 1.0}}, true), run({{"h", 1.1}, {"e", 1.0}}),
              run({{"h", 4.0}, {"e", 1.0}}, true)}};
    const cli::Replication r = s(3);
    CHECK(s.calls == 3);
    CHECK(r.busy);
    CHECK_FALSE(r.settled);
    CHECK(r.undecided == std::set<std::string>{"e", "h"});
    CHECK(cli::runs_used(r) == std::vector<std::size_t>{1});
    const auto d = cli::delivered_speedups(r);
    CHECK(d.at("h").speedup == Approx(1.1));  // from the undisturbed run only
    CHECK_FALSE(d.at("h").decided);
  }
  SECTION("every run busy: the result is all of them, marked") {
    Script s{{run({{"h", 1.0}}, true), run({{"h", 2.0}}, true)}};
    const cli::Replication r = s(2);
    CHECK(r.busy);
    CHECK(cli::runs_used(r).size() == 2);
    CHECK(cli::delivered_speedups(r).at("h").speedup == Approx(1.5));
  }
  SECTION("at least two runs") {
    Script s{{run({{"h", 1.0}})}};
    CHECK_THROWS(s(1));
  }
}

TEST_CASE("final runs: passes apart in time are combined by their median") {
  // Each pass is a replication of two runs that agree, as ablate's passes usually are.
  const auto pass = [](std::map<std::string, double> a, std::map<std::string, double> b,
                       bool busy = false) {
    Script s{{run(std::move(a), busy), run(std::move(b), busy)}};
    return s(2);
  };
  SECTION("one pass is that pass") {
    const cli::Replication p = pass({{"h", 1.2}, {"e", 1.0}}, {{"h", 1.22}, {"e", 1.01}});
    const auto one = cli::delivered_over_passes({p});
    const auto own = cli::delivered_speedups(p);
    REQUIRE(one.size() == own.size());
    for (const auto& [c, d] : own) {
      CHECK(one.at(c).speedup == Approx(d.speedup));
      CHECK(one.at(c).runs == d.runs);
      CHECK(one.at(c).decided == d.decided);
      CHECK(one.at(c).interval.lo == Approx(d.interval.lo));
      CHECK(one.at(c).interval.hi == Approx(d.interval.hi));
    }
  }
  SECTION("the median of the passes; decided only where every pass is near it or in its band") {
    // h: one pass in a slower state of the machine (1.00 against 1.18-1.20): a tie against a
    // gain, undecided. e: three close passes. s: below csr in every pass, 9% apart: its band.
    const std::vector<cli::Replication> passes{
        pass({{"h", 1.00}, {"e", 1.30}, {"s", 0.80}}, {{"h", 1.01}, {"e", 1.31}, {"s", 0.81}}),
        pass({{"h", 1.20}, {"e", 1.32}, {"s", 0.90}}, {{"h", 1.21}, {"e", 1.33}, {"s", 0.91}}),
        pass({{"h", 1.18}, {"e", 1.29}, {"s", 0.88}}, {{"h", 1.19}, {"e", 1.30}, {"s", 0.89}})};
    const auto d = cli::delivered_over_passes(passes);
    CHECK(d.at("h").speedup == Approx(1.185));
    CHECK_FALSE(d.at("h").decided);
    CHECK(d.at("h").runs == 6);
    CHECK(d.at("h").per_run.size() == 6);
    CHECK(d.at("h").interval.lo == Approx(1.00));
    CHECK(d.at("h").interval.hi == Approx(1.21));
    CHECK(d.at("e").speedup == Approx(1.305));
    CHECK(d.at("e").decided);
    CHECK(d.at("s").speedup == Approx(0.885));
    CHECK(d.at("s").decided);
  }
  SECTION("a busy pass is left out; a configuration one pass did not time is undecided") {
    const std::vector<cli::Replication> passes{
        pass({{"h", 3.0}, {"e", 1.0}}, {{"h", 3.1}, {"e", 1.0}}, true),
        pass({{"h", 1.10}, {"e", 1.0}}, {{"h", 1.11}, {"e", 1.0}}),
        pass({{"h", 1.12}}, {{"h", 1.13}})};
    const auto d = cli::delivered_over_passes(passes);
    CHECK(d.at("h").speedup == Approx(1.115));  // the median of 1.105 and 1.125
    CHECK(d.at("h").runs == 4);
    CHECK(d.at("h").decided);
    CHECK(d.at("e").speedup == Approx(1.0));
    CHECK_FALSE(d.at("e").decided);
  }
  SECTION("every pass busy: all of them, undecided") {
    const std::vector<cli::Replication> passes{pass({{"h", 1.0}}, {{"h", 1.0}}, true),
                                               pass({{"h", 2.0}}, {{"h", 2.0}}, true)};
    const auto d = cli::delivered_over_passes(passes);
    CHECK(d.at("h").speedup == Approx(1.5));
    CHECK_FALSE(d.at("h").decided);
  }
}

TEST_CASE("final runs: a bench JSON gives each winner's speedup over the faster csr reference") {
  // Results in bench's order: the csr baseline, eigen, a failed rsb-tuned, the csr schedule, the
  // winner. Five rounds each, paired.
  json bench = {{"busy_warning", nullptr},
                {"disturbed_warning", nullptr},
                {"results",
                 {result(2.0, {2.0, 2.1, 1.9, 2.0, 2.2}),
                  result(1.5, {1.5, 1.5, 1.5, 1.5, 1.5}),
                  {{"impl", "rsb-tuned"}, {"error", "no rsb"}},
                  result(1.8, {1.8, 1.8, 1.8, 1.8, 1.8}),
                  result(1.0, {1.0, 0.9, 1.2, 1.0, 0.9})}}};
  cli::BenchLayout layout;
  layout.baseline = 0;
  layout.schedule = 3;
  layout.configs = {{"winner", 4}, {"returned-csr", 0}, {"failed", 2}, {"csr-schedule", 3}};
  cli::FinalRun f = cli::final_run_of(bench, layout);
  CHECK_FALSE(f.busy);
  CHECK(f.reference == "csr schedule");  // 1.8 against the baseline's 2.0
  CHECK(f.speedups.count("failed") == 0);
  CHECK(f.speedups.at("winner").speedup == Approx(1.8));
  CHECK(f.speedups.at("returned-csr").speedup == Approx(0.9));  // the slower reference
  CHECK(f.speedups.at("csr-schedule").speedup == Approx(1.0));
  // Per-round ratios 1.8 / {1.0, 0.9, 1.2, 1.0, 0.9}: 1.5 .. 2.0 (five rounds: min and max).
  REQUIRE(f.speedups.at("winner").interval);
  CHECK(f.speedups.at("winner").interval->lo == Approx(1.5));
  CHECK(f.speedups.at("winner").interval->hi == Approx(2.0));
  // Against itself every round is 1: within noise, exactly.
  CHECK(f.speedups.at("csr-schedule").interval->contains(1.0));

  // The baseline faster: it is the reference.
  bench["results"][3] = result(2.5, {2.5, 2.5, 2.5, 2.5, 2.5});
  f = cli::final_run_of(bench, layout);
  CHECK(f.reference == "csr baseline");
  CHECK(f.speedups.at("winner").speedup == Approx(2.0));
  // Rounds that do not pair (another count): no interval, the speedup still.
  bench["results"][4]["times_s"] = {1.0, 1.0};
  f = cli::final_run_of(bench, layout);
  CHECK_FALSE(f.speedups.at("winner").interval.has_value());
  CHECK(f.speedups.at("winner").speedup == Approx(2.0));
  // A busy or disturbed run says so.
  bench["disturbed_warning"] = "other processes disturbed 14 timed runs";
  f = cli::final_run_of(bench, layout);
  CHECK(f.busy);
  CHECK(f.busy_reason == "other processes disturbed 14 timed runs");
  bench["busy_warning"] = "the machine is busy";
  CHECK(cli::final_run_of(bench, layout).busy_reason == "the machine is busy");
  // No reference timed: no speedups.
  bench["results"][0] = {{"impl", "csr"}, {"error", "failed"}};
  bench["results"][3] = {{"impl", "gen:csr"}, {"error", "failed"}};
  CHECK(cli::final_run_of(bench, layout).speedups.empty());
}

namespace {

/// A run that timed the csr baseline in `base`, the csr schedule in `sched` and each
/// configuration in its time (medians only), read as final_run_of reads a bench JSON.
cli::FinalRun timed(double base, double sched, std::map<std::string, double> times, bool busy = false) {
  json results = json::array({result(base, {}), result(sched, {})});
  cli::BenchLayout layout;
  layout.baseline = 0;
  layout.schedule = 1;
  for (const auto& [c, t] : times) {
    layout.configs[c] = static_cast<int>(results.size());
    results.push_back(result(t, {}));
  }
  json bench = {{"busy_warning", busy ? json("scripted busy") : json()}, {"results", results}};
  return cli::final_run_of(bench, layout);
}

}  // namespace

TEST_CASE("final runs: one reference for every run, the faster over all of them") {
  SECTION("a run keeps the speedups over both references and can take either") {
    cli::FinalRun f = timed(2.0, 1.8, {{"w", 1.0}});
    CHECK(f.reference == "csr schedule");
    CHECK(f.speedups.at("w").speedup == Approx(1.8));
    CHECK(f.over_baseline.at("w").speedup == Approx(2.0));
    cli::use_reference(f, false);
    CHECK(f.reference == "csr baseline");
    CHECK(f.speedups.at("w").speedup == Approx(2.0));
    cli::use_reference(f, true);
    CHECK(f.speedups.at("w").speedup == Approx(1.8));
  }
  SECTION("a reference a run did not time leaves the run as it was") {
    cli::FinalRun f = timed(2.0, 1.8, {{"w", 1.0}});
    f.schedule_s.reset();
    f.over_schedule.clear();
    cli::use_reference(f, false);
    cli::use_reference(f, true);
    CHECK(f.reference == "csr baseline");
    CHECK(f.speedups.at("w").speedup == Approx(2.0));
  }
  SECTION("the median ratio over the undisturbed runs of every pass decides") {
    // Per run the faster of two near-tied references flips; over the runs the baseline is
    // faster (ratios 0.98, 1.05, 1.04): every run is read against it.
    cli::Replication a, b;
    a.runs = {timed(1.00, 0.98, {{"w", 1.0}}), timed(1.00, 1.05, {{"w", 1.0}}),
              timed(1.00, 0.50, {{"w", 1.0}}, true)};  // busy: not counted
    b.runs = {timed(1.00, 1.04, {{"w", 1.0}})};
    const auto faster = cli::schedule_faster_over({a, b});
    REQUIRE(faster);
    CHECK_FALSE(*faster);
    const auto common = cli::with_common_reference({a, b}, cli::schedule_faster_over({a, b}));
    for (const cli::Replication& r : common)
      for (const cli::FinalRun& f : r.runs) {
        CHECK(f.reference == "csr baseline");
        CHECK(f.speedups.at("w").speedup == Approx(1.0));
      }
    // The schedule faster in most runs: the schedule.
    b.runs = {timed(1.00, 0.90, {{"w", 1.0}}), timed(1.00, 0.95, {{"w", 1.0}})};
    CHECK(*cli::schedule_faster_over({a, b}));
    // A choice given: every run against it, whatever the runs say; none: unchanged.
    for (const cli::Replication& r : cli::with_common_reference({a, b}, false))
      for (const cli::FinalRun& f : r.runs) CHECK(f.reference == "csr baseline");
    const auto as_was = cli::with_common_reference({a, b}, std::nullopt);
    CHECK(as_was[0].runs[0].reference == "csr schedule");  // its own faster (0.98)
    CHECK(as_was[0].runs[1].reference == "csr baseline");
  }
  SECTION("MTTKRP's references are csf's, named so") {
    json results = json::array({result(2.0, {}), result(1.6, {}), result(1.0, {})});
    cli::BenchLayout layout;
    layout.shortcut = "csf";
    layout.baseline = 0;
    layout.schedule = 1;
    layout.configs = {{"w", 2}};
    cli::FinalRun f = cli::final_run_of(json{{"busy_warning", nullptr}, {"results", results}}, layout);
    CHECK(f.reference == "csf schedule");
    cli::use_reference(f, false);
    CHECK(f.reference == "csf baseline");
    CHECK(f.speedups.at("w").speedup == Approx(2.0));
    CHECK(cli::reference_name("csf", true) == "csf schedule");
  }
  SECTION("a run that timed one reference only counts for nothing unless no run timed both") {
    cli::FinalRun only_schedule = timed(1.0, 0.9, {{"w", 1.0}});
    only_schedule.baseline_s.reset();
    cli::Replication a;
    a.runs = {only_schedule, only_schedule};
    CHECK(*cli::schedule_faster_over({a}));
    a.runs.push_back(timed(1.0, 1.2, {{"w", 1.0}}));
    CHECK_FALSE(*cli::schedule_faster_over({a}));
    cli::Replication none;
    none.runs = {run({{"w", 1.0}})};  // no reference timed
    CHECK_FALSE(cli::schedule_faster_over({none}).has_value());
  }
  SECTION("the runs are judged again on the common reference") {
    // Against each run's own faster reference the winner reads 1.00x then 1.10x (two bands
    // apart, changed by 10%: undecided); against the baseline, faster over both, 1.10x twice.
    cli::Replication r;
    r.runs = {timed(1.10, 1.00, {{"w", 1.0}}), timed(1.10, 1.20, {{"w", 1.0}})};
    cli::judge(r);
    CHECK_FALSE(r.settled);
    CHECK(r.undecided == std::set<std::string>{"w"});
    const auto common = cli::with_common_reference({r}, cli::schedule_faster_over({r}));
    CHECK(common[0].settled);
    CHECK(common[0].undecided.empty());
    CHECK(cli::delivered_speedups(common[0]).at("w").speedup == Approx(1.1));
  }
  SECTION("judge on runs made by hand: the last two undisturbed runs decide") {
    cli::Replication r;
    r.runs = {run({{"h", 1.0}}), run({{"h", 1.2}}), run({{"h", 1.0}}, true), run({{"h", 1.21}})};
    cli::judge(r);  // 1.2 and 1.21 agree; the busy 1.0 between them is skipped
    CHECK(r.settled);
    CHECK_FALSE(r.busy);
    CHECK(r.undecided.empty());
    r.runs.pop_back();  // 1.0 and 1.2: 20% apart and in two bands
    cli::judge(r);
    CHECK_FALSE(r.settled);
    CHECK(r.undecided == std::set<std::string>{"h"});
  }
}
