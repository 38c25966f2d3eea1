// The run context recorded with every result: CPU, caches (sysfs, cpuid or the measured probe),
// cores, compiler and flags as built, git revision, counter backend, date.
#include "waco/kernels/context.hpp"

#include <omp.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>
#include <string>

#include "waco/kernels/io.hpp"
#include "waco/kernels/timing.hpp"

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

/// read_sysfs_cache_sizes once per sysfs root in a process (WACO_SYSFS_ROOT may point elsewhere
/// between calls), shared by cache_sizes() and last_level_cache_bytes(): its 16 files took
/// ~0.15 ms, which a process's first choice paid twice, once for each of them.
CacheSizes sysfs_cache_sizes_once(const std::string& root) {
  static std::mutex mutex;
  static std::map<std::string, CacheSizes> read;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = read.find(root);
  if (it != read.end()) return it->second;
  return read.emplace(root, read_sysfs_cache_sizes(root)).first->second;
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

std::string user_cache_dir() {
  const auto join = [](std::string dir, const char* name) {
    if (dir.back() != '/') dir += '/';
    return dir + name;
  };
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return join(xdg, "waco-hybrid");
  if (const char* home = std::getenv("HOME"); home && *home)
    return join(home, ".cache/waco-hybrid");
  return "/tmp/waco-hybrid-" + std::to_string(::getuid());
}

void scan_cpuinfo(const std::function<bool(std::string_view)>& line_done) {
  // Read as it is needed: the kernel makes /proc/cpuinfo one processor's record at a time (each
  // with that processor's current clock), and a buffered stream (8 KiB at once) had it make
  // every record for a line of the first (2-vCPU VM, the other vCPU idle: 0.13-0.20 ms against
  // 0.05-0.08 ms for the first record alone).
  const int fd = ::open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::string pending;
  char buf[1024];
  bool done = false;
  while (!done) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<std::size_t>(n));
    std::size_t from = 0;
    for (std::size_t nl; !done && (nl = pending.find('\n', from)) != std::string::npos; from = nl + 1)
      done = line_done(std::string_view(pending).substr(from, nl - from));
    pending.erase(0, from);
  }
  if (!done && !pending.empty()) line_done(pending);  // a last line without its newline
  ::close(fd);
}

std::string cpuinfo_field(const std::string& key) {
  std::string value;
  scan_cpuinfo([&](std::string_view line) {
    if (line.substr(0, key.size()) != key) return false;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) return false;
    value = std::string(line.substr(colon + 1));
    value.erase(0, value.find_first_not_of(" \t"));
    return true;
  });
  return value;
}

const CpuinfoLines& cpuinfo_identity_lines() {
  static const CpuinfoLines lines = [] {
    CpuinfoLines l;
    scan_cpuinfo([&](std::string_view line) {
      if (l.model.empty() && line.substr(0, 10) == "model name") l.model = line;
      if (l.flags.empty() && (line.substr(0, 5) == "flags" || line.substr(0, 8) == "Features"))
        l.flags = line;
      return !l.model.empty() && !l.flags.empty();
    });
    return l;
  }();
  return lines;
}

std::string cpu_model() {
  // Once a process: every tune's machine identity (tuning cache, calibration) names it. The
  // value of the first "model name" line that has one (cpuinfo_field's rule).
  static const std::string model = [] {
    const std::string& line = cpuinfo_identity_lines().model;
    const auto colon = line.find(':');
    std::string v = colon == std::string::npos ? cpuinfo_field("model name") : line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v.empty() ? std::string("unknown") : v;
  }();
  return model;
}

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return omp_get_num_procs();
}

namespace {
/// The team size place_openmp_team placed for the calling thread's pool (0: none since the
/// pool started or was released).
thread_local int placed_team = 0;
}  // namespace

void release_idle_openmp_threads() {
  if (omp_in_parallel()) return;
  omp_pause_resource_all(omp_pause_soft);
  placed_team = 0;
}

double place_openmp_team(int threads) {
  if (threads <= placed_team || omp_in_parallel()) return 0.0;
  const double t0 = now_seconds();
  cpu_set_t allowed;
  const int master = sched_getcpu();
  if (threads > 1 && master >= 0 && sched_getaffinity(0, sizeof allowed, &allowed) == 0 &&
      CPU_COUNT(&allowed) > 1 && CPU_ISSET(master, &allowed)) {
#pragma omp parallel num_threads(threads)
    {
      cpu_set_t mine, other;
      if (omp_get_thread_num() != 0 && sched_getcpu() == master &&
          pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0 && CPU_ISSET(master, &mine)) {
        other = mine;
        CPU_CLR(master, &other);
        // Narrowed, the thread moves at once; given its mask back, it stays where it went.
        if (CPU_COUNT(&other) > 0 && pthread_setaffinity_np(pthread_self(), sizeof other, &other) == 0)
          pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
      }
    }
  }
  placed_team = std::max(placed_team, threads);
  return now_seconds() - t0;
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(pages) * static_cast<double>(page);
}

