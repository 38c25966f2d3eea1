// A process-wide memo of a pure function's results: thread-safe, bounded in entries (when full it
// is emptied and fills again: the entries a process asks for again come back after one miss).
// For work that a process repeats with the same inputs and that costs more than hashing and
// comparing its key (a kernel's source emitted, its cache key's SHA-256), or for handles that
// stay valid for the life of the process (an opened kernel library); never for results that
// depend on anything outside the key.
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

namespace waco::kernels {

template <class Key, class Value, class Hash = std::hash<Key>>
class Memo {
 public:
  explicit Memo(std::size_t capacity) : capacity_(capacity) {}

  /// The value kept for `key`, or none.
  std::optional<Value> find(const Key& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }

  /// Keeps `value` for `key` (replacing what was kept for it).
  void keep(Key key, Value value) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (map_.size() >= capacity_ && map_.find(key) == map_.end()) map_.clear();
    map_.insert_or_assign(std::move(key), std::move(value));
  }

  /// find(key), else make() kept for key (make runs outside the lock: two threads asking for one
  /// new key may both run it; they agree, since the function is pure).
  template <class Make>
  Value get(const Key& key, Make&& make) {
    if (std::optional<Value> found = find(key)) return std::move(*found);
    Value v = make();
    keep(key, v);
    return v;
  }

  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.size();
  }

 private:
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<Key, Value, Hash> map_;
};

}  // namespace waco::kernels
