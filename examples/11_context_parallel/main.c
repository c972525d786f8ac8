/* main.c — Example 11's program: attention over a sequence spread across MPI ranks (cp_run.c runs
 * it: the flags, the strategies of cp_ring.h, the checks of cp_check.h). Run it under mpirun, e.g.
 *   mpirun -np 4 ./context_parallel --strategy zigzag --causal -L 1000
 * or, starting mpirun itself, ./context_parallel --ranks 4 --strategy zigzag --causal -L 1000 */
#include <mpi.h>

#include "cp_run.h"

int main(int argc, char **argv) {
    cp_relaunch(argc, argv); /* --ranks N: the same run under mpirun -np N */
    MPI_Init(&argc, &argv);
    const int rc = cp_main(argc, argv);
    MPI_Finalize();
    return rc;
}
