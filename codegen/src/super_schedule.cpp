// SuperSchedule (WACO section 4.1.2, Table 3): checking, canonical form, hash, the one text form
// (one printer, to_text; one parser, parse_schedule), the versioned JSON form and the named
// shortcuts. Every way into a SuperSchedule (text, JSON, shortcut) runs through the same reason
// list, check_schedule(), which validate() also returns, so a schedule accepted anywhere is
// accepted everywhere and an error names the same token whichever door it came through.
//
// Split-1 pairs: the raw SuperSchedule value may name x1/x0 for a variable whose split size is 1
// (the paper's "reduce a split by choosing size 1"); canonicalize() collapses such a pair into x.
// validate() refuses them (a valid schedule is canonical in that respect), while the text and JSON
// readers accept them only for variables whose size 1 is written explicitly (`split=k:1`), so
// `bcsr8x1` can expand to one text, and a forgotten split (`order=i1,k,i0` without `split=i:..`)
// is still an error naming i1.
#include "waco/codegen/super_schedule.hpp"

#include "text_util.hpp"
#include "waco/kernels/baseline_loops.hpp"

#include <algorithm>
#include <fstream>
#include <array>
#include <charconv>
#include <climits>
#include <functional>
#include <unordered_set>
#include <sstream>

#include "waco/codegen/compiler.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/file_stamp.hpp"
#include "waco/kernels/json_fields.hpp"
#include "waco/kernels/memo.hpp"

namespace waco::codegen {

using kernels::Error;
using kernels::KernelKind;

namespace {

constexpr std::array<const char*, 6> kFieldNames = {"split",    "order",   "format",
                                                    "parallel", "threads", "chunk"};
enum Field { kSplit, kOrder, kFormat, kParallel, kThreads, kChunk };

bool is_pow2(long long x) { return x >= 1 && (x & (x - 1)) == 0; }

std::string kname(KernelKind k) { return std::string(kernels::kernel_name(k)); }

using detail::join;

std::string loop_list(const std::vector<Loop>& loops) {
  std::vector<std::string> names;
  for (const Loop& l : loops) names.push_back(l.name());
  return join(names, ", ");
}

std::string var_list(const std::vector<char>& vars) {
  std::vector<std::string> names;
  for (char v : vars) names.emplace_back(1, v);
  return join(names, ", ");
}

std::string plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

/// " ('l' is a variable of mttkrp: is the schedule for another kernel?)" when v belongs to another
/// kernel, else "".
std::string other_kernel_note(KernelKind k, char v) {
  std::vector<std::string> owners;
  for (KernelKind o : kernels::kAllKernels)
    if (o != k && kernel_spec(o).var_index(v) >= 0) owners.push_back(kname(o));
  if (owners.empty()) return "";
  return std::string(" ('") + v + "' is a variable of " + join(owners, ", ") +
         ": is the schedule for another kernel?)";
}

/// The loops the variables give under the split sizes (x when s_x = 1, x1 and x0 otherwise).
std::vector<Loop> loops_of_splits(const KernelSpec& spec, const std::vector<int>& split) {
  std::vector<Loop> out;
  for (std::size_t i = 0; i < spec.vars.size(); ++i) {
    const char v = spec.vars[i];
    if (split.size() == spec.vars.size() && split[i] != 1) {
      out.push_back({v, Loop::Part::Outer});
      out.push_back({v, Loop::Part::Inner});
    } else {
      out.push_back({v, Loop::Part::Whole});
    }
  }
  return out;
}

/// Every reason s is invalid. unit_pairs (per variable, may be null): variables for which an
/// x1/x0 pair with split size 1 is accepted (canonicalize collapses it).
std::vector<std::string> check_schedule(const SuperSchedule& s, const std::vector<bool>* unit_pairs) {
  const KernelSpec& spec = kernel_spec(s.kind);
  const std::string kn = kname(s.kind);
  const std::size_t n = spec.vars.size();
  std::vector<std::string> r;

  // Split sizes.
  const bool split_ok = s.split.size() == n;
  if (!split_ok) {
    r.push_back("split has " + plural(s.split.size(), "size", "sizes") + ", " + kn + " has " +
                plural(n, "variable", "variables") + " (" + var_list(spec.vars) + ")");
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const int sz = s.split[i];
      const std::string x(1, spec.vars[i]);
      if (sz < 1 || sz > kMaxSplit)
        r.push_back("split size " + std::to_string(sz) + " for " + x +
                    " is out of range (expected a power of two in 1.." + std::to_string(kMaxSplit) +
                    ")");
      else if (!is_pow2(sz))
        r.push_back("split size " + std::to_string(sz) + " for " + x +
                    " is not a power of two (expected 1, 2, 4, ..., " + std::to_string(kMaxSplit) +
                    ")");
    }
  }

