// The csr SpMV rule's serial bound (serial_bound.hpp): the probe, the bound read off it, and the
// per-machine store beside the cache probe's.
#include "waco/kernels/serial_bound.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>

#include "baselines.hpp"
#include "waco/kernels/cache_probe.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/openmp_team.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/json_fields.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::kernels {

namespace {

// 2: bounds measured with the serial loop's chosen copy (csr_spmv_serial_copy); those of format 1
// timed copy 0 and are measured again.
constexpr int kStoreFormat = 2;
constexpr int kLoopStoreFormat = 1;
constexpr int kCachedThreads = 256;  ///< thread counts below this are looked up without a lock
constexpr std::int64_t kRowNnz = 8;  ///< the probe matrices' nonzeros a row
constexpr int kSettleCalls = 2;      ///< untimed calls before each timed one

/// "<threads>/<dtype>", an entry of the stored object.
std::string entry_name(int threads, Dtype dtype) {
  return std::to_string(threads) + "/" + std::string(dtype_name(dtype));
}

/// WACO_CSR_SERIAL_NNZ, read once: -1 when unset or empty.
std::int64_t env_bound() {
  static const std::int64_t bound = [] {
    const char* v = std::getenv("WACO_CSR_SERIAL_NNZ");
    if (v == nullptr || *v == '\0') return std::int64_t{-1};
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v, &end, 10);
    if (errno != 0 || *end != '\0' || n < 0)
      throw Error(std::string("WACO_CSR_SERIAL_NNZ must be a whole number of nonzeros (got '") + v + "')",
                  "unset it to use the bound measured on this machine");
    return static_cast<std::int64_t>(n);
  }();
  return bound;
}

/// One round of a comparison of the serial and the parallel loop: both timed, the order
/// alternating with `round` so that neither always runs first, each timed call after
/// kSettleCalls of its own, as an application's repeated calls run (and as a tune times them:
/// heuristics' settle runs). Timed right after the other loop, the serial one found half of y
/// and of A in the other core's cache and ran up to 1.8x slower, which put the bound at 3,949
/// nonzeros in f32 where real matrices' crossover lay above 8,600 (Zen 5 VM, 2 threads).
/// Returns the parallel call's time over the serial one's (0 when the serial one read 0).
template <class S, class P>
double round_ratio(const S& serial, const P& parallel, int round) {
  double ts = 0.0, tp = 0.0;
  for (int k = 0; k < 2; ++k) {
    const bool s_turn = (k == 0) == (round % 2 == 0);
    for (int c = 0; c < kSettleCalls; ++c) s_turn ? serial() : parallel();
    const double t0 = now_seconds();
    s_turn ? serial() : parallel();
    (s_turn ? ts : tp) = now_seconds() - t0;
  }
  return ts > 0.0 ? tp / ts : 0.0;
}

