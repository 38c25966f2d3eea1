// The ANNS index (schedule_index.hpp): hnswlib's HierarchicalNSW over node vectors, built with
// its L2 space and searched through HeadSpace, a SpaceInterface whose distance is the cost
// model's head (HeadTail::score) and counts its evaluations.
#include "waco/learned/schedule_index.hpp"

#include <unistd.h>

#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <sstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/json_fields.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::learned {

using kernels::Error;

namespace {

constexpr const char* kMagic = "waco-hybrid schedule index";
/// Nodes whose vectors load() compares with the model's (spread over the graph).
constexpr std::size_t kCheckedNodes = 64;

/// The distance function's parameter. hnswlib reads a size_t dimension at its start in places
/// (getDataByLabel), hence `dim` first.
struct HeadParam {
  std::size_t dim = 0;
  const HeadTail* tail = nullptr;
  std::atomic<std::uint64_t> evaluations{0};
};

float head_distance(const void* query, const void* node, const void* param) {
  auto* p = static_cast<HeadParam*>(const_cast<void*>(param));
  p->evaluations.fetch_add(1, std::memory_order_relaxed);
  return p->tail->score(static_cast<const float*>(query), static_cast<const float*>(node));
}

/// The cost model's head as hnswlib's distance: query = query vector, node = node vector.
class HeadSpace : public hnswlib::SpaceInterface<float> {
 public:
  explicit HeadSpace(const HeadTail& tail) {
    param_.dim = static_cast<std::size_t>(tail.width);
    param_.tail = &tail;
  }
  size_t get_data_size() override { return param_.dim * sizeof(float); }
  hnswlib::DISTFUNC<float> get_dist_func() override { return head_distance; }
  void* get_dist_func_param() override { return &param_; }
  std::uint64_t evaluations() const { return param_.evaluations.load(); }

