// Sparse convolution layers over per-offset pair lists: a fused, blocked, register-blocked pass
// and a composition of LibTorch ops (index_select / mm / index_add_) whose backward comes from
// autograd. See sparse_conv.hpp; WACO paper section 4.1.1 for the network.
#include "sparse_conv.hpp"

#include <omp.h>
#include <sys/mman.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define WACO_CONV_AVX2 1
#endif

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <type_traits>

#include "waco/kernels/error.hpp"

namespace waco::learned {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int kMaxChannels = 1024;  // output channels a layer may have

torch::Tensor int_view(const std::vector<std::int32_t>& v,
                       const std::shared_ptr<const KernelMap>& keep) {
  if (v.empty()) return torch::zeros({0}, torch::kInt32);
  return torch::from_blob(const_cast<std::int32_t*>(v.data()),
                          {static_cast<std::int64_t>(v.size())}, [keep](void*) {},
                          torch::TensorOptions().dtype(torch::kInt32));
}

// ---------------------------------------------------------------------------------------------
// Activation buffers. A layer's output and gradients are hundreds of MB for a million nonzeros;
// fresh allocations of that size are fresh pages, and faulting and zeroing them in the kernel
// cost more than the convolution itself on a VM. Buffers of at least 1 MiB therefore come from
// a process-wide pool that keeps freed blocks (up to kMaxCached bytes: a training step's
// activations for about two million nonzeros) for the next layer or pass; a block is reused for
// a request of at least half its size. release_buffers() empties the pool.

class BufferPool {
 public:
  static BufferPool& instance() {
    static BufferPool* pool = new BufferPool();  // never destroyed: tensors may outlive statics
    return *pool;
  }

  torch::Tensor take(const std::vector<std::int64_t>& sizes, const torch::TensorOptions& opts) {
    std::int64_t numel = 1;
    for (auto v : sizes) numel *= v;
    const auto bytes = static_cast<std::size_t>(numel) * opts.dtype().itemsize();
    if (bytes < kMinPooled) return torch::empty(sizes, opts);
    void* ptr = nullptr;
    std::size_t size = 0;
    std::multimap<std::size_t, void*> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first <= bytes + bytes / 4 + kHugePage) {
        size = it->first;
        ptr = it->second;
        cached_ -= size;
        free_.erase(it);
      } else {
        // A miss: cached blocks totalling at least the new block's size go back to the system
        // first (the smallest first: the large ones are the expensive ones to fault in again),
        // so the pool does not add its cache to the peak.
        const std::size_t need = (bytes + kHugePage - 1) / kHugePage * kHugePage;
        std::size_t freed = 0;
        while (freed < need && !free_.empty()) {
          auto small = free_.begin();
          freed += small->first;
          cached_ -= small->first;
          evicted.insert(*small);
          free_.erase(small);
        }
      }
    }
    for (auto& [sz, p] : evicted) std::free(p);
    if (!ptr) {
      // 2 MiB aligned and advised as huge pages: 512 times fewer page faults, and rows
      // scattered over hundreds of MB stop missing the TLB on every access.
      size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
      ptr = std::aligned_alloc(kHugePage, size);
      if (!ptr) throw std::bad_alloc();
      madvise(ptr, size, MADV_HUGEPAGE);
    }
    return torch::from_blob(ptr, sizes, [size](void* p) { instance().give(p, size); }, opts);
  }

  /// Frees every cached block.
  void release() {
    std::multimap<std::size_t, void*> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all.swap(free_);
      cached_ = 0;
    }
    for (auto& [size, p] : all) std::free(p);
  }

 private:
  static constexpr std::size_t kMinPooled = std::size_t{1} << 20;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static constexpr std::size_t kMaxCached = std::size_t{2} << 30;

  void give(void* p, std::size_t size) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + size <= kMaxCached) {
        free_.emplace(size, p);
        cached_ += size;
        return;
      }
    }
    std::free(p);
  }

  std::mutex mu_;
  std::multimap<std::size_t, void*> free_;
  std::size_t cached_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Row kernels. Every one handles the pairs [b, e) of one offset: dst[di[p]] += src[si[p]] * W
