// Private to api/src/plan*.cpp: a plan's insides (Plan::Impl) and what the parts of making one
// share. The parts:
//   plan_options.cpp  the Options checked and converted (kind_of, kernel_of, check_operand,
//                     resolved_threads, resolved_dense, generated_options, tune_request)
//   plan_check.cpp    a measured plan's gain checked in this process (check_here)
//   plan_tune.cpp     waco::tune: the tuning cache, the tune pipeline in this process, adaptive
//                     plans
//   plan.cpp          a decided schedule bound to its matrix (bind_arm, reference_of,
//                     bind_reference, bind_plan), make_plan, the Plan's methods, save and load
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api_internal.hpp"
#include "waco/codegen/generated_kernel.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/kernel.hpp"
#include "waco/tune/adaptive_run.hpp"
#include "waco/tune/tune.hpp"

namespace waco {

struct Plan::Impl {
  Kernel kernel = Kernel::SpMV;
  std::shared_ptr<const tuning::Arm> arm;        ///< the schedule that serves (a fixed plan)
  std::shared_ptr<tuning::AdaptiveRun> adaptive;  ///< an adaptive plan's run time (else null)
  nlohmann::json report;  ///< the deciding tune's report (null for make_plan)
  std::string verdict;
  double speedup = 0.0;
  double break_even = -1.0;
  double tuning_s = 0.0;
  bool from_cache = false;
  int threads = 1;
  int dense = 1;
  kernels::Dtype dtype = kernels::Dtype::F32;  ///< its matrix's: the type of the arrays it takes
  double max_padding = 20.0;  ///< the format builder's bound (Options::max_padding), for headers
  std::string fingerprint;  ///< of its matrix, taken when it was bound (not an adaptive plan's)
  /// An adaptive plan's matrix (its run keeps it alive anyway): the fingerprint is computed when
  /// first asked, not when the plan is made.
  std::shared_ptr<const Matrix> matrix;
  std::vector<std::int64_t> dims;
  std::int64_t nnz = 0;

  std::string fingerprint_of() const { return matrix ? matrix->fingerprint() : fingerprint; }
  /// The arm serving calls now.
  std::shared_ptr<const tuning::Arm> serving() const { return adaptive ? adaptive->current() : arm; }
  /// One call: `run` on the serving arm (an adaptive plan's policy chooses, times, verifies);
  /// `out_size` values at out are the call's output.
  void serve(void* out, std::size_t out_size, const tuning::ArmCall& run) const {
    if (adaptive)
      adaptive->call(out, out_size, run);
    else
      run(*arm, out);
  }

  static Plan wrap(std::shared_ptr<const Impl> impl) { return Plan(std::move(impl)); }
};

namespace detail {

// plan_options.cpp (each documented there).
kernels::KernelKind kind_of(Kernel k);
Kernel kernel_of(kernels::KernelKind k);
void check_operand(const Matrix& A, Kernel k);
int resolved_threads(const Options& o);
int resolved_dense(const Options& o, Kernel k);
codegen::GeneratedOptions generated_options(const Options& o);
tuning::TuneRequest tune_request(const Options& o, Kernel k, int threads, int dense,
                                 kernels::Dtype dtype);

// plan.cpp (each documented there).
std::shared_ptr<Plan::Impl> bind_arm(const Matrix& A, Kernel k, const codegen::SuperSchedule& s,
                                     const Options& o, const std::string& baseline = "");
std::string reference_of(Kernel k);
std::shared_ptr<Plan::Impl> bind_reference(const Matrix& A, Kernel k, const Options& o);
std::shared_ptr<Plan::Impl> bind_plan(const Matrix& A, Kernel k, const codegen::SuperSchedule& s,
                                      const Options& o, const std::string& baseline = "");

// plan_check.cpp.
void check_here(Plan::Impl& impl, const Matrix& A, Kernel k, const Options& o);

}  // namespace detail
}  // namespace waco
