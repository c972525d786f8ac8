/* attn/sparse/patterns.h — sparse attention patterns on the host: parsing a pattern from the
 * command line, its token-level mask for the CPU reference, the fast block mask builder
 * (FlexAttention's BlockMask, attn/sparse/block_mask.h), the CSR form, density and metadata size.
 *
 * The patterns and their predicate are defined in device/patterns.cuh (shared with the kernels).
 *
 * Spec strings: parts joined by '+', each "kind:name=value,name=value":
 *   window:w=128                 |i - j| <= w                    (Longformer)
 *   causal_window:w=4096         i - W < j <= i                  (Mistral)
 *   dilated:w=4,d=2              j = i + d*m, m in [-w, w]       (Longformer)
 *   strided:l=64                 j <= i, (i-j) mod l = 0 or i-l < j   (Sparse Transformer)
 *   fixed:l=64,c=8               same l-block, or j mod l >= l-c      (Sparse Transformer)
 *   global:g=0,1,2  global:g=0-15  global:n=4   rows and columns of G dense; "n=K" is 0..K-1
 *   bigbird:b=64,r=3,seed=1      BigBird ITC blocks (seed defaults to 0)
 *   none                         no pattern (dense)
 * e.g. "window:w=256+global:n=16". A value list (global's g) continues after commas until the
 * next "name="; a parameter given twice is refused. Kinds an example defines itself (example
 * 06's ladder) parse the same way once registered ("An example's own pattern" below).
 */
#ifndef ATTN_PATTERNS_H
#define ATTN_PATTERNS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "attn/problem.h"
#include "attn/reference.h"
#include "attn/sparse/block_mask.h"
#include "device/patterns.cuh"

