// The fuzz targets' entry functions (targets.hpp). Each writes its input where the reader expects
// a file (a per-process scratch folder, under $TMPDIR), runs the reader as waco-hybrid does, and
// checks what a successful read gave.
#include "targets.hpp"

#include <sqlite3.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cost_model_internal.hpp"  // learned/src: the model file's magic, feature_set
#include "plan_file.hpp"            // api/src: parse_plan_file
#include "waco/learned/shipped.hpp"
#include "waco/codegen/schedule_encoding.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/heuristics/tuning_cache.hpp"
#include "waco/kernels/cache_probe.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/recipe.hpp"
#include "waco/kernels/sparse.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/matrix_features.hpp"
#include "waco/learned/schedule_index.hpp"
#include "waco/learned/training_data.hpp"

namespace waco::fuzz {

namespace fs = std::filesystem;
using kernels::Error;
using kernels::KernelKind;

namespace {

/// The readers' memory limit under fuzzing: large enough for every seed, small enough that
/// libFuzzer's 2 GB RSS limit is never what stops an input.
constexpr std::int64_t kFuzzMemory = std::int64_t{256} << 20;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(cond, what)                                                 \
  do {                                                                         \
    if (!(cond)) ::waco::fuzz::finding(std::string(#cond ": ") + (what));      \
  } while (0)

/// Runs f, which must not throw: an Error from it is a finding too (e.g. a file waco-hybrid
/// wrote that it then refuses to read).
template <class F>
auto must(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    finding(std::string(what) + " refused: " + e.what());
  }
}

/// This process's scratch folder (removed at exit).
const std::string& scratch() {
  static const std::string dir = [] {
    const fs::path p = fs::temp_directory_path() / ("waco-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(p);
    static const std::string keep = p.string();
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(keep, ec);
    });
    return p.string();
  }();
  return dir;
}

std::string put(const std::string& name, const void* data, std::size_t size) {
  const std::string path = scratch() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  f.close();
  if (!f) finding("cannot write the scratch file " + path);
  return path;
}

std::string put_gz(const std::string& name, const void* data, std::size_t size) {
  const std::string path = scratch() + "/" + name;
  gzFile g = gzopen(path.c_str(), "wb1");
  if (g == nullptr) finding("cannot write the scratch file " + path);
  if (size > 0 && gzwrite(g, data, static_cast<unsigned>(size)) != static_cast<int>(size))
    finding("gzwrite failed on " + path);
  if (gzclose(g) != Z_OK) finding("gzclose failed on " + path);
  return path;
}

template <class V>
bool same_bits(const std::vector<V>& a, const std::vector<V>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(V)) == 0);
}
bool same_bits(const kernels::Values& a, const kernels::Values& b) { return a == b; }

kernels::ReadOptions read_options() {
  kernels::ReadOptions o;
  o.max_memory = kFuzzMemory;
  return o;
}

// ---- Matrix Market ------------------------------------------------------------------------

void check_matrix_file(const std::string& path) {
  const kernels::ReadOptions opts = read_options();
  bool sparse = false;
  kernels::LoadedMatrix m;
  try {
    m = kernels::read_matrix_market(path, opts);
    sparse = true;
  } catch (const Error&) {
  }
  if (sparse) {
    const kernels::CooMatrix& a = m.matrix;
    kernels::check_bounds(a);
    FUZZ_CHECK(kernels::is_canonical(a), "the matrix read is not canonical");
    FUZZ_CHECK(m.source.stored_entries >= 0 && a.nnz() <= 2 * m.source.stored_entries, "nnz vs stored");
    FUZZ_CHECK(m.source.duplicates_summed <= m.source.stored_entries, "duplicates vs stored");
    for (double v : a.val) FUZZ_CHECK(std::isfinite(v), "a non-finite value without allow_nonfinite");
    // What waco-hybrid writes it reads back, bit for bit.
    const std::string out = scratch() + "/back.mtx";
    must("write_matrix_market", [&] { kernels::write_matrix_market(out, a, "fuzz"); });
    const kernels::LoadedMatrix b = must("reading back", [&] { return kernels::read_matrix_market(out, opts); });
    FUZZ_CHECK(b.matrix.rows == a.rows && b.matrix.cols == a.cols, "shape after the round trip");
    FUZZ_CHECK(b.matrix.row == a.row && b.matrix.col == a.col, "coordinates after the round trip");
    FUZZ_CHECK(same_bits(b.matrix.val, a.val), "values after the round trip");
    // Dropping zeros drops exactly the explicit zeros.
    kernels::ReadOptions drop = opts;
    drop.drop_explicit_zeros = true;
    const kernels::LoadedMatrix d = must("reading with drop_explicit_zeros", [&] { return kernels::read_matrix_market(path, drop); });
    FUZZ_CHECK(d.matrix.nnz() == a.nnz() - m.source.explicit_zeros, "drop_explicit_zeros");
  }
  kernels::DenseMatrix dense;
  try {
    dense = kernels::read_matrix_market_dense(path, kernels::Layout::RowMajor, opts);
  } catch (const Error&) {
    return;
  }
  FUZZ_CHECK(!sparse, "one file read both as coordinate and as array");
  FUZZ_CHECK(dense.data.size() == static_cast<std::size_t>(dense.rows) * static_cast<std::size_t>(dense.cols),
             "dense size");
  const std::string out = scratch() + "/back_dense.mtx";
  must("write_matrix_market_dense", [&] { kernels::write_matrix_market_dense(out, dense, "fuzz"); });
  const kernels::DenseMatrix back =
      must("reading back", [&] { return kernels::read_matrix_market_dense(out, kernels::Layout::RowMajor, opts); });
  FUZZ_CHECK(back.rows == dense.rows && back.cols == dense.cols, "dense shape after the round trip");
  FUZZ_CHECK(same_bits(back.data, dense.data), "dense values after the round trip");
}

