// Unit "adaptive": the adaptive plan's policy (tune/adaptive.hpp) on scripted timings: a clear
// winner is found and judged on fresh pairs, an all-tied set settles on csr, a nominee that
// fails verification never serves a call, the budget stops exploration, overlapping calls.
#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <set>

#include "waco/tune/adaptive.hpp"
#include "waco/tune/in_process.hpp"

using waco::tuning::AdaptiveOptions;
using waco::tuning::AdaptivePolicy;

namespace {

/// Serves calls until the policy settles (or `max_calls`): arm k takes time(k) seconds (with a
/// little seeded noise); every verification passes unless `bad` says otherwise. Returns the
/// arms that served results to the caller.
std::set<int> drive(AdaptivePolicy& p, const std::function<double(int)>& time, int max_calls,
                    const std::set<int>& bad = {}) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0.97, 1.03);
  std::set<int> served;
  for (int c = 0; c < max_calls && !p.settled(); ++c) {
    const AdaptivePolicy::Step s = p.next();
    if (s.verify) {
      CHECK(s.arm == 0);  // csr's result is returned on a verification call
      p.record(0, time(0) * noise(rng));
      p.verified(s.verify, bad.count(s.verify) == 0, time(s.verify), "mismatch");
    } else {
      p.record(s.arm, time(s.arm) * noise(rng), s.warm);
    }
    served.insert(s.arm);
  }
  return served;
}

AdaptivePolicy ready_policy(int nominees, AdaptiveOptions o) {
  AdaptivePolicy p(nominees, o);
  for (int k = 1; k <= nominees; ++k) p.ready(k);
  return p;
}

}  // namespace

TEST_CASE("adaptive: a clear winner is found, judged on fresh pairs, and served") {
  AdaptiveOptions o;
  o.expected_calls = 100000;
  AdaptivePolicy p = ready_policy(4, o);
  // csr 10 us; nominee 3 is 1.5x faster, the others slower.
  const auto t = [](int arm) { return arm == 0 ? 10e-6 : arm == 3 ? 6.6e-6 : arm == 1 ? 12e-6 : 25e-6; };
  drive(p, t, 10000);
  REQUIRE(p.settled());
  CHECK(p.verdict() == "gain");
  CHECK(p.choice() == 3);
  REQUIRE(p.speedup());
  CHECK(*p.speedup() == Approx(10.0 / 6.6).epsilon(0.05));
  // A few hundred calls at most: 4 verifications, two rungs, 16 judged pairs.
  CHECK(p.calls() < 200);
  CHECK(p.exploring_calls() < p.calls());
  REQUIRE(p.break_even_calls());
  CHECK(*p.break_even_calls() >= 0.0);
  CHECK(*p.break_even_calls() < 100.0);
  // Once settled every call is the winner's, and nothing more is recorded as tuning.
  const double cost = p.cost_seconds();
  for (int c = 0; c < 50; ++c) {
    const AdaptivePolicy::Step s = p.next();
    CHECK(s.arm == 3);
    CHECK(s.verify == 0);
    p.record(s.arm, 6.6e-6);
  }
  CHECK(p.cost_seconds() == cost);
  const nlohmann::json j = p.to_json();
  CHECK(j.at("verdict") == "gain");
  CHECK(j.at("arms").size() == 5);
  CHECK(j.at("judged").at("rounds") == o.judge_rounds);
}

TEST_CASE("adaptive: kernels long enough for the caches to matter are timed after a warm call of "
          "their own, so that one fast when warm but slow after another format's call wins") {
  AdaptiveOptions o;
  o.expected_calls = 1000000;
  AdaptivePolicy p = ready_policy(2, o);
  // csr 100 us; nominee 1 80 us after a call of its own, 150 us after another arm's (its data
  // evicted); nominee 2 120 us either way.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> noise(0.98, 1.02);
  int previous = -1, timed_after_other = 0, warm_nominee_calls = 0;
  for (int c = 0; c < 20000 && !p.settled(); ++c) {
    const AdaptivePolicy::Step s = p.next();
    if (s.verify) {
      p.record(0, 100e-6, s.warm);
      p.verified(s.verify, true, 100e-6);
      previous = -1;
      continue;
    }
    const double t = s.arm == 0 ? 100e-6 : s.arm == 2 ? 120e-6 : previous == 1 ? 80e-6 : 150e-6;
    if (s.arm != 0 && !s.warm && previous != s.arm) ++timed_after_other;
    if (s.arm != 0 && s.warm) ++warm_nominee_calls;
    p.record(s.arm, t * noise(rng), s.warm);
    previous = s.arm;
  }
  REQUIRE(p.settled());
  CHECK(p.verdict() == "gain");
  CHECK(p.choice() == 1);
  CHECK(*p.speedup() == Approx(100.0 / 80.0).epsilon(0.05));
  CHECK(timed_after_other == 0);  // every timed nominee call followed a warm one of its own
  CHECK(warm_nominee_calls > 0);
  // The warm calls are exploration's cost (nominee 2's beyond csr's), not samples.
  CHECK(p.cost_seconds() > 0.0);
  // Below warm_above_s and without block warm-ups, no warm calls.
  AdaptiveOptions small = o;
  small.nominee_warmup = 0;
  AdaptivePolicy q = ready_policy(1, small);
  for (int c = 0; c < 2000 && !q.settled(); ++c) {
    const AdaptivePolicy::Step s = q.next();
    CHECK_FALSE(s.warm);
    if (s.verify) {
      q.record(0, 10e-6);
      q.verified(s.verify, true, 8e-6);
    } else {
      q.record(s.arm, s.arm == 0 ? 10e-6 : 8e-6);
    }
  }
  CHECK(q.verdict() == "gain");
}

