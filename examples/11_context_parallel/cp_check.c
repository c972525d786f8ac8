/* cp_check.c — example 11's checks (cp_check.h), on rank 0. */
#include "cp_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/check.h"
#include "attn/device.h"
#include "attn/reference.h"

extern const attn_example flash2_fwd_example; /* example 03: its kernel 1, fa2_fp32 */

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
bool cp_report(const cp_options *o, int P, const attn_host_inputs *in, const cp_gathered *g) {
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
bool cp_report_backward(const cp_options *o, int P, const attn_host_inputs *in, const float *dout,
                        const cp_gathered *g) {
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
bool cp_report_dsa(const cp_options *o, int P, const cp_dsa_inputs *in, const cp_gathered *g) {
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
