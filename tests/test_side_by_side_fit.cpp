// Unit "side_by_side_fit": how many of a tune's nominees one side-by-side child can hold
// (tune/src/pipeline.hpp, candidates_that_fit): formats and outputs counted once where the
// measuring child shares them (heuristics::shared_data), the references always their own.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "pipeline.hpp"
#include "waco/codegen/super_schedule.hpp"

using waco::heuristics::Candidate;
using waco::heuristics::SharedData;
using waco::tuning::detail::candidates_that_fit;

namespace {

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
  CHECK(candidates_that_fit(nominees(), 6, 22 + 6 * 11, 10, 1, {}) == 6);
  CHECK(candidates_that_fit(nominees(), 6, 22 + 3 * 11 + 5, 10, 1, {}) == 3);
  CHECK(candidates_that_fit(nominees(), 4, 1e9, 10, 1, {}) == 4);  // never more than wanted
  CHECK(candidates_that_fit(nominees(), 6, 0, 10, 1, {}) == 1);    // at least one
}

TEST_CASE("side_by_side_fit: shared formats and output count once") {
  SharedData formats;
  formats.formats = true;
  // Two distinct formats among the six: 22 + 2 x 10 + 6 x 1 = 48.
  CHECK(candidates_that_fit(nominees(), 6, 48, 10, 1, formats) == 6);
  // Only the first format fits beside the references: the first nominee, then the second needs
  // a format of its own.
  CHECK(candidates_that_fit(nominees(), 6, 22 + 11 + 5, 10, 1, formats) == 1);
  SharedData both = formats;
  both.output = true;
  // One output for all: 22 + 1 + 2 x 10 = 43.
  CHECK(candidates_that_fit(nominees(), 6, 43, 10, 1, both) == 6);
  // Nominees past the list (unknown formats) count a format each.
  CHECK(candidates_that_fit({}, 3, 22 + 1 + 3 * 10, 10, 1, both) == 3);
  CHECK(candidates_that_fit({}, 3, 22 + 1 + 2 * 10, 10, 1, both) == 2);
}
