// Unit "economy": the break-even and expected-calls arithmetic of tune (heuristics/economy.hpp),
// on made-up timings.
#include <catch2/catch.hpp>

#include "waco/heuristics/economy.hpp"
#include "waco/kernels/error.hpp"

using namespace waco::heuristics;

TEST_CASE("economy: break-even calls are the tuning time over the time saved per call") {
  REQUIRE(break_even_calls(2.0, 1e-3, 0.5e-3).has_value());
  CHECK(*break_even_calls(2.0, 1e-3, 0.5e-3) == Approx(4000.0));
  CHECK(*break_even_calls(0.0, 1e-3, 0.5e-3) == Approx(0.0));
  CHECK_FALSE(break_even_calls(2.0, 1e-3, 1e-3).has_value());    // no gain: never pays back
  CHECK_FALSE(break_even_calls(2.0, 1e-3, 2e-3).has_value());    // slower
  CHECK_FALSE(break_even_calls(2.0, 0.0, 1e-3).has_value());     // no csr time
  CHECK_FALSE(break_even_calls(-1.0, 1e-3, 0.5e-3).has_value()); // nonsense
}

TEST_CASE("economy: the expected calls' budget buys candidates and a side-by-side stage") {
  CallsBudgetInput in;
  in.calls = 100000;
  in.share = 0.1;
  in.csr_s = 1e-3;          // budget 10 s
  in.spent_s = 1.0;         // 9 s left
  in.per_candidate_s = 0.5;
  in.per_confirmed_s = 0.1;
  in.confirm_top = 10;
  const CallsBudget b = plan_calls_budget(in);
  CHECK(b.budget_s == Approx(10.0));
  CHECK(b.left_s == Approx(9.0));
  CHECK(b.worth_it);
  CHECK(b.confirm_top == 10);
  // 9 - (10 + 2) x 0.1 = 7.8 s for the search: 15 candidates of 0.5 s.
  CHECK(b.search_s == Approx(7.8));
  CHECK(b.candidates == 15);
  CHECK(b.reason.empty());
  CHECK(b.to_json().at("worth_it") == true);
}

TEST_CASE("economy: a small budget narrows the side-by-side stage before giving up") {
  CallsBudgetInput in;
  in.calls = 2000;
  in.share = 0.5;
  in.csr_s = 2e-3;          // budget 2 s
  in.spent_s = 0.2;         // 1.8 s left
  in.per_candidate_s = 0.4;
  in.per_confirmed_s = 0.1;
  in.confirm_top = 10;
  const CallsBudget b = plan_calls_budget(in);
  // top 10: 1.8 - 1.2 = 0.6 s -> 1 candidate < 10; ... top 3: 1.8 - 0.5 = 1.3 s -> 3 candidates.
  CHECK(b.worth_it);
  CHECK(b.confirm_top == 3);
  CHECK(b.candidates == 3);
  CHECK(b.search_s == Approx(1.3));
}

TEST_CASE("economy: when one candidate cannot pay for itself, tuning is not worth it") {
  CallsBudgetInput in;
  in.calls = 100;
  in.share = 0.1;
  in.csr_s = 1e-4;  // budget 1 ms
  in.spent_s = 0.3;
  in.per_candidate_s = 0.05;
  in.per_confirmed_s = 0.01;
  const CallsBudget b = plan_calls_budget(in);
  CHECK_FALSE(b.worth_it);
  CHECK(b.candidates == 0);
  CHECK(b.confirm_top == 0);
  CHECK(b.left_s < 0);
  CHECK(b.reason.find("cannot pay for itself within 100 calls") != std::string::npos);
  CHECK(b.to_json().at("reason").is_string());

  // A budget that covers one candidate but not its side-by-side check is not worth it either.
  in.calls = 10000000;  // budget 100 s
  in.spent_s = 99.93;   // 0.07 s left: one candidate (0.05) + 3 x 0.01 = 0.08 does not fit
  CHECK_FALSE(plan_calls_budget(in).worth_it);
  in.spent_s = 99.9;    // 0.1 s left: fits
  const CallsBudget c = plan_calls_budget(in);
  CHECK(c.worth_it);
  CHECK(c.candidates == 1);
  CHECK(c.confirm_top == 1);
}

TEST_CASE("economy: nonsense input is an internal error") {
  CallsBudgetInput in;
  in.calls = 0;
  in.csr_s = 1e-3;
  in.per_candidate_s = 0.1;
  CHECK_THROWS_AS(plan_calls_budget(in), waco::kernels::InternalError);
  in.calls = 10;
  in.share = 1.5;
  CHECK_THROWS_AS(plan_calls_budget(in), waco::kernels::InternalError);
}
