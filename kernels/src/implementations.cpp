// The registry of built-in implementations: one line per implementation.
#include <sstream>
#include <string>

#include "baselines.hpp"
#include "waco/kernels/baseline_loops.hpp"
#include "waco/kernels/error.hpp"

namespace waco::kernels {

bool ImplementationInfo::supports(KernelKind k) const {
  for (KernelKind s : kernels)
    if (s == k) return true;
  return false;
}

const std::vector<ImplementationInfo>& implementations() {
  using K = KernelKind;
  static const std::vector<ImplementationInfo> list = [] {
    std::vector<ImplementationInfo> l = {
        {"csr",
         "CSR, rows in parallel, OpenMP dynamic (TACO's default schedule; an SpMV serially where that is faster on the matrix)",
         {K::SpMV, K::SpMM, K::SDDMM}, detail::make_csr},
        {"csf", "CSF (compressed i, k, l), slices in parallel, OpenMP dynamic chunk 32",
         {K::MTTKRP}, detail::make_csf},
        {"eigen", "Eigen SparseMatrix<float or double, RowMajor> products", {K::SpMV, K::SpMM},
         detail::make_eigen},
        {"dia",
         "diagonal storage, rows in static ranges, vector loops over each diagonal (stencils, "
         "banded matrices; refuses one whose diagonals store more than " +
             std::to_string(kDiaMaxFill) + " values a nonzero)",
         {K::SpMV}, detail::make_dia},
    };
    if (detail::have_rsb()) {
      l.push_back({"rsb", "librsb recursive sparse blocks, untuned", {K::SpMV, K::SpMM},
                   [] { return detail::make_rsb(false); }});
      l.push_back({"rsb-tuned", "librsb after its own autotuner (tuning time reported)",
                   {K::SpMV, K::SpMM}, [] { return detail::make_rsb(true); }});
    }
    return l;
  }();
  return list;
}

std::unique_ptr<Implementation> make_implementation(const std::vector<ImplementationInfo>& registry,
                                                    std::string_view name, KernelKind k) {
  std::ostringstream names;
  for (const ImplementationInfo& info : registry) {
    if (info.supports(k)) names << (names.tellp() > 0 ? ", " : "") << info.name;
    if (info.name == name) {
      if (!info.supports(k))
        throw Error("implementation '" + info.name + "' does not support " +
                        std::string(kernel_name(k)),
                    "see 'waco-hybrid run --help' for which implementation runs which kernel");
    }
  }
  for (const ImplementationInfo& info : registry)
    if (info.name == name) return info.make();
  throw Error("unknown implementation '" + std::string(name) + "' for " +
                  std::string(kernel_name(k)),
              "available: " + names.str());
}

std::unique_ptr<Implementation> make_implementation(std::string_view name, KernelKind k) {
  return make_implementation(implementations(), name, k);
}

}  // namespace waco::kernels
