/* cp_run.c — example 11's plumbing (cp_run.h): the flags, the device and transport set-up, the
 * seeded inputs every rank draws alike, the result gathered on rank 0 and checked there against
 * the harness's double-precision references (attn_reference, attn_reference_backward) and against
 * example 03's kernel on the whole problem on one device, and the per-rank work table. The flags:
 * cp_options.c. */
#define _POSIX_C_SOURCE 200809L
#include "cp_run.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/check.h"
#include "attn/cli.h"
#include "attn/device.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "cp_dsa.h"
#include "cp_options.h"
#include "cp_ring.h"

extern const attn_example flash2_fwd_example; /* example 03: its kernel 1, fa2_fp32 */

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

/* Rank 0 receives every rank's fields and work; the others send theirs. A field is one
 * [B, H, len, width] device tensor per chunk (the result's O and LSE, the gradients). */
#define CP_MAX_FIELDS 3
typedef struct cp_field {
    const float *dev[CP_MAX_CHUNKS]; /* this rank's, per chunk */
    int width;
    float *host; /* rank 0: the whole [B, H, L, width] */
} cp_field;

typedef struct cp_gathered {
    cp_field f[CP_MAX_FIELDS];
    int n;
    double *work; /* rank 0: [P][3]: entries, steps computed, steps skipped */
} cp_gathered;

static void cp_gathered_free(cp_gathered *g) {
    for (int i = 0; i < g->n; ++i)
        free(g->f[i].host);
    free(g->work);
    memset(g, 0, sizeof *g);
}

/* Posts the n transfers started (rc: how starting them went) and waits for each. */
static int cp_post_wait(cp_transport *t, cp_request *req, int n, int rc) {
    if (rc == CP_OK)
        rc = t->post(t);
    for (int i = 0; rc == CP_OK && i < n; ++i)
        rc = t->wait(t, &req[i]);
    return rc;
}

static int cp_gather(cp_transport *t, const cp_setup *s, const cp_result *r, cp_gathered *g) {
    const int P = t->size, BH = s->p.B * s->p.H, L = s->p.Lq;
    double mine[3] = {r->entries, r->steps_computed, r->steps_skipped};
    if (r->dsa)
        memcpy(mine, r->bytes, sizeof mine);
    double *dwork = attn_device_alloc(sizeof mine);
    if (!dwork || attn_to_device(dwork, mine, sizeof mine))
        return 1;
    if (t->rank != 0) {
        cp_request req[1 + CP_MAX_CHUNKS * CP_MAX_FIELDS];
        int n = 0, rc = t->isend(t, dwork, sizeof mine, 0, &req[n++]);
        for (int c = 0; c < r->nchunks; ++c)
            for (int i = 0; rc == CP_OK && i < g->n; ++i)
                rc = t->isend(t, g->f[i].dev[c],
                              (size_t)BH * r->chunk[c].len * g->f[i].width * sizeof(float), 0,
                              &req[n++]);
        if ((rc = cp_post_wait(t, req, n, rc)) != CP_OK)
            cp_transfer_failed(t, rc, -1, 0, "result", true);
        attn_device_free(dwork);
        return 0;
    }
    g->work = malloc((size_t)P * 3 * sizeof(double));
    size_t most = 1;
    for (int i = 0; i < g->n; ++i) {
        g->f[i].host = malloc((size_t)BH * L * g->f[i].width * sizeof(float));
        if (!g->f[i].host)
            return 1;
        most += (size_t)BH * ((L + P - 1) / P + 1) * g->f[i].width;
    }
    float *tmp = attn_device_alloc(most * sizeof(float)), *host = malloc(most * sizeof(float));
    if (!g->work || !tmp || !host)
        return 1;
    memcpy(g->work, mine, sizeof mine);
    for (int src = 0; src < P; ++src) {
        cp_chunk ch[CP_MAX_CHUNKS];
        const int nc = cp_rank_chunks(s->strategy, L, P, src, ch);
        cp_request req[1 + CP_MAX_FIELDS];
        for (int c = -1; c < nc; ++c) { /* c = -1: the work counts */
            const size_t rows = c < 0 ? 0 : (size_t)BH * ch[c].len;
            const float *dev[CP_MAX_FIELDS];
            size_t at[CP_MAX_FIELDS], end = 0;
            for (int i = 0; c >= 0 && i < g->n; ++i) {
                at[i] = end;
                end += rows * g->f[i].width;
                dev[i] = src ? tmp + at[i] : g->f[i].dev[c];
            }
            if (src) {
                int n = 0, rc = c < 0 ? t->irecv(t, dwork, sizeof mine, src, &req[n++]) : CP_OK;
                for (int i = 0; c >= 0 && rc == CP_OK && i < g->n; ++i)
                    rc = t->irecv(t, tmp + at[i], rows * g->f[i].width * sizeof(float), src,
                                  &req[n++]);
                if ((rc = cp_post_wait(t, req, n, rc)) != CP_OK)
                    cp_transfer_failed(t, rc, -1, src, "result", false);
            }
            if (c < 0) {
                if (src && attn_to_host(g->work + 3 * src, dwork, sizeof mine))
                    return 1;
                continue;
            }
            for (int i = 0; i < g->n; ++i) {
                if (rows && attn_to_host(host, dev[i], rows * g->f[i].width * sizeof(float)))
                    return 1;
                cp_unslice(g->f[i].host, host, BH, L, g->f[i].width, ch[c]);
            }
        }
    }
    attn_device_free(tmp);
    attn_device_free(dwork);
    free(host);
    return 0;
}

