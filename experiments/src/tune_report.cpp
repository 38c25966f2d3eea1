// tune's text report, read off the JSON report (tune_report.hpp).
#include "tune_report.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "cli_common.hpp"
#include "waco/codegen/generated_kernel.hpp"

namespace waco::cli {

namespace {

void print_nominee(const char* what, const nlohmann::json& n) {
  std::printf("  %-10s %s\n", what, n.at("schedule").get<std::string>().c_str());
  std::string line = "rank " + n.at("search_rank").dump() + " by search timings";
  if (n.contains("proposed_rank")) line += ", proposed #" + n.at("proposed_rank").dump();
  if (n.contains("side_by_side_median_s")) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "; side by side %.3g s", n.at("side_by_side_median_s").get<double>());
    line += buf;
    if (n.contains("speedup_over_csr")) {
      std::snprintf(buf, sizeof buf, " (%.3fx csr)", n.at("speedup_over_csr").get<double>());
      line += buf;
    }
  } else {
    line += "; " + n.at("status").get<std::string>();
  }
  std::printf("  %-10s %s\n", "", line.c_str());
  const nlohmann::json& c = n.at("counters");
  if (c.is_object())
    std::printf("  %-10s counts: %d runs retaken as disturbed, %lld involuntary switches kept, "
                "%lld page faults, %.3g CPU s\n", "", c.at("retaken").get<int>(),
                static_cast<long long>(c.at("involuntary_switches").get<std::int64_t>()),
                static_cast<long long>(c.at("page_faults").get<std::int64_t>()),
                c.at("cpu_s").get<double>());
}

/// tune --explain's explanation (tune/explain.hpp) as text lines on stdout.
void print_explanation(const nlohmann::json& e) {
  std::printf("explain:\n");
  if (e.at("winner").is_null()) {
    std::printf("  no side-by-side confirmation ran: nothing to explain\n");
  } else {
    print_nominee("winner", e.at("winner"));
    if (!e.at("runner_up").is_null()) print_nominee("runner-up", e.at("runner_up"));
  }
  if (e.contains("admissible"))
    std::printf("  space      %s admissible of %s legal schedules\n", e.at("admissible").dump().c_str(),
                e.at("legal").dump().c_str());
  for (const auto& [pass, note] : e.at("facts").items())
    std::printf("  %-10s %s\n", pass.c_str(), note.get<std::string>().c_str());
  if (!e.at("search_info").empty())
    std::printf("  search     %s %s\n", e.at("search").get<std::string>().c_str(),
                e.at("search_info").dump().c_str());
}

}  // namespace

namespace {

std::string seconds_or(const nlohmann::json& v, const char* otherwise) {
  return v.is_number() ? format_seconds(v.get<double>()) : std::string(otherwise);
}

void print_reference(const std::string& what, const nlohmann::json& e) {
  if (e.at("status") == "ok")
    std::printf("  %-13s %s\n", what.c_str(), format_seconds(e.at("median_s").get<double>()).c_str());
  else
    std::printf("  %-13s %s: %s\n", what.c_str(), e.at("status").get<std::string>().c_str(),
                e.value("reason", std::string()).c_str());
}

}  // namespace

const char* adaptive_speedup_basis(const nlohmann::json& adaptive) {
  return adaptive.value("speedup_from", nlohmann::json()) == "rechecks" ? "rechecked in blocks of its calls"
                                                                        : "judged on its calls";
}

