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
/// after release_idle_openmp_threads) and keeps its workers off the calling thread's CPU: where
/// the team fits the calling thread's CPUs (threads <= their count), each worker whose mask is
/// the calling thread's is confined to that mask but the calling thread's CPU, and confined anew
/// when the calling thread moves (keep_openmp_team_apart; a mask the user set, `taskset` of a
/// thread or `OMP_PROC_BIND`, is left as it is); a larger team's workers
/// found on the calling thread's CPU are moved off it (narrowed, then given their mask back).
/// Returns the seconds it took (0 when already placed; keep_openmp_team_apart then).
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

/// Confines the workers place_openmp_team kept apart to the calling thread's CPUs but the one it
/// runs on now, when it has moved since (a few nanoseconds when it has not: every call of a
/// parallel kernel asks, codegen::BoundKernel::run). Why kept: on the 2-vCPU AMD EPYC Zen 5
/// guests (a kernel that packs tasks onto few vCPUs, `kernel.sched_vcpu_pack`), a worker asleep
/// after libgomp's spin (a few milliseconds without a region) is woken onto the calling
/// thread's CPU, where that thread spins at the region's end until its spin runs out: a region
/// after 20 ms of idleness took 7.8-7.9 ms in 11 of 12 (`/tmp/omp2.c` of session 87; 60-125 us
/// with the worker confined, 21-24 us with OMP_WAIT_POLICY=passive), and 7.9 ms again once the
/// calling thread had moved onto the confined worker's CPU: hence confined anew.
void keep_openmp_team_apart();

}  // namespace waco::kernels
