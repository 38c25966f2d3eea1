// The machine's cache sizes (cache_sizes.hpp): sysfs, CPUID, the measured probe, and the chain.
#include "waco/kernels/cache_sizes.hpp"

#include "boot_facts.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "waco/kernels/context.hpp"
#include "waco/kernels/io.hpp"

namespace waco::kernels {
namespace {

/// A small file's first line (sysfs, procfs; a plan's first machine identity reads ~15).
std::string read_first_line(const std::string& path) {
  std::string text = read_text_file(path);
  text.resize(std::min(text.size(), text.find('\n')));
  return text;
}

/// "32768K", "1M", "512" -> bytes; 0 when unparsable.
std::int64_t parse_size(const std::string& s) {
  std::size_t pos = 0;
  std::int64_t v = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos])))
    v = v * 10 + (s[pos++] - '0');
  if (pos == 0) return 0;
  if (pos < s.size()) {
    const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(s[pos])));
    if (unit == 'K') v <<= 10;
    else if (unit == 'M') v <<= 20;
    else if (unit == 'G') v <<= 30;
  }
  return v;
}

/// Source of the largest level of `c` ("none" when it has none).
std::string llc_source_of(const CacheSizes& c) {
  if (c.l3 > 0) return c.l3_source;
  if (c.l2 > 0) return c.l2_source;
  if (c.l1d > 0) return c.l1d_source;
  return "none";
}

std::string join_notes(const std::vector<std::string>& notes) {
  std::string out;
  for (const std::string& n : notes) {
    if (n.empty()) continue;
    if (!out.empty()) out += "; ";
    out += n;
  }
  return out;
}

}  // namespace

std::string bytes_text(std::int64_t bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  char buf[48];
  if (static_cast<double>(bytes) >= kMiB)
    std::snprintf(buf, sizeof buf, "%.4g MiB", static_cast<double>(bytes) / kMiB);
  else
    std::snprintf(buf, sizeof buf, "%.4g KiB", static_cast<double>(bytes) / 1024.0);
  return buf;
}

std::int64_t CacheSizes::llc() const { return std::max({l1d, l2, l3}); }

nlohmann::json CacheSizes::to_json() const {
  return nlohmann::json{
      {"l1d", l1d},
      {"l2", l2},
      {"l3", l3},
      {"source", source},
      {"sources", {{"l1d", l1d_source}, {"l2", l2_source}, {"l3", l3_source}}},
      {"llc_sharing_cpus", llc_sharing_cpus},
      {"llc_sharing_source", llc_sharing_source},
      {"note", note},
  };
}

int count_cpu_list(const std::string& list) {
  // Ranges "a-b" and single CPUs "a", separated by commas; blanks around them are allowed.
  long long n = 0;
  std::size_t pos = 0;
  const auto skip_blanks = [&] {
    while (pos < list.size() && std::isspace(static_cast<unsigned char>(list[pos]))) ++pos;
  };
  const auto number = [&](long long& v) {
    const std::size_t start = pos;
    v = 0;
    while (pos < list.size() && std::isdigit(static_cast<unsigned char>(list[pos])) &&
           pos - start < 9)
      v = v * 10 + (list[pos++] - '0');
    const bool more = pos < list.size() && std::isdigit(static_cast<unsigned char>(list[pos]));
    return pos > start && !more;  // at most 9 digits
  };
  skip_blanks();
  if (pos == list.size()) return 0;
  while (true) {
    skip_blanks();
    long long lo = 0, hi = 0;
    if (!number(lo)) return 0;
    hi = lo;
    skip_blanks();
    if (pos < list.size() && list[pos] == '-') {
      ++pos;
      skip_blanks();
      if (!number(hi) || hi < lo) return 0;
      skip_blanks();
    }
    n += hi - lo + 1;
    if (n > (1 << 24)) return 0;
    if (pos == list.size()) break;
    if (list[pos] != ',') return 0;
    ++pos;
  }
  return static_cast<int>(n);
}

std::string sysfs_root() {
  if (const char* env = std::getenv("WACO_SYSFS_ROOT"); env && *env) return env;
  return "/sys";
}

