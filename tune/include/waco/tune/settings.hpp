// The numeric ranges of tune's settings, in one table: `waco-hybrid tune`'s options check them
// (experiments/src/cmd_tune.cpp, cli_common.cpp: CLI11 ranges) and so does the C++ API
// (api/src/plan_options.cpp: waco::Options, an Error naming the setting).
#pragma once

#include <cstdint>
#include <limits>

namespace waco::tuning {

/// A setting's accepted values, [lo, hi]; `name` as waco::Options spells it.
template <typename T>
struct SettingRange {
  const char* name;
  T lo;
  T hi;
};

namespace settings {
// Measuring and deciding.
inline constexpr SettingRange<int> kRepeat{"repeat", 1, 1000000};
inline constexpr SettingRange<int> kWarmup{"warmup", 0, 1000000};
inline constexpr SettingRange<int> kConfirmRounds{"confirm_rounds", 1, 1000000};
inline constexpr SettingRange<int> kDecideRuns{"decide_runs", 1, 100};
inline constexpr SettingRange<int> kDecideExtraRuns{"decide_extra_runs", 0, 100};
inline constexpr SettingRange<int> kPerStructure{"per_structure", 0, 1000};
inline constexpr SettingRange<int> kLayouts{"layouts", 1, 64};
inline constexpr SettingRange<int> kDecideRounds{"decide_rounds", 1, 1000000};
inline constexpr SettingRange<int> kDecideLeaders{"decide_leaders", 1, 1000};
inline constexpr SettingRange<int> kHalvingKeep{"halving_keep", 0, 1000000};
inline constexpr SettingRange<double> kDecideDrop{"decide_drop", 0.0, 100.0};
inline constexpr SettingRange<double> kDecideClear{"decide_clear", 0.0, 1.0};
inline constexpr SettingRange<double> kMinGain{"min_gain", 0.0, 0.9};
inline constexpr SettingRange<double> kVerdictLevel{"verdict_level", 0.5, 0.999};
inline constexpr SettingRange<double> kMaxDisturbed{"max_disturbed", 0.0, 1.0};
/// One side-by-side child's memory for formats and outputs (0: a quarter of the machine's).
inline constexpr SettingRange<std::int64_t> kSideBySideMemory{"side_by_side_memory", 0,
                                                              std::int64_t{1} << 50};
// The trimming passes' parameters (heuristics::PassParams).
inline constexpr SettingRange<int> kTileWindow{"tile_window", 0, 1 << 30};
inline constexpr SettingRange<int> kMinChunksPerThread{"min_chunks_per_thread", 1, 1 << 30};
inline constexpr SettingRange<int> kChunkWindow{"chunk_window", 0, 1 << 30};
inline constexpr SettingRange<std::int64_t> kMaxSerialWork{
    "max_serial_work", 0, std::numeric_limits<std::int64_t>::max()};
inline constexpr SettingRange<std::int64_t> kCacheBytes{"cache_bytes", 64, std::int64_t{1} << 40};
inline constexpr SettingRange<double> kCacheFraction{"cache_fraction", 0.001, 1.0};
}  // namespace settings

}  // namespace waco::tuning
