/* transport_nccl.c — the transport (transport.h) on NCCL: device-to-device sends and receives
 * (ncclSend/ncclRecv, launched as one group per post), ncclGroup all-to-all, and a one-element
 * ncclAllReduce as the barrier, all on one stream of this rank's GPU. Completion is an event the
 * waits poll until the timeout (a peer that died or hangs leaves the group unfinished; close
 * aborts the communicator). MPI starts the ranks and carries NCCL's unique id (MPI_Bcast). One
 * GPU per rank: NCCL refuses two ranks on one device. Built where the CUDA toolkit has NCCL
 * (CP_HAVE_NCCL, examples/11_context_parallel/CMakeLists.txt); elsewhere opening it says why. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "transport.h"

#ifndef CP_HAVE_NCCL

cp_transport *cp_transport_open_nccl(double timeout_s, char *why, size_t why_len, int *exit_code) {
    (void)timeout_s;
    *exit_code = ATTN_EXIT_NO_GPU;
    snprintf(why, why_len,
             "the NCCL backend needs a GPU build with NCCL (this is the %s build); --backend mpi "
             "runs everywhere",
             attn_backend_name());
    return NULL;
}

#else /* CP_HAVE_NCCL */

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <time.h>

/* One isend/irecv call waiting for the post. */
typedef struct nccl_queued {
    void *dev;
    size_t bytes;
    int peer;
    bool recv;
    cudaEvent_t *done; /* the request's event, recorded by the post */
} nccl_queued;

typedef struct nccl_impl {
    ncclComm_t comm;
    cudaStream_t stream;
    int pending;            /* isend/irecv calls queued since the last post */
    nccl_queued queue[128]; /* the most a rank posts at once: the gather's, a few per chunk */
} nccl_impl;

static int nccl_ok(ncclResult_t r, const char *what, int rank) {
    if (r == ncclSuccess || r == ncclInProgress)
        return 1;
    fprintf(stderr, "error: rank %d: %s: %s\n", rank, what, ncclGetErrorString(r));
    return 0;
}

/* Polls an event until it completes or the timeout passes. */
static int nccl_poll(cp_transport *t, cudaEvent_t ev) {
    const double deadline = cp_now() + t->timeout_s;
    const struct timespec pause = {0, 50000};
    for (;;) {
        const cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess)
            return CP_OK;
        if (e != cudaErrorNotReady) {
            attn_cuda_report(e, "cudaEventQuery", __FILE__, __LINE__);
            return CP_FAILED;
        }
        if (cp_now() > deadline)
            return CP_TIMEOUT;
        nanosleep(&pause, NULL);
    }
}

static int nccl_queue(cp_transport *t, void *dev, size_t bytes, int peer, cp_request *r,
                      bool recv) {
    nccl_impl *n = (nccl_impl *)t->impl;
    memset(r, 0, sizeof *r);
    if (n->pending == (int)(sizeof n->queue / sizeof n->queue[0]))
        return CP_FAILED;
    cudaEvent_t *ev = malloc(sizeof *ev);
    if (!ev || cudaEventCreateWithFlags(ev, cudaEventDisableTiming) != cudaSuccess)
        return CP_FAILED;
    *r = (cp_request){
        .peer = peer, .recv = recv, .active = true, .dev = dev, .bytes = bytes, .handle = ev};
    n->queue[n->pending++] =
        (nccl_queued){.dev = dev, .bytes = bytes, .peer = peer, .recv = recv, .done = ev};
    return CP_OK;
}

static int nccl_isend(cp_transport *t, const void *dev, size_t bytes, int peer, cp_request *r) {
    return nccl_queue(t, (void *)dev, bytes, peer, r, false);
}

static int nccl_irecv(cp_transport *t, void *dev, size_t bytes, int peer, cp_request *r) {
    return nccl_queue(t, dev, bytes, peer, r, true);
}

static int nccl_post(cp_transport *t) {
    nccl_impl *n = (nccl_impl *)t->impl;
    if (!n->pending)
        return CP_OK;
    int ok = nccl_ok(ncclGroupStart(), "ncclGroupStart", t->rank);
    for (int i = 0; ok && i < n->pending; ++i)
        ok = n->queue[i].recv ? nccl_ok(ncclRecv(n->queue[i].dev, n->queue[i].bytes, ncclChar,
                                                 n->queue[i].peer, n->comm, n->stream),
                                        "ncclRecv", t->rank)
                              : nccl_ok(ncclSend(n->queue[i].dev, n->queue[i].bytes, ncclChar,
                                                 n->queue[i].peer, n->comm, n->stream),
                                        "ncclSend", t->rank);
    ok = nccl_ok(ncclGroupEnd(), "ncclGroupEnd", t->rank) && ok;
    for (int i = 0; ok && i < n->pending; ++i)
        ok = cudaEventRecord(*n->queue[i].done, n->stream) == cudaSuccess;
    n->pending = 0;
    return ok ? CP_OK : CP_FAILED;
}

