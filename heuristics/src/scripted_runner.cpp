// The scripted Runner (scripted_runner.hpp): times from a seeded script, racing and screening as
// the Measurer's child does (measure_child.cpp), without running anything.
#include "waco/heuristics/scripted_runner.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <limits>
#include <numeric>

#include "measure_internal.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

using detail::failed;
using detail::set_times;
using kernels::Error;

namespace {

// Stream tags: each kind of draw has its own, so that adding draws of one kind moves no other.
constexpr std::uint64_t kSpreadStream = 0x7370726561640001ull;
constexpr std::uint64_t kOffsetStream = 0x6f66667365740002ull;
constexpr std::uint64_t kTailStream = 0x7461696c00000003ull;
constexpr std::uint64_t kDriftStream = 0x6472696674000004ull;
// Run indices within one call of one label.
constexpr std::uint64_t kVerifyRun = 0;  // compare: the verification run; probes 1-2, again 3-4
constexpr std::uint64_t kMeasureRun = 10;
constexpr std::uint64_t kCheckRun = 500;
constexpr std::uint64_t kRoundRun = 1000;

/// A uniform double in [0, 1) from the seed and three keys (SplitMix64 chained: portable).
double uniform(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  const std::uint64_t x =
      kernels::splitmix64(kernels::splitmix64(kernels::splitmix64(seed ^ a) ^ b) ^ c);
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

/// A triangular value in (-1, 1): the sum of two uniforms, less 1.
double triangular(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return uniform(seed, a, b, 2 * c) + uniform(seed, a, b, 2 * c + 1) - 1.0;
}

double number(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number()) throw Error("runner script: '" + key + "' must be a number, not " + v.dump());
  return v.get<double>();
}

void check_range(bool ok, const std::string& key, const char* range) {
  if (!ok) throw Error("runner script: '" + key + "' must be " + range);
}

MeasureStatus status_at(const ScriptedTiming& t, int call) {
  return call >= t.from_call ? t.status : MeasureStatus::Ok;
}

/// A status that fails its candidate alone in compare(): also a crash or a hang, which the real
/// runner gives to the candidate the measuring child was preparing or first running (a kernel
/// that crashes or spins does so on its first run).
bool individual_failure(MeasureStatus s) {
  return s == MeasureStatus::Refused || s == MeasureStatus::CompileError ||
         s == MeasureStatus::WrongResult || s == MeasureStatus::Crashed ||
         s == MeasureStatus::Timeout;
}

double sum(const std::vector<double>& xs) { return std::accumulate(xs.begin(), xs.end(), 0.0); }

}  // namespace

ScriptedTiming ScriptedTiming::with(const nlohmann::json& j) const {
  static const std::pair<const char*, double ScriptedTiming::*> kNumbers[] = {
      {"median_s", &ScriptedTiming::median_s},
      {"spread", &ScriptedTiming::spread},
      {"jitter", &ScriptedTiming::jitter},
      {"run_offset", &ScriptedTiming::run_offset},
      {"tail_prob", &ScriptedTiming::tail_prob},
      {"tail_factor", &ScriptedTiming::tail_factor},
      {"conversion_s", &ScriptedTiming::conversion_s},
      {"overhead_s", &ScriptedTiming::overhead_s}};
  static const std::pair<const char*, int ScriptedTiming::*> kCounts[] = {
      {"from_call", &ScriptedTiming::from_call},
      {"retaken", &ScriptedTiming::retaken},
      {"disturbed_kept", &ScriptedTiming::disturbed_kept}};
  ScriptedTiming t = *this;
  if (!j.is_object()) throw Error("runner script: a timing must be an object, not " + j.dump());
  for (const auto& [key, v] : j.items()) {
    const auto named = [&key = key](const auto& field) { return key == field.first; };
    if (const auto* f = std::find_if(std::begin(kNumbers), std::end(kNumbers), named);
        f != std::end(kNumbers)) {
      t.*(f->second) = number(v, key);
    } else if (const auto* c = std::find_if(std::begin(kCounts), std::end(kCounts), named);
               c != std::end(kCounts)) {
      t.*(c->second) = static_cast<int>(number(v, key));
    } else if (key == "reason" && v.is_string()) {
      t.reason = v.get<std::string>();
    } else if (key == "status" && v.is_string()) {
      const auto st = parse_status(v.get<std::string>());
      if (!st)
        throw Error("runner script: unknown status " + v.dump(),
                    "ok, refused, compile-error, wrong-result, crashed, timeout, abandoned");
      t.status = *st;
    } else if (key != "comment" && key != "label" && key != "contains") {
      throw Error("runner script: unknown or mistyped field '" + key + "': " + v.dump(),
                  "see heuristics/README.md, \"ScriptedRunner\"");
    }
  }
  check_range(t.median_s > 0, "median_s", "> 0");
  check_range(t.spread >= 0 && t.spread < 1, "spread", "in [0, 1)");
  check_range(t.jitter >= 0 && t.jitter < 1, "jitter", "in [0, 1)");
  check_range(t.run_offset >= 0 && t.run_offset < 1, "run_offset", "in [0, 1)");
  check_range(t.tail_prob >= 0 && t.tail_prob <= 1, "tail_prob", "in [0, 1]");
  check_range(t.tail_factor >= 1, "tail_factor", ">= 1");
  check_range(t.from_call >= 1, "from_call", ">= 1");
  check_range(t.retaken >= 0 && t.disturbed_kept >= 0, "retaken and disturbed_kept", ">= 0");
  check_range(t.conversion_s >= 0 && t.overhead_s >= 0, "conversion_s and overhead_s", ">= 0");
  return t;
}