 private:
  HeadParam param_;
};

/// FNV-1a over kHashedBlocks blocks of kHashedBlock bytes spread evenly over the file (all of a
/// small file), and its size: a truncated, extended or replaced graph file is refused without
/// reading all of it (hashing every byte of a 100k-node graph took 0.25 s of a 0.5 s load).
constexpr std::size_t kHashedBlocks = 64;
constexpr std::size_t kHashedBlock = 65536;

std::uint64_t file_hash(const std::string& path, std::uint64_t& bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error("cannot read " + path);
  bytes = static_cast<std::uint64_t>(in.tellg());
  std::uint64_t h = kernels::fnv1a(std::to_string(bytes));
  std::string block(kHashedBlock, '\0');
  const std::uint64_t span = bytes > kHashedBlock ? bytes - kHashedBlock : 0;
  for (std::size_t k = 0; k < kHashedBlocks; ++k) {
    const std::uint64_t at = span * k / (kHashedBlocks - 1);
    in.seekg(static_cast<std::streamoff>(at));
    in.read(block.data(), static_cast<std::streamsize>(std::min<std::uint64_t>(kHashedBlock, bytes)));
    if (!in) throw Error("cannot read " + path);
    h = kernels::splitmix64(h ^ kernels::fnv1a(block));
    if (span == 0) break;
  }
  return h;
}

/// Nodes checked against the model on load: spread evenly, at most kCheckedNodes.
std::vector<std::size_t> checked_nodes(std::size_t n) {
  std::vector<std::size_t> v;
  const std::size_t step = std::max<std::size_t>(1, n / kCheckedNodes);
  for (std::size_t i = 0; i < n && v.size() < kCheckedNodes; i += step) v.push_back(i);
  return v;
}

/// Checks an hnswlib graph file (hnswlib 0.6's saveIndex layout) against what this index needs,
/// before hnswlib reads it: its loader trusts every size, label and link in the file, and its
/// searches follow the links unchecked, so a damaged graph whose header was rewritten to match it
/// (or a file made by hand) read and wrote out of bounds. Throws Error naming the first problem.
void check_graph_file(const std::string& path, std::size_t nodes, std::size_t dim, std::size_t M) {
  using hnswlib::labeltype;
  using hnswlib::linklistsizeint;
  using hnswlib::tableint;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path, "build the index again");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bad = [&](const std::string& why) {
    return Error(path + ": a damaged index graph (" + why + ")", "build the index again");
  };
  std::size_t at = 0;
  const auto pod = [&](auto& v) {
    if (bytes.size() - at < sizeof v) throw bad("it ends early");
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
  };
  std::size_t offset_level0 = 0, max_elements = 0, count = 0, per_element = 0, label_offset = 0,
              offset_data = 0, max_m = 0, max_m0 = 0, m = 0, ef_construction = 0;
  int max_level = 0;
  tableint entry = 0;
  double mult = 0;
  pod(offset_level0), pod(max_elements), pod(count), pod(per_element), pod(label_offset);
  pod(offset_data), pod(max_level), pod(entry), pod(max_m), pod(max_m0), pod(m), pod(mult);
  pod(ef_construction);
  if (count != nodes || max_elements != nodes)
    throw bad(std::to_string(count) + " nodes of " + std::to_string(max_elements) + ", the header " +
              std::to_string(nodes));
  if (m != M || max_m != M || max_m0 != 2 * M) throw bad("M is not the header's");
  const std::size_t links0 = max_m0 * sizeof(tableint) + sizeof(linklistsizeint);
  const std::size_t links = max_m * sizeof(tableint) + sizeof(linklistsizeint);
  if (offset_level0 != 0 || offset_data != links0 || label_offset != links0 + dim * sizeof(float) ||
      per_element != label_offset + sizeof(labeltype))
    throw bad("its node layout is not that of " + std::to_string(dim) + "-number vectors");
  if (!std::isfinite(mult) || max_level < 0 || max_level > 64 || entry >= count)
    throw bad("its entry point or level factor is out of range");
  if ((bytes.size() - at) / per_element < count) throw bad("it ends early");
  const char* level0 = bytes.data() + at;
  at += count * per_element;
  // The links of one level: a count (the low 16 bits; hnswlib keeps a deleted mark above) and
  // that many node ids.
  const auto check_links = [&](const char* list, std::size_t most) {
    linklistsizeint head = 0;
    std::memcpy(&head, list, sizeof head);
    if (head >> 16 != 0) throw bad("a node is marked deleted or has a damaged link count");
    if (head > most) throw bad("a node has more links than M allows");
    for (std::size_t k = 0; k < head; ++k) {
      tableint id = 0;
      std::memcpy(&id, list + sizeof head + k * sizeof id, sizeof id);
      if (id >= count) throw bad("a link to node " + std::to_string(id));
    }
  };
  std::vector<char> label_seen(count, 0);
  int entry_level = -1;
  for (std::size_t i = 0; i < count; ++i) {
    const char* element = level0 + i * per_element;
    check_links(element, max_m0);
    labeltype label = 0;
    std::memcpy(&label, element + label_offset, sizeof label);
    if (label >= count || label_seen[label]) throw bad("node labels are not 0 to n-1 once each");
    label_seen[label] = 1;
    linklistsizeint size = 0;
    pod(size);
    if (size % links != 0 || size / links > static_cast<std::size_t>(max_level))
      throw bad("a node's upper levels do not fit the graph's levels");
    if (bytes.size() - at < size) throw bad("it ends early");
    for (std::size_t l = 0; l < size / links; ++l) check_links(bytes.data() + at + l * links, max_m);
    at += size;
    if (i == entry) entry_level = static_cast<int>(size / links);
  }
  if (at != bytes.size()) throw bad("bytes after the last node");
  if (entry_level != max_level) throw bad("the entry point is not on the top level");
}

}  // namespace

