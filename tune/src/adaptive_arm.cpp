// An adaptive plan's arms: a kernel bound to the caller's operand, csr's or a nominee's
// (adaptive_run.hpp: sparse_problem, make_arm, Arm::run).
#include "adaptive_arm.hpp"

#include <vector>

#include "waco/codegen/compiler.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/sparse.hpp"

namespace waco::tuning {

namespace detail {

void finish_arm(Arm& a, kernels::KernelKind kind, std::int64_t nnz) {
  if (kind != kernels::KernelKind::SDDMM) return;
  const std::vector<kernels::index_t>& pos = a.bound.storage->entry_position;
  a.sddmm_in_order = a.bound.storage->stored_values() == nnz;
  for (std::size_t e = 0; a.sddmm_in_order && e < pos.size(); ++e)
    a.sddmm_in_order = pos[e] == static_cast<kernels::index_t>(e);
}

}  // namespace detail

kernels::Problem sparse_problem(const TuneOperand& operand, kernels::KernelKind kind,
                                kernels::Dtype dtype) {
  kernels::Problem p;
  p.kind = kind;
  p.A = operand.matrix;
  p.T = operand.tensor;
  p.value_type = dtype;
  return p;
}

Arm make_arm(const kernels::Problem& sparse, const codegen::SuperSchedule& s, std::int64_t dense,
             int threads, const codegen::GeneratedOptions& g, const std::string& baseline) {
  if (!baseline.empty() && !codegen::servable_baseline(baseline))
    throw kernels::Error("the plan names the implementation \"" + baseline +
                             "\", which this library cannot serve (it serves generated kernels "
                             "and the csr, csf and dia baselines)",
                         "tune again (Options::refresh), or delete the plan or cache entry");
  Arm a;
  a.bound = baseline.empty() ? codegen::bind_schedule(s, sparse, dense, threads, g)
                             : codegen::bind_baseline(baseline, sparse, dense, threads, g);
  detail::finish_arm(a, sparse.kind, sparse.T ? sparse.T->nnz() : sparse.A ? sparse.A->nnz() : 0);
  return a;
}

void Arm::run(const void* in0, const void* in1, void* out, std::int64_t dense) const {
  if (sddmm_in_order) {
    bound.run(in0, in1, out, dense);
    return;
  }
  // SDDMM in a format that stores the nonzeros in another order (or padded): into its own
  // array, then each nonzero's value to its place in CSR order.
  kernels::with_value_type(bound.dtype, [&](auto v) {
    using V = decltype(v);
    std::vector<V> stored(static_cast<std::size_t>(bound.out_size));
    bound.run(in0, in1, stored.data(), dense);
    const std::vector<kernels::index_t>& pos = bound.storage->entry_position;
    V* o = static_cast<V*>(out);
    for (std::size_t e = 0; e < pos.size(); ++e) o[e] = stored[static_cast<std::size_t>(pos[e])];
  });
}

}  // namespace waco::tuning