bool RunnerScript::Rule::matches(const std::string& candidate_label) const {
  if (!label.empty() && label != candidate_label) return false;
  return std::all_of(contains.begin(), contains.end(), [&](const std::string& s) {
    return candidate_label.find(s) != std::string::npos;
  });
}

RunnerScript RunnerScript::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("runner script: not a JSON object");
  RunnerScript s;
  for (const auto& [key, v] : j.items()) {
    if (key == "seed") {
      if (!v.is_number_unsigned()) throw Error("runner script: 'seed' must be an unsigned integer");
      s.seed = v.get<std::uint64_t>();
    } else if (key == "default") {
      s.base = s.base.with(v);
    } else if (key == "drift") {
      s.drift = number(v, key);
      check_range(s.drift >= 0 && s.drift < 1, "drift", "in [0, 1)");
    } else if (key == "rules") {
      if (!v.is_array()) throw Error("runner script: 'rules' must be an array");
      for (const nlohmann::json& r : v) {
        if (!r.is_object()) throw Error("runner script: a rule must be an object, not " + r.dump());
        Rule rule;
        if (const auto it = r.find("label"); it != r.end()) {
          if (!it->is_string()) throw Error("runner script: a rule's 'label' must be a string");
          rule.label = it->get<std::string>();
        }
        if (const auto it = r.find("contains"); it != r.end()) {
          if (it->is_string())
            rule.contains = {it->get<std::string>()};
          else if (it->is_array() &&
                   std::all_of(it->begin(), it->end(), [](const auto& x) { return x.is_string(); }))
            rule.contains = it->get<std::vector<std::string>>();
          else
            throw Error("runner script: a rule's 'contains' must be a string or strings");
        }
        if (rule.label.empty() && rule.contains.empty())
          throw Error("runner script: a rule needs 'label' or 'contains': " + r.dump(),
                      "the script's 'default' is what every other candidate gets");
        (void)s.base.with(r);  // checks its fields now, not at the first candidate it matches
        rule.timing = r;
        s.rules.push_back(std::move(rule));
      }
    } else if (key != "comment" && key != "format") {
      throw Error("runner script: unknown field '" + key + "'",
                  "fields: seed, default, drift, rules, comment (heuristics/README.md)");
    }
  }
  return s;
}

RunnerScript RunnerScript::load(const std::string& path) {
  if (!std::filesystem::is_regular_file(path))
    throw Error("cannot read the runner script " + path,
                "--runner scripted:FILE names a JSON file");
  try {
    return from_json(nlohmann::json::parse(kernels::read_text_file(path)));
  } catch (const nlohmann::json::exception& e) {
    throw Error("runner script " + path + " is not valid JSON: " + e.what());
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (in " + path + ")", e.hint());
  }
}

ScriptedTiming RunnerScript::timing(const std::string& label) const {
  for (const Rule& r : rules)
    if (r.matches(label)) return base.with(r.timing);
  return base;
}