/// The median of `v` (the upper one of an even count); 1 when empty.
double median_or_one(std::vector<double> v) {
  if (v.empty()) return 1.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// A probe matrix of about `nnz` nonzeros: rows of 1 to 2 kRowNnz - 1 nonzeros at random
/// (kRowNnz on average), so that the inner loop's exit is as hard to predict as a real matrix's:
/// with rows all kRowNnz long (a trip count the branch predictor learns) the bound came out at
/// 15-25k nonzeros in f64, where csr's serial loop ran dwt_1005 and G51 (8.6k, 11.8k) at 0.6x the
/// speed of its parallel loop in `bench` (Zen 5 VM; kernels/README.md, "The serial bound").
/// Seeded: the same matrices in every process.
template <class V>
struct ProbeMatrix {
  std::vector<index_t> rowptr, colidx;
  std::vector<V> val, x, y;

  ProbeMatrix(std::int64_t nnz, std::uint64_t& state) {
    const auto next = [&state] {  // the SplitMix64 stream of dense.hpp's step
      const std::uint64_t z = splitmix64(state);
      state += 0x9e3779b97f4a7c15ULL;
      return z;
    };
    const auto rows = static_cast<index_t>(nnz / kRowNnz);
    rowptr.assign(static_cast<std::size_t>(rows) + 1, 0);
    for (index_t i = 0; i < rows; ++i)
      rowptr[static_cast<std::size_t>(i) + 1] = rowptr[static_cast<std::size_t>(i)] + 1 +
          static_cast<index_t>(next() % static_cast<std::uint64_t>(2 * kRowNnz - 1));
    colidx.resize(static_cast<std::size_t>(rowptr.back()));
    for (index_t i = 0; i < rows; ++i) {
      const auto row = colidx.begin() + rowptr[static_cast<std::size_t>(i)];
      const auto end = colidx.begin() + rowptr[static_cast<std::size_t>(i) + 1];
      for (auto e = row; e != end; ++e) *e = static_cast<index_t>(next() % static_cast<std::uint64_t>(rows));
      std::sort(row, end);
    }
    val.assign(colidx.size(), V(0.5));
    x.assign(static_cast<std::size_t>(rows), V(1));
    y.resize(static_cast<std::size_t>(rows));
  }
  CsrView<V> view() const {
    return {static_cast<index_t>(rowptr.size() - 1), rowptr.data(), colidx.data(), val.data()};
  }
};

constexpr std::uint64_t kProbeSeed = 0x5eed5eed5eedULL;

/// The probe on one type: the baseline's own loops on synthetic matrices of each size.
template <class V>
std::vector<std::pair<std::int64_t, double>> probe_ratios(int threads, int rounds) {
  std::vector<std::pair<std::int64_t, double>> out;
  std::uint64_t state = kProbeSeed;
  for (std::int64_t nnz = kSerialProbeMinNnz; nnz <= kSerialProbeMaxNnz; nnz *= 2) {
    ProbeMatrix<V> m(nnz, state);
    const CsrView<V> a = m.view();
    const auto serial = [&] { detail::csr_spmv_serial_rows(a, m.x.data(), m.y.data()); };
    const auto parallel = [&] { detail::csr_spmv_parallel_rows(a, m.x.data(), m.y.data(), threads); };
    for (int w = 0; w < 3; ++w) {
      serial();
      parallel();
    }
    std::vector<double> ratio;
    for (int r = 0; r < rounds; ++r)
      if (const double q = round_ratio(serial, parallel, r); q > 0.0) ratio.push_back(q);
    out.emplace_back(nnz, median_or_one(ratio));
  }
  return out;
}

/// The serial loop's copies on one type: per size, rounds in which every copy runs (the order
/// rotating with the round), each timed call after kSettleCalls of its own; per copy the geometric
/// mean over the sizes of its median time over copy 0's.
template <class V>
std::vector<double> probe_copies(int rounds) {
  constexpr std::int64_t kSizes[] = {2048, 8192, 32768};
  const auto& copies = detail::csr_spmv_serial_copies<V>();
  std::vector<double> log_sum(copies.size(), 0.0);
  std::uint64_t state = kProbeSeed;
  for (const std::int64_t nnz : kSizes) {
    ProbeMatrix<V> m(nnz, state);
    const CsrView<V> a = m.view();
    std::vector<std::vector<double>> times(copies.size());
    for (const auto& copy : copies)
      for (int w = 0; w < 3; ++w) copy(a, m.x.data(), m.y.data());
    for (int r = 0; r < rounds; ++r)
      for (std::size_t k = 0; k < copies.size(); ++k) {
        const std::size_t c = (k + static_cast<std::size_t>(r)) % copies.size();
        for (int s = 0; s < kSettleCalls; ++s) copies[c](a, m.x.data(), m.y.data());
        const double t0 = now_seconds();
        copies[c](a, m.x.data(), m.y.data());
        times[c].push_back(now_seconds() - t0);
      }
    const double base = median_or_one(times[0]);
    for (std::size_t c = 0; c < copies.size(); ++c) {
      const double t = median_or_one(times[c]);
      log_sum[c] += base > 0.0 && t > 0.0 ? std::log(t / base) : 0.0;
    }
  }
  std::vector<double> relative;
  for (const double l : log_sum) relative.push_back(std::exp(l / static_cast<double>(std::size(kSizes))));
  return relative;
}

/// WACO_CSR_SERIAL_COPY, read once: -1 when unset or empty.
int env_copy() {
  static const int copy = [] {
    const char* v = std::getenv("WACO_CSR_SERIAL_COPY");
    if (v == nullptr || *v == '\0') return -1;
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || n < 0 || n >= kSerialLoopCopies)
      throw Error(std::string("WACO_CSR_SERIAL_COPY must be a copy of the serial loop, 0 to ") +
                      std::to_string(kSerialLoopCopies - 1) + " (got '" + v + "')",
                  "unset it to use the copy measured fastest on this machine");
    return static_cast<int>(n);
  }();
  return copy;
}

