/* grader_runner.c — the submission's program: answers the checker's requests (grader_runner.h,
 * grader_rpc.h). Nothing here compares or scores. */
#define _DEFAULT_SOURCE /* sigaction flags, mprotect, sysconf */
#include "grader_runner.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "attn/bench.h"
#include "attn/device.h"
#include "grader_rpc.h"

#ifdef ATTN_BACKEND_SIM
static const bool guard_pages = true; /* device memory is host memory: it can be protected */
#else
static const bool guard_pages = false;
#endif

#define MAX_REQUEST ((size_t)1 << 30)
#define MAX_KEEP_SIDE 8192

/* One device buffer: `lead` bytes of NaN, the data, then `trail` bytes of NaN and, for an input
 * on the simulator, an inaccessible page right after them (the data is rounded up to 16 bytes,
 * so at most 12 bytes of NaN separate its end from that page). */
typedef struct rbuf {
    unsigned char *base, *data, *page;
    size_t bytes, lead, trail;
} rbuf;

/* The guard pages the fault handler knows: Q, K, V and the extra inputs. */
#define GUARDS (3 + GRADER_RPC_MAX_EXTRA)
static struct {
    const unsigned char *page, *end; /* the page; the end of the data */
    const char *name;
} guards[GUARDS];
static struct sigaction previous_segv;

static void on_segv(int sig, siginfo_t *info, void *uctx) {
    const unsigned char *a = info->si_addr;
    long page = sysconf(_SC_PAGESIZE);
    for (int t = 0; t < GUARDS; ++t) {
        if (guards[t].page != NULL && a >= guards[t].page && a < guards[t].page + page) {
            char where[96], line[400];
            grader_runner_where(where, sizeof where);
            int n =
                snprintf(line, sizeof line,
                         "grader: out-of-bounds read: %s%sread past the end of input %s (byte +%ld "
                         "after it; a row past Lq or Lk? check the tail tile's bounds)\n",
                         where, where[0] ? " " : "", guards[t].name, (long)(a - guards[t].end));
            ssize_t ignored = write(STDERR_FILENO, line, n > 0 ? (size_t)n : 0);
            (void)ignored;
            _exit(3);
        }
    }
    if (previous_segv.sa_flags & SA_SIGINFO) {
        previous_segv.sa_sigaction(sig, info, uctx);
        return;
    }
    sigaction(SIGSEGV, &previous_segv, NULL); /* the default: the access faults again */
}

/* Kernel id 1 of the registry (not attn_example_find: its object file brings the example driver,
 * and with it the reference, into this program). */
static const attn_kernel *kernel_1(const attn_example *ex) {
    for (int k = 0; ex != NULL && k < ex->num_kernels; ++k)
        if (ex->kernels[k].id == 1)
            return &ex->kernels[k];
    return NULL;
}

static void rbuf_free(rbuf *b) {
    if (b->page != NULL)
        mprotect(b->page, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE);
    attn_device_free(b->base);
    memset(b, 0, sizeof *b);
}

/* input: ends at a guard page on the simulator. 0, or -1. */
static int rbuf_alloc(rbuf *b, size_t bytes, size_t guard, bool input) {
    memset(b, 0, sizeof *b);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), rounded = (bytes + 15) & ~(size_t)15;
    bool protect = input && guard_pages;
    size_t total = protect ? guard + rounded + 2 * page : guard + bytes + guard;
    b->base = attn_device_alloc(total);
    if (b->base == NULL || attn_device_fill_nan(b->base, total))
        return -1;
    b->bytes = bytes;
    b->lead = guard;
    if (protect) {
        uintptr_t end =
            ((uintptr_t)(b->base + guard + rounded) + page - 1) & ~(uintptr_t)(page - 1);
        b->page = (unsigned char *)end;
        b->data = b->page - rounded;
        b->trail = rounded - bytes;
        if (mprotect(b->page, page, PROT_NONE) != 0)
            return -1;
    } else {
        b->data = b->base + guard;
        b->trail = guard;
    }
    return 0;
}

/* Lead, data and trail as they are now, downloaded into the answer. */
static int rbuf_put(grader_rpc_buf *out, const rbuf *b) {
    uint64_t n[3] = {b->lead, b->bytes, b->trail};
    grader_rpc_put(out, n, sizeof n);
    size_t all = b->lead + b->bytes + b->trail;
    unsigned char *host = malloc(all ? all : 1);
    if (host == NULL || attn_to_host(host, b->data - b->lead, all)) {
        free(host);
        return -1;
    }
    grader_rpc_put(out, host, all);
    free(host);
    return 0;
}

typedef struct runner {
    const grader_runner_hooks *hooks;
    rbuf in[3], o, lse;
    rbuf extra[GRADER_RPC_MAX_EXTRA]; /* the extra buffers of the launch (grader_rpc.h) */
    char extra_name[GRADER_RPC_MAX_EXTRA][17];
    void *extra_ptr[GRADER_RPC_MAX_EXTRA]; /* their device addresses: attn_buffers.args */
    int n_extra;
    attn_problem p;
    attn_block_mask host_mask, dev_mask;
    attn_sparse_inputs sparse;
    attn_buffers buf;
    bool launched;
} runner;

