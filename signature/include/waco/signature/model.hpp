// The data-movement model of tiled SpMM and SDDMM and the tile selection it drives (SC'20
// Section IV, eq. 1-9).
//
// Naming. The model follows the paper's letters, which differ from the kernel expressions of
// kernel.hpp: the sparse matrix is M x N (rows i, columns j) and K is the dense width (J of our
// SpMM, K of our SDDMM). A tiled loop nest has tiles T_i (row panel height), T_j (column panel
// width) and T_k (dense tile width); the innermost tiling loop is the *streaming* dimension and the
// array it does not index stays *stationary* in cache:
//   streaming M (i): the dense input tile T_j x T_k is stationary;
//   streaming N (j): the output tile T_i x T_k is stationary -- "J-Stream" (Alg. 6), the kernel
//                    implemented in jstream.hpp;
//   streaming K (k): the sparse tile T_i x T_j is stationary (T_k is a fixed vector width).
//
// Volumes and footprints are counted in 4-byte words: a 32-bit index is one word, a value is
// v = dtype_size / 4 words (ModelOptions::dtype: 1 in single precision, 2 in double), so that a
// double-precision tile fits the same cache budget as a single-precision one half its size. From
// the paper's Section IV.C for SpMM (single precision: v = 1, its 4-byte elements), with
// ceil(K / T_k) dense tiles so that tiles need not divide K; a nonzero is a value and an index:
//   M-stream  v N K + (1+v) nnz ceil(K/T_k) + 2 v nars(T_j) K
//             capacity v T_j T_k + (1+v) T_j rho + v T_k <= C
//   N-stream  v M K + (1+v) nnz ceil(K/T_k) + v nacs(T_i) K
//             capacity v T_i T_k + (1+v) T_i rho + v T_k <= C
//   K-stream  (1+v) nnz + (2 nars(T_j) + nacs(T_i)) v K
//             capacity (1+v) rho T_i T_j + v w (T_i + T_j) <= C
// (eq. 1/5 is the N-stream capacity; rho = nnz / (M N); w = kVectorWidth). The SDDMM analogue
// (P = S .* (A B^T), A: M x K, B: N x K) reads A and B, and per dense tile reads a nonzero's row
// index and reads/writes its partial dot product (1 + 2v), then reads S's value and writes P once:
//   M-stream  v N K + v nars(T_j) K + (1+2v) nnz ceil(K/T_k) + 2 v nnz
//             capacity v T_j T_k + (1+2v) T_j rho + v T_k
//   N-stream  v M K + v nacs(T_i) K + (1+2v) nnz ceil(K/T_k) + 2 v nnz
//             capacity v T_i T_k + (1+2v) T_i rho + v T_k
//   K-stream  (1+2v) nnz + (nars(T_j) + nacs(T_i)) v K
//             capacity (1+2v) rho T_i T_j + v w (T_i + T_j)
//
// Capacity. Each thread runs its own row panel, so C is what one thread may use of one cache
// level. Default (kDefaultCacheLevel, "llc-core"): the per-core share of the last-level cache,
// size / CPUs sharing it (from sysfs; else CPUID or a measured probe, kernels::cache_sizes()), of
// which kDefaultCacheFraction is given to the modeled footprint: the streamed operand passes
// through the same cache, and with LRU-like replacement a
// reused tile survives a stream only when it leaves room for it. The stationary tile may thus
// outgrow the private L2: calibrated with `tile --exhaustive --calibrate` on matrices with fewer
// than 100k nonzeros (none of the report set), the model's choice at 0.5-52.5 MiB per thread was
// re-timed against the fastest tiles; L2 x 0.5 (the previous default) gave a geometric-mean
// time ratio of 1.14 on 6 matrices of ../shared/data (SpMM/SDDMM, K = 128/256, 24 runs) and 1.05
// on 3 generated large sparse ones (12 runs), 8 MiB 1.08 / 1.15, 26-52.5 MiB 1.08 / 1.08 (the
// panel cap below bounds the tile first on the small matrices). Other levels: "l1", "l2" (private,
// whole), "l3" (divided among the threads), or an explicit byte count.
//
// Candidates (justification in model.cpp): tile sizes along a sparse dimension are powers of two
// (for which nacs/nars are exact) plus ceil(dim / (threads * panels_per_thread)), the largest
// panel that still gives every thread panels_per_thread panels (the paper used 1 panel per
// thread: Table II, 145 = ceil(4039 / 28)); tiles along a sparse dimension are capped at that
// value so that dynamic scheduling can balance the panels. Dense tiles T_k are ceil(K / n) rounded
// up to kVectorWidth for n = 1, 2, ...: for a given number of dense tiles the smallest equal
// width has the same volume and the smallest footprint; widths below min_dense_tile
// (kDefaultMinDenseTile, measured) are left out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/kernels/kernel.hpp"
#include "waco/kernels/values.hpp"
#include "waco/signature/signature.hpp"

