// Kernel implementations (the baselines now; tiled and generated kernels later) behind one
// interface, and the registry that names them for `--impl`.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "waco/kernels/kernel.hpp"

namespace waco::kernels {

/// One way of computing a kernel. Life cycle: prepare() once (build formats, tune), then run()
/// any number of times; output() holds the canonical result of the last run().
class Implementation {
 public:
  virtual ~Implementation() = default;

  /// Builds the implementation's data structures for `p` (in p.dtype()) using `threads` threads.
  /// Throws Error when the implementation cannot handle this problem (with the reason).
  virtual void prepare(const Problem& p, int threads) = 0;
  /// Computes the kernel into output(). Precondition: prepare() succeeded.
  virtual void run() = 0;
  /// The result of the last run, in the canonical layout of kernel.hpp and the problem's value
  /// type.
  virtual const Values& output() const = 0;

  /// Seconds prepare() spent converting the operand into the implementation's format.
  double conversion_seconds() const { return conversion_seconds_; }
  /// Seconds prepare() spent in an autotuner of the implementation's own (rsb-tuned).
  double tuning_seconds() const { return tuning_seconds_; }

 protected:
  double conversion_seconds_ = 0.0;
  double tuning_seconds_ = 0.0;
};

struct ImplementationInfo {
  std::string name;         ///< kebab-case, as given to --impl
  std::string description;  ///< one line for --help
  std::vector<KernelKind> kernels;
  std::function<std::unique_ptr<Implementation>()> make;

  bool supports(KernelKind k) const;
};

/// Every implementation built into this binary, in a fixed order.
const std::vector<ImplementationInfo>& implementations();

/// The named implementation for kernel k from `registry`. Throws Error naming the available
/// ones when the name is unknown or does not support k.
std::unique_ptr<Implementation> make_implementation(const std::vector<ImplementationInfo>& registry,
                                                    std::string_view name, KernelKind k);
/// Same, from implementations().
std::unique_ptr<Implementation> make_implementation(std::string_view name, KernelKind k);

}  // namespace waco::kernels
