/* grader_remote.c — the checker's side of the channel (grader_rpc.h): the submission as the case
 * program sees it. Its kernel 1 has no launcher here (a launch is a request to the submission's
 * program); its pattern and builder are proxies. Whatever comes back is only data that
 * grader_case.c and the case programs judge. If the submission's program is gone (it crashed, or
 * exited in a constructor), the case fails with "runner_gone" and grade.py reports how it ended. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "grader_case.h"
#include "grader_rpc.h"

#define MAX_ANSWER ((size_t)1 << 30)

static struct {
    int in, out; /* to the runner, from the runner */
    const char *case_name;
    grader_rpc_buf req, ans;
    bool hello;
    attn_kernel kernel;
    attn_example example;
    struct {
        int Lq, Lk;
        int8_t *table;
    } keep[2]; /* the last two keep tables */
    int keep_next;
} rm = {.in = -1, .out = -1};

void grader_remote_connect(int to_runner, int from_runner, const char *case_name) {
    rm.in = to_runner;
    rm.out = from_runner;
    rm.case_name = case_name;
}

/* The runner is gone or answered nonsense: the case fails; grade.py says how the runner ended. */
static _Noreturn void lost(const char *what) {
    printf("{\"case\": \"%s\", \"passed\": false, \"fraction\": 0, \"message\": \"the submission's "
           "program %s\", \"runner_gone\": true, \"max_err\": null, \"time_ms\": null}\n",
           rm.case_name ? rm.case_name : "", what);
    fflush(stdout);
    exit(1);
}

/* Sends rm.req as `type`, receives the answer into rm.ans. */
static void ask(uint32_t type) {
    uint32_t got;
    if (rm.in < 0 || grader_rpc_send(rm.in, type, &rm.req) != 0 ||
        grader_rpc_recv(rm.out, &got, &rm.ans, MAX_ANSWER) != 0)
        lost("stopped before it answered");
    if (got != type)
        lost("answered out of turn");
}

const attn_example *grader_remote_example(void) {
    if (!rm.hello) {
        ask(GRADER_RPC_HELLO);
        const int32_t *has = grader_rpc_get(&rm.ans, sizeof(int32_t));
        const attn_requirements *req = grader_rpc_get(&rm.ans, sizeof(attn_requirements));
        const uint32_t *serves = grader_rpc_get(&rm.ans, sizeof(uint32_t));
        if (has == NULL || req == NULL || serves == NULL)
            lost("answered a malformed message");
        memset(&rm.kernel, 0, sizeof rm.kernel);
        rm.kernel.id = 1;
        rm.kernel.name = "submission";
        rm.kernel.description = "the submission's kernel 1 (in its own process)";
        rm.kernel.req = *req;
        rm.kernel.serves = *serves;
        rm.example.name = "submission";
        rm.example.kernels = &rm.kernel;
        rm.example.num_kernels = *has ? 1 : 0;
        rm.hello = true;
    }
    return &rm.example;
}

bool grader_remote_is(const attn_kernel *k) { return k == &rm.kernel; }

