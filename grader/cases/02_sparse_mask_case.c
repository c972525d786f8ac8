/* 02_sparse_mask_case.c — Exercise 02's case program: one test case of a sparse_mask.cu
 * submission (grader/README.md, "Case programs"; the spec: exercises/02_sparse_mask/README.md).
 *   grader_02_sparse_mask_sim --case correct_causal --seed 3 -B 1 -H 2 -L 100 -D 32 --causal
 *
 * The case NAME picks the check by its prefix (grading.json names the cases):
 *   correct*, shuffled*, hidden*
 *                    the kernel, on the exact block mask of YOUR pattern, against the reference
 *                    with your pattern as the mask, and against the solution kernel run on the
 *                    same block mask (rows where its pattern gives the same keys as yours)
 *   blocks_skipped*  the kernel follows the block mask it is handed: (a) your mask with one listed
 *                    tile removed per query block (the last in even batch slices, the first in
 *                    odd ones: the slices differ), (b) the solution's block mask; expected: the
 *                    reference over exactly the listed tiles (full: every entry, partial: yours)
 *   performance      (--perf, GPU only) your kernel against the solution kernel, same block mask
 *   mask_valid       your builder's block masks are valid (attn_block_mask_validate) and exact
 *                    (the lists of attn_block_mask_from_mask) over 19 shapes: tails, Lq != Lk,
 *                    L = 1, B = 2, tiles from 1x1 to 300x300 (16x64, 48x80, 100x7, ...)
 *   mask_tight       your builder lists no empty tile and calls full tiles full (L = 4096)
 *   diagonal         every query sees its diagonal key j = i + Lk - Lq
 *   density          at L = 4096, causal: token density <= 10 %, 32x32 tile density <= 40 %
 *   reach            causal: every earlier key within two hops (i -> t -> j) at L = 100, 1000,
 *                    4096, 5000 and Lq = 1500 > Lk = 1000
 * A kernel case whose output matches the reference with every listed tile computed whole says
 * that a partial tile was treated as full. The submission's functions run in its own program
 * (02_sparse_mask_runner.c) and are reached through the channel (grader_remote.c).
 * Shape flags apply to the kernel cases; the pattern cases use the spec's sizes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "attn/reference.h"
#include "attn/sparse/block_mask.h"
#include "attn/tensor.h"
#include "grader_case.h"
#include "sparse_mask.h"

/* The submission's pattern and builder: in the grader they run in the submission's own program
 * (02_sparse_mask_runner.c) and are reached through the channel (grader_remote.c); in the
 * exercise's own check program (sparse_mask_check) they are called in process
 * (02_sparse_mask_local.c). */
#define sub_keep grader_remote_keep
#define sub_build grader_remote_build

/* The solution, compiled with every exported symbol renamed <sym>_solution. */
extern const attn_example sparse_mask_example_solution;
int sparse_mask_keep_solution(int Lq, int Lk, int i, int j);
int sparse_mask_build_block_mask_solution(attn_block_mask *m, const attn_problem *p, int block_q,
                                          int block_k);

/* The use case's budgets (README, "The spec"). */
#define SPEC_L 4096
#define TOKEN_BUDGET 0.10 /* visible entries / causal entries */
#define TILE_BUDGET 0.40  /* listed 32x32 tiles / tiles with a causal entry */
#define TIGHT_EMPTY 0.01  /* mask_tight: listed empty tiles, share of the exact mask's tiles */
#define TIGHT_FULL 0.90   /* mask_tight: share of the exact full tiles listed full */

typedef int (*keep_fn)(int Lq, int Lk, int i, int j);

/* ---- masks for the reference ---------------------------------------------------------------- */

/* A pattern as an attn_mask predicate. */
typedef struct pattern_ctx {
    keep_fn keep;
    int Lq, Lk;
} pattern_ctx;

static int pattern_keep(const void *ctx, int b, int h, int i, int j) {
    (void)b;
    (void)h;
    const pattern_ctx *c = ctx;
    return c->keep(c->Lq, c->Lk, i, j) != 0;
}