/// The draws of one call of one label: its time (spread), this call's offset, and every run's
/// noise and tail, keyed by (seed, label, call, run) so that a label's times do not depend on
/// which other candidates were measured with it. `stream` separates a label's runs made for
/// another (racing's check reference inside a candidate's call).
struct ScriptedRunner::Draw {
  std::uint64_t seed;
  std::uint64_t label;
  std::uint64_t call;
  ScriptedTiming t;
  double median;
  double offset;

  Draw(std::uint64_t seed_, const std::string& label_text, int call_, ScriptedTiming t_,
       std::uint64_t stream = 0)
      : seed(seed_),
        label(kernels::fnv1a(label_text)),
        call(static_cast<std::uint64_t>(call_)),
        t(std::move(t_)) {
    median = t.median_s * (1.0 + t.spread * (2.0 * uniform(seed, label, kSpreadStream, 0) - 1.0));
    label ^= stream;
    offset = 1.0 + t.run_offset * triangular(seed, label, kOffsetStream, call);
  }

  /// Run k of this call, on a machine `machine` times slower than usual.
  double run(std::uint64_t k, double machine) const {
    double x = median * offset * machine * (1.0 + t.jitter * triangular(seed, label, call, k));
    if (t.tail_prob > 0 && uniform(seed, label, call ^ kTailStream, k) < t.tail_prob)
      x *= t.tail_factor;
    return std::max(x, median * 1e-3);
  }
};

ScriptedRunner::ScriptedRunner(RunnerScript script, MeasureOptions opts)
    : script_(std::move(script)), opts_(std::move(opts)) {
  WACO_ASSERT(opts_.repeats >= 1 && opts_.warmup >= 0 && opts_.race_min_runs >= 1,
              "ScriptedRunner needs repeats >= 1, warmup >= 0, race_min_runs >= 1");
  run_threads_ = opts_.threads > 0 ? opts_.threads : kernels::available_cpus();
}

int ScriptedRunner::calls_of(const std::string& label) const {
  const auto it = label_calls_.find(label);
  return it == label_calls_.end() ? 0 : it->second;
}

Measurement ScriptedRunner::start(const Candidate& c, const ScriptedTiming& t) const {
  Measurement m;
  m.warmup = opts_.warmup;
  m.repeats = opts_.repeats;
  m.threads = c.effective_threads(run_threads_);
  m.conversion_s = t.conversion_s;
  if (c.is_generated()) {
    m.cache_hit = true;
    m.kernel_source = "scripted";
  }
  return m;
}

namespace {
/// The scripted failure of a candidate, with the script's reason or a default one.
Measurement scripted_failure(const Measurement& m, MeasureStatus st, const ScriptedTiming& t) {
  Measurement f =
      failed(m, st, t.reason.empty() ? "scripted " + std::string(status_name(st)) : t.reason);
  if (st == MeasureStatus::WrongResult) f.max_rel_error = 1.0;
  return f;
}
}  // namespace

