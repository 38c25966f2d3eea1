// Where the groups for training come from: a database or export files, by default the
// committed dataset (learned/shipped.hpp reads the export files).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "waco/kernels/values.hpp"

namespace waco::cli {

/// The groups of one kernel and value type (every type when `dtype` is none) from a database
/// (when `db` is not empty) or from export files (`files`, or the committed dataset when empty). `described` receives a short
/// description of the source. Throws kernels::Error when there is no source.
std::vector<nlohmann::json> load_groups(const std::string& kernel, const std::string& db,
                                        const std::vector<std::string>& files,
                                        std::string* described = nullptr,
                                        std::optional<kernels::Dtype> dtype = kernels::Dtype::F32);

}  // namespace waco::cli
