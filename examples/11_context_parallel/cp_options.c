/* cp_options.c — example 11's flags (cp_options.h): one value flag at a time, then the flags
 * checked together (ranks against the length, documents, the window, DSA against example 05's
 * limits, the ring's kernels against the problem); every refusal is one line, alike on every
 * rank. */
#include "cp_options.h"

#include <stdio.h>
#include <string.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/cli.h"
#include "attn/device.h"
#include "attn/example.h"
#include "cp_dsa.h"

extern const attn_example flash2_fwd_example; /* example 03: its kernel 1, fa2_fp32 */
extern const attn_example flash_bwd_example;  /* example 07: its kernel 2, fa2_fp32 backward */

const char cp_usage[] =
    "usage: mpirun -np P context_parallel [flags]   or   context_parallel --ranks P [flags]\n"
    "  --strategy S     ring (pass-KV, contiguous shards), zigzag (pass-KV, balanced causal\n"
    "                   shards) or ulysses (all-to-all over heads); default ring\n"
    "  -B, -H, -L, -D   batch, heads, sequence length (split over the P ranks), head dim\n"
    "  --causal         causal attention (default: none)\n"
    "  --backward       then the backward (every strategy): dQ, dK, dV checked\n"
    "  --docs N,N,...   a document mask (ring, zigzag): documents of these lengths, summing to\n"
    "                   -L; a query sees keys of its own document only\n"
    "  --window W       a sliding window (ring, zigzag; causal; forward and backward): query\n"
    "                   i sees keys i - W < j <= i; ring steps whose keys are all out of every\n"
    "                   window are skipped\n"
    "  --dsa K          DeepSeek sparse attention (example 05's kernels; ring or zigzag layout,\n"
    "                   causal, bf16, -D 64 or 128): the indexer keys all-gathered, each query's\n"
    "                   top-K over the whole sequence, attention over the selection\n"
    "  --index-heads N, --index-dim N   the indexer's heads (16..64) and dimension (64, 128)\n"
    "  --kv fetch|gather  --dsa: the selected K/V rows fetched from their owners (default), or\n"
    "                   every rank's K/V all-gathered\n"
    "  --backend NAME   mpi (any ranks, host staging) or nccl (one GPU per rank); default mpi\n"
    "  --timeout S      seconds a rank waits for a transfer before it names the missing rank\n"
    "                   and ends the job (default 60)\n"
    "  --seed N         the inputs' seed (default 1)\n"
    "  --reps N         run the forward N times; rank 0 prints its wall time per run (default 1)\n"
    "  --fault K:R:S    plant a failure: rank R exits (K = die) or hangs (K = hang) at step S\n"
    "  --plant BUG      a planted bug the checks must catch: no-merge, no-skip, no-window,\n"
    "                   local-index (--dsa: the other ranks' indexer keys not gathered),\n"
    "                   no-fetch (--dsa: the fetched K/V rows dropped)\n"
    "  --quiet          the checks' lines only\n";

static int cp_parse_fault(const char *s, cp_fault *f, char *err, size_t len) {
    char kind[8];
    int n = 0;
    if (sscanf(s, "%7[a-z]:%d:%d%n", kind, &f->rank, &f->step, &n) == 3 && s[n] == '\0' &&
        f->rank >= 0 && f->step >= 0) {
        if (strcmp(kind, "die") == 0)
            f->kind = CP_FAULT_DIE;
        else if (strcmp(kind, "hang") == 0)
            f->kind = CP_FAULT_HANG;
        if (f->kind != CP_FAULT_NONE)
            return 0;
    }
    snprintf(err, len, "error: --fault takes die:RANK:STEP or hang:RANK:STEP (got '%s')", s);
    return ATTN_EXIT_USAGE;
}