// ---- schedules ----------------------------------------------------------------------------

void check_schedule(const codegen::SuperSchedule& s) {
  const std::vector<std::string> problems = codegen::validate(s);
  FUZZ_CHECK(problems.empty(), problems.empty() ? "" : problems.front());
  FUZZ_CHECK(codegen::canonicalize(s) == s, "a parsed schedule is not canonical");
  const std::string text = codegen::to_text(s);
  const codegen::SuperSchedule a = must("parse_schedule(to_text)", [&] { return codegen::parse_schedule(s.kind, text); });
  FUZZ_CHECK(a == s, "text round trip: " + text);
  FUZZ_CHECK(codegen::to_text(a) == text, "printed twice differently: " + text);
  FUZZ_CHECK(codegen::hash_value(a) == codegen::hash_value(s), "hash of equal schedules");
  const codegen::SuperSchedule b = must("schedule_from_json(to_json)", [&] { return codegen::schedule_from_json(codegen::to_json(s)); });
  FUZZ_CHECK(b == s, "JSON round trip: " + text);
  // The cost model's encoding (static scheduling and chunk=auto are scored as chunk 256, so they
  // have no code).
  if (s.chunk != codegen::kStaticChunk && s.chunk != codegen::kAutoChunk) {
    const codegen::ScheduleCode c = must("encode", [&] { return codegen::encode(s); });
    // An N (narrow) level encodes as C, the format the model scores it as
    // (schedule_encoding.hpp): the code decodes to the schedule's wide twin.
    FUZZ_CHECK(must("decode", [&] { return codegen::decode(c); }) == codegen::wide_twin(s),
               "decode(encode(s)) == wide_twin(s): " + text);
    const std::vector<int> fields = must("categorical_fields", [&] { return codegen::categorical_fields(c); });
    const std::vector<int> cards = codegen::categorical_cardinalities(s.kind);
    FUZZ_CHECK(fields.size() == cards.size(), "field count");
    for (std::size_t f = 0; f < fields.size(); ++f)
      FUZZ_CHECK(fields[f] >= 0 && fields[f] < cards[f], "field " + std::to_string(f) + " of " + text);
  }
}

KernelKind kernel_of_byte(std::uint8_t b) { return kernels::kAllKernels[b % 4]; }

// ---- tuning cache and plan files ------------------------------------------------------------

heuristics::TuningKey fuzz_key(KernelKind k) {
  heuristics::TuningKey key;
  key.content = "0123456789abcdef";
  key.kind = k;
  key.dense = k == KernelKind::SpMV ? 1 : 16;
  key.threads = 2;
  key.machine = {{"cpu", "fuzz"}, {"l3", 1 << 20}};
  return key;
}

// ---- cost models ----------------------------------------------------------------------------

