// The measured cache probe (cache_probe.hpp): one core's read bandwidth over working sets from
// 16 KiB to 256 MiB, and the capacities read off the curve.
//
// Measurement. One buffer of the largest size, allocated once (2 MiB aligned, transparent huge
// pages asked for so that TLB reach does not add a step of its own), written once so that every
// page is mapped, freed at the end. A sample reads the first `size` bytes as 64-bit words summed
// into 16 independent accumulators (the compiler may vectorize the sum; it cannot drop it, since
// the sum goes to a volatile sink), repeated until at least 2 MiB were read so that the clock's
// resolution does not matter. Each pass visits every size in ascending order, so a size's first
// read finds the smaller working set just read still cached; sizes whose sample is short are
// sampled several times in a pass. Passes repeat (all sizes, then all sizes again) while time is
// left, and each size keeps its best bandwidth: drift of the machine (tens of percent within a
// second on the KVM guests this was built on) then hits every size alike instead of bending one
// part of the curve.
#include "waco/kernels/cache_probe.hpp"
#include "waco/kernels/timing.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <list>
#include <mutex>
#include <sstream>

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/json_fields.hpp"

namespace waco::kernels {
namespace {

constexpr int kProbeFormatVersion = 1;
/// The largest working set and capacity a stored probe may hold (1 TiB; the probe measures at
/// most 256 MiB by default), so that a damaged file cannot hand cache_sizes() an absurd L3.
constexpr std::int64_t kMaxStoredProbeBytes = std::int64_t{1} << 40;
constexpr std::int64_t kKiB = 1024;
constexpr std::int64_t kMiB = 1024 * 1024;
/// Bytes read per sample at least (small working sets are re-read this often).
constexpr std::int64_t kSampleBytes = 2 * kMiB;
/// Bytes read per size and pass at least (short samples are repeated within a pass).
constexpr std::int64_t kPassBytesPerSize = 16 * kMiB;
constexpr int kMaxSamplesPerPass = 4;
/// Sizes are multiples of this (the unrolled loop reads 16 words a step).
constexpr std::int64_t kSizeGrain = 256;

volatile std::uint64_t g_sink = 0;

/// Sum of `words` 64-bit words (a multiple of 16) in 16 independent chains, so that the loop is
/// bound by loads, not by the latency of one addition chain.
__attribute__((noinline)) std::uint64_t sum_words(const std::uint64_t* p, std::size_t words) {
  std::uint64_t a[16] = {};
  for (std::size_t i = 0; i < words; i += 16)
    for (int k = 0; k < 16; ++k) a[k] += p[i + static_cast<std::size_t>(k)];
  std::uint64_t s = 0;
  for (int k = 0; k < 16; ++k) s += a[k] * static_cast<std::uint64_t>(2 * k + 1);
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string machine_identity() {
  std::ifstream in("/etc/machine-id");
  std::string id;
  if (std::getline(in, id) && !id.empty()) return id;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0')
    return std::string("host:") + host;
  return "unknown";
}

}  // namespace

nlohmann::json CacheProbeResult::to_json() const {
  nlohmann::json points = nlohmann::json::array();
  for (const CacheProbePoint& p : curve) points.push_back({p.bytes, p.gbps});
  return {{"curve", points},    {"l1d", l1d},       {"l2", l2},    {"l3", l3},
          {"seconds", seconds}, {"passes", passes}, {"note", note}};
}

CacheProbeResult CacheProbeResult::from_json(const nlohmann::json& j) {
  const std::string what = "the stored cache probe is malformed";
  const std::string hint = "delete the file";
  const auto bad = [&](const std::string& why) { return Error(what + ": " + why, hint); };
  if (!j.is_object()) throw bad("not an object");
  // Integers through json_fields.hpp: get<int64_t>() of a float such as 1e300 is undefined.
  constexpr std::int64_t kMax = kMaxStoredProbeBytes;  // of sizes and capacities
  CacheProbeResult r;
  try {
    for (const auto& p : j.at("curve")) {
      if (!p.is_array() || p.size() != 2) throw bad("a curve point is not [bytes, gbps]");
      const std::optional<std::int64_t> bytes = json_integer(p.at(0), 1, kMaxStoredProbeBytes);
      if (!bytes || !p.at(1).is_number())
        throw bad("a curve point is not [bytes in [1, 2^40], gbps] (got " + p.dump() + ")");
      r.curve.push_back({*bytes, p.at(1).get<double>()});
    }
    r.l1d = json_int_field(j, "l1d", 0, kMax, what, hint);
    r.l2 = json_int_field(j, "l2", 0, kMax, what, hint);
    r.l3 = json_int_field(j, "l3", 0, kMax, what, hint);
    if (!j.at("seconds").is_number()) throw bad("'seconds' is not a number");
    r.seconds = j.at("seconds").get<double>();
    r.passes = static_cast<int>(json_int_field(j, "passes", 0, kMaxProbePasses, what, hint));
    r.note = j.at("note").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw bad(e.what());
  }
  if (!(r.seconds >= 0)) throw bad("a negative time");
  for (std::size_t i = 0; i < r.curve.size(); ++i)
    if (!(r.curve[i].gbps > 0) || (i > 0 && r.curve[i].bytes <= r.curve[i - 1].bytes))
      throw bad("the curve is not ascending positive sizes with positive bandwidths");
  return r;
}

CacheProbeResult run_cache_probe(const CacheProbeOptions& options) {
  WACO_ASSERT(options.min_bytes >= kSizeGrain && options.steps_per_octave >= 1,
              "probe sizes must be at least 256 bytes, steps per octave at least 1");
  const auto t0 = std::chrono::steady_clock::now();
  CacheProbeResult r;
  std::int64_t max_bytes = options.max_bytes;
  if (max_bytes <= 0) {
    const double eighth = physical_memory_bytes() / 8;
    max_bytes = static_cast<std::int64_t>(std::min(256.0 * kMiB, eighth));
  }
  std::vector<std::int64_t> sizes;
  for (int i = 0;; ++i) {
    const double s = static_cast<double>(options.min_bytes) *
                     std::exp2(static_cast<double>(i) / options.steps_per_octave);
    const std::int64_t bytes = static_cast<std::int64_t>(s) / kSizeGrain * kSizeGrain;
    if (bytes > max_bytes) break;
    if (sizes.empty() || bytes > sizes.back()) sizes.push_back(bytes);
  }
  if (sizes.empty()) {
    r.note = "no working set fits in " + bytes_text(max_bytes);
    return r;
  }
  const std::size_t buffer_bytes =
      static_cast<std::size_t>((sizes.back() + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB));
  auto* buffer = static_cast<std::uint64_t*>(std::aligned_alloc(2 * kMiB, buffer_bytes));
  if (buffer == nullptr) {
    r.note = "cannot allocate " + bytes_text(static_cast<std::int64_t>(buffer_bytes)) +
             " for the cache probe";
    r.seconds = seconds_since(t0);
    return r;
  }
#ifdef MADV_HUGEPAGE
  ::madvise(buffer, buffer_bytes, MADV_HUGEPAGE);  // a hint; its failure changes nothing
#endif
  const std::size_t words = buffer_bytes / sizeof(std::uint64_t);
  for (std::size_t i = 0; i < words; ++i) buffer[i] = i * 0x9E3779B97F4A7C15ull;

  std::vector<double> best(sizes.size(), 0.0);
  double last_pass = 0.0;
  for (int pass = 0; pass < kMaxProbePasses; ++pass) {
    const double elapsed = seconds_since(t0);
    if (pass >= kMinProbePasses && elapsed + last_pass > options.budget_seconds) break;
    const auto pass_start = std::chrono::steady_clock::now();
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const std::int64_t size = sizes[k];
      const std::int64_t reps = std::max<std::int64_t>(1, (kSampleBytes + size - 1) / size);
      const std::int64_t sample_bytes = reps * size;
      const int samples = static_cast<int>(std::clamp<std::int64_t>(
          (kPassBytesPerSize + sample_bytes - 1) / sample_bytes, 1, kMaxSamplesPerPass));
      const std::size_t n = static_cast<std::size_t>(size) / sizeof(std::uint64_t);
      for (int s = 0; s < samples; ++s) {
        const auto ts = std::chrono::steady_clock::now();
        std::uint64_t acc = 0;
        for (std::int64_t rep = 0; rep < reps; ++rep) {
          acc += sum_words(buffer, n);
          // The buffer "may have changed": the compiler cannot fold repeated reads into one.
          asm volatile("" ::: "memory");
        }
        const double dt = seconds_since(ts);
        g_sink = g_sink + acc;
        if (dt > 0) best[k] = std::max(best[k], static_cast<double>(sample_bytes) / dt * 1e-9);
      }
    }
    last_pass = seconds_since(pass_start);
    r.passes = pass + 1;
  }
  std::free(buffer);
  for (std::size_t k = 0; k < sizes.size(); ++k) r.curve.push_back({sizes[k], best[k]});
  detect_cache_levels(r);
  r.seconds = seconds_since(t0);
  return r;
}

// Detection. The levels are read off the curve in log-log terms (log2 bandwidth over log2 size),
// made robust in three steps:
//  1. Smoothing: a running median of 3 removes single-point outliers (one disturbed sample
//     series), then an isotonic (non-increasing) least-squares fit (pool adjacent violators)
//     flattens noise on the plateaus and small bumps such as the dip just past L1 seen on Zen 3
//     guests, where L1 and L2 read at about the same rate. Bandwidth cannot rise with the working
//     set, so the fit loses nothing real.
//  2. Drops: a step of the fit is steep when the bandwidth falls faster than kSteepPerOctave a
//     doubling of the size; a drop is a maximal run of steep steps (one gentle step inside a run
//     does not end it), kept when it loses at least kMinDrop in all. Plateaus are what lies
//     between drops; their level is the median of the fit over them, so a gently sloping plateau
//     (the L3 of a guest, whose share of it varies) has one level.
//  3. Capacities: a drop's capacity is the largest measured size whose fitted bandwidth is still
//     at least the geometric mean of the plateaus before and after it -- "clearly above" the
//     lower plateau, halfway in log terms, so gradual edges are measured at their middle.
// The first drop below kMaxL1Bytes is the L1d; of the others the first is the L2 and the last
// (the one into the plateau at the largest sizes, DRAM) the effective LLC. With one drop beyond
// L1 the hierarchy has two levels and it is the L2 (no L3). The LLC is not found when the fit
// still falls at the largest size (no DRAM plateau of at least two sizes), or when the largest
// sizes are not at least kMinDrop below the fastest (a flat curve).
namespace {

/// A step is steep when the bandwidth falls by more than 25% per doubling of the working set;
/// on the guests measured, plateaus sloped by at most 8% per doubling, real edges by 60%.
constexpr double kSteepPerOctave = 0.32;  // log2(1.25)
/// A drop must lose at least 30% of the bandwidth (log2(1.3)).
constexpr double kMinDrop = 0.38;
/// L1d caches are 32-64 KiB (128 KiB on Apple cores); a first edge below this is the L1d.
constexpr std::int64_t kMaxL1Bytes = 192 * kKiB;

/// Pool adjacent violators: the non-increasing least-squares fit of y.
std::vector<double> decreasing_fit(const std::vector<double>& y) {
  std::vector<double> level;
  std::vector<int> count;
  for (double v : y) {
    level.push_back(v);
    count.push_back(1);
    while (level.size() > 1 && level[level.size() - 2] < level.back()) {
      const std::size_t k = level.size() - 1;
      const double merged = (level[k - 1] * count[k - 1] + level[k] * count[k]) /
                            static_cast<double>(count[k - 1] + count[k]);
      count[k - 1] += count[k];
      level[k - 1] = merged;
      level.pop_back();
      count.pop_back();
    }
  }
  std::vector<double> out;
  for (std::size_t k = 0; k < level.size(); ++k) out.insert(out.end(), count[k], level[k]);
  return out;
}

}  // namespace

void detect_cache_levels(CacheProbeResult& r) {
  r.l1d = r.l2 = r.l3 = 0;
  const std::size_t n = r.curve.size();
  const auto add_note = [&](const std::string& text) {
    r.note += (r.note.empty() ? "" : "; ") + text;
  };
  if (n < 4) {
    add_note("too few sizes measured to find cache levels");
    return;
  }
  std::vector<double> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = std::log2(static_cast<double>(r.curve[i].bytes));
    y[i] = std::log2(std::max(r.curve[i].gbps, 1e-9));
  }
  std::vector<double> m(y);
  for (std::size_t i = 1; i + 1 < n; ++i) m[i] = median({y[i - 1], y[i], y[i + 1]});
  const std::vector<double> z = decreasing_fit(m);
  if (z.front() - z.back() < kMinDrop) {
    add_note("the bandwidth curve is flat: no cache level stands out");
    return;
  }

