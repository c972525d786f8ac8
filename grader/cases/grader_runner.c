/* grader_runner.c — the submission's program: answers the checker's requests (grader_runner.h,
 * grader_rpc.h). Nothing here compares or scores.
 *
 * Its order of events, which the sandbox relies on (grader/README.md, "The sandbox"):
 *   1. the program starts under grader_exec's base seccomp filter (no page ever executable once
 *      written); no code of the submission runs before main(): on the simulator grade.py renamed
 *      its static initialisers' table (.init_array) to `attn_submission_init`, which the loader
 *      does not run;
 *   2. main(): the first request, CONFIG, says how the case runs (thread order, seed, checkers):
 *      the settings are applied, the simulator's threads are started, and the settings fixed
 *      (read-only memory); every file descriptor but the channel's, the standard ones and the
 *      symbolizer's is closed; the run filter is installed; then the submission's static
 *      initialisers run (run_submission_init);
 *   3. from then on submission code runs (initialisers, launchers, kernels, the pattern and
 *      builder) under the run filter: it cannot open a file, start a process or thread, change
 *      a signal handler, make a guard page accessible or any page executable. Right before each
 *      launch the settings are checked again and every buffer of the launch ends at an
 *      inaccessible page. */
#define _GNU_SOURCE /* sigaction flags, mprotect, sysconf, REG_ERR */
#include "grader_runner.h"

#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "attn/bench.h"
#include "attn/device.h"
#include "grader_rpc.h"
#include "grader_seccomp.h"
#ifdef ATTN_BACKEND_SIM
#include <cudasim.h>
#endif

#ifdef ATTN_BACKEND_SIM
static const bool guard_pages = true; /* device memory is host memory: it can be protected */
#else
static const bool guard_pages = false;
#endif

#define MAX_REQUEST ((size_t)1 << 30)
#define MAX_KEEP_SIDE 8192

/* One device buffer: `lead` bytes of NaN, the data, then `trail` bytes of NaN and, on the
 * simulator, an inaccessible page right after them. An input's data is rounded up to 16 bytes
 * (so that a vector load of its last elements is aligned), so at most 12 bytes of NaN separate
 * its end from the page; an output's data ends exactly at the page, so that any write past it
 * faults, whatever the submission's code does to the bytes around it afterwards. */
typedef struct rbuf {
    unsigned char *base, *data, *page;
    size_t bytes, lead, trail;
} rbuf;

/* The guard pages the fault handler knows: Q, K, V, O, LSE, then the launch's extra buffers
 * (grader_rpc.h, LAUNCH). A kernel's access there is reported by the simulator
 * (cudasim_add_guard_region: kernel, block, thread and, in the checked build, the line); this
 * handler sees an access from host code (the submission's launcher). */
#define GUARDS (5 + GRADER_RPC_MAX_EXTRA)
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
            const char *what = "access";
#if defined(__x86_64__)
            what = ((const ucontext_t *)uctx)->uc_mcontext.gregs[REG_ERR] & 2 ? "write" : "read";
#endif
            grader_runner_where(where, sizeof where);
            int n = snprintf(line, sizeof line,
                             "grader: out-of-bounds %s: %s%s%s past the end of %s (byte +%ld "
                             "after it, in host code: the launcher?)\n",
                             what, where, where[0] ? " " : "", what, guards[t].name,
                             (long)(a - guards[t].end));
            ssize_t ignored = write(STDERR_FILENO, line, n > 0 ? (size_t)n : 0);
            (void)ignored;
            _exit(3);
        }
    }
    if (previous_segv.sa_flags & SA_SIGINFO) {
        previous_segv.sa_sigaction(sig, info, uctx);
        return;
    }
    /* The default: the access faults again with SIGSEGV blocked (the mask the handler returns
     * to), and the kernel ends the program by it (after the set-up, the run filter forbids
     * sigaction, so the handler cannot be put back). */
    sigaddset(&((ucontext_t *)uctx)->uc_sigmask, SIGSEGV);
}

/* Kernel id 1 of the registry (not attn_example_find: its object file brings the example driver,
 * and with it the reference, into this program). */
static const attn_kernel *kernel_1(const attn_example *ex) {
    for (int k = 0; ex != NULL && k < ex->num_kernels; ++k)
        if (ex->kernels[k].id == 1)
            return &ex->kernels[k];
    return NULL;
}

/* Frees a buffer whose guard page can be made accessible again; under the run filter it cannot
 * (mprotect may only take access away), and the buffer is kept (a case makes few launches). */
static void rbuf_free(rbuf *b) {
    if (b->page == NULL ||
        mprotect(b->page, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE) == 0)
        attn_device_free(b->base);
    memset(b, 0, sizeof *b);
}

/* input: the data rounded up to 16 bytes before the page; output: the data ends at the page.
 * 0, or -1. */
