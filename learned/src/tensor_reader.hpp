// Reading the versioned weights file of learned/ without LibTorch (internal). The layout, written
// by tensor_file.hpp's write_tensor_file, little-endian:
//   <8 magic bytes>  u32 version  u32 n  <n bytes: header text (architecture or JSON)>
//   u32 tensors, then per tensor: u32 n <name> u32 ndim i64 sizes[ndim] f32 data[numel]
//   "END!"
// The reader checks the magic and the version before the header, every tensor's rank and values
// (NaN or infinite values are refused), that every size it reads is backed by the file's bytes
// before allocating for it, and the end marker; every failure is a kernels::Error
// naming the file. Used by the torch-free cost model (cost_model_plain.cpp) and, through
// tensor_file.hpp's read_into, by the LibTorch networks.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace waco::learned {

class TensorFileReader {
 public:
  /// Opens the file and reads and checks the magic and the version, then the header. `what`
  /// names the kind of file in messages ("WACONet weights", "cost model").
  TensorFileReader(const std::string& path, const char (&magic)[8], std::uint32_t version,
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
  /// The file's size in bytes: no tensor's values are more.
  std::int64_t size() const { return size_; }

 private:
  void bytes(void* dst, std::size_t n, const char* what);
  std::uint32_t u32(const char* what);
  std::string str(const char* what, std::uint32_t max_len);
  /// Throws Error (truncated file) unless `n` more bytes are left in the file.
  void check_left(std::int64_t n, const char* what);
  std::string path_, what_, header_;
  std::ifstream in_;
  std::int64_t size_ = 0;  ///< of the file, so that no size read from it allocates beyond it
};

}  // namespace waco::learned
