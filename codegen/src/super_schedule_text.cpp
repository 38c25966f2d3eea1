// The one text form of a SuperSchedule (super_schedule.hpp): the printer (to_text) and the parser
// (parse_schedule), with the tokens the JSON form reads too (loops, format letters, integers) and
// the text form's hint.
#include "waco/codegen/super_schedule.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <optional>
#include <sstream>

#include "super_schedule_internal.hpp"
#include "text_util.hpp"
#include "waco/kernels/error.hpp"

namespace waco::codegen {

using kernels::Error;
using kernels::KernelKind;
using namespace detail;

namespace {

constexpr std::array<const char*, 6> kFieldNames = {"split",    "order",   "format",
                                                    "parallel", "threads", "chunk"};
enum Field { kSplit, kOrder, kFormat, kParallel, kThreads, kChunk };

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

[[noreturn]] void throw_text_error(KernelKind k, const std::string& text,
                                   const std::vector<std::string>& reasons) {
  throw Error("schedule \"" + text + "\": " + join(reasons, "; "), text_hint(k));
}

}  // namespace

namespace detail {

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

std::string text_hint(KernelKind k) {
  return "the text form is 'split=<var>:<size>,... order=<loop>,... format=<U|C|N per sparse level> "
         "parallel=<loop> threads=<n> chunk=<n|static|auto>' (order and format required), e.g. '" +
         example_text(k) + "' for " + kname(k) +
         "; or a shortcut: " + (k == KernelKind::MTTKRP ? "csf" : "csr, dcsr, csc, bcsr4x4, ncsr");
}

}  // namespace detail

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

}  // namespace waco::codegen
