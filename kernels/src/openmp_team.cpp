// The calling thread's OpenMP team (openmp_team.hpp).
#include "waco/kernels/openmp_team.hpp"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "waco/kernels/timing.hpp"

namespace waco::kernels {

namespace {
/// The team size place_openmp_team placed for the calling thread's pool (0: none since the
/// pool started or was released).
thread_local int placed_team = 0;

/// The workers that place_openmp_team confined to the calling thread's CPUs but its own
/// (kernel thread ids: a thread gone since answers ESRCH, never another process's), the mask
/// they were narrowed from, and the CPU the calling thread ran on when they were confined.
struct KeptApart {
  std::vector<pid_t> workers;
  cpu_set_t allowed{};
  int master_cpu = -1;
};
thread_local KeptApart kept;

pid_t own_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

/// Whether `tid` is a thread of this process (a signal 0 sent within the thread group).
bool own_thread(pid_t tid) { return ::syscall(SYS_tgkill, ::getpid(), tid, 0) == 0; }

/// Confines the kept workers to their mask but the calling thread's CPU `cpu`.
void confine_kept(int cpu) {
  cpu_set_t other = kept.allowed;
  CPU_CLR(cpu, &other);
  if (CPU_COUNT(&other) == 0) return;
  for (pid_t tid : kept.workers)
    if (own_thread(tid)) sched_setaffinity(tid, sizeof other, &other);
  kept.master_cpu = cpu;
}
}  // namespace

void release_idle_openmp_threads() {
  if (omp_in_parallel()) return;
  omp_pause_resource_all(omp_pause_soft);
  placed_team = 0;
  kept = KeptApart{};
}

void keep_openmp_team_apart() {
  if (kept.master_cpu < 0) return;
  const int cpu = sched_getcpu();
  if (cpu == kept.master_cpu || cpu < 0 || !CPU_ISSET(cpu, &kept.allowed)) return;
  confine_kept(cpu);
}

double place_openmp_team(int threads) {
  if (omp_in_parallel()) return 0.0;
  if (threads <= placed_team) {
    keep_openmp_team_apart();
    return 0.0;
  }
  const double t0 = now_seconds();
  cpu_set_t allowed;
  const int master = sched_getcpu();
  if (threads > 1 && master >= 0 && sched_getaffinity(0, sizeof allowed, &allowed) == 0 &&
      CPU_COUNT(&allowed) > 1 && CPU_ISSET(master, &allowed)) {
    // While the team starts, the calling thread runs as SCHED_BATCH, which the threads it
    // creates inherit: a batch thread's wake-up does not preempt the running one, so a new
    // thread placed on the calling thread's CPU no longer takes that CPU while the calling thread
    // is inside libgomp's start, to spin at the team's dock for it (the calling thread then
    // spun at the region's end for the new thread: each waited for a scheduler tick). Each new
    // thread takes SCHED_OTHER back at once, the calling thread after the region.
    const sched_param none{};
    const bool batch =
        sched_getscheduler(0) == SCHED_OTHER && sched_setscheduler(0, SCHED_BATCH, &none) == 0;
    std::atomic<int> arrived{0};
    // Kept apart where the team fits the calling thread's CPUs (a worker of a larger team may
    // have to share one): each worker keeps the calling thread's mask but its CPU.
    const bool apart = threads <= CPU_COUNT(&allowed);
    std::mutex confined_mutex;
    std::vector<pid_t> confined;
#pragma omp parallel num_threads(threads)
    {
      if (omp_get_thread_num() != 0) {
        if (batch) sched_setscheduler(0, SCHED_OTHER, &none);
        cpu_set_t mine;
        if (pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0) {
          cpu_set_t other = mine;
          CPU_CLR(master, &other);
          if (apart && CPU_EQUAL(&mine, &allowed)) {
            // Confined, the worker moves at once and stays off the calling thread's CPU.
            if (pthread_setaffinity_np(pthread_self(), sizeof other, &other) == 0) {
              const std::lock_guard<std::mutex> lock(confined_mutex);
              confined.push_back(own_tid());
            }
          } else if (sched_getcpu() == master && CPU_ISSET(master, &mine) &&
                     CPU_COUNT(&other) > 0 &&
                     pthread_setaffinity_np(pthread_self(), sizeof other, &other) == 0) {
            // Narrowed, the thread moves at once; given its mask back, it stays where it went.
            pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
          }
        }
        arrived.fetch_add(1, std::memory_order_release);
      } else {
        // The calling thread gives its CPU up until every thread has arrived (and moved).
        while (arrived.load(std::memory_order_acquire) < omp_get_num_threads() - 1) sched_yield();
      }
    }
    if (batch) sched_setscheduler(0, SCHED_OTHER, &none);
    if (!confined.empty()) {
      // All of them (a smaller team's too) off the CPU the calling thread runs on now.
      kept.allowed = allowed;
      kept.workers.insert(kept.workers.end(), confined.begin(), confined.end());
      const int now = sched_getcpu();
      confine_kept(now >= 0 && CPU_ISSET(now, &allowed) ? now : master);
    }
  }
  placed_team = std::max(placed_team, threads);
  return now_seconds() - t0;
}

}  // namespace waco::kernels
