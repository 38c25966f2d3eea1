// Collecting one matrix's measurement group (see collector.hpp).
#include "waco/heuristics/collector.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>

#include "measure_internal.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/heuristics/results_db.hpp"
#include "waco/heuristics/space.hpp"
#include "waco/kernels/context.hpp"
#include "waco/kernels/dense.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/io.hpp"
#include "waco/kernels/process.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics {

using kernels::Error;
using kernels::KernelKind;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::uint64_t fingerprint_seed(const std::string& fingerprint, std::uint64_t seed) {
  return kernels::splitmix64(std::strtoull(fingerprint.c_str(), nullptr, 16) ^
                             kernels::splitmix64(seed));
}

/// Waits (up to limit_s) until no other process keeps the CPUs busy; true when calm.
bool wait_until_calm(int threads, double limit_s) {
  if (limit_s <= 0) return true;
  const double until = now_s() + limit_s;
  while (!kernels::busy_machine_warning(threads).empty()) {
    if (now_s() >= until) return false;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  return true;
}

/// (q75 - q25) / 2 / median of a candidate's rounds (the verdict's spread, judge_gain); nullopt
/// when it did not run.
std::optional<double> relative_spread(const Measurement& m) {
  if (m.status != MeasureStatus::Ok || m.seconds.size() < 2 || m.median_s <= 0) return std::nullopt;
  std::vector<double> v = m.seconds;
  std::sort(v.begin(), v.end());
  return (kernels::quantile(v, 0.75) - kernels::quantile(v, 0.25)) / 2.0 / m.median_s;
}

std::vector<double> medians(const std::vector<Measurement>& ms) {
  std::vector<double> out;
  for (const Measurement& m : ms) out.push_back(m.status == MeasureStatus::Ok ? m.median_s : -1.0);
  return out;
}

/// The sampled candidates: the csr-like schedule, the hand-written baseline, then the samples of
/// the admissible set and of the legal space, every schedule on opts.measure.threads, without repeats.
std::vector<Candidate> sample_candidates(const kernels::Problem& p, const CollectOptions& opts,
                                         std::uint64_t seed, nlohmann::json& info) {
  const KernelKind kind = opts.kernel;
  SpaceOptions so;
  so.cores = opts.measure.threads;
  so.max_padding = opts.measure.generated.storage.max_padding;
  const std::string shortcut = kernels::needs_tensor(kind) ? "csf" : "csr";
  std::vector<Candidate> out;
  std::set<std::string> seen;
  auto add = [&](codegen::SuperSchedule s) {
    s.threads = opts.measure.threads;
    s = codegen::canonicalize(s);
    if (seen.insert(codegen::to_text(s)).second) out.push_back(Candidate::generated(s));
  };
  // As the space holds it (chunk=auto, which the model's encoding lacks, as its least chunk), so
  // that every row of the dataset is a schedule the model can score.
  add(codegen::fixed_chunk(*codegen::schedule_shortcut(kind, shortcut)));
  out.push_back(Candidate::baseline(shortcut));
  const auto n_adm = static_cast<std::uint64_t>(
      std::llround(opts.schedules * std::clamp(opts.admissible_share, 0.0, 1.0)));
  const std::uint64_t n_legal = static_cast<std::uint64_t>(opts.schedules) - n_adm;
  PassParams params = opts.params;
  params.dtype = p.dtype();  // the tile model's value size
  Space admissible = Space::for_problem(p, so);
  const PipelineResult pa = run_pipeline(admissible, parse_pipeline("all"), params);
  Space legal = Space::for_problem(p, so);
  const PipelineResult pl = run_pipeline(legal, parse_pipeline("legality"), params);
  info["admissible_count"] = pa.final_count;
  info["legal_count"] = pl.final_count;
  if (pa.final_count > 0)
    for (const auto& s : admissible.sample(std::min<std::uint64_t>(n_adm, pa.final_count), seed))
      add(s);
  if (pl.final_count > 0)
    for (const auto& s : legal.sample(std::min<std::uint64_t>(n_legal, pl.final_count),
                                      kernels::splitmix64(seed + 1)))
      add(s);
  return out;
}

/// Measures the candidates side by side; when the whole group fails at once (a kernel crashed or
/// overran the child), each is measured alone to find the culprits, and the others side by side.
std::vector<Measurement> measure_group(Measurer& m, const std::vector<Candidate>& cs, int rounds) {
  std::vector<Measurement> r = m.compare(cs, rounds);
  const bool all_failed = std::none_of(r.begin(), r.end(), [](const Measurement& x) {
    return x.status == MeasureStatus::Ok || x.status == MeasureStatus::Refused ||
           x.status == MeasureStatus::WrongResult || x.status == MeasureStatus::CompileError;
  });
  if (!all_failed || cs.size() < 2) return r;
  std::vector<Candidate> good;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    r[i] = m.measure(cs[i]);
    if (r[i].status == MeasureStatus::Ok) {
      good.push_back(cs[i]);
      where.push_back(i);
    }
  }
  if (good.size() >= 2) {
    const std::vector<Measurement> again = m.compare(good, rounds);
    for (std::size_t j = 0; j < good.size(); ++j) r[where[j]] = again[j];
  }
  return r;
}

