/* transport.h — what the ring and the all-to-all need from a communication library, and nothing
 * more: non-blocking send and receive of device buffers, a wait that gives up after a timeout,
 * an all-to-all with per-peer sizes, and a barrier. Two backends implement it, picked at run time
 * (--backend): Open MPI (transport_mpi.c; device memory staged through host buffers, so any MPI
 * and any number of processes per GPU work) and NCCL (transport_nccl.c; device to device, one GPU
 * per rank, built only where the CUDA toolkit ships NCCL). MPI starts the processes and gives
 * each its rank in both cases (NCCL's unique id travels by MPI_Bcast).
 *
 * Every call returns CP_OK, or CP_TIMEOUT (cp_wait: the peer sent nothing within the timeout: it
 * died or hangs), or CP_FAILED (the library reported an error, printed on stderr). */
#ifndef CP_TRANSPORT_H
#define CP_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CP_OK = 0, CP_TIMEOUT = 1, CP_FAILED = 2 };

typedef struct cp_transport cp_transport;

/* One transfer in flight. peer: the other rank; recv: a receive (its data reaches the device
 * buffer during cp_wait). The fields past these belong to the backend. */
typedef struct cp_request {
    int peer;
    bool recv, active;
    void *dev;  /* the device buffer */
    void *host; /* MPI: the host staging buffer */
    size_t bytes;
    void *handle; /* the backend's request (MPI_Request *, cudaEvent_t) */
} cp_request;

struct cp_transport {
    const char *name; /* "mpi" or "nccl" */
    int rank, size;
    double timeout_s; /* how long cp_wait waits before giving up */
    int (*isend)(cp_transport *t, const void *dev, size_t bytes, int peer, cp_request *r);
    int (*irecv)(cp_transport *t, void *dev, size_t bytes, int peer, cp_request *r);
    /* The isend/irecv calls since the last post begin. MPI begins each at once (a no-op here);
     * NCCL launches them as one group, as it must: a ring's sends and receives issued one by one
     * would wait on each other. Call it after posting a step's transfers, before the compute
     * they overlap. */
    int (*post)(cp_transport *t);
    int (*wait)(cp_transport *t, cp_request *r);
    /* send_bytes[p] bytes from send + send_off[p] to rank p, recv_bytes[p] bytes from rank p to
     * recv + recv_off[p] (device buffers), within the timeout. */
    int (*alltoall)(cp_transport *t, const void *send, const size_t *send_bytes,
                    const size_t *send_off, void *recv, const size_t *recv_bytes,
                    const size_t *recv_off);
    int (*barrier)(cp_transport *t);
    void (*close)(cp_transport *t);
    void *impl;
};

/* The backend named name ("mpi", "nccl"), after MPI_Init. NULL with a one-line reason in why
 * when it cannot start (NCCL not built in, fewer GPUs than ranks); exit_code then says how the
 * program should end (2: usage, 77: no GPU for it). */
cp_transport *cp_transport_open(const char *name, double timeout_s, char *why, size_t why_len,
                                int *exit_code);
cp_transport *cp_transport_open_mpi(double timeout_s, char *why, size_t why_len);
cp_transport *cp_transport_open_nccl(double timeout_s, char *why, size_t why_len, int *exit_code);

/* The ops of a backend whose calls are named <prefix>_isend, <prefix>_irecv, ..., <prefix>_close
 * (a designated initialiser of cp_transport), named label. */
#define CP_TRANSPORT_OPS(prefix, label)                                                            \
    {                                                                                              \
        .name = label, .isend = prefix##_isend, .irecv = prefix##_irecv, .post = prefix##_post,    \
        .wait = prefix##_wait, .alltoall = prefix##_alltoall, .barrier = prefix##_barrier,         \
        .close = prefix##_close                                                                    \
    }

/* A backend's transport: ops' name and calls (impl NULL), this process's rank and size in
 * MPI_COMM_WORLD, the timeout. NULL when out of memory. transport_mpi.c. */
cp_transport *cp_transport_new(const cp_transport *ops, double timeout_s);

/* Seconds on a monotonic clock (the waits' deadlines). */
double cp_now(void);

#ifdef __cplusplus
}
#endif
#endif /* CP_TRANSPORT_H */
