// J-Stream tiled SpMM and SDDMM (SC'20 Alg. 6 and its SDDMM counterpart) and the "jstream"
// entry of this library's implementation registry. See jstream.hpp for the loop structure.
//
// The innermost loop runs over one dense tile of width w; the common widths (multiples of the
// 16-float vector width up to 256) are compile-time constants so the compiler unrolls and keeps
// the SDDMM dot product in registers; other widths take a generic loop. Values are float or
// double (V, the problem's type).
#include "waco/signature/jstream.hpp"

#include <algorithm>
#include <string>

#include <omp.h>

#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::signature {

using kernels::Error;
using kernels::KernelKind;

PanelStructure build_panels(const kernels::CooMatrix& a, std::int64_t T_i, kernels::Dtype dtype) {
  WACO_ASSERT(T_i >= 1, "panel height must be >= 1");
  const std::int64_t nnz = a.nnz();
  const index_t rows = a.rows;
  const index_t cols = a.cols;
  const std::int64_t panels = rows == 0 ? 0 : (rows + T_i - 1) / T_i;

  // Counting sort by column: order[] lists the entries column by column, rows ascending.
  std::vector<index_t> col_start(static_cast<std::size_t>(cols) + 1, 0);
  for (std::int64_t e = 0; e < nnz; ++e) ++col_start[a.col[e] + 1];
  for (index_t c = 0; c < cols; ++c) col_start[c + 1] += col_start[c];
  std::vector<index_t> order(static_cast<std::size_t>(nnz));
  {
    std::vector<index_t> cursor(col_start.begin(), col_start.end() - 1);
    for (std::int64_t e = 0; e < nnz; ++e) order[cursor[a.col[e]]++] = static_cast<index_t>(e);
  }
  // Stable bucket by panel: within a panel, entries stay sorted by (column, row).
  std::vector<index_t> panel_start(static_cast<std::size_t>(panels) + 1, 0);
  for (std::int64_t e = 0; e < nnz; ++e) ++panel_start[a.row[e] / T_i + 1];
  for (std::int64_t p = 0; p < panels; ++p) panel_start[p + 1] += panel_start[p];

  PanelStructure s;
  s.T_i = T_i;
  s.entry_row.resize(static_cast<std::size_t>(nnz));
  s.entry_val.assign(dtype, static_cast<std::size_t>(nnz));
  s.entry_pos.resize(static_cast<std::size_t>(nnz));
  std::vector<index_t> entry_col(static_cast<std::size_t>(nnz));
  {
    std::vector<index_t> cursor(panel_start.begin(), panel_start.end() - 1);
    for (std::int64_t o = 0; o < nnz; ++o) {
      const index_t e = order[o];
      const index_t slot = cursor[a.row[e] / T_i]++;
      s.entry_row[slot] = a.row[e];
      s.entry_val.set(slot, a.val[e]);
      s.entry_pos[slot] = e;
      entry_col[slot] = a.col[e];
    }
  }
  // Active columns of each panel.
  s.panel_cols.assign(static_cast<std::size_t>(panels) + 1, 0);
  for (std::int64_t p = 0; p < panels; ++p) {
    s.panel_cols[p] = static_cast<index_t>(s.col_id.size());
    index_t prev = -1;
    for (index_t slot = panel_start[p]; slot < panel_start[p + 1]; ++slot) {
      if (entry_col[slot] != prev) {
        prev = entry_col[slot];
        s.col_id.push_back(prev);
        s.col_ptr.push_back(slot);
      }
    }
  }
  s.panel_cols[panels] = static_cast<index_t>(s.col_id.size());
  s.col_ptr.push_back(static_cast<index_t>(nnz));
  return s;
}

JStream::JStream(JStreamTiles tiles) {
  if (tiles.T_i < 1 || tiles.T_k < 1)
    throw Error("jstream tile sizes must be >= 1 (got T_i=" + std::to_string(tiles.T_i) +
                    ", T_k=" + std::to_string(tiles.T_k) + ")",
                "give positive tile sizes, or none to let the model choose");
  requested_ = tiles;
}

void JStream::set_cache(std::string level, std::int64_t bytes, double fraction) {
  cache_level_ = std::move(level);
  cache_bytes_ = bytes;
  cache_fraction_ = fraction;
}