#ifdef __cplusplus
extern "C" {
#endif

/* The tile of the chapter's block-sparse kernels (Br = Bc = 64, as example 03's fa2_mma): the
 * block size of the block mask the example driver builds for them. */
#define ATTN_SPARSE_TILE 64

/* attn_kernel.serves (attn/problem.h) of a kernel that serves patterns of the given kind, and of
 * one that serves every kind. */
#define ATTN_SERVES_PATTERN(kind) ATTN_PATTERN_BIT(kind)
#define ATTN_SERVES_ALL_PATTERNS (ATTN_PATTERN_BIT(ATTN_PATTERN_KINDS) - 1u)
/* ... and of one that serves the n-th kind its example defines itself (below). */
#define ATTN_SERVES_OWN_PATTERN(n) ATTN_PATTERN_BIT(ATTN_PATTERN_KINDS + (n))

/* ---- An example's own pattern --------------------------------------------------------------
 * A kind defined in an example's folder (example 06's ladder), not in common/: its name, its
 * parameters (stored in attn_pattern_part.x, in this order), its rule, and optionally its rule on
 * blocks. Registered (attn_pattern_register; the sparse module does it for the kinds an
 * example's attn_sparse_config lists), it parses, formats, masks the reference, builds block
 * masks and CSR like the chapter's kinds. Its kernels use the same rule through
 * attn_pattern_keep_with (device/patterns.cuh). */
/* One parameter of a kind: its name, whether it must be given, its value when it is not, and the
 * range a given value must lie in. */
typedef struct attn_pattern_param {
    const char *name; /* "b"; NULL (or a member left out) ends the list */
    bool required;
    int def; /* the value of an optional one not given */
    int min, max;
} attn_pattern_param;

typedef struct attn_pattern_kind_def {
    const char *name;  /* "ladder" */
    const char *usage; /* one --help line: the spec and the rule */
    /* in attn_pattern_part.x[] order */
    attn_pattern_param params[ATTN_PATTERN_MAX_PARAMS];
    /* Does the part keep key j for the query at aligned position a (Lk keys)? Causality is
     * applied on top. */
    int (*keep)(const attn_pattern_part *pt, int a, int j, int Lk);
    /* A kind defined on blocks of x[block_param] tokens (block_keep not NULL): does query block I
     * keep key block J of NB? The block mask builder then tests block pairs, not entries. */
    int block_param;
    int (*block_keep)(const attn_pattern_part *pt, int I, int J, int NB);
} attn_pattern_kind_def;

/* Registers the kinds (NULL-terminated; NULL: none) for this process; a kind registered before
 * keeps its number. Returns 0, or -1 when more than ATTN_PATTERN_MAX_OWN kinds would be
 * registered or a name is taken. */
int attn_pattern_register(const attn_pattern_kind_def *const *kinds);
/* The definition of registered kind `kind` (>= ATTN_PATTERN_KINDS), or NULL. */
const attn_pattern_kind_def *attn_pattern_own_kind(int kind);
/* attn_pattern_keep on the host, every kind (registered ones through their definitions). */
int attn_pattern_keep_host(const attn_pattern *pat, int i, int j, int Lq, int Lk);

/* Parses spec into *out. Returns 0, or -1 with a one-line reason in err (naming the part and the
 * offending text). */
int attn_pattern_parse(const char *spec, attn_pattern *out, char *err, size_t err_len);
struct attn_pattern_kind_def; /* an example's own pattern kind (below) */

/* The syntax of every pattern kind, one line each (for --help), the example's own kinds
 * (NULL-terminated, may be NULL) after the chapter's. */
void attn_pattern_usage(FILE *f, const struct attn_pattern_kind_def *const *kinds);
/* The canonical spec of pat (every parameter spelt out), e.g. "window:w=128+global:g=0-3". */
void attn_pattern_format(const attn_pattern *pat, char *buf, size_t len);
/* Name of a kind ("window", ...), NULL if out of range. */
const char *attn_pattern_kind_name(int kind);
/* Bit set of the kinds used by pat (ATTN_PATTERN_BIT). */
unsigned attn_pattern_kinds(const attn_pattern *pat);

/* A pattern applied to a problem, as the reference's mask (a predicate; ctx must outlive it). */
typedef struct attn_pattern_ctx {
    const attn_pattern *pattern;
    const attn_problem *problem;
} attn_pattern_ctx;
attn_mask attn_pattern_mask(const attn_pattern_ctx *ctx);

/* The block mask of problem p under pat (and p's causality) in block_q x block_k tiles, built
 * per tile from the pattern's arithmetic, without looking at individual entries (except fixed:
 * one step per key of a tile). Exact (equal to attn_block_mask_from_mask) for a single part;
 * for a union of parts a tile is full when one part alone makes it full, so a tile that only the
 * parts together cover is listed as partial (correct, a little extra mask work). Returns 0, or
 * -1 on a bad problem or no memory. */
int attn_pattern_block_mask(attn_block_mask *m, const attn_pattern *pat, const attn_problem *p,
                            int block_q, int block_k);

/* Token-level CSR: row r = b*Lq + i lists the keys that query i of sequence b computes (pattern
 * and causality), ascending; rows past a sequence's end are empty. It is also a valid attn_mask
 * of kind ATTN_MASK_CSR (attn_csr_mask). */
typedef struct attn_csr {
    int64_t rows;     /* B * Lq */
    int64_t nnz;      /* row_ptr[rows] */
    int64_t *row_ptr; /* [rows + 1] */
    int32_t *col_idx; /* [nnz] */
} attn_csr;

/* Built from the block mask m of the same problem and pattern (any tile size): full tiles are
 * copied, partial ones tested entry by entry. Returns 0 or -1 (no memory). */
int attn_pattern_csr(attn_csr *csr, const attn_pattern *pat, const attn_problem *p,
                     const attn_block_mask *m);
void attn_csr_free(attn_csr *csr);
attn_mask attn_csr_mask(const attn_csr *csr);
/* Bytes of row_ptr and col_idx. */
size_t attn_csr_bytes(const attn_csr *csr);

/* Device copy of a CSR (the two arrays in device memory). 0, or 1 after reporting the error. */
int attn_csr_to_device(const attn_csr *host, attn_csr *dev);
void attn_csr_free_device(attn_csr *dev);

/* What a pattern costs on a problem (per head; all heads share the pattern). */
typedef struct attn_pattern_stats {
    double entries;       /* score entries computed: pattern and causality */
    double dense_entries; /* attn_problem_entries(p) / H: the dense (causal if p is) baseline */
    double density;       /* entries / sum over sequences of Lq_b * Lk_b */
    double speedup_bound; /* dense_entries / entries: the FLOP ratio, the ideal speedup */
    attn_block_mask_stats blocks;
    double block_fill; /* entries / (entries of the listed tiles): useful work of a block kernel */
} attn_pattern_stats;

/* Stats from the block mask m of (pat, p). */
attn_pattern_stats attn_pattern_stats_of(const attn_pattern *pat, const attn_problem *p,
                                         const attn_block_mask *m);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_PATTERNS_H */
