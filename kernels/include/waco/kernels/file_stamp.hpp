// What a file is now (device, inode, size, modification time), and values computed from files kept
// per path while the file stays the same: the cost model's loaded weights (learned/), a model
// file's digest (tune/calibration), a shipped folder's schedule list (codegen/). The same path may
// be replaced by another file: any change of the stamp computes the value again.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace waco::kernels {

struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileStamp& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
};

/// The stamp of the file at `path` (any type), or nullopt when it cannot be read (stat fails).
std::optional<FileStamp> file_stamp(const std::string& path);
/// file_stamp, for a regular file only.
std::optional<FileStamp> regular_file_stamp(const std::string& path);

/// Values computed from regular files, kept per path while the file's stamp stays. Thread-safe;
/// a value is computed outside the lock (two threads may both compute it the first time).
template <class T>
class PerFileCache {
 public:
  /// The value kept for `path`, or `compute()` kept when the file changed or is new;
  /// `missing` when the path is not a regular file.
  template <class F>
  T get(const std::string& path, F&& compute, T missing = {}) {
    const std::optional<FileStamp> stamp = regular_file_stamp(path);
    if (!stamp) return missing;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto it = kept_.find(path);
      if (it != kept_.end() && it->second.first == *stamp) return it->second.second;
    }
    T value = compute();
    const std::lock_guard<std::mutex> lock(mutex_);
    kept_[path] = {*stamp, value};
    return value;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::pair<FileStamp, T>> kept_;
};

}  // namespace waco::kernels
