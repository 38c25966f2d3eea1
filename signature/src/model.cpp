// The SC'20 data-movement model (Section IV.C, eq. 1-9) and its tile selection; the formulas and
// the choice of candidates are documented in model.hpp.
//
// Why these candidates: nacs/nars are exact at powers of two (one bit-width histogram gives them
// all), so the model's argmin over powers of two is an argmin over exact volumes. The one extra
// sparse candidate, ceil(dim / parts), is the largest panel at which every thread still gets
// panels_per_thread panels; the paper selected that with one panel per thread (Table II:
// facebook_combined 145, poisson3Da 483 on 28 threads), because larger panels leave threads idle,
// which the volume model cannot see. Its nacs is the paper's estimate from p[T] (eq. 11).
#include "waco/signature/model.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>

#include "waco/kernels/context.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::signature {

using kernels::KernelKind;

const char* stream_name(StreamDim s) {
  switch (s) {
    case StreamDim::M: return "M";
    case StreamDim::N: return "N";
    case StreamDim::K: return "K";
  }
  return "?";
}

const char* stationary_name(StreamDim s, KernelKind kind) {
  const bool sddmm = kind == KernelKind::SDDMM;
  switch (s) {
    case StreamDim::M: return sddmm ? "B tile (N x K operand)" : "input dense tile";
    case StreamDim::N: return sddmm ? "A tile (M x K operand)" : "output tile";
    case StreamDim::K: return "sparse tile";
  }
  return "?";
}

nlohmann::json CacheCapacity::to_json() const {
  return {{"level", level},
          {"rule", rule},
          {"source", source},
          {"bytes", bytes},
          {"shared", shared},
          {"divisor", divisor},
          {"per_thread_bytes", per_thread_bytes},
          {"fraction", fraction},
          {"capacity_elements", elements()}};
}