/* --plant: a planted bug of the ring (o->s.plant) or of DSA (o->plant_dsa). */
static int cp_parse_plant(const char *v, cp_options *o, char *err, size_t len) {
    if (strcmp(v, "no-merge") == 0)
        o->s.plant = CP_PLANT_NO_MERGE;
    else if (strcmp(v, "no-skip") == 0)
        o->s.plant = CP_PLANT_NO_SKIP;
    else if (strcmp(v, "no-window") == 0)
        o->s.plant = CP_PLANT_NO_WINDOW;
    else if (strcmp(v, "local-index") == 0)
        o->plant_dsa = CP_DSA_PLANT_LOCAL_INDEX;
    else if (strcmp(v, "no-fetch") == 0)
        o->plant_dsa = CP_DSA_PLANT_NO_FETCH;
    else {
        snprintf(err, len,
                 "error: --plant takes no-merge, no-skip, no-window, local-index or "
                 "no-fetch (got '%s')",
                 v);
        return ATTN_EXIT_USAGE;
    }
    return 0;
}

/* The problem's sizes until the flags are read. */
typedef struct cp_dims {
    int B, H, L, D;
    bool causal;
} cp_dims;

/* One flag that takes a value (a, v); 0, or ATTN_EXIT_USAGE with one line in err. */
static int cp_parse_value(const char *a, const char *v, int P, cp_options *o, cp_dims *d, char *err,
                          size_t len) {
    if (strcmp(a, "--ranks") == 0) {
        int n = 0, rc = attn_cli_parse_int(a, v, 1, &n, err, len);
        if (rc == 0 && n != P) {
            snprintf(err, len, "error: --ranks %d under mpirun -np %d (give one of them)", n, P);
            return ATTN_EXIT_USAGE;
        }
        return rc;
    }
    struct {
        const char *flag;
        int *value, min;
    } ints[] = {{"-B", &d->B, 1},
                {"-H", &d->H, 1},
                {"-L", &d->L, 1},
                {"-D", &d->D, 1},
                {"--dsa", &o->dsa, 1},
                {"--index-heads", &o->index_heads, 1},
                {"--index-dim", &o->index_dim, 1},
                {"--window", &o->window, 1},
                {"--reps", &o->reps, 1},
                {"--seed", &o->seed, 0}};
    for (size_t n = 0; n < sizeof ints / sizeof ints[0]; ++n)
        if (strcmp(a, ints[n].flag) == 0)
            return attn_cli_parse_int(a, v, ints[n].min, ints[n].value, err, len);
    if (strcmp(a, "--kv") == 0) {
        if (strcmp(v, "fetch") != 0 && strcmp(v, "gather") != 0) {
            snprintf(err, len, "error: --kv takes fetch or gather (got '%s')", v);
            return ATTN_EXIT_USAGE;
        }
        o->gather_kv = strcmp(v, "gather") == 0;
        return 0;
    }
    if (strcmp(a, "--timeout") == 0)
        return attn_cli_parse_real(a, v, &o->timeout_s, err, len);
    if (strcmp(a, "--backend") == 0) { /* said here, before the device: alike on every build */
        o->backend = v;
        if (strcmp(v, "mpi") == 0 || strcmp(v, "nccl") == 0)
            return 0;
        snprintf(err, len, "error: unknown backend '%s' (mpi or nccl)", v);
        return ATTN_EXIT_USAGE;
    }
    if (strcmp(a, "--plant") == 0)
        return cp_parse_plant(v, o, err, len);
    if (strcmp(a, "--docs") == 0)
        return attn_cli_parse_counts(a, v, o->doc_len, CP_MAX_DOCS, &o->docs, err, len);
    if (strcmp(a, "--fault") == 0)
        return cp_parse_fault(v, &o->s.fault, err, len);
    if (strcmp(a, "--strategy") == 0) {
        if (cp_strategy_parse(v, &o->s.strategy) != 0) {
            snprintf(err, len, "error: --strategy takes ring, zigzag or ulysses (got '%s')", v);
            return ATTN_EXIT_USAGE;
        }
        return 0;
    }
    snprintf(err, len, "error: unknown flag '%s' (--help lists them)", a);
    return ATTN_EXIT_USAGE;
}

/* --dsa's problem: example 05's kernels must support it, without a window, documents, Ulysses or
 * the backward. */
