/* transport_mpi.c — the transport (transport.h) on MPI: Open MPI's non-blocking point-to-point
 * calls and MPI_Ialltoallv, with device memory staged through host buffers (a copy to the host
 * before a send, from the host after a receive), so that it needs no CUDA-aware MPI. The waits
 * poll MPI_Test until the request completes or the timeout passes. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn/device.h"
#include "transport.h"

double cp_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A short sleep between polls: ranks share cores when oversubscribed. */
static void cp_pause(void) {
    const struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* Polls req until it completes (CP_OK) or the transport's timeout passes (CP_TIMEOUT). */
static int mpi_poll(cp_transport *t, MPI_Request *req) {
    const double deadline = cp_now() + t->timeout_s;
    for (;;) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return CP_FAILED;
        if (done)
            return CP_OK;
        if (cp_now() > deadline)
            return CP_TIMEOUT;
        cp_pause();
    }
}

static int mpi_start(cp_transport *t, void *dev, size_t bytes, int peer, cp_request *r, bool recv) {
    if (bytes > INT_MAX) {
        fprintf(stderr, "error: rank %d: a message of %zu bytes is over MPI's int count\n", t->rank,
                bytes);
        return CP_FAILED;
    }
    *r = (cp_request){.peer = peer,
                      .recv = recv,
                      .dev = dev,
                      .bytes = bytes,
                      .host = malloc(bytes ? bytes : 1),
                      .handle = malloc(sizeof(MPI_Request))};
    if (!r->host || !r->handle)
        return CP_FAILED;
    MPI_Request *req = (MPI_Request *)r->handle;
    int rc;
    if (recv) {
        rc = MPI_Irecv(r->host, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, req);
    } else {
        if (bytes && attn_to_host(r->host, dev, bytes))
            return CP_FAILED;
        rc = MPI_Isend(r->host, (int)bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, req);
    }
    r->active = rc == MPI_SUCCESS;
    return r->active ? CP_OK : CP_FAILED;
}

static int mpi_isend(cp_transport *t, const void *dev, size_t bytes, int peer, cp_request *r) {
    return mpi_start(t, (void *)dev, bytes, peer, r, false);
}

static int mpi_irecv(cp_transport *t, void *dev, size_t bytes, int peer, cp_request *r) {
    return mpi_start(t, dev, bytes, peer, r, true);
}

static int mpi_post(cp_transport *t) {
    (void)t;
    return CP_OK;
}

static int mpi_wait(cp_transport *t, cp_request *r) {
    if (!r->active)
        return CP_OK;
    const int rc = mpi_poll(t, (MPI_Request *)r->handle);
    if (rc != CP_OK)
        return rc; /* left active: the request still owns its buffers */
    int out = CP_OK;
    if (r->recv && r->bytes && attn_to_device(r->dev, r->host, r->bytes))
        out = CP_FAILED;
    free(r->host);
    free(r->handle);
    r->active = false;
    return out;
}

static int mpi_alltoall(cp_transport *t, const void *send, const size_t *send_bytes,
                        const size_t *send_off, void *recv, const size_t *recv_bytes,
                        const size_t *recv_off) {
    const int P = t->size;
    size_t send_total = 0, recv_total = 0;
    for (int p = 0; p < P; ++p) {
        if (send_off[p] + send_bytes[p] > send_total)
            send_total = send_off[p] + send_bytes[p];
        if (recv_off[p] + recv_bytes[p] > recv_total)
            recv_total = recv_off[p] + recv_bytes[p];
    }
    if (send_total > INT_MAX || recv_total > INT_MAX) {
        fprintf(stderr, "error: rank %d: an all-to-all over MPI's int count\n", t->rank);
        return CP_FAILED;
    }
    int *counts = malloc(4 * (size_t)P * sizeof *counts);
    char *hs = malloc(send_total + 1), *hr = malloc(recv_total + 1);
    if (!counts || !hs || !hr) {
        free(counts), free(hs), free(hr);
        return CP_FAILED;
    }
    for (int p = 0; p < P; ++p) {
        counts[p] = (int)send_bytes[p];
        counts[P + p] = (int)send_off[p];
        counts[2 * P + p] = (int)recv_bytes[p];
        counts[3 * P + p] = (int)recv_off[p];
    }
    int rc = CP_OK;
    MPI_Request req;
    if (send_total && attn_to_host(hs, send, send_total))
        rc = CP_FAILED;
    else if (MPI_Ialltoallv(hs, counts, counts + P, MPI_BYTE, hr, counts + 2 * P, counts + 3 * P,
                            MPI_BYTE, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        rc = CP_FAILED;
    else if ((rc = mpi_poll(t, &req)) == CP_OK && recv_total &&
             attn_to_device(recv, hr, recv_total))
        rc = CP_FAILED;
    if (rc != CP_TIMEOUT) { /* a timed-out exchange may still write into them: kept */
        free(hs);
        free(hr);
    }
    free(counts);
    return rc;
}

static int mpi_barrier(cp_transport *t) {
    MPI_Request req;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS)
        return CP_FAILED;
    return mpi_poll(t, &req);
}

static void mpi_close(cp_transport *t) { free(t); }

cp_transport *cp_transport_new(const cp_transport *ops, double timeout_s) {
    cp_transport *t = malloc(sizeof *t);
    if (!t)
        return NULL;
    *t = *ops;
    MPI_Comm_rank(MPI_COMM_WORLD, &t->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t->size);
    t->timeout_s = timeout_s;
    return t;
}

cp_transport *cp_transport_open_mpi(double timeout_s, char *why, size_t why_len) {
    static const cp_transport ops = CP_TRANSPORT_OPS(mpi, "mpi");
    cp_transport *t = cp_transport_new(&ops, timeout_s);
    if (!t)
        snprintf(why, why_len, "out of memory");
    return t;
}

cp_transport *cp_transport_open(const char *name, double timeout_s, char *why, size_t why_len,
                                int *exit_code) {
    *exit_code = ATTN_EXIT_USAGE;
    if (strcmp(name, "mpi") == 0)
        return cp_transport_open_mpi(timeout_s, why, why_len);
    if (strcmp(name, "nccl") == 0)
        return cp_transport_open_nccl(timeout_s, why, why_len, exit_code);
    snprintf(why, why_len, "unknown backend '%s' (mpi or nccl)", name);
    return NULL;
}