static attn_mask pattern_mask(pattern_ctx *ctx, keep_fn keep, const attn_problem *p) {
    ctx->keep = keep;
    ctx->Lq = p->Lq;
    ctx->Lk = p->Lk;
    attn_mask m = {ATTN_MASK_PREDICATE, pattern_keep, ctx, NULL, NULL};
    return m;
}

/* What a kernel computes from a block mask and a pattern: every entry of a listed full tile, the
 * pattern's entries of a listed partial tile, nothing elsewhere (causality on top). */
typedef struct listed_ctx {
    const attn_block_mask *m;
    uint8_t *state; /* [batches][NQ][NK]: 0 skipped, 1 partial, 2 full */
    pattern_ctx pattern;
    bool partial_as_full; /* a wrong kernel's view: every listed tile computed whole */
} listed_ctx;

static int listed_keep(const void *ctx, int b, int h, int i, int j) {
    const listed_ctx *c = ctx;
    const attn_block_mask *m = c->m;
    size_t tile = ((size_t)b * m->num_q_blocks + i / m->block_q) * m->num_k_blocks + j / m->block_k;
    return c->state[tile] == 2 ||
           (c->state[tile] == 1 && (c->partial_as_full || pattern_keep(&c->pattern, b, h, i, j)));
}

/* Fills ctx for block mask m (host arrays) and pattern keep; 0, or -1 without memory. */
static int listed_mask(listed_ctx *ctx, attn_mask *out, const attn_block_mask *m, keep_fn keep,
                       const attn_problem *p) {
    size_t rows = (size_t)m->batches * m->num_q_blocks;
    ctx->m = m;
    ctx->state = calloc(rows * m->num_k_blocks, 1);
    if (ctx->state == NULL)
        return -1;
    for (size_t r = 0; r < rows; ++r) {
        for (int t = 0; t < m->kv_num_blocks[r]; ++t)
            ctx->state[r * m->num_k_blocks + m->kv_indices[r * m->num_k_blocks + t]] = 1;
        for (int t = 0; t < m->full_kv_num_blocks[r]; ++t)
            ctx->state[r * m->num_k_blocks + m->full_kv_indices[r * m->num_k_blocks + t]] = 2;
    }
    *out = pattern_mask(&ctx->pattern, keep, p);
    out->keep = listed_keep;
    out->ctx = ctx;
    return 0;
}

/* ---- the solution kernel, compared where it is comparable ---------------------------------- */

/* The solution's kernel applies the solution's pattern inside partial tiles, yours applies yours:
 * on the same block mask their outputs agree on the rows whose visible keys are the same under
 * both. The wrapper runs the solution kernel on the block mask the submission gets, then marks
 * the other rows of O NaN, which attn_check_output reads as "not compared" (the LSE is compared
 * with the reference only, so it stays). Only its first launch (the checked one) is marked: later
 * launches are timing runs. */
static struct {
    const attn_mask *sub, *sol; /* what each kernel computes on this block mask */
    int64_t rows_compared, rows;
    int launches;
} wrap;
static attn_kernel wrap_kernel;
static attn_example wrap_example;

static void nan_rows_not_comparable(const attn_problem *p, const attn_buffers *buf) {
    size_t bytes = attn_problem_q_elems(p) * sizeof(float);
    float *o = malloc(bytes);
    if (o == NULL || cudaDeviceSynchronize() != cudaSuccess || attn_to_host(o, buf->o, bytes)) {
        free(o);
        return;
    }
    wrap.rows = wrap.rows_compared = 0;
    for (int b = 0; b < p->B; ++b) {
        for (int i = 0; i < p->Lq; ++i) {
            bool same = true;
            for (int j = 0; j < p->Lk && same; ++j)
                same = attn_entry_visible(p, wrap.sub, b, 0, i, j) ==
                       attn_entry_visible(p, wrap.sol, b, 0, i, j);
            wrap.rows += p->H;
            wrap.rows_compared += same ? p->H : 0;
            for (int h = 0; h < p->H && !same; ++h)
                attn_fill_nan_host(o + attn_problem_row_offset(p, true, b, h, i),
                                   (size_t)p->D * sizeof(float));
        }
    }
    attn_to_device(buf->o, o, bytes);
    free(o);
}

