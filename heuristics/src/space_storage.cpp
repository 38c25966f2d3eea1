// What constraints ask a factored space (space.hpp) about sizes: the storage of a format, from
// the prefix counts (prefix_counts.hpp mirrors codegen::build_storage's size checks) and memoized
// for the last (split, levels) asked, and the trip count of a loop.
#include "waco/heuristics/space.hpp"

#include <algorithm>

#include "waco/kernels/error.hpp"

namespace waco::heuristics {

const LevelShapes& Space::shapes(const std::vector<int>& split,
                                 const std::vector<Loop>& levels) const {
  // Storage constraints are asked about every format of one (split, levels) in a row.
  if (!(shape_split_ == split && shape_levels_ == levels)) {
    shape_ = level_shapes(facts_->counts, *spec_, extents_, split, levels);
    shape_split_ = split;
    shape_levels_ = levels;
  }
  return shape_;
}

const char* Space::storage_refusal(const std::vector<int>& split, const std::vector<Loop>& levels,
                                   const std::vector<LevelFormat>& formats) const {
  if (!facts_) return nullptr;
  return check_format(shapes(split, levels), formats, facts_->counts.nnz(), opts_.max_padding)
      .refusal;
}

double Space::stored_values(const std::vector<int>& split, const std::vector<Loop>& levels,
                            const std::vector<LevelFormat>& formats) const {
  WACO_ASSERT(facts_ != nullptr, "stored_values needs the matrix facts");
  return format_stored_values(shapes(split, levels), formats);
}

std::int64_t Space::trip_count(const std::vector<int>& split, const Loop& loop) const {
  const std::size_t v = static_cast<std::size_t>(spec_->var_index(loop.var));
  const std::int64_t e = extents_[v];
  const std::int64_t s = split[v];
  switch (loop.part) {
    case Loop::Part::Whole: return e;
    case Loop::Part::Outer: return (e + s - 1) / s;
    case Loop::Part::Inner: return std::min(e, s);
  }
  return e;
}

}  // namespace waco::heuristics