/// This process's copies of the serial loop per value type (-1: not known yet), and the lock of
/// their probe and of the file's read-modify-write (not Bounds::mutex: a bound's probe runs the
/// serial loop, which asks for its copy).
struct Copies {
  std::array<std::atomic<int>, 2> known{-1, -1};
  std::mutex mutex;
};

Copies& copies() {
  static Copies c;
  return c;
}

/// Entry `name` of the machine fact at `path` (of `format`, for this machine) when it reads whole
/// and `usable` takes it; else `probe()`, stored there beside the other entries (not kept when the
/// file is unwritable: not an error). A damaged entry is measured again and replaced.
template <class P, class Usable, class Probe>
P stored_or_probed_fact(const std::string& path, int format, const std::string& name, Usable usable, Probe probe) {
  const nlohmann::json key = cache_probe_key();
  nlohmann::json entries = nlohmann::json::object();
  if (std::optional<nlohmann::json> stored = load_machine_fact(path, format, key); stored && stored->is_object()) {
    entries = std::move(*stored);
    if (entries.contains(name)) {
      try {
        P p = P::from_json(entries.at(name));
        if (usable(p)) return p;
      } catch (const std::exception&) {
      }
    }
  }
  P p = probe();
  entries[name] = p.to_json();
  store_machine_fact(path, format, key, entries);
  return p;
}

/// The copy stored for this machine, or a new probe (stored). Called under Copies::mutex.
int stored_or_probed_copy(Dtype dtype) {
  return stored_or_probed_fact<SerialLoopProbe>(
             serial_loop_path(), kLoopStoreFormat, std::string(dtype_name(dtype)),
             [dtype](const SerialLoopProbe& p) { return p.dtype == dtype; },
             [dtype] { return run_serial_loop_probe(dtype); })
      .copy;
}

/// This process's bounds: an atomic a (threads, dtype) below kCachedThreads (0: not known yet),
/// a map beyond; `mutex` orders the probes and the file's read-modify-write.
struct Bounds {
  std::array<std::array<std::atomic<std::int64_t>, 2>, kCachedThreads> fast{};
  std::map<std::pair<int, int>, std::int64_t> slow;
  std::mutex mutex;
};

Bounds& bounds() {
  static Bounds b;
  return b;
}

/// The bound stored for this machine with the serial loop's copy that runs, or a new probe
/// (stored). Called under Bounds::mutex.
std::int64_t stored_or_probed(int threads, Dtype dtype) {
  return stored_or_probed_fact<SerialBoundProbe>(
             serial_bound_path(), kStoreFormat, entry_name(threads, dtype),
             [threads, dtype](const SerialBoundProbe& p) {
               return p.threads == threads && p.dtype == dtype &&
                      p.copy == csr_spmv_serial_copy(dtype) && !serial_probe_disturbed(p.ratios);
             },
             [threads, dtype] {
               SerialBoundProbe p = run_serial_bound_probe(threads, dtype);
               for (int k = 0; k < kSerialProbeRetakes && serial_probe_disturbed(p.ratios); ++k) {
                 SerialBoundProbe again = run_serial_bound_probe(threads, dtype);
                 if (again.ratios.back().second < p.ratios.back().second) p = std::move(again);
               }
               return p;
             })
      .serial_nnz;
}

}  // namespace