  // Loop order.
  bool order_ok = split_ok;
  if (s.order.empty()) {
    r.push_back("the order is empty (expected each of " +
                loop_list(loops_of_splits(spec, s.split)) + " once)");
    order_ok = false;
  }
  std::vector<std::string> unknown_seen;
  for (const Loop& l : s.order) {
    if (spec.var_index(l.var) >= 0) continue;
    order_ok = false;
    const std::string name = l.name();
    if (std::find(unknown_seen.begin(), unknown_seen.end(), name) != unknown_seen.end()) continue;
    unknown_seen.push_back(name);
    r.push_back("unknown loop '" + name + "' in order (expected one of " +
                loop_list(loops_of_splits(spec, s.split)) + " for " + kn + ")" +
                other_kernel_note(s.kind, l.var));
  }
  if (split_ok && !s.order.empty()) {
    for (std::size_t vi = 0; vi < n; ++vi) {
      const char v = spec.vars[vi];
      const std::string x(1, v);
      int count[3] = {0, 0, 0};  // Whole, Outer, Inner
      std::size_t pos_outer = 0, pos_inner = 0;
      for (std::size_t p = 0; p < s.order.size(); ++p) {
        const Loop& l = s.order[p];
        if (l.var != v) continue;
        ++count[static_cast<int>(l.part)];
        if (l.part == Loop::Part::Outer) pos_outer = p;
        if (l.part == Loop::Part::Inner) pos_inner = p;
      }
      const int whole = count[0], outer = count[1], inner = count[2];
      const bool is_split = s.split[vi] != 1;
      const bool unit_ok = unit_pairs != nullptr && (*unit_pairs)[vi];
      const bool pairs = is_split || (unit_ok && outer + inner > 0);
      const std::size_t before = r.size();
      bool wrong_form = false;
      if (pairs && whole > 0) {
        wrong_form = true;
        if (is_split)
          r.push_back("loop '" + x + "' in order, but " + x + " is split by " +
                      std::to_string(s.split[vi]) + " (expected " + x + "1 and " + x + "0)");
        else
          r.push_back("loop '" + x + "' in order together with " + x + "1/" + x +
                      "0 (expected either " + x + ", or " + x + "1 and " + x + "0)");
      }
      if (!pairs && outer + inner > 0) {
        wrong_form = true;
        for (const char* part : {"1", "0"}) {
          if ((part[0] == '1' ? outer : inner) == 0) continue;
          r.push_back("loop '" + x + part + "' in order, but " + x + " is not split (expected " +
                      x + ", or a split size > 1 for " + x + " in split=)");
        }
      }
      if (!wrong_form) {
        if (pairs) {
          if (outer == 0) r.push_back("order misses loop '" + x + "1'");
          if (inner == 0) r.push_back("order misses loop '" + x + "0'");
        } else if (whole == 0) {
          r.push_back("order misses loop '" + x + "'");
        }
      }
      const char* suffix[3] = {"", "1", "0"};
      for (int part = 0; part < 3; ++part)
        if (count[part] > 1)
          r.push_back("loop '" + x + suffix[part] + "' appears " + std::to_string(count[part]) +
                      " times in order");
      if (outer == 1 && inner == 1 && pos_inner < pos_outer)
        r.push_back(x + "0 comes before " + x + "1 in order (the outer loop " + x +
                    "1 must come first)");
      if (r.size() != before) order_ok = false;
    }
  }

  // Level formats (only against a well-formed order: otherwise the count says nothing).
  if (order_ok) {
    const std::vector<Loop> levels = s.levels();
    if (s.formats.size() != levels.size())
      r.push_back("format has " + plural(s.formats.size(), "letter", "letters") + ", the order has " +
                  plural(levels.size(), "sparse level", "sparse levels") + " (" +
                  loop_list(levels) + ")");
  }