static void release(runner *r) {
    for (int t = 0; t < GUARDS; ++t)
        guards[t].page = NULL;
    for (int t = 0; t < 3; ++t)
        rbuf_free(&r->in[t]);
    for (int x = 0; x < GRADER_RPC_MAX_EXTRA; ++x)
        rbuf_free(&r->extra[x]);
    r->n_extra = 0;
    rbuf_free(&r->o);
    rbuf_free(&r->lse);
    attn_block_mask_free(&r->host_mask);
    attn_block_mask_free_device(&r->dev_mask);
    r->launched = false;
}

static void put_error(grader_rpc_buf *out, int32_t code, const char *name, const char *text) {
    char n[64] = {0}, t[192] = {0};
    snprintf(n, sizeof n, "%s", name);
    snprintf(t, sizeof t, "%s", text);
    grader_rpc_put(out, &code, sizeof code);
    grader_rpc_put(out, n, sizeof n);
    grader_rpc_put(out, t, sizeof t);
}

static void serve_launch(runner *r, grader_rpc_buf *in, grader_rpc_buf *out) {
    static const char *names[3] = {"Q", "K", "V"};
    release(r);
    const int32_t *has_mask;
    const uint64_t *sizes; /* guard, O bytes, LSE bytes, Q, K, V bytes */
    if (grader_rpc_get_problem(in, &r->p) || (has_mask = grader_rpc_get(in, 4)) == NULL ||
        (*has_mask && grader_rpc_get_mask(in, &r->host_mask)) ||
        (sizes = grader_rpc_get(in, 6 * sizeof(uint64_t))) == NULL) {
        put_error(out, -1, "bad request", "");
        return;
    }
    const attn_kernel *k = kernel_1(r->hooks->example);
    attn_device_info info;
    char why[256];
    if (k == NULL || attn_device_init(&info, why, sizeof why) != 0) {
        put_error(out, -1, "no kernel 1 or no device", "");
        return;
    }
    for (int t = 0; t < 3; ++t) {
        const void *src = grader_rpc_get(in, sizes[3 + t]);
        if (src == NULL || rbuf_alloc(&r->in[t], sizes[3 + t], sizes[0], true) ||
            attn_to_device(r->in[t].data, src, sizes[3 + t])) {
            put_error(out, -1, "out of memory", "");
            return;
        }
        guards[t].page = r->in[t].page;
        guards[t].end = r->in[t].data + sizes[3 + t];
        guards[t].name = names[t];
    }
    const uint32_t *count = grader_rpc_get(in, sizeof(uint32_t));
    if (count == NULL || *count > GRADER_RPC_MAX_EXTRA) {
        put_error(out, -1, "bad request", "");
        return;
    }
    r->n_extra = (int)*count;
    for (int x = 0; x < r->n_extra; ++x) {
        const char *name = grader_rpc_get(in, 16);
        const uint32_t *input = grader_rpc_get(in, sizeof(uint32_t));
        const uint64_t *bytes = grader_rpc_get(in, sizeof(uint64_t));
        const void *src =
            input != NULL && *input && bytes != NULL ? grader_rpc_get(in, *bytes) : NULL;
        if (name == NULL || input == NULL || bytes == NULL || (*input && src == NULL)) {
            put_error(out, -1, "bad request", "");
            return;
        }
        memcpy(r->extra_name[x], name, 16);
        r->extra_name[x][16] = '\0';
        if (rbuf_alloc(&r->extra[x], *bytes, sizes[0], *input != 0) ||
            (*input && attn_to_device(r->extra[x].data, src, *bytes))) {
            put_error(out, -1, "out of memory", "");
            return;
        }
        if (*input) {
            guards[3 + x].page = r->extra[x].page;
            guards[3 + x].end = r->extra[x].data + *bytes;
            guards[3 + x].name = r->extra_name[x];
        }
        r->extra_ptr[x] = r->extra[x].data;
    }
    if (rbuf_alloc(&r->o, sizes[1], sizes[0], false) ||
        rbuf_alloc(&r->lse, sizes[2], sizes[0], false) ||
        (*has_mask && attn_block_mask_to_device(&r->host_mask, &r->dev_mask))) {
        put_error(out, -1, "out of memory", "");
        return;
    }
    memset(&r->buf, 0, sizeof r->buf);
    r->buf.q = r->in[0].data;
    r->buf.k = r->in[1].data;
    r->buf.v = r->in[2].data;
    r->buf.o = r->o.data;
    r->buf.lse = (float *)r->lse.data;
    if (r->n_extra > 0)
        r->buf.args = r->extra_ptr;
    if (*has_mask) {
        memset(&r->sparse, 0, sizeof r->sparse);
        r->sparse.block_mask = &r->dev_mask;
        r->buf.sparse = &r->sparse;
    }
    cudaGetLastError(); /* clear an earlier error */
    k->launch(&r->p, &r->buf, 0);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    put_error(out, (int32_t)err, cudaGetErrorName(err), cudaGetErrorString(err));
    if (err != cudaSuccess)
        return;
    r->launched = true;
    const rbuf *all[5] = {&r->in[0], &r->in[1], &r->in[2], &r->o, &r->lse};
    for (int t = 0; t < 5; ++t)
        if (rbuf_put(out, all[t]))
            out->bad = true;
    for (int x = 0; x < r->n_extra; ++x)
        if (rbuf_put(out, &r->extra[x]))
            out->bad = true;
}