/// A decision an adaptive plan (waco::Options::adaptive) made on an application's calls and
/// left in the tuning cache: what it decided and how, not a search's report.
void print_adaptive_text(const nlohmann::json& j) {
  const nlohmann::json& a = j.at("adaptive");
  const nlohmann::json c = j.value("plan_cache", nlohmann::json::object());
  std::printf("%s on %s (dense %lld, %d threads): decided by an adaptive plan on an "
              "application's calls\n",
              j.at("kernel").get<std::string>().c_str(), j.value("file", std::string()).c_str(),
              static_cast<long long>(j.value("dense", std::int64_t{1})), j.value("threads", 0));
  std::printf("  from cache    decided %s (%s); --refresh tunes again\n",
              c.value("saved_at", std::string("?")).c_str(), c.value("path", std::string("?")).c_str());
  std::printf("  calls         %lld, %lld of them exploring; %d nominees of the cost model\n",
              static_cast<long long>(a.value("calls", std::int64_t{0})),
              static_cast<long long>(a.value("exploring_calls", std::int64_t{0})),
              a.value("nominees", 0));
  const nlohmann::json sp = j.value("speedup_over_csr", nlohmann::json());
  char gain[96] = "";
  if (sp.is_number())
    std::snprintf(gain, sizeof gain, " (%.3fx over csr, %s)", sp.get<double>(),
                  adaptive_speedup_basis(a));
  std::printf("  verdict       %s%s\n", j.at("verdict").get<std::string>().c_str(), gain);
  std::printf("  schedule      %s\n", j.at("schedule").get<std::string>().c_str());
}

bool references_tied(const nlohmann::json& report) {
  const nlohmann::json& decision = report.value("decision", nlohmann::json());
  return decision.is_object() && decision.value("faster_reference", std::string()) == "tie";
}