TEST_CASE("adaptive: nominees are tried one block after the other, each block's first calls "
          "warming the kernel up, so that one slow for its first calls after a while wins") {
  AdaptiveOptions o;
  o.expected_calls = 1000000;
  AdaptivePolicy p = ready_policy(2, o);
  // csr 10 us; nominee 1 8 us, but 30 us for its first 5 calls after the other nominee ran
  // (as a kernel that has not run for a while); nominee 2 12 us.
  int last_nominee = 0, run_of_one = 0, switches = 0, previous_arm = -1;
  for (int c = 0; c < 20000 && !p.settled(); ++c) {
    const AdaptivePolicy::Step s = p.next();
    if (s.verify) {
      p.record(0, 10e-6);
      p.verified(s.verify, true, 10e-6);
      continue;
    }
    if (s.arm != 0) {
      if (s.arm != last_nominee) {
        if (last_nominee != 0) ++switches;
        run_of_one = 0;
      }
      last_nominee = s.arm;
      ++run_of_one;
    }
    if (s.arm != 0 && previous_arm != 0 && previous_arm != s.arm) CHECK(s.warm);
    const double t = s.arm == 0 ? 10e-6 : s.arm == 2 ? 12e-6 : run_of_one <= 5 ? 30e-6 : 8e-6;
    p.record(s.arm, t, s.warm);
    previous_arm = s.arm;
  }
  REQUIRE(p.settled());
  CHECK(p.verdict() == "gain");
  CHECK(p.choice() == 1);
  // One block per nominee and rung, not a call of each in turn.
  CHECK(switches <= 4);
}

TEST_CASE("adaptive: nominees tied with csr settle on csr") {
  AdaptiveOptions o;
  o.expected_calls = 100000;
  AdaptivePolicy p = ready_policy(3, o);
  drive(p, [](int) { return 10e-6; }, 10000);
  REQUIRE(p.settled());
  CHECK(p.verdict() == "no-gain");
  CHECK(p.choice() == 0);
  CHECK(p.speedup() == 1.0);
  CHECK_FALSE(p.break_even_calls());
}

TEST_CASE("adaptive: a nominee that fails verification never serves a call") {
  AdaptiveOptions o;
  o.expected_calls = 100000;
  AdaptivePolicy p = ready_policy(2, o);
  // Nominee 2 would be the fastest, but its result is wrong.
  const std::set<int> served =
      drive(p, [](int arm) { return arm == 2 ? 2e-6 : arm == 1 ? 7e-6 : 10e-6; }, 10000, {2});
  CHECK(served.count(2) == 0);
  REQUIRE(p.settled());
  CHECK(p.choice() == 1);
  CHECK(p.to_json().at("arms").at(2).at("left").get<std::string>().find("verification") == 0);
}

TEST_CASE("adaptive: nominees that all fail or are slow settle on csr") {
  AdaptiveOptions o;
  o.expected_calls = 100000;
  {
    AdaptivePolicy p(2, o);
    p.failed(1, "format refused");
    p.failed(2, "not compiled");
    CHECK(p.next().arm == 0);
    CHECK(p.settled());
    CHECK(p.verdict() == "no-gain");
  }
  {
    AdaptivePolicy p = ready_policy(4, o);
    const std::set<int> served = drive(p, [](int arm) { return arm == 0 ? 10e-6 : 20e-6; }, 10000);
    CHECK(p.verdict() == "no-gain");
    // Slow nominees leave after the first rung: few calls were spent on them.
    CHECK(p.exploring_calls() <= 4 + 4 * (o.nominee_warmup + o.rung_calls));
  }
  CHECK(AdaptivePolicy(0, o).settled());
}