/* Example 03's kernel on the whole problem on one device: the result the ranks must agree with. */
static int cp_one_device(const cp_setup *s, const attn_host_inputs *in, float *o, float *lse) {
    const attn_problem *p = &s->p;
    const size_t nq = attn_problem_q_elems(p), nk = attn_problem_k_elems(p);
    float *d = attn_device_alloc((nq * 2 + nk * 2 + attn_problem_lse_elems(p)) * sizeof(float));
    if (!d || attn_to_device(d, in->q, nq * sizeof(float)) ||
        attn_to_device(d + nq, in->k, nk * sizeof(float)) ||
        attn_to_device(d + nq + nk, in->v, nk * sizeof(float)))
        return 1;
    attn_buffers b;
    memset(&b, 0, sizeof b);
    b.q = d;
    b.k = d + nq;
    b.v = d + nq + nk;
    b.o = d + nq + 2 * nk;
    b.lse = d + 2 * nq + 2 * nk;
    s->fwd->launch(p, &b, 0);
    if (attn_cuda_report(cudaDeviceSynchronize(), s->fwd->name, __FILE__, __LINE__) ||
        attn_to_host(o, b.o, nq * sizeof(float)) ||
        attn_to_host(lse, b.lse, attn_problem_lse_elems(p) * sizeof(float)))
        return 1;
    attn_device_free(d);
    return 0;
}

static double cp_max_diff(const float *a, const float *b, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double d = a[i] == b[i] ? 0.0 : (double)a[i] - (double)b[i]; /* -inf == -inf */
        m = d < 0 ? (-d > m ? -d : m) : (d > m ? d : m);
    }
    return m;
}

/* The reference's document mask: query i and key j of the same document (cp_options.doc_len). */
static int cp_same_document(const void *ctx, int b, int h, int i, int j) {
    const cp_options *o = (const cp_options *)ctx;
    (void)b, (void)h;
    int start = 0;
    for (int d = 0; d < o->docs; ++d) {
        const int end = start + o->doc_len[d];
        if (i < end)
            return j >= start && j < end;
        start = end;
    }
    return 0;
}

/* The reference's window and documents: key j is one of query i's last W positions (the
 * problem's causality applies on top), of its document. */
static int cp_window_keep(const void *ctx, int b, int h, int i, int j) {
    const cp_options *o = (const cp_options *)ctx;
    return (o->window == 0 || i - j < o->window) &&
           (o->docs == 0 || cp_same_document(ctx, b, h, i, j));
}

/* The reference's mask: the documents and the window, or none. */
static const attn_mask *cp_mask(const cp_options *o, attn_mask *m) {
    if (!o->docs && !o->window)
        return NULL;
    memset(m, 0, sizeof *m);
    m->kind = ATTN_MASK_PREDICATE;
    m->keep = cp_window_keep;
    m->ctx = o;
    return m;
}

/* The work each rank did, measured (the entries of the problems it launched, its computed and
 * skipped steps), against cp_layout's count of what its layout gives it. true if they agree. */