void JStream::set_dense_tile(std::int64_t T_k) {
  WACO_ASSERT(problem_.A != nullptr, "jstream: set_dense_tile() before prepare()");
  if (T_k < 1)
    throw Error("jstream dense tile must be >= 1 (got T_k=" + std::to_string(T_k) + ")",
                "give a positive dense tile width");
  tiles_.T_k = std::min<std::int64_t>(T_k, problem_.dense_size());
}

void JStream::prepare(const kernels::Problem& p, int threads) {
  if (p.kind != KernelKind::SpMM && p.kind != KernelKind::SDDMM)
    throw Error("jstream computes spmm and sddmm, not " + std::string(kernels::kernel_name(p.kind)),
                "use another --impl for this kernel");
  p.validate();
  if (threads < 1) throw Error("thread count must be >= 1", "pass --threads N with N >= 1");
  problem_ = p;
  threads_ = threads;
  const std::int64_t K = p.dense_size();
  const kernels::CooMatrix& a = *p.A;

  selection_.reset();
  tuning_seconds_ = 0.0;
  if (requested_) {
    tiles_ = *requested_;
  } else {
    const double t0 = kernels::now_seconds();
    const LocalitySignature sig = compute_signature(a, threads);
    ModelOptions opt;
    opt.kind = p.kind;
    opt.dense = K;
    opt.threads = threads;
    opt.cache = cache_capacity(cache_level_, threads, cache_bytes_, cache_fraction_);
    opt.panels_per_thread = kDefaultPanelsPerThread;
    opt.min_dense_tile = kDefaultMinDenseTile;
    opt.dtype = p.dtype();
    selection_ = select_tiles(sig, opt);
    tiles_ = {selection_->best_jstream.T_i, selection_->best_jstream.T_k};
    tuning_seconds_ = kernels::now_seconds() - t0;
  }
  tiles_.T_i = std::max<std::int64_t>(1, std::min<std::int64_t>(tiles_.T_i, a.rows));
  tiles_.T_k = std::max<std::int64_t>(1, std::min<std::int64_t>(tiles_.T_k, K));

  const double t1 = kernels::now_seconds();
  panels_ = build_panels(a, tiles_.T_i, p.dtype());
  acc_.assign(p.dtype(), p.kind == KernelKind::SDDMM ? static_cast<std::size_t>(a.nnz()) : 0);
  out_.assign(p.dtype(), static_cast<std::size_t>(p.output_size()));
  conversion_seconds_ = kernels::now_seconds() - t1;
}

void JStream::run() {
  WACO_ASSERT(problem_.A != nullptr, "jstream: run() before prepare()");
  kernels::with_value_type(problem_.dtype(), [this](auto v) {
    using V = decltype(v);
    if (problem_.kind == KernelKind::SpMM)
      run_spmm<V>();
    else
      run_sddmm<V>();
  });
}

namespace {

// One dense tile of one panel, SpMM: C[i, jj:jj+w] += A[i,k] * B[k, jj:jj+w] for the panel's
// entries, column by column (the B segment of an active column is read once per tile).
template <class V, int W>
void spmm_tile(const PanelStructure& s, std::int64_t p, const V* B, V* C, std::int64_t J,
               std::int64_t jj, std::int64_t w_dyn) {
  const std::int64_t w = W > 0 ? W : w_dyn;
  const V* val = s.entry_val.data<V>();
  for (index_t q = s.panel_cols[p]; q < s.panel_cols[p + 1]; ++q) {
    const V* b = B + static_cast<std::int64_t>(s.col_id[q]) * J + jj;
    for (index_t e = s.col_ptr[q]; e < s.col_ptr[q + 1]; ++e) {
      const V v = val[e];
      V* c = C + static_cast<std::int64_t>(s.entry_row[e]) * J + jj;
#pragma omp simd
      for (std::int64_t t = 0; t < w; ++t) c[t] += v * b[t];
    }
  }
}

// SDDMM: acc[e] += B[i, kk:kk+w] . C[kk:kk+w, j] for the panel's entries, column by column.
template <class V, int W>
void sddmm_tile(const PanelStructure& s, std::int64_t p, const V* B, const V* C, V* acc,
                std::int64_t K, std::int64_t kk, std::int64_t w_dyn) {
  const std::int64_t w = W > 0 ? W : w_dyn;
  for (index_t q = s.panel_cols[p]; q < s.panel_cols[p + 1]; ++q) {
    const V* c = C + static_cast<std::int64_t>(s.col_id[q]) * K + kk;
    for (index_t e = s.col_ptr[q]; e < s.col_ptr[q + 1]; ++e) {
      const V* b = B + static_cast<std::int64_t>(s.entry_row[e]) * K + kk;
      V dot = 0;
#pragma omp simd reduction(+ : dot)
      for (std::int64_t t = 0; t < w; ++t) dot += b[t] * c[t];
      acc[e] += dot;
    }
  }
}

}  // namespace