TEST_CASE("adaptive: csr serves while nominees are being prepared") {
  AdaptiveOptions o;
  o.expected_calls = 100000;
  AdaptivePolicy p(2, o);
  for (int c = 0; c < 20; ++c) {
    const AdaptivePolicy::Step s = p.next();
    CHECK(s.arm == 0);
    CHECK(s.verify == 0);
    CHECK(s.waiting);  // nothing to explore: the run time serves such calls quietly for a while
    p.record(0, 10e-6);
  }
  p.ready(2);
  const AdaptivePolicy::Step s = p.next();
  CHECK(s.verify == 2);
  CHECK_FALSE(s.waiting);
  // While 2's verification is in flight and 1 is not ready, csr serves.
  const AdaptivePolicy::Step w = p.next();
  CHECK(w.arm == 0);
  CHECK(w.verify == 0);
  CHECK(w.waiting);
  p.verified(2, true, 9e-6, "");
  p.failed(1, "its format refused");
  // The verification done and 1 gone: the rungs begin, csr's call first, not a waiting one.
  const AdaptivePolicy::Step r = p.next();
  CHECK(r.arm == 0);
  CHECK_FALSE(r.waiting);
}

TEST_CASE("adaptive: the budget stops exploration") {
  SECTION("expected calls that cannot pay settle on csr") {
    AdaptiveOptions o;
    o.expected_calls = 50;  // 10% of 50 calls: 5 csr calls of budget
    AdaptivePolicy p = ready_policy(4, o);
    drive(p, [](int arm) { return arm == 0 ? 10e-6 : 40e-6; }, 1000);
    CHECK(p.settled());
    CHECK(p.verdict() == "not-worth-it");
    CHECK(p.choice() == 0);
  }
  SECTION("conversion charged beyond the budget") {
    AdaptiveOptions o;
    o.expected_calls = 1000;
    AdaptivePolicy p = ready_policy(1, o);
    p.record(0, 10e-6);
    p.charge(1.0, "compile");  // a second of compiling against 1000 calls of 10 us
    CHECK(p.next().arm == 0);
    CHECK(p.verdict() == "not-worth-it");
  }
  SECTION("a preparation step that overran its estimate still has its nominee tried") {
    AdaptiveOptions o;
    o.expected_calls = 1000;  // 10% of 1000 calls of 10 us: a budget of 1 ms
    for (const bool estimated : {false, true}) {
      AdaptivePolicy p(1, o);
      p.record(0, 10e-6);
      p.charge(1.2e-3, "choice", waco::tuning::Cost::Choice);  // estimated at 0.8 ms
      CHECK(p.charged(waco::tuning::Cost::Choice) == Approx(1.2e-3));
      if (estimated) p.overran(0.8e-3, 1.2e-3);
      p.ready(1);
      if (!estimated) {
        CHECK(p.next().verify == 0);
        CHECK(p.verdict() == "not-worth-it");
        continue;
      }
      // The overrun (0.4 ms) is spent either way: the nominee prepared is verified and tried,
      // and exploring stops when the rest of the cost passes the budget.
      const std::set<int> served = drive(p, [](int arm) { return arm == 0 ? 10e-6 : 5e-6; }, 1000);
      CHECK(served.count(1) == 1);
      CHECK(p.verdict() == "gain");
      // The choice's 0.4 ms beyond its estimate and the verification's 5 us (spent either way).
      CHECK(p.to_json().at("overrun_s").get<double>() == Approx(0.405e-3));
    }
    AdaptivePolicy slow(1, o);
    slow.record(0, 10e-6);
    slow.charge(1.2e-3, "choice", waco::tuning::Cost::Choice);
    slow.overran(0.8e-3, 1.2e-3);
    slow.overran(1e-3, 0.5e-3);  // under its estimate: nothing
    slow.ready(1);
    drive(slow, [](int arm) { return arm == 0 ? 10e-6 : 14e-6; }, 1000);
    CHECK(slow.verdict() != "gain");
    CHECK(slow.choice() == 0);
    // A slower nominee's calls cost what the budget left (0.2 ms of 4 us each): ~50 calls.
    CHECK(slow.cost_seconds() - 0.4e-3 - 14e-6 <= 1e-3 + 2 * 4e-6);
  }
  SECTION("a verification that takes what is left of the budget still has its nominee timed") {
    AdaptiveOptions o;
    o.expected_calls = 1000;  // 10% of 1000 calls of 10 us: a budget of 1 ms
    AdaptivePolicy p(1, o);
    p.record(0, 10e-6);
    p.charge(0.7e-3, "choice", waco::tuning::Cost::Choice);
    p.charge(0.2e-3, "nominee 1: format", waco::tuning::Cost::Format);
    p.ready(1);
    const AdaptivePolicy::Step v = p.next();
    REQUIRE(v.verify == 1);
    p.record(0, 10e-6);
    // Its first run 0.3 ms (cold), copying and comparing 0.1 ms: 1.3 ms spent of 1 ms.
    p.verified(1, true, 0.3e-3, "", 0.1e-3);
    CHECK(p.charged(waco::tuning::Cost::Verify) == Approx(0.4e-3));
    CHECK(p.cost_seconds() == Approx(1.3e-3));
    CHECK_FALSE(p.settled());
    const std::set<int> served = drive(
        p, [](int arm) { return arm == 0 ? 10e-6 : 5e-6; }, 1000);
    CHECK(served.count(1) == 1);
    CHECK(p.verdict() == "gain");
    CHECK(p.to_json().at("overrun_s").get<double>() == Approx(0.4e-3));
    // A nominee slower than csr after such a verification: its calls cost what is over the
    // budget, and the plan stops at once.
    AdaptivePolicy slow(1, o);
    slow.record(0, 10e-6);
    slow.charge(0.9e-3, "choice", waco::tuning::Cost::Choice);
    slow.ready(1);
    REQUIRE(slow.next().verify == 1);
    slow.record(0, 10e-6);
    slow.verified(1, true, 0.3e-3, "", 0.1e-3);
    drive(
        slow, [](int arm) { return arm == 0 ? 10e-6 : 14e-6; }, 1000);
    CHECK(slow.verdict() != "gain");
    CHECK(slow.choice() == 0);
    CHECK(slow.cost_seconds() - 0.4e-3 <= 1e-3 + 2 * 4e-6);
  }
  SECTION("the short list's order when the budget affords a nominee but not the model's choice") {
    // 10% of N calls of 10 us: N = 1000 gives 1 ms. The model's choice 1.5 ms, reading the list
    // 0.4 ms, a nominee's format and kernel 0.3 ms after either.
    const auto by_list_order = [](std::int64_t expected, double spent) {
      AdaptiveOptions o;
      o.expected_calls = expected;
      AdaptivePolicy p(1, o);
      p.record(0, 10e-6);
      if (spent > 0) p.charge(spent, "lookup");
      return p.chooses_by_list_order(1.5e-3, 0.4e-3, 0.3e-3);
    };
    CHECK(by_list_order(1000, 0));        // 0.7 ms fits 1 ms, 1.8 does not
    CHECK_FALSE(by_list_order(2000, 0));  // 2 ms: the model's choice and its nominee fit
    CHECK(by_list_order(2000, 0.5e-3));   // ... not after 0.5 ms spent on the tuning cache
    CHECK_FALSE(by_list_order(600, 0));   // 0.6 ms: not even the list and a nominee
    CHECK_FALSE(by_list_order(0, 0));     // no expected calls: the budget grows, the model's
    // Once the list is read (read = 0), its order is cheaper still.
    AdaptiveOptions o;
    o.expected_calls = 500;
    AdaptivePolicy p(1, o);
    p.record(0, 10e-6);
    CHECK_FALSE(p.chooses_by_list_order(1.5e-3, 0.4e-3, 0.3e-3));
    CHECK(p.chooses_by_list_order(1.5e-3, 0.0, 0.3e-3));
  }
  SECTION("without expected calls, exploring waits for the calls to pay") {
    AdaptiveOptions o;  // share 0.1 of the calls so far
    AdaptivePolicy p = ready_policy(1, o);
    p.record(0, 10e-6);
    p.charge(1e-3, "conversion");  // 100 csr calls: explorable after ~1000 calls
    int first_exploring = -1;
    for (int c = 0; c < 3000 && first_exploring < 0; ++c) {
      const AdaptivePolicy::Step s = p.next();
      if (s.verify != 0 || s.arm != 0) first_exploring = c;
      if (s.verify) {
        p.record(0, 10e-6);
        p.verified(s.verify, true, 10e-6);
      } else {
        p.record(s.arm, 10e-6);
      }
    }
    CHECK_FALSE(p.settled());
    CHECK(first_exploring > 900);
    CHECK(first_exploring < 1100);
  }
}