CacheSizes read_sysfs_cache_sizes(const std::string& root) {
  namespace fs = std::filesystem;
  CacheSizes c;
  std::string base = root;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string dir = base + "/devices/system/cpu/cpu0/cache";
  std::vector<std::pair<int, fs::path>> entries;  // (index number, directory)
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("index", 0) != 0 || name.size() == 5 || name.size() > 9) continue;
    if (!std::all_of(name.begin() + 5, name.end(),
                     [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); }))
      continue;
    entries.emplace_back(std::stoi(name.substr(5)), it->path());
  }
  std::sort(entries.begin(), entries.end());
  int entries_read = 0, sharing_level = 0;
  for (const auto& entry : entries) {
    const fs::path& path = entry.second;
    const std::string level_text = read_first_line((path / "level").string());
    int level = 0;
    std::from_chars(level_text.data(), level_text.data() + level_text.size(), level);
    if (level < 1) continue;
    ++entries_read;
    const std::string type = read_first_line((path / "type").string());
    if (type == "Instruction") continue;
    const std::int64_t size = parse_size(read_first_line((path / "size").string()));
    if (level == 1) c.l1d = size;
    else if (level == 2) c.l2 = size;
    else if (level == 3) c.l3 = size;
    if (level >= sharing_level) {
      sharing_level = level;
      c.llc_sharing_cpus = count_cpu_list(read_first_line((path / "shared_cpu_list").string()));
    }
  }
  if (c.l1d > 0) c.l1d_source = "sysfs";
  if (c.l2 > 0) c.l2_source = "sysfs";
  if (c.l3 > 0) c.l3_source = "sysfs";
  if (c.llc_sharing_cpus > 0) c.llc_sharing_source = "sysfs";
  c.source = llc_source_of(c);
  if (entries_read == 0) c.note = "sysfs has no cache entries under " + dir;
  else if (c.llc() == 0) c.note = "sysfs gave no cache sizes under " + dir;
  return c;
}

CacheSizes read_cpuid_cache_sizes() {
  CacheSizes c;
  const auto get = [](int name) -> std::int64_t {
    const long v = ::sysconf(name);
    return v > 0 ? static_cast<std::int64_t>(v) : 0;
  };
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && \
    defined(_SC_LEVEL3_CACHE_SIZE)
  c.l1d = get(_SC_LEVEL1_DCACHE_SIZE);
  c.l2 = get(_SC_LEVEL2_CACHE_SIZE);
  c.l3 = get(_SC_LEVEL3_CACHE_SIZE);
#else
  (void)get;
#endif
  if (c.l1d > 0) c.l1d_source = "cpuid";
  if (c.l2 > 0) c.l2_source = "cpuid";
  if (c.l3 > 0) c.l3_source = "cpuid";
  c.source = llc_source_of(c);
  if (c.llc() == 0) c.note = "cpuid (sysconf) gave no cache sizes";
  return c;
}

