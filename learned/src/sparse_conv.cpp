// Sparse convolution layers over kernel maps: a fused custom autograd function (OpenMP loops over
// the maps) and a composition of LibTorch ops (index_select / mm / index_add_) whose backward
// comes from autograd. See sparse_conv.hpp; WACO paper section 4.1.1 for the network.
#include "sparse_conv.hpp"

#include <omp.h>

#include <algorithm>

#include "waco/kernels/error.hpp"

namespace waco::learned {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::Tensor int_view(const std::vector<std::int32_t>& v, std::int64_t rows, std::int64_t cols,
                       const std::shared_ptr<const KernelMap>& keep) {
  if (v.empty()) return torch::zeros({rows, cols}, torch::kInt32);
  WACO_ASSERT(static_cast<std::int64_t>(v.size()) == rows * cols, "kernel map size mismatch");
  return torch::from_blob(const_cast<std::int32_t*>(v.data()), {rows, cols}, [keep](void*) {},
                          torch::TensorOptions().dtype(torch::kInt32));
}

// out[o] = sum_j in[table(o, j')] * W[j] with j' = mirror ? K-1-j : j: output-stationary, no
// atomics. CO > 0 fixes the output width at compile time so the accumulator lives in registers
// (CO = 0: any width up to kMaxChannels). Forward: table = neighbors, no mirror. Input gradient:
// in = grad_out, W = W^T, table = reverse (or neighbors mirrored for stride 1).
constexpr int kMaxChannels = 1024;

template <typename T, int CO>
void gather_mm_impl(const T* in, const T* w, const std::int32_t* table, bool mirror,
                    std::int64_t n_out, int K, int cin, int cout_rt, T* out, int threads) {
  const int cout = CO > 0 ? CO : cout_rt;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1024)
  for (std::int64_t o = 0; o < n_out; ++o) {
    T acc[CO > 0 ? CO : kMaxChannels];
    for (int co = 0; co < cout; ++co) acc[co] = T(0);
    const std::int32_t* nb = table + o * K;
    for (int j = 0; j < K; ++j) {
      const std::int32_t i = nb[mirror ? K - 1 - j : j];
      if (i < 0) continue;
      const T* x = in + static_cast<std::int64_t>(i) * cin;
      const T* wj = w + static_cast<std::int64_t>(j) * cin * cout;
      for (int c = 0; c < cin; ++c) {
        // No test for xv == 0 here although half of a ReLU output is zero: the branch is
        // unpredictable and cost more than the two vector FMAs it would skip.
        const T xv = x[c];
        const T* wr = wj + static_cast<std::int64_t>(c) * cout;
#pragma omp simd
        for (int co = 0; co < cout; ++co) acc[co] += xv * wr[co];
      }
    }
    T* dst = out + o * cout;
    for (int co = 0; co < cout; ++co) dst[co] = acc[co];
  }
}

template <typename T>
void gather_mm(const T* in, const T* w, const std::int32_t* table, bool mirror,
               std::int64_t n_out, int K, int cin, int cout, T* out, int threads) {
  WACO_ASSERT(cout <= kMaxChannels, "sparse_conv: more than 1024 channels");
  switch (cout) {
    case 8: return gather_mm_impl<T, 8>(in, w, table, mirror, n_out, K, cin, cout, out, threads);
    case 16: return gather_mm_impl<T, 16>(in, w, table, mirror, n_out, K, cin, cout, out, threads);
    case 32: return gather_mm_impl<T, 32>(in, w, table, mirror, n_out, K, cin, cout, out, threads);
    case 64: return gather_mm_impl<T, 64>(in, w, table, mirror, n_out, K, cin, cout, out, threads);
    default: return gather_mm_impl<T, 0>(in, w, table, mirror, n_out, K, cin, cout, out, threads);
  }
}

