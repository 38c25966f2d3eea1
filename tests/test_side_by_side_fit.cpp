// Unit "side_by_side_fit": which of a tune's nominees one side-by-side child can hold
// (tune/src/pipeline.hpp, candidates_that_fit): formats and outputs counted once where the
// measuring child shares them (heuristics::shared_data), the references' too, and
// a nominee that does not fit passed over for later ones storing a format already held; and
// the heats (plan_heats) that measure nominees that do not all fit in one child.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "pipeline.hpp"
#include "waco/codegen/super_schedule.hpp"

using waco::heuristics::Candidate;
using waco::heuristics::SharedData;
using Positions = std::vector<std::size_t>;

namespace {

/// How many fit (candidates_that_fit's positions, counted).
std::size_t fit_count(const std::vector<Candidate>& c, int wanted, double budget, double format,
                      double output, const SharedData& shared) {
  return waco::tuning::detail::candidates_that_fit(c, wanted, budget, format, output, shared).size();
}

Candidate spmv(const std::string& text) {
  return Candidate::generated(waco::codegen::canonicalize(
      waco::codegen::schedule_from_string(waco::kernels::KernelKind::SpMV, text)));
}

/// 6 nominees in 2 formats (UC thrice, split UUC thrice): the loops differ, the formats repeat.
std::vector<Candidate> nominees() {
  return {spmv("order=i,k format=UC parallel=i chunk=16"),
          spmv("split=i:64 order=i1,i0,k format=UUC parallel=i1 chunk=16"),
          spmv("order=i,k format=UC parallel=i chunk=64"),
          spmv("split=i:64 order=i1,i0,k format=UUC parallel=i1 chunk=4"),
          spmv("order=i,k format=UC parallel=i threads=1 chunk=256"),
          spmv("split=i:64 order=i1,i0,k format=UUC parallel=i1 threads=1 chunk=256")};
}

}  // namespace

TEST_CASE("side_by_side_fit: nothing shared, each nominee holds its format and its output") {
  // References: 2 x (10 + 1) = 22; each nominee 11 more.
  CHECK(fit_count(nominees(), 6, 22 + 6 * 11, 10, 1, {}) == 6);
  CHECK(fit_count(nominees(), 6, 22 + 3 * 11 + 5, 10, 1, {}) == 3);
  CHECK(fit_count(nominees(), 4, 1e9, 10, 1, {}) == 4);  // never more than wanted
  CHECK(fit_count(nominees(), 6, 0, 10, 1, {}) == 1);    // at least one
}

TEST_CASE("side_by_side_fit: shared formats and output count once") {
  SharedData formats;
  formats.formats = true;
  // The references hold one format (the baseline runs on the csr schedule's) and two outputs:
  // 12. Two distinct formats among the six: 12 + 2 x 10 + 6 x 1 = 38.
  CHECK(fit_count(nominees(), 6, 38, 10, 1, formats) == 6);
  CHECK(fit_count(nominees(), 6, 37, 10, 1, formats) == 5);
  // Only the first format fits beside the references: the nominees storing it (the first,
  // third and fifth), not the split ones, which need a format of their own.
  CHECK(fit_count(nominees(), 6, 12 + 11 + 5, 10, 1, formats) == 3);
  SharedData both = formats;
  both.output = true;
  // One output for all, the references' too: 10 + 1 + 2 x 10 = 31.
  CHECK(fit_count(nominees(), 6, 31, 10, 1, both) == 6);
  CHECK(fit_count(nominees(), 6, 30, 10, 1, both) == 3);
  // Nominees past the list (unknown formats) count a format each.
  CHECK(fit_count({}, 3, 11 + 3 * 10, 10, 1, both) == 3);
  CHECK(fit_count({}, 3, 11 + 2 * 10, 10, 1, both) == 2);
}

TEST_CASE("side_by_side_fit: a nominee that does not fit is passed over for one storing a held format") {
  using waco::tuning::detail::candidates_that_fit;
  SharedData formats;
  formats.formats = true;
  const std::vector<Candidate> c = nominees();
  // Beside the references, room for one format and six outputs: the UC nominees share the
  // first's format, the split ones would need a second.
  CHECK(candidates_that_fit(c, 6, 12 + 10 + 6 * 1, 10, 1, formats) == Positions{0, 2, 4});
  // Positions stay list order, and no more than wanted.
  CHECK(candidates_that_fit(c, 2, 12 + 10 + 6 * 1, 10, 1, formats) == Positions{0, 2});
  // The csr schedule's format (a reference's) is held already: UC nominees cost only outputs,
  // and the room for one format goes to the split nominees.
  const auto csr = waco::codegen::canonicalize(waco::codegen::schedule_from_string(
      waco::kernels::KernelKind::SpMV, "order=i,k format=UC parallel=i chunk=128"));
  CHECK(candidates_that_fit(c, 6, 12 + 10 + 6 * 1, 10, 1, formats, &csr) ==
        Positions{0, 1, 2, 3, 4, 5});
  // Without shared formats nothing is passed over for it: each needs its own.
  CHECK(candidates_that_fit(c, 6, 22 + 2 * 11, 10, 1, {}, &csr) == Positions{0, 1});
  // The first always goes, even when nothing fits.
  CHECK(candidates_that_fit(c, 6, 0, 10, 1, formats) == Positions{0});
}

TEST_CASE("side_by_side_fit: heats hold every nominee, a format's nominees in one heat") {
  using waco::tuning::detail::plan_heats;
  using Heats = std::vector<Positions>;
  SharedData formats;
  formats.formats = true;
  const std::vector<Candidate> c = nominees();
  // All fit: one heat, the list's order.
  CHECK(plan_heats(c, 6, 1e9, 10, 1, formats) == Heats{{0, 1, 2, 3, 4, 5}});
  CHECK(plan_heats(c, 4, 1e9, 10, 1, formats) == Heats{{0, 1, 2, 3}});  // only the wanted
  // Room for one format (and its nominees' outputs) beside the references: the UC nominees in
  // one heat, the split ones in another, each with every nominee storing its format.
  CHECK(plan_heats(c, 6, 12 + 10 + 3 * 1, 10, 1, formats) == Heats{{0, 2, 4}, {1, 3, 5}});
  // The csr schedule's format is held: the UC nominees cost their outputs alone and share a
  // heat with the split ones.
  const auto csr = waco::codegen::canonicalize(waco::codegen::schedule_from_string(
      waco::kernels::KernelKind::SpMV, "order=i,k format=UC parallel=i chunk=128"));
  CHECK(plan_heats(c, 6, 12 + 10 + 6 * 1, 10, 1, formats, &csr) == Heats{{0, 1, 2, 3, 4, 5}});
  // Nothing shared: each nominee its own format and output; no room for any beside the
  // references still measures each, alone.
  CHECK(plan_heats(c, 6, 22 + 2 * 11, 10, 1, {}) == Heats{{0, 1}, {2, 3}, {4, 5}});
  CHECK(plan_heats(c, 3, 0, 10, 1, {}) == Heats{{0}, {1}, {2}});
  // Every wanted nominee is in exactly one heat, whatever the budget.
  for (double budget : {0.0, 30.0, 33.0, 40.0, 50.0, 70.0}) {
    Positions all;
    for (const Positions& h : plan_heats(c, 6, budget, 10, 1, formats)) {
      CHECK_FALSE(h.empty());
      all.insert(all.end(), h.begin(), h.end());
    }
    std::sort(all.begin(), all.end());
    CHECK(all == Positions{0, 1, 2, 3, 4, 5});
  }
}