static void launch_solution_comparable(const attn_problem *p, const attn_buffers *buf,
                                       cudaStream_t stream) {
    sparse_mask_example_solution.kernels[0].launch(p, buf, stream);
    if (wrap.launches++ == 0)
        nan_rows_not_comparable(p, buf);
}

static const attn_example *comparable_solution(const attn_mask *sub, const attn_mask *sol) {
    wrap.sub = sub;
    wrap.sol = sol;
    wrap.launches = 0;
    wrap_kernel = sparse_mask_example_solution.kernels[0];
    wrap_kernel.launch = launch_solution_comparable;
    wrap_example = sparse_mask_example_solution;
    wrap_example.kernels = &wrap_kernel;
    return &wrap_example;
}

/* ---- kernel cases --------------------------------------------------------------------------- */

static int keep_not_implemented(grader_result *r) {
    if (sub_keep(1, 1, 0, 0) != SPARSE_MASK_NOT_IMPLEMENTED)
        return 0;
    snprintf(r->message, sizeof r->message,
             "sparse_mask_keep: TODO not implemented (README step 1)");
    return 1;
}

/* The exact block mask of a pattern for p, in the kernel's tiles, on the host and the device. */
typedef struct mask_pair {
    attn_block_mask host, dev;
} mask_pair;

static int exact_mask(mask_pair *mp, const attn_problem *p, const attn_mask *mask) {
    memset(mp, 0, sizeof *mp);
    return attn_block_mask_from_mask(&mp->host, p, mask, SPARSE_MASK_BLOCK_Q, SPARSE_MASK_BLOCK_K);
}

static void mask_pair_free(mask_pair *mp) {
    attn_block_mask_free(&mp->host);
    attn_block_mask_free_device(&mp->dev);
}

static int run_on_mask_checked(const grader_case *c, mask_pair *mp, const attn_mask *expect,
                               const attn_mask *sol_expect, grader_result *r) {
    attn_device_info info;
    char why[256];
    if (attn_device_init(&info, why, sizeof why) != 0) { /* a gpu build without a GPU */
        snprintf(r->message, sizeof r->message, "not run: %s", why);
        return ATTN_EXIT_NO_GPU;
    }
    if (attn_block_mask_to_device(&mp->host, &mp->dev) != 0) {
        snprintf(r->message, sizeof r->message, "grader error: device copy of the block mask");
        return ATTN_EXIT_USAGE;
    }
    int status =
        grader_run_case(c, grader_remote_example(), comparable_solution(expect, sol_expect), expect,
                        &mp->dev, &mp->host, r);
    if (status == 0 && !c->perf) {
        size_t n = strlen(r->message);
        snprintf(r->message + n, sizeof r->message - n,
                 "; solution kernel compared on %lld of %lld rows (same keys as yours)",
                 (long long)wrap.rows_compared, (long long)wrap.rows);
    }
    return status;
}

/* Runs the submission and the (comparable) solution on block mask mp->host; expected: `expect`
 * for the submission, `sol_expect` for the solution. A wrong output that matches the reference
 * with every listed tile computed whole gets a message saying a partial tile was treated as
 * full. */
static int run_on_mask(const grader_case *c, mask_pair *mp, const attn_mask *expect,
                       const attn_mask *sol_expect, grader_result *r) {
    listed_ctx whole_ctx = {0};
    attn_mask whole;
    grader_hint hint = {&whole, "a partial tile was computed as full (every entry of a listed "
                                "partial tile counted, keep not applied inside it)"};
    if (listed_mask(&whole_ctx, &whole, &mp->host, sub_keep, &c->p) == 0) {
        whole_ctx.partial_as_full = true;
        grader_set_hints(&hint, 1);
    }
    int status = run_on_mask_checked(c, mp, expect, sol_expect, r);
    grader_set_hints(NULL, 0);
    free(whole_ctx.state);
    return status;
}