void put_u32(std::string& out, std::uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

/// A valid cost model file (version 2, padded) of the plain (torch-free) architecture with small
/// widths, its weights deterministic and small (the layout of tensor_reader.hpp, the shapes of
/// cost_model_plain.cpp).
std::string small_cost_model(KernelKind k, learned::EncoderKind e, int width, int table_width) {
  learned::CostModelConfig c;
  c.kind = k;
  c.encoder = e;
  c.width = width;
  c.table_width = table_width;
  const nlohmann::json header = {{"format_version", learned::kCostModelFormatVersion},
                                 {"schedule_encoding_version", codegen::kScheduleEncodingVersion},
                                 {"config", c.to_json()},
                                 {"record", nlohmann::json::object()}};
  const std::int64_t n = learned::feature_count(learned::feature_set(e), learned::dims_of(k));
  const std::int64_t w = width, tw = table_width;
  const std::vector<int> cards = codegen::categorical_cardinalities(k);
  const auto slots = static_cast<std::int64_t>(2 * codegen::kernel_spec(k).vars.size());
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes;
  auto linear = [&](const std::string& name, std::int64_t in, std::int64_t out) {
    shapes.push_back({name + ".weight", {out, in}});
    shapes.push_back({name + ".bias", {out}});
  };
  linear("feat1", n, w);
  linear("feat2", w, w);
  shapes.push_back({"feat_mean", {n}});
  shapes.push_back({"feat_std", {n}});
  for (std::size_t f = 0; f < cards.size(); ++f)
    shapes.push_back({"schedule.table" + std::to_string(f) + ".weight", {cards[f], tw}});
  linear("schedule.order", slots * slots, tw);
  linear("schedule.mlp1", static_cast<std::int64_t>(cards.size() + 1) * tw, w);
  linear("schedule.mlp2", w, w);
  linear("head1", 2 * w, 128);
  linear("head2", 128, 64);
  linear("head3", 64, 1);
  std::string out(learned::kCostModelMagic, 8);
  put_u32(out, learned::kCostModelFormatVersion);
  const std::string h = header.dump();
  put_u32(out, static_cast<std::uint32_t>(h.size()));
  out += h;
  put_u32(out, static_cast<std::uint32_t>(shapes.size()));
  std::uint32_t seed = 1;
  for (const auto& [name, sizes] : shapes) {
    put_u32(out, static_cast<std::uint32_t>(name.size()));
    out += name;
    put_u32(out, static_cast<std::uint32_t>(sizes.size()));
    std::int64_t numel = 1;
    for (std::int64_t s : sizes) {
      out.append(reinterpret_cast<const char*>(&s), 8);
      numel *= s;
    }
    // Version 2: the values start on a 64-byte line of the file, after a pad length and zeros.
    const std::size_t pad = (64 - (out.size() + 4) % 64) % 64;
    put_u32(out, static_cast<std::uint32_t>(pad));
    out.append(pad, '\0');
    for (std::int64_t i = 0; i < numel; ++i) {
      seed = seed * 1103515245u + 12345u;
      // feat_std divides: keep it positive.
      const float v = name == "feat_std" ? 1.0f : static_cast<float>((seed >> 16) % 200) / 100.0f - 1.0f;
      out.append(reinterpret_cast<const char*>(&v), 4);
    }
  }
  out += "END!";
  return out;
}

}  // namespace

// ---- entry functions ----------------------------------------------------------------------

void matrix_market(const std::uint8_t* data, std::size_t size) {
  check_matrix_file(put("in.mtx", data, size));
}

void matrix_market_gz(const std::uint8_t* data, std::size_t size) {
  check_matrix_file(put_gz("in.mtx.gz", data, size));
}

void frostt(const std::uint8_t* data, std::size_t size) {
  const std::string path = put("in.tns", data, size);
  const kernels::ReadOptions opts = read_options();
  kernels::LoadedTensor t;
  try {
    t = kernels::read_frostt(path, opts);
  } catch (const Error&) {
    return;
  }
  kernels::check_bounds(t.tensor);
  FUZZ_CHECK(kernels::is_canonical(t.tensor), "the tensor read is not canonical");
  FUZZ_CHECK(t.tensor.nnz() + t.source.duplicates_summed == t.source.stored_entries, "entries vs stored");
  for (float v : t.tensor.val) FUZZ_CHECK(std::isfinite(v), "a non-finite value without allow_nonfinite");
  const std::string out = scratch() + "/back.tns";
  must("write_frostt", [&] { kernels::write_frostt(out, t.tensor); });
  const kernels::LoadedTensor b = must("reading back", [&] { return kernels::read_frostt(out, opts); });
  FUZZ_CHECK(b.tensor.dims == t.tensor.dims, "dims after the round trip");
  FUZZ_CHECK(b.tensor.idx == t.tensor.idx, "indices after the round trip");
  FUZZ_CHECK(same_bits(b.tensor.val, t.tensor.val), "values after the round trip");
}

void schedule_text(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const KernelKind k = kernel_of_byte(data[0]);
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  codegen::SuperSchedule s;
  try {
    s = codegen::schedule_from_string(k, text);
  } catch (const Error&) {
    return;
  }
  FUZZ_CHECK(s.kind == k, "kernel of the parsed schedule");
  check_schedule(s);
}

void schedule_json(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return;
  codegen::SuperSchedule s;
  try {
    s = codegen::schedule_from_json(j);
  } catch (const Error&) {
    return;
  }
  check_schedule(s);
  // The code's JSON form, read back.
  if (s.chunk != codegen::kStaticChunk && s.chunk != codegen::kAutoChunk) {
    const codegen::ScheduleCode c = codegen::encode(s);
    FUZZ_CHECK(must("schedule_code_from_json", [&] { return codegen::schedule_code_from_json(codegen::to_json(c)); }) == c,
               "code JSON round trip");
  }
  try {  // and as a code, whatever it is
    codegen::decode(codegen::schedule_code_from_json(j));
  } catch (const Error&) {
  }
}

