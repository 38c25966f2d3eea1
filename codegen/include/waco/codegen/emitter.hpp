// Code generation: a SuperSchedule becomes a C++ loop nest over its format storage (one function,
// `waco_kernel`, taking a WacoArgs block). U levels are iterated by index, C levels by position;
// variables that the sparse operand lacks get plain loops; split coordinates are rebuilt as
// x = x1 * s_x + x0 and inner loops stop at the extent, so sizes that are not multiples of the
// split are correct. The parallel loop carries `#pragma omp for schedule(dynamic, chunk)` inside one
// `omp parallel` region; if it does not index the output, updates are `omp atomic`. Split sizes,
// chunk and threads are runtime arguments.
#pragma once

#include <string>

#include "waco/codegen/super_schedule.hpp"

namespace waco::codegen {

/// Version of the WacoArgs layout; part of every generated source (and so of its cache key).
inline constexpr int kAbiVersion = 1;
inline constexpr int kMaxLevels = 8;
inline constexpr int kMaxVars = 4;

/// The fields of the argument block of a generated kernel, written once: they declare WacoArgs
/// below and, as text (kWacoArgsFields), the identical struct in every generated source.
#define WACO_ARGS_FIELDS                                                                   \
  const int* pos[8];                                                                       \
  const int* crd[8];                                                                       \
  long long level_dim[8];                                                                  \
  const float* vals;                                                                       \
  const float* in[2];                                                                      \
  float* out;                                                                              \
  long long out_size;                                                                      \
  long long extent[4];                                                                     \
  long long split[4];                                                                      \
  int threads;                                                                             \
  int chunk;
#define WACO_STRINGIFY_FIELDS(...) #__VA_ARGS__
#define WACO_STRINGIFY(x) WACO_STRINGIFY_FIELDS(x)

/// The argument block of a generated kernel.
struct WacoArgs {
  WACO_ARGS_FIELDS
};
static_assert(sizeof(WacoArgs::pos) / sizeof(WacoArgs::pos[0]) == kMaxLevels &&
                  sizeof(WacoArgs::extent) / sizeof(WacoArgs::extent[0]) == kMaxVars,
              "WACO_ARGS_FIELDS must match kMaxLevels and kMaxVars");
/// The same fields as C++ source text.
inline constexpr const char* kWacoArgsFields = WACO_STRINGIFY(WACO_ARGS_FIELDS);

/// Whether the parallel loop writes disjoint outputs (else the generator uses atomics).
bool parallel_loop_is_race_free(const SuperSchedule& s);

/// The C++ source of the kernel for a canonical, valid schedule: readable, self-contained (no
/// waco headers), exporting `extern "C" void waco_kernel(const WacoArgs*)`.
std::string emit_kernel_source(const SuperSchedule& s);

}  // namespace waco::codegen