Measurement ScriptedRunner::measure(const Candidate& c, const RaceBound& race) {
  const std::string label = c.label();
  const int n = ++label_calls_[label];
  const std::uint64_t g = static_cast<std::uint64_t>(++calls_);
  const ScriptedTiming t = script_.timing(label);
  Measurement m = start(c, t);
  const MeasureStatus st = status_at(t, n);
  if (st != MeasureStatus::Ok && st != MeasureStatus::Abandoned) {
    m = scripted_failure(m, st, t);
    m.wall_s = t.overhead_s;
    return m;
  }
  const Draw d(script_.seed, label, n, t);
  const auto machine = [&](std::uint64_t k) {
    return 1.0 + script_.drift * triangular(script_.seed, kDriftStream, g, k);
  };
  // As measure_here: every run after the verification is clocked; racing once race_min_runs
  // runs are made and even the fastest is above the bound.
  std::vector<double> runs, timed;
  double fastest = std::numeric_limits<double>::infinity();
  bool racing = race.active();
  const int total = opts_.warmup + opts_.repeats;
  double check_s = 0.0;  // runs of the check reference
  const auto abandon = [&](const std::string& reason) {
    set_times(m, kernels::summarize(runs));
    m.status = MeasureStatus::Abandoned;
    m.reason = reason;
    m.max_rel_error = 0.0;
    m.wall_s = sum(runs) + check_s + t.overhead_s;
    return m;
  };
  for (int k = 0; k < total; ++k) {
    const double dt =
        d.run(kMeasureRun + static_cast<std::uint64_t>(k), machine(static_cast<std::uint64_t>(k)));
    runs.push_back(dt);
    if (k >= opts_.warmup) timed.push_back(dt);
    fastest = std::min(fastest, dt);
    if (st == MeasureStatus::Abandoned && static_cast<int>(runs.size()) >= opts_.race_min_runs)
      return abandon(t.reason.empty() ? "scripted abandoned" : t.reason);
    if (!racing || static_cast<int>(runs.size()) < opts_.race_min_runs || fastest <= race.above_s ||
        k + 1 == total)
      continue;
    racing = false;
    double drift = 1.0;
    std::string checked;
    if (!race.check.empty() && race.check_s > 0) {
      const std::string ref_label = Candidate::baseline(race.check).label();
      const ScriptedTiming rt = script_.timing(ref_label);
      if (status_at(rt, 1) == MeasureStatus::Ok) {
        const Draw rd(script_.seed, ref_label, n, rt, kernels::fnv1a(label));
        double ref_fastest = std::numeric_limits<double>::infinity();
        for (std::uint64_t j = 0; j < 2; ++j) {
          const double r = rd.run(kCheckRun + j, machine(kCheckRun + j));
          const double x = d.run(kCheckRun + j, machine(kCheckRun + j));
          check_s += r + x;
          ref_fastest = std::min(ref_fastest, r);
          fastest = std::min(fastest, x);
        }
        drift = std::max(1.0, ref_fastest / race.check_s);
        char buf[160];
        std::snprintf(buf, sizeof buf,
                      "; beside %s now the machine is %.2fx slower than when "
                      "the bound was set",
                      race.check.c_str(), drift);
        checked = buf;
      }
    }
    if (fastest <= race.above_s * drift) continue;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "abandoned after %zu runs (%zu timed): the fastest took %.3g s, more than the "
                  "race bound %.3g s",
                  runs.size(), timed.size(), fastest, race.above_s * drift);
    return abandon(buf + checked);
  }
  set_times(m, kernels::summarize(timed));
  m.max_rel_error = 0.0;
  m.wall_s = sum(runs) + check_s + t.overhead_s;
  return m;
}

