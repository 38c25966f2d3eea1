#include "dataset_files.hpp"

#include <algorithm>
#include <filesystem>

#include "cli_common.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/kernels/error.hpp"
#include "waco/learned/shipped.hpp"


namespace waco::cli {

using kernels::Error;
namespace fs = std::filesystem;

std::vector<nlohmann::json> load_groups(const std::string& kernel, const std::string& db,
                                        const std::vector<std::string>& files,
                                        std::string* described,
                                        std::optional<kernels::Dtype> dtype) {
  std::vector<nlohmann::json> out;
  const std::string want = dtype ? std::string(kernels::dtype_name(*dtype)) : std::string();
  const auto keep = [&](const nlohmann::json& g) {
    return g.value("kernel", std::string()) == kernel &&
           (!dtype || g.value("dtype", std::string("f32")) == want);
  };
  if (!db.empty()) {
    std::error_code ec;
    if (!fs::exists(db, ec))
      throw Error("no database at " + db, "give the database `waco-hybrid collect` wrote");
    heuristics::ResultsDb r(db);
    r.for_each_group(kernel, [&](const nlohmann::json& g) {
      if (keep(g)) out.push_back(g);
    });
    if (described) *described = db;
    return out;
  }
  const std::vector<std::string> list = files.empty() ? learned::committed_exports() : files;
  if (list.empty())
    throw Error("no measurements: no --db, no export files, and no committed dataset in " +
                    learned::committed_dataset_dir(),
                "give --db FILE (from waco-hybrid collect) or export files");
  for (const std::string& f : list)
    learned::for_each_export_group(f, [&](const nlohmann::json& g) {
      if (keep(g)) out.push_back(g);
    });
  if (described) *described = std::to_string(list.size()) + " export file(s)";
  return out;
}

}  // namespace waco::cli
