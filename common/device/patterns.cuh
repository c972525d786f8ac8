/* device/patterns.cuh — the token-level sparse attention patterns as plain data and one inline
 * predicate, the same code on the host (C11: the builders of attn/sparse/patterns.h, the CPU
 * reference) and inside kernels (CUDA C++, GPU or simulator). Definitions and their papers:
 * examples/04_sparse_patterns/README.md, "The patterns"; the parser, the block mask and CSR
 * builders are in attn/sparse/patterns.h.
 *
 * Positions. Query i of a sequence with Lq queries and Lk keys is compared with the keys at its
 * *aligned* position a = i + (Lk - Lq): the bottom-right alignment the chapter uses for causality
 * (common/README.md, "Conventions"), so that with Lq = 1 (decoding) a window covers the last keys.
 * For Lq = Lk, a = i. With delta = j - a (how far key j lies after the query):
 *
 *   window        w     |delta| <= w                                   Longformer, 2w+1 keys
 *   causal_window w=W   -W < delta <= 0                                Mistral 7B
 *   dilated       w, d  delta = d*m, m in [-w, w]                      Longformer (dilated)
 *   strided       l     delta <= 0 and (delta > -l or delta mod l = 0) Sparse Transformer
 *   fixed         l, c  floor(j/l) = floor(a/l) or j mod l >= l - c    Sparse Transformer
 *   global        g     a in G or j in G (rows and columns of G dense) Longformer, BigBird
 *   bigbird       b, r, block size b, NB = ceil(Lk/b), I = floor(a/b), J = floor(j/b):
 *                 seed  |I - J| <= 1, or I or J in {0, NB-1}, or J in rand(I)   BigBird (ITC)
 *
 * An example may define kinds of its own in its own folder (example 06's ladder): kind numbers
 * ATTN_PATTERN_KINDS and up, parameters in part.x[], the rule in the example (its host
 * definition registered with attn/sparse/patterns.h, the same definition handed to its kernels
 * as the Own type of attn_pattern_keep_with below).
 *
 * A pattern is the union of up to ATTN_PATTERN_MAX_PARTS parts ("window:w=64+global:g=0").
 * Causality is not part of a pattern: the problem's causal flag is applied on top (an entry is
 * computed iff the pattern keeps it and, when causal, j <= a).
 *
 * BigBird's random blocks are a function of (seed, I, NB) only, so every user of the pattern (C
 * builders, kernels, sparse_patterns.py) draws the same ones without a table: r distinct blocks,
 * uniform without replacement (Floyd's algorithm) among the blocks of [0, NB) that are not already
 * kept (I-1, I, I+1, 0, NB-1), from the counter-based generator attn_pattern_hash.
 */
#ifndef ATTN_PATTERNS_CUH
#define ATTN_PATTERNS_CUH

#include <stdint.h>

#if defined(__CUDACC__) || defined(ATTN_BACKEND_SIM) && defined(__cplusplus)
#define ATTN_HD __host__ __device__ __forceinline__
#else
#define ATTN_HD static inline
#endif

#define ATTN_PATTERN_MAX_PARTS 4   /* parts joined by '+' */
#define ATTN_PATTERN_MAX_RANGES 8  /* global: ranges of token positions */
#define ATTN_PATTERN_MAX_RANDOM 16 /* bigbird: random blocks per query block */

typedef enum attn_pattern_kind {
    ATTN_PATTERN_WINDOW = 0,
    ATTN_PATTERN_CAUSAL_WINDOW = 1,
    ATTN_PATTERN_DILATED = 2,
    ATTN_PATTERN_STRIDED = 3,
    ATTN_PATTERN_FIXED = 4,
    ATTN_PATTERN_GLOBAL = 5,
    ATTN_PATTERN_BIGBIRD = 6,
    ATTN_PATTERN_KINDS = 7 /* the chapter's kinds; an example's own are numbered from here */
} attn_pattern_kind;

#define ATTN_PATTERN_MAX_OWN 4    /* kinds an example may define (ATTN_PATTERN_KINDS + 0..3) */
#define ATTN_PATTERN_MAX_PARAMS 4 /* parameters of such a kind (attn_pattern_part.x) */

#define ATTN_PATTERN_BIT(kind) (1u << (unsigned)(kind))

/* One part. Only the fields of its kind are used; plain data, passed to kernels by value. */
typedef struct attn_pattern_part {
    int kind;      /* attn_pattern_kind */
    int w;         /* window, causal_window (W), dilated: width */
    int d;         /* dilated: dilation */
    int l, c;      /* strided, fixed: stride l; fixed: summary columns c */
    int b, r;      /* bigbird: block size, random blocks per query block */
    uint64_t seed; /* bigbird */
    int n_ranges;  /* global: G = union of [lo[k], hi[k]) */
    int lo[ATTN_PATTERN_MAX_RANGES];
    int hi[ATTN_PATTERN_MAX_RANGES];
    int x[ATTN_PATTERN_MAX_PARAMS]; /* an example's own kind: its parameters, in its order */
} attn_pattern_part;

typedef struct attn_pattern {
    int n_parts; /* 0: no pattern (dense) */
    attn_pattern_part part[ATTN_PATTERN_MAX_PARTS];
} attn_pattern;

/* floor(x / y) for y > 0 and any sign of x (C's / truncates towards zero). */
ATTN_HD int attn_floor_div(int x, int y) { return x >= 0 ? x / y : -((-x + y - 1) / y); }