template <class V>
void JStream::run_spmm() {
  const PanelStructure& s = panels_;
  const std::int64_t J = problem_.dense_size();
  const std::int64_t rows = problem_.A->rows;
  const std::int64_t Tk = tiles_.T_k;
  const V* B = problem_.B->data.data<V>();
  V* C = out_.data<V>();
  const std::int64_t panels = s.panels();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
  for (std::int64_t p = 0; p < panels; ++p) {
    const std::int64_t r0 = p * s.T_i;
    const std::int64_t r1 = std::min(rows, r0 + s.T_i);
    std::fill(C + r0 * J, C + r1 * J, V(0));
    for (std::int64_t jj = 0; jj < J; jj += Tk) {
      const std::int64_t w = std::min(Tk, J - jj);
      switch (w) {
        case 16: spmm_tile<V, 16>(s, p, B, C, J, jj, w); break;
        case 32: spmm_tile<V, 32>(s, p, B, C, J, jj, w); break;
        case 64: spmm_tile<V, 64>(s, p, B, C, J, jj, w); break;
        case 128: spmm_tile<V, 128>(s, p, B, C, J, jj, w); break;
        case 256: spmm_tile<V, 256>(s, p, B, C, J, jj, w); break;
        default: spmm_tile<V, 0>(s, p, B, C, J, jj, w); break;
      }
    }
  }
}

template <class V>
void JStream::run_sddmm() {
  const PanelStructure& s = panels_;
  const std::int64_t K = problem_.dense_size();
  const std::int64_t Tk = tiles_.T_k;
  const V* B = problem_.B->data.data<V>();
  const V* C = problem_.C->data.data<V>();
  const V* val = s.entry_val.data<V>();
  V* acc = acc_.data<V>();
  V* out = out_.data<V>();
  const std::int64_t panels = s.panels();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
  for (std::int64_t p = 0; p < panels; ++p) {
    const index_t e0 = s.col_ptr[s.panel_cols[p]];
    const index_t e1 = s.col_ptr[s.panel_cols[p + 1]];
    std::fill(acc + e0, acc + e1, V(0));
    for (std::int64_t kk = 0; kk < K; kk += Tk) {
      const std::int64_t w = std::min(Tk, K - kk);
      switch (w) {
        case 16: sddmm_tile<V, 16>(s, p, B, C, acc, K, kk, w); break;
        case 32: sddmm_tile<V, 32>(s, p, B, C, acc, K, kk, w); break;
        case 64: sddmm_tile<V, 64>(s, p, B, C, acc, K, kk, w); break;
        case 128: sddmm_tile<V, 128>(s, p, B, C, acc, K, kk, w); break;
        case 256: sddmm_tile<V, 256>(s, p, B, C, acc, K, kk, w); break;
        default: sddmm_tile<V, 0>(s, p, B, C, acc, K, kk, w); break;
      }
    }
    for (index_t e = e0; e < e1; ++e) out[s.entry_pos[e]] = acc[e] * val[e];
  }
}

const std::vector<kernels::ImplementationInfo>& implementations() {
  static const std::vector<kernels::ImplementationInfo> list = {
      {"jstream",
       "J-Stream tiled kernel (SC'20 Alg. 6); tiles from the locality-signature model",
       {KernelKind::SpMM, KernelKind::SDDMM},
       [] { return std::unique_ptr<kernels::Implementation>(new JStream()); }},
  };
  return list;
}

}  // namespace waco::signature