nlohmann::json SerialBoundProbe::to_json() const {
  nlohmann::json r = nlohmann::json::array();
  for (const auto& [nnz, ratio] : ratios) r.push_back({nnz, ratio});
  return {{"threads", threads},
          {"dtype", std::string(dtype_name(dtype))},
          {"ratios", r},
          {"serial_nnz", serial_nnz},
          {"copy", copy},
          {"seconds", seconds}};
}

SerialBoundProbe SerialBoundProbe::from_json(const nlohmann::json& j) {
  const std::string what = "the stored serial bound is malformed";
  return read_json_object(what, [&] {
    if (!j.is_object()) throw Error(what);
    SerialBoundProbe p;
    p.threads = static_cast<int>(json_int_field(j, "threads", 2, 1 << 20, what));
    const std::optional<Dtype> d = parse_dtype(j.at("dtype").get<std::string>());
    if (!d) throw Error(what + ": unknown dtype");
    p.dtype = *d;
    for (const auto& e : j.at("ratios")) {
      const std::optional<std::int64_t> nnz = json_integer(e.at(0), 1, INT64_MAX);
      if (!nnz || !e.at(1).is_number()) throw Error(what + ": a ratio is not [nnz, ratio]");
      p.ratios.emplace_back(*nnz, e.at(1).get<double>());
    }
    p.serial_nnz = json_int_field(j, "serial_nnz", kSerialProbeMinNnz / 2, kSerialProbeMaxNnz, what);
    p.copy = static_cast<int>(json_int_field(j, "copy", 0, kSerialLoopCopies - 1, what));
    p.seconds = j.value("seconds", 0.0);
    return p;
  });
}

bool serial_probe_disturbed(const std::vector<std::pair<std::int64_t, double>>& ratios) {
  return !ratios.empty() && ratios.back().second >= kSerialProbeDisturbed;
}

std::int64_t serial_bound_from_ratios(const std::vector<std::pair<std::int64_t, double>>& ratios) {
  WACO_ASSERT(!ratios.empty(), "serial_bound_from_ratios needs at least one size");
  // The last size at which the serial loop was at least as fast.
  std::size_t last = ratios.size();
  for (std::size_t k = ratios.size(); k-- > 0;)
    if (ratios[k].second >= 1.0) {
      last = k;
      break;
    }
  if (last == ratios.size()) return std::max<std::int64_t>(1, ratios.front().first / 2);
  if (last + 1 == ratios.size()) return ratios.back().first;
  const auto [sa, ra] = ratios[last];
  const auto [sb, rb] = ratios[last + 1];
  const double f = (ra - 1.0) / (ra - rb);  // ra >= 1 > rb
  const double s = std::exp(std::log(static_cast<double>(sa)) +
                            f * (std::log(static_cast<double>(sb)) - std::log(static_cast<double>(sa))));
  return std::clamp<std::int64_t>(std::llround(s), sa, sb);
}

SerialBoundProbe run_serial_bound_probe(int threads, Dtype dtype, int rounds) {
  WACO_ASSERT(threads >= 2 && rounds >= 1, "the serial bound's probe needs 2 threads or more");
  const double t0 = now_seconds();
  SerialBoundProbe p;
  p.threads = threads;
  p.dtype = dtype;
  p.copy = csr_spmv_serial_copy(dtype);  // the copy the probe times (measured first if not known)
  p.ratios = dtype == Dtype::F32 ? probe_ratios<float>(threads, rounds) : probe_ratios<double>(threads, rounds);
  p.serial_nnz = serial_bound_from_ratios(p.ratios);
  p.seconds = now_seconds() - t0;
  return p;
}