  // Parallelization.
  if (!s.order.empty() &&
      std::find(s.order.begin(), s.order.end(), s.parallel) == s.order.end())
    r.push_back("parallel loop '" + s.parallel.name() + "' is not in the order (" +
                loop_list(s.order) + ")");
  if (s.threads < 0)
    r.push_back("threads " + std::to_string(s.threads) +
                " is negative (expected 0 for every core, or a thread count)");
  if (s.chunk == kStaticChunk) {
    // static scheduling: valid with any parallel loop
  } else if (s.chunk == kAutoChunk) {
    // The csr SpMV baseline's rule reads the parallel loop's extent and A's entries.
    if (s.kind != kernels::KernelKind::SpMV)
      r.push_back("chunk=auto (the csr SpMV baseline's rule) is for spmv only (expected a power of "
                  "two in 1.." + std::to_string(kMaxChunk) + ", or static)");
    else if (s.parallel.part != Loop::Part::Whole)
      r.push_back("chunk=auto needs an unsplit parallel loop, not '" + s.parallel.name() +
                  "' (expected a power of two in 1.." + std::to_string(kMaxChunk) + ", or static)");
  } else if (s.chunk < 1 || s.chunk > kMaxChunk) {
    r.push_back("chunk " + std::to_string(s.chunk) + " is out of range (expected a power of two in 1.." +
                std::to_string(kMaxChunk) + ", static or auto)");
  } else if (!is_pow2(s.chunk)) {
    r.push_back("chunk " + std::to_string(s.chunk) + " is not a power of two (expected 1, 2, 4, ..., " +
                std::to_string(kMaxChunk) + ", static or auto)");
  }
  return r;
}

/// A loop token: one lowercase letter, optionally followed by 1 (outer part) or 0 (inner part).
std::optional<Loop> parse_loop(const std::string& t) {
  if (t.empty() || t.size() > 2 || t[0] < 'a' || t[0] > 'z') return std::nullopt;
  if (t.size() == 1) return Loop{t[0], Loop::Part::Whole};
  if (t[1] == '1') return Loop{t[0], Loop::Part::Outer};
  if (t[1] == '0') return Loop{t[0], Loop::Part::Inner};
  return std::nullopt;
}

const char* kLoopSyntax =
    "expected a variable name, optionally followed by 1 for its outer or 0 for its inner part, "
    "e.g. i, i1, i0";

/// U/C/N letters; appends a reason for the first bad letter.
std::vector<LevelFormat> parse_formats(const std::string& f, std::vector<std::string>& errors) {
  std::vector<LevelFormat> out;
  for (std::size_t p = 0; p < f.size(); ++p) {
    if (f[p] == 'U') {
      out.push_back(LevelFormat::U);
    } else if (f[p] == 'C') {
      out.push_back(LevelFormat::C);
    } else if (f[p] == 'N') {
      out.push_back(LevelFormat::N);
    } else {
      errors.push_back(std::string("format letter '") + f[p] + "' at position " +
                       std::to_string(p + 1) + " of '" + f + "' (expected U, C or N)");
      break;
    }
  }
  return out;
}

/// A decimal integer in int range (optional leading '-').
std::optional<int> parse_int(const std::string& t) {
  long long v = 0;
  const char* end = t.data() + t.size();
  const auto res = std::from_chars(t.data(), end, v);
  if (t.empty() || res.ec != std::errc() || res.ptr != end || v < INT_MIN || v > INT_MAX)
    return std::nullopt;
  return static_cast<int>(v);
}

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

/// A typical text of kernel k, for hints.
std::string example_text(KernelKind k) {
  switch (k) {
    case KernelKind::SpMV: return "split=i:4,k:4 order=i1,k1,i0,k0 format=UCUU parallel=i1 threads=0 chunk=32";
    case KernelKind::SpMM: return "split=i:4,k:4 order=i1,k1,i0,k0,j format=UCUU parallel=i1 threads=0 chunk=32";
    case KernelKind::SDDMM: return "split=i:4,j:4 order=i1,j1,i0,j0,k format=UCUU parallel=i1 threads=0 chunk=32";
    case KernelKind::MTTKRP: return "split=j:4 order=i,k,l,j1,j0 format=CCC parallel=i threads=0 chunk=32";
  }
  return "";
}

std::string text_hint(KernelKind k) {
  return "the text form is 'split=<var>:<size>,... order=<loop>,... format=<U|C|N per sparse level> "
         "parallel=<loop> threads=<n> chunk=<n|static|auto>' (order and format required), e.g. '" +
         example_text(k) + "' for " + kname(k) +
         "; or a shortcut: " + (k == KernelKind::MTTKRP ? "csf" : "csr, dcsr, csc, bcsr4x4, ncsr");
}

[[noreturn]] void throw_text_error(KernelKind k, const std::string& text,
                                   const std::vector<std::string>& reasons) {
  throw Error("schedule \"" + text + "\": " + join(reasons, "; "), text_hint(k));
}

/// Checks a raw schedule read from text or JSON and returns its canonical form.
SuperSchedule finish(const SuperSchedule& raw, const std::vector<bool>& unit_pairs,
                     const std::function<void(const std::vector<std::string>&)>& fail) {
  const std::vector<std::string> reasons = check_schedule(raw, &unit_pairs);
  if (!reasons.empty()) fail(reasons);
  SuperSchedule c = canonicalize(raw);
  WACO_ASSERT(validate(c).empty(), "canonical form of an accepted schedule is invalid: " +
                                       join(validate(c), "; "));
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Value type.

char format_letter(LevelFormat f) {
  switch (f) {
    case LevelFormat::U: return 'U';
    case LevelFormat::C: return 'C';
    case LevelFormat::N: return 'N';
  }
  return '?';
}

SuperSchedule wide_twin(const SuperSchedule& s) {
  SuperSchedule w = s;
  for (LevelFormat& f : w.formats)
    if (f == LevelFormat::N) f = LevelFormat::C;
  return w;
}

std::string Loop::name() const {
  std::string n(1, var);
  if (part == Part::Outer) n += '1';
  if (part == Part::Inner) n += '0';
  return n;
}

bool SuperSchedule::operator==(const SuperSchedule& o) const {
  return kind == o.kind && split == o.split && order == o.order && formats == o.formats &&
         parallel == o.parallel && threads == o.threads && chunk == o.chunk;
}

std::vector<Loop> SuperSchedule::levels() const {
  const KernelSpec& spec = kernel_spec(kind);
  std::vector<Loop> out;
  for (const Loop& l : order)
    if (spec.is_sparse_var(l.var)) out.push_back(l);
  return out;
}

int SuperSchedule::split_of(char v) const {
  const int idx = kernel_spec(kind).var_index(v);
  WACO_ASSERT(idx >= 0, std::string("split_of: '") + v + "' is not a variable of " + kname(kind));
  WACO_ASSERT(static_cast<std::size_t>(idx) < split.size(), "split_of: split vector too short");
  return split[static_cast<std::size_t>(idx)];
}

std::vector<std::string> validate(const SuperSchedule& s) { return check_schedule(s, nullptr); }

SuperSchedule fixed_chunk(SuperSchedule s) {
  if (s.chunk == kAutoChunk) s.chunk = static_cast<int>(kernels::kCsrSpmvMinChunk);
  return s;
}

SuperSchedule canonicalize(const SuperSchedule& s) {
  const KernelSpec& spec = kernel_spec(s.kind);
  WACO_ASSERT(s.split.size() == spec.vars.size(), "canonicalize: one split size per variable");
  SuperSchedule out = s;
  out.order.clear();
  out.formats.clear();
  std::size_t level = 0;
  for (const Loop& l : s.order) {
    const int vi = spec.var_index(l.var);
    WACO_ASSERT(vi >= 0, "canonicalize: unknown loop " + l.name());
    const bool sparse = spec.is_sparse_var(l.var);
    if (sparse) WACO_ASSERT(level < s.formats.size(), "canonicalize: one format per level");
    const LevelFormat f = sparse ? s.formats[level++] : LevelFormat::U;
    if (s.split[static_cast<std::size_t>(vi)] == 1 && l.part != Loop::Part::Whole) {
      if (l.part == Loop::Part::Inner) continue;  // the x0 loop of size 1 and its level vanish
      out.order.push_back({l.var, Loop::Part::Whole});
    } else {
      out.order.push_back(l);
    }
    if (sparse) out.formats.push_back(f);
  }
  WACO_ASSERT(level == s.formats.size(), "canonicalize: one format per level");
  if (s.split_of(s.parallel.var) == 1) out.parallel.part = Loop::Part::Whole;
  return out;
}

std::size_t hash_value(const SuperSchedule& s) {
  std::uint64_t h = kernels::splitmix64(static_cast<std::uint64_t>(s.kind) + 0x5157ull);
  auto mix = [&h](std::uint64_t x) { h = kernels::splitmix64(h ^ x); };
  auto loop_code = [](const Loop& l) {
    return (static_cast<std::uint64_t>(static_cast<unsigned char>(l.var)) << 8) |
           static_cast<std::uint64_t>(l.part);
  };
  mix(s.split.size());
  for (int x : s.split) mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(x)));
  mix(s.order.size());
  for (const Loop& l : s.order) mix(loop_code(l));
  mix(s.formats.size());
  for (LevelFormat f : s.formats) mix(static_cast<std::uint64_t>(f));
  mix(loop_code(s.parallel));
  mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(s.threads)));
  mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(s.chunk)));
  return static_cast<std::size_t>(h);
}