TEST_CASE("adaptive: overlapping calls hand out a verification once") {
  AdaptiveOptions o;
  o.expected_calls = 100000;
  AdaptivePolicy p = ready_policy(1, o);
  const AdaptivePolicy::Step a = p.next(), b = p.next();
  CHECK(a.verify == 1);
  CHECK(b.verify == 0);
  CHECK(b.arm == 0);
  // Recorded out of order: b ends first.
  p.record(0, 10e-6);
  p.record(0, 10e-6);
  p.verified(1, true, 5e-6);
  drive(p, [](int arm) { return arm == 0 ? 10e-6 : 5e-6; }, 10000);
  CHECK(p.verdict() == "gain");
}

TEST_CASE("adaptive: a nominee far slower than csr is abandoned after two calls") {
  AdaptiveOptions o;
  o.expected_calls = 100000;
  AdaptivePolicy p = ready_policy(2, o);
  // Nominee 1 is 10x slower: it must not serve its whole rung.
  drive(p, [](int arm) { return arm == 0 ? 10e-6 : arm == 1 ? 100e-6 : 5e-6; }, 10000);
  CHECK(p.verdict() == "gain");
  CHECK(p.choice() == 2);
  const nlohmann::json j = p.to_json();
  CHECK(j.at("arms").at(1).at("calls") == 2);
  CHECK(j.at("arms").at(1).at("left").get<std::string>().find("abandoned") == 0);
}