namespace waco::signature {

/// Floats per SIMD-friendly dense tile step (one 64-byte cache line).
inline constexpr int kVectorWidth = 16;
/// Share of the cache level the modeled footprint may use (see the header comment).
inline constexpr double kDefaultCacheFraction = 0.5;
/// The cache level of the capacity constraint (see the header comment; cache_capacity()).
inline constexpr const char* kDefaultCacheLevel = "llc-core";
/// Panels each thread should get at least (caps the sparse tile sizes). Measured: J-Stream timed
/// side by side over its tile grid (T_i powers of two from 16 and the caps of 4, 8, 16 and 32
/// panels per thread; T_k 128 and 256; 21 interleaved rounds, 2 threads) on the 14 matrices of
/// ../shared/data with at least 100k nonzeros. The model's choice against the fastest point of
/// the grid, geometric mean (SpMM J = 256, 128; SDDMM K = 256, 128):
///   4 panels per thread: 1.126, 1.113, 1.088, 1.054;     8: 1.075, 1.067, 1.057, 1.046;
///   16: 1.060, 1.054, 1.065, 1.039;                      32: 1.053, 1.105, 1.085, 1.068.
/// The volume keeps falling with T_i, so the model takes the cap, and a few large panels of
/// unequal work leave a thread idle at the end (Groebner_id2003_aug, SpMM J = 256: 1.44x at 4
/// panels per thread, 1.09x at 16). The tile-window pass of heuristics/ keeps 4 for its centers.
inline constexpr int kDefaultPanelsPerThread = 16;
/// Smallest dense tile width considered (min(K, this)); 16 gives the paper's unrestricted set.
/// Calibrated: in 36 exhaustive sweeps on ../shared/data (SpMM/SDDMM, K = 128/256, 1 thread),
/// widths below 128 were 1.1-5x slower than the best width in all but 2 cases; each extra dense
/// tile repeats the per-nonzero work, which the volume model prices at 2-3 elements only (the
/// paper saw the same effect and attributed it to prefetching, Section VI.A).
inline constexpr int kDefaultMinDenseTile = 128;

enum class StreamDim { M, N, K };

/// "M", "N", "K".
const char* stream_name(StreamDim s);
/// What stays in cache: "input dense tile", "output tile", "sparse tile" (SpMM wording).
const char* stationary_name(StreamDim s, kernels::KernelKind kind);

/// Which cache bounds the tiles, and its capacity for one thread.
struct CacheCapacity {
  std::string level;          ///< "L1d", "L2", "L3", "L3/core" or "override"
  std::int64_t bytes = 0;     ///< size of that cache (or the override)
  bool shared = false;        ///< divided among threads or cores
  int divisor = 1;            ///< per_thread_bytes = bytes / divisor
  std::int64_t per_thread_bytes = 0;
  double fraction = 1.0;      ///< share of per_thread_bytes the footprint may use
  std::string rule;           ///< how the capacity was derived, in words
  /// Where the size came from: "sysfs", "cpuid", "probe" (kernels::CacheSizes), or "given"
  /// (override_bytes).
  std::string source;
  /// Capacity C of eq. 1/5 in 4-byte words (the unit of TileCandidate's volume and footprint).
  std::int64_t elements() const {
    return static_cast<std::int64_t>(static_cast<double>(per_thread_bytes) * fraction) / 4;
  }
  /// {"level", "rule", "source", "bytes", "shared", "divisor", "per_thread_bytes", "fraction",
  ///  "capacity_elements"}.
  nlohmann::json to_json() const;
};

/// The capacity of `level` (case-insensitive) from kernels::cache_sizes() (sysfs, else cpuid,
/// else the measured probe; see kernels/context.hpp): "l1", "l2" (private), "l3"/"llc" (divided
/// among `threads`), or "llc-core" (the last-level cache divided among the CPUs sharing it, from
/// sysfs shared_cpu_list; among the available CPUs when sysfs does not say), of which `fraction`
/// (0, 1] is usable. override_bytes > 0 replaces it all (level "override", source "given": the
/// usable bytes per thread, as given). `source` and `rule` name where the size came from. Throws
/// Error for an unknown level, a fraction outside (0, 1], or when no source gave a size for the
/// level (hint: pass --cache-bytes).
CacheCapacity cache_capacity(const std::string& level, int threads, std::int64_t override_bytes,
                             double fraction = kDefaultCacheFraction);

/// One modeled tile configuration.
struct TileCandidate {
  StreamDim stream = StreamDim::N;
  std::int64_t T_i = 1;  ///< row panel height (1 when streaming M)
  std::int64_t T_j = 1;  ///< column panel width (1 when streaming N)
  std::int64_t T_k = 1;  ///< dense tile width
  double volume = 0.0;     ///< modeled 4-byte words moved (see the header comment)
  double footprint = 0.0;  ///< modeled 4-byte words in cache per thread
  bool fits = false;       ///< footprint <= capacity
  bool exact = true;       ///< nacs/nars at these tiles are exact (powers of two)
};

struct ModelOptions {
  kernels::KernelKind kind = kernels::KernelKind::SpMM;
  std::int64_t dense = 128;  ///< K of the paper (our SpMM J or SDDMM K)
  int threads = 1;
  int panels_per_thread = kDefaultPanelsPerThread;  ///< caps sparse tiles (>= 1)
  int min_dense_tile = kDefaultMinDenseTile;        ///< smallest T_k candidate (>= 1)
  CacheCapacity cache;
  /// The problem's value type: a value is dtype_size / 4 words of the volumes and footprints
  /// (indices stay 32-bit, one word), so double-precision tiles fit the same cache budget.
  kernels::Dtype dtype = kernels::Dtype::F32;
};

/// Words (4 bytes) a value of `dtype` takes in the model's volumes and footprints: 1 or 2.
double value_words(kernels::Dtype dtype);

/// Modeled volume and footprint of one configuration (fits/exact filled in too).
TileCandidate evaluate(const LocalitySignature& sig, const ModelOptions& opt, StreamDim stream,
                       std::int64_t T_i, std::int64_t T_j, std::int64_t T_k);

/// The candidate tile sizes along a sparse dimension of extent `dim` split into at least `parts`
/// panels (threads * panels_per_thread; see the header comment).
std::vector<std::int64_t> sparse_tile_candidates(std::int64_t dim, int parts);
/// The candidate dense tile widths for dense width K, none below min(K, min_width).
std::vector<std::int64_t> dense_tile_candidates(std::int64_t K,
                                                std::int64_t min_width = kVectorWidth);

struct TileSelection {
  ModelOptions options;
  std::vector<TileCandidate> candidates;  ///< every evaluated configuration, all streams
  TileCandidate best;                     ///< min volume over all streams among those that fit
  TileCandidate best_jstream;             ///< min volume among N-stream configurations that fit
  double seconds = 0.0;                   ///< time of the selection (signature excluded)
};

/// Evaluates all candidates and picks the minimum modeled volume subject to the capacity
/// constraint (ties: larger T_k, then larger tiles). When nothing fits (a tiny cache) the
/// smallest-footprint candidate of each stream is chosen and marked fits = false.
/// Precondition: opt.dense >= 1, opt.threads >= 1, opt.cache.elements() >= 1.
TileSelection select_tiles(const LocalitySignature& sig, const ModelOptions& opt);

}  // namespace waco::signature