CollectOutcome collect_in_child(const std::string& db_path, const kernels::Recipe& recipe,
                                const CollectOptions& opts) {
  CollectOutcome out;
  out.label = recipe.label();
  const double t0 = now_s();
  const KernelKind kind = opts.kernel;
  const bool tensor = kernels::needs_tensor(kind);
  kernels::CooMatrix A;
  kernels::CooTensor T;
  if (tensor) {
    T = recipe.source == kernels::Recipe::Source::File ? kernels::read_frostt(recipe.path).tensor
                                                       : kernels::make_tensor(recipe);
    out.fingerprint = kernels::fingerprint_hex(T);
    out.rows = T.order() > 0 ? T.dims[0] : 0;
    out.nnz = T.nnz();
  } else {
    A = kernels::make_matrix(recipe);
    out.fingerprint = kernels::fingerprint_hex(A);
    out.rows = A.rows;
    out.nnz = A.nnz();
  }
  const std::string source =
      recipe.source == kernels::Recipe::Source::Generator ? "generator:" + recipe.generator.kind
      : recipe.source == kernels::Recipe::Source::File    ? "file:" + recipe.path
                                                          : std::string("tensor");
  out.breakdown["make_s"] = now_s() - t0;
  auto excluded = [&](const std::string& fp) {
    return std::find(opts.exclude.begin(), opts.exclude.end(), fp) != opts.exclude.end();
  };
  if (excluded(out.fingerprint)) {
    out.kind = CollectOutcome::Kind::Excluded;
    out.message = "its fingerprint is on the exclusion list";
    return out;
  }
  // An augmentation of an excluded file would leak it too: the source file itself is checked.
  if (!tensor && recipe.source == kernels::Recipe::Source::File && !recipe.augment.empty()) {
    kernels::Recipe plain = recipe;
    plain.augment = {};
    if (excluded(kernels::fingerprint_hex(kernels::make_matrix(plain)))) {
      out.kind = CollectOutcome::Kind::Excluded;
      out.message = "it is made from " + recipe.path + ", whose fingerprint is on the exclusion list";
      return out;
    }
  }
  const int dense = opts.dense > 0 ? opts.dense : kernels::default_dense_size(kind);
  const kernels::CooMatrix* a = tensor ? nullptr : &A;
  const kernels::CooTensor* t = tensor ? &T : nullptr;
  const kernels::DenseOperands d = kernels::make_dense_operands(
      kind, a, t, dense, fingerprint_seed(out.fingerprint, opts.seed), opts.dtype);
  const kernels::Problem p = kernels::make_problem(kind, a, t, d);
  const MeasurementKey key{out.fingerprint, kind, static_cast<int>(p.dense_size()),
                           opts.measure.repeats, opts.dtype};
  {
    ResultsDb db(db_path);
    if (db.has_group(key, opts.measure.threads)) {
      out.kind = CollectOutcome::Kind::Existing;
      out.message = "already collected";
      return out;
    }
  }
  // The CPU lock, held until this process exits, before the reference and everything after it
  // (CPU work a timing run of another process holding the lock must not share the machine with).
  // Only making the operand (its fingerprint says whether it is collected already) comes first:
  // collected and excluded matrices never wait for the lock.
  {
    const double t_lock = now_s();
    kernels::FileLock cpu(opts.cpu_lock);  // an empty path: no lock
    cpu.lock();
    cpu.hold_until_exit();
    out.breakdown["lock_wait_s"] = now_s() - t_lock;
  }
  // The worker computes the reference from the problem it reads (this process never holds it).
  Measurer measurer(p, opts.measure);

  const double t1 = now_s();
  nlohmann::json sampling = nlohmann::json::object();
  const std::vector<Candidate> cs =
      sample_candidates(p, opts, fingerprint_seed(out.fingerprint, opts.seed), sampling);
  out.breakdown["sample_s"] = now_s() - t1;

  const double t2 = now_s();
  auto busy = [&] { return opts.busy_wait_s > 0 && !kernels::busy_machine_warning(opts.measure.threads).empty(); };
  double calm_wait = now_s();
  const bool calm = wait_until_calm(opts.measure.threads, opts.busy_wait_s);
  calm_wait = now_s() - calm_wait;
  std::vector<Measurement> ms = measure_group(measurer, cs, opts.measure.repeats);
  bool disturbed = busy();
  const double t_again = now_s();
  if (disturbed && wait_until_calm(opts.measure.threads, opts.busy_wait_s)) {
    calm_wait += now_s() - t_again;
    ms = measure_group(measurer, cs, opts.measure.repeats);  // measured again once the machine is calm
    disturbed = busy();
  }
  out.breakdown["group_s"] = now_s() - t2;  // with the waits for a calm machine
  out.breakdown["calm_wait_s"] = calm_wait;

  GroupRecord g;
  g.threads = opts.measure.threads;
  g.rounds = opts.measure.repeats;
  g.candidates = static_cast<int>(cs.size());
  g.csr_spread = relative_spread(ms[1]);  // the hand-written baseline
  g.context = opts.context;
  g.context["sampling"] = sampling;
  g.context["calm_before"] = calm;
  g.context["disturbed"] = disturbed;
  // How the rows were timed: their times are on this footing (a settle time and a least run
  // length changed what a short kernel's time means; kernels/timing.hpp).
  g.context["timing"] = {{"settle_runs", opts.measure.settle},
                         {"settle_s", opts.measure.settle_s},
                         {"min_run_s", opts.measure.min_run_s}};
  if (opts.measure.threads > 1 && measurer.times_this_machine()) {  // how far apart the CPUs are
    const double ns = kernels::core_round_trip_ns();
    if (ns > 0) g.context["core_round_trip_ns"] = ns;
  }
  double conversion = 0, compile = 0;
  std::vector<GroupRow> rows;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    rows.push_back({cs[i], ms[i]});
    out.ok += ms[i].status == MeasureStatus::Ok;
    conversion += ms[i].conversion_s;
    compile += ms[i].compile_s;
  }
  out.breakdown["conversion_s"] = conversion;
  out.breakdown["compile_s"] = compile;
  out.candidates = static_cast<int>(cs.size());

  std::optional<GroupRecord> repetition;
  if (repeat_group(out.fingerprint, opts.seed, opts.repeat_share)) {
    const double t3 = now_s();
    const std::vector<Measurement> again = measure_group(measurer, cs, opts.measure.repeats);
    repetition = g;
    repetition->repetition = 1;
    repetition->csr_spread = relative_spread(again[1]);
    repetition->pair_agreement = pair_agreement(medians(ms), medians(again));
    out.repeated = true;
    out.breakdown["repetition_s"] = now_s() - t3;
  }
  g.seconds = now_s() - t2;

  ResultsDb db(db_path);
  ResultsDb::Transaction tx(db);  // BEGIN IMMEDIATE: the check below and the rows are one step
  if (db.has_group(key, opts.measure.threads)) {
    // Another process stored this matrix meanwhile (a collect given the database by another
    // name, or a merge): its group stands, this one is dropped rather than stored beside it.
    out.kind = CollectOutcome::Kind::Existing;
    out.message = "collected meanwhile by another process";
    out.seconds = now_s() - t0;
    return out;
  }
  db.record_matrix(tensor ? matrix_record(T, source) : matrix_record(A, source));
  db.record_provenance(out.fingerprint, {recipe.to_json(), source, split_of(out.fingerprint)});
  db.record_group(key, g, rows);
  if (repetition) db.record_group(key, *repetition, {});
  tx.commit();
  out.kind = CollectOutcome::Kind::Measured;
  out.seconds = now_s() - t0;
  out.message = std::to_string(out.ok) + "/" + std::to_string(out.candidates) + " ok";
  return out;
}

}  // namespace