// with W [cin][cout] row-major. Within one offset di is injective, so threads that split [b, e)
// never write the same row.

template <typename T>
void rows_generic(const T* src, const std::int32_t* si, T* dst, const std::int32_t* di,
                  std::int64_t b, std::int64_t e, const T* w, int cin, int cout) {
  for (std::int64_t p = b; p < e; ++p) {
    const T* x = src + static_cast<std::int64_t>(si[p]) * cin;
    T* y = dst + static_cast<std::int64_t>(di[p]) * cout;
    for (int c = 0; c < cin; ++c) {
      const T xv = x[c];
      const T* wr = w + static_cast<std::int64_t>(c) * cout;
#pragma omp simd
      for (int co = 0; co < cout; ++co) y[co] += xv * wr[co];
    }
  }
}

// gw[c][co] += sum_p src[si[p]][c] * g[di[p]][co].
template <typename T>
void outer_generic(const T* src, const std::int32_t* si, const T* g, const std::int32_t* di,
                   std::int64_t b, std::int64_t e, T* gw, int cin, int cout) {
  for (std::int64_t p = b; p < e; ++p) {
    const T* x = src + static_cast<std::int64_t>(si[p]) * cin;
    const T* gr = g + static_cast<std::int64_t>(di[p]) * cout;
    for (int c = 0; c < cin; ++c) {
      const T xv = x[c];
      T* ar = gw + static_cast<std::int64_t>(c) * cout;
#pragma omp simd
      for (int co = 0; co < cout; ++co) ar[co] += xv * gr[co];
    }
  }
}

// Prefetches a row of `bytes` bytes (every cache line of it), for reading or for writing.
template <bool Write>
inline void prefetch_row(const void* row, int bytes) {
  const char* p = static_cast<const char*>(row);
  for (int b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, Write ? 1 : 0, 3);
}

#ifdef WACO_CONV_AVX2
constexpr int kPrefetch = 8;  // pairs ahead whose rows are prefetched

// cout = 8 NV floats: the products of two pairs accumulate in 2 NV registers; each weight
// vector loaded feeds both.
template <int NV>
void rows_avx2(const float* src, const std::int32_t* si, float* dst, const std::int32_t* di,
               std::int64_t b, std::int64_t e, const float* w, int cin) {
  constexpr int C = 8 * NV;
  std::int64_t p = b;
  for (; p + 1 < e; p += 2) {
    if (p + kPrefetch + 1 < e) {
      prefetch_row<false>(src + static_cast<std::int64_t>(si[p + kPrefetch]) * cin, cin * 4);
      prefetch_row<false>(src + static_cast<std::int64_t>(si[p + kPrefetch + 1]) * cin, cin * 4);
      prefetch_row<true>(dst + static_cast<std::int64_t>(di[p + kPrefetch]) * C, C * 4);
      prefetch_row<true>(dst + static_cast<std::int64_t>(di[p + kPrefetch + 1]) * C, C * 4);
    }
    const float* xa = src + static_cast<std::int64_t>(si[p]) * cin;
    const float* xb = src + static_cast<std::int64_t>(si[p + 1]) * cin;
    __m256 a[NV], bv[NV];
    for (int k = 0; k < NV; ++k) a[k] = bv[k] = _mm256_setzero_ps();
    for (int c = 0; c < cin; ++c) {
      const __m256 va = _mm256_broadcast_ss(xa + c);
      const __m256 vb = _mm256_broadcast_ss(xb + c);
      const float* wr = w + c * C;
      for (int k = 0; k < NV; ++k) {
        const __m256 wk = _mm256_loadu_ps(wr + 8 * k);
        a[k] = _mm256_fmadd_ps(va, wk, a[k]);
        bv[k] = _mm256_fmadd_ps(vb, wk, bv[k]);
      }
    }
    float* ya = dst + static_cast<std::int64_t>(di[p]) * C;
    float* yb = dst + static_cast<std::int64_t>(di[p + 1]) * C;
    for (int k = 0; k < NV; ++k) {
      _mm256_storeu_ps(ya + 8 * k, _mm256_add_ps(_mm256_loadu_ps(ya + 8 * k), a[k]));
      _mm256_storeu_ps(yb + 8 * k, _mm256_add_ps(_mm256_loadu_ps(yb + 8 * k), bv[k]));
    }
  }
  if (p < e) rows_generic<float>(src, si, dst, di, p, e, w, cin, C);
}