TEST_CASE("adaptive: the cost breakdown adds up to the cost") {
  AdaptiveOptions o;
  o.expected_calls = 100000;
  AdaptivePolicy p(2, o);
  p.record(0, 10e-6);
  p.charge(2e-3, "choice", waco::tuning::Cost::Choice);
  p.charge(1e-4, "nominee 1: format", waco::tuning::Cost::Format);
  p.charge(5e-5, "nominee 1: kernel loaded", waco::tuning::Cost::Load);
  p.charge(1e-6, {}, waco::tuning::Cost::Overhead);
  p.ready(1);
  p.ready(2);
  drive(p, [](int arm) { return arm == 0 ? 10e-6 : arm == 1 ? 5e-6 : 12e-6; }, 10000);
  REQUIRE(p.verdict() == "gain");
  const nlohmann::json b = p.to_json().at("cost_breakdown");
  double sum = 0.0;
  for (const char* k : {"choice", "format", "load", "compile", "verify", "overhead", "other",
                        "selection", "judgment"})
    sum += b.at(k).get<double>();
  CHECK(sum == Approx(p.cost_seconds()).margin(1e-12));
  CHECK(b.at("total").get<double>() == Approx(p.cost_seconds()));
  CHECK(b.at("choice").get<double>() == Approx(2e-3));
  CHECK(b.at("verify").get<double>() == Approx(5e-6 + 12e-6));  // drive's verification runs
  CHECK(b.at("judgment").get<double>() < 0.0);  // the winner's judged calls gained
  CHECK(b.at("in_csr_calls").at("choice").get<double>() == Approx(200.0).epsilon(0.05));
  CHECK(b.at("judgment_calls") >= o.judge_rounds);  // its calls in the judgment, paired or not
  CHECK(p.to_json().at("settled_at_call") == p.calls());
}

TEST_CASE("adaptive: without expected calls, the calls until the next step fits") {
  AdaptiveOptions o;  // share 0.1 of the calls so far
  AdaptivePolicy p(1, o);
  CHECK(p.calls_until_affordable(1.0) == 0);  // no csr call timed yet: nothing to say
  p.next();
  p.record(0, 10e-6);
  // 1 ms of work: 100 csr calls, affordable after 1,000 calls; one call served so far.
  CHECK(p.calls_until_affordable(1e-3) == 999);
  p.skip(998);  // served by csr untimed
  CHECK(p.calls() == 999);
  CHECK(p.calls_until_affordable(1e-3) == 1);
  p.skip(1);
  CHECK(p.calls_until_affordable(1e-3) == 0);
  CHECK(p.cost_seconds() == 0.0);
  // With expected calls the budget does not grow: nothing to wait for.
  o.expected_calls = 10;
  AdaptivePolicy q(1, o);
  q.next();
  q.record(0, 10e-6);
  CHECK(q.calls_until_affordable(1.0) == 0);
}

