// A Runner whose timings and statuses come from a script and a seed, not from running kernels
// (issue 34, step 1): the tune pipeline's branches (racing, side by side, fresh decision runs,
// budgets, no-gain, not-worth-it, failures) run without timing noise, in milliseconds, and the
// same script and seed give the same Measurements. Like hnswlib's brute-force twin of its graph
// index: the real Measurer (measure.hpp) is the one that measures; this one tests what is built
// on it. The script format is in heuristics/README.md ("ScriptedRunner").
//
// What it does like the Measurer: measure() makes options().warmup + options().repeats runs and
// races them against a RaceBound (after race_min_runs runs, beside the check reference when one
// is set); compare() probes every candidate twice when racing (baselines first, so that they set
// the group's fastest), abandons the hopeless ones (not those always timed), stops one whose
// verification or probe run overruns the screening deadline, then times the rest in `rounds`
// rounds; a crash or timeout in compare fails its candidate alone (as the Measurer's, whose
// child crashes or hangs on a kernel's first run, before the rounds).
// Where it differs: nothing is compiled, built or verified (a scripted wrong-result stands for
// a failed verification); no settle runs, retakes or hardware counters (the software counts are
// the script's `retaken` and `disturbed_kept`, 0 by default); wall_s is the sum of the runs made
// plus the script's overhead_s per candidate, not a clock reading.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "waco/heuristics/runner.hpp"

namespace waco::heuristics {

/// What the measurements of one candidate look like (a script's "default", overridden field by
/// field by the first rule matching the candidate's label).
struct ScriptedTiming {
  double median_s = 1e-4;  ///< the kernel's time per run
  /// A factor in [1 - spread, 1 + spread] per label, from the seed and the label's hash, on
  /// median_s: distinct kernels of one rule get distinct (fixed) times.
  double spread = 0.0;
  double jitter = 0.02;     ///< run-to-run noise: a factor in (1 - jitter, 1 + jitter), triangular
  double run_offset = 0.0;  ///< per call (one process): a factor in (1 - o, 1 + o) on every run
  double tail_prob = 0.0;   ///< probability that a run is slowed by tail_factor (heavy tail)
  double tail_factor = 3.0;
  MeasureStatus status = MeasureStatus::Ok;
  std::string reason;         ///< the failure's reason (a default names the script)
  int from_call = 1;          ///< the status holds from this call of the label on (1 = always)
  int retaken = 0;            ///< compare's counters: runs taken again, per call
  int disturbed_kept = 0;     ///< compare's counters: disturbed runs kept, per call
  double conversion_s = 0.0;  ///< the Measurement's conversion_s
  double overhead_s = 0.005;  ///< added to wall_s per candidate measured (child, compile cache)

  /// This timing with the fields that `j` holds replaced (unknown keys: kernels::Error).
  ScriptedTiming with(const nlohmann::json& j) const;
};

/// A script: a seed, the default timing, machine drift, and rules by label.
struct RunnerScript {
  struct Rule {
    std::string label;                  ///< exact Candidate::label(), or empty
    std::vector<std::string> contains;  ///< substrings the label must all hold, or empty
    nlohmann::json timing = nlohmann::json::object();  ///< fields overriding the default
    bool matches(const std::string& candidate_label) const;
  };
  std::uint64_t seed = 1;
  ScriptedTiming base;  ///< "default"
  /// Machine drift: a factor in (1 - drift, 1 + drift) per round of a compare() call (and per run
  /// of a measure() call), the same for every candidate of that round: what pairing cancels.
  double drift = 0.0;
  std::vector<Rule> rules;  ///< first match wins

  /// Kernels::Error naming the problem for a malformed script.
  static RunnerScript from_json(const nlohmann::json& j);
  /// from_json of a file; kernels::Error when it cannot be read or parsed.
  static RunnerScript load(const std::string& path);
  /// The timing of a label: the default, overridden by the first matching rule.
  ScriptedTiming timing(const std::string& label) const;
};

class ScriptedRunner : public Runner {
 public:
  ScriptedRunner(RunnerScript script, MeasureOptions opts);

  Measurement measure(const Candidate& c, const RaceBound& race = {}) override;
  std::vector<Measurement> compare(const std::vector<Candidate>& cs, int rounds,
                                   const CompareOptions& co = {}) override;
  const MeasureOptions& options() const override { return opts_; }
  int run_threads() const override { return run_threads_; }
  bool times_this_machine() const override { return false; }

  /// Calls of measure() and compare() so far; per label, calls that included it.
  std::int64_t calls() const { return calls_; }
  int calls_of(const std::string& label) const;

 private:
  struct Draw;  // the random draws of one call of one label
  Measurement start(const Candidate& c, const ScriptedTiming& t) const;

  RunnerScript script_;
  MeasureOptions opts_;
  int run_threads_ = 1;
  std::int64_t calls_ = 0;
  std::map<std::string, int> label_calls_;
};

}  // namespace waco::heuristics
