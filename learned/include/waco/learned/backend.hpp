// Which build of waco_learned this is. The library comes in two builds with one interface:
//   waco_learned       with LibTorch: WACONet, training, and every cost model;
//   waco_learned_lite  without: cost models whose matrix encoder reads feature vectors (stats,
//                      signature: the shipped defaults) run in plain C++ (Eigen), and everything
//                      else throws TorchRequired.
// A process that links LibTorch pays its loading (about 0.4 s and 180 MB on the development
// machine) before main(); `waco-hybrid` links the lite build and runs a command that needs
// LibTorch again as `waco-hybrid-torch` (experiments/src/main.cpp).
#pragma once

#include <string>

#include "waco/kernels/error.hpp"

namespace waco::learned {

/// True in the LibTorch build.
bool built_with_torch();

/// What the lite build throws where LibTorch is needed.
class TorchRequired : public kernels::Error {
 public:
  using kernels::Error::Error;
};

/// Throws TorchRequired naming `what` ("training", "WACONet features") in the lite build.
void require_torch(const std::string& what);

}  // namespace waco::learned