void recipe(const std::uint8_t* data, std::size_t size) {
  const std::string path = put("recipes.jsonl", data, size);
  std::vector<kernels::Recipe> rs;
  try {
    rs = kernels::read_recipes(path);
  } catch (const Error&) {
    return;
  }
  for (const kernels::Recipe& r : rs) {
    const nlohmann::json j = r.to_json();
    const kernels::Recipe back = must("Recipe::from_json(to_json)", [&] { return kernels::Recipe::from_json(j); });
    FUZZ_CHECK(back == r, "recipe JSON round trip: " + j.dump());
    FUZZ_CHECK(back.to_json() == j, "recipe JSON printed twice differently: " + j.dump());
    (void)r.label();
    // A file recipe's estimate reads its file: not with a path made by the fuzzer.
    if (r.source != kernels::Recipe::Source::File) {
      try {
        FUZZ_CHECK(kernels::estimated_nnz(r) >= 0, "negative estimate: " + j.dump());
      } catch (const Error&) {
      }
    }
  }
  // Written and read again, the file gives the same recipes.
  const std::string out = scratch() + "/back.jsonl";
  must("write_recipes", [&] { kernels::write_recipes(out, rs); });
  const std::vector<kernels::Recipe> back = must("reading back", [&] { return kernels::read_recipes(out); });
  FUZZ_CHECK(back.size() == rs.size(), "recipe count after the round trip");
  for (std::size_t i = 0; i < rs.size(); ++i) FUZZ_CHECK(back[i] == rs[i], "recipe after the round trip");
}

// The first byte: bits 0-1 the kernel of the key the entry is looked up under; bit 2 files the
// entry under that key (its "key" field replaced); bit 3 recomputes the checksum, so that the
// fuzzer reaches what comes after those gates. TuningCache::find must never throw: a corrupt
// entry is reported (problem) and ignored.
void tuning_cache(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const heuristics::TuningKey key = fuzz_key(kernel_of_byte(data[0]));
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 12) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object()) {
      if (data[0] & 4) j["key"] = key.to_json();
      if (data[0] & 8)
        j["checksum"] = heuristics::tuning_cache_checksum(j.contains("key") ? j["key"] : nlohmann::json(),
                                                          j.contains("schedule") ? j["schedule"] : nlohmann::json(),
                                                          j.contains("report") ? j["report"] : nlohmann::json());
      text = j.dump();
    }
  }
  const std::string dir = scratch() + "/plans";
  fs::create_directories(dir);
  put("plans/" + key.hash() + ".json", text.data(), text.size());
  const heuristics::TuningCache cache(dir);
  const heuristics::CacheLookup r = cache.find(key);
  if (r.hit) {
    FUZZ_CHECK(r.problem.empty(), "a hit with a problem");
    FUZZ_CHECK(r.hit->schedule.kind == key.kind, "a hit for another kernel");
    check_schedule(r.hit->schedule);
  }
}

// The first byte: bit 0 recomputes the checksum of a JSON object (as tuning_cache does).
void plan_file(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object()) {
      j["checksum"] = api::plan_checksum(j);
      text = j.dump();
    }
  }
  api::PlanFile p;
  try {
    p = api::parse_plan_file("fuzz.plan", text);
  } catch (const Error&) {
    return;
  }
  FUZZ_CHECK(p.schedule.kind == p.kind, "a plan whose schedule is for another kernel");
  check_schedule(p.schedule);
}

void dataset_export(const std::uint8_t* data, std::size_t size) {
  const std::string path = put("export.jsonl", data, size);
  heuristics::ResultsDb db(":memory:");
  std::int64_t imported = 0;
  try {
    learned::for_each_export_group(path, [&](const nlohmann::json& g) {
      try {
        const learned::DatasetGroup d = learned::group_from_json(g);
        for (const learned::MeasuredCandidate& c : d.candidates) check_schedule(c.schedule);
      } catch (const Error&) {
      }
      db.import_group(g);
      ++imported;
    });
  } catch (const Error&) {
  }
  if (imported == 0) return;
  // What was imported exports again, and that imports again.
  heuristics::ResultsDb again(":memory:");
  std::int64_t exported = 0;
  db.for_each_group("", [&](const nlohmann::json& g) {
    ++exported;
    must("importing an exported group", [&] { again.import_group(g); });
  });
  FUZZ_CHECK(exported >= 1, "imported groups did not export");
}

void cost_model(const std::uint8_t* data, std::size_t size) {
  const std::string path = put("model.bin", data, size);
  std::optional<learned::CostModel> m;
  try {
    m.emplace(learned::CostModel::load(path));
  } catch (const Error&) {
    return;
  }
  try {
    (void)m->record();  // parsed when first read (ModelRecord)
  } catch (const Error&) {
  }
  // A model that loads scores: a small matrix (or tensor) and its default schedule.
  const KernelKind k = m->config().kind;
  learned::ModelInput in;
  if (kernels::needs_tensor(k)) {
    kernels::CooTensor t;
    t.dims = {3, 4, 5};
    t.idx = {{0, 1, 2}, {0, 3, 1}, {4, 0, 2}};
    t.val = {1.0f, 2.0f, 3.0f};
    in = m->prepare(t);
  } else {
    kernels::CooMatrix a;
    a.rows = 4;
    a.cols = 5;
    a.row = {0, 1, 1, 3};
    a.col = {0, 2, 4, 1};
    a.val = {1.0f, -2.0f, 3.0f, 0.5f};
    in = m->prepare(a);
  }
  const codegen::SuperSchedule s =
      codegen::schedule_from_string(k, kernels::needs_tensor(k) ? "csf" : "csr");
  FUZZ_CHECK(m->scores(in, {s}).size() == 1, "one score per schedule");
  const learned::HeadTail h = m->head_tail();
  FUZZ_CHECK(static_cast<std::int64_t>(h.w2.size()) == std::int64_t{h.width} * h.hidden, "head_tail shape");
  FUZZ_CHECK(m->query_vector(in).size() == m->node_vectors({s}).size(), "query and node vectors");
}