// ---------------------------------------------------------------------------------------------
// Text form: the one printer and the one parser.

std::string to_text(const SuperSchedule& s) {
  const KernelSpec& spec = kernel_spec(s.kind);
  std::ostringstream out;
  // Split: every variable with s > 1, and a variable of size 1 written as a pair (non-canonical
  // input), so that parse(print(s)) == canonicalize(s) holds for those too.
  std::vector<std::string> split;
  for (std::size_t i = 0; i < spec.vars.size() && i < s.split.size(); ++i) {
    const char v = spec.vars[i];
    const bool pair = std::any_of(s.order.begin(), s.order.end(), [v](const Loop& l) {
      return l.var == v && l.part != Loop::Part::Whole;
    });
    if (s.split[i] != 1 || pair) split.push_back(std::string(1, v) + ":" + std::to_string(s.split[i]));
  }
  if (!split.empty()) out << "split=" << join(split, ",") << ' ';
  std::vector<std::string> order;
  for (const Loop& l : s.order) order.push_back(l.name());
  out << "order=" << join(order, ",") << " format=";
  for (LevelFormat f : s.formats) out << format_letter(f);
  out << " parallel=" << s.parallel.name() << " threads=" << s.threads << " chunk=";
  if (s.chunk == kStaticChunk)
    out << "static";
  else if (s.chunk == kAutoChunk)
    out << "auto";
  else
    out << s.chunk;
  return out.str();
}

