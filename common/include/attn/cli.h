/* attn/cli.h — the command line every example shares.
 *
 *   --help, -h             usage
 *   --list                 the example's kernels (id, name, what it changes, requirements)
 *   --kernel N|all         which kernel(s) to run (default: all)
 *   -B/--batch N  -H/--heads N  -L/--seqlen N  -D/--headdim N
 *   --lq N --lk N          different query / key lengths (override -L)
 *   --seqlens N1,N2,...    variable-length batch in the packed [total, H, D] layout with
 *                          cu_seqlens (attn/problem.h): one length per sequence (queries = keys),
 *                          0 allowed, at least one > 0. B = the count, Lq = Lk = the longest.
 *                          Refused with -L/--lq/--lk, or with a -B other than the count
 *   --seqlens-k M1,M2,...  key lengths when they differ from the query lengths (same count;
 *                          needs --seqlens)
 *   --pattern SPEC         sparse attention pattern (examples with sparse kernels, 04 on):
 *                          e.g. window:w=128, causal_window:w=4096, bigbird:b=64,r=3,seed=1,
 *                          parts joined by '+' (syntax: attn/sparse/patterns.h); 'none' = dense
 *   --dtype f32|f16|bf16   element type (default: the first one the kernels support)
 *   --causal               causal (bottom-right aligned) attention
 *   --scale X              softmax scale (default 1/sqrt(D))
 *   --amplitude X          inputs uniform in [-X, X) (default 1; large values stress softmax)
 *   --inputs uniform|opposed  the inputs' signs (attn_inputs, attn/tensor.h): opposed makes every
 *                          score negative, so that a masking bug that lets a zero-score key in
 *                          is a large error, not one within the tolerance
 *   --seed N               input seed (default 1234)
 *   --reps N --warmup N    timing repetitions (defaults: GPU 20/5, simulator 2/0)
 *   --check-only           check correctness, skip timing
 *   --check-rows N         check N query rows, a deterministic sample (0 = every row). Default:
 *                          every row while the reference costs at most 2e9 double multiply-adds
 *                          (2 * entries * D), else 4096 rows (attn_cli_rows_to_check)
 *   --check-all            every row, however long the reference takes (= --check-rows 0)
 *   --json FILE --csv FILE append one machine-readable line per run ("-" = stdout)
 *   --quiet                only the result lines
 *   --profile              the simulator's profile of each kernel's checked launch (memory
 *                          requests, sectors, DRAM bytes under an L2 model, bank conflicts, a
 *                          roofline bound: attn/profile.h); no timing. Needs an instrumented
 *                          build (the sim-check preset): elsewhere one line saying so, exit 2
 *   --dump DIR             write the inputs, the reference and every kernel's output (an
 *                          attention example: q, k, v, o_ref, lse_ref, o_<kernel>, lse_<kernel>;
 *                          with the module's own tensors) as attn tensor files (attn/tensor.h)
 *                          into the existing folder DIR
 *   --allow-slow           run a problem the simulator would take longer than its budget for
 *                          (attn_cli_sim_budget_check: refused up front otherwise)
 * plus the example's own flags (attn_option below, declared by its module, attn/example.h).
 * Bad values give a one-line error naming the flag and exit status 2 (ATTN_EXIT_USAGE).
 */
#ifndef ATTN_CLI_H
#define ATTN_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "attn/problem.h"
#include "attn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- an example's own flags -------------------------------------------------------------------
 * Declared like the common ones and parsed with them (attn_cli_parse_options below): the same
 * number rules, the same one-line errors (exit 2), listed by --help under "<example> options" with
 * their defaults. The values land in the module's options struct at `offset`. */
typedef enum attn_option_type {
    ATTN_OPTION_SWITCH, /* no value; the int at offset becomes 1 */
    ATTN_OPTION_INT,    /* an int in [min, max] (decimal digits; '-' allowed when min < 0) */
    ATTN_OPTION_CHOICE, /* one of choices ("a|b|c"): the int at offset gets its index */
    ATTN_OPTION_TEXT,   /* any non-empty text (const char *): a spec the module parses */
    ATTN_OPTION_DIR,    /* an existing folder this process can write into (const char *) */
    ATTN_OPTION_FACTOR  /* a factor (double) in (0, 1e4]: a planted or shaping multiplier */
} attn_option_type;

typedef struct attn_option {
    const char *name;  /* "--topk" */
    const char *value; /* what the value is, for --help ("K"); NULL for a switch */
    const char *help;  /* one line */
    attn_option_type type;
    size_t offset;       /* offsetof(the module's options struct, field) */
    int min, max;        /* INT: the range */
    const char *choices; /* CHOICE: "indexer|equal|neginf" */
    /* The default, spelt as on the command line (NULL: 0 / NULL); def_gpu where the GPU build's
     * differs (NULL: the same). */
    const char *def, *def_gpu;
} attn_option;

