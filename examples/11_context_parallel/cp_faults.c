/* cp_faults.c — a rank lost (cp_ring.h): the failure planted by --fault, and a transfer that
 * timed out or failed reported in one line naming the rank, the step and the peer, then every
 * rank ended. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cp_ring.h"

void cp_transfer_failed(const cp_transport *t, int rc, int step, int peer, const char *what,
                        bool sent) {
    char who[32], at[32];
    snprintf(who, sizeof who, peer >= 0 ? "rank %d" : "every rank", peer);
    snprintf(at, sizeof at, step >= 0 ? "step %d" : "gather", step);
    if (rc != CP_TIMEOUT)
        fprintf(stderr, "error: rank %d: %s: the %s %s %s failed (%s)\n", t->rank, at, what,
                sent ? "sent to" : "from", who, t->name);
    else if (sent)
        fprintf(stderr,
                "error: rank %d: %s: %s did not take the %s sent to it within %g s (it died or "
                "hangs)\n",
                t->rank, at, who, what, t->timeout_s);
    else
        fprintf(stderr, "error: rank %d: %s: no %s from %s within %g s (it died or hangs)\n",
                t->rank, at, what, who, t->timeout_s);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}

void cp_fault_point(const cp_transport *t, const cp_fault *f, int step) {
    if (f->kind == CP_FAULT_NONE || f->rank != t->rank || f->step != step)
        return;
    fprintf(stderr, "rank %d: %s at step %d (planted by --fault)\n", t->rank,
            f->kind == CP_FAULT_DIE ? "exits" : "stops answering", step);
    fflush(stderr);
    if (f->kind == CP_FAULT_DIE)
        _exit(3);
    for (;;)
        sleep(1); /* until mpirun ends the job */
}
