/* sparse_example.c — attn_sparse_example_main: the example driver (example.c) with the sparse
 * steps of sparse_run.c as its hooks (see attn/sparse/sparse_example.h). */
#include "attn/sparse/sparse_example.h"

#include <string.h>

#include "attn/example.h"
#include "attn/sparse/sparse_run.h"

typedef struct sparse_session {
    const attn_sparse_example *ex;
    attn_sparse_run st;
} sparse_session;

static int prepare(void *ctx, const attn_cli *cli, char *why, size_t len) {
    sparse_session *s = (sparse_session *)ctx;
    return attn_sparse_prepare(&s->st, s->ex, cli->pattern, why, len);
}

static attn_verdict verdict(void *ctx, const attn_kernel *k, const attn_problem *p, char *why,
                            size_t len) {
    return attn_sparse_verdict(&((sparse_session *)ctx)->st, k, p, why, len);
}

/* The pattern's masks for the selected kernels: the CSR if one reads it, and a dense reference
 * for a baseline timed beside the sparse kernels. */
static int build(void *ctx, const attn_example *ex, const bool *selected, const attn_problem *p,
                 bool quiet, const attn_mask **mask, bool *dense_too) {
    attn_sparse_run *st = &((sparse_session *)ctx)->st;
    bool need_csr = false;
    for (int n = 0; n < ex->num_kernels; ++n)
        if (selected[n])
            attn_sparse_needs(st, &ex->kernels[n], &need_csr, dense_too);
    if (attn_sparse_build(st, p, need_csr, quiet) != 0)
        return 1;
    *mask = st->has_pattern ? &st->mask : NULL;
    return 0;
}

static void buffers(void *ctx, attn_buffers *b) {
    attn_sparse_buffers(&((sparse_session *)ctx)->st, b);
}

static void kernel_options(void *ctx, const attn_kernel *k, const attn_problem *p,
                           attn_run_opts *opts, char *why, size_t len) {
    attn_sparse_kernel_options(&((sparse_session *)ctx)->st, k, p, opts, why, len);
}

static void after_table(void *ctx, const attn_example *ex, const attn_run_record *recs, int n) {
    attn_sparse_print_speedups(&((sparse_session *)ctx)->st, ex, recs, n);
}

static void release(void *ctx) { attn_sparse_free(&((sparse_session *)ctx)->st); }

int attn_sparse_example_main(int argc, char **argv, const attn_sparse_example *ex) {
    sparse_session s;
    memset(&s, 0, sizeof s);
    s.ex = ex;
    const attn_example_hooks hooks = {&s,      prepare,        verdict,     build,
                                      buffers, kernel_options, after_table, release};
    return attn_example_run(argc, argv, ex->base, &hooks);
}
