// The supervisor (measure_internal.hpp): forks a measuring child per request and holds it to
// its time limits, turning a crash, a hang or an overrun into a Measurement; the worker uses it
// for every request, the Measurer to reap the worker (or to kill it with everything under it).
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "framing.hpp"
#include "measure_internal.hpp"
#include "waco/kernels/error.hpp"
#include "waco/kernels/process.hpp"
#include "waco/kernels/process_memory.hpp"
#include "waco/kernels/timing.hpp"

namespace waco::heuristics::detail {

using kernels::now_seconds;

namespace {
std::int64_t children_peak = 0;  // see take_children_peak
}  // namespace

std::int64_t take_children_peak() {
  const std::int64_t peak = children_peak;
  children_peak = 0;
  return peak;
}

bool die_with_parent(pid_t expected_parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  return ::getppid() == expected_parent;
}

namespace {
/// waitpid that retries on EINTR; returns the status, or -1 when there is no such child.
int wait_child(pid_t pid, bool block) {
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, block ? 0 : WNOHANG);
    if (r == pid) return status;
    if (r == 0) return -2;  // still running
    if (errno != EINTR) return -1;
  }
}
}  // namespace

int reap_child(pid_t pid, double seconds) {
  if (!kernels::await_child_exit(pid, seconds)) ::kill(pid, SIGKILL);
  return wait_child(pid, true);
}

namespace {

/// A process of this machine as /proc/PID/stat tells it.
struct ProcessEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
};

/// Every process /proc lists now (those that vanish while it is read are left out).
std::vector<ProcessEntry> processes() {
  std::vector<ProcessEntry> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    std::FILE* f = std::fopen(path, "re");
    if (f == nullptr) continue;
    char buf[512];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    const char* close = std::strrchr(buf, ')');
    char state = 0;
    int ppid = 0, pgrp = 0;
    if (close == nullptr || std::sscanf(close + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) continue;
    out.push_back({static_cast<pid_t>(pid), static_cast<pid_t>(ppid), static_cast<pid_t>(pgrp)});
  }
  ::closedir(dir);
  return out;
}

}  // namespace

void kill_worker_tree(pid_t worker) {
  if (worker <= 0) return;
  // Frozen first, so that neither the worker nor its measuring child starts another process
  // while the tree is read (a forked worker may not lead its group yet: it is stopped alone).
  ::kill(-worker, SIGSTOP);
  ::kill(worker, SIGSTOP);
  const std::vector<ProcessEntry> all = processes();
  std::vector<ProcessEntry> tree;  // the worker's descendants, parents before children
  std::vector<pid_t> parents{worker};
  for (std::size_t i = 0; i < parents.size(); ++i)
    for (const ProcessEntry& p : all)
      if (p.ppid == parents[i]) {
        tree.push_back(p);
        parents.push_back(p.pid);
      }
  const pid_t own_group = ::getpgrp();
  for (const ProcessEntry& p : tree) {
    // A compiler leads a group of its own (the driver's cc1plus, as and ld are in it).
    if (p.pgrp > 1 && p.pgrp != worker && p.pgrp != own_group) ::kill(-p.pgrp, SIGKILL);
    ::kill(p.pid, SIGKILL);
  }
  ::kill(-worker, SIGKILL);
  ::kill(worker, SIGKILL);
  wait_child(worker, true);
}

namespace {

std::string format_limit(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  return buf;
}

/// How a child that sent no result ended ("was killed by signal 11 (Segmentation fault)").
std::string describe_exit(int status) {
  if (status == -1) return "vanished";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "unknown") + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status)) +
                                " without a result";
  return "stopped abnormally (wait status " + std::to_string(status) + ")";
}

}  // namespace

nlohmann::json to_json(const std::vector<Measurement>& ms) {
  nlohmann::json j = nlohmann::json::array();
  for (const Measurement& m : ms) j.push_back(m.to_json());
  return j;
}

std::vector<Measurement> from_json(const nlohmann::json& j) {
  std::vector<Measurement> ms;
  for (const nlohmann::json& e : j) ms.push_back(Measurement::from_json(e));
  return ms;
}

std::vector<Measurement> supervise(double prepare_limit, double run_limit,
                                   const std::function<std::vector<Measurement>(int)>& body,
                                   nlohmann::json* overrun, double step_limit) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    Measurement m;
    return {failed(m, MeasureStatus::Crashed,
                   std::string("socketpair failed: ") + std::strerror(errno))};
  }
  const pid_t worker = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    Measurement m;
    return {failed(m, MeasureStatus::Crashed, std::string("fork failed: ") + std::strerror(errno))};
  }
  if (child == 0) {
    ::close(fds[0]);
    if (!die_with_parent(worker)) ::_exit(3);
    std::vector<Measurement> ms;
    try {
      ms = body(fds[1]);
    } catch (const std::exception& e) {  // a bug or bad_alloc in the child: report, do not hide
      ms = {failed(Measurement{}, MeasureStatus::Crashed,
                   std::string("uncaught exception in the measuring child: ") + e.what())};
    }
    const std::string results = to_json(ms).dump();
    write_frame(fds[1], 'S', std::to_string(kernels::peak_rss_bytes()));
    write_frame(fds[1], 'R', results);
    ::_exit(0);
  }
  ::close(fds[1]);
  const int sock = fds[0];
  double limit = prepare_limit;
  double deadline = now_seconds() + limit;
  const char* phase = "preparing (format, compile)";
  std::string now_on;  // the payload of the last 'N' frame before the 'P' frame
  std::vector<Measurement> m;
  for (;;) {
    char type = 0;
    std::string payload;
    const ReadStatus st = read_frame(sock, deadline, type, payload);
    if (st == ReadStatus::Timeout) {
      ::kill(child, SIGKILL);
      wait_child(child, true);
      m = {failed(Measurement{}, MeasureStatus::Timeout,
                  "no result within " + format_limit(limit) + " s while " + phase +
                      "; the child was killed")};
    } else if (st != ReadStatus::Ok) {  // Eof (or a frame no child sends: TooLarge)
      const int status = reap_child(child, 10.0);
      m = {failed(Measurement{}, MeasureStatus::Crashed,
                  "the measuring child " + describe_exit(status) + " while " + phase)};
    }
    if (st != ReadStatus::Ok) {
      if (!now_on.empty() && overrun != nullptr) {  // the failure of the candidate it was on
        *overrun = nlohmann::json::parse(now_on);
        (*overrun)["failed"] = m.front().to_json();
        m.clear();
      }
      break;
    }
    if (type == 'N') {
      now_on = std::move(payload);
      phase = "preparing or first running it (format, compile, verification, screening)";
      if (step_limit > 0) {
        limit = step_limit;
        deadline = now_seconds() + limit;
      }
      continue;
    }
    if (type == 'X' && overrun != nullptr) {
      *overrun = nlohmann::json::parse(payload);
      reap_child(child, 10.0);
      break;
    }
    if (type == 'S') {
      children_peak = std::max<std::int64_t>(children_peak, std::atoll(payload.c_str()));
      continue;
    }
    if (type == 'P') {
      now_on.clear();
      limit = run_limit;
      deadline = now_seconds() + limit;
      phase = "running (verification, timing)";
      continue;
    }
    WACO_ASSERT(type == 'R', "unexpected frame from the measuring child");
    m = from_json(nlohmann::json::parse(payload));
    reap_child(child, 10.0);
    break;
  }
  ::close(sock);
  return m;
}

}  // namespace waco::heuristics::detail