nlohmann::json SerialLoopProbe::to_json() const {
  return {{"dtype", std::string(dtype_name(dtype))}, {"relative", relative}, {"copy", copy}, {"seconds", seconds}};
}

SerialLoopProbe SerialLoopProbe::from_json(const nlohmann::json& j) {
  const std::string what = "the stored serial loop copy is malformed";
  return read_json_object(what, [&] {
    if (!j.is_object()) throw Error(what);
    SerialLoopProbe p;
    const std::optional<Dtype> d = parse_dtype(j.at("dtype").get<std::string>());
    if (!d) throw Error(what + ": unknown dtype");
    p.dtype = *d;
    for (const auto& r : j.at("relative")) {
      if (!r.is_number() || !(r.get<double>() > 0.0)) throw Error(what + ": a time ratio is not positive");
      p.relative.push_back(r.get<double>());
    }
    if (p.relative.size() != static_cast<std::size_t>(kSerialLoopCopies))
      throw Error(what + ": not one ratio a copy");
    p.copy = static_cast<int>(json_int_field(j, "copy", 0, kSerialLoopCopies - 1, what));
    p.seconds = j.value("seconds", 0.0);
    return p;
  });
}

int serial_loop_copy_from(const std::vector<double>& relative) {
  std::size_t best = 0;
  for (std::size_t c = 1; c < relative.size(); ++c)
    if (relative[c] < relative[best]) best = c;
  return best > 0 && relative[best] < (1.0 - kSerialLoopMargin) * relative[0] ? static_cast<int>(best) : 0;
}

SerialLoopProbe run_serial_loop_probe(Dtype dtype, int rounds) {
  WACO_ASSERT(rounds >= 1, "the serial loop's probe needs a round");
  const double t0 = now_seconds();
  SerialLoopProbe p;
  p.dtype = dtype;
  p.relative = dtype == Dtype::F32 ? probe_copies<float>(rounds) : probe_copies<double>(rounds);
  p.copy = serial_loop_copy_from(p.relative);
  p.seconds = now_seconds() - t0;
  return p;
}

std::string serial_loop_path() { return user_cache_dir() + "/csr-serial-loop.json"; }

int csr_spmv_serial_copy(Dtype dtype) {
  if (const int env = env_copy(); env >= 0) return env;
  Copies& c = copies();
  auto& slot = c.known[dtype == Dtype::F32 ? 0 : 1];
  if (const int known = slot.load(std::memory_order_acquire); known >= 0) return known;
  const std::lock_guard<std::mutex> lock(c.mutex);
  if (const int known = slot.load(std::memory_order_relaxed); known >= 0) return known;
  const int copy = stored_or_probed_copy(dtype);
  slot.store(copy, std::memory_order_release);
  return copy;
}

std::string serial_bound_path() { return user_cache_dir() + "/csr-serial-bound.json"; }

std::int64_t csr_spmv_serial_nnz(int threads, Dtype dtype) {
  WACO_ASSERT(threads >= 2, "the serial bound is for two threads or more");
  if (const std::int64_t env = env_bound(); env >= 0) return env;
  Bounds& b = bounds();
  const int t = dtype == Dtype::F32 ? 0 : 1;
  if (threads < kCachedThreads) {
    const std::int64_t known = b.fast[static_cast<std::size_t>(threads)][static_cast<std::size_t>(t)].load(
        std::memory_order_acquire);
    if (known > 0) return known;
  }
  const std::lock_guard<std::mutex> lock(b.mutex);
  if (threads < kCachedThreads) {
    auto& slot = b.fast[static_cast<std::size_t>(threads)][static_cast<std::size_t>(t)];
    if (const std::int64_t known = slot.load(std::memory_order_relaxed); known > 0) return known;
    const std::int64_t bound = stored_or_probed(threads, dtype);
    slot.store(bound, std::memory_order_release);
    return bound;
  }
  const auto it = b.slow.find({threads, t});
  if (it != b.slow.end()) return it->second;
  return b.slow[{threads, t}] = stored_or_probed(threads, dtype);
}

