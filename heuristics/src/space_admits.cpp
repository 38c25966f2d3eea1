// Whether the factored space (space.hpp) holds a given schedule, without enumerating: admits()
// (every stage's constraints and the space's ranges), storage_admits() (the storage stage's
// alone) and admits_each_chunk() (one schedule with each of a list of chunks).
#include "waco/heuristics/space.hpp"

#include <algorithm>

namespace waco::heuristics {

std::optional<std::string> Space::admits(const SuperSchedule& schedule) const {
  return check(schedule, false);
}

std::optional<std::string> Space::storage_admits(const SuperSchedule& schedule) const {
  return check(schedule, true);
}

namespace {
constexpr unsigned stage_bit(Stage s) { return 1u << static_cast<unsigned>(s); }
constexpr unsigned kAllStages = stage_bit(Stage::Split) | stage_bit(Stage::Storage) |
                                stage_bit(Stage::Nest) | stage_bit(Stage::Execution);
}  // namespace

const char* Space::range_refusal(const SuperSchedule& s) const {
  for (std::size_t v = 0; v < split_choices_.size(); ++v)
    if (std::find(split_choices_[v].begin(), split_choices_[v].end(), s.split[v]) ==
        split_choices_[v].end())
      return "split-out-of-range";
  if (s.threads < 1 || s.threads > cores_) return "threads-out-of-range";
  return nullptr;
}

const char* Space::constraint_refusal(const SuperSchedule& s, unsigned stages) const {
  // Every stage's constraints see what the space's caches show them (see the Constraint docs).
  const std::size_t nv = split_choices_.size();
  std::vector<int> sparse_split = s.split, exec_split(nv, 1);
  for (std::size_t v = 0; v < nv; ++v)
    if (sparse_stride_[v] == 0) sparse_split[v] = 1;
  const std::size_t pv = static_cast<std::size_t>(spec_->var_index(s.parallel.var));
  exec_split[pv] = s.split[pv];
  std::vector<Loop> levels;
  if (stages & stage_bit(Stage::Storage)) levels = s.levels();
  for (const auto& c : constraints_) {
    if (!(stages & stage_bit(c->stage()))) continue;
    const char* why = nullptr;
    switch (c->stage()) {
      case Stage::Split: why = c->check_split(*this, s.split); break;
      case Stage::Storage: why = c->check_storage(*this, sparse_split, levels, s.formats); break;
      case Stage::Nest: why = c->check_nest(*this, s.order, s.parallel); break;
      case Stage::Execution:
        why = c->check_execution(*this, exec_split, s.parallel, s.threads, s.chunk);
        break;
    }
    if (why) return why;
  }
  return nullptr;
}

std::optional<std::string> Space::check(const SuperSchedule& schedule, bool storage_only) const {
  if (schedule.kind != kind_) return std::string("other-kernel");
  const std::vector<std::string> problems = codegen::validate(schedule);
  if (!problems.empty()) return "invalid schedule: " + problems.front();
  const SuperSchedule s = codegen::canonicalize(schedule);
  if (!storage_only) {
    if (const char* why = range_refusal(s)) return std::string(why);
    const std::vector<int> chunks = chunk_choices();
    if (std::find(chunks.begin(), chunks.end(), s.chunk) == chunks.end())
      return std::string("chunk-out-of-range");
  }
  if (const char* why =
          constraint_refusal(s, storage_only ? stage_bit(Stage::Storage) : kAllStages))
    return std::string(why);
  return std::nullopt;
}

std::vector<bool> Space::admits_each_chunk(const SuperSchedule& schedule,
                                           const std::vector<int>& chunks) const {
  std::vector<bool> out(chunks.size(), false);
  if (schedule.kind != kind_) return out;
  // validate() reads the chunk only to check its range, which chunk_choices() holds (below).
  SuperSchedule s = schedule;
  s.chunk = codegen::kStaticChunk;
  if (!codegen::validate(s).empty()) return out;
  s = codegen::canonicalize(s);  // the chunk kept as it is
  if (range_refusal(s) != nullptr) return out;
  if (constraint_refusal(s, kAllStages & ~stage_bit(Stage::Execution)) != nullptr) return out;
  const std::vector<int> choices = chunk_choices();
  for (std::size_t k = 0; k < chunks.size(); ++k) {
    if (std::find(choices.begin(), choices.end(), chunks[k]) == choices.end()) continue;
    s.chunk = chunks[k];
    out[k] = constraint_refusal(s, stage_bit(Stage::Execution)) == nullptr;
  }
  return out;
}

}  // namespace waco::heuristics