// Weight gradient for cout = 8 NV floats: blocks of up to 64 pairs; for every two input
// channels the 2 NV accumulator vectors stay in registers while the block's gradient rows
// (re-read from L1 after the first channel pair) stream by.
template <int NV>
void outer_avx2(const float* src, const std::int32_t* si, const float* g, const std::int32_t* di,
                std::int64_t b, std::int64_t e, float* gw, int cin) {
  constexpr int C = 8 * NV;
  constexpr int kBlock = 64;
  const float* xr[kBlock];
  const float* gr[kBlock];
  for (std::int64_t p0 = b; p0 < e; p0 += kBlock) {
    const int n = static_cast<int>(std::min<std::int64_t>(kBlock, e - p0));
    for (int q = 0; q < n; ++q) {
      xr[q] = src + static_cast<std::int64_t>(si[p0 + q]) * cin;
      gr[q] = g + static_cast<std::int64_t>(di[p0 + q]) * C;
      prefetch_row<false>(xr[q], cin * 4);
      prefetch_row<false>(gr[q], C * 4);
    }
    int c = 0;
    for (; c + 1 < cin; c += 2) {
      __m256 a0[NV], a1[NV];
      for (int k = 0; k < NV; ++k) {
        a0[k] = _mm256_loadu_ps(gw + c * C + 8 * k);
        a1[k] = _mm256_loadu_ps(gw + (c + 1) * C + 8 * k);
      }
      for (int q = 0; q < n; ++q) {
        const __m256 x0 = _mm256_broadcast_ss(xr[q] + c);
        const __m256 x1 = _mm256_broadcast_ss(xr[q] + c + 1);
        for (int k = 0; k < NV; ++k) {
          const __m256 gk = _mm256_loadu_ps(gr[q] + 8 * k);
          a0[k] = _mm256_fmadd_ps(x0, gk, a0[k]);
          a1[k] = _mm256_fmadd_ps(x1, gk, a1[k]);
        }
      }
      for (int k = 0; k < NV; ++k) {
        _mm256_storeu_ps(gw + c * C + 8 * k, a0[k]);
        _mm256_storeu_ps(gw + (c + 1) * C + 8 * k, a1[k]);
      }
    }
    for (; c < cin; ++c) {
      __m256 a0[NV];
      for (int k = 0; k < NV; ++k) a0[k] = _mm256_loadu_ps(gw + c * C + 8 * k);
      for (int q = 0; q < n; ++q) {
        const __m256 x0 = _mm256_broadcast_ss(xr[q] + c);
        for (int k = 0; k < NV; ++k)
          a0[k] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(gr[q] + 8 * k), a0[k]);
      }
      for (int k = 0; k < NV; ++k) _mm256_storeu_ps(gw + c * C + 8 * k, a0[k]);
    }
  }
}
#endif

template <typename T>
void rows(const T* src, const std::int32_t* si, T* dst, const std::int32_t* di, std::int64_t b,
          std::int64_t e, const T* w, int cin, int cout) {
#ifdef WACO_CONV_AVX2
  if constexpr (std::is_same_v<T, float>) {
    switch (cout) {
      case 8: return rows_avx2<1>(src, si, dst, di, b, e, w, cin);
      case 16: return rows_avx2<2>(src, si, dst, di, b, e, w, cin);
      case 32: return rows_avx2<4>(src, si, dst, di, b, e, w, cin);
      default: break;
    }
  }
#endif
  rows_generic<T>(src, si, dst, di, b, e, w, cin, cout);
}