// ---- the HNSW schedule index ---------------------------------------------------------------

/// The shipped SpMV cost model (the lite build reads it), loaded once: an index is checked
/// against its node vectors.
const learned::CostModel& index_model() {
  static const learned::CostModel m =
      learned::CostModel::load(learned::default_model_path(kernels::KernelKind::SpMV));
  return m;
}

void hnsw_index(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return;
  const auto* text = reinterpret_cast<const char*>(data + 1);
  const std::size_t n = size - 1;
  const std::size_t eol = std::find(text, text + n, '\n') - text;
  std::string header(text, eol);
  const std::string graph = eol < n ? std::string(text + eol + 1, n - eol - 1) : std::string();
  const std::string path = put("index.hnsw", graph.data(), graph.size());
  // The flag byte's bit 0 makes the header record the graph's size and hash, so that the
  // fuzzer gets past that check to the graph itself.
  if (data[0] & 1) {
    nlohmann::json h = nlohmann::json::parse(header, nullptr, false);
    if (h.is_object()) {
      std::uint64_t bytes = 0;
      h["graph_hash"] = learned::index_graph_hash(path, bytes);
      h["graph_bytes"] = bytes;
      header = h.dump();
    }
  }
  put("index.hnsw.json", header.data(), header.size());
  const learned::CostModel& model = index_model();
  std::optional<learned::ScheduleIndex> index;
  try {
    index.emplace(learned::ScheduleIndex::load(path, model));
  } catch (const Error&) {
    return;
  }
  FUZZ_CHECK(index->kind() == KernelKind::SpMV, "an index of another kernel than its model's");
  // A loaded index is searched: its links and labels are followed.
  kernels::CooMatrix a;
  a.rows = 4;
  a.cols = 5;
  a.row = {0, 1, 1, 3};
  a.col = {0, 2, 4, 1};
  a.val = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<float> q = model.query_vector(model.prepare(a));
  learned::IndexSearchOptions o;
  o.k = 4;
  o.ef = 8;
  o.starts = 2;
  o.sample = 16;
  try {
    const learned::IndexResult r = index->search(q, o, nullptr);
    FUZZ_CHECK(r.schedules.size() <= o.k && r.schedules.size() == r.scores.size(), "search result sizes");
    for (const codegen::SuperSchedule& s : r.schedules) check_schedule(s);
    const learned::IndexResult e = index->exact(q, 3, nullptr);
    FUZZ_CHECK(e.schedules.size() <= 3, "exact result size");
  } catch (const Error&) {  // a template text that does not parse
  }
}

// ---- the results database --------------------------------------------------------------------

void results_db(const std::uint8_t* data, std::size_t size) {
  const std::string path = scratch() + "/results.sqlite";
  for (const char* side : {"-wal", "-shm", "-journal"}) fs::remove(path + side);
  put("results.sqlite", data, size);
  try {
    heuristics::ResultsDb db(path);
    (void)db.count_matrices();
    (void)db.count_schedules();
    (void)db.count_measurements();
    (void)db.meta("schema_version");
    (void)db.dataset_stats();
    (void)db.ablation_rows();
    std::vector<nlohmann::json> groups;
    db.for_each_group("", [&](const nlohmann::json& g) {
      if (groups.size() < 4) groups.push_back(g);
    });
    heuristics::ResultsDb again(":memory:");
    for (const nlohmann::json& g : groups) {
      // What a database exports imports again, or is refused cleanly: the rows export the
      // stored schedule text as it is, which a damaged file may hold damaged.
      try {
        again.import_group(g);
      } catch (const Error&) {
      }
      const std::string fp = g.at("matrix").at("fingerprint").get<std::string>();
      (void)db.find_matrix(fp);
      (void)db.find_provenance(fp);
      const auto kind = kernels::parse_kernel(g.at("kernel").get<std::string>());
      if (!kind) continue;
      heuristics::MeasurementKey key{fp, *kind, g.at("dense").get<int>(), g.at("rounds").get<int>()};
      for (const heuristics::StoredMeasurement& m : db.measurements(key))
        if (m.candidate.schedule) check_schedule(*m.candidate.schedule);
    }
  } catch (const Error&) {
  }
}

// ---- the cache-probe file -------------------------------------------------------------------

/// The key the input is read under (the seeds are stored under it, so that the fuzzer starts past
/// load_cache_probe's comparison of the keys).
const nlohmann::json& probe_key() {
  static const nlohmann::json key = {{"cpu", "fuzz"}, {"cpus", 2}, {"machine", "fuzz"}};
  return key;
}