static bool cp_work_table(const cp_options *o, int P, const double *work, const char *what) {
    const attn_problem *p = &o->s.p;
    bool ok = true;
    double total = 0.0, most = 0.0;
    for (int r = 0; r < P; ++r)
        total += work[3 * r];
    if (!o->quiet)
        printf("%s: rank  score entries  share   steps computed  skipped\n", what);
    for (int r = 0; r < P; ++r) {
        const cp_work w = cp_rank_work(o->s.strategy, p->Lq, p->H, P, r, p->causal);
        const double e = work[3 * r];
        ok = ok && e == w.entries * p->B && (int)work[3 * r + 1] == w.steps_computed &&
             (int)work[3 * r + 2] == w.steps_skipped;
        most = e > most ? e : most;
        if (!o->quiet)
            printf("%*d  %13.0f  %5.1f%%  %14d  %7d\n", (int)strlen(what) + 6, r, e,
                   total > 0 ? 100.0 * e / total : 0.0, (int)work[3 * r + 1], (int)work[3 * r + 2]);
    }
    printf("%s work: busiest rank %.2fx the mean; %s\n", what, total > 0 ? most * P / total : 1.0,
           ok ? "every rank did the work its layout gives it"
              : "FAIL: a rank's work differs from its layout's count (cp_layout.c)");
    return ok;
}

/* The forward's checks, on rank 0. true if every check passes. */
static bool cp_report(const cp_options *o, int P, const attn_host_inputs *in,
                      const cp_gathered *g) {
    const attn_problem *p = &o->s.p;
    const size_t nq = attn_problem_q_elems(p), nl = attn_problem_lse_elems(p);
    float *ref = malloc((nq + nl) * sizeof(float)), *one = malloc((nq + nl) * sizeof(float));
    attn_mask m;
    if (!ref || !one ||
        attn_reference(p, cp_mask(o, &m), in->q, in->k, in->v, ref, ref + nq) != 0 ||
        (!o->docs && !o->window && cp_one_device(&o->s, in, one, one + nq)))
        return false;
    printf("%s, %d rank(s), backend %s: B=%d H=%d L=%d D=%d%s, %s's %s per step\n",
           cp_strategy_name(o->s.strategy), P, o->backend, p->B, p->H, p->Lq, p->D,
           p->causal ? " causal" : "", flash2_fwd_example.name, o->s.fwd->name);
    const float *out = g->f[0].host, *lse = g->f[1].host;
    const attn_check_result co = attn_check_output(p, out, ref, NULL, 1.0);
    const attn_check_result cl = attn_check_lse_at(p, lse, ref + nq, 1.0);
    attn_check_print(stdout, "output vs the fp64 reference", &co);
    attn_check_print(stdout, "LSE vs the fp64 reference", &cl);
    if (o->window)
        printf(
            "window of %d keys: each ring step's pairs out of every window skipped, pairs cut by "
            "its edge masked inside (the one-device kernel has no window: compared with the "
            "reference only)\n",
            o->window);
    else if (o->docs)
        printf("%d documents: each ring step's pairs of two documents skipped (the one-device "
               "kernel has no document mask: compared with the reference only)\n",
               o->docs);
    else
        printf("max |%d ranks - one device|: output %.3g, LSE %.3g\n", P, cp_max_diff(out, one, nq),
               cp_max_diff(lse, one + nq, nl));
    const bool work_ok = cp_work_table(o, P, g->work, "forward");
    free(ref);
    free(one);
    return co.pass && cl.pass && work_ok;
}

/* The backward's checks, on rank 0: each gradient against the harness's fp64 backward. */
static bool cp_report_backward(const cp_options *o, int P, const attn_host_inputs *in,
                               const float *dout, const cp_gathered *g) {
    const attn_problem *p = &o->s.p;
    const size_t n = attn_problem_q_elems(p);
    float *mem = malloc(6 * n * sizeof(float));
    if (!mem)
        return false;
    attn_grads ref = {mem, mem + n, mem + 2 * n}, tol = {mem + 3 * n, mem + 4 * n, mem + 5 * n};
    attn_mask m;
    if (attn_reference_backward(p, cp_mask(o, &m), in->q, in->k, in->v, dout, NULL, &ref, NULL,
                                &tol) != 0)
        return false;
    if (o->s.strategy == CP_ULYSSES)
        printf("backward through the Ulysses all-to-all: Q, K, V, O, dO and the LSE to each head's "
               "rank, example 07's %s on its heads, dQ, dK, dV back\n",
               o->s.bwd->name);
    else
        printf("backward through the ring: example 07's %s per pair, dK and dV travelling with "
               "their shard\n",
               o->s.bwd->name);
    static const char *const names[3] = {"dQ", "dK", "dV"};
    const float *want[3] = {ref.dq, ref.dk, ref.dv}, *bound[3] = {tol.dq, tol.dk, tol.dv};
    bool pass = true;
    for (int i = 0; i < 3; ++i) {
        const attn_grad_check c =
            attn_check_gradient(p, i == 0, g->f[i].host, want[i], bound[i], NULL, n);
        printf("%s vs the fp64 reference: %s %zu checked, %zu bad, worst error %.2g of its bound",
               names[i], c.bad == 0 ? "PASS" : "FAIL", c.checked, c.bad, c.ratio);
        if (c.first >= 0)
            printf("; first at (b=%d,h=%d,i=%d,d=%d): got %g want %g", c.b, c.h, c.i, c.d,
                   c.first_got, c.first_want);
        printf("\n");
        pass = pass && c.bad == 0;
    }
    free(mem);
    return cp_work_table(o, P, g->work, "backward") && pass;
}

