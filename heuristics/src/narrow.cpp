// Narrow twins of nominees (narrow.hpp).
#include "waco/heuristics/narrow.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "waco/codegen/kernel_spec.hpp"
#include "waco/codegen/storage.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {

using codegen::LevelFormat;
using codegen::Loop;
using codegen::SuperSchedule;

double operand_stream_bytes(std::int64_t nnz, std::int64_t rows, kernels::Dtype dtype) {
  return static_cast<double>(nnz) * (4.0 + static_cast<double>(kernels::dtype_size(dtype))) +
         4.0 * static_cast<double>(rows + 1);
}

bool operand_beyond_llc(std::int64_t nnz, std::int64_t rows, kernels::Dtype dtype, std::int64_t llc) {
  return llc > 0 && operand_stream_bytes(nnz, rows, dtype) > static_cast<double>(llc);
}

namespace {

/// Rule 2 of narrow_twin (`row_block` kNarrowRowBlock, its rows U) and tiled_narrow_twin
/// (kNarrowTileRows, its nonempty rows N): the blocked narrow format of a csr-like schedule.
std::optional<SuperSchedule> blocked_twin(const SuperSchedule& s, const std::vector<std::int64_t>& extents,
                                          int row_block, LevelFormat rows) {
  const codegen::KernelSpec& spec = codegen::kernel_spec(s.kind);
  const std::vector<Loop> levels = s.levels();
  if (levels.size() != 2 || s.formats[0] != LevelFormat::U || s.formats[1] != LevelFormat::C ||
      levels[0].part != Loop::Part::Whole || levels[1].part != Loop::Part::Whole)
    return std::nullopt;
  const char x = levels[0].var, y = levels[1].var;
  const auto xi = static_cast<std::size_t>(spec.var_index(x));
  const auto yi = static_cast<std::size_t>(spec.var_index(y));
  if (extents[yi] <= codegen::kMaxNarrowRange || extents[xi] <= kNarrowRowBlock) return std::nullopt;
  SuperSchedule t = s;
  t.split[xi] = row_block;
  t.split[yi] = static_cast<int>(codegen::kMaxNarrowRange);
  t.order.clear();
  for (const Loop& l : s.order) {
    if (l.var == x) {
      t.order.push_back({x, Loop::Part::Outer});
    } else if (l.var == y) {
      t.order.push_back({y, Loop::Part::Outer});
      t.order.push_back({x, Loop::Part::Inner});
      t.order.push_back({y, Loop::Part::Inner});
    } else {
      t.order.push_back(l);
    }
  }
  t.formats = {LevelFormat::U, LevelFormat::C, rows, LevelFormat::N};
  if (t.parallel.var == x || t.parallel.var == y) t.parallel.part = Loop::Part::Outer;
  if (t.chunk != codegen::kStaticChunk) t.chunk = std::max(1, t.chunk / row_block);
  return t;
}

/// A twin rule's input: `schedule` canonical, checked valid and given one extent a variable.
SuperSchedule twin_input(const SuperSchedule& schedule, const std::vector<std::int64_t>& extents) {
  SuperSchedule s = codegen::canonicalize(schedule);
  WACO_ASSERT(codegen::validate(s).empty(), "a narrow twin needs a valid schedule");
  WACO_ASSERT(extents.size() == codegen::kernel_spec(s.kind).vars.size(),
              "a narrow twin needs one extent per variable");
  return s;
}

/// A rule's twin, or nullopt when it is not valid (not expected).
std::optional<SuperSchedule> valid_twin(std::optional<SuperSchedule> twin) {
  if (twin && !codegen::validate(*twin).empty()) return std::nullopt;
  return twin;
}

}  // namespace

std::optional<SuperSchedule> narrow_twin(const SuperSchedule& schedule,
                                         const std::vector<std::int64_t>& extents) {
  const SuperSchedule s = twin_input(schedule, extents);
  const codegen::KernelSpec& spec = codegen::kernel_spec(s.kind);
  const std::vector<Loop> levels = s.levels();
  SuperSchedule t = s;
  bool changed = false;
  for (std::size_t l = 0; l < levels.size(); ++l) {
    const auto v = static_cast<std::size_t>(spec.var_index(levels[l].var));
    if (t.formats[l] == LevelFormat::C &&
        codegen::level_dim(levels[l], extents[v], s.split[v]) <= codegen::kMaxNarrowRange) {
      t.formats[l] = LevelFormat::N;
      changed = true;
    }
  }
  return valid_twin(changed ? std::optional(t) : blocked_twin(s, extents, kNarrowRowBlock, LevelFormat::U));
}

std::optional<SuperSchedule> tiled_narrow_twin(const SuperSchedule& schedule,
                                               const std::vector<std::int64_t>& extents) {
  const SuperSchedule s = twin_input(schedule, extents);
  if (s.kind != kernels::KernelKind::SpMV && s.kind != kernels::KernelKind::SpMM) return std::nullopt;
  std::optional<SuperSchedule> twin = blocked_twin(s, extents, kNarrowTileRows, LevelFormat::N);
  if (twin) twin->chunk = 1;  // few, unequal tiles: one at a time, whatever the nominee's chunk
  return valid_twin(std::move(twin));
}

NarrowTwins with_narrow_twins(const Space& space, const std::vector<SuperSchedule>& nominees) {
  NarrowTwins out;
  std::set<std::string> listed;
  for (const SuperSchedule& s : nominees) listed.insert(codegen::to_text(codegen::canonicalize(s)));
  std::string refused;
  int without = 0, repeated = 0;
  for (const SuperSchedule& s : nominees) {
    out.schedules.push_back(s);
    std::vector<SuperSchedule> twins;
    for (std::optional<SuperSchedule> t : {narrow_twin(s, space.extents()), tiled_narrow_twin(s, space.extents())})
      if (t) twins.push_back(std::move(*t));
    if (twins.empty()) ++without;
    for (SuperSchedule& twin : twins) {
      if (const std::optional<std::string> why = space.storage_admits(twin)) {
        if (refused.empty()) refused = *why;
        continue;
      }
      if (!listed.insert(codegen::to_text(twin)).second) {
        ++repeated;
        continue;
      }
      out.schedules.push_back(std::move(twin));
      ++out.added;
    }
  }
  if (out.added == 0)
    out.note = !refused.empty() ? "twins refused: " + refused
               : repeated > 0  ? "every twin is already a nominee"
               : without > 0   ? "no nominee has a narrow twin"
                               : "no nominee";
  return out;
}

}  // namespace waco::heuristics
