/* grader_remote.c — the checker's side of the channel (grader_rpc.h): the submission as the case
 * program sees it. Its kernel 1 has no launcher here (a launch is a request to the submission's
 * program); its pattern and builder are proxies. Whatever comes back is only data that
 * grader_case.c and the case programs judge. If the submission's program is gone (it crashed, or
 * exited in a constructor), the case fails with "runner_gone" and grade.py reports how it ended. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "grader_case.h"
#include "grader_rpc.h"
#ifdef ATTN_BACKEND_SIM
#include <cudasim.h>
#endif

/* Every answer is read against the most it can be for its request (a runner that claims more,
 * e.g. a 2^62-byte header, is "a malformed message", never an allocation). */
#define SMALL_ANSWER 4096

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
    bool configured;
    int checks;     /* the checked build's checkers for the runner: as this program started */
    uint32_t setup; /* the runner's answer to CONFIG (GRADER_SETUP_*) */
} rm = {.in = -1, .out = -1};

void grader_remote_connect(int to_runner, int from_runner, const char *case_name) {
    /* A runner that is gone when a request is written to it: the write fails (EPIPE) and the
     * case says so, rather than this program ending by SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    rm.in = to_runner;
    rm.out = from_runner;
    rm.case_name = case_name;
#ifdef ATTN_BACKEND_SIM
    /* The checked build's checkers watch the submission, in its own program (CONFIG sends them
     * as this program started); here they would watch the solution and the reference (trusted,
     * checked by their own tests), which then run several times slower for nothing. */
    rm.checks = cudasim_get_checks();
    cudasim_set_checks(0);
#endif
}

/* The runner is gone or answered nonsense: the case fails; grade.py says how the runner ended. */
static _Noreturn void lost(const char *what) {
    printf("{\"case\": \"%s\", \"passed\": false, \"fraction\": 0, \"message\": \"the submission's "
           "program %s\", \"runner_gone\": true, \"max_err\": null, \"time_ms\": null}\n",
           rm.case_name ? rm.case_name : "", what);
    fflush(stdout);
    exit(1);
}

static void ask_raw(uint32_t type, size_t max_answer) {
    uint32_t got;
    if (rm.in < 0 || grader_rpc_send(rm.in, type, &rm.req) != 0)
        lost("stopped before it answered");
    int rc = grader_rpc_recv(rm.out, &got, &rm.ans, max_answer);
    if (rc == -2)
        lost("answered a malformed message");
    if (rc != 0)
        lost(rm.ans.bad ? "answered a malformed message (larger than its request allows)"
                        : "stopped before it answered");
    if (got != type)
        lost("answered out of turn");
}

/* The first request: how the case runs (this program's own simulator settings, which grade.py
 * set from the case's environment); the runner applies and fixes them, then installs its filter
 * (grader_runner.c). */
static void configure(void) {
    grader_rpc_config c;
    memset(&c, 0, sizeof c);
    c.watchdog_s = -1.0;
#ifdef ATTN_BACKEND_SIM
    c.order = (int32_t)cudasim_get_order();
    c.seed = cudasim_get_seed();
    c.checks = rm.checks;
    c.threads = cudasim_get_threads();
    c.watchdog_s = cudasim_set_watchdog(-1.0);
#endif
    rm.configured = true;
    grader_rpc_put(&rm.req, &c, sizeof c);
    ask_raw(GRADER_RPC_CONFIG, sizeof(uint32_t));
    if (grader_rpc_read(&rm.ans, &rm.setup, sizeof rm.setup))
        lost("answered a malformed message");
}

/* Sends rm.req as `type`, receives the answer (at most max_answer bytes) into rm.ans. */
static void ask(uint32_t type, size_t max_answer) {
    if (!rm.configured) {
        grader_rpc_buf pending = rm.req; /* CONFIG goes first */
        memset(&rm.req, 0, sizeof rm.req);
        configure();
        grader_rpc_free(&rm.req);
        rm.req = pending;
    }
    ask_raw(type, max_answer);
}

unsigned grader_remote_setup(void) { return rm.setup; }

const attn_example *grader_remote_example(void) {
    if (!rm.hello) {
        ask(GRADER_RPC_HELLO, SMALL_ANSWER);
        int32_t has;
        attn_requirements req;
        uint32_t serves;
        if (grader_rpc_read(&rm.ans, &has, sizeof has) ||
            grader_rpc_read(&rm.ans, &req, sizeof req) ||
            grader_rpc_read(&rm.ans, &serves, sizeof serves))
            lost("answered a malformed message");
        memset(&rm.kernel, 0, sizeof rm.kernel);
        rm.kernel.id = 1;
        rm.kernel.name = "submission";
        rm.kernel.description = "the submission's kernel 1 (in its own process)";
        rm.kernel.req = req;
        rm.kernel.serves = serves;
        rm.example.name = "submission";
        rm.example.kernels = &rm.kernel;
        rm.example.num_kernels = has ? 1 : 0;
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
    size_t extra_bytes = 0;
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
        extra_bytes += extra[x].bytes;
    }
    /* the error, then each buffer (Q, K, V, O, LSE, the extra ones): its three lengths, the lead
     * guard, the data, at most a guard */
    size_t most = SMALL_ANSWER + (size_t)(5 + n_extra) * (3 * sizeof(uint64_t) + 2 * guard) +
                  in_bytes[0] + in_bytes[1] + in_bytes[2] + o_bytes + lse_bytes + extra_bytes;
    ask(GRADER_RPC_LAUNCH, most);
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
        uint64_t n[3];
        if (grader_rpc_read(&rm.ans, n, sizeof n) || n[0] != guard || n[1] != want[t] ||
            n[2] > guard)
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
    ask(GRADER_RPC_TIME, SMALL_ANSWER);
    int32_t ok;
    if (grader_rpc_read(&rm.ans, &ok, sizeof ok) || grader_rpc_read(&rm.ans, ms, sizeof *ms))
        lost("answered a malformed message");
    return ok ? 0 : 1;
}

int grader_remote_keep(int Lq, int Lk, int i, int j) {
    if (i < 0 || j < 0 || i >= Lq || j >= Lk)
        return 0; /* outside the score matrix: never asked of a learner's predicate */
    for (int c = 0; c < 2; ++c)
        if (rm.keep[c].table != NULL && rm.keep[c].Lq == Lq && rm.keep[c].Lk == Lk)
            return rm.keep[c].table[(size_t)i * (size_t)Lk + (size_t)j];
    int32_t shape[2] = {Lq, Lk};
    grader_rpc_put(&rm.req, shape, sizeof shape);
    size_t n = (size_t)Lq * (size_t)Lk;
    ask(GRADER_RPC_KEEP, n);
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
    /* rc, the shape, then four arrays of B * nq (* nk) int32 */
    uint64_t nq = block_q > 0 ? ((uint64_t)p->Lq + (uint64_t)block_q - 1) / (uint64_t)block_q : 0;
    uint64_t nk = block_k > 0 ? ((uint64_t)p->Lk + (uint64_t)block_k - 1) / (uint64_t)block_k : 0;
    ask(GRADER_RPC_BUILD, SMALL_ANSWER + 2 * (uint64_t)p->B * nq * (1 + nk) * sizeof(int32_t));
    const int32_t *rc = grader_rpc_get(&rm.ans, sizeof(int32_t));
    if (rc == NULL)
        lost("answered a malformed message");
    if (*rc != 0)
        return *rc;
    if (grader_rpc_get_mask(&rm.ans, m) != 0)
        return -1001; /* a block mask whose shape fields attn_block_mask_alloc would not make */
    return 0;
}
