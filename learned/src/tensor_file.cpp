#include "tensor_file.hpp"

#include <cstdio>
#include <cstring>

#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"

namespace waco::learned {
namespace {

using kernels::Error;

void write_u32(std::ostream& os, std::uint32_t v) { os.write(reinterpret_cast<char*>(&v), 4); }
void write_str(std::ostream& os, const std::string& s) {
  write_u32(os, static_cast<std::uint32_t>(s.size()));
  os.write(s.data(), static_cast<std::streamsize>(s.size()));
}

}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> module_tensors(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> all;
  for (const auto& kv : m.named_parameters()) all.emplace_back(kv.key(), kv.value());
  for (const auto& kv : m.named_buffers()) all.emplace_back(kv.key(), kv.value());
  return all;
}

void write_tensor_file(const std::string& path, const char (&magic)[8], std::uint32_t version,
                       const std::string& header,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  kernels::check_writable(path);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    if (!os) throw Error("cannot write '" + tmp + "'", "check that the directory is writable");
    os.write(magic, 8);
    write_u32(os, version);
    write_str(os, header);
    write_u32(os, static_cast<std::uint32_t>(tensors.size()));
    for (const auto& [name, t] : tensors) {
      write_str(os, name);
      write_u32(os, static_cast<std::uint32_t>(t.dim()));
      for (auto s : t.sizes()) {
        const std::int64_t v = s;
        os.write(reinterpret_cast<const char*>(&v), 8);
      }
      const auto c = t.detach().to(torch::kFloat).contiguous();
      os.write(reinterpret_cast<const char*>(c.data_ptr<float>()),
               static_cast<std::streamsize>(c.numel() * 4));
    }
    os.write("END!", 4);
    os.flush();
    if (!os) throw Error("write to '" + tmp + "' failed", "check free disk space");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error("cannot rename '" + tmp + "' to '" + path + "'");
}

TensorFileReader::TensorFileReader(const std::string& path, const char (&magic)[8],
                                   std::uint32_t version, std::string what)
    : path_(path), what_(std::move(what)), in_(path, std::ios::binary) {
  if (!in_)
    throw Error("cannot open " + what_ + " file '" + path + "'",
                "check the path; the file is written by waco-hybrid");
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

std::uint32_t TensorFileReader::u32(const char* what) {
  std::uint32_t v = 0;
  bytes(&v, 4, what);
  return v;
}

std::string TensorFileReader::str(const char* what, std::uint32_t max_len) {
  const std::uint32_t n = u32(what);
  if (n > max_len) throw Error(path_ + ": corrupt " + what_ + " file (" + what + " too long)");
  std::string s(n, '\0');
  bytes(s.data(), n, what);
  return s;
}

void TensorFileReader::read_into(std::map<std::string, torch::Tensor> want) {
  const std::uint32_t count = u32("the tensor count");
  if (count != want.size())
    throw Error(path_ + ": holds " + std::to_string(count) + " tensors, the architecture needs " +
                    std::to_string(want.size()),
                "the file is corrupt or was written by another version");
  torch::NoGradGuard guard;
  for (std::uint32_t n = 0; n < count; ++n) {
    const std::string name = str("a tensor name", 1024);
    auto it = want.find(name);
    if (it == want.end())
      throw Error(path_ + ": unexpected tensor '" + name + "'",
                  "the file is corrupt or was written by another version");
    const std::uint32_t ndim = u32("a tensor rank");
    if (ndim > 8) throw Error(path_ + ": corrupt tensor rank for '" + name + "'");
    std::vector<std::int64_t> sizes(ndim);
    bytes(sizes.data(), 8 * ndim, "tensor sizes");
    if (sizes != it->second.sizes().vec())
      throw Error(path_ + ": tensor '" + name + "' has the wrong shape for the architecture",
                  "the file is corrupt or was written by another version");
    auto data = torch::empty(sizes, torch::kFloat);
    bytes(data.data_ptr<float>(), static_cast<std::size_t>(data.numel()) * 4, name.c_str());
    if (!torch::isfinite(data).all().item<bool>())
      throw Error(path_ + ": tensor '" + name + "' holds NaN or infinite values",
                  "the file is corrupt; write it again");
    it->second.copy_(data);
    want.erase(it);
  }
  char end[4];
  bytes(end, 4, "the end marker");
  if (std::memcmp(end, "END!", 4) != 0)
    throw Error(path_ + ": corrupt " + what_ + " file (missing end marker)");
}

}  // namespace waco::learned