SuperSchedule parse_schedule(KernelKind k, const std::string& text) {
  const KernelSpec& spec = kernel_spec(k);
  const std::string kn = kname(k);
  std::vector<std::string> errors;

  // Fields: whitespace-separated key=value, any order, each at most once.
  std::istringstream in(text);
  std::array<std::optional<std::string>, kFieldNames.size()> value;
  std::string tok;
  bool any = false;
  while (in >> tok) {
    any = true;
    const std::size_t eq = tok.find('=');
    if (eq == std::string::npos) {
      errors.push_back("'" + tok +
                       "' is not a key=value field (fields are separated by spaces, so values "
                       "contain none)");
      continue;
    }
    const std::string key = tok.substr(0, eq);
    const auto it = std::find(kFieldNames.begin(), kFieldNames.end(), key);
    if (it == kFieldNames.end()) {
      errors.push_back("unknown field '" + key + "' (expected " +
                       join(std::vector<std::string>(kFieldNames.begin(), kFieldNames.end()), ", ") + ")");
      continue;
    }
    auto& slot = value[static_cast<std::size_t>(it - kFieldNames.begin())];
    if (slot) {
      errors.push_back("duplicate field '" + key + "'");
      continue;
    }
    slot = tok.substr(eq + 1);
    if (slot->empty()) errors.push_back("field '" + key + "' has no value");
  }
  if (!any) throw_text_error(k, text, {"empty schedule (expected at least order=... and format=...)"});
  if (!value[kOrder]) errors.push_back("missing field 'order'");
  if (!value[kFormat]) errors.push_back("missing field 'format'");
  auto present = [&](Field f) { return value[f] && !value[f]->empty(); };

  SuperSchedule s;
  s.kind = k;
  s.split.assign(spec.vars.size(), 1);
  s.threads = 0;
  s.chunk = 1;
  std::vector<bool> unit_pairs(spec.vars.size(), false);

  if (present(kSplit)) {
    std::vector<bool> seen(spec.vars.size(), false);
    for (const std::string& e : split_on(*value[kSplit], ',')) {
      const std::size_t colon = e.find(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == e.size()) {
        errors.push_back("split entry '" + e + "' is not <variable>:<size> (e.g. i:4)");
        continue;
      }
      const std::string var = e.substr(0, colon), size = e.substr(colon + 1);
      const int vi = var.size() == 1 ? spec.var_index(var[0]) : -1;
      if (vi < 0) {
        errors.push_back("split of '" + var + "', which " + kn + " does not have (its variables are " +
                         var_list(spec.vars) + ")" +
                         (var.size() == 1 ? other_kernel_note(k, var[0]) : std::string()));
        continue;
      }
      const auto vix = static_cast<std::size_t>(vi);
      if (seen[vix]) {
        errors.push_back(var + " appears twice in split");
        continue;
      }
      seen[vix] = true;
      const std::optional<int> n = parse_int(size);
      if (!n) {
        errors.push_back("split size '" + size + "' for " + var +
                         " is not a number (expected a power of two in 1.." +
                         std::to_string(kMaxSplit) + ")");
        continue;
      }
      s.split[vix] = *n;
      unit_pairs[vix] = *n == 1;
    }
  }
  if (present(kOrder)) {
    for (const std::string& t : split_on(*value[kOrder], ',')) {
      const std::optional<Loop> l = parse_loop(t);
      if (!l)
        errors.push_back("bad loop '" + t + "' in order '" + *value[kOrder] + "' (" + kLoopSyntax + ")");
      else
        s.order.push_back(*l);
    }
  }
  if (present(kFormat)) s.formats = parse_formats(*value[kFormat], errors);
  if (present(kParallel)) {
    const std::optional<Loop> l = parse_loop(*value[kParallel]);
    if (!l)
      errors.push_back("bad parallel loop '" + *value[kParallel] + "' (" + kLoopSyntax +
                       "; one loop of the order)");
    else
      s.parallel = *l;
  } else if (!s.order.empty()) {
    s.parallel = s.order.front();
  }
  if (present(kThreads)) {
    const std::optional<int> n = parse_int(*value[kThreads]);
    if (!n)
      errors.push_back("threads '" + *value[kThreads] +
                       "' is not a number (expected an integer >= 0; 0 = every core)");
    else
      s.threads = *n;
  }
  if (present(kChunk)) {
    const std::optional<int> n =
        *value[kChunk] == "static" ? std::optional<int>(kStaticChunk)
        : *value[kChunk] == "auto" ? std::optional<int>(kAutoChunk)
                                   : parse_int(*value[kChunk]);
    if (!n)
      errors.push_back("chunk '" + *value[kChunk] + "' is not a number (expected a power of two in 1.." +
                       std::to_string(kMaxChunk) + ", static or auto)");
    else if (*n < 0 && *value[kChunk] != "auto")  // auto is written as a word only
      errors.push_back("chunk " + *value[kChunk] + " is out of range (expected a power of two in 1.." +
                       std::to_string(kMaxChunk) + ", static or auto)");
    else
      s.chunk = *n;
  }
  if (!errors.empty()) throw_text_error(k, text, errors);
  return finish(s, unit_pairs, [&](const std::vector<std::string>& r) { throw_text_error(k, text, r); });
}

