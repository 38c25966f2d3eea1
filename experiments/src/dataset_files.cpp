#include "dataset_files.hpp"

#include <zlib.h>

#include <algorithm>
#include <filesystem>

#include "cli_common.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/error.hpp"

#ifndef WACO_DATASET_DIR
#define WACO_DATASET_DIR ""
#endif

namespace waco::cli {

using kernels::Error;
namespace fs = std::filesystem;

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

std::vector<nlohmann::json> load_groups(const std::string& kernel, const std::string& db,
                                        const std::vector<std::string>& files,
                                        std::string* described) {
  std::vector<nlohmann::json> out;
  if (!db.empty()) {
    std::error_code ec;
    if (!fs::exists(db, ec))
      throw Error("no database at " + db, "give the database `waco-hybrid collect` wrote");
    heuristics::ResultsDb r(db);
    r.for_each_group(kernel, [&](const nlohmann::json& g) { out.push_back(g); });
    if (described) *described = db;
    return out;
  }
  const std::vector<std::string> list = files.empty() ? committed_exports() : files;
  if (list.empty())
    throw Error("no measurements: no --db, no export files, and no committed dataset in " +
                    committed_dataset_dir(),
                "give --db FILE (from waco-hybrid collect) or export files");
  for (const std::string& f : list)
    for_each_export_group(f, [&](const nlohmann::json& g) {
      if (g.value("kernel", std::string()) == kernel) out.push_back(g);
    });
  if (described) *described = std::to_string(list.size()) + " export file(s)";
  return out;
}

}  // namespace waco::cli