CacheCapacity cache_capacity(const std::string& level, int threads, std::int64_t override_bytes,
                             double fraction) {
  WACO_ASSERT(threads >= 1, "threads must be >= 1");
  if (!(fraction > 0.0 && fraction <= 1.0))
    throw kernels::Error("cache fraction must be in (0, 1], got " + std::to_string(fraction),
                         "pass a share of the cache such as 0.5");
  CacheCapacity c;
  if (override_bytes > 0) {
    c.level = "override";
    c.bytes = override_bytes;
    c.shared = false;
    c.per_thread_bytes = override_bytes;
    c.source = "given";
    c.rule = "given: " + std::to_string(override_bytes) + " bytes per thread";
    return c;
  }
  std::string l = level;
  for (char& ch : l) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const kernels::CacheSizes& cs = kernels::cache_sizes();
  std::string divided_among;
  bool last_level = false;
  if (l == "l1" || l == "l1d") {
    c.level = "L1d";
    c.bytes = cs.l1d;
    c.source = cs.l1d_source;
  } else if (l == "l2") {
    c.level = "L2";
    c.bytes = cs.l2;
    c.source = cs.l2_source;
  } else if (l == "l3" || l == "llc") {
    c.level = "L3";
    c.bytes = cs.llc();
    c.source = cs.source;
    c.shared = true;
    c.divisor = threads;
    divided_among = " / " + std::to_string(threads) + " threads";
    last_level = true;
  } else if (l == "llc-core") {
    c.level = "L3/core";
    c.bytes = cs.llc();
    c.source = cs.source;
    c.shared = true;
    c.divisor =
        std::max(1, cs.llc_sharing_cpus > 0 ? cs.llc_sharing_cpus : kernels::available_cpus());
    divided_among = " / " + std::to_string(c.divisor) +
                    (cs.llc_sharing_source == "sysfs" ? " CPUs sharing it"
                                                      : " available CPUs (sysfs gave no list)");
    last_level = true;
  } else {
    throw kernels::Error("unknown cache level '" + level + "'", "use l1, l2, l3 or llc-core");
  }
  if (c.bytes <= 0)
    throw kernels::Error("the size of cache level " + c.level + " is unknown (" +
                             (last_level ? "sysfs, cpuid and the cache probe gave none"
                                         : "sysfs and cpuid gave none") +
                             (cs.note.empty() ? "" : ": " + cs.note) + ")",
                         "pass --cache-bytes B");
  c.per_thread_bytes = c.bytes / c.divisor;
  c.fraction = fraction;
  std::ostringstream rule;
  // The source, and for any but sysfs what the chain passed over on the way.
  const std::string from =
      "(" + c.source + (c.source != "sysfs" && !cs.note.empty() ? ": " + cs.note : "") + ")";
  if (l == "llc-core") rule << "per-core share of the last-level cache " << from << ": L3 ";
  else rule << c.level << " " << from << " ";
  rule << c.bytes / 1024 << " KiB" << divided_among << " x " << fraction;
  c.rule = rule.str();
  return c;
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

double value_words(kernels::Dtype dtype) {
  return static_cast<double>(kernels::dtype_size(dtype)) / 4.0;
}

TileCandidate evaluate(const LocalitySignature& sig, const ModelOptions& opt, StreamDim stream,
                       std::int64_t T_i, std::int64_t T_j, std::int64_t T_k) {
  WACO_ASSERT(T_i >= 1 && T_j >= 1 && T_k >= 1 && opt.dense >= 1, "tile sizes must be >= 1");
  const double M = sig.rows;
  const double N = sig.cols;
  const double nnz = static_cast<double>(sig.nnz);
  const double K = static_cast<double>(opt.dense);
  const double rho = (sig.rows > 0 && sig.cols > 0) ? nnz / (M * N) : 0.0;
  const double tiles_k = static_cast<double>(ceil_div(opt.dense, T_k));
  const double w = kVectorWidth;
  const bool sddmm = opt.kind == KernelKind::SDDMM;
  // Words of a value (1 in single precision, where every term below is the paper's, bit for bit:
  // multiplying by 1.0 is exact and each sum keeps its order).
  const double v = value_words(opt.dtype);

  TileCandidate c;
  c.stream = stream;
  c.T_i = T_i;
  c.T_j = T_j;
  c.T_k = T_k;
  const auto nacs = [&] { return sig.col_segments.aligned_active_estimate(T_i); };
  const auto nars = [&] { return sig.row_segments.aligned_active_estimate(T_j); };
  const double ti = static_cast<double>(T_i), tj = static_cast<double>(T_j);
  const double tk = static_cast<double>(T_k);
  switch (stream) {
    case StreamDim::M:
      c.exact = is_pow2(T_j);
      if (!sddmm) {
        c.volume = v * N * K + (1 + v) * nnz * tiles_k + 2 * v * nars() * K;
        c.footprint = v * tj * tk + (1 + v) * tj * rho + v * tk;
      } else {
        c.volume = v * N * K + v * nars() * K + (1 + 2 * v) * nnz * tiles_k + 2 * v * nnz;
        c.footprint = v * tj * tk + (1 + 2 * v) * tj * rho + v * tk;
      }
      break;
    case StreamDim::N:
      c.exact = is_pow2(T_i);
      if (!sddmm) {
        c.volume = v * M * K + (1 + v) * nnz * tiles_k + v * nacs() * K;
        c.footprint = v * ti * tk + (1 + v) * ti * rho + v * tk;
      } else {
        c.volume = v * M * K + v * nacs() * K + (1 + 2 * v) * nnz * tiles_k + 2 * v * nnz;
        c.footprint = v * ti * tk + (1 + 2 * v) * ti * rho + v * tk;
      }
      break;
    case StreamDim::K:
      c.exact = is_pow2(T_i) && is_pow2(T_j);
      if (!sddmm) {
        c.volume = (1 + v) * nnz + (2 * nars() + nacs()) * v * K;
        c.footprint = (1 + v) * rho * ti * tj + v * w * (ti + tj);
      } else {
        c.volume = (1 + 2 * v) * nnz + (nars() + nacs()) * v * K;
        c.footprint = (1 + 2 * v) * rho * ti * tj + v * w * (ti + tj);
      }
      break;
  }
  c.fits = c.footprint <= static_cast<double>(opt.cache.elements());
  return c;
}

std::vector<std::int64_t> sparse_tile_candidates(std::int64_t dim, int parts) {
  WACO_ASSERT(parts >= 1, "parts must be >= 1");
  const std::int64_t cap = std::max<std::int64_t>(1, ceil_div(std::max<std::int64_t>(dim, 1),
                                                              parts));
  std::vector<std::int64_t> out;
  for (std::int64_t t = 1; t <= cap; t *= 2) out.push_back(t);
  if (out.back() != cap) out.push_back(cap);
  return out;
}

std::vector<std::int64_t> dense_tile_candidates(std::int64_t K, std::int64_t min_width) {
  WACO_ASSERT(K >= 1 && min_width >= 1, "dense width and minimum width must be >= 1");
  const std::int64_t floor_width = std::min(K, std::max<std::int64_t>(min_width, 1));
  std::vector<std::int64_t> out;
  for (std::int64_t n = 1;; ++n) {
    const std::int64_t width = ceil_div(K, n);
    const std::int64_t t = std::min(K, ceil_div(width, kVectorWidth) * kVectorWidth);
    if (t < floor_width) break;
    if (out.empty() || out.back() != t) out.push_back(t);
    if (width <= kVectorWidth) break;
  }
  return out;
}

TileSelection select_tiles(const LocalitySignature& sig, const ModelOptions& opt) {
  WACO_ASSERT(opt.dense >= 1 && opt.threads >= 1 && opt.panels_per_thread >= 1 &&
                  opt.min_dense_tile >= 1,
              "dense width, threads and panels per thread must be >= 1");
  WACO_ASSERT(opt.cache.elements() >= 1, "cache capacity must be positive");
  const double t0 = kernels::now_seconds();
  TileSelection sel;
  sel.options = opt;
  const int parts = opt.threads * opt.panels_per_thread;
  const std::vector<std::int64_t> ti = sparse_tile_candidates(sig.rows, parts);
  const std::vector<std::int64_t> tj = sparse_tile_candidates(sig.cols, parts);
  const std::vector<std::int64_t> tk = dense_tile_candidates(opt.dense, opt.min_dense_tile);
  for (std::int64_t j : tj)
    for (std::int64_t k : tk) sel.candidates.push_back(evaluate(sig, opt, StreamDim::M, 1, j, k));
  for (std::int64_t i : ti)
    for (std::int64_t k : tk) sel.candidates.push_back(evaluate(sig, opt, StreamDim::N, i, 1, k));
  const std::int64_t w = std::min<std::int64_t>(kVectorWidth, opt.dense);
  for (std::int64_t i : ti)
    for (std::int64_t j : tj) sel.candidates.push_back(evaluate(sig, opt, StreamDim::K, i, j, w));

  // Lexicographic: fitting first, then volume, then footprint (smaller leaves cache headroom).
  const auto better = [](const TileCandidate& a, const TileCandidate& b) {
    return std::make_tuple(!a.fits, a.fits ? a.volume : a.footprint, a.footprint) <
           std::make_tuple(!b.fits, b.fits ? b.volume : b.footprint, b.footprint);
  };
  bool have_best = false, have_j = false;
  for (const TileCandidate& c : sel.candidates) {
    if (!have_best || better(c, sel.best)) {
      sel.best = c;
      have_best = true;
    }
    if (c.stream == StreamDim::N && (!have_j || better(c, sel.best_jstream))) {
      sel.best_jstream = c;
      have_j = true;
    }
  }
  WACO_ASSERT(have_best && have_j, "no tile candidates");
  sel.seconds = kernels::now_seconds() - t0;
  return sel;
}

}  // namespace waco::signature