template <typename T>
void outer(const T* src, const std::int32_t* si, const T* g, const std::int32_t* di,
           std::int64_t b, std::int64_t e, T* gw, int cin, int cout) {
#ifdef WACO_CONV_AVX2
  if constexpr (std::is_same_v<T, float>) {
    switch (cout) {
      case 8: return outer_avx2<1>(src, si, g, di, b, e, gw, cin);
      case 16: return outer_avx2<2>(src, si, g, di, b, e, gw, cin);
      case 32: return outer_avx2<4>(src, si, g, di, b, e, gw, cin);
      default: break;
    }
  }
#endif
  outer_generic<T>(src, si, g, di, b, e, gw, cin, cout);
}

// Passes are blocked by destination rows: a block of kBlockRows rows (16 KiB to 128 KiB of
// features) receives the contributions of every offset before the next block starts, so its
// rows stay in L2 instead of being streamed through once per offset, and the source rows of one
// block and offset are a narrow, increasing range. Within one offset both index columns
// increase (kernel_map.hpp), so a block's pairs of offset j are one range, found by binary
// search. Threads own whole blocks: no two write the same row, no barriers between offsets.
constexpr std::int64_t kBlockRows = 1024;

// The pairs [b, e) of offset j whose key (di) lies in [lo, hi).
inline std::pair<std::int64_t, std::int64_t> block_range(const std::int32_t* key,
                                                         const std::int64_t* start, int j,
                                                         std::int64_t lo, std::int64_t hi) {
  const std::int32_t* b = std::lower_bound(key + start[j], key + start[j + 1], lo);
  const std::int32_t* e = std::lower_bound(b, key + start[j + 1], hi);
  return {b - key, e - key};
}

// dst[di[p]] += src[si[p]] * W[j] for every offset j (W [K][cin][cout]); dst [n_dst][cout] is
// accumulated into. Precondition: di increasing within every offset.
template <typename T>
void scatter_pass(const T* src, const std::int32_t* si, T* dst, const std::int32_t* di,
                  const std::int64_t* start, int K, const T* w, int cin, int cout,
                  std::int64_t n_dst, int threads) {
  const std::int64_t blocks = (n_dst + kBlockRows - 1) / kBlockRows;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 2)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t lo = blk * kBlockRows, hi = std::min(n_dst, lo + kBlockRows);
    for (int j = 0; j < K; ++j) {
      const auto [b, e] = block_range(di, start, j, lo, hi);
      if (b < e)
        rows<T>(src, si, dst, di, b, e, w + static_cast<std::int64_t>(j) * cin * cout, cin, cout);
    }
  }
}

// gw[j] = sum over the pairs of offset j of src[si]^T g[di]; blocked by g's rows (n_g of them),
// per-thread partials over a static block schedule, summed in thread order (deterministic for a
// fixed thread count).
template <typename T>
void weight_pass(const T* src, const std::int32_t* si, const T* g, const std::int32_t* di,
                 const std::int64_t* start, int K, int cin, int cout, std::int64_t n_g, T* gw,
                 int threads) {
  const std::int64_t wsize = static_cast<std::int64_t>(K) * cin * cout;
  std::vector<T> partial(static_cast<std::size_t>(threads) * wsize, T(0));
  const std::int64_t blocks = (n_g + kBlockRows - 1) / kBlockRows;
  int used = 1;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
#pragma omp single
    used = omp_get_num_threads();
    T* acc = partial.data() + t * wsize;
#pragma omp for schedule(static)
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
      const std::int64_t lo = blk * kBlockRows, hi = std::min(n_g, lo + kBlockRows);
      for (int j = 0; j < K; ++j) {
        const auto [b, e] = block_range(di, start, j, lo, hi);
        if (b < e)
          outer<T>(src, si, g, di, b, e, acc + static_cast<std::int64_t>(j) * cin * cout, cin,
                   cout);
      }
    }
  }
  for (int t = 0; t < used; ++t) {
    const T* p = partial.data() + t * wsize;
    for (std::int64_t k = 0; k < wsize; ++k) gw[k] += p[k];
  }
}

template <typename T>
void parallel_zero(T* p, std::int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t k = 0; k < n; ++k) p[k] = T(0);
}