static int case_correct(const grader_case *c, grader_result *r) {
    if (keep_not_implemented(r))
        return 1;
    const attn_problem *p = &c->p;
    pattern_ctx sub_ctx;
    attn_mask sub = pattern_mask(&sub_ctx, sub_keep, p);
    mask_pair mp;
    listed_ctx sol_listed = {0};
    attn_mask sol;
    int status = ATTN_EXIT_USAGE;
    if (exact_mask(&mp, p, &sub) == 0 &&
        listed_mask(&sol_listed, &sol, &mp.host, sparse_mask_keep_solution, p) == 0)
        status = run_on_mask(c, &mp, &sub, &sol, r);
    free(sol_listed.state);
    mask_pair_free(&mp);
    return status;
}

/* Removes entry t of a list of n (ascending) tiles. */
static void list_remove(int32_t *list, int32_t *n, int t) {
    memmove(list + t, list + t + 1, (size_t)(*n - t - 1) * sizeof(int32_t));
    (*n)--;
}

/* Removes one listed tile (full or partial) of every query block that lists one: the highest in
 * even batch slices, the lowest in odd ones, so that the slices differ (a kernel must read the
 * lists of its own slice). */
static void drop_one_tile(attn_block_mask *m) {
    for (size_t r = 0; r < (size_t)m->batches * m->num_q_blocks; ++r) {
        int32_t *nf = &m->full_kv_num_blocks[r], *np = &m->kv_num_blocks[r];
        int32_t *f = m->full_kv_indices + r * m->num_k_blocks,
                *pl = m->kv_indices + r * m->num_k_blocks;
        if (*nf + *np == 0)
            continue;
        if ((r / (size_t)m->num_q_blocks) % 2 == 0) { /* the highest */
            int last_f = *nf > 0 ? f[*nf - 1] : -1, last_p = *np > 0 ? pl[*np - 1] : -1;
            if (last_f > last_p)
                list_remove(f, nf, *nf - 1);
            else
                list_remove(pl, np, *np - 1);
        } else { /* the lowest */
            int first_f = *nf > 0 ? f[0] : INT32_MAX, first_p = *np > 0 ? pl[0] : INT32_MAX;
            if (first_f < first_p)
                list_remove(f, nf, 0);
            else
                list_remove(pl, np, 0);
        }
    }
}

static int case_blocks_skipped(const grader_case *c, grader_result *r) {
    if (keep_not_implemented(r))
        return 1;
    const attn_problem *p = &c->p;
    pattern_ctx sub_ctx, sol_ctx;
    attn_mask sub = pattern_mask(&sub_ctx, sub_keep, p);
    attn_mask sol = pattern_mask(&sol_ctx, sparse_mask_keep_solution, p);
    static const char *what[2] = {"your block mask minus one tile per query block (the last in "
                                  "even batch slices, the first in odd ones)",
                                  "the solution's block mask"};
    int status = 0;
    for (int part = 0; part < 2 && status == 0; ++part) {
        mask_pair mp;
        listed_ctx sub_listed = {0}, sol_listed = {0};
        attn_mask sub_expect, sol_expect;
        status = ATTN_EXIT_USAGE;
        if (exact_mask(&mp, p, part == 0 ? &sub : &sol) == 0) {
            if (part == 0)
                drop_one_tile(&mp.host);
            if (listed_mask(&sub_listed, &sub_expect, &mp.host, sub_keep, p) == 0 &&
                listed_mask(&sol_listed, &sol_expect, &mp.host, sparse_mask_keep_solution, p) == 0)
                status = run_on_mask(c, &mp, &sub_expect, &sol_expect, r);
        }
        free(sub_listed.state);
        free(sol_listed.state);
        mask_pair_free(&mp);
        if (status == 1) {
            char m[sizeof r->message];
            snprintf(m, sizeof m, "%s", r->message);
            snprintf(r->message, sizeof r->message, "on %s: %.560s", what[part], m);
        }
    }
    if (status == 0)
        snprintf(r->message, sizeof r->message,
                 "the kernel visits exactly the listed tiles (%s; %s)", what[0], what[1]);
    return status;
}