// gw[j] = sum_o in[nbr(o, j)]^T gout[o], with one accumulator per thread, summed in thread order
// (deterministic for a fixed thread count and static schedule).
template <typename T, int CO>
void backward_weight_impl(const T* in, const T* gout, const std::int32_t* nbr, std::int64_t n_out,
                          int K, int cin, int cout_rt, T* gw, int threads) {
  const int cout = CO > 0 ? CO : cout_rt;
  const std::int64_t wsize = static_cast<std::int64_t>(K) * cin * cout;
  std::vector<T> partial(static_cast<std::size_t>(threads) * wsize, T(0));
#pragma omp parallel num_threads(threads)
  {
    T* acc = partial.data() + omp_get_thread_num() * wsize;
#pragma omp for schedule(static)
    for (std::int64_t o = 0; o < n_out; ++o) {
      const T* go = gout + o * cout;
      const std::int32_t* nb = nbr + o * K;
      for (int j = 0; j < K; ++j) {
        const std::int32_t i = nb[j];
        if (i < 0) continue;
        const T* x = in + static_cast<std::int64_t>(i) * cin;
        T* aj = acc + static_cast<std::int64_t>(j) * cin * cout;
        for (int c = 0; c < cin; ++c) {
          const T xv = x[c];
          T* ar = aj + static_cast<std::int64_t>(c) * cout;
#pragma omp simd
          for (int co = 0; co < cout; ++co) ar[co] += xv * go[co];
        }
      }
    }
  }
  for (int t = 0; t < threads; ++t) {
    const T* p = partial.data() + t * wsize;
    for (std::int64_t e = 0; e < wsize; ++e) gw[e] += p[e];
  }
}

template <typename T>
void fused_backward_weight(const T* in, const T* gout, const std::int32_t* nbr, std::int64_t n_out,
                           int K, int cin, int cout, T* gw, int threads) {
  switch (cout) {
    case 8: return backward_weight_impl<T, 8>(in, gout, nbr, n_out, K, cin, cout, gw, threads);
    case 16: return backward_weight_impl<T, 16>(in, gout, nbr, n_out, K, cin, cout, gw, threads);
    case 32: return backward_weight_impl<T, 32>(in, gout, nbr, n_out, K, cin, cout, gw, threads);
    default: return backward_weight_impl<T, 0>(in, gout, nbr, n_out, K, cin, cout, gw, threads);
  }
}