typedef struct attn_cli {
    bool help, list, check_only, quiet;
    int kernel;          /* 0 = all */
    int B, H, Lq, Lk, D; /* 0 = example default (varlen: B = count, Lq/Lk = longest) */
    /* --seqlens: prefix sums of the lengths, B + 1 entries each (cu_seqlens, attn/problem.h),
     * allocated by attn_cli_parse; NULL for a dense batch. Released by attn_cli_free. */
    int *cu_seqlens_q;
    int *cu_seqlens_k;
    const char *pattern; /* --pattern as given (the sparse module parses it); NULL = not given */
    bool dtype_set;
    attn_dtype dtype;
    bool causal;
    float scale; /* 0 = 1/sqrt(D) */
    float amplitude;
    attn_inputs inputs; /* --inputs (attn/tensor.h) */
    uint64_t seed;
    bool seed_set;         /* --seed given (a program with its own default seed keeps it else) */
    int reps, warmup;      /* -1 = backend default */
    int check_rows;        /* -1 = default (see above), 0 = every row */
    const char *json_path; /* NULL = none */
    const char *csv_path;
    bool profile;         /* --profile */
    const char *dump_dir; /* --dump: an existing, writable folder; NULL = none */
    bool allow_slow;      /* --allow-slow */
} attn_cli;

/* Parses argv. Returns 0 on success; on a bad argument writes a one-line message (naming the
 * flag and the accepted values) to err and returns ATTN_EXIT_USAGE, having allocated nothing.
 * After a successful parse, attn_cli_free releases the varlen arrays. */
int attn_cli_parse(attn_cli *cli, int argc, char **argv, char *err, size_t err_len);
/* attn_cli_parse with an example's own flags: extra[0 .. n_extra) fill the struct at values,
 * which gets their defaults first (def, or def_gpu on a GPU build when given). */
int attn_cli_parse_options(attn_cli *cli, int argc, char **argv, const attn_option *extra,
                           int n_extra, void *values, char *err, size_t err_len);
void attn_cli_free(attn_cli *cli);

/* The simulator's budget: a problem whose attention costs more than ATTN_SIM_BUDGET_FLOPS (about
 * ten minutes of the simulator's CPU time for the chapter's kernels; README, "Two backends") is
 * refused before anything runs unless --allow-slow is given. 0, or ATTN_EXIT_USAGE with the
 * estimate and the flag in why. flops: what the run computes (attn_problem_flops for one kernel,
 * times the kernels selected). Always 0 on a GPU build. */
#define ATTN_SIM_BUDGET_FLOPS 2e11
int attn_cli_sim_budget_check(const attn_cli *cli, double flops, char *why, size_t len);

/* Host memory the run would need: refuses (ATTN_EXIT_USAGE, the sizes in why) a problem whose
 * inputs, reference and results (bytes) do not fit in this machine's physical memory. */
int attn_cli_memory_check(double bytes, char *why, size_t len);

/* How many query rows of p to check: 0 for every row (also when the sample would cover them all),
 * else the size of the sample for attn_reference_sample_rows. Resolves the default of
 * --check-rows for p. */
int attn_cli_rows_to_check(const attn_cli *cli, const attn_problem *p);

/* Prints the usage text for program `prog` of example ex: the common flags, the example's own
 * (its module's options and help text), its default problem and its kernels. */
void attn_cli_usage(FILE *f, const char *prog, const attn_example *ex);

/* ---- the value parsers, shared with the harness's other programs (bench_attention) ----------
 * Each returns 0, or ATTN_EXIT_USAGE with a one-line "error: FLAG ..." message in err that names
 * the flag, the accepted values and what was given. */

/* A decimal integer in [min, INT_MAX]. */
int attn_cli_parse_int(const char *flag, const char *s, int min, int *out, char *err,
                       size_t err_len);
/* A finite number >= 0. */
int attn_cli_parse_real(const char *flag, const char *s, double *out, char *err, size_t err_len);
/* A comma-separated list of at most max positive integers, each with an optional k suffix
 * (x1024, e.g. 1k,2k,4096) and at most 2^24: *n values into out. */
int attn_cli_parse_counts(const char *flag, const char *s, int *out, int max, int *n, char *err,
                          size_t err_len);
/* A comma-separated list of at most max dtypes (attn_dtype_parse's names): *n into out. */
int attn_cli_parse_dtypes(const char *flag, const char *s, int *out, int max, int *n, char *err,
                          size_t err_len);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_CLI_H */