/* ---- pattern cases -------------------------------------------------------------------------- */

static void set_outcome(grader_result *r, bool passed, double fraction) {
    r->passed = passed;
    r->fraction = fraction;
}

static int case_diagonal(grader_result *r) {
    static const int shapes[][2] = {{1, 1},           {17, 17},  {100, 100}, {1024, 1024},
                                    {SPEC_L, SPEC_L}, {64, 129}, {129, 64},  {1, 300}};
    int n = (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < n; ++s) {
        int Lq = shapes[s][0], Lk = shapes[s][1];
        for (int i = 0; i < Lq; ++i) {
            int j = i + Lk - Lq;
            if (j >= 0 && j < Lk && sub_keep(Lq, Lk, i, j) != 1) {
                snprintf(r->message, sizeof r->message,
                         "Lq=%d, Lk=%d: query %d does not keep its diagonal key %d (keep = %d)", Lq,
                         Lk, i, j, sub_keep(Lq, Lk, i, j));
                return 1;
            }
        }
    }
    set_outcome(r, true, 1.0);
    snprintf(r->message, sizeof r->message, "every query keeps its diagonal key (%d shapes)", n);
    return 0;
}

static attn_problem spec_problem(int B, int Lq, int Lk, bool causal) {
    attn_problem p;
    attn_problem_init(&p, B, 1, Lq, Lk, 64);
    p.causal = causal;
    return p;
}

static int case_density(grader_result *r) {
    attn_problem p = spec_problem(1, SPEC_L, SPEC_L, true);
    pattern_ctx ctx;
    attn_mask sub = pattern_mask(&ctx, sub_keep, &p);
    double visible = 0.0;
    for (int i = 0; i < SPEC_L; ++i)
        for (int j = 0; j <= i; ++j)
            visible += sub_keep(SPEC_L, SPEC_L, i, j) != 0;
    double tokens = visible / attn_problem_entries(&p);
    attn_block_mask mine, causal;
    if (attn_block_mask_from_mask(&mine, &p, &sub, SPARSE_MASK_BLOCK_Q, SPARSE_MASK_BLOCK_K) ||
        attn_block_mask_from_mask(&causal, &p, NULL, SPARSE_MASK_BLOCK_Q, SPARSE_MASK_BLOCK_K)) {
        snprintf(r->message, sizeof r->message, "grader error: out of memory");
        return ATTN_EXIT_USAGE;
    }
    attn_block_mask_stats a = attn_block_mask_stats_of(&mine),
                          b = attn_block_mask_stats_of(&causal);
    double tiles =
        (double)(a.full_blocks + a.partial_blocks) / (double)(b.full_blocks + b.partial_blocks);
    attn_block_mask_free(&mine);
    attn_block_mask_free(&causal);
    bool ok = tokens <= TOKEN_BUDGET && tiles <= TILE_BUDGET;
    set_outcome(r, ok, ok ? 1.0 : 0.0);
    snprintf(r->message, sizeof r->message,
             "L=%d causal: token density %.2f%% (budget %.0f%%), %dx%d tile density %.2f%% "
             "(budget %.0f%%)%s",
             SPEC_L, 100.0 * tokens, 100.0 * TOKEN_BUDGET, SPARSE_MASK_BLOCK_Q, SPARSE_MASK_BLOCK_K,
             100.0 * tiles, 100.0 * TILE_BUDGET, ok ? "" : ": over budget");
    return ok ? 0 : 1;
}