/* DeepSeek sparse attention's checks, on rank 0: the gathered selection against example 05's
 * pipeline on one device (the same kernels: the same selection, ties to the lowest position),
 * the output against the fp64 reference over that selection (attn_reference with the selection as
 * its CSR mask), the output against the one-device run; then the bytes each rank received. */
static bool cp_report_dsa(const cp_options *o, int P, const cp_dsa_inputs *in,
                          const cp_gathered *g) {
    const attn_problem *p = &in->p;
    const int B = p->B, H = p->H, L = p->Lq, K = in->K;
    const size_t nq = attn_problem_q_elems(p), nl = attn_problem_lse_elems(p), rows = (size_t)B * L;
    float *one = malloc((nq + nl) * sizeof *one), *ref = malloc((nq + nl) * sizeof *ref);
    float *kx = malloc(nq * sizeof *kx), *vx = malloc(nq * sizeof *vx);
    int32_t *sel = malloc(rows * K * sizeof *sel), *one_sel = malloc(rows * K * sizeof *sel);
    int64_t *row_ptr = malloc((rows + 1) * sizeof *row_ptr);
    int32_t *col = malloc(rows * K * sizeof *col + 1);
    if (!one || !ref || !kx || !vx || !sel || !one_sel || !row_ptr || !col ||
        cp_dsa_one_device(in, one, one + nq, one_sel))
        return false;
    size_t differ = 0;
    for (int b = 0; b < B; ++b) /* head 0's copy of the selection */
        for (int i = 0; i < L; ++i) {
            bool same = true;
            for (int x = 0; x < K; ++x) {
                const size_t at = ((size_t)b * L + i) * K + x;
                sel[at] = (int32_t)g->f[2].host[(((size_t)b * H) * L + i) * K + x];
                same = same && sel[at] == one_sel[at];
            }
            differ += !same;
        }
    for (int b = 0; b < B; ++b) /* the shared K/V head in every head, for the reference */
        for (int h = 0; h < H; ++h) {
            memcpy(kx + ((size_t)b * H + h) * L * p->D, in->k + (size_t)b * L * p->D,
                   (size_t)L * p->D * sizeof(float));
            memcpy(vx + ((size_t)b * H + h) * L * p->D, in->v + (size_t)b * L * p->D,
                   (size_t)L * p->D * sizeof(float));
        }
    ds_selection_csr(p, K, sel, row_ptr, col);
    attn_mask m;
    memset(&m, 0, sizeof m);
    m.kind = ATTN_MASK_CSR;
    m.row_ptr = row_ptr;
    m.col_idx = col;
    if (attn_reference(p, &m, in->q, kx, vx, ref, ref + nq) != 0)
        return false;
    printf("DeepSeek sparse attention, %s layout, %d rank(s), backend %s: B=%d H=%d L=%d D=%d "
           "%s, top-%d, indexer %d heads x %d; example 05's indexer, topk_radix, sparse_mma\n",
           cp_strategy_name(o->s.strategy), P, o->backend, B, H, L, p->D, attn_dtype_name(p->dtype),
           K, in->HI, in->DI);
    printf("selection vs example 05 on one device: %s %zu of %zu query rows differ\n",
           differ ? "FAIL" : "PASS", differ, rows);
    const float *out = g->f[0].host, *lse = g->f[1].host;
    const attn_check_result co = attn_check_output(p, out, ref, NULL, 1.0);
    const attn_check_result cl = attn_check_lse_at(p, lse, ref + nq, 1.0);
    attn_check_print(stdout, "output vs the fp64 reference over the selection", &co);
    attn_check_print(stdout, "LSE vs the fp64 reference over the selection", &cl);
    printf("max |%d ranks - one device|: output %.3g, LSE %.3g\n", P, cp_max_diff(out, one, nq),
           cp_max_diff(lse, one + nq, nl));
    if (!o->quiet) {
        printf("bytes received (K/V %s; the other way counted): rank  indexer keys (all-gather)  "
               "K/V (all-gather)  K/V (fetch of the selected rows)\n",
               o->gather_kv ? "all-gathered" : "fetched");
        for (int r = 0; r < P; ++r)
            printf("%20d  %25.0f  %16.0f  %14.0f\n", r, g->work[3 * r], g->work[3 * r + 1],
                   g->work[3 * r + 2]);
    }
    free(one), free(ref), free(kx), free(vx), free(sel), free(one_sel), free(row_ptr), free(col);
    return differ == 0 && co.pass && cl.pass;
}