static int rbuf_alloc(rbuf *b, size_t bytes, size_t guard, bool input) {
    memset(b, 0, sizeof *b);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t rounded = input ? (bytes + 15) & ~(size_t)15 : bytes;
    size_t total = guard_pages ? guard + rounded + 2 * page : guard + bytes + guard;
    b->base = attn_device_alloc(total);
    if (b->base == NULL || attn_device_fill_nan(b->base, total))
        return -1;
    b->bytes = bytes;
    b->lead = guard;
    if (guard_pages) {
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
    rbuf extra[GRADER_RPC_MAX_EXTRA];          /* the extra buffers of the launch (grader_rpc.h) */
    char extra_name[GRADER_RPC_MAX_EXTRA][32]; /* "input dO", "output dQ": for the reports */
    void *extra_ptr[GRADER_RPC_MAX_EXTRA];     /* their device addresses: attn_buffers.args */
    int n_extra;
    attn_problem p;
    attn_block_mask host_mask, dev_mask;
    attn_sparse_inputs sparse;
    attn_buffers buf;
    bool launched;
    grader_rpc_config config; /* what the checker asked for (CONFIG) */
} runner;

static void release(runner *r) {
    for (int t = 0; t < GUARDS; ++t)
        guards[t].page = NULL;
#ifdef ATTN_BACKEND_SIM
    cudasim_clear_guard_regions();
#endif
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

/* Applies the checker's settings (CONFIG) to the simulator; returns 0 if they are in effect. The
 * submission's code ran since the last call (its static constructors, its launcher): the order,
 * the seed and the checkers are set again here, and checked, right before each launch. */
static int apply_settings(const grader_rpc_config *c) {
#ifdef ATTN_BACKEND_SIM
    cudasim_set_order((cudasim_order)c->order, c->seed);
    cudasim_set_checks(c->checks);
    return cudasim_get_order() == (cudasim_order)c->order && cudasim_get_seed() == c->seed &&
                   cudasim_get_checks() == (c->checks != 0)
               ? 0
               : -1;
#else
    (void)c;
    return 0;
#endif
}

static void serve_launch(runner *r, grader_rpc_buf *in, grader_rpc_buf *out) {
    static const char *names[5] = {"input Q", "input K", "input V", "output O", "output LSE"};
    release(r);
    int32_t mask_given;
    uint64_t sizes[6]; /* guard, O bytes, LSE bytes, Q, K, V bytes */
    const int32_t *has_mask = &mask_given;
    if (grader_rpc_get_problem(in, &r->p) || grader_rpc_read(in, &mask_given, 4) ||
        (mask_given && grader_rpc_get_mask(in, &r->host_mask)) ||
        grader_rpc_read(in, sizes, sizeof sizes)) {
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
    }
    uint32_t count;
    if (grader_rpc_read(in, &count, sizeof count) || count > GRADER_RPC_MAX_EXTRA) {
        put_error(out, -1, "bad request", "");
        return;
    }
    for (uint32_t x = 0; x < count; ++x) {
        char name[17] = {0};
        uint32_t input;
        uint64_t bytes;
        const void *src = NULL;
        if (grader_rpc_read(in, name, 16) || grader_rpc_read(in, &input, sizeof input) ||
            grader_rpc_read(in, &bytes, sizeof bytes) || bytes > MAX_REQUEST ||
            (input && (src = grader_rpc_get(in, bytes)) == NULL)) {
            put_error(out, -1, "bad request", "");
            return;
        }
        r->n_extra = (int)x + 1; /* release() frees what was allocated, even on an error */
        snprintf(r->extra_name[x], sizeof r->extra_name[x], "%s %s", input ? "input" : "output",
                 name);
        if (rbuf_alloc(&r->extra[x], bytes, sizes[0], input != 0) ||
            (input && attn_to_device(r->extra[x].data, src, bytes))) {
            put_error(out, -1, "out of memory", "");
            return;
        }
        r->extra_ptr[x] = r->extra[x].data;
    }
    if (rbuf_alloc(&r->o, sizes[1], sizes[0], false) ||
        rbuf_alloc(&r->lse, sizes[2], sizes[0], false) ||
        (*has_mask && attn_block_mask_to_device(&r->host_mask, &r->dev_mask))) {
        put_error(out, -1, "out of memory", "");
        return;
    }
    /* every buffer of the launch, the extra ones included, ends at a guard page */
    const rbuf *all[GUARDS] = {&r->in[0], &r->in[1], &r->in[2], &r->o, &r->lse};
    const char *all_names[GUARDS] = {names[0], names[1], names[2], names[3], names[4]};
    for (int x = 0; x < r->n_extra; ++x) {
        all[5 + x] = &r->extra[x];
        all_names[5 + x] = r->extra_name[x];
    }
    for (int t = 0; t < 5 + r->n_extra; ++t) {
        guards[t].page = all[t]->page;
        guards[t].end = all[t]->data + all[t]->bytes;
        guards[t].name = all_names[t];
#ifdef ATTN_BACKEND_SIM
        if (all[t]->page != NULL &&
            cudasim_add_guard_region(all[t]->page, (size_t)sysconf(_SC_PAGESIZE), guards[t].end,
                                     all_names[t]) != 0) {
            put_error(out, -1, "too many buffers", "the simulator's guard-region table is full");
            return;
        }
#endif
    }
    if (apply_settings(&r->config) != 0) {
        put_error(out, -1, "settings changed",
                  "the simulator's thread order or checkers were changed by the submission's "
                  "code; a submission must leave them as the grader sets them");
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
    for (int t = 0; t < 5 + r->n_extra; ++t)
        if (rbuf_put(out, all[t]))
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
    int32_t s[2];
    if (grader_rpc_read(in, s, sizeof s) || r->hooks->keep == NULL || s[0] < 1 || s[1] < 1 ||
        s[0] > MAX_KEEP_SIDE || s[1] > MAX_KEEP_SIDE)
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

/* Closes every descriptor but the standard ones and `keep` (n of them): a descriptor the
 * submission's constructors opened (a file, /proc/self/mem) must not outlive the set-up. */
static void close_others(const int *keep, int n) {
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        for (int fd = 3; fd < 65536; ++fd) {
            bool kept = false;
            for (int i = 0; i < n; ++i)
                kept = kept || keep[i] == fd;
            if (!kept)
                close(fd);
        }
        return;
    }
    int fds[1024], count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && count < 1024)
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
            fds[count++] = atoi(e->d_name);
    int own = dirfd(d);
    for (int c = 0; c < count; ++c) {
        bool kept = fds[c] <= 2 || fds[c] == own;
        for (int i = 0; i < n; ++i)
            kept = kept || keep[i] == fds[c];
        if (!kept)
            close(fds[c]);
    }
    closedir(d);
}

/* Step 2 of the order of events (top of this file): returns the GRADER_SETUP_* flags in place. */
static uint32_t set_up(runner *r, const int *keep, int n_keep, int sym_to, int sym_from) {
    uint32_t setup = 0;
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
    mallopt(M_ARENA_MAX, 1); /* every thread allocates from the main heap (it grows with brk) */
#endif
#ifdef ATTN_BACKEND_SIM
    const grader_rpc_config *c = &r->config;
    if (c->threads > 0)
        cudasim_set_threads(c->threads);
    if (c->watchdog_s >= 0)
        cudasim_set_watchdog(c->watchdog_s);
    if (sym_to >= 0 && sym_from >= 0) {
        cudasim_set_symbolizer(sym_to, sym_from);
        setup |= GRADER_SETUP_SYMBOLS;
    }
    cudasim_prepare();
    if (apply_settings(c) == 0 && cudasim_lock_settings() == 0)
        setup |= GRADER_SETUP_LOCKED;
    setup |= GRADER_SETUP_GUARDS;
#else
    (void)r;
    (void)sym_to;
    (void)sym_from;
    attn_device_info info;
    char why[256];
    attn_device_init(&info, why, sizeof why); /* the driver opens its devices now */
#endif
    close_others(keep, n_keep);
    if (grader_seccomp(GRADER_FILTER_RUN, getpid(), !guard_pages) == 0)
        setup |= GRADER_SETUP_FILTER;
    return setup;
}

/* The submission's static initialisers (constructors, C++ dynamic initialisation): its
 * .init_array, renamed by grade.py so that the loader does not run it (README: "How a submission
 * is built"); the linker defines these two symbols when the section is there. They run once,
 * after set_up(), with main()'s arguments, as the loader would have called them. */
typedef void (*grader_init_fn)(int, char **, char **);
extern grader_init_fn __start_attn_submission_init[] __attribute__((weak));
extern grader_init_fn __stop_attn_submission_init[] __attribute__((weak));
extern char **environ;

static void run_submission_init(int argc, char **argv) {
    if (__start_attn_submission_init == NULL || __stop_attn_submission_init == NULL)
        return;
    for (grader_init_fn *f = __start_attn_submission_init; f < __stop_attn_submission_init; ++f)
        (*f)(argc, argv, environ);
}

int grader_runner_main(int argc, char **argv, const grader_runner_hooks *hooks) {
    int fd_in = -1, fd_out = -1, sym_to = -1, sym_from = -1;
    for (int a = 1; a + 1 < argc; ++a) {
        if (strcmp(argv[a], "--rpc") == 0 && sscanf(argv[a + 1], "%d,%d", &fd_in, &fd_out) != 2)
            fd_in = -1;
        if (strcmp(argv[a], "--symbolizer") == 0 &&
            sscanf(argv[a + 1], "%d,%d", &sym_to, &sym_from) != 2)
            sym_to = sym_from = -1;
    }
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
    /* The first request is CONFIG (step 2); anything else ends the program. */
    const grader_rpc_config *c;
    if (grader_rpc_recv(fd_in, &type, &in, sizeof(grader_rpc_config)) != 0 ||
        type != GRADER_RPC_CONFIG || (c = grader_rpc_get(&in, sizeof *c)) == NULL) {
        fprintf(stderr, "error: the checker's first request is not CONFIG\n");
        return 2;
    }
    r.config = *c;
    int keep[4] = {fd_in, fd_out, sym_to, sym_from};
    uint32_t setup = set_up(&r, keep, 4, sym_to, sym_from);
    run_submission_init(argc, argv);
    grader_rpc_put(&out, &setup, sizeof setup);
    if (grader_rpc_send(fd_out, GRADER_RPC_CONFIG, &out) != 0)
        return 0;
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