/* Two hops, causal, Lq x Lk: row u's visible keys as a bitset; query i (at key position
 * i' = i + Lk - Lq) reaches key j <= i' if V(i, j), or V(i, t) and V(u, j) for the query u at key
 * position t (u = t - Lk + Lq, when there is one). 0 (holds), 1 (with a message), -1 (memory). */
static int reach_at(int Lq, int Lk, grader_result *r) {
    const int words = (Lk + 63) / 64, shift = Lk - Lq;
    uint64_t *rows = calloc((size_t)Lq * words, sizeof(uint64_t));
    uint64_t *reach = malloc((size_t)words * sizeof(uint64_t));
    if (rows == NULL || reach == NULL) {
        free(rows);
        free(reach);
        return -1;
    }
    for (int i = 0; i < Lq; ++i)
        for (int j = 0; j <= i + shift && j < Lk; ++j)
            if (sub_keep(Lq, Lk, i, j) != 0)
                rows[(size_t)i * words + j / 64] |= 1ull << (j % 64);
    int bad_i = -1, bad_j = -1;
    for (int i = 0; i < Lq && bad_i < 0; ++i) {
        const uint64_t *row = rows + (size_t)i * words;
        memcpy(reach, row, (size_t)words * sizeof(uint64_t));
        for (int t = 0; t <= i + shift && t < Lk; ++t) {
            int u = t - shift;
            if (u >= 0 && u < Lq && (row[t / 64] >> (t % 64) & 1))
                for (int w = 0; w <= t / 64; ++w)
                    reach[w] |= rows[(size_t)u * words + w];
        }
        for (int j = 0; j <= i + shift && j < Lk && bad_i < 0; ++j)
            if (!(reach[j / 64] >> (j % 64) & 1)) {
                bad_i = i;
                bad_j = j;
            }
    }
    free(rows);
    free(reach);
    if (bad_i >= 0)
        snprintf(r->message, sizeof r->message,
                 "Lq=%d Lk=%d causal: query %d cannot reach key %d in two hops (no t with "
                 "keep(%d,t) and keep(t,%d))",
                 Lq, Lk, bad_i, bad_j, bad_i, bad_j);
    return bad_i >= 0;
}

/* R2 at the spec's L, at other L (below and above it) and with Lq > Lk. */
static int case_reach(grader_result *r) {
    static const int shapes[][2] = {
        {SPEC_L, SPEC_L}, {100, 100}, {1000, 1000}, {5000, 5000}, {1500, 1000}};
    const int n = (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < n; ++s) {
        int rc = reach_at(shapes[s][0], shapes[s][1], r);
        if (rc < 0) {
            snprintf(r->message, sizeof r->message, "grader error: out of memory");
            return ATTN_EXIT_USAGE;
        }
        if (rc > 0)
            return 1;
    }
    set_outcome(r, true, 1.0);
    snprintf(r->message, sizeof r->message,
             "causal: every query reaches every earlier key in at most two hops (L = 100, 1000, "
             "%d, 5000; Lq=1500 Lk=1000)",
             SPEC_L);
    return 0;
}

/* The learner's builder on p in bq x bk tiles; 0, or 1 with a message. */
static int build_mask(attn_block_mask *m, const attn_problem *p, int bq, int bk, grader_result *r) {
    memset(m, 0, sizeof *m);
    int rc = sub_build(m, p, bq, bk);
    if (rc == 0)
        return 0;
    if (rc == SPARSE_MASK_NOT_IMPLEMENTED)
        snprintf(r->message, sizeof r->message,
                 "sparse_mask_build_block_mask: TODO not implemented (README step 2)");
    else
        snprintf(r->message, sizeof r->message,
                 "sparse_mask_build_block_mask returned %d for B=%d Lq=%d Lk=%d%s, tiles %dx%d", rc,
                 p->B, p->Lq, p->Lk, p->causal ? " causal" : "", bq, bk);
    attn_block_mask_free(m);
    return 1;
}

/* 0 if m lists exactly the tiles of the exact block mask (full as full, partial as partial);
 * else 1 with the first difference in why (-1: no memory). */
