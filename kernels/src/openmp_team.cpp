// The calling thread's OpenMP team (openmp_team.hpp).
#include "waco/kernels/openmp_team.hpp"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>

#include "waco/kernels/timing.hpp"

namespace waco::kernels {

namespace {
/// The team size place_openmp_team placed for the calling thread's pool (0: none since the
/// pool started or was released).
thread_local int placed_team = 0;
}  // namespace

void release_idle_openmp_threads() {
  if (omp_in_parallel()) return;
  omp_pause_resource_all(omp_pause_soft);
  placed_team = 0;
}

double place_openmp_team(int threads) {
  if (threads <= placed_team || omp_in_parallel()) return 0.0;
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
#pragma omp parallel num_threads(threads)
    {
      cpu_set_t mine, other;
      if (omp_get_thread_num() != 0) {
        if (batch) sched_setscheduler(0, SCHED_OTHER, &none);
        if (sched_getcpu() == master &&
            pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0 &&
            CPU_ISSET(master, &mine)) {
          other = mine;
          CPU_CLR(master, &other);
          // Narrowed, the thread moves at once; given its mask back, it stays where it went.
          if (CPU_COUNT(&other) > 0 &&
              pthread_setaffinity_np(pthread_self(), sizeof other, &other) == 0)
            pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
        }
        arrived.fetch_add(1, std::memory_order_release);
      } else {
        // The calling thread gives its CPU up until every thread has arrived (and moved).
        while (arrived.load(std::memory_order_acquire) < omp_get_num_threads() - 1) sched_yield();
      }
    }
    if (batch) sched_setscheduler(0, SCHED_OTHER, &none);
  }
  placed_team = std::max(placed_team, threads);
  return now_seconds() - t0;
}

}  // namespace waco::kernels
