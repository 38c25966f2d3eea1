// Unit "measure_worker": the spawned measurement worker (heuristics/measure.hpp,
// measure_internal.hpp). A Measurer made after the caller ran OpenMP measures (a forked worker
// hung there); one worker serves a second problem; the binary problem frame round-trips and a
// malformed or truncated one is refused, by the decoder and by the running worker, which goes on
// serving; a worker program that cannot be found is a clear error; the worker holds no
// descriptor of the caller's but its socket.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "framing.hpp"
#include "measure_internal.hpp"
#include "problem_wire.hpp"
#include "support/edge_cases.hpp"
#include "support/test_paths.hpp"
#include "waco/codegen/super_schedule.hpp"
#include "waco/heuristics/measure.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/generators.hpp"
#include "waco/kernels/implementation.hpp"

using namespace waco;
using namespace waco::heuristics;
namespace d = waco::heuristics::detail;

namespace {

struct Fixture {
  explicit Fixture(kernels::KernelKind k = kernels::KernelKind::SpMV, int dense = 1,
                   kernels::Dtype dtype = kernels::Dtype::F32)
      : ops(kernels::make_dense_operands(k, &a, nullptr, dense, 11, dtype)),
        p(kernels::make_problem(k, &a, nullptr, ops)),
        ref(kernels::compute_reference(p)) {}
  kernels::CooMatrix a = test::band_matrix(300, 1);
  kernels::DenseOperands ops;
  kernels::Problem p;
  kernels::Reference ref;
};

MeasureOptions quick() {
  MeasureOptions o;
  o.warmup = 1;
  o.repeats = 3;
  o.threads = 2;
  o.run_timeout_s = 20.0;
  o.generated.compiler.cache_dir = std::string(WACO_BINARY_DIR) + "/test-kernel-cache";
  return o;
}

Candidate csr_schedule(kernels::KernelKind k) {
  return Candidate::generated(*codegen::schedule_shortcut(k, "csr"));
}

/// body's exit code in a forked child of this test (OpenMP there cannot touch this process), or
/// -signal.
template <class Body>
int in_child(Body body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 98;
    }
    _exit(code);
  }
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

/// The worker program started by hand on a socket pair: the test speaks its protocol.
struct RawWorker {
  int sock = -1;
  pid_t pid = -1;
  RawWorker() {
    int fds[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    pid = d::spawn_worker(d::find_measure_worker(), fds[1]);
    close(fds[1]);
    sock = fds[0];
    char type = 0;
    std::string hello;
    REQUIRE(d::read_frame(sock, kernels::now_seconds() + 30, type, hello) == d::ReadStatus::Ok);
    CHECK(type == 'H');
    CHECK(hello == d::kWorkerHello);
  }
  ~RawWorker() {
    if (sock >= 0) close(sock);
    if (pid > 0) d::reap_child(pid, 5.0);
  }
  /// One answer: its type and payload.
  std::pair<char, std::string> answer() {
    char type = 0;
    std::string payload;
    REQUIRE(d::read_frame(sock, kernels::now_seconds() + 60, type, payload) == d::ReadStatus::Ok);
    return {type, payload};
  }
};

}  // namespace

TEST_CASE("measure_worker: a Measurer made after the caller ran OpenMP measures") {
  const int code = in_child([] {
    Fixture f;
    // The caller runs an OpenMP parallel region first (csr on two threads): GNU libgomp's pool
    // now exists, and a worker forked from here would hang in its children's first region.
    auto csr = kernels::make_implementation("csr", kernels::KernelKind::SpMV);
    csr->prepare(f.p, 2);
    csr->run();
    Measurer m(f.p, f.ref, quick());
    const Measurement g = m.measure(Candidate::generated(
        codegen::schedule_from_string(kernels::KernelKind::SpMV,
                                      "order=i,k format=UC parallel=i threads=2 chunk=8")));
    if (g.status != MeasureStatus::Ok || g.threads != 2 || !g.verified) return 1;
    const std::vector<Measurement> c =
        m.compare({csr_schedule(kernels::KernelKind::SpMV), Candidate::baseline("csr")}, 3);
    if (c.size() != 2 || c[0].status != MeasureStatus::Ok || c[1].status != MeasureStatus::Ok)
      return 2;
    csr->run();  // and the caller's OpenMP still works
    return 0;
  });
  CHECK(code == 0);
}