/* SplitMix64's finaliser: the counter-based generator of BigBird's random blocks. */
ATTN_HD uint64_t attn_pattern_hash(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* The random key blocks of query block I among NB key blocks: writes them to out (at most
 * ATTN_PATTERN_MAX_RANDOM, in no particular order) and returns how many: min(r, the blocks not
 * already kept). */
ATTN_HD int attn_bigbird_random(const attn_pattern_part *pt, int I, int NB, int *out) {
    int ex[5], n_ex = 0; /* kept anyway, ascending and distinct, inside [0, NB) */
    int cand[5] = {0, I - 1, I, I + 1, NB - 1};
    for (int c = 0; c < 5; ++c) { /* insertion into the sorted set */
        int v = cand[c], at = n_ex, dup = 0;
        if (v < 0 || v >= NB)
            continue;
        for (int e = 0; e < n_ex; ++e)
            dup |= ex[e] == v;
        if (dup)
            continue;
        while (at > 0 && ex[at - 1] > v) {
            ex[at] = ex[at - 1];
            --at;
        }
        ex[at] = v;
        ++n_ex;
    }
    int avail = NB - n_ex, r = pt->r < avail ? pt->r : avail, n = 0;
    uint64_t row = attn_pattern_hash(pt->seed ^ (uint64_t)(uint32_t)I);
    /* Floyd: for k = avail - r .. avail - 1 draw t in [0, k]; take t, or k if t is taken. */
    for (int k = avail - r; k < avail; ++k) {
        int t = (int)(attn_pattern_hash(row ^ (uint64_t)k) % (uint64_t)(k + 1)), taken = 0;
        for (int e = 0; e < n; ++e)
            taken |= out[e] == t;
        out[n++] = taken ? k : t;
    }
    for (int e = 0; e < n; ++e) /* ordinal among the available blocks -> block index */
        for (int x = 0; x < n_ex && ex[x] <= out[e]; ++x)
            ++out[e];
    return n;
}

/* BigBird's rule on blocks: query block I keeps key block J of NB (the kernels through
 * attn_pattern_keep, the block mask builder on whole tiles). */
ATTN_HD int attn_bigbird_block_keep(const attn_pattern_part *pt, int I, int J, int NB) {
    if ((I - J <= 1 && J - I <= 1) || I == 0 || I == NB - 1 || J == 0 || J == NB - 1)
        return 1;
    int rnd[ATTN_PATTERN_MAX_RANDOM];
    int n = attn_bigbird_random(pt, I, NB, rnd);
    for (int e = 0; e < n; ++e)
        if (rnd[e] == J)
            return 1;
    return 0;
}

/* Does part pt keep key j for the query at aligned position a (sequence of Lk keys)? */
ATTN_HD int attn_pattern_part_keep(const attn_pattern_part *pt, int a, int j, int Lk) {
    int delta = j - a;
    switch (pt->kind) {
    case ATTN_PATTERN_WINDOW:
        return delta >= -pt->w && delta <= pt->w;
    case ATTN_PATTERN_CAUSAL_WINDOW:
        return delta > -pt->w && delta <= 0;
    case ATTN_PATTERN_DILATED:
        return delta >= -pt->d * pt->w && delta <= pt->d * pt->w && delta % pt->d == 0;
    case ATTN_PATTERN_STRIDED:
        return delta <= 0 && (delta > -pt->l || delta % pt->l == 0);
    case ATTN_PATTERN_FIXED:
        return attn_floor_div(j, pt->l) == attn_floor_div(a, pt->l) || j % pt->l >= pt->l - pt->c;
    case ATTN_PATTERN_GLOBAL:
        for (int k = 0; k < pt->n_ranges; ++k)
            if ((a >= pt->lo[k] && a < pt->hi[k]) || (j >= pt->lo[k] && j < pt->hi[k]))
                return 1;
        return 0;
    case ATTN_PATTERN_BIGBIRD:
        return attn_bigbird_block_keep(pt, attn_floor_div(a, pt->b), j / pt->b,
                                       (Lk + pt->b - 1) / pt->b);
    default: /* an example's own kind: attn_pattern_keep_with */
        return 0;
    }
}

/* Does the pattern keep key j for query i of a sequence of Lq queries and Lk keys? A pattern of
 * no parts keeps everything (dense). Causality is not applied here (see above). Parts of an
 * example's own kinds keep nothing here: kernels that serve them use attn_pattern_keep_with, the
 * host attn_pattern_keep_host (attn/sparse/patterns.h). */
ATTN_HD int attn_pattern_keep(const attn_pattern *pat, int i, int j, int Lq, int Lk) {
    if (pat->n_parts == 0)
        return 1;
    int a = i + (Lk - Lq);
    for (int p = 0; p < pat->n_parts; ++p)
        if (attn_pattern_part_keep(&pat->part[p], a, j, Lk))
            return 1;
    return 0;
}

#ifdef __cplusplus
/* The same predicate for a kernel specialised on an example's own kinds: Own::keep(pt, a, j, Lk)
 * decides every part of kind >= ATTN_PATTERN_KINDS (the example's kinds, pt->kind -
 * ATTN_PATTERN_KINDS in the order its configuration lists them). Resolved at compile time: no
 * function pointer on the device. */
struct attn_no_own_kinds {
    ATTN_HD static int keep(const attn_pattern_part *, int, int, int) { return 0; }
};

template <class Own>
ATTN_HD int attn_pattern_keep_with(const attn_pattern *pat, int i, int j, int Lq, int Lk) {
    if (pat->n_parts == 0)
        return 1;
    int a = i + (Lk - Lq);
    for (int p = 0; p < pat->n_parts; ++p) {
        const attn_pattern_part *pt = &pat->part[p];
        if (pt->kind >= ATTN_PATTERN_KINDS ? Own::keep(pt, a, j, Lk)
                                           : attn_pattern_part_keep(pt, a, j, Lk))
            return 1;
    }
    return 0;
}
#endif

#endif /* ATTN_PATTERNS_CUH */