static int not_exact(const attn_block_mask *m, const attn_problem *p, const attn_mask *mask,
                     char *why, size_t len) {
    attn_block_mask e;
    if (attn_block_mask_from_mask(&e, p, mask, m->block_q, m->block_k) != 0) {
        snprintf(why, len, "grader error: out of memory");
        return -1;
    }
    int status = 0;
    const size_t rows = (size_t)e.batches * e.num_q_blocks, nk = (size_t)e.num_k_blocks;
    for (size_t r = 0; r < rows && status == 0; ++r) {
        const int32_t *lists[2][2] = {{m->full_kv_indices + r * nk, e.full_kv_indices + r * nk},
                                      {m->kv_indices + r * nk, e.kv_indices + r * nk}};
        const int n[2][2] = {{m->full_kv_num_blocks[r], e.full_kv_num_blocks[r]},
                             {m->kv_num_blocks[r], e.kv_num_blocks[r]}};
        for (int f = 0; f < 2 && status == 0; ++f) {
            if (n[f][0] == n[f][1] &&
                memcmp(lists[f][0], lists[f][1], (size_t)n[f][0] * sizeof(int32_t)) == 0)
                continue;
            snprintf(why, len,
                     "slice %d, query block %d: %d %s tiles listed, the exact mask has %d (a tile "
                     "is full iff every in-range entry is visible, partial iff some are)",
                     (int)(r / (size_t)e.num_q_blocks), (int)(r % (size_t)e.num_q_blocks), n[f][0],
                     f == 0 ? "full" : "partial", n[f][1]);
            status = 1;
        }
    }
    attn_block_mask_free(&e);
    return status;
}

static int case_mask_valid(const grader_case *c, grader_result *r) {
    if (keep_not_implemented(r))
        return 1;
    /* B, Lq, Lk, causal, block_q, block_k */
    static const int shapes[][6] = {
        {1, 1, 1, 1, 32, 32},       {2, 17, 17, 0, 32, 32},         {1, 100, 100, 1, 32, 32},
        {1, 64, 129, 1, 32, 32},    {1, 129, 64, 1, 32, 32},        {1, 300, 1000, 0, 32, 32},
        {2, 1000, 1000, 1, 32, 32}, {1, SPEC_L, SPEC_L, 1, 32, 32}, {1, 1000, 1000, 1, 16, 64},
        {1, 777, 777, 1, 64, 16},   {1, 513, 513, 0, 128, 128},     {1, 500, 500, 1, 48, 80},
        {2, 333, 333, 1, 24, 40},   {1, 250, 700, 1, 80, 48},       {1, 700, 250, 1, 40, 24},
        {1, 450, 200, 0, 100, 7},   {1, 97, 97, 1, 1, 1},           {1, 300, 300, 1, 300, 300},
        {0, 0, 0, 0, 32, 32}};
    const int n = (int)(sizeof shapes / sizeof shapes[0]);
    int ok = 0;
    char first[sizeof r->message] = "";
    for (int s = 0; s < n; ++s) {
        const int *sh = shapes[s];
        attn_problem p = sh[0] ? spec_problem(sh[0], sh[1], sh[2], sh[3]) : c->p; /* last: yours */
        pattern_ctx ctx;
        attn_mask sub = pattern_mask(&ctx, sub_keep, &p);
        attn_block_mask m;
        char why[300];
        if (build_mask(&m, &p, sh[4], sh[5], r) != 0) {
            if (first[0] == '\0')
                snprintf(first, sizeof first, "%s", r->message);
            continue;
        }
        if (attn_block_mask_validate(&m, &p, &sub, why, sizeof why) == 0 &&
            not_exact(&m, &p, &sub, why, sizeof why) == 0)
            ok++;
        else if (first[0] == '\0')
            snprintf(first, sizeof first, "B=%d Lq=%d Lk=%d%s, tiles %dx%d: %s", p.B, p.Lq, p.Lk,
                     p.causal ? " causal" : "", sh[4], sh[5], why);
        attn_block_mask_free(&m);
    }
    set_outcome(r, ok == n, ok == n ? 1.0 : 0.0); /* a correctness case: all or nothing */
    if (ok == n)
        snprintf(r->message, sizeof r->message, "block masks exact on all %d shapes", n);
    else
        snprintf(r->message, sizeof r->message, "%d of %d shapes wrong; first: %s", n - ok, n,
                 first);
    return ok == n ? 0 : 1;
}

