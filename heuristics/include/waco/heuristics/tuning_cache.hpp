// The persistent tuning cache (issue 16, "library"): the decision of a finished tune (the winning
// schedule, or csr when nothing beat it, with the report that justified it), stored under a key
// of everything the decision depends on, so that the next `tune` or `waco::tune` of the same
// matrix on the same machine returns it without searching.
//
// The key: the matrix's content key (kernels::content_key: its content, as its fingerprint
// names it, in a digest ~8x as fast to take), the kernel, the dense size, the thread count, and
// the machine's identity (CPU model, cache sizes and the source they came from, the compiler and
// flags of waco-hybrid and of its generated kernels, waco-hybrid's version and git revision).
// A change of any part misses. One entry is one JSON file named by a hash of the key, written
// atomically (a kill -9 leaves the old entry or none), holding the key itself and a checksum:
// an entry that does not parse, whose checksum or key does not match, or whose schedule is not
// valid is reported as corrupt and ignored (the caller tunes again and overwrites it), never
// trusted.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "waco/codegen/compiler.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/kernel.hpp"

namespace waco::heuristics {

/// Version of the entry layout; an entry of another version misses (is not corrupt).
/// 2 (session 85): filed under the content key, not the fingerprint.
inline constexpr int kTuningCacheVersion = 2;

struct TuningKey {
  std::string content;  ///< of the sparse operand (kernels::content_key_hex)
  kernels::KernelKind kind = kernels::KernelKind::SpMV;
  int dense = 1;            ///< J, K, or 1 for SpMV
  int threads = 1;
  nlohmann::json machine;   ///< machine_identity()
  /// The value type (in the key's JSON only when double: single-precision entries written
  /// before double precision keep their names).
  kernels::Dtype dtype = kernels::Dtype::F32;

  nlohmann::json to_json() const;
  /// 16 hex digits naming the entry's file: a hash of to_json().
  std::string hash() const;
};

/// This machine's identity as the key holds it (see the file comment). Reads the cache sizes
/// (kernels::cache_sizes(): the probe runs once per machine when no source reports them).
nlohmann::json machine_identity(const codegen::CompilerOptions& kernel_compiler);

/// The checksum an entry stores: a hash of its key, schedule and report as compact JSON (public
/// for fuzz/, whose tuning-cache target makes entries that pass it).
std::string tuning_cache_checksum(const nlohmann::json& key, const nlohmann::json& schedule,
                                  const nlohmann::json& report);

/// A stored decision.
struct CachedDecision {
  codegen::SuperSchedule schedule;  ///< what to run (csr's schedule when the verdict was no-gain)
  nlohmann::json report;            ///< the tune report of the run that decided (tune --json)
  std::string saved_at;             ///< UTC ISO 8601
  std::string path;                 ///< the entry's file
};

struct CacheLookup {
  std::optional<CachedDecision> hit;
  std::string path;     ///< the entry's file (whether or not it exists)
  std::string problem;  ///< non-empty when an entry exists but is corrupt: why it was ignored
};

/// $XDG_CACHE_HOME/waco-hybrid/plans, else $HOME/.cache/waco-hybrid/plans, else a per-user /tmp
/// folder (kernels::user_cache_dir()).
std::string default_tuning_cache_dir();

class TuningCache {
 public:
  /// `dir` empty: default_tuning_cache_dir(). Nothing is created before the first store().
  explicit TuningCache(std::string dir = {});

  const std::string& dir() const { return dir_; }
  /// The entry of `key`: a hit, a miss (no entry, or one of another layout version), or a
  /// corrupt entry (problem set; treat as a miss).
  CacheLookup find(const TuningKey& key) const;
  /// Stores a decision (atomically, replacing any entry of the key); returns the entry's path.
  /// Throws kernels::Error when the directory cannot be created or written.
  std::string store(const TuningKey& key, const codegen::SuperSchedule& schedule,
                    const nlohmann::json& report) const;

 private:
  std::string dir_;
};

}  // namespace waco::heuristics
