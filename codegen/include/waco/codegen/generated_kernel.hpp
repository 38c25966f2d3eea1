// A SuperSchedule as a kernels::Implementation: prepare() builds the format storage (conversion
// time), emits and compiles the kernel (compile time, cached on disk), and run() calls it.
// prepare() also resolves RaceStrategy::Auto, which needs the problem (see GeneratedOptions).
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

/// The most memory RaceStrategy::Auto spends on per-thread copies of the output (a safety
/// bound, not a measured optimum).
inline constexpr double kMaxPrivateCopyBytes = 1024.0 * 1024.0 * 1024.0;

struct GeneratedOptions {
  StorageOptions storage;
  CompilerOptions compiler;
  /// How a parallel loop that does not index the output stays race-free. Auto: see resolve_race.
  RaceStrategy race = RaceStrategy::Auto;
};

/// The strategy `requested` resolves to for schedule s on a problem whose output has
/// `output_size` entries, with `updates` updates of the output (the innermost statements: stored
/// values x the extents of the dense-only variables) on `threads` threads: Atomic or Private,
/// never Auto. Auto is Private when the copies are no more entries than there are updates,
/// (threads - 1) x output_size <= updates, and take at most kMaxPrivateCopyBytes; else Atomic.
RaceStrategy resolve_race(RaceStrategy requested, const SuperSchedule& s, std::int64_t output_size,
                          double updates, int threads);

class GeneratedKernel final : public kernels::Implementation {
 public:
  GeneratedKernel(SuperSchedule schedule, GeneratedOptions opts = {});

  /// Throws kernels::Error when the schedule is for another kernel, when the format is refused
  /// (the reason, e.g. the padding bound) or when compilation fails (command and log).
  void prepare(const kernels::Problem& p, int threads) override;
  /// Throws kernels::Error when the per-thread output copies of RaceStrategy::Private cannot be
  /// allocated.
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
  /// The strategy the kernel was emitted with (resolved; it changes the source only when the
  /// parallel loop does not index the output).
  RaceStrategy race() const { return race_; }

 private:
  SuperSchedule schedule_;
  GeneratedOptions opts_;
  kernels::Problem problem_;
  std::unique_ptr<Storage> storage_;
  CompileResult compile_;
  RaceStrategy race_ = RaceStrategy::Atomic;
  int (*fn_)(const WacoArgs*) = nullptr;
  WacoArgs args_{};
  std::vector<float> out_;                 ///< what the kernel writes
  mutable std::vector<float> canonical_;   ///< SDDMM: out_ gathered into A's canonical order
};

}  // namespace waco::codegen