TEST_CASE("measure_worker: one worker serves a second problem") {
  Fixture spmv;
  Measurer m(spmv.p, spmv.ref, quick());
  const pid_t worker = m.worker_pid();
  CHECK(m.measure(csr_schedule(kernels::KernelKind::SpMV)).status == MeasureStatus::Ok);

  // SpMM (dense operand B of 4 columns) in the same worker: measured against its reference.
  Fixture spmm(kernels::KernelKind::SpMM, 4);
  m.load(spmm.p, spmm.ref);
  const Measurement s = m.measure(csr_schedule(kernels::KernelKind::SpMM));
  INFO(s.reason);
  CHECK(s.status == MeasureStatus::Ok);
  CHECK(s.verified);
  CHECK(m.worker_pid() == worker);
  // An SpMV schedule is now for another kernel.
  CHECK(m.measure(csr_schedule(kernels::KernelKind::SpMV)).status == MeasureStatus::Refused);
  // The reference is the loaded one: a wrong one fails verification.
  kernels::Reference wrong = spmm.ref;
  wrong.value.set(5, wrong.value[5] + 1.0);
  m.load(spmm.p, wrong);
  CHECK(m.measure(Candidate::baseline("csr")).status == MeasureStatus::WrongResult);
  CHECK(m.worker_pid() == worker);
  // A problem in double precision: the worker builds and verifies double kernels.
  Fixture spmm64(kernels::KernelKind::SpMM, 4, kernels::Dtype::F64);
  m.load(spmm64.p, spmm64.ref);
  for (const Candidate& c : {csr_schedule(kernels::KernelKind::SpMM), Candidate::baseline("csr")}) {
    const Measurement s64 = m.measure(c);
    INFO(s64.reason);
    CHECK(s64.status == MeasureStatus::Ok);
    CHECK(s64.verified);
  }
  CHECK(m.worker_pid() == worker);
  // The reference not sent: the worker computes it (a wrong sent one above failed; this verifies).
  m.load(spmm.p, nullptr);
  const Measurement own = m.measure(Candidate::baseline("csr"));
  INFO(own.reason);
  CHECK(own.status == MeasureStatus::Ok);
  CHECK(own.verified);
  CHECK(m.worker_pid() == worker);
}

TEST_CASE("measure_worker: a Measurer whose worker computes the reference verifies against it") {
  Fixture f(kernels::KernelKind::SpMM, 4);
  Measurer m(f.p, quick());
  for (const Candidate& c : {csr_schedule(kernels::KernelKind::SpMM), Candidate::baseline("csr")}) {
    const Measurement r = m.measure(c);
    INFO(r.reason);
    CHECK(r.status == MeasureStatus::Ok);
    CHECK(r.verified);
  }
}

