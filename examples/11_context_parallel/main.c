/* main.c — Example 11's program: attention over a sequence spread across MPI ranks (cp_run.c has
 * the flags and the checks, cp_ring.c the strategies). Run it under mpirun, e.g.
 *   mpirun -np 4 ./context_parallel --strategy zigzag --causal -L 1000 */
#include <mpi.h>

#include "cp_run.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const int rc = cp_main(argc, argv);
    MPI_Finalize();
    return rc;
}