double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {  // "MemAvailable:   19283744 kB" (some lines have no unit)
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    const double kib = std::strtod(line.c_str() + 13, nullptr);
    if (kib > 0) return kib * 1024.0;
  }
  return physical_memory_bytes();
}

namespace {

/// Busy and total jiffies of each CPU in `set`, from /proc/stat; empty when unreadable.
std::vector<std::pair<double, double>> cpu_jiffies(const cpu_set_t& set) {
  std::ifstream in("/proc/stat");
  std::vector<std::pair<double, double>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 3, "cpu") != 0 || line.size() < 4 || !std::isdigit(line[3])) continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    fields >> cpu;
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set)) continue;
    // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
    double v[8] = {0, 0, 0, 0, 0, 0, 0, 0}, total = 0;
    for (double& x : v) {
      fields >> x;
      total += x;
    }
    out.emplace_back(total - v[3] - v[4], total);
  }
  return out;
}

}  // namespace

double busy_cpus(double seconds) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1.0;
  const auto before = cpu_jiffies(set);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const auto after = cpu_jiffies(set);
  if (before.empty() || before.size() != after.size()) return -1.0;
  double busy = 0.0;
  for (std::size_t i = 0; i < before.size(); ++i) {
    const double dt = after[i].second - before[i].second;
    if (dt > 0) busy += (after[i].first - before[i].first) / dt;
  }
  return busy;
}

std::string busy_machine_warning(int threads, double seconds) {
  const double busy = busy_cpus(seconds);
  const int cpus = available_cpus();
  if (busy < 0 || busy + threads <= cpus + 0.5) return {};
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "the machine is busy (other processes keep %.1f of this run's %d CPUs busy, and "
                "it runs %d threads): multi-threaded timings will include waits for descheduled "
                "threads; compare only side-by-side ratios, or use fewer --threads",
                busy, cpus, threads);
  return buf;
}

double core_round_trip_ns(int trips, int batches, double max_seconds) {
  cpu_set_t set;
  if (trips < 1 || batches < 1 || max_seconds <= 0 || sched_getaffinity(0, sizeof(set), &set) != 0)
    return -1.0;
  int cpu[2] = {-1, -1};
  for (int c = 0, found = 0; c < CPU_SETSIZE && found < 2; ++c)
    if (CPU_ISSET(c, &set)) cpu[found++] = c;
  if (cpu[1] < 0) return -1.0;
  struct alignas(64) Line {
    std::atomic<long> turn{0};  // odd: the echo's turn; even: the initiator's
  } line;
  std::atomic<bool> pinned{true};
  const auto pin = [&pinned](int c) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0) pinned = false;
  };
  const long total = static_cast<long>(trips) * batches;
  std::vector<double> per_trip;
  // Both sides go on whether or not pinning worked, so that neither waits for the other forever;
  // on CPUs other threads keep busy a round trip waits for time slices: the initiator gives up
  // after max_seconds (checking the clock every 1024 spins) and the echo stops with it.
  std::atomic<bool> gave_up{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_seconds);
  std::thread echo([&] {
    pin(cpu[1]);
    for (long i = 0; i < total; ++i) {
      while (line.turn.load(std::memory_order_acquire) != 2 * i + 1)
        if (gave_up.load(std::memory_order_relaxed)) return;
      line.turn.store(2 * i + 2, std::memory_order_release);
    }
  });
  std::thread initiator([&] {
    pin(cpu[0]);
    long i = 0;
    unsigned spins = 0;
    for (int b = 0; b < batches; ++b) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < trips; ++k, ++i) {
        line.turn.store(2 * i + 1, std::memory_order_release);
        while (line.turn.load(std::memory_order_acquire) != 2 * i + 2)
          if ((++spins & 1023u) == 0 && std::chrono::steady_clock::now() > deadline) {
            gave_up = true;
            return;
          }
      }
      const std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
      per_trip.push_back(dt.count() / trips);
    }
  });
  initiator.join();
  echo.join();
  if (!pinned || gave_up) return -1.0;
  std::sort(per_trip.begin(), per_trip.end());
  return per_trip[per_trip.size() / 2];
}

const char* version() { return WACO_VERSION; }

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return date;
}

nlohmann::json context_json(int threads, std::string_view counter_backend) {
  const CacheSizes& c = cache_sizes();
  const std::string date = utc_timestamp();
  return nlohmann::json{
      {"cpu", cpu_model()},
      {"cores_available", available_cpus()},
      {"threads", threads},
      {"cache_bytes", {{"l1d", c.l1d}, {"l2", c.l2}, {"l3", c.l3}}},
      {"cache_source", c.to_json()},
      {"compiler", WACO_COMPILER},
      {"flags", WACO_FLAGS},
      {"build_type", WACO_BUILD_TYPE},
      {"git_revision", git_revision()},
      {"counters", std::string(counter_backend)},
      {"date", date},
      {"waco_version", WACO_VERSION},
  };
}

}  // namespace waco::kernels