TEST_CASE("adaptive: over budget, the wait amortizes the next look at the budget") {
  AdaptiveOptions o;  // share 0.1 of the calls so far
  AdaptivePolicy p(1, o);
  p.next();
  p.record(0, 0.25e-6);  // csr calls of a quarter microsecond: each adds 25 ns to the budget
  CHECK(p.calls_to_wait(0.0, 1e-6) == 0);  // within budget: no wait, whatever a look costs
  p.charge(1e-6, "a step");  // 1 us: paid after 40 calls, one of them served ...
  CHECK(p.calls_until_affordable(0.0) == 39);
  CHECK(p.calls_to_wait(0.0, 0.0) == 39);
  // ... but a look costing 1 us would spend all they add: ten times as many calls instead.
  CHECK(p.calls_to_wait(0.0, 1e-6) == 400);
  CHECK(p.calls_to_wait(0.0, 1e-8) == 39);  // a cheap look: the cost decides
  // Work to come: until it fits (0.49 us more: 20 calls more), and as long for a costly look.
  CHECK(p.calls_to_wait(0.49e-6, 1e-8) == 59);
  CHECK(p.calls_to_wait(0.49e-6, 1e-6) == 400);
  // With expected calls the budget does not grow: nothing to wait for.
  o.expected_calls = 10;
  AdaptivePolicy q(1, o);
  q.next();
  q.record(0, 0.25e-6);
  q.charge(1e-6, "a step");
  CHECK(q.calls_to_wait(0.0, 1e-6) == 0);
}

TEST_CASE("adaptive: a decision made before settles on csr at once as no-gain") {
  AdaptiveOptions o;
  o.expected_calls = 100000;
  AdaptivePolicy p(3, o);
  p.record(0, 10e-6);
  p.no_gain("the tuning cache's decision");
  CHECK(p.settled());
  CHECK(p.verdict() == "no-gain");
  CHECK(p.choice() == 0);
  CHECK(p.speedup() == 1.0);
  CHECK(p.to_json().dump().find("the tuning cache's decision") != std::string::npos);
  p.not_worth_it("later");  // settled once: nothing changes
  CHECK(p.verdict() == "no-gain");
}

namespace {

/// Runs one recheck of a settled gain to its end (or `max_calls`): `time(arm, previous)` is a
/// call's seconds given the arm of the call before it (-1: none); `served` counts the calls the
/// chosen kernel served between rechecks. Returns the calls it took.
int recheck(AdaptivePolicy& p, const std::function<double(int, int)>& time, int& previous,
            std::int64_t& served, int max_calls = 100000) {
  REQUIRE(p.recheck_in() > 0);
  served += p.recheck_in();  // the calls the chosen kernel served before it
  p.start_recheck(served);
  int calls = 0;
  for (; calls < max_calls && p.rechecking(); ++calls) {
    const AdaptivePolicy::Step s = p.next();
    CHECK(s.verify == 0);
    p.record(s.arm, time(s.arm, previous), s.warm);
    previous = s.arm;
  }
  return calls;
}

/// A plan of one nominee (1,000,000 expected calls, `o`'s other options) explored until it
/// settles (at most 10,000 calls): `time(arm, previous)` as in recheck(); a verification's call
/// is csr's (10 us). `o` gets the expected calls.
AdaptivePolicy explored(AdaptiveOptions& o, const std::function<double(int, int)>& time, int& previous) {
  o.expected_calls = 1000000;
  AdaptivePolicy p = ready_policy(1, o);
  for (int c = 0; c < 10000 && !p.settled(); ++c) {
    const AdaptivePolicy::Step s = p.next();
    if (s.verify) {
      p.record(0, 10e-6);
      p.verified(s.verify, true, 10e-6);
      previous = 0;
      continue;
    }
    p.record(s.arm, time(s.arm, previous), s.warm);
    previous = s.arm;
  }
  return p;
}

}  // namespace

TEST_CASE("adaptive: a gain judged on alternating calls that does not hold in blocks of the chosen "
          "kernel's calls is rechecked twice and csr serves again") {
  // csr 10 us; the nominee 8 us right after a csr call, 12 us after one of its own (a parallel
  // kernel beside a serial csr whose data the other core holds, say): exploration's pairs, each
  // a nominee call after a csr call, judge it 1.25x faster; the caller's calls of it run at 12 us.
  const auto time = [](int arm, int before) { return arm == 0 ? 10e-6 : before == 0 ? 8e-6 : 12e-6; };
  AdaptiveOptions o;
  int previous = -1;
  AdaptivePolicy p = explored(o, time, previous);
  REQUIRE(p.verdict() == "gain");
  CHECK(p.choice() == 1);
  CHECK(p.recheck_in() >= o.recheck_first);
  previous = 1;  // the chosen kernel served the calls since
  std::int64_t served = 0;
  recheck(p, time, previous, served);
  // The first recheck doubts; the second, at once, confirms: csr serves again.
  CHECK(p.to_json().at("rechecks").size() == 2);
  CHECK(p.reverted());
  CHECK(p.verdict() == "no-gain");
  CHECK(p.choice() == 0);
  CHECK(*p.speedup() == 1.0);
  CHECK_FALSE(p.break_even_calls());
  CHECK(p.recheck_in() == 0);
  const nlohmann::json j = p.to_json();
  CHECK(j.at("rechecks").at(0).at("held").is_null());
  CHECK(j.at("rechecks").at(1).at("held") == false);
  CHECK(j.at("rechecks").at(1).at("ratio_median").get<double>() == Approx(1.2));
  CHECK(j.at("reverted") == true);
  for (int c = 0; c < 20; ++c) CHECK(p.next().arm == 0);
}

