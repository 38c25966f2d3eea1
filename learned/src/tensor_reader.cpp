#include "tensor_reader.hpp"

#include <cstring>

#include "waco/kernels/error.hpp"
#include "waco/kernels/values.hpp"

namespace waco::learned {

using kernels::Error;

TensorFileReader::TensorFileReader(const std::string& path, const char (&magic)[8],
                                   std::uint32_t version, std::string what)
    : path_(path), what_(std::move(what)), in_(path, std::ios::binary) {
  if (!in_)
    throw Error("cannot open " + what_ + " file '" + path + "'",
                "check the path; the file is written by waco-hybrid");
  in_.seekg(0, std::ios::end);
  size_ = static_cast<std::int64_t>(in_.tellg());
  in_.seekg(0, std::ios::beg);
  if (!in_ || size_ < 0)
    throw Error("cannot read " + what_ + " file '" + path + "'", "check the path and the file");
  char m[8];
  in_.read(m, 8);
  if (in_.gcount() != 8 || std::memcmp(m, magic, 8) != 0)
    throw Error(path + ": not a " + what_ + " file (bad magic bytes)",
                "pass a file written by waco-hybrid for this purpose");
  const std::uint32_t v = u32("the format version");
  if (v != version)
    throw Error(path + ": " + what_ + " format version " + std::to_string(v) +
                    " is not supported (this build reads version " + std::to_string(version) + ")",
                "re-create the file with this version of waco-hybrid");
  header_ = str("the header", 1 << 24);
}

void TensorFileReader::bytes(void* dst, std::size_t n, const char* what) {
  in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
  if (static_cast<std::size_t>(in_.gcount()) != n)
    throw Error(path_ + ": truncated " + what_ + " file (while reading " + what + ")",
                "the file is incomplete; write it again");
}

void TensorFileReader::check_left(std::int64_t n, const char* what) {
  const std::int64_t at = static_cast<std::int64_t>(in_.tellg());
  if (at < 0 || n > size_ - at)
    throw Error(path_ + ": truncated " + what_ + " file (" + what + " declares " + std::to_string(n) +
                    " bytes, " + std::to_string(at < 0 ? 0 : size_ - at) + " are left)",
                "the file is incomplete or corrupt; write it again");
}

std::uint32_t TensorFileReader::u32(const char* what) {
  std::uint32_t v = 0;
  bytes(&v, 4, what);
  return v;
}

std::string TensorFileReader::str(const char* what, std::uint32_t max_len) {
  const std::uint32_t n = u32(what);
  if (n > max_len) throw Error(path_ + ": corrupt " + what_ + " file (" + what + " too long)");
  check_left(n, what);
  std::string s(n, '\0');
  bytes(s.data(), n, what);
  return s;
}

void TensorFileReader::read_each(const Place& place,
                                 const std::function<void(std::uint32_t count)>& start) {
  const std::uint32_t count = u32("the tensor count");
  if (count > 100000) throw Error(path_ + ": corrupt " + what_ + " file (tensor count " +
                                  std::to_string(count) + ")");
  if (start) start(count);
  std::vector<std::int64_t> sizes;
  for (std::uint32_t n = 0; n < count; ++n) {
    const std::string name = str("a tensor name", 1024);
    const std::uint32_t ndim = u32("a tensor rank");
    if (ndim > 8) throw Error(path_ + ": corrupt tensor rank for '" + name + "'");
    sizes.assign(ndim, 0);
    bytes(sizes.data(), 8 * ndim, "tensor sizes");
    std::int64_t numel = 1;
    for (std::int64_t s : sizes) {
      if (s < 0 || s > (std::int64_t{1} << 31) || numel * s > (std::int64_t{1} << 31))
        throw Error(path_ + ": corrupt tensor sizes for '" + name + "'",
                    "the file is corrupt or was written by another version");
      numel *= s;
    }
    // Sizes come from the file: what it declares must be there before it is allocated (a
    // 100-byte file declaring 2^31 values asked for 8 GiB).
    check_left(4 * numel, name.c_str());
    float* data = place(name, sizes, numel);
    bytes(data, static_cast<std::size_t>(numel) * 4, name.c_str());
    if (!kernels::all_finite(data, static_cast<std::size_t>(numel)))
      throw Error(path_ + ": tensor '" + name + "' holds NaN or infinite values",
                  "the file is corrupt; write it again");
  }
  char end[4];
  bytes(end, 4, "the end marker");
  if (std::memcmp(end, "END!", 4) != 0)
    throw Error(path_ + ": corrupt " + what_ + " file (missing end marker)");
}

std::vector<TensorFileReader::Tensor> TensorFileReader::read_all() {
  std::vector<Tensor> all;
  read_each([&](const std::string& name, const std::vector<std::int64_t>& sizes, std::int64_t numel) {
    all.push_back({name, sizes, std::vector<float>(static_cast<std::size_t>(numel))});
    return all.back().data.data();
  });
  return all;
}

}  // namespace waco::learned
