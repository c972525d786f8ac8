/* grader/cases/grader_rpc.h — the channel between the trusted checker (the case program, which
 * holds the reference and the solution) and the submission's program (grader_runner.c, which
 * holds the learner's code and nothing that judges it). grader/README.md, "Case programs".
 *
 * The grader makes two pipes per case and hands one end of each to both programs (inherited file
 * descriptors, --rpc IN,OUT). The checker asks, the runner answers; every message is
 *
 *   grader_rpc_header {magic, type, bytes}  then `bytes` bytes of payload
 *
 * Requests (checker -> runner) and their answers (runner -> checker):
 *   CONFIG  the simulator's settings the case   uint32 what the runner has set up (GRADER_SETUP_*)
 *           runs with (grader_rpc_config)       the first request; the runner applies them, fixes
 *                                              them, and installs its seccomp filter before it
 *                                              answers (grader_runner.c)
 *   HELLO   -                                  int32 has_kernel_1, attn_requirements, uint32 serves
 *   LAUNCH  problem, block mask?, Q, K, V,     int32 CUDA error, char[64] name, char[192] text,
 *           O and LSE sizes, guard bytes,      then per buffer Q, K, V, O, LSE and each extra one:
 *           uint32 count of extra buffers,     uint64 lead, data, trail lengths and the bytes
 *           each: char[16] name, uint32 input, (post-launch contents)
 *           uint64 bytes, the data if input
 *           Extra buffers (at most GRADER_RPC_MAX_EXTRA) are what a kernel reads or writes beyond
 *           Q, K, V, O and LSE (exercise 03's backward: O, dO, LSE in, dQ, dK, dV, D out):
 *           the runner places them like Q, K, V (inputs) or like O (outputs: NaN-filled), each
 *           with its guard zones and, on the simulator, its own inaccessible page and guard
 *           region (grader_runner.c), and hands the kernel their device addresses, in order, as
 *           attn_buffers.args (a void *const array). The answer's size is bounded by the
 *           request's buffers, the extra ones included (grader_remote.c).
 *   TIME    -                                  int32 ok, double median ms (GPU performance case)
 *   KEEP    int32 Lq, Lk                       Lq * Lk int8: keep(Lq, Lk, i, j), row-major
 *   BUILD   problem, int32 block_q, block_k    int32 rc, then (rc == 0) a block mask
 * An answer is data, never a verdict: the checker compares it with its own oracles. */
#ifndef GRADER_RPC_H
#define GRADER_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/problem.h"
#include "attn/sparse/block_mask.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GRADER_RPC_MAGIC 0x47525043u /* "GRPC" */
#define GRADER_RPC_MAX_EXTRA 8       /* extra buffers of one LAUNCH */
enum {
    GRADER_RPC_HELLO = 1,
    GRADER_RPC_LAUNCH,
    GRADER_RPC_TIME,
    GRADER_RPC_KEEP,
    GRADER_RPC_BUILD,
    GRADER_RPC_CONFIG
};

/* CONFIG's payload: the thread order and its seed, the checked build's checkers (1 on), the OS
 * threads that run blocks, the watchdog's seconds. Ignored by a GPU build. */
typedef struct grader_rpc_config {
    int32_t order, checks, threads, pad;
    uint64_t seed;
    double watchdog_s;
} grader_rpc_config;

/* CONFIG's answer: what the runner has in place. */
enum {
    GRADER_SETUP_LOCKED = 1,  /* the simulator's settings are fixed (cudasim_lock_settings) */
    GRADER_SETUP_FILTER = 2,  /* the run seccomp filter is installed (grader_seccomp.h) */
    GRADER_SETUP_GUARDS = 4,  /* every buffer ends at an inaccessible page */
    GRADER_SETUP_SYMBOLS = 8, /* reports name source lines (a symbolizer runs) */
};

typedef struct grader_rpc_header {
    uint32_t magic, type;
    uint64_t bytes;
} grader_rpc_header;

/* A message being built (put) or read (get). get past the end sets bad and returns NULL. */
typedef struct grader_rpc_buf {
    unsigned char *data;
    size_t len, cap, pos;
    bool bad;
} grader_rpc_buf;

void grader_rpc_put(grader_rpc_buf *b, const void *x, size_t n);
const void *grader_rpc_get(grader_rpc_buf *b, size_t n);
/* grader_rpc_get copied into x (a message holds its fields unaligned): 0, or -1. */
int grader_rpc_read(grader_rpc_buf *b, void *x, size_t n);
void grader_rpc_free(grader_rpc_buf *b);
/* Sends b as one message of `type` and empties it: 0, or -1 (the other side is gone). */
int grader_rpc_send(int fd, uint32_t type, grader_rpc_buf *b);
/* Receives one message of at most max_bytes into b (replacing its contents): 0; -1 at the end
 * of the channel, or with b->bad set for a message larger than max_bytes (nothing of it is read
 * or allocated); -2 for a header that is not the channel's. */
int grader_rpc_recv(int fd, uint32_t *type, grader_rpc_buf *b, size_t max_bytes);

/* The problem as sent: the dense fields (no varlen pointers). */
void grader_rpc_put_problem(grader_rpc_buf *b, const attn_problem *p);
int grader_rpc_get_problem(grader_rpc_buf *b, attn_problem *p);
/* A host block mask: its shape, then the four arrays. get allocates (attn_block_mask_alloc) and
 * returns -1 when the shape is not one that attn_block_mask_alloc makes. */
void grader_rpc_put_mask(grader_rpc_buf *b, const attn_block_mask *m);
int grader_rpc_get_mask(grader_rpc_buf *b, attn_block_mask *m);

#ifdef __cplusplus
}
#endif
#endif /* GRADER_RPC_H */
