#include "collect_loop.hpp"

#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>

#include "cli_common.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::cli {

using kernels::Error;

void add_group_options(CLI::App& sub, GroupOptions& g) {
  sub.add_option("--schedules", g.schedules, "Sampled schedules per matrix (csr-like "
                 "schedule and baseline come on top)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub.add_option("--rounds", g.rounds, "Interleaved timed rounds of a matrix's group")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub.add_option("--warmup", g.warmup, "Untimed rounds first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  sub.add_option("--seed", g.seed, "Seed of the sampling and the dense operands")->capture_default_str();
  sub.add_option("--busy-wait", g.busy_wait,
                 "Seconds to wait for other processes to leave the CPUs before a group "
                 "(0: do not check)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  add_limit_options(sub, g.timeout, g.compile_timeout);
  add_cpu_lock_option(sub, g.cpu_lock, "while measuring (and compiling for) each matrix");
  add_codegen_options(sub, g.generated);
}

void apply_group_options(const GroupOptions& g, int threads, heuristics::CollectOptions& co) {
  co.schedules = g.schedules;
  co.seed = g.seed;
  co.measure.repeats = g.rounds;
  co.measure.warmup = g.warmup;
  co.measure.threads = threads;
  co.measure.prepare_timeout_s = g.compile_timeout;
  co.measure.run_timeout_s = g.timeout;
  co.measure.generated = g.generated;
  co.busy_wait_s = g.busy_wait;
  co.cpu_lock = g.cpu_lock;
}

FileLock::FileLock(const std::string& path, const std::string& busy, const std::string& hint)
    : path_(path) {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot create the lock file " + path_ + ": " + std::strerror(errno));
  int rc;
  while ((rc = ::flock(fd_, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    ::close(fd_);
    throw Error(busy, hint);
  }
}

FileLock::~FileLock() { ::close(fd_); }

std::unique_ptr<FileLock> lock_collection(const std::string& db_path) {
  { heuristics::ResultsDb check(db_path); }  // a bad file fails here, before any work
  // The lock beside the database's real file: two collects given one database by different
  // names (a symbolic link, a relative path) exclude each other too.
  std::string real_db = db_path;
  if (char* r = ::realpath(db_path.c_str(), nullptr)) {
    real_db = r;
    std::free(r);
  }
  return std::make_unique<FileLock>(
      real_db + ".collect-lock",
      "another collect is writing " + db_path + " (it holds " + real_db + ".collect-lock)",
      "wait for it to finish, or collect into another --db and merge");
}

void check_settings(heuristics::ResultsDb& db, const std::string& key, const nlohmann::json& now,
                    bool accept, const std::string& db_path, const std::string& what,
                    const std::string& hint) {
  if (const std::optional<std::string> stored = db.meta(key); stored && !accept) {
    nlohmann::json before;
    try {
      before = nlohmann::json::parse(*stored);
    } catch (const nlohmann::json::exception&) {
      before = nlohmann::json::object();
    }
    std::string diff;
    for (const auto& [name, value] : now.items()) {
      const nlohmann::json was = before.contains(name) ? before.at(name) : nlohmann::json();
      if (was != value)
        diff += (diff.empty() ? "" : "; ") + name + " " + was.dump() + " then, " + value.dump() +
                " now";
    }
    if (diff.empty()) return;
    throw Error(db_path + " holds a " + what + " made with other settings (" + diff + ")", hint);
  }
  db.set_meta(key, now.dump());
}

CollectTally collect_recipes(const std::string& db_path, const std::vector<kernels::Recipe>& recipes,
                             const heuristics::CollectOptions& co,
                             const std::function<bool(const CollectTally&)>& go_on,
                             const std::function<void(std::size_t, const heuristics::CollectOutcome&,
                                                      const CollectTally&)>& after) {
  using heuristics::CollectOutcome;
  CollectTally t;
  const double t0 = kernels::now_seconds();
  std::string last_failure;
  int same_failures = 0;
  for (std::size_t i = 0; i < recipes.size(); ++i) {
    if (interrupt_flag()) {
      t.interrupted = true;
      break;
    }
    if (go_on && !go_on(t)) break;
    const CollectOutcome r = heuristics::collect_one(db_path, recipes[i], co);
    if (r.kind == CollectOutcome::Kind::Interrupted) {
      t.interrupted = true;
      break;
    }
    ++t.outcomes[heuristics::outcome_name(r.kind)];
    if (r.kind == CollectOutcome::Kind::Measured) {
      t.measurements += r.candidates;
      t.measured_ok += r.ok;
      t.collected_s += r.seconds;
      ++t.collected;
      for (auto& [k, v] : r.breakdown.items())
        t.breakdown[k] = t.breakdown.value(k, 0.0) + v.get<double>();
    }
    t.items.push_back(r.to_json());
    t.done = i + 1;
    t.seconds = kernels::now_seconds() - t0;
    if (after) after(i, r, t);
    if (r.kind != CollectOutcome::Kind::Failed) {
      same_failures = 0;
    } else if (same_failures == 0 || r.message != last_failure) {
      last_failure = r.message;
      same_failures = 1;
    } else if (++same_failures >= kSameFailuresStop) {
      t.stopped = "the last " + std::to_string(same_failures) + " matrices failed alike: " +
                  last_failure;
      break;
    }
  }
  t.seconds = kernels::now_seconds() - t0;
  return t;
}

}  // namespace waco::cli