std::vector<Measurement> ScriptedRunner::compare(const std::vector<Candidate>& cs, int rounds,
                                                 const CompareOptions& co) {
  WACO_ASSERT(rounds >= 1, "compare needs rounds >= 1");
  for (const std::size_t k : co.always_timed)
    WACO_ASSERT(k < cs.size(), "CompareOptions::always_timed names a candidate not in the list");
  if (cs.empty()) return {};
  const std::uint64_t g = static_cast<std::uint64_t>(++calls_);
  const std::size_t n = cs.size();
  const double factor = co.race_factor >= 0 ? co.race_factor : opts_.compare_race_factor;
  const bool racing = factor > 0;
  std::vector<char> keep(n, 0);
  for (const std::size_t k : co.always_timed) keep[k] = 1;
  std::vector<Measurement> out;
  std::vector<Draw> draws;
  std::vector<MeasureStatus> st;
  for (const Candidate& c : cs) {
    const std::string label = c.label();
    const int call = ++label_calls_[label];
    const ScriptedTiming t = script_.timing(label);
    out.push_back(start(c, t));
    out.back().repeats = rounds;
    st.push_back(status_at(t, call));
    draws.emplace_back(script_.seed, label, call, t);
  }
  double wall = 0.0;
  for (const Draw& d : draws) wall += d.t.overhead_s;
  const auto finish = [&] {
    for (Measurement& m : out) m.wall_s = wall;
    return out;
  };
  // As compare_here: baselines first (they set the group's fastest), each verified, then
  // probed twice when racing; a guarded run over the screening deadline stops its candidate.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < n; ++i)
    if (!cs[i].is_generated()) order.push_back(i);
  for (std::size_t i = 0; i < n; ++i)
    if (cs[i].is_generated()) order.push_back(i);
  const auto raced = [&](std::size_t i) { return racing && cs[i].is_generated() && !keep[i]; };
  std::vector<std::vector<double>> probe(n);
  std::vector<char> timed(n, 0);
  double best_s = 0.0;
  for (const std::size_t i : order) {
    const Draw& d = draws[i];
    if (individual_failure(st[i])) {
      out[i] = scripted_failure(out[i], st[i], d.t);
      continue;
    }
    const bool guarded = raced(i) && best_s > 0;
    const double bound = factor * best_s;
    const double limit = detail::screening_limit(opts_, bound);
    bool overran = false;
    const auto run_once = [&](std::uint64_t k) {
      const double x = d.run(k, 1.0);
      wall += guarded ? std::min(x, limit) : x;
      if (guarded && x > limit) overran = true;
      return x;
    };
    run_once(kVerifyRun);
    if (!overran && (racing || st[i] == MeasureStatus::Abandoned))
      for (std::uint64_t k = 1; k <= 2 && !overran; ++k) probe[i].push_back(run_once(k));
    if (overran) {
      out[i] = detail::overran_screening(out[i], limit, bound);
      continue;
    }
    timed[i] = 1;
    if (probe[i].empty()) continue;
    const double fastest = *std::min_element(probe[i].begin(), probe[i].end());
    if (racing && (best_s <= 0 || fastest < best_s)) best_s = fastest;
  }
  // As compare_here: a second look, two more probes after every candidate, before abandoning.
  for (const std::size_t i : order) {
    if (!timed[i] || probe[i].size() != 2 || !raced(i)) continue;
    if (*std::min_element(probe[i].begin(), probe[i].end()) <= factor * best_s) continue;
    const double bound = factor * best_s;
    const double limit = detail::screening_limit(opts_, bound);
    bool overran = false;
    for (std::uint64_t k = 3; k <= 4 && !overran; ++k) {
      const double x = draws[i].run(k, 1.0);
      wall += std::min(x, limit);
      overran = x > limit;
      if (!overran) probe[i].push_back(x);
    }
    if (overran) {
      out[i] = detail::overran_screening(out[i], limit, bound);
      timed[i] = 0;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!timed[i] || probe[i].empty()) continue;
    const double fastest = *std::min_element(probe[i].begin(), probe[i].end());
    const bool hopeless = raced(i) && fastest > factor * best_s;
    if (!hopeless && st[i] != MeasureStatus::Abandoned) continue;
    Measurement& m = out[i];
    set_times(m, kernels::summarize(probe[i]));
    m.status = MeasureStatus::Abandoned;
    m.max_rel_error = 0.0;
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "abandoned after %zu timed runs%s: the fastest took %.3g s, more than %g x the "
                  "group's fastest %.3g s",
                  probe[i].size(), probe[i].size() > 2 ? " (two, then two after the others)" : "",
                  fastest, factor, best_s);
    m.reason = hopeless                    ? std::string(buf)
               : draws[i].t.reason.empty() ? std::string("scripted abandoned")
                                           : draws[i].t.reason;
    timed[i] = 0;
  }
  // The rounds: every timed candidate once per round, on the round's machine; as compare_here,
  // successive halving among the generated candidates not kept, against the first kept one.
  std::vector<std::vector<double>> secs(n);
  SuccessiveHalving halving(cs, keep, timed, co.halving_keep, rounds);
  for (int r = 0; r < rounds; ++r) {
    const std::uint64_t k = static_cast<std::uint64_t>(r);
    const double machine = 1.0 + script_.drift * triangular(script_.seed, kDriftStream, g, k);
    for (std::size_t i = 0; i < n; ++i)
      if (timed[i] && !halving.stopped(i)) secs[i].push_back(draws[i].run(kRoundRun + k, machine));
    halving.after_round(r + 1, secs);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!timed[i]) continue;
    Measurement& m = out[i];
    wall += sum(secs[i]) * (1 + opts_.warmup);
    set_times(m, kernels::summarize(secs[i]));
    m.max_rel_error = 0.0;
    m.counters = {{"source", "scripted"},
                  {"retaken", draws[i].t.retaken},
                  {"disturbed_kept", draws[i].t.disturbed_kept},
                  {"hardware", {{"backend", "none"}}}};
    halving.mark(i, m);
  }
  return finish();
}

}  // namespace waco::heuristics