struct ScheduleIndex::Impl {
  kernels::KernelKind kind = kernels::KernelKind::SpMV;
  IndexBuildOptions options;
  /// The templates: parsed when built, kept as text after load() and parsed on first use (a
  /// search touches a few thousand of ~10^5).
  mutable std::vector<codegen::SuperSchedule> templates;
  mutable std::vector<char> parsed;  ///< per template, after load(); empty: all parsed
  std::vector<std::string> texts;

  std::size_t count() const { return parsed.empty() ? templates.size() : texts.size(); }
  const codegen::SuperSchedule& schedule(std::size_t i) const {
    if (!parsed.empty() && !parsed[i]) {
      templates[i] = codegen::parse_schedule(kind, texts[i]);
      parsed[i] = 1;
    }
    return templates[i];
  }
  const std::vector<codegen::SuperSchedule>& all() const {
    if (!parsed.empty())
      for (std::size_t i = 0; i < texts.size(); ++i) schedule(i);
    return templates;
  }
  HeadTail tail;
  std::unique_ptr<hnswlib::L2Space> l2;
  std::unique_ptr<HeadSpace> head;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph;
  double build_seconds = 0.0;

  /// Switches the graph's distance to the head (after building under L2).
  void use_head() {
    head = std::make_unique<HeadSpace>(tail);
    graph->fstdistfunc_ = head->get_dist_func();
    graph->dist_func_param_ = head->get_dist_func_param();
  }
  const float* node(std::size_t label) const {
    return reinterpret_cast<const float*>(
        graph->getDataByInternalId(graph->label_lookup_.at(static_cast<hnswlib::labeltype>(label))));
  }
};

std::string index_graph_hash(const std::string& path, std::uint64_t& bytes) {
  return kernels::hex16(file_hash(path, bytes));
}

ScheduleIndex::ScheduleIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ScheduleIndex::ScheduleIndex(ScheduleIndex&&) noexcept = default;
ScheduleIndex& ScheduleIndex::operator=(ScheduleIndex&&) noexcept = default;
ScheduleIndex::~ScheduleIndex() = default;

kernels::KernelKind ScheduleIndex::kind() const { return impl_->kind; }
std::size_t ScheduleIndex::size() const { return impl_->count(); }
const std::vector<codegen::SuperSchedule>& ScheduleIndex::templates() const {
  return impl_->all();
}
const IndexBuildOptions& ScheduleIndex::build_options() const { return impl_->options; }
double ScheduleIndex::build_seconds() const { return impl_->build_seconds; }

ScheduleIndex ScheduleIndex::build(const CostModel& model,
                                   std::vector<codegen::SuperSchedule> templates,
                                   const IndexBuildOptions& options,
                                   const std::function<void(std::size_t, std::size_t)>& progress) {
  const double t0 = kernels::now_seconds();
  if (options.M < 2 || options.ef_construction < 1)
    throw Error("an HNSW index needs M >= 2 and ef_construction >= 1");
  auto impl = std::make_unique<Impl>();
  impl->kind = model.config().kind;
  impl->options = options;
  std::unordered_set<codegen::SuperSchedule> seen;
  for (codegen::SuperSchedule& s : templates) {
    if (s.kind != impl->kind)
      throw Error("a " + std::string(kernels::kernel_name(s.kind)) + " schedule among the " +
                  std::string(kernels::kernel_name(impl->kind)) + " index's templates");
    s = codegen::canonicalize(s);
    if (seen.insert(s).second) impl->templates.push_back(s);
  }
  if (impl->templates.empty()) throw Error("an index needs at least one template schedule");
  impl->tail = model.head_tail();
  const auto dim = static_cast<std::size_t>(impl->tail.width);
  const std::size_t n = impl->templates.size();
  impl->l2 = std::make_unique<hnswlib::L2Space>(dim);
  impl->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(
      impl->l2.get(), n, static_cast<std::size_t>(options.M),
      static_cast<std::size_t>(options.ef_construction), static_cast<std::size_t>(options.seed));
  constexpr std::size_t kBatch = 16384;  // node vectors computed per model call
  std::size_t reported = 0;
  for (std::size_t b = 0; b < n; b += kBatch) {
    const std::size_t e = std::min(n, b + kBatch);
    const std::vector<codegen::SuperSchedule> part(
        impl->templates.begin() + static_cast<std::ptrdiff_t>(b),
        impl->templates.begin() + static_cast<std::ptrdiff_t>(e));
    const std::vector<float> v = model.node_vectors(part);
    for (std::size_t i = b; i < e; ++i) {
      impl->graph->addPoint(v.data() + (i - b) * dim, static_cast<hnswlib::labeltype>(i));
      if (progress && (i + 1 == n || i + 1 >= reported + std::max<std::size_t>(1, n / 100))) {
        reported = i + 1;
        progress(i + 1, n);
      }
    }
  }
  impl->use_head();
  impl->build_seconds = kernels::now_seconds() - t0;
  return ScheduleIndex(std::move(impl));
}