TEST_CASE("adaptive: a gain that holds is rechecked ever less often, each recheck a small share of "
          "the calls since the last, and noise does not revert it") {
  for (const double gain : {1.5, 1.05}) {
    AdaptiveOptions o;
    o.expected_calls = 1000000;
    AdaptivePolicy p = ready_policy(2, o);
    // csr 10 us, nominee 2 faster by `gain`, nominee 1 slower; every call +-3% noise (seeded).
    std::mt19937 rng(11);
    std::uniform_real_distribution<double> noise(0.97, 1.03);
    const auto time = [&](int arm, int) {
      return (arm == 0 ? 10e-6 : arm == 2 ? 10e-6 / gain : 13e-6) * noise(rng);
    };
    drive(p, [&](int arm) { return time(arm, 0); }, 10000);
    REQUIRE(p.verdict() == "gain");
    REQUIRE(p.choice() == 2);
    int previous = 2;
    std::int64_t in = p.recheck_in(), csr_calls = 0, served = 0;
    for (int k = 0; k < 12; ++k) {
      INFO("gain " << gain << ", recheck " << k);
      REQUIRE(in > 0);
      const std::int64_t before = p.calls();
      const int calls = recheck(p, time, previous, served);
      // Each recheck's call counts the calls served without the policy between.
      CHECK(p.to_json().at("rechecks").back().at("at_call").get<std::int64_t>() == before + calls + served);
      const std::int64_t csr_now = p.to_json().at("recheck_csr_calls").get<std::int64_t>();
      CHECK(calls <= in / 10);  // a recheck is at most a tenth of the calls before it
      CHECK(csr_now - csr_calls == calls / 2);
      csr_calls = csr_now;
      CHECK_FALSE(p.rechecking());
      CHECK_FALSE(p.reverted());
      CHECK(p.choice() == 2);
      CHECK(p.verdict() == "gain");
      const std::int64_t next = p.recheck_in();
      CHECK(next >= in * o.recheck_growth);
      in = next;
    }
    const nlohmann::json j = p.to_json();
    CHECK(j.at("rechecks").size() == 12);
    for (const auto& r : j.at("rechecks")) CHECK(r.at("held") == true);
  }
}

TEST_CASE("adaptive: once a recheck holds, the speedup reported is the one measured in blocks of "
          "the chosen kernel's calls, and the break-even follows it") {
  // csr 10 us; the nominee 7 us right after a csr call, 9 us after one of its own: exploration's
  // alternating pairs judge it ~1.43x, the caller's consecutive calls run it at 1.11x.
  const auto time = [](int arm, int before) { return arm == 0 ? 10e-6 : before == 0 ? 7e-6 : 9e-6; };
  AdaptiveOptions o;
  int previous = -1;
  AdaptivePolicy p = explored(o, time, previous);
  REQUIRE(p.verdict() == "gain");
  CHECK(*p.speedup() == Approx(10.0 / 7.0).epsilon(0.01));
  CHECK_FALSE(p.speedup_from_rechecks());
  CHECK(p.to_json().at("speedup_from") == "judgment");
  const double judged_be = *p.break_even_calls();
  previous = 1;
  std::int64_t served = 0;
  recheck(p, time, previous, served);
  CHECK(p.to_json().at("rechecks").size() == 1);
  CHECK(p.to_json().at("rechecks").at(0).at("held") == true);
  CHECK(p.verdict() == "gain");
  CHECK(p.speedup_from_rechecks());
  CHECK(*p.speedup() == Approx(10.0 / 9.0));
  CHECK(p.to_json().at("speedup_from") == "rechecks");
  CHECK(p.to_json().at("speedup").get<double>() == Approx(10.0 / 9.0));
  // The same cost over a third of the per-call gain: three times the calls.
  CHECK(*p.break_even_calls() == Approx(judged_be * 3.0).epsilon(0.01));
  // A later recheck pools its ratios with the first's.
  recheck(p, [](int arm, int) { return arm == 0 ? 10e-6 : 8e-6; }, previous, served);
  CHECK(p.to_json().at("rechecks").size() == 2);
  CHECK(*p.speedup() == Approx(1.0 / 0.85));
}

