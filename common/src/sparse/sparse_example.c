/* sparse_example.c — attn_sparse_module: the sparse steps of sparse_run.c as the hooks of the one
 * driver (attn/example.h; see attn/sparse/sparse_example.h). */
#include "attn/sparse/sparse_example.h"

#include <string.h>

#include "attn/sparse/patterns.h"
#include "attn/sparse/sparse_run.h"

const attn_sparse_config *attn_sparse_config_of(const attn_example *ex) {
    return ex->module == &attn_sparse_module ? (const attn_sparse_config *)ex->module_config : NULL;
}

static int prepare(void *state, const attn_example *ex, const attn_cli *cli, const void *opts,
                   attn_problem *p, char *why, size_t len) {
    (void)opts, (void)p;
    return attn_sparse_prepare((attn_sparse_run *)state, attn_sparse_config_of(ex), cli->pattern,
                               why, len);
}

static attn_verdict verdict(void *state, const attn_kernel *k, const attn_problem *p, char *why,
                            size_t len) {
    return attn_sparse_verdict((attn_sparse_run *)state, k, p, why, len);
}

/* The pattern's masks for the selected kernels: the CSR if one reads it, and a dense reference
 * for a baseline timed beside the sparse kernels. */
static int build(void *state, const attn_example *ex, const bool *selected, const attn_problem *p,
                 bool quiet, const attn_mask **mask, bool *dense_too) {
    attn_sparse_run *st = (attn_sparse_run *)state;
    bool need_csr = false;
    for (int n = 0; n < ex->num_kernels; ++n)
        if (selected[n])
            attn_sparse_needs(st, &ex->kernels[n], &need_csr, dense_too);
    if (attn_sparse_build(st, p, need_csr, quiet) != 0)
        return 1;
    *mask = st->has_pattern ? &st->mask : NULL;
    return 0;
}

static void buffers(void *state, attn_buffers *b) {
    attn_sparse_buffers((attn_sparse_run *)state, b);
}

static void kernel_options(void *state, const attn_kernel *k, const attn_problem *p,
                           attn_run_opts *opts, char *why, size_t len) {
    attn_sparse_kernel_options((attn_sparse_run *)state, k, p, opts, why, len);
}

static void after_table(void *state, const attn_example *ex, const attn_run_record *recs, int n) {
    attn_sparse_print_speedups((attn_sparse_run *)state, ex, recs, n);
}

static void release(void *state) { attn_sparse_free((attn_sparse_run *)state); }

static void usage(const attn_example *ex, FILE *f) {
    fprintf(f, "\n--pattern SPEC: parts joined by '+' ('none' = dense); the kinds of %s:\n",
            ex->name);
    attn_pattern_usage(f, attn_sparse_config_of(ex)->kinds);
    fprintf(f, "default pattern: %s\n", attn_sparse_config_of(ex)->default_pattern);
}

const attn_module attn_sparse_module = {
    .usage = usage,
    .state_size = sizeof(attn_sparse_run),
    .prepare = prepare,
    .verdict = verdict,
    .build = build,
    .buffers = buffers,
    .kernel_options = kernel_options,
    .after_table = after_table,
    .release = release,
};