  // Drops: runs of steep steps [a, b] (indices into z), one gentle step allowed inside a run.
  struct Drop {
    std::size_t a, b;
  };
  std::vector<Drop> drops;
  const auto steep = [&](std::size_t i) {
    return z[i] - z[i + 1] > kSteepPerOctave * (x[i + 1] - x[i]);
  };
  for (std::size_t i = 0; i + 1 < n;) {
    if (!steep(i)) {
      ++i;
      continue;
    }
    std::size_t b = i + 1;
    while (b + 1 < n && (steep(b) || (b + 2 < n && steep(b + 1)))) ++b;
    if (z[i] - z[b] >= kMinDrop) drops.push_back({i, b});
    i = b;
  }
  if (drops.empty()) {
    add_note("no edge in the bandwidth curve");
    return;
  }
  // Plateau levels around each drop and the capacity at their geometric mean.
  std::vector<std::int64_t> capacity;
  for (std::size_t d = 0; d < drops.size(); ++d) {
    const std::size_t upper_from = d == 0 ? 0 : drops[d - 1].b;
    const std::size_t lower_to = d + 1 < drops.size() ? drops[d + 1].a : n - 1;
    const double upper =
        median(std::vector<double>(z.begin() + upper_from, z.begin() + drops[d].a + 1));
    const double lower =
        median(std::vector<double>(z.begin() + drops[d].b, z.begin() + lower_to + 1));
    const double threshold = 0.5 * (upper + lower);
    std::size_t k = drops[d].a;
    while (k + 1 <= drops[d].b && z[k + 1] >= threshold) ++k;
    capacity.push_back(r.curve[k].bytes);
  }
  std::size_t first = 0;
  if (capacity.front() < kMaxL1Bytes) {
    r.l1d = capacity.front();
    first = 1;
  }
  const std::size_t beyond_l1 = capacity.size() - first;
  const bool dram_plateau = drops.back().b + 2 <= n;  // at least two sizes after the last drop
  if (beyond_l1 == 0) {
    add_note("no edge beyond L1d in the bandwidth curve");
  } else if (beyond_l1 == 1) {
    r.l2 = capacity.back();
    add_note("one edge beyond L1d: a two-level hierarchy, no L3");
  } else {
    r.l2 = capacity[first];
    if (dram_plateau)
      r.l3 = capacity.back();
    else
      add_note("the bandwidth still falls at the largest working set: no DRAM plateau");
    if (beyond_l1 > 2) add_note("edges between L2 and the last level ignored");
  }
}

