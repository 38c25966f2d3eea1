// Unit "model_file": what a cost model file's header says before the model is loaded: whether it
// runs without LibTorch (CostModel::check_backend, asked by every tune and plan before any work).
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <string>

#include "support/test_paths.hpp"
#include "waco/learned/backend.hpp"
#include "waco/learned/cost_model.hpp"

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
