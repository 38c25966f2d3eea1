// The integer encoding of SuperSchedule (schedule_encoding.hpp). One structural check,
// code_errors(), guards decode, categorical_fields, order_matrix and the JSON reader, so a code
// is accepted or refused for the same reasons whichever door it came through; the schedule rules
// themselves stay in validate().
#include "waco/codegen/schedule_encoding.hpp"

#include "text_util.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "waco/kernels/error.hpp"
#include "waco/kernels/json_fields.hpp"

namespace waco::codegen {

using kernels::Error;
using kernels::KernelKind;

namespace {

std::string hint() {
  return "expected the output of waco::codegen::encode (schedule encoding version " +
         std::to_string(kScheduleEncodingVersion) + "; see schedule_encoding.hpp)";
}

using detail::join;

bool known_kernel(KernelKind k) {
  return std::find(std::begin(kernels::kAllKernels), std::end(kernels::kAllKernels), k) !=
         std::end(kernels::kAllKernels);
}

/// log2 of a power of two.
int log2_exact(int x) {
  int l = 0;
  while ((1 << l) < x) ++l;
  WACO_ASSERT((1 << l) == x, "log2_exact of " + std::to_string(x) + ", not a power of two");
  return l;
}

std::string slot_name(const KernelSpec& spec, int slot) {
  const char v = spec.vars[static_cast<std::size_t>(slot / 2)];
  return std::to_string(slot) + " (" + v + (slot % 2 == 0 ? "1 or " + std::string(1, v) : "0") +
         ")";
}

/// Every reason c is not a well-formed code, short of the schedule rules of validate(). Only the
/// version is reported when it is wrong (the layout of another version means nothing here).
std::vector<std::string> code_errors(const ScheduleCode& c) {
  std::vector<std::string> r;
  if (c.version != kScheduleEncodingVersion) {
    r.push_back("schedule encoding version " + std::to_string(c.version) +
                " is not supported (this build reads version " +
                std::to_string(kScheduleEncodingVersion) + ")");
    return r;
  }
  if (!known_kernel(c.kind)) {
    r.push_back("unknown kernel kind " + std::to_string(static_cast<int>(c.kind)));
    return r;
  }
  const KernelSpec& spec = kernel_spec(c.kind);
  const int nv = static_cast<int>(spec.vars.size());
  const int ns = 2 * nv;
  const std::string kn(kernels::kernel_name(c.kind));
  auto size_ok = [&](const std::vector<int>& xs, int want, const char* what) {
    if (static_cast<int>(xs.size()) == want) return true;
    r.push_back(std::string(what) + " has " + std::to_string(xs.size()) + " values, " + kn +
                " needs " + std::to_string(want));
    return false;
  };
  const bool split_ok = size_ok(c.split_log2, nv, "split_log2");
  const bool order_ok = size_ok(c.order, ns, "order");
  const bool format_ok = size_ok(c.format, ns, "format");

  if (split_ok)
    for (int v = 0; v < nv; ++v) {
      const int x = c.split_log2[static_cast<std::size_t>(v)];
      if (x < 0 || x > kMaxSplitLog2)
        r.push_back("split_log2 " + std::to_string(x) + " for " + spec.vars[static_cast<std::size_t>(v)] +
                    " is out of range (expected 0.." + std::to_string(kMaxSplitLog2) + ")");
    }

  // Order: a permutation of the slots; an unsplit variable's inner slot right after its outer.
  std::vector<int> pos(static_cast<std::size_t>(ns), -1);
  bool perm = order_ok;
  if (order_ok) {
    for (int p = 0; p < ns; ++p) {
      const int s = c.order[static_cast<std::size_t>(p)];
      if (s < 0 || s >= ns) {
        r.push_back("order entry " + std::to_string(s) + " at position " + std::to_string(p) +
                    " is out of range (expected a slot 0.." + std::to_string(ns - 1) + ")");
        perm = false;
      } else if (pos[static_cast<std::size_t>(s)] >= 0) {
        r.push_back("slot " + std::to_string(s) + " appears twice in order (positions " +
                    std::to_string(pos[static_cast<std::size_t>(s)]) + " and " +
                    std::to_string(p) + ")");
        perm = false;
      } else {
        pos[static_cast<std::size_t>(s)] = p;
      }
    }
    if (perm && split_ok)
      for (int v = 0; v < nv; ++v)
        if (c.split_log2[static_cast<std::size_t>(v)] == 0 &&
            pos[static_cast<std::size_t>(2 * v + 1)] != pos[static_cast<std::size_t>(2 * v)] + 1)
          r.push_back(std::string("variable ") + spec.vars[static_cast<std::size_t>(v)] +
                      " is not split, but its inner slot " + std::to_string(2 * v + 1) +
                      " is not directly after its outer slot " + std::to_string(2 * v) +
                      " in order");
  }

  // Formats: 1 or 2 exactly on the slots that are sparse levels, 0 elsewhere.
  if (format_ok && split_ok)
    for (int s = 0; s < ns; ++s) {
      const int v = s / 2;
      const char var = spec.vars[static_cast<std::size_t>(v)];
      const bool level = spec.is_sparse_var(var) &&
                         (s % 2 == 0 || c.split_log2[static_cast<std::size_t>(v)] > 0);
      const int f = c.format[static_cast<std::size_t>(s)];
      if (level && f != 1 && f != 2)
        r.push_back("format " + std::to_string(f) + " of slot " + slot_name(spec, s) +
                    " is out of range (a sparse level: expected 1 = U or 2 = C)");
      else if (!level && f != 0)
        r.push_back("format " + std::to_string(f) + " of slot " + slot_name(spec, s) +
                    " is out of range (not a sparse level: expected 0)");
    }

  if (c.parallel < 0 || c.parallel >= ns)
    r.push_back("parallel slot " + std::to_string(c.parallel) + " is out of range (expected 0.." +
                std::to_string(ns - 1) + ")");
  else if (split_ok && c.parallel % 2 == 1 &&
           c.split_log2[static_cast<std::size_t>(c.parallel / 2)] == 0)
    r.push_back("parallel slot " + std::to_string(c.parallel) + " is the inner slot of " +
                spec.vars[static_cast<std::size_t>(c.parallel / 2)] +
                ", which is not split (expected its outer slot " +
                std::to_string(c.parallel - 1) + ")");
  if (c.threads < 0)
    r.push_back("threads " + std::to_string(c.threads) +
                " is negative (expected 0 for every core, or a thread count)");
  if (c.chunk_log2 < 0 || c.chunk_log2 > kMaxChunkLog2)
    r.push_back("chunk_log2 " + std::to_string(c.chunk_log2) + " is out of range (expected 0.." +
                std::to_string(kMaxChunkLog2) + ")");
  return r;
}

std::string describe(const ScheduleCode& c) {
  if (!known_kernel(c.kind)) return "schedule code";
  return "schedule code " + to_json(c).dump();
}

void check_code(const ScheduleCode& c) {
  const std::vector<std::string> r = code_errors(c);
  if (!r.empty()) throw Error(describe(c) + ": " + join(r, "; "), hint());
}

int thread_category(int threads) {
  if (threads <= 0) return 0;
  int l = 0;
  while (l < 31 && (threads >> (l + 1)) > 0) ++l;  // floor(log2(threads))
  return std::min(1 + l, kThreadCategories - 1);
}

}  // namespace

ScheduleCode encode(const SuperSchedule& s) {
  const SuperSchedule c = canonicalize(s);
  const std::vector<std::string> reasons = validate(c);
  if (!reasons.empty())
    throw Error("cannot encode schedule \"" + to_text(c) + "\": " + join(reasons, "; "),
                "encode takes a valid schedule (see validate())");
  const KernelSpec& spec = kernel_spec(c.kind);
  const std::size_t nv = spec.vars.size();

  ScheduleCode out;
  out.kind = c.kind;
  out.split_log2.resize(nv);
  for (std::size_t v = 0; v < nv; ++v) out.split_log2[v] = log2_exact(c.split[v]);
  out.format.assign(2 * nv, 0);
  auto slot_of = [&](const Loop& l) {
    return 2 * spec.var_index(l.var) + (l.part == Loop::Part::Inner ? 1 : 0);
  };
  std::size_t level = 0;
  for (const Loop& l : c.order) {
    const int slot = slot_of(l);
    out.order.push_back(slot);
    if (l.part == Loop::Part::Whole) out.order.push_back(slot + 1);  // the extent-1 inner slot
    if (spec.is_sparse_var(l.var))
      // N (narrow) encodes as C: version 1 knows U and C, and the cost model was trained on
      // them; a narrow level differs from its wide twin only in its coordinates' bytes.
      out.format[static_cast<std::size_t>(slot)] = c.formats[level++] == LevelFormat::U ? 1 : 2;
  }
  out.parallel = slot_of(c.parallel);
  out.threads = c.threads;
  if (c.chunk == kStaticChunk || c.chunk == kAutoChunk)
    throw Error("'" + to_text(c) + "' has " +
                    (c.chunk == kStaticChunk ? "static scheduling" : "chunk=auto") +
                    ", which schedule encoding version " +
                    std::to_string(kScheduleEncodingVersion) + " cannot represent",
                "encode its dynamic twin (chunk=" + std::to_string(kMaxChunk) + ") instead");
  out.chunk_log2 = log2_exact(c.chunk);
  WACO_ASSERT(code_errors(out).empty(),
              "encode produced an ill-formed code: " + join(code_errors(out), "; "));
  return out;
}

SuperSchedule decode(const ScheduleCode& c) {
  check_code(c);
  const KernelSpec& spec = kernel_spec(c.kind);
  auto loop_of = [&](int slot) {
    const std::size_t v = static_cast<std::size_t>(slot / 2);
    if (c.split_log2[v] == 0) return Loop{spec.vars[v], Loop::Part::Whole};
    return Loop{spec.vars[v], slot % 2 == 0 ? Loop::Part::Outer : Loop::Part::Inner};
  };
  SuperSchedule s;
  s.kind = c.kind;
  for (int x : c.split_log2) s.split.push_back(1 << x);
  for (int slot : c.order) {
    const std::size_t v = static_cast<std::size_t>(slot / 2);
    if (slot % 2 == 1 && c.split_log2[v] == 0) continue;  // the extent-1 inner slot
    s.order.push_back(loop_of(slot));
    if (spec.is_sparse_var(spec.vars[v]))
      s.formats.push_back(c.format[static_cast<std::size_t>(slot)] == 1 ? LevelFormat::U
                                                                        : LevelFormat::C);
  }
  s.parallel = loop_of(c.parallel);
  s.threads = c.threads;
  s.chunk = 1 << c.chunk_log2;
  const std::vector<std::string> reasons = validate(s);
  if (!reasons.empty())
    throw Error(describe(c) + " decodes to an invalid schedule: " + join(reasons, "; "), hint());
  WACO_ASSERT(canonicalize(s) == s, "decode produced a non-canonical schedule");
  return s;
}

std::vector<int> categorical_fields(const ScheduleCode& c) {
  check_code(c);
  std::vector<int> out;
  out.reserve(3 * c.split_log2.size() + 3);
  out.insert(out.end(), c.split_log2.begin(), c.split_log2.end());
  out.insert(out.end(), c.format.begin(), c.format.end());
  out.push_back(c.parallel);
  out.push_back(thread_category(c.threads));
  out.push_back(c.chunk_log2);
  return out;
}

std::vector<int> categorical_cardinalities(KernelKind k) {
  const int nv = static_cast<int>(kernel_spec(k).vars.size());
  std::vector<int> out(static_cast<std::size_t>(nv), kMaxSplitLog2 + 1);
  out.insert(out.end(), static_cast<std::size_t>(2 * nv), 3);
  out.push_back(2 * nv);
  out.push_back(kThreadCategories);
  out.push_back(kMaxChunkLog2 + 1);
  return out;
}

std::vector<float> order_matrix(const ScheduleCode& c) {
  check_code(c);
  const std::size_t n = c.order.size();
  std::vector<float> m(n * n, 0.0f);
  for (std::size_t p = 0; p < n; ++p) m[p * n + static_cast<std::size_t>(c.order[p])] = 1.0f;
  return m;
}

nlohmann::json to_json(const ScheduleCode& c) {
  WACO_ASSERT(known_kernel(c.kind), "to_json: unknown kernel kind");
  return {{"version", c.version},
          {"kernel", std::string(kernels::kernel_name(c.kind))},
          {"split_log2", c.split_log2},
          {"order", c.order},
          {"format", c.format},
          {"parallel", c.parallel},
          {"threads", c.threads},
          {"chunk_log2", c.chunk_log2}};
}

ScheduleCode schedule_code_from_json(const nlohmann::json& j) {
  auto fail = [&](const std::vector<std::string>& reasons) {
    throw Error("schedule code JSON " + j.dump() + ": " + join(reasons, "; "), hint());
  };
  if (!j.is_object()) fail({"not an object"});
  // The version first: another version's keys and values mean nothing to this reader.
  if (!j.contains("version")) fail({"missing key 'version'"});
  const nlohmann::json& version = j["version"];
  if (!version.is_number_integer() || version.get<long long>() != kScheduleEncodingVersion)
    fail({"schedule encoding version " + version.dump() +
          " is not supported (this build reads version " +
          std::to_string(kScheduleEncodingVersion) + ")"});

  std::vector<std::string> errors = detail::json_key_errors(
      j, {"version", "kernel", "split_log2", "order", "format", "parallel", "threads", "chunk_log2"});
  if (!errors.empty()) fail(errors);

  ScheduleCode c;
  const nlohmann::json& kernel = j["kernel"];
  const std::optional<KernelKind> k =
      kernel.is_string() ? kernels::parse_kernel(kernel.get<std::string>()) : std::nullopt;
  if (!k) fail({"unknown kernel " + kernel.dump() + " (expected spmv, spmm, sddmm or mttkrp)"});
  c.kind = *k;
  auto as_int = [&](const nlohmann::json& v, const std::string& what, int& out) {
    if (const auto n = kernels::json_integer(v, INT_MIN, INT_MAX))
      out = static_cast<int>(*n);
    else
      errors.push_back(what + " " + v.dump() + " is not an integer");
  };
  auto as_ints = [&](const char* key, std::vector<int>& out) {
    const nlohmann::json& v = j[key];
    if (!v.is_array()) {
      errors.push_back(std::string(key) + " is not an array of integers");
      return;
    }
    out.assign(v.size(), 0);
    for (std::size_t i = 0; i < v.size(); ++i)
      as_int(v[i], std::string(key) + "[" + std::to_string(i) + "]", out[i]);
  };
  as_ints("split_log2", c.split_log2);
  as_ints("order", c.order);
  as_ints("format", c.format);
  as_int(j["parallel"], "parallel", c.parallel);
  as_int(j["threads"], "threads", c.threads);
  as_int(j["chunk_log2"], "chunk_log2", c.chunk_log2);
  if (!errors.empty()) fail(errors);
  const std::vector<std::string> r = code_errors(c);
  if (!r.empty()) fail(r);
  decode(c);  // the schedule rules (validate) too
  return c;
}

}  // namespace waco::codegen
