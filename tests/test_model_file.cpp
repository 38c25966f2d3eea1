// Unit "model_file": what a cost model file's header says before the model is loaded: whether it
// runs without LibTorch (CostModel::check_backend, asked by every tune and plan before any work);
// the file's versions (2: values padded and used where they lie; 1: copied) loading alike.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/test_paths.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/learned/backend.hpp"
#include "waco/learned/cost_model.hpp"
#include "waco/learned/shipped.hpp"

namespace {

/// A cost model file of `header` and no tensors (enough for check_backend, not for load).
std::string model_file(const std::string& dir, const std::string& name, const std::string& header) {
  const std::string path = dir + "/" + name;
  std::ofstream f(path, std::ios::binary);
  f.write("WACOCOST", 8);
  const std::uint32_t version = waco::learned::kCostModelFormatVersion;
  const auto n = static_cast<std::uint32_t>(header.size());
  f.write(reinterpret_cast<const char*>(&version), 4);
  f.write(reinterpret_cast<const char*>(&n), 4);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  return path;
}

}  // namespace

TEST_CASE("model_file: check_backend reads the encoder from the header, wherever config is") {
  const std::string dir = waco::test::scratch_dir("model-file");
  using waco::learned::CostModel;
  const std::string record = R"("record":{"history":[{"epoch":1,"val_spearman":0.5}],"encoder":"waconet"})";
  // The shipped encoders run in every build; "config" first as train writes it, or after the
  // record (whose own "encoder" key is not the config's).
  CHECK_NOTHROW(CostModel::check_backend(model_file(
      dir, "sig.model", R"({"config":{"encoder":"signature","kernel":"spmv"},)" + record + "}")));
  CHECK_NOTHROW(CostModel::check_backend(model_file(
      dir, "late.model", "{" + record + R"(,"config":{"kernel":"spmv","encoder":"stats"}})")));
  // A header that does not parse, or no file: load() reports it, not check_backend.
  CHECK_NOTHROW(CostModel::check_backend(model_file(dir, "bad.model", R"({"config":{"enc)")));
  CHECK_NOTHROW(CostModel::check_backend(dir + "/none.model"));
  const std::string waconet =
      model_file(dir, "wn.model", R"({"config":{"encoder":"waconet","kernel":"spmv"}})");
  if (waco::learned::built_with_torch()) {
    CHECK_NOTHROW(CostModel::check_backend(waconet));
  } else {
    CHECK_THROWS_AS(CostModel::check_backend(waconet), waco::learned::TorchRequired);
    CHECK_THROWS_AS(CostModel::check_backend(waconet), waco::learned::TorchRequired);  // every time
    CHECK_THROWS_AS(
        CostModel::check_backend(model_file(dir, "late-wn.model", "{" + record +
                                                R"(,"config":{"kernel":"spmv","encoder":"waconet"}})")),
        waco::learned::TorchRequired);
  }
}

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint32_t u32_at(const std::string& b, std::size_t at) {
  std::uint32_t v = 0;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}

/// A padded (version 2) model file's bytes as version 1 (no padding); `pad_offsets` gets where
/// each tensor's padding length was.
std::string unpadded(const std::string& b, std::vector<std::size_t>& pad_offsets) {
  REQUIRE(u32_at(b, 8) == 2);
  std::string out = b.substr(0, 12);
  const std::uint32_t version = 1;
  out.replace(8, 4, reinterpret_cast<const char*>(&version), 4);
  std::size_t at = 12;
  const std::uint32_t header = u32_at(b, at);
  out += b.substr(at, 8 + header);  // the header and the tensor count
  const std::uint32_t count = u32_at(b, at + 4 + header);
  at += 8 + header;
  for (std::uint32_t t = 0; t < count; ++t) {
    const std::uint32_t name = u32_at(b, at);
    const std::uint32_t ndim = u32_at(b, at + 4 + name);
    std::int64_t numel = 1;
    for (std::uint32_t d = 0; d < ndim; ++d) {
      std::int64_t s = 0;
      std::memcpy(&s, b.data() + at + 8 + name + 8 * d, 8);
      numel *= s;
    }
    const std::size_t sizes_end = at + 8 + name + 8 * ndim;
    out += b.substr(at, sizes_end - at);
    pad_offsets.push_back(sizes_end);
    const std::uint32_t pad = u32_at(b, sizes_end);
    const std::size_t values = sizes_end + 4 + pad;
    CHECK(values % 64 == 0);  // each tensor's values start on a 64-byte line
    out += b.substr(values, static_cast<std::size_t>(4 * numel));
    at = values + static_cast<std::size_t>(4 * numel);
  }
  CHECK(b.substr(at) == "END!");
  return out + "END!";
}

}  // namespace

TEST_CASE(
    "model_file: a padded model (version 2, used where it lies) and its unpadded version 1 "
    "(copied) rank alike and damaged padding or another version is refused") {
  using waco::learned::CostModel;
  const std::string dir = waco::test::scratch_dir("model-file-versions");
  const std::string shipped = waco::learned::default_model_path(waco::kernels::KernelKind::SpMV);
  const std::string v2 = file_bytes(shipped);
  std::vector<std::size_t> pads;
  const std::string v1 = unpadded(v2, pads);
  REQUIRE(pads.size() > 10);
  CHECK(v1.size() < v2.size());
  std::ofstream(dir + "/v1.model", std::ios::binary) << v1;
  waco::kernels::GeneratorSpec g;
  g.kind = "powerlaw";
  g.rows = 2000;
  g.nnz = 20000;
  const waco::kernels::CooMatrix a = waco::kernels::generate(g);
  std::vector<waco::codegen::SuperSchedule> list;
  for (const char* text : {"csr", "order=i,k format=UC parallel=i threads=2 chunk=static",
                           "split=i:128 order=i1,i0,k format=UUC parallel=i1 threads=2 chunk=2"})
    list.push_back(waco::codegen::schedule_from_string(waco::kernels::KernelKind::SpMV, text));
  const CostModel mapped = CostModel::load(shipped);
  const CostModel copied = CostModel::load(dir + "/v1.model");
  const std::vector<double> scores = mapped.scores(mapped.prepare(a), list);
  CHECK(copied.scores(copied.prepare(a), list) == scores);
  // A padding byte that is not zero, a padding length of 64 or more: corrupt.
  std::string dirty = v2;
  dirty[pads[3] + 4] = '\x01';
  if (u32_at(v2, pads[3]) == 0)
    dirty = v2.substr(0, pads[3]) + std::string("\x05\0\0\0", 4) + v2.substr(pads[3] + 4);
  std::ofstream(dir + "/dirty.model", std::ios::binary) << dirty;
  CHECK_THROWS_WITH(CostModel::load(dir + "/dirty.model"), Catch::Contains("corrupt padding"));
  // A version this build does not read.
  std::string v3 = v2;
  const std::uint32_t three = 3;
  v3.replace(8, 4, reinterpret_cast<const char*>(&three), 4);
  std::ofstream(dir + "/v3.model", std::ios::binary) << v3;
  CHECK_THROWS_WITH(CostModel::load(dir + "/v3.model"), Catch::Contains("reads versions 1 to 2"));
  // Cut inside a tensor's padding or values: truncated.
  std::ofstream(dir + "/cut.model", std::ios::binary) << v2.substr(0, pads.back() + 2);
  CHECK_THROWS_WITH(CostModel::load(dir + "/cut.model"), Catch::Contains("truncated"));
  // An empty file, a folder: no model.
  std::ofstream(dir + "/empty.model", std::ios::binary).flush();
  CHECK_THROWS_WITH(CostModel::load(dir + "/empty.model"), Catch::Contains("bad magic"));
  CHECK_THROWS_WITH(CostModel::load(dir), Catch::Contains("cannot read"));
}
