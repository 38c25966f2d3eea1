// Private: the factories of the passes (one per src/passes/<name>.cpp), declared from passes.def,
// and a helper to define single-stage constraints from a lambda.
#pragma once

#include <functional>
#include <memory>

#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/pass.hpp"

namespace waco::heuristics::detail {

#define WACO_PASS(name, factory) std::unique_ptr<Pass> factory(const PassParams& params);
#define WACO_RESTRICTION(name, factory) WACO_PASS(name, factory)
#include "passes.def"
#undef WACO_RESTRICTION
#undef WACO_PASS

/// The csr schedule of a kernel (csf for MTTKRP) as the space holds it: the reference the
/// restrictions keep (SpMV's chunk=auto as codegen::fixed_chunk's 128).
inline codegen::SuperSchedule csr_like_schedule(kernels::KernelKind k) {
  return codegen::fixed_chunk(
      *codegen::schedule_shortcut(k, k == kernels::KernelKind::MTTKRP ? "csf" : "csr"));
}

/// The dense variable a kernel streams over (SpMM and MTTKRP j, SDDMM k), or 0 for SpMV.
inline char dense_var(kernels::KernelKind k) {
  return k == kernels::KernelKind::SDDMM ? 'k' : k == kernels::KernelKind::SpMV ? 0 : 'j';
}

/// A nest-stage constraint from a function.
class NestConstraint final : public Constraint {
 public:
  using Fn = std::function<const char*(const Space&, const std::vector<Loop>&, const Loop&)>;
  explicit NestConstraint(Fn f) : f_(std::move(f)) {}
  Stage stage() const override { return Stage::Nest; }
  const char* check_nest(const Space& s, const std::vector<Loop>& o, const Loop& p) const override {
    return f_(s, o, p);
  }

 private:
  Fn f_;
};

/// A split-stage constraint from a function.
class SplitConstraint final : public Constraint {
 public:
  using Fn = std::function<const char*(const Space&, const std::vector<int>&)>;
  explicit SplitConstraint(Fn f) : f_(std::move(f)) {}
  Stage stage() const override { return Stage::Split; }
  const char* check_split(const Space& s, const std::vector<int>& split) const override {
    return f_(s, split);
  }

 private:
  Fn f_;
};

/// A storage-stage constraint from a function (must depend on the sparse variables' splits only).
class StorageConstraint final : public Constraint {
 public:
  using Fn = std::function<const char*(const Space&, const std::vector<int>&,
                                       const std::vector<Loop>&, const std::vector<LevelFormat>&)>;
  explicit StorageConstraint(Fn f) : f_(std::move(f)) {}
  Stage stage() const override { return Stage::Storage; }
  const char* check_storage(const Space& s, const std::vector<int>& split,
                            const std::vector<Loop>& levels,
                            const std::vector<LevelFormat>& formats) const override {
    return f_(s, split, levels, formats);
  }

 private:
  Fn f_;
};

/// An execution-stage constraint from a function.
class ExecutionConstraint final : public Constraint {
 public:
  using Fn = std::function<const char*(const Space&, const std::vector<int>&, const Loop&, int, int)>;
  explicit ExecutionConstraint(Fn f) : f_(std::move(f)) {}
  Stage stage() const override { return Stage::Execution; }
  const char* check_execution(const Space& s, const std::vector<int>& split, const Loop& p,
                              int threads, int chunk) const override {
    return f_(s, split, p, threads, chunk);
  }

 private:
  Fn f_;
};

/// A pass defined by its name, description, soundness and a constraint builder.
class SimplePass final : public Pass {
 public:
  using Build = std::function<std::vector<std::shared_ptr<const Constraint>>(const Space&,
                                                                            std::string&)>;
  SimplePass(std::string name, std::string description, bool sound, Build build)
      : name_(std::move(name)), description_(std::move(description)), sound_(sound),
        build_(std::move(build)) {}
  std::string name() const override { return name_; }
  std::string description() const override { return description_; }
  bool sound() const override { return sound_; }
  std::vector<std::shared_ptr<const Constraint>> constraints(const Space& s,
                                                             std::string& note) const override {
    return build_(s, note);
  }

 private:
  std::string name_, description_;
  bool sound_;
  Build build_;
};

}  // namespace waco::heuristics::detail
