// The calling thread's OpenMP team: ending its idle threads, and placing a new team's threads
// off the calling thread's CPU before anything is timed on it.
#pragma once

namespace waco::kernels {

/// Ends the idle threads of the calling thread's OpenMP thread pool (omp_pause_resource_all,
/// soft: the next parallel region starts them again, ~0.1 ms); nothing inside a parallel region.
/// GNU libgomp keeps a region's threads spinning after it ends (GOMP_SPINCOUNT, 300,000 pauses
/// by default), on the cores that a tune's measuring children then time kernels on: a tune calls
/// it once its own parallel work (the choice) is done.
void release_idle_openmp_threads();

/// Starts the calling thread's OpenMP team of `threads` (once per thread and team size; again
/// after release_idle_openmp_threads) and moves each new thread that the scheduler placed on
/// the calling thread's CPU to another CPU it may run on: its affinity narrowed, then at once
/// given back (it is not pinned). Returns the seconds it took (0 when already placed).
/// Why: a new worker is woken onto the CPU of the thread that starts the region (wake-affine
/// placement), where that thread spins at the region's barrier, and runs only when the
/// scheduler moves it: on a 2-vCPU AMD EPYC Zen 5 guest the first two or three parallel regions
/// of 10 of 12 fresh processes took ~4-8 ms each (8-22 ms in all, against 2 ms with this; the
/// regions after it 3-6 us). Kernels timed, judged or probed on such regions ran 20-30x slower
/// than they run (an adaptive plan abandoned a 1.4x dia kernel; csr's serial-or-parallel
/// probe decided serial where parallel is 2.9x faster, serial_bound.cpp). While the team
/// starts, the calling thread runs as SCHED_BATCH (its new threads too, until each has begun)
/// and yields until every thread has moved: the placement took 5.9 ms at the median on a 2-vCPU
/// Zen 4 guest before, 1.8 ms after (kernels/README.md).
double place_openmp_team(int threads);

}  // namespace waco::kernels