static int case_mask_tight(grader_result *r) {
    if (keep_not_implemented(r))
        return 1;
    attn_problem p = spec_problem(1, SPEC_L, SPEC_L, true);
    pattern_ctx ctx;
    attn_mask sub = pattern_mask(&ctx, sub_keep, &p);
    attn_block_mask mine, exact;
    char why[300];
    if (build_mask(&mine, &p, SPARSE_MASK_BLOCK_Q, SPARSE_MASK_BLOCK_K, r) != 0)
        return 1;
    int status = 1;
    if (attn_block_mask_validate(&mine, &p, &sub, why, sizeof why) != 0) {
        snprintf(r->message, sizeof r->message, "L=%d causal: the block mask is not exact (%s)",
                 SPEC_L, why);
    } else if (attn_block_mask_from_mask(&exact, &p, &sub, SPARSE_MASK_BLOCK_Q,
                                         SPARSE_MASK_BLOCK_K) != 0) {
        snprintf(r->message, sizeof r->message, "grader error: out of memory");
        status = ATTN_EXIT_USAGE;
    } else {
        attn_block_mask_stats s = attn_block_mask_stats_of(&mine),
                              e = attn_block_mask_stats_of(&exact);
        int64_t empty = attn_block_mask_count_empty(&mine, &p, &sub);
        int64_t listed = e.full_blocks + e.partial_blocks;
        bool ok = empty <= TIGHT_EMPTY * listed && s.full_blocks >= TIGHT_FULL * e.full_blocks;
        set_outcome(r, ok, ok ? 1.0 : 0.0);
        snprintf(r->message, sizeof r->message,
                 "L=%d causal: %lld listed tiles have no visible entry (allowed %.0f), %lld of "
                 "%lld full tiles listed full (needed %.0f)",
                 SPEC_L, (long long)empty, TIGHT_EMPTY * listed, (long long)s.full_blocks,
                 (long long)e.full_blocks, TIGHT_FULL * e.full_blocks);
        status = ok ? 0 : 1;
        attn_block_mask_free(&exact);
    }
    attn_block_mask_free(&mine);
    return status;
}

static bool starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int check(const grader_case *c, grader_result *r) {
    if (c->perf || starts_with(c->name, "correct") || starts_with(c->name, "shuffled") ||
        starts_with(c->name, "hidden") || starts_with(c->name, "performance"))
        return case_correct(c, r);
    if (starts_with(c->name, "blocks_skipped"))
        return case_blocks_skipped(c, r);
    if (starts_with(c->name, "mask_valid"))
        return case_mask_valid(c, r);
    if (starts_with(c->name, "mask_tight"))
        return case_mask_tight(r);
    if (starts_with(c->name, "diagonal"))
        return keep_not_implemented(r) ? 1 : case_diagonal(r);
    if (starts_with(c->name, "density"))
        return keep_not_implemented(r) ? 1 : case_density(r);
    if (starts_with(c->name, "reach"))
        return keep_not_implemented(r) ? 1 : case_reach(r);
    snprintf(r->message, sizeof r->message,
             "grader error: unknown case '%s' (names start with correct, shuffled, hidden, "
             "blocks_skipped, performance, mask_valid, mask_tight, diagonal, density, reach)",
             c->name);
    fprintf(stderr, "error: %s\n", r->message);
    return ATTN_EXIT_USAGE;
}

int main(int argc, char **argv) {
    return grader_case_main(argc, argv, &sparse_mask_example_solution, check);
}