/// A probe's result as cache_probe() would store it: detected on a three-level synthetic curve.
kernels::CacheProbeResult probe_seed_result() {
  kernels::CacheProbeResult r;
  for (int i = 0; i <= 56; ++i) {  // 16 KiB to 256 MiB, four sizes an octave
    const auto bytes = static_cast<std::int64_t>(std::llround(16384.0 * std::pow(2.0, i / 4.0))) / 256 * 256;
    const double gbps = bytes <= (48 << 10) ? 180.0 : bytes <= (1 << 20) ? 90.0 : bytes <= (32 << 20) ? 45.0 : 15.0;
    r.curve.push_back({bytes, gbps});
  }
  kernels::detect_cache_levels(r);
  r.seconds = 0.75;
  r.passes = 4;
  return r;
}

// The input is the file cache_probe() keeps (cache-probe.json). load_cache_probe never throws:
// a file it cannot use is measured again. Its "result" read directly refuses with an Error only.
void cache_probe(const std::uint8_t* data, std::size_t size) {
  const std::string path = put("cache-probe.json", data, size);
  const std::optional<kernels::CacheProbeResult> loaded = kernels::load_cache_probe(path, probe_key());
  const nlohmann::json j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(data), size),
                                                 nullptr, false);
  std::optional<kernels::CacheProbeResult> direct;
  if (j.is_object() && j.contains("result")) {
    try {
      direct = kernels::CacheProbeResult::from_json(j.at("result"));
    } catch (const Error&) {
    }
  }
  if (!loaded) return;
  FUZZ_CHECK(direct.has_value(), "a file loaded whose result is refused");
  const nlohmann::json back = loaded->to_json();
  FUZZ_CHECK(back == direct->to_json(), "the loaded and the direct result differ");
  for (std::size_t i = 0; i < loaded->curve.size(); ++i)
    FUZZ_CHECK(loaded->curve[i].bytes > 0 && loaded->curve[i].gbps > 0 &&
                   (i == 0 || loaded->curve[i].bytes > loaded->curve[i - 1].bytes),
               "a curve of sizes not ascending or bandwidths not positive");
  FUZZ_CHECK(loaded->l1d >= 0 && loaded->l2 >= 0 && loaded->l3 >= 0, "a negative capacity");
  FUZZ_CHECK(loaded->passes >= 0 && loaded->seconds >= 0, "negative passes or time");
  FUZZ_CHECK(must("the result's JSON", [&] { return kernels::CacheProbeResult::from_json(back); }).to_json() == back,
             "the result's JSON does not read back");
  const std::string again = scratch() + "/probe-again/cache-probe.json";
  FUZZ_CHECK(kernels::store_cache_probe(again, probe_key(), *loaded), "cannot store the result");
  const std::optional<kernels::CacheProbeResult> stored = kernels::load_cache_probe(again, probe_key());
  FUZZ_CHECK(stored && stored->to_json() == back, "the stored result does not load back");
}

// ---- the table ----------------------------------------------------------------------------

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"matrix_market", matrix_market, "the bytes of a Matrix Market file (coordinate or array, plain or gzip)"},
      {"matrix_market_gz", matrix_market_gz, "Matrix Market text, gzip-compressed by the target before reading"},
      {"frostt", frostt, "the bytes of a FROSTT .tns file (plain or gzip)"},
      {"schedule_text", schedule_text, "a kernel byte, then a schedule's text form or a shortcut"},
      {"schedule_json", schedule_json, "a schedule's JSON form (and a schedule code's)"},
      {"recipe", recipe, "a recipe file: one recipe JSON object per line"},
      {"tuning_cache", tuning_cache, "a flag byte, then a tuning-cache entry"},
      {"plan_file", plan_file, "a flag byte, then a plan file"},
      {"dataset_export", dataset_export, "a dataset export file (JSON lines, plain or gzip)"},
      {"cost_model", cost_model, "a cost model file (header and weights)"},
      {"hnsw_index", hnsw_index, "a flag byte, a schedule index header line, then its HNSW graph"},
      {"results_db", results_db, "a results database file (SQLite)"},
      {"cache_probe", cache_probe, "a cache-probe file (the bandwidth curve and capacities cache_probe() keeps)"},
  };
  return all;
}

const Target* find_target(std::string_view name) {
  for (const Target& t : targets())
    if (name == t.name) return &t;
  return nullptr;
}

