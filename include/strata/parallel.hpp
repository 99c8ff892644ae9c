// Who owns the compute threads. Strata runs one pool, OpenMP's: OpenBLAS is told to compute on the calling
// thread only, and Strata splits the large GEMMs across the OpenMP team itself (parallel_gemm below).
//
// Why: with Debian's pthreads build of OpenBLAS there are otherwise two pools. Each one's idle workers spin for
// a while after their work is done, on the core the other pool's worker needs next, so a GEMM after an OpenMP
// loop (or the reverse) ran up to twice as slow on 2 cores, and on a busy machine a GEMM split in two waited for
// whichever half lost its core. With one pool, every parallel loop (im2col, pooling, activations, GEMM blocks)
// shares the same threads and none of them waits on a sleeping or spinning stranger.
#pragma once

namespace strata {

// The number of threads compute may use: OMP_NUM_THREADS if set, else OPENBLAS_NUM_THREADS if set, else the
// cores. The first call (made when libstrata loads) also pins OpenBLAS to one thread.
int compute_threads();
// This machine's cores divided among the ranks mpirun started on it (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE,
// MPICH's MPI_LOCALNRANKS; all of them outside mpirun), at least 1.
int cores_per_local_rank();
// Changes the thread count for what follows on this thread (tests; a tool's flag).
void set_compute_threads(int threads);

// Whether a loop over `work` elementary operations is worth an OpenMP team (not already inside one, more than
// one thread, and enough work to pay for waking the team).
bool parallel_worthwhile(long long work);

}  // namespace strata
