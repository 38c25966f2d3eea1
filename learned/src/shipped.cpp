// The shipped models and dataset (shipped.hpp).
#include "waco/learned/shipped.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"

#ifndef WACO_MODELS_DIR
#define WACO_MODELS_DIR ""
#endif
#ifndef WACO_DATASET_DIR
#define WACO_DATASET_DIR ""
#endif

namespace waco::learned {

using kernels::Error;
namespace fs = std::filesystem;

std::string shipped_dir(const std::string& name, const std::string& source_dir) {
  return kernels::shipped_dir(name, source_dir);
}

std::string models_dir() {
  if (const char* env = std::getenv("WACO_MODELS_DIR"); env != nullptr && *env != '\0') return env;
  return shipped_dir("models", WACO_MODELS_DIR);
}

std::string default_model_path(kernels::KernelKind k, kernels::Dtype dtype) {
  const fs::path dir = models_dir();
  const std::string name(kernels::kernel_name(k));
  if (dtype == kernels::Dtype::F64) {
    const fs::path f64 = dir / (name + "-f64.model");
    std::error_code ec;
    if (fs::exists(f64, ec)) return f64.string();
  }
  return (dir / (name + ".model")).string();
}

std::string model_path_or_default(const std::string& path, kernels::KernelKind k,
                                  kernels::Dtype dtype) {
  if (!path.empty()) return path;
  const std::string d = default_model_path(k, dtype);
  std::error_code ec;
  if (!fs::exists(d, ec)) {
    const std::string name(kernels::kernel_name(k));
    throw Error("no shipped cost model for " + name + " (" + d + " does not exist)",
                "train one (waco-hybrid train --kernel " + name + " --db D -o M) and pass --model M");
  }
  return d;
}

std::vector<codegen::SuperSchedule> as_model_sees(std::vector<codegen::SuperSchedule> list,
                                                  int cores, std::size_t* serial) {
  std::size_t n = 0;
  for (codegen::SuperSchedule& s : list) {
    n += s.threads == 1 && cores > 1;
    s.threads = cores;
  }
  if (serial) *serial = n;
  return list;
}

std::string committed_dataset_dir() {
  return std::string(WACO_DATASET_DIR).empty() ? std::string()
                                               : shipped_dir("dataset", WACO_DATASET_DIR);
}

std::vector<std::string> committed_exports() {
  std::vector<std::string> out;
  const fs::path dir = committed_dataset_dir();
  std::error_code ec;
  if (!dir.empty() && fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 9 && name.compare(name.size() - 9, 9, ".jsonl.gz") == 0)
        out.push_back(e.path().string());
    }
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t for_each_export_group(const std::string& path,
                                   const std::function<void(const nlohmann::json&)>& fn) {
  gzFile in = gzopen(path.c_str(), "rb");
  if (!in) throw Error("cannot read the dataset export " + path, "check the path");
  std::string line;
  std::int64_t n = 0, lineno = 0;
  char buf[1 << 16];
  for (;;) {
    line.clear();
    bool got = false;
    while (gzgets(in, buf, sizeof buf)) {
      got = true;
      line += buf;
      if (!line.empty() && line.back() == '\n') break;
    }
    if (!got) break;
    ++lineno;
    if (line.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    try {
      fn(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      gzclose(in);
      throw Error(path + ":" + std::to_string(lineno) + ": not JSON: " + e.what());
    } catch (const Error& e) {
      gzclose(in);
      throw Error(path + ":" + std::to_string(lineno) + ": " + e.what(), e.hint());
    }
    ++n;
  }
  const bool ok = gzclose(in) == Z_OK;
  if (!ok) throw Error("the dataset export " + path + " is truncated or corrupt", "collect it again");
  return n;
}

}  // namespace waco::learned
