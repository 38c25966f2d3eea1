// The four kernels as data (kernel_spec.hpp): one static KernelSpec per kernel, and the extent of
// each index variable for a Problem. Every later stage (schedule space, storage, code generation)
// reads the kernel from here instead of switching on the kernel kind.
#include "waco/codegen/kernel_spec.hpp"

#include <algorithm>

#include "waco/kernels/error.hpp"

namespace waco::codegen {

namespace {

bool contains(const std::vector<char>& vars, char v) {
  return std::find(vars.begin(), vars.end(), v) != vars.end();
}

KernelSpec make_spec(kernels::KernelKind kind) {
  using kernels::KernelKind;
  switch (kind) {
    case KernelKind::SpMV:  // y(i) += A(i,k) * x(k)
      return {kind, {'i', 'k'}, {'i', 'k'}, {{"x", {'k'}}}, {"y", {'i'}}};
    case KernelKind::SpMM:  // C(i,j) += A(i,k) * B(k,j)
      return {kind, {'i', 'k', 'j'}, {'i', 'k'}, {{"B", {'k', 'j'}}}, {"C", {'i', 'j'}}};
    case KernelKind::SDDMM:  // D(i,j) += A(i,j) * B(i,k) * C(k,j); C column-major = (j,k)
      return {kind, {'i', 'j', 'k'}, {'i', 'j'}, {{"B", {'i', 'k'}}, {"C", {'j', 'k'}}}, {"D", {}}};
    case KernelKind::MTTKRP:  // D(i,j) += A(i,k,l) * B(k,j) * C(l,j)
      return {kind,
              {'i', 'k', 'l', 'j'},
              {'i', 'k', 'l'},
              {{"B", {'k', 'j'}}, {"C", {'l', 'j'}}},
              {"D", {'i', 'j'}}};
  }
  WACO_ASSERT(false, "unknown kernel kind");
  return {};
}

}  // namespace

int KernelSpec::var_index(char v) const {
  const auto it = std::find(vars.begin(), vars.end(), v);
  return it == vars.end() ? -1 : static_cast<int>(it - vars.begin());
}

bool KernelSpec::is_sparse_var(char v) const { return contains(sparse_vars, v); }

/// A sparse output (SDDMM) sits at A's positions, so it is indexed by A's variables.
bool KernelSpec::is_output_var(char v) const {
  return sparse_output() ? is_sparse_var(v) : contains(output.vars, v);
}

const KernelSpec& kernel_spec(kernels::KernelKind k) {
  static const KernelSpec spmv = make_spec(kernels::KernelKind::SpMV);
  static const KernelSpec spmm = make_spec(kernels::KernelKind::SpMM);
  static const KernelSpec sddmm = make_spec(kernels::KernelKind::SDDMM);
  static const KernelSpec mttkrp = make_spec(kernels::KernelKind::MTTKRP);
  switch (k) {
    case kernels::KernelKind::SpMV: return spmv;
    case kernels::KernelKind::SpMM: return spmm;
    case kernels::KernelKind::SDDMM: return sddmm;
    case kernels::KernelKind::MTTKRP: return mttkrp;
  }
  WACO_ASSERT(false, "unknown kernel kind");
  return spmv;
}

std::vector<std::int64_t> extents(const KernelSpec& spec, const kernels::CooMatrix* A,
                                  const kernels::CooTensor* T, std::int64_t dense) {
  std::vector<std::int64_t> e(spec.vars.size(), 0);
  auto set = [&](char v, std::int64_t n) {
    const int idx = spec.var_index(v);
    WACO_ASSERT(idx >= 0, std::string("no variable ") + v + " in the kernel spec");
    e[static_cast<std::size_t>(idx)] = n;
  };
  using kernels::KernelKind;
  if (spec.kind == KernelKind::MTTKRP) {
    WACO_ASSERT(T != nullptr && T->order() == 3, "mttkrp needs an order-3 tensor");
    set('i', T->dims[0]);
    set('k', T->dims[1]);
    set('l', T->dims[2]);
    set('j', dense);
    return e;
  }
  WACO_ASSERT(A != nullptr, "the problem has no sparse matrix");
  set('i', A->rows);
  switch (spec.kind) {
    case KernelKind::SpMV: set('k', A->cols); break;
    case KernelKind::SpMM:
      set('k', A->cols);
      set('j', dense);
      break;
    case KernelKind::SDDMM:
      set('j', A->cols);
      set('k', dense);
      break;
    case KernelKind::MTTKRP: break;  // handled above
  }
  return e;
}

std::vector<std::int64_t> extents(const KernelSpec& spec, const kernels::Problem& p) {
  WACO_ASSERT(spec.kind == p.kind, "kernel spec and problem are for different kernels");
  WACO_ASSERT(p.kind == kernels::KernelKind::SpMV || p.B != nullptr,
              std::string(kernels::kernel_name(p.kind)) + " needs B");
  return extents(spec, p.A, p.T, p.kind == kernels::KernelKind::SpMV ? 1 : p.B->cols);
}

}  // namespace waco::codegen