void ScheduleIndex::save(const std::string& path) const {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  impl_->graph->saveIndex(tmp);
  std::uint64_t bytes = 0;
  const std::uint64_t hash = file_hash(tmp, bytes);
  if (bytes == 0) throw Error("cannot write " + path, "check that the directory is writable");
  nlohmann::json templates = nlohmann::json::array();
  for (const auto& s : impl_->all()) templates.push_back(codegen::to_text(s));
  const nlohmann::json header = {{"format", kMagic},
                                 {"version", kScheduleIndexFormatVersion},
                                 {"kernel", std::string(kernels::kernel_name(impl_->kind))},
                                 {"width", impl_->tail.width},
                                 {"M", impl_->options.M},
                                 {"ef_construction", impl_->options.ef_construction},
                                 {"seed", impl_->options.seed},
                                 {"graph_bytes", bytes},
                                 {"graph_hash", kernels::hex16(hash)},
                                 {"templates", templates}};
  const std::string tmp_json = path + ".json.tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp_json);
    out << header.dump() << "\n";
    if (!out.flush())
      throw Error("cannot write " + path + ".json", "check the free space and permissions");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0 ||
      std::rename(tmp_json.c_str(), (path + ".json").c_str()) != 0) {
    std::remove(tmp.c_str());
    std::remove(tmp_json.c_str());
    throw Error("cannot move the index into place at " + path,
                "check that the directory is writable");
  }
}

namespace {
/// An integer field of the index header in [lo, hi]; Error otherwise.
std::int64_t header_int(const nlohmann::json& h, const char* key, std::int64_t lo, std::int64_t hi,
                        const std::string& path) {
  return kernels::json_int_field(h, key, lo, hi, path + ".json: index header field",
                                 "build the index again");
}
}  // namespace