CacheSizes resolve_cache_sizes(const CacheSizes& sysfs, const CacheSizes& cpuid,
                               const std::function<CacheProbeResult()>& probe, int cpus) {
  cpus = std::max(1, cpus);
  CacheSizes out;
  std::vector<std::string> notes{sysfs.note};
  const bool sysfs_gave_some = sysfs.llc() > 0;

  // L1d and L2: the first source that gives them.
  const auto take = [&](std::int64_t CacheSizes::*level, std::string CacheSizes::*source,
                        const char* name) {
    if (sysfs.*level > 0) {
      out.*level = sysfs.*level;
      out.*source = "sysfs";
    } else if (cpuid.*level > 0) {
      out.*level = cpuid.*level;
      out.*source = "cpuid";
      if (sysfs_gave_some) notes.push_back(std::string("sysfs gave no ") + name + ": from cpuid");
    }
  };
  take(&CacheSizes::l1d, &CacheSizes::l1d_source, "L1d");
  take(&CacheSizes::l2, &CacheSizes::l2_source, "L2");

  // L3: the first plausible figure. Sysfs's sharing count belongs to the L3 when sysfs gave one.
  const bool sysfs_sharing = sysfs.l3 > 0 && sysfs.llc_sharing_cpus > 0;
  const int sharing = sysfs_sharing ? sysfs.llc_sharing_cpus : cpus;
  struct Passed {
    std::string source;
    std::int64_t bytes;
  };
  std::vector<Passed> passed;  // implausible figures, in chain order
  for (const CacheSizes* src : {&sysfs, &cpuid}) {
    const std::string name = src == &sysfs ? "sysfs" : "cpuid";
    if (src->l3 <= 0) continue;
    const std::int64_t per_cpu = src->l3 / sharing;
    if (per_cpu <= kMaxPlausibleLlcPerCpu) {
      out.l3 = src->l3;
      out.l3_source = name;
      if (!passed.empty())
        notes.back() += ": " + name + "'s " + bytes_text(src->l3) + " taken instead";
      else if (name == "cpuid" && sysfs_gave_some)
        notes.push_back("sysfs gave no L3: from cpuid");
      break;
    }
    passed.push_back({name, src->l3});
    notes.push_back(name + " reported " + bytes_text(src->l3) + " L3 for " +
                    std::to_string(sharing) + (sharing == 1 ? " CPU (" : " CPUs (") +
                    bytes_text(per_cpu) + " a CPU, more than the plausible " +
                    bytes_text(kMaxPlausibleLlcPerCpu) + ")");
  }
  if (out.l3 == 0 && !passed.empty()) {
    // Not trusted blindly, not replaced by the probe either: capped at the plausible share.
    // Measured (scripts/bench_cache_sources.sh, EPYC Milan guest, 8 runs of SpMM/SDDMM J=K=256
    // per thread count on the 4 matrices of ../shared/data with the most rows): the tile model's
    // choice at the probe's 19 MiB (5 MiB usable a thread) was never better than at the larger
    // capacities (sysfs 32 MiB, cpuid 256 MiB, an Intel guest's 105 MiB), and worse where the
    // capacity decided the tile: loc-Gowalla model/best 1.319 vs 1.065 (SpMM, 2 threads), 1.137
    // vs 1.045 (SDDMM, 2 threads); 1.496 vs 1.000 at 64 MiB (SpMM, 1 thread). The capped figure
    // itself (64 MiB for 2 CPUs: 16 MiB usable a thread), loc-Gowalla: 1.000 at 1 and 2
    // threads, against 1.242 / 1.289 at sysfs's / the probe's (SpMM, 1 thread). The probe reads
    // where one core's bandwidth has fallen halfway to memory's, an effective size below the
    // nominal one the model's cache fraction was calibrated with. (Only on luxembourg_osm at 1
    // thread did the probe's capacity do better: 1.056 vs 1.102 SpMM, 1.000 vs 1.016 SDDMM.)
    const std::int64_t cap = kMaxPlausibleLlcPerCpu * sharing;
    out.l3 = std::min(passed.front().bytes, cap);
    out.l3_source = passed.front().source;
    notes.back() += ": capped at " + bytes_text(kMaxPlausibleLlcPerCpu) + " a CPU (" +
                    bytes_text(out.l3) + ")";
  }
  if (out.l3 == 0) {
    notes.push_back(sysfs_gave_some ? "sysfs and cpuid gave no L3" : "cpuid gave no L3");
    CacheProbeResult measured;
    std::string probe_failure;
    try {
      if (probe) measured = probe();
      else probe_failure = "no probe";
    } catch (const std::exception& e) {
      probe_failure = std::string("the probe failed: ") + e.what();
    }
    if (measured.l3 > 0) {
      out.l3 = measured.l3;
      out.l3_source = "probe";
      notes.back() += ": measured instead (the probe found " + bytes_text(measured.l3) + ")";
    } else {
      std::string none = "the probe found no L3 either";
      if (!probe_failure.empty()) none += " (" + probe_failure + ")";
      else if (!measured.note.empty()) none += " (" + measured.note + ")";
      notes.push_back(none);
    }
    const auto fill = [&](std::int64_t CacheSizes::*level, std::string CacheSizes::*source,
                          std::int64_t value, const char* name) {
      if (out.*level > 0 || value <= 0) return;
      out.*level = value;
      out.*source = "probe";
      notes.push_back(std::string(name) + " from the probe");
    };
    fill(&CacheSizes::l1d, &CacheSizes::l1d_source, measured.l1d, "L1d");
    fill(&CacheSizes::l2, &CacheSizes::l2_source, measured.l2, "L2");
  }

  out.source = llc_source_of(out);
  // Sharing of the LLC figure: sysfs's list when it describes that level, else the available CPUs.
  const bool sysfs_level_is_llc =
      out.l3 > 0 ? sysfs_sharing
                 : (sysfs.llc_sharing_cpus > 0 && out.source == "sysfs" && sysfs.l3 == 0 &&
                    out.llc() == sysfs.llc());
  out.llc_sharing_cpus = sysfs_level_is_llc ? sysfs.llc_sharing_cpus : cpus;
  out.llc_sharing_source = sysfs_level_is_llc ? "sysfs" : "available";
  out.note = join_notes(notes);
  return out;
}

