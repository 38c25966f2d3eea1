// tune's report: the text form printed from the JSON form (one source for both, so that the text
// can never say what the JSON does not). The JSON is what `tune --json` prints.
#pragma once

#include <nlohmann/json.hpp>

namespace waco::cli {

/// Prints the human-readable summary of a tune report (tune --json's object) on stdout.
void print_tune_text(const nlohmann::json& report);

}  // namespace waco::cli