const char* outcome_name(CollectOutcome::Kind k) {
  switch (k) {
    case CollectOutcome::Kind::Measured: return "measured";
    case CollectOutcome::Kind::Existing: return "existing";
    case CollectOutcome::Kind::Excluded: return "excluded";
    case CollectOutcome::Kind::Failed: return "failed";
    case CollectOutcome::Kind::Interrupted: return "interrupted";
  }
  return "?";
}

nlohmann::json CollectOutcome::to_json() const {
  return {{"outcome", outcome_name(kind)}, {"label", label},   {"fingerprint", fingerprint},
          {"message", message},            {"rows", rows},     {"nnz", nnz},
          {"candidates", candidates},      {"ok", ok},         {"repeated", repeated},
          {"seconds", seconds},            {"breakdown", breakdown}};
}

std::optional<double> pair_agreement(const std::vector<double>& first,
                                     const std::vector<double>& second) {
  WACO_ASSERT(first.size() == second.size(), "pair_agreement: two measurements of one list");
  std::int64_t pairs = 0, agree = 0;
  for (std::size_t a = 0; a < first.size(); ++a)
    for (std::size_t b = a + 1; b < first.size(); ++b) {
      if (first[a] <= 0 || first[b] <= 0 || second[a] <= 0 || second[b] <= 0) continue;
      ++pairs;
      agree += (first[a] < first[b]) == (second[a] < second[b]);
    }
  if (pairs == 0) return std::nullopt;
  return static_cast<double>(agree) / static_cast<double>(pairs);
}