// ---------------------------------------------------------------------------------------------
// JSON form.

nlohmann::json to_json(const SuperSchedule& s) {
  const KernelSpec& spec = kernel_spec(s.kind);
  WACO_ASSERT(s.split.size() == spec.vars.size(), "to_json: one split size per variable");
  nlohmann::json split = nlohmann::json::object();
  for (std::size_t i = 0; i < spec.vars.size(); ++i) split[std::string(1, spec.vars[i])] = s.split[i];
  nlohmann::json order = nlohmann::json::array();
  for (const Loop& l : s.order) order.push_back(l.name());
  std::string format;
  for (LevelFormat f : s.formats) format += format_letter(f);
  return {{"version", kScheduleJsonVersion},
          {"kernel", kname(s.kind)},
          {"split", split},
          {"order", order},
          {"format", format},
          {"parallel", s.parallel.name()},
          {"threads", s.threads},
          {"chunk", s.chunk}};
}

SuperSchedule schedule_from_json(const nlohmann::json& j) {
  const std::string hint = "expected the output of waco::codegen::to_json (schema version " +
                           std::to_string(kScheduleJsonVersion) + ")";
  auto fail = [&](const std::vector<std::string>& reasons) {
    throw Error("schedule JSON " + j.dump() + ": " + join(reasons, "; "), hint);
  };
  if (!j.is_object()) fail({"not an object"});
  std::vector<std::string> errors = detail::json_key_errors(
      j, {"version", "kernel", "split", "order", "format", "parallel", "threads", "chunk"});
  if (!errors.empty()) fail(errors);

  const nlohmann::json& version = j["version"];
  if (!version.is_number_integer() || version.get<long long>() != kScheduleJsonVersion)
    fail({"version " + version.dump() + " is not supported (expected " +
          std::to_string(kScheduleJsonVersion) + ")"});
  const nlohmann::json& kernel = j["kernel"];
  const std::optional<KernelKind> k =
      kernel.is_string() ? kernels::parse_kernel(kernel.get<std::string>()) : std::nullopt;
  if (!k) fail({"unknown kernel " + kernel.dump() + " (expected spmv, spmm, sddmm or mttkrp)"});

  const KernelSpec& spec = kernel_spec(*k);
  SuperSchedule s;
  s.kind = *k;
  s.split.assign(spec.vars.size(), 1);
  std::vector<bool> unit_pairs(spec.vars.size(), false);
  auto as_int = [&](const nlohmann::json& v, const std::string& what) -> std::optional<int> {
    if (const auto n = kernels::json_integer(v, INT_MIN, INT_MAX)) return static_cast<int>(*n);
    errors.push_back(what + " " + v.dump() + " is not an integer");
    return std::nullopt;
  };
  auto as_loop = [&](const nlohmann::json& v, const std::string& what) -> std::optional<Loop> {
    const std::optional<Loop> l = v.is_string() ? parse_loop(v.get<std::string>()) : std::nullopt;
    if (!l) errors.push_back("bad " + what + " " + v.dump() + " (" + kLoopSyntax + ")");
    return l;
  };

  if (!j["split"].is_object()) {
    errors.push_back("split is not an object of variable: size");
  } else {
    for (auto it = j["split"].begin(); it != j["split"].end(); ++it) {
      const int vi = it.key().size() == 1 ? spec.var_index(it.key()[0]) : -1;
      if (vi < 0) {
        errors.push_back("split of '" + it.key() + "', which " + kname(*k) +
                         " does not have (its variables are " + var_list(spec.vars) + ")");
        continue;
      }
      if (const auto n = as_int(it.value(), "split size for " + it.key())) {
        s.split[static_cast<std::size_t>(vi)] = *n;
        unit_pairs[static_cast<std::size_t>(vi)] = *n == 1;
      }
    }
  }
  if (!j["order"].is_array()) {
    errors.push_back("order is not an array of loop names");
  } else {
    for (const nlohmann::json& t : j["order"])
      if (const auto l = as_loop(t, "loop")) s.order.push_back(*l);
  }
  if (!j["format"].is_string())
    errors.push_back("format is not a string of U/C/N letters");
  else
    s.formats = parse_formats(j["format"].get<std::string>(), errors);
  if (const auto l = as_loop(j["parallel"], "parallel loop")) s.parallel = *l;
  if (const auto n = as_int(j["threads"], "threads")) s.threads = *n;
  if (const auto n = as_int(j["chunk"], "chunk")) s.chunk = *n;
  if (!errors.empty()) fail(errors);
  return finish(s, unit_pairs, fail);
}

