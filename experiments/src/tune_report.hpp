// tune's report: the text form printed from the JSON form (one source for both, so that the text
// can never say what the JSON does not). The JSON is what `tune --json` prints.
#pragma once

#include <nlohmann/json.hpp>

namespace waco::cli {

/// Prints the human-readable summary of a tune report (tune --json's object) on stdout.
void print_tune_text(const nlohmann::json& report);

/// Whether the report's fresh runs found the csr schedule and the csr baseline tied (its
/// decision's faster_reference "tie"): a no-gain's baseline then serves because a tie goes to
/// it (tune/src/decide.cpp), not because it ran faster.
bool references_tied(const nlohmann::json& report);

/// What an adaptive plan's speedup was measured on, from its report's "adaptive" object:
/// "rechecked in blocks of its calls" once a recheck held (speedup_from "rechecks"), else
/// "judged on its calls".
const char* adaptive_speedup_basis(const nlohmann::json& adaptive);

}  // namespace waco::cli