torch::Tensor pooled_zeros(const std::vector<std::int64_t>& sizes, const torch::TensorOptions& o,
                           int threads) {
  auto t = BufferPool::instance().take(sizes, o);
  if (t.scalar_type() == torch::kDouble)
    parallel_zero(t.data_ptr<double>(), t.numel(), threads);
  else
    parallel_zero(t.data_ptr<float>(), t.numel(), threads);
  return t;
}

// In place ReLU of out [n][c] and, when mean != nullptr, its column means (double partial sums
// per thread, summed in thread order).
template <typename T>
void relu_and_mean(T* out, std::int64_t n, int c, bool relu, T* mean, int threads) {
  std::vector<double> partial(static_cast<std::size_t>(threads) * c, 0.0);
  int used = 1;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
#pragma omp single
    used = omp_get_num_threads();
    double acc[kMaxChannels] = {};
#pragma omp for schedule(static)
    for (std::int64_t o = 0; o < n; ++o) {
      T* y = out + o * c;
      if (relu)
        for (int k = 0; k < c; ++k) y[k] = y[k] > T(0) ? y[k] : T(0);
      if (mean)
        for (int k = 0; k < c; ++k) acc[k] += static_cast<double>(y[k]);
    }
    if (mean)
      for (int k = 0; k < c; ++k) partial[static_cast<std::size_t>(t) * c + k] = acc[k];
  }
  if (!mean) return;
  for (int k = 0; k < c; ++k) {
    double s = 0.0;
    for (int t = 0; t < used; ++t) s += partial[static_cast<std::size_t>(t) * c + k];
    mean[k] = n > 0 ? static_cast<T>(s / static_cast<double>(n)) : T(0);
  }
}