class FusedSparseConv : public torch::autograd::Function<FusedSparseConv> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor in, torch::Tensor weight,
                               torch::Tensor nbr, torch::Tensor rev, bool symmetric) {
    in = in.contiguous();
    weight = weight.contiguous();
    ctx->save_for_backward({in, weight, nbr, rev});
    ctx->saved_data["symmetric"] = symmetric;
    const std::int64_t n_out = nbr.size(0);
    const int K = static_cast<int>(weight.size(0));
    const int cin = static_cast<int>(weight.size(1));
    const int cout = static_cast<int>(weight.size(2));
    auto out = torch::empty({n_out, cout}, in.options());
    const int threads = at::get_num_threads();
    if (in.scalar_type() == torch::kDouble) {
      gather_mm(in.data_ptr<double>(), weight.data_ptr<double>(), nbr.data_ptr<std::int32_t>(),
                false, n_out, K, cin, cout, out.data_ptr<double>(), threads);
    } else {
      gather_mm(in.data_ptr<float>(), weight.data_ptr<float>(), nbr.data_ptr<std::int32_t>(),
                false, n_out, K, cin, cout, out.data_ptr<float>(), threads);
    }
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& in = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& nbr = saved[2];
    const torch::Tensor& rev = saved[3];
    const bool symmetric = ctx->saved_data["symmetric"].toBool();
    const torch::Tensor gout = grad_outputs[0].contiguous();
    const std::int64_t n_in = in.size(0);
    const std::int64_t n_out = nbr.size(0);
    const int K = static_cast<int>(weight.size(0));
    const int cin = static_cast<int>(weight.size(1));
    const int cout = static_cast<int>(weight.size(2));
    const int threads = at::get_num_threads();
    torch::Tensor gin, gw;
    const bool dbl = in.scalar_type() == torch::kDouble;
    if (ctx->needs_input_grad(0)) {
      gin = torch::empty_like(in);
      const torch::Tensor wt = weight.transpose(1, 2).contiguous();  // [K][cout][cin]
      if (dbl)
        gather_mm(gout.data_ptr<double>(), wt.data_ptr<double>(), rev.data_ptr<std::int32_t>(),
                  symmetric, n_in, K, cout, cin, gin.data_ptr<double>(), threads);
      else
        gather_mm(gout.data_ptr<float>(), wt.data_ptr<float>(), rev.data_ptr<std::int32_t>(),
                  symmetric, n_in, K, cout, cin, gin.data_ptr<float>(), threads);
    }
    if (ctx->needs_input_grad(1)) {
      gw = torch::zeros_like(weight);
      if (dbl)
        fused_backward_weight(in.data_ptr<double>(), gout.data_ptr<double>(),
                              nbr.data_ptr<std::int32_t>(), n_out, K, cin, cout,
                              gw.data_ptr<double>(), threads);
      else
        fused_backward_weight(in.data_ptr<float>(), gout.data_ptr<float>(),
                              nbr.data_ptr<std::int32_t>(), n_out, K, cin, cout,
                              gw.data_ptr<float>(), threads);
    }
    return {gin, gw, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

TorchKernelMap::TorchKernelMap(std::shared_ptr<const KernelMap> map) : map_(std::move(map)) {
  neighbors_ = int_view(map_->neighbors, map_->out_sites, map_->offsets, map_);
  reverse_ = map_->stride == 1 ? neighbors_
                               : int_view(map_->reverse, map_->in_sites, map_->offsets, map_);
}

const std::vector<std::pair<torch::Tensor, torch::Tensor>>& TorchKernelMap::pairs() const {
  std::call_once(pairs_once_, [this] {
    const int K = map_->offsets;
    std::vector<std::int64_t> count(K, 0);
    for (std::int64_t o = 0; o < map_->out_sites; ++o)
      for (int j = 0; j < K; ++j) count[j] += map_->neighbors[o * K + j] >= 0;
    std::vector<std::pair<torch::Tensor, torch::Tensor>> p(K);
    std::vector<std::int64_t*> ip(K), op(K);
    for (int j = 0; j < K; ++j) {
      p[j].first = torch::empty({count[j]}, torch::kInt64);
      p[j].second = torch::empty({count[j]}, torch::kInt64);
      ip[j] = p[j].first.data_ptr<std::int64_t>();
      op[j] = p[j].second.data_ptr<std::int64_t>();
    }
    for (std::int64_t o = 0; o < map_->out_sites; ++o)
      for (int j = 0; j < K; ++j) {
        const std::int32_t i = map_->neighbors[o * K + j];
        if (i < 0) continue;
        *ip[j]++ = i;
        *op[j]++ = o;
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
                          const TorchKernelMap& map, ConvImpl impl) {
  const KernelMap& km = map.map();
  WACO_ASSERT(in.dim() == 2 && in.size(0) == km.in_sites,
              "sparse_conv: input has " + std::to_string(in.size(0)) + " sites, map expects " +
                  std::to_string(km.in_sites));
  WACO_ASSERT(weight.dim() == 3 && weight.size(0) == km.offsets && weight.size(1) == in.size(1),
              "sparse_conv: weight shape does not match the map and input");
  WACO_ASSERT(in.scalar_type() == weight.scalar_type() &&
                  (in.scalar_type() == torch::kFloat || in.scalar_type() == torch::kDouble),
              "sparse_conv: input and weight must both be float or both double");
  if (impl == ConvImpl::Fused)
    return FusedSparseConv::apply(in, weight, map.neighbors(), map.reverse(), km.stride == 1);

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

}  // namespace waco::learned