TEST_CASE("measure_worker: the problem frame round-trips, malformed bytes are refused") {
  Fixture f(kernels::KernelKind::SDDMM, 3);  // B and C
  MeasureOptions o = quick();
  o.generated.compiler.flags = {"-O2", "-fPIC"};
  o.compare_race_factor = 2.5;
  o.settle_s = 0.0025;
  o.min_run_s = 0.00004;
  const std::string bytes = d::encode_load(f.p, &f.ref, o, 3);
  CHECK(bytes.size() == d::load_payload_size(f.p, &f.ref, o, 3));
  d::FrameSource in(bytes);
  const auto lp = d::read_load(in);
  CHECK(lp->problem.kind == kernels::KernelKind::SDDMM);
  CHECK(lp->matrix.row == f.a.row);
  CHECK(lp->matrix.col == f.a.col);
  CHECK(lp->matrix.val == f.a.val);
  CHECK(lp->dense.B.data == f.ops.B.data);
  CHECK(lp->dense.C.data == f.ops.C.data);
  CHECK(lp->dense.C.layout == f.ops.C.layout);
  CHECK(lp->reference.value == f.ref.value);
  CHECK(lp->reference.scale == f.ref.scale);
  CHECK(lp->run_threads == 3);
  CHECK(lp->options.repeats == o.repeats);
  CHECK(lp->options.compare_race_factor == 2.5);
  CHECK(lp->options.settle_s == 0.0025);
  CHECK(lp->options.min_run_s == 0.00004);
  CHECK(lp->options.generated.compiler.flags == o.generated.compiler.flags);
  CHECK(lp->options.generated.compiler.cache_dir == o.generated.compiler.cache_dir);
  CHECK(lp->problem.dtype() == kernels::Dtype::F32);
  {  // in double: the value type and the dense operands' bytes
    Fixture g(kernels::KernelKind::SDDMM, 3, kernels::Dtype::F64);
    d::FrameSource in64(d::encode_load(g.p, &g.ref, o, 1));
    const auto lp64 = d::read_load(in64);
    CHECK(lp64->problem.dtype() == kernels::Dtype::F64);
    CHECK(lp64->dense.B.data == g.ops.B.data);
    CHECK(lp64->dense.C.data == g.ops.C.data);
    CHECK(lp64->dense.B.dtype() == kernels::Dtype::F64);
  }
  {  // without the reference: the reader computes it, the same as the sender's
    for (const kernels::KernelKind k : {kernels::KernelKind::SpMV, kernels::KernelKind::SpMM,
                                        kernels::KernelKind::SDDMM}) {
      Fixture h(k, 3);
      const std::string without = d::encode_load(h.p, nullptr, o, 1);
      CHECK(without.size() == d::load_payload_size(h.p, nullptr, o, 1));
      CHECK(without.size() < d::encode_load(h.p, &h.ref, o, 1).size());
      d::FrameSource in0(without);
      const auto lp0 = d::read_load(in0);
      CHECK(lp0->reference.value == h.ref.value);
      CHECK(lp0->reference.scale == h.ref.scale);
    }
  }

  const auto refused = [](const std::string& b) {
    d::FrameSource s(b);
    try {
      d::read_load(s);
    } catch (const d::WireError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Every prefix is refused (truncated), never read past its end.
  for (std::size_t n = 0; n < bytes.size(); n += 1 + n / 3) {
    INFO(n);
    CHECK_FALSE(refused(bytes.substr(0, n)).empty());
  }
  CHECK(refused(bytes + "x").find("bytes after the problem") != std::string::npos);
  CHECK(refused("WAOL").find("bad magic") == std::string::npos);  // a prefix: truncated
  CHECK(refused(std::string(16, '\x7f')).find("bad magic") != std::string::npos);

  // A matrix out of order, an index out of range, a huge count: each refused with a reason.
  kernels::CooMatrix swapped = f.a;
  std::swap(swapped.col[0], swapped.col[1]);
  std::swap(swapped.val[0], swapped.val[1]);
  kernels::Problem q = f.p;
  q.A = &swapped;
  CHECK(refused(d::encode_load(q, &f.ref, o, 1)).find("not canonical") != std::string::npos);
  kernels::CooMatrix outside = f.a;
  outside.col.back() = outside.cols + 5;
  q.A = &outside;
  CHECK_FALSE(refused(d::encode_load(q, &f.ref, o, 1)).empty());
  std::string huge = bytes;
  // The first array is the compiler's name, after the header (8), 8 ints, 10 doubles.
  const std::size_t count_at = 8 + 8 * 4 + 10 * 8;
  const std::uint64_t lots = std::uint64_t{1} << 60;
  std::memcpy(huge.data() + count_at, &lots, 8);
  CHECK(refused(huge).find("elements announced") != std::string::npos);
  // A reference of the wrong size.
  kernels::Reference short_ref;
  const std::vector<double> shorter(f.ref.value.size() - 1, 0.0);
  short_ref.value.assign(f.ref.value.dtype(), shorter.data(), shorter.size());
  short_ref.scale.assign(shorter.size(), 0);
  CHECK(refused(d::encode_load(f.p, &short_ref, o, 1)).find("reference") != std::string::npos);
}

TEST_CASE("measure_worker: the worker refuses bad frames with an error and goes on serving") {
  Fixture f;
  RawWorker w;
  // A measurement before any problem.
  const nlohmann::json request = {
      {"candidates", d::candidates_to_json({Candidate::baseline("csr")})}, {"rounds", 3}};
  REQUIRE(d::write_frame(w.sock, 'M', request.dump()));
  auto [t1, e1] = w.answer();
  CHECK(t1 == 'E');
  CHECK(e1.find("before any problem") != std::string::npos);
  // Garbage as a problem.
  REQUIRE(d::write_frame(w.sock, 'L', std::string(40, '\x01')));
  auto [t2, e2] = w.answer();
  CHECK(t2 == 'E');
  CHECK(e2.find("malformed problem frame") != std::string::npos);
  // An unknown request.
  REQUIRE(d::write_frame(w.sock, 'Q', "{}"));
  CHECK(w.answer().first == 'E');
  // Then a good problem and a measurement.
  REQUIRE(d::write_frame(w.sock, 'L', d::encode_load(f.p, &f.ref, quick(), 2)));
  CHECK(w.answer().first == 'K');
  REQUIRE(d::write_frame(w.sock, 'M', request.dump()));
  auto [t3, r3] = w.answer();
  REQUIRE(t3 == 'R');
  const nlohmann::json ms = nlohmann::json::parse(r3);
  REQUIRE(ms.size() == 1);
  CHECK(ms[0].at("status") == "ok");
  // A truncated frame (the sender goes away in the middle): the worker exits cleanly.
  const std::string good = d::encode_load(f.p, &f.ref, quick(), 2);
  REQUIRE(d::write_header(w.sock, 'L', good.size()));
  REQUIRE(d::write_bytes(w.sock, good.data(), good.size() / 2));
  close(w.sock);
  w.sock = -1;
  const int status = d::reap_child(w.pid, 10.0);
  w.pid = -1;
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("measure_worker: a worker program that cannot be found is a clear error") {
  Fixture f;
  const char* old = std::getenv("WACO_MEASURE_WORKER");
  const std::string saved = old ? old : "";
  setenv("WACO_MEASURE_WORKER", "/nonexistent/waco-measure-worker", 1);
  std::string what, hint;
  try {
    Measurer m(f.p, f.ref, quick());
  } catch (const kernels::Error& e) {
    what = e.what();
    hint = e.hint();
  }
  if (old) setenv("WACO_MEASURE_WORKER", saved.c_str(), 1);
  else unsetenv("WACO_MEASURE_WORKER");
  CHECK(what.find("WACO_MEASURE_WORKER=/nonexistent/waco-measure-worker") != std::string::npos);
  CHECK(hint.find("waco-measure-worker") != std::string::npos);
  // The one found without the variable is the build tree's, in the installed layout.
  CHECK(d::find_measure_worker().find("/libexec/waco-hybrid/waco-measure-worker") !=
        std::string::npos);
}

TEST_CASE("measure_worker: run by hand, the worker program says what it is") {
  const std::string cmd = d::find_measure_worker() + " 3>/dev/null 2>&1";
  FILE* out = popen(cmd.c_str(), "r");
  REQUIRE(out != nullptr);
  std::string text;
  char buf[256];
  while (fgets(buf, sizeof buf, out) != nullptr) text += buf;
  const int status = pclose(out);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(text.find("helper of waco-hybrid") != std::string::npos);
}

TEST_CASE("measure_worker: the worker is the spawned program, holding no descriptor but 0-3") {
  Fixture f;
  // A descriptor of the caller's without close-on-exec: it must not reach the worker.
  const int leaky = open("/dev/null", O_RDONLY);
  REQUIRE(leaky > 3);
  Measurer m(f.p, f.ref, quick());
  close(leaky);
  const std::string proc = "/proc/" + std::to_string(m.worker_pid());
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink(proc + "/exe", ec).string();
  CHECK(exe.find("/libexec/waco-hybrid/waco-measure-worker") != std::string::npos);
  // Listed until only 0-3 are open, for up to a second: the worker opens files of its own for
  // moments (a ctest -j2 run once listed a fourth); a leaked descriptor stays.
  std::set<int> fds;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fds.clear();
    for (const auto& e : std::filesystem::directory_iterator(proc + "/fd", ec))
      fds.insert(std::stoi(e.path().filename().string()));
    if (fds == std::set<int>{0, 1, 2, 3}) break;
    usleep(10000);
  }
  CHECK(fds == std::set<int>{0, 1, 2, 3});
  // fd 3 is close-on-exec in the worker: nothing a measuring child runs inherits it.
  std::ifstream flags(proc + "/fdinfo/3");
  std::string key, value;
  long octal = 0;
  while (flags >> key >> value)
    if (key == "flags:") octal = std::stol(value, nullptr, 8);
  CHECK((octal & O_CLOEXEC) != 0);
  // Still measuring.
  CHECK(m.measure(Candidate::baseline("csr")).status == MeasureStatus::Ok);
}

TEST_CASE("measure_worker: the worker's malloc backs large blocks with huge pages unless told") {
  using Env = std::vector<std::string>;
  const auto env_of = [](const Env& vars) {
    std::vector<const char*> p;
    for (const std::string& v : vars) p.push_back(v.c_str());
    p.push_back(nullptr);
    return d::worker_environment(p.data());
  };
  CHECK(env_of({"PATH=/bin", "HOME=/root"}) ==
        Env{"PATH=/bin", "HOME=/root", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"});
  CHECK(env_of({"GLIBC_TUNABLES=glibc.malloc.arena_max=2", "A=1"}) ==
        Env{"GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1", "A=1"});
  CHECK(env_of({"GLIBC_TUNABLES="}) == Env{"GLIBC_TUNABLES=glibc.malloc.hugetlb=1"});
  // The caller's own choice stands, wherever it is set.
  CHECK(env_of({"GLIBC_TUNABLES=glibc.malloc.hugetlb=0"}) ==
        Env{"GLIBC_TUNABLES=glibc.malloc.hugetlb=0"});
  CHECK(env_of({"GLIBC_TUNABLES=x.y=1", "GLIBC_TUNABLES=glibc.malloc.hugetlb=2"}) ==
        Env{"GLIBC_TUNABLES=x.y=1", "GLIBC_TUNABLES=glibc.malloc.hugetlb=2"});
  CHECK(env_of({}) == Env{"GLIBC_TUNABLES=glibc.malloc.hugetlb=1"});
  CHECK(d::worker_environment(nullptr) == Env{"GLIBC_TUNABLES=glibc.malloc.hugetlb=1"});

  // The spawned worker runs in it.
  Fixture f;
  Measurer m(f.p, f.ref, quick());
  std::ifstream in("/proc/" + std::to_string(m.worker_pid()) + "/environ", std::ios::binary);
  Env vars;
  for (std::string v; std::getline(in, v, '\0');) vars.push_back(v);
  REQUIRE(!vars.empty());
  CHECK(vars == d::worker_environment(environ));
  CHECK(m.measure(Candidate::baseline("csr")).status == MeasureStatus::Ok);
}

TEST_CASE("measure_worker: an MTTKRP tensor goes over in binary and is measured") {
  const kernels::CooTensor t = kernels::generate_tensor({40, 30, 20}, 600, 3);
  const kernels::DenseOperands ops =
      kernels::make_dense_operands(kernels::KernelKind::MTTKRP, nullptr, &t, 4, 5);
  const kernels::Problem p = kernels::make_problem(kernels::KernelKind::MTTKRP, nullptr, &t, ops);
  const kernels::Reference ref = kernels::compute_reference(p);
  const std::string bytes = d::encode_load(p, &ref, quick(), 2);
  d::FrameSource in(bytes);
  const auto lp = d::read_load(in);
  CHECK(lp->tensor.dims == t.dims);
  CHECK(lp->tensor.idx == t.idx);
  CHECK(lp->tensor.val == t.val);
  CHECK(lp->dense.B.data == ops.B.data);
  CHECK(lp->dense.C.data == ops.C.data);
  for (std::size_t n = 0; n < bytes.size(); n += 1 + n / 2) {
    d::FrameSource part(bytes.substr(0, n));
    CHECK_THROWS_AS(d::read_load(part), d::WireError);
  }
  Measurer m(p, ref, quick());
  const Measurement g = m.measure(
      Candidate::generated(*codegen::schedule_shortcut(kernels::KernelKind::MTTKRP, "csf")));
  INFO(g.reason);
  CHECK(g.status == MeasureStatus::Ok);
  CHECK(m.measure(Candidate::baseline("csf")).status == MeasureStatus::Ok);
}

TEST_CASE("measure_worker: candidates beyond the LLC share formats and an output and are each "
          "verified and the worker reports its memory") {
  // A last-level cache of 1 KiB (a fake sysfs tree, read by the spawned worker): the 300-row
  // band's formats and SpMM output (4 columns) are over twice that, so compare's candidates
  // share the formats they store alike and one output (measure_child.cpp, share_large_data).
  const std::filesystem::path root = test::scratch_dir("measure-worker-tiny-llc");
  const std::filesystem::path l3 = root / "devices/system/cpu/cpu0/cache/index0";
  std::filesystem::create_directories(l3);
  std::ofstream(l3 / "level") << "3\n";
  std::ofstream(l3 / "type") << "Unified\n";
  std::ofstream(l3 / "size") << "1K\n";
  const char* before = std::getenv("WACO_SYSFS_ROOT");
  const std::string saved = before ? before : "";
  ::setenv("WACO_SYSFS_ROOT", root.c_str(), 1);
  Fixture f(kernels::KernelKind::SpMM, 4);
  Measurer m(f.p, f.ref, quick());
  if (before) ::setenv("WACO_SYSFS_ROOT", saved.c_str(), 1); else ::unsetenv("WACO_SYSFS_ROOT");
  const nlohmann::json loaded = m.memory();  // the load: no measuring child yet
  REQUIRE(loaded.is_object());
  CHECK(loaded.at("worker_peak_bytes").get<std::int64_t>() > 0);
  CHECK(loaded.at("worker_rss_bytes").get<std::int64_t>() > 0);
  CHECK(loaded.at("children_peak_bytes").get<std::int64_t>() == 0);
  // Three schedules of one format (csr with other chunks) and one of another (csc), beside the
  // csr baseline: every one verified after its first run and again after the rounds, though
  // the last one timed wrote the shared output last.
  std::vector<Candidate> cs{Candidate::baseline("csr")};
  for (const char* s : {"order=i,k,j format=UC parallel=i threads=2 chunk=8",
                        "order=i,k,j format=UC parallel=i threads=2 chunk=32",
                        "order=k,i,j format=UC parallel=k threads=2 chunk=8",
                        "order=i,k,j format=UC parallel=i threads=1 chunk=8"})
    cs.push_back(Candidate::generated(codegen::schedule_from_string(kernels::KernelKind::SpMM, s)));
  const std::vector<Measurement> ms = m.compare(cs, 3);
  REQUIRE(ms.size() == cs.size());
  for (const Measurement& x : ms) {
    INFO(x.reason);
    CHECK(x.status == MeasureStatus::Ok);
    CHECK(x.verified);
    CHECK(x.max_rel_error < 1e-5);
  }
  // The csr baseline ran on the csr schedules' format (built once, first, for the baseline):
  // they report the one build's time; csc's is a format of its own.
  CHECK(ms[0].conversion_s > 0.0);
  CHECK(ms[1].conversion_s == ms[0].conversion_s);
  CHECK(ms[2].conversion_s == ms[0].conversion_s);
  CHECK(ms[3].conversion_s != ms[0].conversion_s);
  const nlohmann::json measured = m.memory();
  REQUIRE(measured.is_object());
  CHECK(measured.at("children_peak_bytes").get<std::int64_t>() > 0);
  CHECK(m.memory().at("children_peak_bytes").get<std::int64_t>() == 0);  // since the last ask
}