int write_generated_seeds(const std::string& target, const std::string& dir) {
  fs::create_directories(dir);
  int n = 0;
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream f(dir + "/" + name, std::ios::binary | std::ios::trunc);
    f << bytes;
    ++n;
  };
  if (target == "schedule_text" || target == "schedule_json") {
    const std::vector<std::string> matrix = {
        "csr", "dcsr", "csc", "bcsr4x4", "bcsr8x1",
        "order=i,k format=UC parallel=i threads=0 chunk=static",
        "split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1 threads=2 chunk=32",
        "split=i:8 order=i1,k,i0 format=UCU parallel=i1 threads=1 chunk=1"};
    const std::vector<std::string> spmm = {"split=j:16 order=i,k,j1,j0 format=UC parallel=i chunk=64",
                                           "split=i:2,j:4 order=i1,k,i0,j1,j0 format=CCU parallel=i1 chunk=8"};
    const std::vector<std::string> mttkrp = {
        "csf", "split=j:16 order=i,k,l,j1,j0 format=UCC parallel=i chunk=static",
        "split=i:4,k:2 order=i1,k1,i0,k0,l,j format=CCUUC parallel=i1 threads=4 chunk=16"};
    for (KernelKind k : kernels::kAllKernels) {
      std::vector<std::string> texts = kernels::needs_tensor(k) ? mttkrp : matrix;
      if (k == KernelKind::SpMM) texts.insert(texts.end(), spmm.begin(), spmm.end());
      const std::string kn(kernels::kernel_name(k));
      const auto kb = static_cast<char>(k == KernelKind::SpMV ? 0 : k == KernelKind::SpMM ? 1 : k == KernelKind::SDDMM ? 2 : 3);
      for (std::size_t i = 0; i < texts.size(); ++i) {
        codegen::SuperSchedule s;
        try {
          s = codegen::schedule_from_string(k, texts[i]);
        } catch (const Error&) {
          continue;  // a text that does not fit this kernel
        }
        const std::string name = kn + "-" + std::to_string(i);
        if (target == "schedule_text")
          write(name + ".txt", std::string(1, kb) + (i % 2 ? codegen::to_text(s) : texts[i]));
        else
          write(name + ".json", codegen::to_json(s).dump(i % 2 ? 1 : -1));
      }
    }
  } else if (target == "recipe") {
    std::vector<kernels::Recipe> rs = kernels::default_mix(16, 7, {}, 200000);
    const std::vector<kernels::Recipe> ts = kernels::default_tensor_mix(4, 7, 200000);
    rs.insert(rs.end(), ts.begin(), ts.end());
    kernels::Recipe f;
    f.source = kernels::Recipe::Source::File;
    f.path = "data/bcsstk13.mtx.gz";
    f.augment.sub_rows = 400;
    f.augment.sub_cols = 400;
    f.augment.sub_diagonal = true;
    f.augment.resize = 1.5;
    f.augment.block = 2;
    f.augment.permute = kernels::Permutation::Symmetric;
    f.augment.seed = 3;
    rs.push_back(f);
    for (std::size_t i = 0; i < rs.size(); ++i) write(std::to_string(i) + ".jsonl", rs[i].to_json().dump() + "\n");
    std::string all = "# every seed recipe\n\n";
    for (const kernels::Recipe& r : rs) all += r.to_json().dump() + "\n";
    write("all.jsonl", all);
  } else if (target == "cost_model") {
    for (KernelKind k : kernels::kAllKernels)
      for (learned::EncoderKind e : {learned::EncoderKind::Stats, learned::EncoderKind::Signature})
        write(std::string(kernels::kernel_name(k)) + "-" + learned::encoder_name(e) + ".model",
              small_cost_model(k, e, 2, 2));
  } else if (target == "hnsw_index") {
    // Small indexes of the shipped SpMV model: a few template schedules, M = 4.
    std::vector<codegen::SuperSchedule> templates;
    for (const char* t : {"csr", "dcsr", "csc", "bcsr4x4", "bcsr8x1"})
      templates.push_back(codegen::schedule_from_string(KernelKind::SpMV, t));
    for (int si = 1; si <= 64; si *= 4)
      for (int sk = 1; sk <= 64; sk *= 8)
        for (const char* chunk : {"static", "8", "64"}) {
          const std::string text = "split=i:" + std::to_string(si) + ",k:" + std::to_string(sk) +
                                   " order=i1,k1,i0,k0 format=UCUU parallel=i1 threads=2 chunk=" + chunk;
          try {
            templates.push_back(codegen::schedule_from_string(KernelKind::SpMV, text));
          } catch (const Error&) {
          }
        }
    for (const std::size_t count : {std::size_t{1}, std::size_t{6}, templates.size()}) {
      learned::IndexBuildOptions o;
      o.M = 4;
      o.ef_construction = 16;
      const std::vector<codegen::SuperSchedule> some(templates.begin(),
                                                     templates.begin() + static_cast<std::ptrdiff_t>(count));
      const learned::ScheduleIndex index = learned::ScheduleIndex::build(index_model(), some, o);
      const std::string path = scratch() + "/seed.hnsw";
      index.save(path);
      std::ifstream g(path, std::ios::binary), h(path + ".json");
      const std::string graph((std::istreambuf_iterator<char>(g)), std::istreambuf_iterator<char>());
      std::string header((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
      while (!header.empty() && header.back() == '\n') header.pop_back();
      write("index-" + std::to_string(count) + ".bin", std::string(1, '\0') + header + "\n" + graph);
      write("index-" + std::to_string(count) + "-fixed.bin", std::string(1, '\1') + header + "\n" + graph);
    }
  } else if (target == "results_db") {
    // Databases made by this build (an empty one, one with rows in every table), in small pages
    // so that the seeds stay small.
    for (const bool rows : {false, true}) {
      const std::string path = scratch() + "/seed.sqlite";
      for (const char* side : {"", "-wal", "-shm", "-journal"}) fs::remove(path + side);
      {
        heuristics::ResultsDb db(path);
        if (rows) {
          heuristics::MatrixRecord m;
          m.fingerprint = "0123456789abcdef";
          m.path = "a.mtx";
          m.rows = 4;
          m.cols = 5;
          m.nnz = 4;
          m.statistics = {{"max_row", 2}};
          db.record_matrix(m);
          heuristics::Provenance pv;
          pv.recipe = nlohmann::json::object({{"generator", "uniform"}});
          pv.source = "generator:uniform";
          pv.split = "train";
          db.record_provenance(m.fingerprint, pv);
          const heuristics::MeasurementKey key{m.fingerprint, KernelKind::SpMV, 1, 2};
          heuristics::Measurement ok;
          ok.status = heuristics::MeasureStatus::Ok;
          ok.seconds = {1e-5, 2e-5};
          ok.median_s = 1.5e-5;
          ok.min_s = 1e-5;
          ok.max_s = 2e-5;
          ok.repeats = 2;
          ok.threads = 2;
          ok.verified = true;
          ok.max_rel_error = 1e-7;
          heuristics::Measurement refused;
          refused.status = heuristics::MeasureStatus::Refused;
          refused.reason = "too much padding";
          refused.threads = 2;
          const heuristics::Candidate csr =
              heuristics::Candidate::generated(codegen::schedule_from_string(KernelKind::SpMV, "csr"));
          const heuristics::Candidate bcsr =
              heuristics::Candidate::generated(codegen::schedule_from_string(KernelKind::SpMV, "bcsr4x4"));
          db.record_measurement(key, heuristics::Candidate::baseline("csr"), ok, {{"threads", 2}});
          heuristics::GroupRecord gr;
          gr.threads = 2;
          gr.rounds = 2;
          gr.candidates = 2;
          gr.csr_spread = 0.01;
          db.record_group(key, gr, {{csr, ok}, {bcsr, refused}});
          db.record_ablation(m.fingerprint, "spmv", 1, 2, "hybrid", {{"speedup", 1.2}});
          db.set_meta("collect_settings.spmv", "{\"max_nnz\": 3000}");
        }
      }
      sqlite3* raw = nullptr;
      if (sqlite3_open(path.c_str(), &raw) == SQLITE_OK)
        sqlite3_exec(raw, "PRAGMA journal_mode = DELETE; PRAGMA page_size = 512; VACUUM;", nullptr,
                     nullptr, nullptr);
      sqlite3_close(raw);
      std::ifstream f(path, std::ios::binary);
      write(rows ? "rows.sqlite" : "empty.sqlite",
            std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()));
    }
  } else if (target == "tuning_cache" || target == "plan_file") {
    for (KernelKind k : kernels::kAllKernels) {
      const codegen::SuperSchedule s =
          codegen::schedule_from_string(k, kernels::needs_tensor(k) ? "csf" : "bcsr4x4");
      const nlohmann::json report = {{"verdict", "gain"}, {"speedup", 1.5}};
      const std::string kn(kernels::kernel_name(k));
      const auto kb = static_cast<char>(k == KernelKind::SpMV ? 0 : k == KernelKind::SpMM ? 1 : k == KernelKind::SDDMM ? 2 : 3);
      if (target == "tuning_cache") {
        const heuristics::TuningKey key = fuzz_key(k);
        const nlohmann::json sj = codegen::to_json(s);
        const nlohmann::json entry = {{"format", "waco-hybrid tuning cache"},
                                      {"version", heuristics::kTuningCacheVersion},
                                      {"saved_at", "2026-01-01T00:00:00Z"},
                                      {"key", key.to_json()},
                                      {"schedule", sj},
                                      {"report", report},
                                      {"checksum", heuristics::tuning_cache_checksum(key.to_json(), sj, report)}};
        write(kn + ".entry", std::string(1, kb) + entry.dump(1));
        write(kn + "-fixed.entry", std::string(1, static_cast<char>(kb | 12)) + entry.dump(1));
      } else {
        nlohmann::json plan = {{"format", api::kPlanFormat},
                               {"version", api::kPlanVersion},
                               {"waco_version", "0.1.0"},
                               {"kernel", kn},
                               {"fingerprint", "0123456789abcdef"},
                               {"dims", {4, 5}},
                               {"nnz", 4},
                               {"dense", 16},
                               {"threads", 2},
                               {"schedule", codegen::to_json(s)},
                               {"verdict", "gain"},
                               {"speedup", 1.5},
                               {"break_even_calls", 12.0},
                               {"report", report}};
        plan["checksum"] = api::plan_checksum(plan);
        write(kn + ".plan", std::string(1, '\0') + plan.dump(1));
        write(kn + "-fixed.plan", std::string(1, '\1') + plan.dump(1));
      }
    }
  } else if (target == "cache_probe") {
    const kernels::CacheProbeResult r = probe_seed_result();
    const auto stored = [&](const std::string& name, const kernels::CacheProbeResult& result) {
      const std::string path = dir + "/" + name;
      if (!kernels::store_cache_probe(path, probe_key(), result)) throw Error("cannot write " + path);
      ++n;
    };
    stored("three-levels.json", r);
    kernels::CacheProbeResult none;  // what a probe that could not allocate its buffer gives
    none.note = "cannot allocate 256 MiB";
    stored("empty.json", none);
  }
  return n;
}

}  // namespace waco::fuzz
