// Reading the versioned weights file of learned/ without LibTorch (internal). The layout, written
// by tensor_file.hpp's write_tensor_file, little-endian:
//   <8 magic bytes>  u32 version  u32 n  <n bytes: header text (architecture or JSON)>
//   u32 tensors, then per tensor: u32 n <name> u32 ndim i64 sizes[ndim] [pad] f32 data[numel]
//   "END!"
// [pad], in the versions that have it (TensorFileVersions::padded_since on: cost models from
// version 2): u32 p (0-63) and p zero bytes, so that the values start at a multiple of 64 bytes
// from the file's start. Such a file's values are used where they lie (view_each): the file is
// mapped (read-only, private), and its pages are the page cache's, not fresh memory (a cost
// model's load in a process's first choice on the AMD EPYC Zen 5 VM, where a fresh 4 KiB page
// faults in ~10 us and a fresh huge page now and then in milliseconds: copied into a HugeBlock
// 0.85-4.46 ms, mapped 0.40-0.66 ms; learned/README.md).
// The reader checks the magic and the version before the header, every tensor's rank, padding
// and values (NaN or infinite values are refused), that every size it reads is backed by the
// file's bytes before allocating for it, and the end marker; every failure is a kernels::Error
// naming the file. Used by the torch-free cost model (cost_model_plain.cpp) and, through
// tensor_file.hpp's read_into, by the LibTorch networks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace waco::learned {

/// The versions of one kind of tensor file: `version` is written; `oldest` to `version` are read;
/// from `padded_since` on each tensor's values are padded to 64 bytes (the layout above).
struct TensorFileVersions {
  std::uint32_t version = 1;
  std::uint32_t oldest = 1;
  std::uint32_t padded_since = UINT32_MAX;
  bool padded(std::uint32_t v) const { return v >= padded_since; }
};

/// The alignment of a padded file's values, in bytes.
inline constexpr std::size_t kTensorAlignBytes = 64;

class TensorFileReader {
 public:
  /// Opens (maps) the file and reads and checks the magic and the version (one of `versions`),
  /// then the header. `what` names the kind of file in messages ("WACONet weights", "cost
  /// model").
  TensorFileReader(const std::string& path, const char (&magic)[8], TensorFileVersions versions,
                   std::string what);
  const std::string& header() const { return header_; }
  const std::string& path() const { return path_; }
  const std::string& what() const { return what_; }

  struct Tensor {
    std::string name;
    std::vector<std::int64_t> sizes;
    std::vector<float> data;  ///< row-major, the product of sizes
  };
  /// Every tensor after the header, in file order, then the end marker. Call once (this or
  /// read_each).
  std::vector<Tensor> read_all();
  /// The same, each tensor's values read straight into the `numel` floats (row-major) that
  /// `place(name, sizes, numel)` returns, storage the caller owns: no copy of the weights (a
  /// model's ~0.5 MB were read into vectors, then copied into the network's matrices).
  using Place = std::function<float*(const std::string& name,
                                     const std::vector<std::int64_t>& sizes, std::int64_t numel)>;
  /// `start`, when given, is told the number of tensors the file declares before the first one
  /// is placed (with size(), a bound for storage that holds them all).
  void read_each(const Place& place, const std::function<void(std::uint32_t count)>& start = {});
  /// Whether the file's values are padded to 64 bytes (its version has the padding), so that
  /// view_each can hand them out where they lie.
  bool padded() const { return padded_; }
  /// The same as read_each for a padded() file, without copying: `view(name, sizes, numel,
  /// values)` gets each tensor's values where they lie in the mapping, 64-byte aligned and
  /// checked, valid while the mapping (mapping()) lives.
  using View = std::function<void(const std::string& name, const std::vector<std::int64_t>& sizes,
                                  std::int64_t numel, const float* values)>;
  void view_each(const View& view);
  /// The file's read-only mapping: holding it keeps view_each's values valid.
  std::shared_ptr<const void> mapping() const { return map_; }
  /// The file's size in bytes: no tensor's values are more.
  std::int64_t size() const { return size_; }

 private:
  /// Every tensor's name, sizes and the bytes of its values (where they lie), in file order,
  /// then the end marker.
  using Bytes = std::function<void(const std::string& name, const std::vector<std::int64_t>& sizes,
                                   std::int64_t numel, const unsigned char* values)>;
  void each(const std::function<void(std::uint32_t count)>& start, const Bytes& values_at);
  void check_finite(const std::string& name, const float* values, std::size_t n) const;
  void bytes(void* dst, std::size_t n, const char* what);
  std::uint32_t u32(const char* what);
  std::string str(const char* what, std::uint32_t max_len);
  /// Throws Error (truncated file) unless `n` more bytes are left in the file.
  void check_left(std::int64_t n, const char* what);
  std::string path_, what_, header_;
  std::shared_ptr<const void> map_;  ///< the whole file, read-only (null for an empty file)
  const unsigned char* data_ = nullptr;
  std::int64_t size_ = 0;  ///< of the file, so that no size read from it allocates beyond it
  std::int64_t at_ = 0;    ///< the next byte to read
  bool padded_ = false;
};

}  // namespace waco::learned
