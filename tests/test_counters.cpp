// Unit "counters": backend selection and fallback, event-list parsing, and the generic-name
// mappings of the perf and likwid backends (counters.hpp, kernels/src/counters_backends.hpp).
// The hardware-dependent cases adapt: where a backend can count they check real counts, where it
// cannot (the development VMs) they check that it says why.
#include <catch2/catch.hpp>

#include <linux/perf_event.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include "counters_backends.hpp"  // private header of waco_kernels
#include "waco/kernels/counters.hpp"
#include "waco/kernels/error.hpp"

using namespace waco::kernels;

namespace {
bool likwid_mapped() {
  std::ifstream maps("/proc/self/maps");
  const std::string all((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  return all.find("liblikwid") != std::string::npos;
}
}  // namespace

TEST_CASE("counters: liblikwid is loaded on first use, and the probe asks in a child, once") {
  // Not linked (its relocation cost every process ~12 ms at start): nothing has asked yet (ctest
  // runs each test case in a process of its own; run all together, this case comes first).
  CHECK_FALSE(likwid_mapped());
  const bool available = hardware_counters_available();
  CHECK(hardware_counters_available() == available);  // remembered
  const std::unique_ptr<Counters> c = open_counters(CounterBackend::Auto);
  CHECK((c->backend() != "none") == available);
  // After a "no", open_counters(Auto) answers from the probe, which ran in a child: this
  // process (and any it forks) never loads likwid.
  if (!available) CHECK_FALSE(likwid_mapped());
}

TEST_CASE("counters: liblikwid opens with every function the backend calls") {
  // Where likwid has no way to count (no MSR device, no CPU PMU) the backend never opens it, so
  // the library and its lookups are checked here on their own.
  if (!detail::likwid_compiled_in()) {
    CHECK_FALSE(detail::likwid_library_problem().empty());
    return;
  }
  INFO(detail::likwid_library_problem());
  CHECK(detail::likwid_library_problem().empty());
  CHECK(likwid_mapped());
}

namespace {

/// Work the counters must see: about 4 instructions per iteration, not optimized away.
std::uint64_t busy_loop(std::uint64_t n) {
  volatile std::uint64_t sink = 0;
  for (std::uint64_t i = 0; i < n; ++i) sink = sink + (i ^ (i >> 3));
  return sink;
}

std::string error_of(CounterBackend b, const std::vector<std::string>& events = {}) {
  try {
    auto c = open_counters(b, events);
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char ch : s) n += ch == '\n';
  return n;
}

}  // namespace

TEST_CASE("counters: backend names round-trip", "[counters]") {
  for (CounterBackend b : {CounterBackend::Auto, CounterBackend::Likwid, CounterBackend::Perf,
                           CounterBackend::None}) {
    CHECK(parse_counter_backend(counter_backend_name(b)) == b);
  }
  CHECK(counter_backend_name(CounterBackend::None) == "none");
  CHECK_FALSE(parse_counter_backend("papi").has_value());
  CHECK_FALSE(parse_counter_backend("").has_value());
  CHECK_FALSE(parse_counter_backend("Perf").has_value());
}

TEST_CASE("counters: event lists are parsed, trimmed and de-duplicated", "[counters]") {
  CHECK(known_events().size() == 8);
  CHECK(parse_event_list("cycles,instructions") ==
        std::vector<std::string>{"cycles", "instructions"});
  CHECK(parse_event_list("  cycles ,\tinstructions  , cache-misses\n") ==
        std::vector<std::string>{"cycles", "instructions", "cache-misses"});
  // Case-insensitive, returned in the canonical spelling.
  CHECK(parse_event_list("llc-load-misses,L1-DCACHE-LOAD-MISSES") ==
        std::vector<std::string>{"LLC-load-misses", "L1-dcache-load-misses"});
  // Repeats dropped, first position kept.
  CHECK(parse_event_list("branches,cycles,branches,Cycles") ==
        std::vector<std::string>{"branches", "cycles"});
  // Every known event parses to itself.
  std::string all;
  for (const auto& e : known_events()) all += e + ",";
  all.pop_back();
  CHECK(parse_event_list(all) == known_events());
  // Empty list: the default set.
  CHECK(parse_event_list("").empty());
  CHECK(parse_event_list("   ").empty());
}

TEST_CASE("counters: bad event lists are errors naming the problem", "[counters]") {
  try {
    parse_event_list("cycles,flops");
    FAIL("unknown event accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("unknown event 'flops'") != std::string::npos);
    for (const auto& known : known_events()) CHECK(e.hint().find(known) != std::string::npos);
  }
  for (const char* bad : {"cycles,,instructions", "cycles,", ",cycles", " , "}) {
    INFO(bad);
    try {
      parse_event_list(bad);
      FAIL("empty item accepted");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("empty event name") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(parse_event_list("cycles instructions"), Error);
  // open_counters validates too, whatever the backend.
  CHECK_THROWS_AS(open_counters(CounterBackend::None, {"cycles", "bogus"}), Error);
  CHECK_THROWS_AS(open_counters(CounterBackend::Auto, {"bogus"}), Error);
}

TEST_CASE("counters: generic names map to perf (type, config)", "[counters]") {
  using detail::perf_event_config;
  using detail::PerfEventConfig;
  CHECK(perf_event_config("cycles") ==
        PerfEventConfig{PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES});
  CHECK(perf_event_config("instructions") ==
        PerfEventConfig{PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS});
  CHECK(perf_event_config("cache-references") ==
        PerfEventConfig{PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES});
  CHECK(perf_event_config("cache-misses") ==
        PerfEventConfig{PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES});
  CHECK(perf_event_config("branches") ==
        PerfEventConfig{PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS});
  CHECK(perf_event_config("branch-misses") ==
        PerfEventConfig{PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES});
  // perf's encoding of cache events: cache id | op << 8 | result << 16 (perf_event_open(2)).
  CHECK(perf_event_config("L1-dcache-load-misses") ==
        PerfEventConfig{PERF_TYPE_HW_CACHE, 0x10000});
  CHECK(perf_event_config("LLC-load-misses") ==
        PerfEventConfig{PERF_TYPE_HW_CACHE, PERF_COUNT_HW_CACHE_LL | 0x10000});
  CHECK(PERF_COUNT_HW_CACHE_LL == 2);
  std::set<std::pair<std::uint32_t, std::uint64_t>> distinct;
  for (const auto& e : known_events()) {
    INFO(e);
    const auto c = perf_event_config(e);
    REQUIRE(c.has_value());
    distinct.insert({c->type, c->config});
  }
  CHECK(distinct.size() == known_events().size());
  CHECK_FALSE(perf_event_config("task-clock").has_value());
  CHECK_FALSE(perf_event_config("Cycles").has_value());  // callers pass canonical names
}

TEST_CASE("counters: generic names map to likwid event sets", "[counters]") {
  using detail::likwid_event_set;
  using detail::LikwidCpu;
  const auto intel = likwid_event_set(LikwidCpu::IntelCore, detail::default_events());
  CHECK(intel.error.empty());
  CHECK(intel.set ==
        "CPU_CLK_UNHALTED_CORE:FIXC1,INSTR_RETIRED_ANY:FIXC0,L3_LAT_CACHE_REFERENCE:PMC0,"
        "L3_LAT_CACHE_MISS:PMC1");
  CHECK(likwid_event_set(LikwidCpu::IntelCore, known_events()).error.empty());
  CHECK(likwid_event_set(LikwidCpu::IntelCore, {"branches", "branch-misses", "LLC-load-misses"})
            .set == "BR_INST_RETIRED_ALL_BRANCHES:PMC0,BR_MISP_RETIRED_ALL_BRANCHES:PMC1,"
                    "MEM_LOAD_RETIRED_L3_MISS:PMC2");
  const auto zen = likwid_event_set(LikwidCpu::AmdZen, detail::default_events());
  CHECK(zen.error.empty());
  CHECK(zen.set ==
        "CPU_CLOCKS_UNHALTED:PMC0,RETIRED_INSTRUCTIONS:PMC1,L3_CACHE_REQ:CPMC0,L3_MISS_REQ:CPMC1");
  const auto no_llc = likwid_event_set(LikwidCpu::AmdZen, {"cycles", "LLC-load-misses"});
  CHECK(no_llc.set.empty());
  CHECK(no_llc.error.find("LLC-load-misses") != std::string::npos);
  CHECK_FALSE(likwid_event_set(LikwidCpu::Other, {"cycles"}).error.empty());
}

TEST_CASE("counters: the none backend counts nothing and says so", "[counters]") {
  auto c = open_counters(CounterBackend::None, {"cycles"});
  REQUIRE(c != nullptr);
  CHECK(c->backend() == "none");
  CHECK(c->events().empty());
  c->start();
  busy_loop(1000);
  CHECK(c->stop().empty());
  // Repeated regions are fine.
  c->start();
  CHECK(c->stop().empty());
}

TEST_CASE("counters: explicit perf counts or explains why not", "[counters]") {
  const std::string err = error_of(CounterBackend::Perf);
  if (!err.empty()) {
    INFO(err);
    CHECK(err.find("perf backend cannot count here") != std::string::npos);
    CHECK(err.find("perf") != std::string::npos);
    CHECK(err.size() > std::string("counters: the perf backend cannot count here: ").size());
    return;
  }
  auto c = open_counters(CounterBackend::Perf, {"instructions", "cycles"});
  CHECK(c->backend() == "perf");
  CHECK(c->events() == std::vector<std::string>{"instructions", "cycles"});
  c->start();
  busy_loop(10'000'000);
  const auto small = c->stop();
  REQUIRE(small.count("instructions") == 1);
  CHECK(small.at("instructions") > 10'000'000);
  CHECK(small.at("cycles") > 0);
  // Work on a thread created after the counters were opened is counted (inherit).
  c->start();
  std::thread worker([] { busy_loop(20'000'000); });
  worker.join();
  const auto threaded = c->stop();
  CHECK(threaded.at("instructions") > 20'000'000);
  // A region twice as long counts about twice the instructions.
  c->start();
  busy_loop(20'000'000);
  const auto twice = c->stop();
  const double ratio = static_cast<double>(twice.at("instructions")) / small.at("instructions");
  CHECK(ratio > 1.7);
  CHECK(ratio < 2.3);
}

TEST_CASE("counters: explicit likwid counts or explains why not", "[counters]") {
  const std::string err = error_of(CounterBackend::Likwid);
  if (!err.empty()) {
    INFO(err);
    CHECK(err.find("likwid backend cannot count here") != std::string::npos);
    if (!detail::likwid_compiled_in()) CHECK(err.find("no likwid support") != std::string::npos);
    // An environment failure is remembered: the second attempt gives the same reason.
    CHECK(error_of(CounterBackend::Likwid) == err);
    return;
  }
  auto c = open_counters(CounterBackend::Likwid, {"instructions"});
  CHECK(c->backend() == "likwid");
  c->start();
  busy_loop(10'000'000);
  const auto v = c->stop();
  CHECK(v.at("instructions") > 10'000'000);
}

TEST_CASE("counters: auto falls back to none and warns once per process", "[counters]") {
  const bool likwid_ok = error_of(CounterBackend::Likwid).empty();
  const bool perf_ok = error_of(CounterBackend::Perf).empty();
  detail::reset_fallback_warning_for_testing();
  std::ostringstream warn;
  auto first = open_counters(CounterBackend::Auto, {}, &warn);
  auto second = open_counters(CounterBackend::Auto, {"cycles"}, &warn);
  REQUIRE(first != nullptr);
  REQUIRE(second != nullptr);
  if (!likwid_ok && !perf_ok) {
    CHECK(first->backend() == "none");
    CHECK(second->backend() == "none");
    const std::string text = warn.str();
    INFO(text);
    CHECK(count_lines(text) == 1);
    CHECK(text.rfind("warning: hardware counters unavailable (likwid: ", 0) == 0);
    CHECK(text.find("; perf: ") != std::string::npos);
    CHECK(text.size() >= 14);
    CHECK(text.substr(text.size() - 14) == "; timing only\n");
    // The reasons are the ones the explicit backends give.
    const std::string perf_reason = error_of(CounterBackend::Perf);
    const auto colon = perf_reason.find("cannot count here: ");
    REQUIRE(colon != std::string::npos);
    CHECK(text.find(perf_reason.substr(colon + 19)) != std::string::npos);
    // No stream, no warning, no crash; a third call with a stream stays silent.
    CHECK(open_counters(CounterBackend::Auto)->backend() == "none");
    std::ostringstream later;
    open_counters(CounterBackend::Auto, {}, &later);
    CHECK(later.str().empty());
  } else {
    CHECK(warn.str().empty());
    CHECK(first->backend() == (likwid_ok ? "likwid" : "perf"));
    first.reset();  // likwid allows one session per process
    second.reset();
    first = open_counters(CounterBackend::Auto, {"instructions"}, &warn);
    first->start();
    busy_loop(1'000'000);
    CHECK(first->stop().at("instructions") > 1'000'000);
  }
}