namespace {

/// CacheSizes::to_json's inverse (what boot_fact keeps); throws nlohmann::json's exception on a
/// missing or mistyped field.
CacheSizes from_json(const nlohmann::json& j) {
  CacheSizes c;
  j.at("l1d").get_to(c.l1d);
  j.at("l2").get_to(c.l2);
  j.at("l3").get_to(c.l3);
  j.at("source").get_to(c.source);
  j.at("sources").at("l1d").get_to(c.l1d_source);
  j.at("sources").at("l2").get_to(c.l2_source);
  j.at("sources").at("l3").get_to(c.l3_source);
  j.at("llc_sharing_cpus").get_to(c.llc_sharing_cpus);
  j.at("llc_sharing_source").get_to(c.llc_sharing_source);
  j.at("note").get_to(c.note);
  return c;
}

/// read_sysfs_cache_sizes once per sysfs root in a process (WACO_SYSFS_ROOT may point elsewhere
/// between calls), shared by cache_sizes() and last_level_cache_bytes(): its 16 files took
/// ~0.15 ms, which a process's first choice paid twice, once for each of them.
CacheSizes sysfs_cache_sizes_once(const std::string& root) {
  static std::mutex mutex;
  static std::map<std::string, CacheSizes> read;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = read.find(root);
  if (it != read.end()) return it->second;
  if (root != "/sys") return read.emplace(root, read_sysfs_cache_sizes(root)).first->second;
  // This machine's entries: kept for the boot in the user's cache (boot_facts.hpp).
  const nlohmann::json kept = detail::boot_fact(
      "sysfs_cache", [&] { return read_sysfs_cache_sizes(root).to_json(); },
      [](const nlohmann::json& j) { return from_json(j).l1d >= 0; });
  return read.emplace(root, from_json(kept)).first->second;
}

}  // namespace

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = resolve_cache_sizes(
      sysfs_cache_sizes_once(sysfs_root()), read_cpuid_cache_sizes(),
      [] { return cache_probe(true); }, available_cpus());
  return sizes;
}

std::int64_t last_level_cache_bytes() {
  // Without the measured probe; sysfs read once per root, CPUID's answer (a fallback) kept too.
  static std::mutex mutex;
  static std::map<std::string, std::int64_t> read;
  const std::string root = sysfs_root();
  std::int64_t llc = 0;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = read.find(root);
    if (it != read.end()) {
      llc = it->second;
    } else {
      llc = sysfs_cache_sizes_once(root).llc();
      if (llc <= 0) llc = read_cpuid_cache_sizes().llc();
      read.emplace(root, llc);
    }
  }
  const std::int64_t plausible =
      kMaxPlausibleLlcPerCpu * std::max(1, available_cpus());
  return std::clamp<std::int64_t>(llc, 0, plausible);
}

}  // namespace waco::kernels