ScheduleIndex ScheduleIndex::load(const std::string& path, const CostModel& model) {
  nlohmann::json h;
  {
    std::ifstream in(path + ".json");
    if (!in) throw Error("cannot read " + path + ".json", "build the index again");
    try {
      in >> h;
    } catch (const nlohmann::json::exception& e) {
      throw Error(path + ".json: corrupt index header (" + e.what() + ")", "build the index again");
    }
  }
  auto impl = std::make_unique<Impl>();
  try {
    if (h.at("format") != kMagic) throw Error(path + ".json is not a schedule index header");
    const std::int64_t version = header_int(h, "version", 0, 1 << 30, path);
    if (version != kScheduleIndexFormatVersion)
      throw Error(path + ": index format version " + std::to_string(version) +
                      ", this waco-hybrid reads version " +
                      std::to_string(kScheduleIndexFormatVersion),
                  "build the index again");
    const auto kind = kernels::parse_kernel(h.at("kernel").get<std::string>());
    if (!kind || *kind != model.config().kind)
      throw Error(path + ": the index is for " + h.at("kernel").get<std::string>() +
                  ", the model for " + std::string(kernels::kernel_name(model.config().kind)));
    impl->kind = *kind;
    impl->options.M = static_cast<int>(header_int(h, "M", 2, 10000, path));
    impl->options.ef_construction = static_cast<int>(header_int(h, "ef_construction", 1, 1 << 30, path));
    impl->options.seed = kernels::json_unsigned_field(h, "seed", path + ".json: index header field",
                                                      "build the index again");
    impl->texts = h.at("templates").get<std::vector<std::string>>();
    impl->templates.resize(impl->texts.size());
    impl->parsed.assign(impl->texts.size(), 0);
    std::uint64_t bytes = 0;
    const std::uint64_t hash = file_hash(path, bytes);
    if (bytes != static_cast<std::uint64_t>(header_int(h, "graph_bytes", 0, INT64_MAX, path)) ||
        kernels::hex16(hash) != h.at("graph_hash").get<std::string>())
      throw Error(path + ": the graph file does not match its header (" + std::to_string(bytes) +
                      " bytes, hash " + kernels::hex16(hash) + ")",
                  "it was truncated or replaced; build the index again");
    impl->tail = model.head_tail();
    const std::int64_t width = header_int(h, "width", 1, 1 << 20, path);
    if (width != impl->tail.width)
      throw Error(path + ": the index's vectors have " + std::to_string(width) +
                  " numbers, the model's " + std::to_string(impl->tail.width));
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ".json: malformed index header (" + e.what() + ")", "build the index again");
  }
  impl->head = std::make_unique<HeadSpace>(impl->tail);
  check_graph_file(path, impl->count(), static_cast<std::size_t>(impl->tail.width),
                   static_cast<std::size_t>(impl->options.M));
  try {
    impl->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(impl->head.get(), path);
  } catch (const std::exception& e) {
    throw Error(path + ": hnswlib cannot read the graph (" + e.what() + ")",
                "build the index again");
  }
  if (impl->graph->cur_element_count != impl->count())
    throw Error(path + ": the graph has " + std::to_string(impl->graph->cur_element_count) +
                    " nodes, its header " + std::to_string(impl->count()) + " templates",
                "build the index again");
  // The model must be the one the graph was built with: compare node vectors on a sample.
  const std::vector<std::size_t> sample = checked_nodes(impl->count());
  std::vector<codegen::SuperSchedule> some;
  for (std::size_t i : sample) some.push_back(impl->schedule(i));
  const std::vector<float> want = model.node_vectors(some);
  const auto dim = static_cast<std::size_t>(impl->tail.width);
  for (std::size_t k = 0; k < sample.size(); ++k) {
    const float* have = impl->node(sample[k]);
    for (std::size_t d = 0; d < dim; ++d) {
      const float a = have[d], b = want[k * dim + d];
      if (!(std::fabs(a - b) <= 1e-4f * (1.0f + std::fabs(b))))
        throw Error(path + ": the index was built with another cost model (node " +
                        std::to_string(sample[k]) + " differs)",
                    "build the index again for this model");
    }
  }
  return ScheduleIndex(std::move(impl));
}

