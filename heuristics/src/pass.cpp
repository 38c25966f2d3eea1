// The pass registry (generated from passes.def), pipelines as strings, and running passes with
// their statistics (pass.hpp). Timing is done here, around the passes, never inside them.
#include "waco/heuristics/pass.hpp"

#include <set>

#include "passes/passes.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

namespace {

struct Entry {
  const char* name;
  std::unique_ptr<Pass> (*factory)(const PassParams&);
  bool restriction;  ///< not a trimming rule: never in "all"
};

const std::vector<Entry>& registry() {
  static const std::vector<Entry> r = {
#define WACO_PASS(name, factory) {name, &detail::factory, false},
#define WACO_RESTRICTION(name, factory) {name, &detail::factory, true},
#include "passes.def"
#undef WACO_RESTRICTION
#undef WACO_PASS
  };
  return r;
}

std::string known_names() {
  std::string s;
  for (const Entry& e : registry()) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

}  // namespace

nlohmann::json PassParams::to_json() const {
  nlohmann::json j = {{"tile_window", tile_window},
                      {"max_block_padding", max_block_padding},
                      {"min_chunks_per_thread", min_chunks_per_thread},
                      {"chunk_window", chunk_window},
                      {"max_serial_work", max_serial_work},
                      {"cache_level", cache_level},
                      {"cache_bytes", cache_bytes},
                      {"cache_fraction", cache_fraction}};
  if (dtype != kernels::Dtype::F32) j["dtype"] = std::string(kernels::dtype_name(dtype));
  return j;
}

nlohmann::json PassStats::to_json() const {
  nlohmann::json removed_json = nlohmann::json::object();
  for (const auto& [r, n] : removed) removed_json[r] = n;
  nlohmann::json j = {{"name", name}, {"sound", sound},  {"in", in},
                      {"out", out},   {"removed", removed_json}, {"seconds", seconds}};
  if (!note.empty()) j["note"] = note;
  return j;
}

std::vector<PassInfo> list_passes() {
  std::vector<PassInfo> out;
  for (const Entry& e : registry()) {
    const auto p = e.factory(PassParams{});
    WACO_ASSERT(p->name() == e.name, "passes.def name differs from the pass's own name");
    out.push_back({p->name(), p->description(), p->sound(), e.restriction});
  }
  return out;
}

std::unique_ptr<Pass> make_pass(const std::string& name, const PassParams& params) {
  for (const Entry& e : registry())
    if (name == e.name) return e.factory(params);
  throw kernels::Error("unknown trimming pass '" + name + "'",
                       "known passes: " + known_names() + " (see --list-passes)");
}

Pipeline default_pipeline() {
  Pipeline p;
  for (const Entry& e : registry())
    if (!e.restriction) p.push_back(e.name);
  return p;
}

Pipeline parse_pipeline(const std::string& text) {
  const std::string t = trim(text);
  if (t.empty() || t == "none") return {};
  if (t == "all") return default_pipeline();
  Pipeline p;
  std::set<std::string> seen;
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = t.find(',', from);
    const std::string name = trim(t.substr(from, comma == std::string::npos ? std::string::npos
                                                                            : comma - from));
    if (name.empty())
      throw kernels::Error("empty pass name in pipeline \"" + text + "\"",
                           "write names separated by commas, e.g. legality,parallelize-outer");
    bool known = name == "all";
    for (const Entry& e : registry()) known = known || name == e.name;
    if (!known)
      throw kernels::Error("unknown trimming pass '" + name + "' in pipeline \"" + text + "\"",
                           "known passes: " + known_names() + " (see --list-passes)");
    // "all" within a list stands for the default pipeline, e.g. "all,csr-storage".
    for (const std::string& n : name == "all" ? default_pipeline() : Pipeline{name}) {
      if (!seen.insert(n).second)
        throw kernels::Error("pass '" + n + "' given twice in pipeline \"" + text + "\"",
                             "a pass applied twice removes nothing more: list it once");
      p.push_back(n);
    }
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return p;
}

std::string print_pipeline(const Pipeline& p) {
  if (p.empty()) return "none";
  std::string s;
  for (const std::string& n : p) s += (s.empty() ? "" : ",") + n;
  return s;
}

PassStats run_pass(Space& space, const Pass& pass) {
  const double t0 = kernels::now_seconds();
  PassStats st;
  st.name = pass.name();
  st.sound = pass.sound();
  st.in = space.count();
  std::uint64_t current = st.in;
  const auto constraints = pass.constraints(space, st.note);
  std::map<std::string, std::uint64_t> removed;
  for (const auto& c : constraints) {
    const auto hist = space.constrain(c);
    std::uint64_t seen = 0;
    for (const auto& [reason, n] : hist) {
      seen += n;
      if (!reason.empty()) removed[reason] += n;
    }
    WACO_ASSERT(seen == current, "a tally does not add up to the space's count");
    current = hist.count("") ? hist.at("") : 0;
  }
  st.out = space.count();
  WACO_ASSERT(st.out == current, "the count after a pass differs from its tally");
  for (const auto& [r, n] : removed) st.removed.emplace_back(r, n);
  st.seconds = kernels::now_seconds() - t0;
  return st;
}

PipelineResult run_pipeline(Space& space, const Pipeline& pipeline, const PassParams& params) {
  PipelineResult r;
  r.initial_count = space.count();
  for (const std::string& name : pipeline) r.passes.push_back(run_pass(space, *make_pass(name, params)));
  r.final_count = space.count();
  return r;
}

void add_pipeline_constraints(Space& space, const Pipeline& pipeline, const PassParams& params) {
  for (const std::string& name : pipeline) {
    std::string note;
    for (const auto& c : make_pass(name, params)->constraints(space, note)) space.add_constraint(c);
  }
}

std::uint64_t legal_count(const Space& space, const PassParams& params) {
  Space copy = space;
  add_pipeline_constraints(copy, {"legality"}, params);
  return copy.count();
}

}  // namespace waco::heuristics
