// What ships with the tool and where it is found at run time: the default cost models
// (data/models) and the committed dataset (data/dataset, gzip JSON lines, one measurement group a
// line; `dataset export` writes them). The CLI, libwaco and the tune pipeline look them up here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/kernel.hpp"

namespace waco::learned {

/// A folder installed with the tool: kernels::shipped_dir (<prefix>/share/waco-hybrid/<name>, the
/// prefix found from the module holding this code), else `source_dir` (the build tree's source
/// folder).
std::string shipped_dir(const std::string& name, const std::string& source_dir);

/// The folder of the shipped models and a kernel's default model in it: $WACO_MODELS_DIR when
/// set, else the installed copy (shipped_dir), else <source>/data/models.
/// In double precision the kernel's f64 model (<kernel>-f64.model, trained on double timings)
/// where one is shipped, else the kernel's model.
std::string models_dir();
std::string default_model_path(kernels::KernelKind k, kernels::Dtype dtype = kernels::Dtype::F32);
/// `path`, or when empty the shipped model of kernel k for `dtype`; a missing shipped model is a
/// clear error saying how to train one.
std::string model_path_or_default(const std::string& path, kernels::KernelKind k,
                                  kernels::Dtype dtype = kernels::Dtype::F32);
/// The schedules as the model is asked about them: on `cores` threads, the setting of its
/// training data (collect times every schedule on all cores). A serial schedule (threads = 1,
/// which parallelize-one keeps for tiny kernels) is scored as its all-core twin, so that a search
/// measures both and measurement picks the thread count. `serial` counts those.
std::vector<codegen::SuperSchedule> as_model_sees(std::vector<codegen::SuperSchedule> list,
                                                  int cores, std::size_t* serial = nullptr);

/// The committed dataset: every *.jsonl.gz of the shipped dataset folder, sorted.
std::vector<std::string> committed_exports();
/// The folder committed_exports() reads (empty when the build knows none).
std::string committed_dataset_dir();
/// Calls `fn` with every group of an export file (gzip or plain text, blank lines skipped) and
/// returns how many. A line that is not JSON, or for which fn throws kernels::Error, gives
/// kernels::Error "<path>:<line>: ..."; a truncated or corrupt gzip stream gives an Error too.
std::int64_t for_each_export_group(const std::string& path,
                                   const std::function<void(const nlohmann::json&)>& fn);

}  // namespace waco::learned
