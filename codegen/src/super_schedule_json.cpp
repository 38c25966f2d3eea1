// The versioned JSON form of a SuperSchedule (super_schedule.hpp), the named shortcuts (csr, dcsr,
// csc, bcsrRxC, ncsr, csf: expanded by writing their text and parsing it), schedule_from_string,
// and the schedule lists (a --schedules file, the shipped folders' lists).
#include "waco/codegen/super_schedule.hpp"

#include <algorithm>
#include <climits>
#include <fstream>
#include <optional>
#include <unordered_set>

#include "super_schedule_internal.hpp"
#include "text_util.hpp"
#include "waco/codegen/compiler.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/file_stamp.hpp"
#include "waco/kernels/json_fields.hpp"
#include "waco/kernels/memo.hpp"

namespace waco::codegen {

using kernels::Error;
using kernels::KernelKind;
using namespace detail;

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

namespace {

/// A schedule list file's lines that hold a schedule: (line number, trimmed text), comments and
/// blank lines dropped. Throws when the file cannot be read.
std::vector<std::pair<int, std::string>> list_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read the schedule list " + path, "check the path given to --schedules");
  std::vector<std::pair<int, std::string>> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    out.emplace_back(number, line.substr(first, last - first + 1));
  }
  return out;
}

/// The schedule texts of `dir`'s list for kernel k, unparsed, in order (none when it has none).
std::vector<std::string> shipped_list_texts(const std::string& dir, KernelKind k) {
  // Kept while the file stays: every adaptive plan's choice asks.
  static kernels::PerFileCache<std::vector<std::string>> kept;
  const std::string path = shipped_list_path(dir, k);
  return kept.get(path, [&] {
    std::vector<std::string> texts;
    try {
      for (auto& line : list_lines(path)) texts.push_back(std::move(line.second));
    } catch (const Error&) {
      // Unreadable (gone since its stamp was taken): no list.
    }
    return texts;
  });
}

}  // namespace

std::vector<SuperSchedule> read_schedule_list(KernelKind kind, const std::string& path) {
  std::vector<SuperSchedule> out;
  for (const auto& [number, text] : list_lines(path)) {
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
  // Kept while the file stays: parsing the whole list costs ~0.1-0.2 ms (20-40 csr calls of a
  // small SpMV).
  static kernels::PerFileCache<std::vector<SuperSchedule>> kept;
  return kept.get(shipped_list_path(dir, k), [&] {
    std::vector<SuperSchedule> out;
    for (const std::string& text : shipped_list_texts(dir, k))
      if (std::optional<SuperSchedule> s = shipped_schedule(k, text)) out.push_back(std::move(*s));
    return out;
  });
}

std::optional<SuperSchedule> shipped_schedule(KernelKind k, const std::string& text) {
  try {
    return schedule_from_string(k, text);
  } catch (const Error&) {
    return std::nullopt;  // a damaged line: not a schedule of the list; the others still serve
  }
}

std::vector<std::string> shipped_schedule_texts(KernelKind k) {
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  for (const std::string& dir : shipped_kernel_dirs())
    for (std::string& text : shipped_list_texts(dir, k))
      if (seen.insert(text).second) out.push_back(std::move(text));
  return out;
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