void print_tune_text(const nlohmann::json& j) {
  if (j.value("mode", std::string()) == "adaptive") {
    print_adaptive_text(j);
    return;
  }
  const std::string shortcut = j.at("kernel") == "mttkrp" ? "csf" : "csr";
  std::printf("%s on %s (nnz %lld, dense %lld, %d threads), %s search\n",
              j.at("kernel").get<std::string>().c_str(), j.at("file").get<std::string>().c_str(),
              static_cast<long long>(j.at("nnz").get<std::int64_t>()),
              static_cast<long long>(j.at("dense").get<std::int64_t>()), j.at("threads").get<int>(),
              j.at("search").get<std::string>().c_str());
  if (j.value("from_cache", false)) {
    const nlohmann::json& c = j.at("plan_cache");
    std::printf("  from cache    decided %s for %s (%s); this call took %s after reading the "
                "file (%s); --refresh tunes again\n",
                c.value("saved_at", std::string("?")).c_str(),
                j.value("decided_for_file", std::string("?")).c_str(),
                c.value("path", std::string("?")).c_str(),
                format_seconds(j.value("cached_call_s", 0.0)).c_str(),
                format_seconds(j.value("read_s", 0.0)).c_str());
  }
  // The cost model a ranking search used: this machine's calibrated model or the shipped one.
  if (j.contains("model") && j["model"].is_object())
    std::printf("  model: %s\n", j["model"].value("note", std::string()).c_str());
  const nlohmann::json& space = j.at("space");
  if (!space.is_null())
    std::printf("  space: legal %llu, admissible %llu (--passes %s)\n",
                static_cast<unsigned long long>(space.at("legal_count").get<std::uint64_t>()),
                static_cast<unsigned long long>(space.at("admissible_count").get<std::uint64_t>()),
                space.at("pipeline").get<std::string>().c_str());
  std::printf("  candidates %lld: %lld measured now, %lld from %s%s\n",
              static_cast<long long>(j.at("candidates").get<std::int64_t>()),
              static_cast<long long>(j.at("measured").get<std::int64_t>()),
              static_cast<long long>(j.at("reused").get<std::int64_t>()),
              j.at("db").get<std::string>().c_str(),
              j.at("complete").get<bool>()
                  ? ""
                  : (" (stopped: " + j.at("stopped_by").get<std::string>() + ")").c_str());
  std::string counts;
  for (const auto& [status, n] : j.at("status_counts").items())
    if (n.get<std::int64_t>() > 0)
      counts += (counts.empty() ? "" : ", ") + status + " " + std::to_string(n.get<std::int64_t>());
  std::printf("  status: %s\n", counts.empty() ? "nothing considered" : counts.c_str());
  print_reference(shortcut + " schedule", j.at("csr"));
  print_reference(shortcut + " baseline", j.at("csr_baseline"));
  const nlohmann::json& confirm = j.at("confirm");
  const bool direct = confirm.is_object() && confirm.value("direct", false);
  // Nominees successive halving stopped are abandoned too: said apart (the search's own
  // entries hold them only when the selection is its measurement).
  const std::int64_t halved = confirm.is_object() ? confirm.value("halved", std::int64_t{0}) : 0;
  const std::int64_t abandoned = j.at("status_counts").value("abandoned", std::int64_t{0}) -
                                 (direct ? halved : 0);
  if (halved > 0)
    std::printf("  halving       %lld nominee%s dropped before the selection's last rounds (the "
                "slower half at each quarter, at least %d kept)\n",
                static_cast<long long>(halved), halved == 1 ? "" : "s",
                confirm.value("halving_keep", 0));
  if (abandoned > 0 && direct)
    std::printf("  racing        %lld abandoned (their first two runs side by side above %.3gx "
                "the group's fastest)\n",
                static_cast<long long>(abandoned), j.at("abandon_factor").get<double>());
  else if (abandoned > 0)
    std::printf("  racing        %lld abandoned (slower than %.3gx the best so far in every run "
                "made), %s spent on them\n",
                static_cast<long long>(abandoned), j.at("abandon_factor").get<double>(),
                format_seconds(j.at("abandoned_s").get<double>()).c_str());
  const nlohmann::json& best = j.at("best");
  const bool best_is_baseline =
      best.is_object() && best.at("schedule") == j.at("csr_baseline").at("schedule");
  const bool best_is_csr =
      best_is_baseline || (best.is_object() && best.at("schedule") == j.at("csr").at("schedule"));
  const std::string verdict = j.at("verdict").get<std::string>();
  const nlohmann::json& detail = j.at("verdict_detail");
  const nlohmann::json& decision = j.value("decision", nlohmann::json());
  const std::string result =
      !best_is_baseline ? "; the result is the " + shortcut + " schedule"
      : references_tied(j)
          ? "; the result is the hand-written " + shortcut + " baseline (it tied with the " +
                shortcut + " schedule, and a tie goes to the baseline)"
          : "; the result is the hand-written " + shortcut + " baseline (it ran faster than the " +
                shortcut + " schedule)";
  const bool fresh = decision.is_object() && decision.value("fresh", false);
  const int fresh_runs = fresh ? decision.at("runs").get<int>() : 0;
  const char* const runs_s = fresh_runs == 1 ? "" : "s";  // "1 fresh run", "3 fresh runs"
  if (detail.is_object()) {
    const bool gain = detail.at("gain").get<bool>();
    const std::string head = verdict == "undecided" ? "undecided (the machine was busy)"
                             : gain                 ? "gain over " + shortcut
                                                    : "no gain over " + shortcut;
    const std::string where =
        fresh ? "in " + std::to_string(fresh_runs) + " fresh run" + runs_s : "side by side";
    // Old reports (cached decisions) have no interval.
    const double lo = detail.value("ratio_lo", detail.at("ratio_q25").get<double>());
    const double hi = detail.value("ratio_hi", detail.at("ratio_q75").get<double>());
    // A ratio whose interval lies below 1 but is no gain: the minimum gain asked of the pooled
    // median and of every run's median (heuristics::judge_gain) was missed; say by which.
    std::string why;
    const double median = detail.at("ratio_median").get<double>();
    if (!gain && hi < 1.0 && detail.contains("min_gain")) {
      double worst = median;
      for (const auto& m : detail.value("run_ratio_medians", nlohmann::json::array()))
        worst = std::max(worst, m.get<double>());
      const double min_gain = detail.at("min_gain").get<double>();
      char buf[160];
      std::snprintf(buf, sizeof buf, "; a gain needs %s at most %.3fx (--min-gain %.3g): %s %.3fx",
                    fresh_runs > 1 ? "every run's median ratio" : "the median ratio",
                    1.0 - min_gain, min_gain,
                    fresh_runs > 1 && worst > median ? "the slowest run's was" : "it was", worst);
      why = buf;
    }
    std::printf(
        "  verdict       %s: the best nominee ran %.3fx the time of the %s %s (%.0f%% "
        "interval %.3f-%.3f, %d rounds)%s%s\n",
        head.c_str(), median, detail.at("reference").get<std::string>().c_str(), where.c_str(),
        100.0 * detail.value("level", 0.5), lo, hi, detail.at("rounds").get<int>(), why.c_str(),
        gain && verdict == "gain" ? ""
        : best_is_csr             ? result.c_str()
                                  : "");
    const nlohmann::json& refs =
        decision.is_object() ? decision.value("references", nlohmann::json()) : nlohmann::json();
    if (refs.is_object()) {
      const std::string faster = decision.value("faster_reference", std::string("tie"));
      std::printf("  references    the %s schedule ran %.3fx the time of the %s baseline (%s)\n",
                  shortcut.c_str(), refs.at("ratio_median").get<double>(), shortcut.c_str(),
                  faster == "tie"        ? "a tie within the interval"
                  : faster == "schedule" ? "the schedule is faster"
                                         : "the baseline is faster");
    }
  } else if (verdict == "not-worth-it") {
    std::printf("  verdict       not worth tuning: %s%s\n",
                j.at("economy").at("calls_budget").at("reason").get<std::string>().c_str(),
                result.c_str());
  } else if (verdict == "no-reference") {
    std::printf("  verdict       no %s reference ran side by side; the best nominee stands\n",
                shortcut.c_str());
  } else if (verdict == "no-gain") {
    std::printf("  verdict       no gain over %s: no candidate completed its timing%s\n",
                shortcut.c_str(), result.c_str());
  }
  if (best.is_object()) {
    std::printf("  best          %s  %s%s (search)\n", seconds_or(best.value("median_s", nlohmann::json()), "-").c_str(),
                best.at("schedule").get<std::string>().c_str(),
                j.value("implementation", nlohmann::json()) == codegen::kDiaBaseline
                    ? " (the dia baseline: diagonal storage; waco::Plan and -o serve it)"
                    : "");
    const nlohmann::json& s1 = j.at("speedup_over_csr");
    const nlohmann::json& s2 = j.at("speedup_over_csr_baseline");
    const bool confirmed = j.at("confirmed").get<bool>();
    if (s1.is_number())
      std::printf("  speedup       %.3fx over the %s schedule", s1.get<double>(), shortcut.c_str());
    if (s2.is_number())
      std::printf(", %.3fx over the %s baseline", s2.get<double>(), shortcut.c_str());
    std::printf("%s\n", confirmed ? " (side by side)" : " (search timings)");
    const nlohmann::json& interval = j.value("speedup_interval", nlohmann::json());
    if (verdict == "gain" && interval.is_object())
      std::printf("  claimed       %.3fx over the %s (median per-round ratio; %.0f%% interval "
                  "%.3fx-%.3fx)\n",
                  j.at("claimed_speedup").get<double>(),
                  interval.at("reference").get<std::string>().c_str(),
                  100.0 * interval.at("level").get<double>(), interval.at("lo").get<double>(),
                  interval.at("hi").get<double>());
    if (confirmed) {
      const nlohmann::json& c = j.at("confirm");
      const nlohmann::json& first = c.at("ranking").at(0);
      const bool direct = c.value("direct", false);
      // The dia nominee is the diagonal-storage pass's, after the search's (not ranked by it).
      const bool dia = first.value("schedule", std::string()) == "impl=" + std::string(codegen::kDiaBaseline);
      const std::string rank =
          dia ? std::string("the dia baseline, the diagonal-storage pass's nominee")
              : "#" + std::to_string(first.at("search_rank").get<std::int64_t>()) + " in the " +
                    (direct ? "model's order" : "search");
      // In heats (the nominees did not fit in one child): the heats, then their best together.
      const nlohmann::json& heats = c.value("heats", nlohmann::json());
      std::string how = direct ? "model's best " + std::to_string(c.at("top").get<int>()) +
                                     " measured side by side"
                               : "search's best " + std::to_string(c.at("top").get<int>()) +
                                     " measured again";
      if (heats.is_object()) {
        std::size_t nominees = 0;
        for (const nlohmann::json& h : heats.at("heats")) nominees += h.at("nominees").size();
        how = (direct ? "model's best " : "search's best ") + std::to_string(nominees) +
              " measured " + (direct ? "" : "again ") + "in " +
              std::to_string(heats.at("heats").size()) + " heats (their formats did not fit in "
              "one child), " +
              (heats.value("final_run", false)
                   ? "the best " + std::to_string(c.at("top").get<int>()) + " of them side by "
                     "side again"
                   : std::string("one finalist: its heat's run selects"));
      }
      std::printf("  side by side  best nominee %s, %s schedule %s, %s baseline %s: the "
                  "%s over %d rounds; the nominee was %s\n",
                  seconds_or(first.value("median_s", nlohmann::json()), "-").c_str(),
                  shortcut.c_str(), seconds_or(c.at("csr_median_s"), "failed").c_str(),
                  shortcut.c_str(), seconds_or(c.at("csr_baseline_median_s"), "failed").c_str(),
                  how.c_str(), c.at("rounds").get<int>(), rank.c_str());
      if (fresh) {
        const int dropped = decision.value("dropped", 0);
        std::string drop_text =
            dropped > 0 ? "; " + std::to_string(dropped) + " of them dropped after a run, " +
                              "clearly slower than the fastest: --decide-drop"
                        : std::string();
        if (decision.value("clear", false))
          drop_text += "; no more runs after a clear gain: --decide-clear";
        if (decision.contains("extended") && decision.at("extended").is_string())
          drop_text += "; more runs for a marginal gain: --decide-extra-runs";
        std::printf("  decided       on %d fresh side-by-side run%s of %d rounds that timed the "
                    "selection's best %zu and both references again (%s%s); the speedups are "
                    "theirs\n",
                    fresh_runs, runs_s, decision.at("rounds").get<int>(),
                    decision.at("leaders").size(),
                    seconds_or(j.at("economy").value("decide_s", nlohmann::json()), "-").c_str(),
                    drop_text.c_str());
      }
    }
    if (j.at("kernel_source").is_string())
      std::printf("  kernel source %s\n", j.at("kernel_source").get<std::string>().c_str());
  } else {
    std::printf("  best          none: no candidate was measured successfully\n");
  }
  if (j.value("model_alone", false))
    std::printf("  mode          the model decided alone (--confirm 0): %s, guarded side by side "
                "against csr\n",
                j.value("implementation", nlohmann::json()) == codegen::kDiaBaseline
                    ? "the dia baseline, which the diagonal rule admits (the model scores schedules only)"
                    : "its best-predicted schedule");
  const nlohmann::json& e = j.at("economy");
  const std::string decided =
      fresh ? ", fresh decision " + seconds_or(e.value("decide_s", nlohmann::json()), "-") : "";
  if (direct)  // one side-by-side run was the measurement
    std::printf("  time          %s (choice %s, side by side %s%s)\n",
                format_seconds(e.at("total_s").get<double>()).c_str(),
                seconds_or(e.at("choice_s"), "-").c_str(), seconds_or(e.at("confirm_s"), "-").c_str(),
                decided.c_str());
  else
    std::printf("  time          %s (choice %s, measuring %s, side by side %s%s)\n",
                format_seconds(e.at("total_s").get<double>()).c_str(),
                seconds_or(e.at("choice_s"), "-").c_str(), seconds_or(e.at("measure_s"), "-").c_str(),
                seconds_or(e.at("confirm_s"), "-").c_str(), decided.c_str());
  if (e.at("break_even_calls").is_number())
    std::printf("  break-even    %.0f calls of the tuned kernel instead of csr pay for this tune\n",
                e.at("break_even_calls").get<double>());
  if (e.value("expected_calls", nlohmann::json()).is_number()) {
    const nlohmann::json& b = e.at("calls_budget");
    std::printf("  expected      %lld calls: tuning budget %s (%.0f%% of their csr time)",
                static_cast<long long>(e.at("expected_calls").get<std::int64_t>()),
                b.is_object() ? format_seconds(b.at("budget_s").get<double>()).c_str() : "-",
                e.at("tuning_share").get<double>() * 100.0);
    if (b.is_object() && b.at("worth_it").get<bool>())
      std::printf(", %lld candidates affordable; %s\n",
                  static_cast<long long>(b.at("candidates").get<std::int64_t>()),
                  e.at("pays_off_within_expected_calls").get<bool>()
                      ? "pays for itself within them"
                      : "does not pay for itself within them");
    else
      std::printf("\n");
  }
  if (!j.at("explain").is_null()) print_explanation(j.at("explain"));
}

}  // namespace waco::cli