bool repeat_group(const std::string& fingerprint, std::uint64_t seed, double share) {
  const std::uint64_t h = fingerprint_seed(fingerprint, seed ^ 0x5EEDull);
  return static_cast<double>(h % 1000000) < share * 1e6;
}

CollectOutcome collect_one(const std::string& db_path, const kernels::Recipe& recipe,
                           const CollectOptions& opts) {
  int fds[2];
  if (::pipe(fds) != 0) throw Error(std::string("collect: pipe failed: ") + std::strerror(errno));
  const double t0 = now_s();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(std::string("collect: fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {  // the child: collect, report one JSON document, exit without unwinding
    ::close(fds[0]);
    // Ends with the collect (a collect killed by a signal left it measuring and writing the
    // database on its own), and leaves SIGINT and SIGTERM to the parent's handler: the default
    // here, so that a terminal's Ctrl-C, which reaches the whole process group, ends it too.
    if (!detail::die_with_parent(parent)) ::_exit(3);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    CollectOutcome out;
    out.label = recipe.label();
    try {
      out = collect_in_child(db_path, recipe, opts);
    } catch (const std::exception& e) {
      out.kind = CollectOutcome::Kind::Failed;
      out.message = e.what();
    }
    const std::string text = out.to_json().dump();
    std::size_t sent = 0;
    while (sent < text.size()) {
      const ssize_t w = ::write(fds[1], text.data() + sent, text.size() - sent);
      if (w <= 0) break;
      sent += static_cast<std::size_t>(w);
    }
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  bool interrupted = false;
  for (;;) {
    if (opts.stop && *opts.stop) {  // checked between reads: a signal may come before poll
      interrupted = true;
      ::kill(pid, SIGKILL);  // its worker and measuring children follow (PR_SET_PDEATHSIG)
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int pr = ::poll(&p, 1, 200);
    if (pr == 0 || (pr < 0 && errno == EINTR)) continue;
    const ssize_t r = ::read(fds[0], buf, sizeof buf);
    if (r > 0) text.append(buf, static_cast<std::size_t>(r));
    else if (r == 0 || errno != EINTR) break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  CollectOutcome out;
  out.label = recipe.label();
  out.seconds = now_s() - t0;
  // A terminal's Ctrl-C reaches the child too (same process group): it died of it before the
  // flag was seen.
  if (text.empty() && opts.stop && *opts.stop) interrupted = true;
  if (interrupted) {
    out.kind = CollectOutcome::Kind::Interrupted;
    out.message = "interrupted: nothing of this matrix was stored";
    return out;
  }
  if (text.empty()) {
    out.kind = CollectOutcome::Kind::Failed;
    out.message = WIFSIGNALED(status)
                      ? "the collecting process died (signal " + std::to_string(WTERMSIG(status)) + ")"
                      : "the collecting process exited without a report";
    return out;
  }
  const nlohmann::json j = nlohmann::json::parse(text);
  const std::string kind = j.at("outcome");
  for (auto k : {CollectOutcome::Kind::Measured, CollectOutcome::Kind::Existing,
                 CollectOutcome::Kind::Excluded, CollectOutcome::Kind::Failed,
                 CollectOutcome::Kind::Interrupted})
    if (kind == outcome_name(k)) out.kind = k;
  out.fingerprint = j.at("fingerprint");
  out.message = j.at("message");
  out.rows = j.at("rows");
  out.nnz = j.at("nnz");
  out.candidates = j.at("candidates");
  out.ok = j.at("ok");
  out.repeated = j.at("repeated");
  out.breakdown = j.at("breakdown");
  return out;
}

}  // namespace waco::heuristics