nlohmann::json cache_probe_key() {
  return {{"cpu", cpu_model()}, {"cpus", available_cpus()}, {"machine", machine_identity()}};
}

std::string cache_probe_path() { return user_cache_dir() + "/cache-probe.json"; }

std::optional<nlohmann::json> load_machine_fact(const std::string& path, int format,
                                               const nlohmann::json& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  try {
    std::ostringstream text;
    text << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(text.str());
    if (!j.is_object() || !j.contains("format") || json_integer(j.at("format")) != format ||
        !j.contains("key") || j.at("key") != key || !j.contains("result"))
      return std::nullopt;
    return std::move(j.at("result"));
  } catch (const std::exception&) {  // corrupt or truncated: measured again and replaced
    return std::nullopt;
  }
}

bool store_machine_fact(const std::string& path, int format, const nlohmann::json& key,
                        const nlohmann::json& result) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) return false;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    const nlohmann::json j{{"format", format}, {"key", key}, {"result", result}};
    // Invalid UTF-8 (a CPU model or host name) is replaced, so that dump() cannot throw.
    out << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

std::optional<CacheProbeResult> load_cache_probe(const std::string& path,
                                                 const nlohmann::json& key) {
  const std::optional<nlohmann::json> result = load_machine_fact(path, kProbeFormatVersion, key);
  if (!result) return std::nullopt;
  try {
    return CacheProbeResult::from_json(*result);
  } catch (const std::exception&) {  // a damaged result: measured again and replaced
    return std::nullopt;
  }
}

bool store_cache_probe(const std::string& path, const nlohmann::json& key,
                       const CacheProbeResult& result) {
  return store_machine_fact(path, kProbeFormatVersion, key, result.to_json());
}

const CacheProbeResult& cache_probe(bool use_cache) {
  static std::mutex mutex;
  static std::list<CacheProbeResult> results;  // a list: references stay valid as it grows
  std::lock_guard<std::mutex> lock(mutex);
  if (use_cache && !results.empty()) return results.back();
  const nlohmann::json key = cache_probe_key();
  const std::string path = cache_probe_path();
  if (use_cache) {
    if (std::optional<CacheProbeResult> stored = load_cache_probe(path, key)) {
      results.push_back(std::move(*stored));
      return results.back();
    }
  }
  results.push_back(run_cache_probe());
  // Not kept when unwritable (not an error), nor when nothing was measured (tried again next time).
  if (!results.back().curve.empty()) store_cache_probe(path, key, results.back());
  return results.back();
}

}  // namespace waco::kernels