TEST_CASE("adaptive: rechecks are off on request, and csr's no-gain is never rechecked") {
  AdaptiveOptions o;
  o.expected_calls = 1000000;
  o.recheck = false;
  AdaptivePolicy p = ready_policy(1, o);
  drive(p, [](int arm) { return arm == 0 ? 10e-6 : 6e-6; }, 10000);
  REQUIRE(p.verdict() == "gain");
  CHECK(p.recheck_in() == 0);
  AdaptivePolicy q = ready_policy(1, AdaptiveOptions{});
  drive(q, [](int) { return 10e-6; }, 10000);
  REQUIRE(q.verdict() == "no-gain");
  CHECK(q.recheck_in() == 0);
}

// ------------------------------------------------------------------------------------------------
// A measured plan's gain checked in the calling process (tune/in_process.hpp), on a scripted clock.

namespace {

/// check_in_process with calls that advance a scripted clock: `chosen_s(i)` for the chosen
/// kernel's i-th call, csr always `csr_s`.
waco::tuning::InProcessCheck scripted_check(const std::function<double(int)>& chosen_s,
                                            double csr_s) {
  double t = 0;
  int i = 0;
  waco::tuning::InProcessOptions o;
  o.clock = [&t] { return t; };
  return waco::tuning::check_in_process([&](int) { t += chosen_s(i++); }, [&](int) { t += csr_s; },
                                        o);
}

}  // namespace

TEST_CASE("in process: a faster kernel holds on one check, its speedup the blocks' median ratio") {
  const auto c = scripted_check([](int) { return 90e-6; }, 100e-6);
  CHECK(c.held);
  CHECK(c.checks == 1);
  CHECK(c.block_calls == 20);  // 2 ms of csr's 100 us calls
  CHECK(c.ratios.size() == 12);
  CHECK(c.speedup() == Approx(1.0 / 0.9));
  CHECK(c.csr_call_s == Approx(100e-6));
  CHECK(c.to_json().at("held") == true);
}

TEST_CASE("in process: a kernel not faster than csr is checked twice and does not hold") {
  const auto c = scripted_check([](int) { return 105e-6; }, 100e-6);
  CHECK_FALSE(c.held);
  CHECK(c.checks == 2);
  CHECK(c.ratios.size() == 24);
  CHECK(c.speedup() == Approx(1.0 / 1.05));
  // Tied: not below 1 either.
  CHECK_FALSE(scripted_check([](int) { return 100e-6; }, 100e-6).held);
}

TEST_CASE("in process: a doubtful first check is decided on both checks pooled") {
  // The first check's 240 calls of the chosen kernel at 101 us, then 80 us: pooled median
  // ratio (1.01 + 0.80) / 2 < 1.
  const auto c = scripted_check([](int i) { return i < 240 ? 101e-6 : 80e-6; }, 100e-6);
  CHECK(c.held);
  CHECK(c.checks == 2);
  CHECK(c.speedup() == Approx(2.0 / 1.81));
  // A slow second check (the same 101 us) does not hold.
  CHECK_FALSE(scripted_check([](int) { return 101e-6; }, 100e-6).held);
}

TEST_CASE("in process: the rounds go round the operand placements, both blocks of a round on one") {
  double t = 0;
  std::vector<int> chosen_on(3, 0), csr_on(3, 0);
  waco::tuning::InProcessOptions o;
  o.clock = [&t] { return t; };
  o.placements = 3;
  // The chosen kernel is slower than csr on placement 1 only: 4 of 12 rounds.
  const auto c = waco::tuning::check_in_process(
      [&](int p) { ++chosen_on.at(p); t += p == 1 ? 120e-6 : 90e-6; },
      [&](int p) { ++csr_on.at(p); t += 100e-6; }, o);
  CHECK(c.placements == 3);
  CHECK(c.held);
  CHECK(c.checks == 1);
  CHECK(c.speedup() == Approx(1.0 / 0.9));
  CHECK(chosen_on == std::vector<int>{80, 80, 80});
  CHECK(csr_on[1] == 80);
  CHECK(csr_on[0] > 80);  // the estimate's calls
}

TEST_CASE("in process: long calls take fewer rounds, never fewer than the minimum") {
  // csr at 30 ms a call: blocks of 4 calls, a pair of blocks ~0.24 s, so 4 rounds in 1 s.
  const auto c = scripted_check([](int) { return 27e-3; }, 30e-3);
  CHECK(c.block_calls == 4);
  CHECK(c.ratios.size() == 4);
  CHECK(c.held);
  CHECK(c.seconds < 1.2);
}