// ---------------------------------------------------------------------------------------------
// Shortcuts.

std::optional<SuperSchedule> schedule_shortcut(KernelKind k, const std::string& name) {
  const std::string kn = kname(k);
  auto not_for = [&](const std::string& use) {
    throw Error("schedule shortcut '" + name + "' is not defined for " + kn + ": use " + use,
                "shortcuts: csr, dcsr, csc, bcsrRxC, ncsr (spmv, spmm, sddmm); csf (mttkrp)");
  };
  const char* matrix_hint = "csr, dcsr, csc, ncsr or bcsrRxC (e.g. bcsr4x4)";
  std::string text;
  if (name == "csr" || name == "dcsr" || name == "csc") {
    const std::string f = name == "dcsr" ? "CC" : "UC";
    const bool col = name == "csc";
    switch (k) {
      case KernelKind::SpMV:
        // The csr SpMV baseline's rule (kAutoChunk), so that the generated csr runs as it does.
        text = col ? "order=k,i format=UC parallel=k chunk=auto"
                   : "order=i,k format=" + f + " parallel=i chunk=auto";
        break;
      case KernelKind::SpMM:
        text = col ? "order=k,i,j format=UC parallel=k chunk=32"
                   : "order=i,k,j format=" + f + " parallel=i chunk=32";
        break;
      case KernelKind::SDDMM:
        text = col ? "order=j,i,k format=UC parallel=j chunk=32"
                   : "order=i,j,k format=" + f + " parallel=i chunk=32";
        break;
      case KernelKind::MTTKRP: not_for("csf");
    }
  } else if (name == "ncsr") {
    // Narrow csr: csr's narrow twin over any column count (heuristics/narrow.hpp, rule 2), blocks
    // of 256 rows by 65536 columns holding each row's block-local column offsets in 16 bits, in
    // static ranges: it is for operands beyond the cache, where dynamic chunks ran at half the
    // speed (chunk=1, i.e. 256 rows: 9.2-9.5 ms against 3.97-4.02 ms static on a 22M-nonzero
    // banded matrix, 2 threads).
    switch (k) {
      case KernelKind::SpMV:
        text = "split=i:256,k:65536 order=i1,k1,i0,k0 format=UCUN parallel=i1 chunk=static";
        break;
      case KernelKind::SpMM:
        text = "split=i:256,k:65536 order=i1,k1,i0,k0,j format=UCUN parallel=i1 chunk=static";
        break;
      case KernelKind::SDDMM:
        text = "split=i:256,j:65536 order=i1,j1,i0,j0,k format=UCUN parallel=i1 chunk=static";
        break;
      case KernelKind::MTTKRP: not_for("csf");
    }
  } else if (name == "csf") {
    if (k != KernelKind::MTTKRP) not_for(matrix_hint);
    text = "order=i,k,l,j format=CCC parallel=i chunk=32";
  } else if (name.rfind("bcsr", 0) == 0) {
    const std::string dims = name.substr(4);
    const std::size_t x = dims.find('x');
    const std::string rs = x == std::string::npos ? dims : dims.substr(0, x);
    const std::string cs = x == std::string::npos ? "" : dims.substr(x + 1);
    const std::string syntax_hint = "expected bcsrRxC with R and C powers of two in 1.." +
                                    std::to_string(kMaxSplit) + ", e.g. bcsr4x4 or bcsr8x1";
    auto digits = [](const std::string& t) {
      return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (x == std::string::npos || !digits(rs) || !digits(cs))
      throw Error("schedule shortcut '" + name + "' is not bcsrRxC", syntax_hint);
    for (const std::string& t : {rs, cs}) {
      const std::optional<int> n = parse_int(t);
      if (!n || !is_pow2(*n) || *n > kMaxSplit)
        throw Error("schedule shortcut '" + name + "': block size " + t +
                        " is not a power of two in 1.." + std::to_string(kMaxSplit),
                    syntax_hint);
    }
    switch (k) {
      case KernelKind::SpMV:
        text = "split=i:" + rs + ",k:" + cs + " order=i1,k1,i0,k0 format=UCUU parallel=i1 chunk=32";
        break;
      case KernelKind::SpMM:
        text = "split=i:" + rs + ",k:" + cs + " order=i1,k1,i0,k0,j format=UCUU parallel=i1 chunk=32";
        break;
      case KernelKind::SDDMM:
        text = "split=i:" + rs + ",j:" + cs + " order=i1,j1,i0,j0,k format=UCUU parallel=i1 chunk=32";
        break;
      case KernelKind::MTTKRP: not_for("csf");
    }
  } else {
    return std::nullopt;
  }
  // Parsed once a process per kernel and text: every plan binds csr's schedule (make_plan, an
  // adaptive plan's first arm), and parsing it was a fifth of binding csr to a 2.4k-nonzero
  // matrix.
  static kernels::Memo<std::string, SuperSchedule> parsed(64);
  return parsed.get(kn + ' ' + text, [&] { return parse_schedule(k, text); });
}

SuperSchedule schedule_from_string(KernelKind k, const std::string& text) {
  const std::string t = detail::trim(text);
  if (std::optional<SuperSchedule> s = schedule_shortcut(k, t)) return *s;
  if (!t.empty() && t.find('=') == std::string::npos &&
      t.find_first_of(" \t\r\n\f\v") == std::string::npos)
    throw Error("schedule '" + t + "' is neither a shortcut nor the text form", text_hint(k));
  return parse_schedule(k, text);
}

std::vector<SuperSchedule> read_schedule_list(KernelKind kind, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the schedule list " + path, "check the path given to --schedules");
  std::vector<SuperSchedule> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    const std::string text = line.substr(first, last - first + 1);
    try {
      out.push_back(schedule_from_string(kind, text));
    } catch (const Error& e) {
      throw Error(path + ":" + std::to_string(number) + ": " + e.what(),
                  e.hint().empty() ? "one schedule per line (text form or shortcut); # comments"
                                   : e.hint());
    }
  }
  if (out.empty()) throw Error("the schedule list " + path + " holds no schedule",
                               "one schedule per line, in the text form or a shortcut name");
  return out;
}

std::string shipped_list_path(const std::string& dir, KernelKind k) {
  return dir + "/" + std::string(kernel_name(k)) + ".txt";
}

std::vector<SuperSchedule> shipped_list(const std::string& dir, KernelKind k) {
  // Kept while the file stays: every adaptive plan's choice asks, and parsing the list costs
  // ~0.1 ms (20 csr calls of a small SpMV).
  static kernels::PerFileCache<std::vector<SuperSchedule>> kept;
  const std::string path = shipped_list_path(dir, k);
  return kept.get(path, [&]() -> std::vector<SuperSchedule> {
    try {
      return read_schedule_list(k, path);
    } catch (const Error&) {
      return {};  // a folder without a usable list: its kernels still serve compile_and_load
    }
  });
}

std::vector<SuperSchedule> shipped_schedules(KernelKind k) {
  std::vector<SuperSchedule> out;
  std::unordered_set<SuperSchedule> seen;
  for (const std::string& dir : shipped_kernel_dirs())
    for (SuperSchedule& s : shipped_list(dir, k))
      if (seen.insert(s).second) out.push_back(std::move(s));
  return out;
}

}  // namespace waco::codegen