void cp_relaunch(int argc, char **argv) {
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE"))
        return; /* already one of mpirun's ranks */
    int at = 0;
    for (int i = 1; i + 1 < argc; ++i)
        if (strcmp(argv[i], "--ranks") == 0)
            at = i;
    if (!at)
        return;
    /* Bad flags are said here, in one line, before mpirun starts (else each rank says it and
     * mpirun adds its own report of the ranks' exit status). */
    cp_options o;
    char err[512];
    int P = atoi(argv[at + 1]); /* not a count of 1 or more: cp_parse says so */
    int rc = cp_parse(argc, argv, P >= 1 ? P : 1, &o, err, sizeof err);
    if (rc == -1) {
        fputs(cp_usage, stdout);
        exit(0);
    }
    if (rc) {
        fprintf(stderr, "%s\n", err);
        exit(rc);
    }
    char **args = calloc((size_t)argc + 8, sizeof *args);
    if (!args)
        exit(ATTN_EXIT_USAGE);
    int n = 0;
    args[n++] = (char *)CP_MPIEXEC;
    args[n++] = (char *)"--oversubscribe"; /* more ranks than cores: the simulator's runs */
    args[n++] = (char *)"-np";
    args[n++] = argv[at + 1];
    for (int i = 0; i < argc; ++i)
        if (i != at && i != at + 1)
            args[n++] = argv[i];
    /* Open MPI refuses root unless told (its documented variables): a container's CI runs as
     * root, and so does the tour there */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    /* shared memory by plain copies: containers often forbid cross-memory attach */
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    fflush(stdout);
    execv(CP_MPIEXEC, args);
    fprintf(stderr, "error: --ranks: cannot start %s\n", CP_MPIEXEC);
    exit(ATTN_EXIT_USAGE);
}

/* The forward, o->reps times (the ranks start each together); the time of the runs summed. */
static int cp_forward_runs(cp_transport *t, const cp_options *o, const attn_host_inputs *in,
                           const cp_dsa_inputs *din, cp_result *r, float **sel, double *seconds) {
    int failed = 0;
    *seconds = 0.0;
    for (int rep = 0; !failed && rep < o->reps; ++rep) {
        if (rep)
            cp_result_free(r);
        failed = t->barrier(t) != CP_OK;
        const double t0 = cp_now();
        if (o->dsa) {
            failed = failed || cp_dsa_forward(t, o->s.strategy, din, !o->gather_kv, o->plant_dsa, r,
                                              sel, r->bytes) != 0;
            r->dsa = true;
        } else
            failed = failed || cp_forward(t, &o->s, in, r) != 0;
        *seconds += cp_now() - t0;
    }
    return failed;
}

/* The backward of the loss sum(dO * O), dO seeded as example 07's (stream 3), and its dQ, dK, dV
 * gathered on rank 0. */