bool csr_spmv_serial(std::int64_t nnz, int threads, Dtype dtype) {
  if (threads <= 1) return true;
  if (const std::int64_t env = env_bound(); env >= 0) return nnz <= env;
  if (nnz <= kSerialProbeMinNnz / 2) return true;
  if (nnz > kSerialProbeMaxNnz) return false;
  return nnz <= csr_spmv_serial_nnz(threads, dtype);
}

template <class V>
bool csr_spmv_serial_for(const CsrView<V>& A, const V* x, V* y, int threads) {
  // The serial loop's copy, chosen here (a probe when this machine has none stored) and not in
  // the first call of the serial loop, which may be timed: every prepare and binding asks here.
  (void)csr_spmv_serial_copy(dtype_of<V>());
  const std::int64_t nnz = A.rowptr[A.rows];
  if (threads <= 1 || env_bound() >= 0 || nnz <= kSerialProbeMinNnz / 2 || nnz > kSerialProbeMaxNnz)
    return csr_spmv_serial(nnz, threads, dtype_of<V>());
  // Measured on A (baseline_loops.hpp says why): after two calls of each, kClearRounds rounds;
  // when all agree by at least kClearMargin which loop is faster, that one, else (a near tie)
  // the machine's bound, so that a near tie is decided alike wherever it is timed: decided to 9
  // rounds and the median, ca-HepTh's f64 tie left the csr schedule running at 0.69-0.94x the
  // csr baseline's speed in an ablation's final runs (each had decided on its own).
  // A clear answer that contradicts the machine's bound stands only when it holds again after
  // the loop it found slow has run for a while (kRewarm seconds or kRewarmCalls calls), twice.
  // Why: a process's first parallel regions can run while its new OpenMP thread waits for the
  // main thread's core (wake-affine placement; the main thread spins at the region's barrier
  // until a scheduler tick): on a 112k-nonzero f64 matrix (blocks30k; AMD EPYC Zen 5 VM) such
  // regions took 30-60x the serial loop's time, and 21 of 40 fresh `bench` processes decided
  // serial where the parallel loop runs 2.9x faster (39 against 112 us).
  constexpr int kClearRounds = 3;
  constexpr double kClearMargin = 1.1;
  constexpr double kRewarm = 0.02;
  constexpr int kRewarmCalls = 1000;
  constexpr int kRetimes = 2;
  const auto serial = [&] { detail::csr_spmv_serial_rows(A, x, y); };
  const auto parallel = [&] { detail::csr_spmv_parallel_rows(A, x, y, threads); };
  // +1: the serial loop clearly faster, -1: the parallel one, 0: a near tie.
  const auto clear = [&] {
    for (int w = 0; w < 2; ++w) {
      serial();
      parallel();
    }
    double lo = 0.0, hi = 0.0;
    for (int r = 0; r < kClearRounds; ++r) {
      const double q = round_ratio(serial, parallel, r);
      lo = r == 0 ? q : std::min(lo, q);
      hi = r == 0 ? q : std::max(hi, q);
    }
    if (lo > kClearMargin) return 1;
    if (hi > 0.0 && hi < 1.0 / kClearMargin) return -1;
    return 0;
  };
  const bool bound = csr_spmv_serial(nnz, threads, dtype_of<V>());
  place_openmp_team(threads);
  const int first = clear();
  if (first == 0) return bound;
  if ((first > 0) == bound) return bound;
  for (int k = 0; k < kRetimes; ++k) {
    const double t0 = now_seconds();
    for (int c = 0; c < kRewarmCalls && now_seconds() - t0 < kRewarm; ++c) first > 0 ? parallel() : serial();
    if (clear() != first) return bound;
  }
  return first > 0;
}

template bool csr_spmv_serial_for<float>(const CsrView<float>&, const float*, float*, int);
template bool csr_spmv_serial_for<double>(const CsrView<double>&, const double*, double*, int);

}  // namespace waco::kernels
