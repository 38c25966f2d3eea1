// SuperSchedule (WACO section 4.1.2, Table 3): checking, canonical form, hash. The one text form
// (one printer, to_text; one parser, parse_schedule): super_schedule_text.cpp; the versioned JSON
// form and the named shortcuts: super_schedule_json.cpp. Every way into a SuperSchedule (text,
// JSON, shortcut) runs through the same reason list, check_schedule(), which validate() also
// returns, so a schedule accepted anywhere is accepted everywhere and an error names the same
// token whichever door it came through.
//
// Split-1 pairs: the raw SuperSchedule value may name x1/x0 for a variable whose split size is 1
// (the paper's "reduce a split by choosing size 1"); canonicalize() collapses such a pair into x.
// validate() refuses them (a valid schedule is canonical in that respect), while the text and JSON
// readers accept them only for variables whose size 1 is written explicitly (`split=k:1`), so
// `bcsr8x1` can expand to one text, and a forgotten split (`order=i1,k,i0` without `split=i:..`)
// is still an error naming i1.
#include "waco/codegen/super_schedule.hpp"

#include <algorithm>
#include <functional>

#include "super_schedule_internal.hpp"
#include "text_util.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/memo.hpp"

namespace waco::codegen {

using kernels::Error;
using kernels::KernelKind;
using namespace detail;

namespace detail {

bool is_pow2(long long x) { return x >= 1 && (x & (x - 1)) == 0; }

std::string kname(KernelKind k) { return std::string(kernels::kernel_name(k)); }

std::string var_list(const std::vector<char>& vars) {
  std::vector<std::string> names;
  for (char v : vars) names.emplace_back(1, v);
  return join(names, ", ");
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

}  // namespace detail

namespace {

using detail::join;

std::string loop_list(const std::vector<Loop>& loops) {
  std::vector<std::string> names;
  for (const Loop& l : loops) names.push_back(l.name());
  return join(names, ", ");
}

std::string plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
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

}  // namespace

namespace detail {

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

}  // namespace detail

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

}  // namespace waco::codegen