// g[o] = (gout[o] (or 0) + gmean / n) masked by out[o] > 0 when relu.
template <typename T>
void output_gradient(const T* gout, const T* gmean, const T* out, std::int64_t n, int c,
                     bool relu, T* g, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t o = 0; o < n; ++o) {
    T* dst = g + o * c;
    for (int k = 0; k < c; ++k) {
      T v = gout ? gout[o * c + k] : T(0);
      if (gmean) v += gmean[k] / static_cast<T>(n);
      dst[k] = (!relu || out[o * c + k] > T(0)) ? v : T(0);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The custom autograd function of ConvImpl::Fused: convolution, optional
// ReLU and optional global average pooling (a second output) in one node, so that autograd
// neither materializes the pooling's gradient nor sums it with the next layer's.

template <typename T>
void run_forward(const torch::Tensor& in, const torch::Tensor& weight, const torch::Tensor& in_idx,
                 const torch::Tensor& out_idx, const std::int64_t* start, torch::Tensor& out,
                 int threads) {
  const int K = static_cast<int>(weight.size(0));
  const int cin = static_cast<int>(weight.size(1)), cout = static_cast<int>(weight.size(2));
  scatter_pass<T>(in.data_ptr<T>(), in_idx.data_ptr<std::int32_t>(), out.data_ptr<T>(),
                  out_idx.data_ptr<std::int32_t>(), start, K, weight.data_ptr<T>(), cin, cout,
                  out.size(0), threads);
}

template <typename T>
void run_backward(const torch::Tensor& in, const torch::Tensor& weight,
                  const torch::Tensor& in_idx, const torch::Tensor& out_idx,
                  const std::int64_t* start, const torch::Tensor& g, torch::Tensor* gin,
                  torch::Tensor* gw, int threads) {
  const int K = static_cast<int>(weight.size(0));
  const int cin = static_cast<int>(weight.size(1)), cout = static_cast<int>(weight.size(2));
  const std::int32_t* si = in_idx.data_ptr<std::int32_t>();
  const std::int32_t* di = out_idx.data_ptr<std::int32_t>();
  if (gin) {
    const torch::Tensor wt = weight.transpose(1, 2).contiguous();  // [K][cout][cin]
    scatter_pass<T>(g.data_ptr<T>(), di, gin->data_ptr<T>(), si, start, K, wt.data_ptr<T>(), cout,
                    cin, gin->size(0), threads);
  }
  if (gw)
    weight_pass<T>(in.data_ptr<T>(), si, g.data_ptr<T>(), di, start, K, cin, cout, g.size(0),
                   gw->data_ptr<T>(), threads);
}

class PairSparseConv : public torch::autograd::Function<PairSparseConv> {
 public:
  static variable_list forward(AutogradContext* ctx, torch::Tensor in, torch::Tensor weight,
                               torch::Tensor in_idx, torch::Tensor out_idx, torch::Tensor start,
                               std::int64_t out_sites, bool relu, bool pool) {
    in = in.contiguous();
    weight = weight.contiguous();
    const int threads = at::get_num_threads();
    const int cout = static_cast<int>(weight.size(2));
    auto out = pooled_zeros({out_sites, cout}, in.options(), threads);
    auto mean = pool ? torch::zeros({cout}, in.options()) : torch::Tensor();
    const std::int64_t* st = start.data_ptr<std::int64_t>();
    if (in.scalar_type() == torch::kDouble) {
      run_forward<double>(in, weight, in_idx, out_idx, st, out, threads);
      if (relu || pool)
        relu_and_mean(out.data_ptr<double>(), out_sites, cout, relu,
                      pool ? mean.data_ptr<double>() : nullptr, threads);
    } else {
      run_forward<float>(in, weight, in_idx, out_idx, st, out, threads);
      if (relu || pool)
        relu_and_mean(out.data_ptr<float>(), out_sites, cout, relu,
                      pool ? mean.data_ptr<float>() : nullptr, threads);
    }
    ctx->save_for_backward({in, weight, in_idx, out_idx, start, out});
    ctx->saved_data["relu"] = relu;
    if (!pool) return {out};
    return {out, mean};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& in = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& out = saved[5];
    const bool relu = ctx->saved_data["relu"].toBool();
    const int threads = at::get_num_threads();
    const std::int64_t n = out.size(0);
    const int cout = static_cast<int>(out.size(1));
    torch::Tensor gout = grad_outputs[0].defined() ? grad_outputs[0].contiguous() : torch::Tensor();
    torch::Tensor gmean = grad_outputs.size() > 1 && grad_outputs[1].defined()
                              ? grad_outputs[1].contiguous()
                              : torch::Tensor();
    const bool dbl = in.scalar_type() == torch::kDouble;
    auto g = BufferPool::instance().take({n, cout}, out.options());
    if (dbl)
      output_gradient(gout.defined() ? gout.data_ptr<double>() : nullptr,
                      gmean.defined() ? gmean.data_ptr<double>() : nullptr,
                      out.data_ptr<double>(), n, cout, relu, g.data_ptr<double>(), threads);
    else
      output_gradient(gout.defined() ? gout.data_ptr<float>() : nullptr,
                      gmean.defined() ? gmean.data_ptr<float>() : nullptr,
                      out.data_ptr<float>(), n, cout, relu, g.data_ptr<float>(), threads);
    gout = torch::Tensor();
    torch::Tensor gin, gw;
    if (ctx->needs_input_grad(0)) gin = pooled_zeros(in.sizes().vec(), in.options(), threads);
    if (ctx->needs_input_grad(1)) gw = torch::zeros_like(weight);
    const std::int64_t* st = saved[4].data_ptr<std::int64_t>();
    if (dbl)
      run_backward<double>(in, weight, saved[2], saved[3], st, g, gin.defined() ? &gin : nullptr,
                           gw.defined() ? &gw : nullptr, threads);
    else
      run_backward<float>(in, weight, saved[2], saved[3], st, g, gin.defined() ? &gin : nullptr,
                          gw.defined() ? &gw : nullptr, threads);
    return {gin, gw, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor()};
  }
};

void check_args(const torch::Tensor& in, const torch::Tensor& weight, const KernelMap& km) {
  WACO_ASSERT(in.dim() == 2 && in.size(0) == km.in_sites,
              "sparse_conv: input has " + std::to_string(in.size(0)) + " sites, map expects " +
                  std::to_string(km.in_sites));
  WACO_ASSERT(weight.dim() == 3 && weight.size(0) == km.offsets && weight.size(1) == in.size(1),
              "sparse_conv: weight shape does not match the map and input");
  WACO_ASSERT(in.scalar_type() == weight.scalar_type() &&
                  (in.scalar_type() == torch::kFloat || in.scalar_type() == torch::kDouble),
              "sparse_conv: input and weight must both be float or both double");
  WACO_ASSERT(weight.size(2) <= kMaxChannels, "sparse_conv: more than 1024 output channels");
}

// The autograd composition: per offset index_select -> mm -> index_add_.
torch::Tensor autograd_conv(const torch::Tensor& in, const torch::Tensor& weight,
                            const TorchKernelMap& map) {
  const KernelMap& km = map.map();
  auto out = torch::zeros({km.out_sites, weight.size(2)}, in.options());
  const auto& pairs = map.pairs();
  bool connected = false;
  for (int j = 0; j < km.offsets; ++j) {
    const auto& [ii, oo] = pairs[j];
    if (ii.numel() == 0) continue;
    out.index_add_(0, oo, in.index_select(0, ii).mm(weight[j]));
    connected = true;
  }
  // Without any pair the output must still depend on the weight (as the fused function's does)
  // so that backward through an empty pattern gives zero gradients instead of failing.
  if (!connected && (weight.requires_grad() || in.requires_grad()))
    out = out + 0.0 * (weight.sum() + in.sum());
  return out;
}

}  // namespace

void release_conv_buffers() { BufferPool::instance().release(); }

TorchKernelMap::TorchKernelMap(std::shared_ptr<const KernelMap> map) : map_(std::move(map)) {
  in_ = int_view(map_->in, map_);
  out_ = int_view(map_->out, map_);
  start_ = torch::from_blob(const_cast<std::int64_t*>(map_->offset_start.data()),
                            {static_cast<std::int64_t>(map_->offset_start.size())},
                            [keep = map_](void*) {}, torch::TensorOptions().dtype(torch::kInt64));
}

const std::vector<std::pair<torch::Tensor, torch::Tensor>>& TorchKernelMap::pairs() const {
  std::call_once(pairs_once_, [this] {
    const int K = map_->offsets;
    std::vector<std::pair<torch::Tensor, torch::Tensor>> p(K);
    for (int j = 0; j < K; ++j) {
      const std::int64_t b = map_->offset_start[j], n = map_->pairs_of(j);
      p[j].first = in_.narrow(0, b, n).to(torch::kInt64);
      p[j].second = out_.narrow(0, b, n).to(torch::kInt64);
    }
    pairs_ = std::move(p);
  });
  return pairs_;
}

std::int64_t TorchKernelMap::pair_bytes() const {
  std::int64_t b = 0;
  for (const auto& [i, o] : pairs_) b += (i.numel() + o.numel()) * 8;
  return b;
}

torch::Tensor sparse_conv(const torch::Tensor& in, const torch::Tensor& weight,
                          const TorchKernelMap& map, ConvImpl impl, bool relu) {
  const KernelMap& km = map.map();
  check_args(in, weight, km);
  if (impl == ConvImpl::Fused)
    return PairSparseConv::apply(in, weight, map.in_index(), map.out_index(), map.offset_start(),
                                 km.out_sites, relu, false)[0];
  auto out = autograd_conv(in, weight, map);
  return relu ? torch::relu(out) : out;
}

std::pair<torch::Tensor, torch::Tensor> sparse_conv_relu_pool(const torch::Tensor& in,
                                                              const torch::Tensor& weight,
                                                              const TorchKernelMap& map,
                                                              ConvImpl impl) {
  const KernelMap& km = map.map();
  check_args(in, weight, km);
  if (impl == ConvImpl::Fused) {
    auto r = PairSparseConv::apply(in, weight, map.in_index(), map.out_index(), map.offset_start(),
                                   km.out_sites, true, true);
    return {r[0], r[1]};
  }
  auto out = torch::relu(autograd_conv(in, weight, map));
  auto mean = km.out_sites > 0 ? out.mean(0) : torch::zeros({weight.size(2)}, in.options());
  return {out, mean};
}

}  // namespace waco::learned
