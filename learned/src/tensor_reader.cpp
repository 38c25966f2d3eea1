#include "tensor_reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "waco/kernels/error.hpp"
#include "waco/kernels/values.hpp"

namespace waco::learned {

using kernels::Error;

TensorFileReader::TensorFileReader(const std::string& path, const char (&magic)[8],
                                   TensorFileVersions versions, std::string what)
    : path_(path), what_(std::move(what)) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot open " + what_ + " file '" + path + "'",
                "check the path; the file is written by waco-hybrid");
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  void* p = MAP_FAILED;
  if (regular && st.st_size > 0)
    p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping stays
  if (!regular || (st.st_size > 0 && p == MAP_FAILED))
    throw Error("cannot read " + what_ + " file '" + path + "'", "check the path and the file");
  size_ = static_cast<std::int64_t>(st.st_size);
  if (p != MAP_FAILED) {
    const std::size_t n = static_cast<std::size_t>(st.st_size);
    map_ =
        std::shared_ptr<const void>(p, [n](const void* q) { ::munmap(const_cast<void*>(q), n); });
    data_ = static_cast<const unsigned char*>(p);
  }
  if (size_ < 8 || std::memcmp(data_, magic, 8) != 0)
    throw Error(path + ": not a " + what_ + " file (bad magic bytes)",
                "pass a file written by waco-hybrid for this purpose");
  at_ = 8;
  const std::uint32_t v = u32("the format version");
  if (v < versions.oldest || v > versions.version)
    throw Error(
        path + ": " + what_ + " format version " + std::to_string(v) +
            " is not supported (this build reads version" +
            (versions.oldest == versions.version ? " " + std::to_string(versions.version)
                                                 : "s " + std::to_string(versions.oldest) + " to " +
                                                       std::to_string(versions.version)) +
            ")",
        "re-create the file with this version of waco-hybrid");
  padded_ = versions.padded(v);
  header_ = str("the header", 1 << 24);
}

void TensorFileReader::bytes(void* dst, std::size_t n, const char* what) {
  if (static_cast<std::int64_t>(n) > size_ - at_)
    throw Error(path_ + ": truncated " + what_ + " file (while reading " + what + ")",
                "the file is incomplete; write it again");
  if (n > 0) std::memcpy(dst, data_ + at_, n);
  at_ += static_cast<std::int64_t>(n);
}

void TensorFileReader::check_left(std::int64_t n, const char* what) {
  if (n > size_ - at_)
    throw Error(path_ + ": truncated " + what_ + " file (" + what + " declares " +
                    std::to_string(n) + " bytes, " + std::to_string(size_ - at_) + " are left)",
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

void TensorFileReader::each(const std::function<void(std::uint32_t count)>& start,
                            const Bytes& values_at) {
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
    if (padded_) {  // the values start on a 64-byte line, after zeros
      const std::uint32_t pad = u32("a tensor's padding");
      check_left(pad, name.c_str());
      bool zeros = pad < kTensorAlignBytes;
      for (std::uint32_t i = 0; zeros && i < pad; ++i) zeros = data_[at_ + i] == 0;
      at_ += pad;
      if (!zeros || at_ % static_cast<std::int64_t>(kTensorAlignBytes) != 0)
        throw Error(path_ + ": corrupt padding before tensor '" + name + "'",
                    "the file is corrupt or was written by another version");
    }
    // Sizes come from the file: what it declares must be there before anything is allocated
    // for it (a 100-byte file declaring 2^31 values asked for 8 GiB).
    check_left(4 * numel, name.c_str());
    values_at(name, sizes, numel, data_ + at_);
    at_ += 4 * numel;
  }
  char end[4];
  bytes(end, 4, "the end marker");
  if (std::memcmp(end, "END!", 4) != 0)
    throw Error(path_ + ": corrupt " + what_ + " file (missing end marker)");
}

void TensorFileReader::read_each(const Place& place,
                                 const std::function<void(std::uint32_t count)>& start) {
  each(start, [&](const std::string& name, const std::vector<std::int64_t>& sizes,
                  std::int64_t numel, const unsigned char* values) {
    float* data = place(name, sizes, numel);
    const std::size_t n = static_cast<std::size_t>(numel);
    std::memcpy(data, values, n * sizeof(float));
    check_finite(name, data, n);
  });
}

void TensorFileReader::check_finite(const std::string& name, const float* values,
                                    std::size_t n) const {
  if (!kernels::all_finite(values, n))
    throw Error(path_ + ": tensor '" + name + "' holds NaN or infinite values",
                "the file is corrupt; write it again");
}

void TensorFileReader::view_each(const View& view) {
  if (!padded_)
    throw kernels::InternalError(path_ + ": view_each on a file whose values are not padded");
  each({}, [&](const std::string& name, const std::vector<std::int64_t>& sizes, std::int64_t numel,
               const unsigned char* at) {
    // 64-byte aligned in a page-aligned mapping: each() checked the padding.
    const auto* values = reinterpret_cast<const float*>(at);
    check_finite(name, values, static_cast<std::size_t>(numel));
    view(name, sizes, numel, values);
  });
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
