// make_runner (runner.hpp): the Runner a spec names.
#include "waco/heuristics/runner.hpp"

#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/scripted_runner.hpp"
#include "waco/kernels/error.hpp"

namespace waco::heuristics {

std::unique_ptr<Runner> make_runner(const std::string& spec, const kernels::Problem& p,
                                    const kernels::Reference& ref, MeasureOptions opts) {
  if (spec.empty() || spec == "isolated")
    return std::make_unique<Measurer>(p, ref, std::move(opts));
  const std::string scripted = "scripted:";
  if (spec.compare(0, scripted.size(), scripted) == 0)
    return std::make_unique<ScriptedRunner>(RunnerScript::load(spec.substr(scripted.size())),
                                            std::move(opts));
  throw kernels::Error("unknown runner '" + spec + "'",
                       "'isolated' (the default: measured in child processes) or scripted:FILE");
}

}  // namespace waco::heuristics