static void serve_time(runner *r, grader_rpc_buf *out) {
    int32_t ok = 0;
    double ms = 0.0;
    const attn_kernel *k = kernel_1(r->hooks->example);
    attn_timing_opts opts = {.warmup = 5, .reps = 20, .flush_l2 = 1};
    attn_stats st;
    if (r->launched && k != NULL && attn_time_kernel(k, &r->p, &r->buf, &opts, &st) == 0) {
        ok = 1;
        ms = st.median_ms;
    }
    grader_rpc_put(out, &ok, sizeof ok);
    grader_rpc_put(out, &ms, sizeof ms);
}

static void serve_keep(runner *r, grader_rpc_buf *in, grader_rpc_buf *out) {
    const int32_t *s = grader_rpc_get(in, 2 * sizeof(int32_t));
    if (s == NULL || r->hooks->keep == NULL || s[0] < 1 || s[1] < 1 || s[0] > MAX_KEEP_SIDE ||
        s[1] > MAX_KEEP_SIDE)
        return; /* an empty answer: the checker reports it */
    int Lq = s[0], Lk = s[1];
    int8_t *row = malloc((size_t)Lk);
    if (row == NULL)
        return;
    for (int i = 0; i < Lq; ++i) {
        for (int j = 0; j < Lk; ++j) {
            int v = r->hooks->keep(Lq, Lk, i, j);
            row[j] = (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
        }
        grader_rpc_put(out, row, (size_t)Lk);
    }
    free(row);
}

static void serve_build(runner *r, grader_rpc_buf *in, grader_rpc_buf *out) {
    attn_problem p;
    const int32_t *t;
    int32_t rc = -1;
    if (r->hooks->build == NULL || grader_rpc_get_problem(in, &p) ||
        (t = grader_rpc_get(in, 2 * sizeof(int32_t))) == NULL) {
        grader_rpc_put(out, &rc, sizeof rc);
        return;
    }
    attn_block_mask m;
    memset(&m, 0, sizeof m);
    rc = r->hooks->build(&m, &p, t[0], t[1]);
    if (rc == 0 && (m.kv_num_blocks == NULL || m.kv_indices == NULL ||
                    m.full_kv_num_blocks == NULL || m.full_kv_indices == NULL))
        rc = -1000; /* "success" with no arrays */
    grader_rpc_put(out, &rc, sizeof rc);
    if (rc == 0)
        grader_rpc_put_mask(out, &m);
    attn_block_mask_free(&m);
}

int grader_runner_main(int argc, char **argv, const grader_runner_hooks *hooks) {
    int fd_in = -1, fd_out = -1;
    for (int a = 1; a + 1 < argc; ++a)
        if (strcmp(argv[a], "--rpc") == 0 && sscanf(argv[a + 1], "%d,%d", &fd_in, &fd_out) != 2)
            fd_in = -1;
    if (fd_in < 0 || fd_out < 0) {
        fprintf(stderr, "error: usage: %s --rpc IN_FD,OUT_FD (started by grader/grade.py)\n",
                argv[0]);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);

    runner r;
    memset(&r, 0, sizeof r);
    r.hooks = hooks;
    grader_rpc_buf in = {0}, out = {0};
    uint32_t type;
    while (grader_rpc_recv(fd_in, &type, &in, MAX_REQUEST) == 0) {
        if (type == GRADER_RPC_HELLO) {
            const attn_kernel *k = kernel_1(hooks->example);
            int32_t has = k != NULL;
            attn_requirements req;
            memset(&req, 0, sizeof req);
            uint32_t serves = 0;
            if (k != NULL) {
                req = k->req;
                serves = k->serves;
            }
            grader_rpc_put(&out, &has, sizeof has);
            grader_rpc_put(&out, &req, sizeof req);
            grader_rpc_put(&out, &serves, sizeof serves);
        } else if (type == GRADER_RPC_LAUNCH) {
            serve_launch(&r, &in, &out);
        } else if (type == GRADER_RPC_TIME) {
            serve_time(&r, &out);
        } else if (type == GRADER_RPC_KEEP) {
            serve_keep(&r, &in, &out);
        } else if (type == GRADER_RPC_BUILD) {
            serve_build(&r, &in, &out);
        }
        if (grader_rpc_send(fd_out, type, &out) != 0)
            break;
    }
    release(&r);
    grader_rpc_free(&in);
    grader_rpc_free(&out);
    return 0;
}