static int cp_check_dsa(cp_options *o, int L, char *err, size_t len) {
    const char *bad = o->s.strategy == CP_ULYSSES ? "--dsa runs on the ring's or the zigzag's "
                                                    "layout: --strategy ring or zigzag"
                      : o->window || o->docs      ? "--dsa takes no --window or --docs (its "
                                                    "selection is its mask)"
                      : o->backward               ? "--dsa has no backward here (the forward only)"
                                                  : NULL;
    attn_problem dp = o->s.p;
    dp.dtype = ATTN_BF16;
    if (!bad && o->dsa > L) {
        snprintf(err, len, "error: --dsa %d selects more keys than the sequence has (-L %d)",
                 o->dsa, L);
        return ATTN_EXIT_USAGE;
    }
    if (!bad)
        bad = ds_unsupported(&dp, o->index_heads, o->index_dim, o->dsa);
    if (bad) {
        snprintf(err, len, "error: %s", bad);
        return ATTN_EXIT_USAGE;
    }
    o->s.p.causal = true; /* DeepSeek's indexer and selection are causal */
    return 0;
}

/* What the flags ask, checked together: the ranks, the documents, the window, DSA; then the
 * kernels each ring step runs (example 03's forward, 07's backward) must support the problem. */
static int cp_check_options(int P, cp_options *o, const cp_dims *d, char *err, size_t len) {
    if (P > d->L) {
        snprintf(err, len, "error: %d ranks need at least %d positions to share (got -L %d)", P, P,
                 d->L);
        return ATTN_EXIT_USAGE;
    }
    long long doc_sum = 0;
    for (int n = 0; n < o->docs; ++n)
        doc_sum += o->doc_len[n];
    if (o->docs && doc_sum != d->L) {
        snprintf(err, len, "error: --docs lengths sum to %lld, not -L %d", doc_sum, d->L);
        return ATTN_EXIT_USAGE;
    }
    if ((o->docs || o->window) && o->s.strategy == CP_ULYSSES) {
        snprintf(err, len, "error: %s runs through the ring: --strategy ring or zigzag",
                 o->docs ? "--docs" : "--window");
        return ATTN_EXIT_USAGE;
    }
    cp_set_documents(o->doc_len, o->docs);
    cp_set_window(o->window);
    attn_problem_init(&o->s.p, d->B, d->H, d->L, d->L, d->D);
    o->s.p.causal = d->causal || o->window > 0; /* a sliding window is causal */
    if (o->dsa)
        return cp_check_dsa(o, d->L, err, len); /* example 05's kernels, not 03's and 07's */
    o->s.fwd = attn_example_find(&flash2_fwd_example, 1);
    o->s.bwd = attn_example_find(&flash_bwd_example, 2);
    char why[256];
    if (attn_kernel_supports(o->s.fwd, &o->s.p, !attn_on_simulator(), why, sizeof why) != 0 ||
        (o->backward &&
         attn_kernel_supports(o->s.bwd, &o->s.p, !attn_on_simulator(), why, sizeof why) != 0)) {
        snprintf(err, len, "error: %s", why);
        return ATTN_EXIT_USAGE;
    }
    return 0;
}

/* The flags; 0, or ATTN_EXIT_USAGE with one line in err (-1 and "help" for --help). Every rank
 * parses the same argv. */
int cp_parse(int argc, char **argv, int P, cp_options *o, char *err, size_t len) {
    cp_dims d = {.B = 1, .H = 2, .L = 64, .D = 32};
    memset(o, 0, sizeof *o);
    o->index_heads = 16;
    o->index_dim = 64;
    o->backend = "mpi";
    o->timeout_s = 60.0;
    o->seed = 1;
    o->reps = 1;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool *on = strcmp(a, "--causal") == 0     ? &d.causal
                   : strcmp(a, "--backward") == 0 ? &o->backward
                   : strcmp(a, "--quiet") == 0    ? &o->quiet
                                                  : NULL; /* the switches: no value */
        if (on != NULL) {
            *on = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            snprintf(err, len, "help");
            return -1;
        }
        if (!v) {
            snprintf(err, len, "error: unknown flag or missing value: '%s' (--help lists them)", a);
            return ATTN_EXIT_USAGE;
        }
        ++i;
        const int rc = cp_parse_value(a, v, P, o, &d, err, len);
        if (rc)
            return rc;
    }
    return cp_check_options(P, o, &d, err, len);
}