static int cp_backward_run(cp_transport *t, const cp_options *o, const attn_host_inputs *in,
                           cp_result *r, cp_result *rb, cp_grads *grads, cp_gathered *gb,
                           float **dout) {
    const size_t n = attn_problem_q_elems(&o->s.p);
    *dout = malloc(n * sizeof(float));
    if (*dout == NULL)
        return 1;
    attn_fill_uniform(*dout, n, (uint64_t)o->seed, 3, 1.0f, o->s.p.dtype);
    if (cp_backward(t, &o->s, in, *dout, r, rb, grads) != 0)
        return 1;
    gb->n = 3;
    for (int c = 0; c < r->nchunks; ++c) {
        gb->f[0].dev[c] = grads->dq[c], gb->f[1].dev[c] = grads->dk[c];
        gb->f[2].dev[c] = grads->dv[c];
        for (int i = 0; i < 3; ++i)
            gb->f[i].width = o->s.p.D;
    }
    return cp_gather(t, &o->s, rb, gb) != 0;
}

int cp_main(int argc, char **argv) {
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    cp_options o;
    char err[512];
    int rc = cp_parse(argc, argv, P, &o, err, sizeof err);
    if (rc == -1) {
        if (rank == 0)
            fputs(cp_usage, stdout);
        return 0;
    }
    if (rc) {
        if (rank == 0)
            fprintf(stderr, "%s\n", err);
        return rc;
    }
    attn_device_info info;
    if ((rc = attn_device_init(&info, err, sizeof err)) != 0) {
        if (rank == 0)
            fprintf(stderr, "%s: %s\n", rc == ATTN_EXIT_NO_GPU ? "SKIP" : "error", err);
        return rc;
    }
    /* after the device: NCCL then picks this rank's GPU (attn_device_init takes device 0) */
    cp_transport *t = cp_transport_open(o.backend, o.timeout_s, err, sizeof err, &rc);
    if (!t) {
        if (rank == 0)
            fprintf(stderr, "%s: %s\n", rc == ATTN_EXIT_NO_GPU ? "SKIP" : "error", err);
        return rc;
    }
    attn_host_inputs in;
    cp_result r, rb;
    cp_grads grads;
    cp_gathered g, gb;
    memset(&g, 0, sizeof g);
    memset(&gb, 0, sizeof gb);
    float *dout = NULL, *sel[CP_MAX_CHUNKS] = {NULL};
    cp_dsa_inputs din;
    memset(&din, 0, sizeof din);
    memset(&in, 0, sizeof in);
    attn_problem dp = o.s.p;
    dp.dtype = ATTN_BF16;
    int failed = o.dsa ? cp_dsa_inputs_make(&din, &dp, o.index_heads, o.index_dim, o.dsa,
                                            (uint64_t)o.seed) != 0
                       : attn_host_inputs_make(&in, &o.s.p, (uint64_t)o.seed, 1.0f) != 0;
    double seconds = 0.0;
    failed = failed || cp_forward_runs(t, &o, &in, &din, &r, sel, &seconds);
    g.n = o.dsa ? 3 : 2;
    for (int c = 0; !failed && c < r.nchunks; ++c) {
        g.f[0].dev[c] = r.o[c], g.f[0].width = o.s.p.D;
        g.f[1].dev[c] = r.lse[c], g.f[1].width = 1;
        g.f[2].dev[c] = sel[c], g.f[2].width = o.dsa;
    }
    failed = failed || cp_gather(t, &o.s, &r, &g) != 0;
    if (!failed && o.backward)
        failed = cp_backward_run(t, &o, &in, &r, &rb, &grads, &gb, &dout);
    if (failed) {
        fprintf(stderr, "error: rank %d: the run failed (the line above says why)\n", rank);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    if (rank == 0 && !o.quiet)
        printf("time per forward on rank 0: %.3g ms over %d run(s) (wall clock, transfers "
               "included%s)\n",
               1e3 * seconds / o.reps, o.reps,
               attn_on_simulator() ? "; the simulator's CPU time, not a GPU's" : "");
    bool pass = true;
    if (rank == 0) {
        pass = o.dsa ? cp_report_dsa(&o, P, &din, &g) : cp_report(&o, P, &in, &g);
        if (o.backward)
            pass = cp_report_backward(&o, P, &in, dout, &gb) && pass;
        printf("%s\n", pass ? "PASS" : "FAIL");
    }
    if (o.backward) {
        cp_grads_free(&grads);
        cp_result_free(&rb);
    }
    cp_result_free(&r);
    if (o.dsa)
        cp_dsa_inputs_free(&din);
    else
        attn_host_inputs_free(&in);
    cp_gathered_free(&g);
    cp_gathered_free(&gb);
    free(dout);
    t->close(t);
    return pass ? 0 : 1;
}