int grader_remote_launch_extra(const attn_problem *p, const attn_block_mask *host_mask,
                               void *const packed[3], const size_t in_bytes[3], size_t o_bytes,
                               size_t lse_bytes, size_t guard, const grader_remote_extra *extra,
                               int n_extra, grader_remote_answer *a) {
    memset(a, 0, sizeof *a);
    if (n_extra < 0 || n_extra > GRADER_RPC_MAX_EXTRA) {
        fprintf(stderr, "grader error: %d extra buffers (at most %d)\n", n_extra,
                GRADER_RPC_MAX_EXTRA);
        exit(ATTN_EXIT_USAGE);
    }
    grader_rpc_put_problem(&rm.req, p);
    int32_t has_mask = host_mask != NULL;
    grader_rpc_put(&rm.req, &has_mask, sizeof has_mask);
    if (host_mask != NULL)
        grader_rpc_put_mask(&rm.req, host_mask);
    uint64_t sizes[6] = {guard, o_bytes, lse_bytes, in_bytes[0], in_bytes[1], in_bytes[2]};
    grader_rpc_put(&rm.req, sizes, sizeof sizes);
    for (int t = 0; t < 3; ++t)
        grader_rpc_put(&rm.req, packed[t], in_bytes[t]);
    uint32_t count = (uint32_t)n_extra;
    grader_rpc_put(&rm.req, &count, sizeof count);
    for (int x = 0; x < n_extra; ++x) {
        char name[16] = {0};
        snprintf(name, sizeof name, "%s", extra[x].name ? extra[x].name : "");
        uint32_t input = extra[x].input;
        uint64_t bytes = extra[x].bytes;
        grader_rpc_put(&rm.req, name, sizeof name);
        grader_rpc_put(&rm.req, &input, sizeof input);
        grader_rpc_put(&rm.req, &bytes, sizeof bytes);
        if (input)
            grader_rpc_put(&rm.req, extra[x].data, extra[x].bytes);
    }
    ask(GRADER_RPC_LAUNCH);
    const int32_t *err = grader_rpc_get(&rm.ans, sizeof(int32_t));
    const char *name = grader_rpc_get(&rm.ans, 64), *text = grader_rpc_get(&rm.ans, 192);
    if (err == NULL || name == NULL || text == NULL)
        lost("answered a malformed message");
    a->error = *err;
    snprintf(a->error_name, sizeof a->error_name, "%.63s", name);
    snprintf(a->error_text, sizeof a->error_text, "%.191s", text);
    if (a->error != 0)
        return 0;
    size_t want[GRADER_REMOTE_BUFFERS] = {in_bytes[0], in_bytes[1], in_bytes[2], o_bytes,
                                          lse_bytes};
    for (int x = 0; x < n_extra; ++x)
        want[5 + x] = extra[x].bytes;
    for (int t = 0; t < 5 + n_extra; ++t) {
        const uint64_t *n = grader_rpc_get(&rm.ans, 3 * sizeof(uint64_t));
        if (n == NULL || n[0] != guard || n[1] != want[t] || n[2] > guard)
            lost("answered a malformed message");
        a->lead[t] = grader_rpc_get(&rm.ans, n[0]);
        a->data[t] = grader_rpc_get(&rm.ans, n[1]);
        a->trail[t] = grader_rpc_get(&rm.ans, n[2]);
        a->lead_bytes[t] = n[0];
        a->trail_bytes[t] = n[2];
        if (rm.ans.bad)
            lost("answered a malformed message");
    }
    return 0;
}

int grader_remote_launch(const attn_problem *p, const attn_block_mask *host_mask,
                         void *const packed[3], const size_t in_bytes[3], size_t o_bytes,
                         size_t lse_bytes, size_t guard, grader_remote_answer *a) {
    return grader_remote_launch_extra(p, host_mask, packed, in_bytes, o_bytes, lse_bytes, guard,
                                      NULL, 0, a);
}

int grader_remote_time(double *ms) {
    ask(GRADER_RPC_TIME);
    const int32_t *ok = grader_rpc_get(&rm.ans, sizeof(int32_t));
    const double *t = grader_rpc_get(&rm.ans, sizeof(double));
    if (ok == NULL || t == NULL)
        lost("answered a malformed message");
    *ms = *t;
    return *ok ? 0 : 1;
}

int grader_remote_keep(int Lq, int Lk, int i, int j) {
    if (i < 0 || j < 0 || i >= Lq || j >= Lk)
        return 0; /* outside the score matrix: never asked of a learner's predicate */
    for (int c = 0; c < 2; ++c)
        if (rm.keep[c].table != NULL && rm.keep[c].Lq == Lq && rm.keep[c].Lk == Lk)
            return rm.keep[c].table[(size_t)i * (size_t)Lk + (size_t)j];
    int32_t shape[2] = {Lq, Lk};
    grader_rpc_put(&rm.req, shape, sizeof shape);
    ask(GRADER_RPC_KEEP);
    size_t n = (size_t)Lq * (size_t)Lk;
    const void *table = grader_rpc_get(&rm.ans, n);
    if (table == NULL)
        lost("answered a malformed message (the pattern's table)");
    int c = rm.keep_next;
    rm.keep_next = 1 - c;
    free(rm.keep[c].table);
    rm.keep[c].table = malloc(n);
    if (rm.keep[c].table == NULL) {
        fprintf(stderr, "grader error: out of memory\n");
        exit(ATTN_EXIT_USAGE);
    }
    memcpy(rm.keep[c].table, table, n);
    rm.keep[c].Lq = Lq;
    rm.keep[c].Lk = Lk;
    return rm.keep[c].table[(size_t)i * (size_t)Lk + (size_t)j];
}

int grader_remote_build(attn_block_mask *m, const attn_problem *p, int block_q, int block_k) {
    memset(m, 0, sizeof *m);
    grader_rpc_put_problem(&rm.req, p);
    int32_t tiles[2] = {block_q, block_k};
    grader_rpc_put(&rm.req, tiles, sizeof tiles);
    ask(GRADER_RPC_BUILD);
    const int32_t *rc = grader_rpc_get(&rm.ans, sizeof(int32_t));
    if (rc == NULL)
        lost("answered a malformed message");
    if (*rc != 0)
        return *rc;
    if (grader_rpc_get_mask(&rm.ans, m) != 0)
        return -1001; /* a block mask whose shape fields attn_block_mask_alloc would not make */
    return 0;
}
