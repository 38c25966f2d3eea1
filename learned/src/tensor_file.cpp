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

void write_tensor_file(const std::string& path, const char (&magic)[8], TensorFileVersions versions,
                       const std::string& header,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  kernels::check_writable(path);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    if (!os) throw Error("cannot write '" + tmp + "'", "check that the directory is writable");
    os.write(magic, 8);
    write_u32(os, versions.version);
    write_str(os, header);
    write_u32(os, static_cast<std::uint32_t>(tensors.size()));
    for (const auto& [name, t] : tensors) {
      write_str(os, name);
      write_u32(os, static_cast<std::uint32_t>(t.dim()));
      for (auto s : t.sizes()) {
        const std::int64_t v = s;
        os.write(reinterpret_cast<const char*>(&v), 8);
      }
      if (versions.padded(versions.version)) {  // the values start on a 64-byte line
        const auto at = static_cast<std::size_t>(os.tellp()) + 4;
        const std::size_t pad = (kTensorAlignBytes - at % kTensorAlignBytes) % kTensorAlignBytes;
        write_u32(os, static_cast<std::uint32_t>(pad));
        const char zeros[kTensorAlignBytes] = {};
        os.write(zeros, static_cast<std::streamsize>(pad));
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

void read_into(TensorFileReader& reader, std::map<std::string, torch::Tensor> want) {
  const std::vector<TensorFileReader::Tensor> all = reader.read_all();
  const std::string& path = reader.path();
  if (all.size() != want.size())
    throw Error(path + ": holds " + std::to_string(all.size()) +
                    " tensors, the architecture needs " + std::to_string(want.size()),
                "the file is corrupt or was written by another version");
  torch::NoGradGuard guard;
  for (const TensorFileReader::Tensor& t : all) {
    auto it = want.find(t.name);
    if (it == want.end())
      throw Error(path + ": unexpected tensor '" + t.name + "'",
                  "the file is corrupt or was written by another version");
    if (t.sizes != it->second.sizes().vec())
      throw Error(path + ": tensor '" + t.name + "' has the wrong shape for the architecture",
                  "the file is corrupt or was written by another version");
    it->second.copy_(torch::from_blob(const_cast<float*>(t.data.data()), t.sizes, torch::kFloat));
    want.erase(it);
  }
}

}  // namespace waco::learned
