// A SuperSchedule as a kernels::Implementation: prepare() builds the format storage (conversion
// time), emits and compiles the kernel (compile time, cached on disk), and run() calls it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "waco/codegen/compiler.hpp"
#include "waco/codegen/emitter.hpp"
#include "waco/codegen/storage.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/implementation.hpp"

namespace waco::codegen {

struct GeneratedOptions {
  StorageOptions storage;
  CompilerOptions compiler;
};

class GeneratedKernel final : public kernels::Implementation {
 public:
  GeneratedKernel(SuperSchedule schedule, GeneratedOptions opts = {});

  /// Throws kernels::Error when the schedule is for another kernel, when the format is refused
  /// (the reason, e.g. the padding bound) or when compilation fails (command and log).
  void prepare(const kernels::Problem& p, int threads) override;
  void run() override;
  const std::vector<float>& output() const override;

  const SuperSchedule& schedule() const { return schedule_; }
  const Storage& storage() const { return *storage_; }
  /// Seconds spent compiling (0 on a cache hit), and whether the cache had the kernel.
  double compile_seconds() const { return compile_.compile_seconds; }
  bool cache_hit() const { return compile_.cache_hit; }
  const std::string& source_path() const { return compile_.source_path; }
  /// Threads the kernel runs on (the schedule's, or prepare()'s when the schedule says 0).
  int threads() const { return args_.threads; }

 private:
  SuperSchedule schedule_;
  GeneratedOptions opts_;
  kernels::Problem problem_;
  std::unique_ptr<Storage> storage_;
  CompileResult compile_;
  void (*fn_)(const WacoArgs*) = nullptr;
  WacoArgs args_{};
  std::vector<float> out_;                 ///< what the kernel writes
  mutable std::vector<float> canonical_;   ///< SDDMM: out_ gathered into A's canonical order
};

}  // namespace waco::codegen