static int nccl_wait(cp_transport *t, cp_request *r) {
    if (!r->active)
        return CP_OK;
    cudaEvent_t *ev = (cudaEvent_t *)r->handle;
    const int rc = nccl_poll(t, *ev);
    if (rc != CP_OK)
        return rc;
    cudaEventDestroy(*ev);
    free(ev);
    r->active = false;
    return CP_OK;
}

static int nccl_run(cp_transport *t, int ok) {
    nccl_impl *n = (nccl_impl *)t->impl;
    cudaEvent_t ev;
    if (!ok || cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
        return CP_FAILED;
    int rc = cudaEventRecord(ev, n->stream) == cudaSuccess ? nccl_poll(t, ev) : CP_FAILED;
    cudaEventDestroy(ev);
    return rc;
}

static int nccl_alltoall(cp_transport *t, const void *send, const size_t *send_bytes,
                         const size_t *send_off, void *recv, const size_t *recv_bytes,
                         const size_t *recv_off) {
    nccl_impl *n = (nccl_impl *)t->impl;
    int ok = nccl_ok(ncclGroupStart(), "ncclGroupStart", t->rank);
    for (int p = 0; ok && p < t->size; ++p) {
        if (send_bytes[p])
            ok = nccl_ok(ncclSend((const char *)send + send_off[p], send_bytes[p], ncclChar, p,
                                  n->comm, n->stream),
                         "ncclSend", t->rank);
        if (ok && recv_bytes[p])
            ok = nccl_ok(ncclRecv((char *)recv + recv_off[p], recv_bytes[p], ncclChar, p, n->comm,
                                  n->stream),
                         "ncclRecv", t->rank);
    }
    ok = nccl_ok(ncclGroupEnd(), "ncclGroupEnd", t->rank) && ok;
    return nccl_run(t, ok);
}

static int nccl_barrier(cp_transport *t) {
    nccl_impl *n = (nccl_impl *)t->impl;
    float *one = attn_device_alloc(sizeof(float));
    if (!one)
        return CP_FAILED;
    const int rc =
        nccl_run(t, nccl_ok(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, n->comm, n->stream),
                            "ncclAllReduce", t->rank));
    if (rc != CP_TIMEOUT)
        attn_device_free(one);
    return rc;
}

static void nccl_close(cp_transport *t) {
    nccl_impl *n = (nccl_impl *)t->impl;
    ncclCommAbort(n->comm); /* also ends transfers a dead peer left unfinished */
    cudaStreamDestroy(n->stream);
    free(n);
    free(t);
}

cp_transport *cp_transport_open_nccl(double timeout_s, char *why, size_t why_len, int *exit_code) {
    int rank, size, gpus = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    *exit_code = ATTN_EXIT_NO_GPU;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess)
        gpus = 0;
    if (gpus < size) {
        snprintf(why, why_len,
                 "NCCL needs one GPU per rank: %d ranks, %d GPU(s) here (--backend mpi runs any "
                 "number of ranks on one GPU)",
                 size, gpus);
        return NULL;
    }
    *exit_code = 1;
    cudaSetDevice(rank % gpus);
    ncclUniqueId id;
    if (rank == 0 && !nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId", rank)) {
        snprintf(why, why_len, "ncclGetUniqueId failed");
        return NULL;
    }
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    static const cp_transport ops = CP_TRANSPORT_OPS(nccl, "nccl");
    cp_transport *t = cp_transport_new(&ops, timeout_s);
    nccl_impl *n = calloc(1, sizeof *n);
    if (!t || !n || cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking) != cudaSuccess ||
        !nccl_ok(ncclCommInitRank(&n->comm, size, id, rank), "ncclCommInitRank", rank)) {
        snprintf(why, why_len, "NCCL did not start (the line above says why)");
        free(t), free(n);
        return NULL;
    }
    t->impl = n;
    return t;
}

#endif /* CP_HAVE_NCCL */