IndexResult ScheduleIndex::search(
    const std::vector<float>& query, const IndexSearchOptions& options,
    const std::function<bool(const codegen::SuperSchedule&)>& keep) const {
  const double t0 = kernels::now_seconds();
  if (query.size() != static_cast<std::size_t>(impl_->tail.width))
    throw Error("a query vector of " + std::to_string(query.size()) + " numbers for an index of " +
                std::to_string(impl_->tail.width));
  IndexResult r;
  const std::size_t n = size();
  const std::size_t k = std::min(options.k, n);
  std::size_t ef = std::min(n, std::max(options.ef, k));
  const std::uint64_t before = impl_->head->evaluations();
  hnswlib::HierarchicalNSW<float>& g = *impl_->graph;
  // The entries of the extra walks: the best-scored of a sample spread evenly over the nodes.
  std::vector<hnswlib::tableint> starts;
  if (options.starts > 0 && n > 1) {
    const std::size_t m = std::min(n, std::max(options.sample, options.starts));
    std::vector<std::pair<float, hnswlib::tableint>> sampled;
    for (std::size_t i = 0; i < m; ++i) {
      const auto id = static_cast<hnswlib::tableint>(i * n / m);
      if (keep && !keep(impl_->schedule(static_cast<std::size_t>(g.getExternalLabel(id))))) continue;
      sampled.emplace_back(g.fstdistfunc_(query.data(), g.getDataByInternalId(id), g.dist_func_param_), id);
    }
    std::sort(sampled.begin(), sampled.end());
    for (std::size_t i = 0; i < std::min(options.starts, sampled.size()); ++i)
      starts.push_back(sampled[i].second);
  }
  for (;;) {
    g.setEf(ef);
    // k = ef: every candidate the walk kept, best last in the queue.
    auto found = g.searchKnn(query.data(), ef);
    std::vector<std::pair<float, std::size_t>> got;
    while (!found.empty()) {
      got.emplace_back(found.top().first, static_cast<std::size_t>(found.top().second));
      found.pop();
    }
    for (const hnswlib::tableint start : starts) {
      auto walk = g.searchBaseLayerST<false>(start, query.data(), ef);
      while (!walk.empty()) {
        got.emplace_back(walk.top().first, static_cast<std::size_t>(g.getExternalLabel(walk.top().second)));
        walk.pop();
      }
    }
    std::sort(got.begin(), got.end());
    got.erase(std::unique(got.begin(), got.end()), got.end());  // a node two walks found
    ++r.searches;
    r.schedules.clear();
    r.scores.clear();
    r.discarded = 0;
    for (const auto& [d, label] : got) {
      if (r.schedules.size() == k) break;
      const codegen::SuperSchedule& s = impl_->schedule(label);
      if (keep && !keep(s)) {
        ++r.discarded;
        continue;
      }
      r.schedules.push_back(s);
      r.scores.push_back(d);
    }
    r.ef = ef;
    if (r.schedules.size() >= k || ef >= n) break;
    ef = std::min(n, ef * 4);
  }
  r.evaluations = impl_->head->evaluations() - before;
  r.seconds = kernels::now_seconds() - t0;
  return r;
}

IndexResult ScheduleIndex::exact(const std::vector<float>& query, std::size_t k,
                                 const std::function<bool(const codegen::SuperSchedule&)>& keep)
    const {
  const double t0 = kernels::now_seconds();
  if (query.size() != static_cast<std::size_t>(impl_->tail.width))
    throw Error("a query vector of " + std::to_string(query.size()) + " numbers for an index of " +
                std::to_string(impl_->tail.width));
  std::vector<std::pair<float, std::size_t>> scored;
  IndexResult r;
  for (std::size_t i = 0; i < size(); ++i) {
    if (keep && !keep(impl_->schedule(i))) continue;
    scored.emplace_back(impl_->tail.score(query.data(), impl_->node(i)), i);
    ++r.evaluations;
  }
  const std::size_t m = std::min(k, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(m), scored.end());
  for (std::size_t q = 0; q < m; ++q) {
    r.schedules.push_back(impl_->schedule(scored[q].second));
    r.scores.push_back(scored[q].first);
  }
  r.seconds = kernels::now_seconds() - t0;
  return r;
}

double recall_at(const std::vector<codegen::SuperSchedule>& found,
                 const std::vector<codegen::SuperSchedule>& exact) {
  if (exact.empty()) return 1.0;
  const std::unordered_set<codegen::SuperSchedule> have(found.begin(), found.end());
  std::size_t hit = 0;
  for (const auto& s : exact) hit += have.count(s);
  return static_cast<double>(hit) / static_cast<double>(exact.size());
}

}  // namespace waco::learned
