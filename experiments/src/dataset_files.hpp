// The dataset's export files (gzip JSON lines, one measurement group per line; `dataset export`
// writes them) and where the groups for training come from: a database or export files, by
// default the committed dataset (data/dataset/*.jsonl.gz of the source tree).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace waco::cli {

/// The committed dataset: every *.jsonl.gz of the source tree's data/dataset folder, sorted.
std::vector<std::string> committed_exports();
/// The folder committed_exports() reads.
std::string committed_dataset_dir();

/// Calls `fn` with every group of an export file (gzip or plain text, blank lines skipped) and
/// returns how many. A line that is not JSON, or for which fn throws kernels::Error, gives
/// kernels::Error "<path>:<line>: ..."; a truncated or corrupt gzip stream gives an Error too.
std::int64_t for_each_export_group(const std::string& path,
                                   const std::function<void(const nlohmann::json&)>& fn);

/// The groups of one kernel from a database (when `db` is not empty) or from export files
/// (`files`, or the committed dataset when empty). `described` receives a short description of
/// the source. Throws kernels::Error when there is no source.
std::vector<nlohmann::json> load_groups(const std::string& kernel, const std::string& db,
                                        const std::vector<std::string>& files,
                                        std::string* described = nullptr);

}  // namespace waco::cli
