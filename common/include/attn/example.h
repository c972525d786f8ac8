/* attn/example.h — the one driver behind every example's main():
 *
 *   int main(int argc, char **argv) { return attn_example_main(argc, argv, &my_example); }
 *
 * It parses the command line (attn/cli.h, plus the example's own flags), finds the device (exit
 * 77 on a gpu build without a GPU), makes seeded inputs and the CPU reference, then for each
 * selected kernel: checks its requirements, NaN-fills what it writes, launches, synchronises,
 * checks (PASS/FAIL with the first mismatches), times it unless --check-only, and reports. Exit
 * status: 0 all selected kernels passed, 1 a failure or runtime error, 2 usage, 77 no GPU.
 *
 * What an example adds to this is its module (attn_module below), named by attn_example.module:
 *   - none (NULL): dense attention, one stage (examples 01-03);
 *   - the sparse module (attn/sparse/sparse_example.h): a --pattern, its block mask and CSR, the
 *     reference under it, speedups over the dense baseline (examples 04 and 06);
 *   - a staged example's own module: flags of its own, inputs and references of its own, and
 *     stages — an indexer, a top-k, attention (example 05) — each with its kernels and its check.
 *     The driver runs the stages in order (chunk by chunk where a stage works on query chunks),
 *     checks every kernel on every row it checks whatever the chunking, then times each kernel.
 * Adding an example or a kernel version: examples/README.md, "Adding an example".
 */
#ifndef ATTN_EXAMPLE_H
#define ATTN_EXAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "attn/check.h"
#include "attn/cli.h"
#include "attn/problem.h"
#include "attn/reference.h"
#include "attn/report.h"
#include "attn/runner.h"

#ifdef __cplusplus
extern "C" {
#endif

int attn_example_main(int argc, char **argv, const attn_example *ex);

/* ---- a staged example's stages --------------------------------------------------------------- */

/* What a stage's check found for one kernel (over one chunk; the driver merges the chunks). */
typedef struct attn_stage_check {
    bool pass;
    int64_t rows;     /* query rows compared */
    double max_err;   /* largest error over the rows compared (NaN: not a numeric comparison) */
    double bound;     /* what it is held to (NaN: no single bound, e.g. the top-k tie rule) */
    char detail[256]; /* the first failure (where and what), or "" */
} attn_stage_check;

/* A stage's hooks (attn_stage below), as types: a staged example's header declares with them
 * the hooks that its registry (.cu) names and its stages (.c) define, e.g.
 *   attn_stage_clear_fn v4_clear_compress, v4_clear_index; */
typedef int attn_stage_prepare_fn(void *state, char *why, size_t len);
typedef int attn_stage_clear_fn(void *state, const attn_kernel *k, int chunk);
typedef int attn_stage_check_fn(void *state, const attn_kernel *k, int chunk,
                                attn_stage_check *out);

typedef struct attn_stage {
    const char *name; /* "indexer", "top-k", "attention" */
    /* Its kernels work on query chunks (attn_buffers.chunk, 0 .. chunks-1): consecutive chunked
     * stages run chunk by chunk, every kernel of each stage checked on each chunk before the
     * next chunk overwrites what they read. */
    bool chunked;
    /* Before its first kernel runs, once the stages before it are done and checked: what its
     * reference needs from them (NULL: nothing). 0; ATTN_EXIT_USAGE with why (an input the stage
     * refuses); 1 after a message on stderr. */
    int (*prepare)(void *state, char *why, size_t len);
    /* NaN-fills what kernel k writes (of chunk c when chunked, and only that part), so that an
     * element it forgets fails the check. 0, or 1 after a message on stderr. */
    int (*clear)(void *state, const attn_kernel *k, int chunk);
    /* Compares what k wrote (of chunk c) with the stage's reference on every row the run checks.
     * A stage that hands its output to the next one records what it accepted: the next stage's
     * reference is built from that, never from the device buffer read back later. 0, or 1 after
     * a message on stderr (a runtime error). */
    int (*check)(void *state, const attn_kernel *k, int chunk, attn_stage_check *out);
} attn_stage;

/* A stage whose kernel writes attention's output (a forward stage): out from O and LSE (fp32
 * values read back) against the reference ref, ref_lse (and, fp16/bf16, lowp) on the rows the
 * reference computed (attn_check_output and attn_check_lse_at of attn/check.h; amplitude: the
 * inputs'), with the first failure in out->detail. */
void attn_stage_check_attention(const attn_problem *p, const float *o, const float *lse,
                                const float *ref, const float *ref_lse, const float *lowp,
                                double amplitude, attn_stage_check *out);

/* A forward stage's reference on the rows it checks: the output and LSE in double precision and
 * the same-precision output FlashAttention's rule needs (attn_reference_rows and
 * attn_reference_lowp_rows of attn/reference.h, under mask, on the rows flagged in rows; NULL:
 * every row). 0, or 1 after "error: <what> ..." on stderr (out of host memory). Free it with
 * attn_stage_reference_free in either case. */
typedef struct attn_stage_reference {
    float *o, *lse, *lowp;
} attn_stage_reference;
int attn_stage_reference_make(attn_stage_reference *r, const attn_problem *p, const attn_mask *mask,
                              const float *q, const float *k, const float *v, const uint8_t *rows,
                              const char *what);
void attn_stage_reference_free(attn_stage_reference *r);

/* What a forward stage's kernel wrote, back on the host: d_o (the dtype of p, through staging, a
 * host scratch of attn_problem_q_elems elements of it) unpacked into o, and d_lse into lse. 0, or
 * 1 after reporting the error. */
int attn_stage_read_output(const attn_problem *p, const void *d_o, const float *d_lse,
                           void *staging, float *o, float *lse);
/* attn_stage_read_output, then attn_stage_check_attention against r. 0, or 1 (a runtime error). */
int attn_stage_check_output(const attn_problem *p, const void *d_o, const float *d_lse,
                            void *staging, float *o, float *lse, const attn_stage_reference *r,
                            double amplitude, attn_stage_check *out);

/* ---- the module -------------------------------------------------------------------------------
 * Every hook may be NULL. state is the module's own storage (state_size bytes, zeroed, kept for
 * the whole run), opts its parsed options (options_size bytes). Written with designated
 * initialisers (C11, and C++ in member order): {.options = ..., .prepare = ..., .stages = ...}.
 * The hooks are grouped by kind: both kinds of example, an attention example's, a staged
 * example's, and both kinds again after the runs. */
typedef struct attn_module {
    /* ---- both kinds: the flags and step 1, before the device ---- */
    const attn_option *options;
    int num_options;
    size_t options_size;
    /* More --help text after the example's options (e.g. the pattern syntaxes it accepts). */
    void (*usage)(const attn_example *ex, FILE *f);
    size_t state_size;
    /* Step 1, before the device: the module's flags against p, and what they change in p. 0, or
     * ATTN_EXIT_USAGE with the reason in why. */
    int (*prepare)(void *state, const attn_example *ex, const attn_cli *cli, const void *opts,
                   attn_problem *p, char *why, size_t len);
    /* Can kernel k run p here? Replaces attn_kernel_verdict (which it may call). */
    attn_verdict (*verdict)(void *state, const attn_kernel *k, const attn_problem *p, char *why,
                            size_t len);
    /* Lines after the problem's banner (what the flags chose). */
    void (*banner)(void *state, const attn_problem *p);
    /* Where the inputs were read from when they were not seeded (example 07's --tensors DIR): the
     * banner names it instead of the seed and amplitude. NULL, or NULL returned: seeded. */
    const char *(*inputs_read_from)(void *state);

    /* ---- an attention example (no stages): the harness's inputs and reference ---- */
    /* Step 3, before the inputs: the reference's mask (NULL: none) and whether a dense reference
     * is needed too, for the selected kernels (selected[n]: kernel n). 0, or 1 after a message. */
    int (*build)(void *state, const attn_example *ex, const bool *selected, const attn_problem *p,
                 bool quiet, const attn_mask **mask, bool *dense_too);
    /* Step 3: the seeded inputs, changed in place before the reference is computed from them and
     * before they are uploaded (attn_problem_data_make_with, attn/runner.h): e.g. Q and K rotated
     * by a position embedding, the reference then being attention on the rotated inputs, while
     * the module keeps the originals for a kernel that rotates them itself. NULL: the inputs as
     * seeded. 0, or 1 after a message on stderr. */
    int (*inputs)(void *state, const attn_problem *p, attn_host_inputs *in);
    /* The module's inputs of the kernels, in the device buffers. */
    void (*buffers)(void *state, attn_buffers *b);
    /* Per kernel: its refusal, reference and FLOPs (attn_run_opts). */
    void (*kernel_options)(void *state, const attn_kernel *k, const attn_problem *p,
                           attn_run_opts *opts, char *why, size_t len);

    /* ---- a staged example: its own inputs, references and stages ---- */
    const attn_stage *stages; /* attn_kernel.stage indexes this; NULL: one attention stage */
    int num_stages;
    /* Step 1 (after prepare): the host memory its setup will allocate for p, which the driver
     * checks against the machine's before anything is allocated. NULL: the estimate of an
     * attention example's inputs and reference (one K and V head per query head), which can
     * overstate a staged example's own layouts by far (example 09's grouped and latent
     * caches). */
    double (*host_bytes)(void *state, const attn_problem *p);
    /* Step 3: the inputs (seeded by cli->seed), on the host and the device, and the references
     * that need no earlier stage; b->args is what the kernels read (their launchers' arguments),
     * *chunks the number of query chunks of the chunked stages (1 if none). check_rows: as
     * attn_cli_rows_to_check. 0, or 1 after a message on stderr. */
    int (*setup)(void *state, const attn_problem *p, const attn_cli *cli, int check_rows,
                 attn_buffers *b, int *chunks);
    /* FLOPs of kernel k for TFLOP/s (NULL or 0: not reported). */
    double (*flops)(void *state, const attn_kernel *k);

    /* ---- both kinds, after the runs ---- */
    /* More JSON members of k's record (--json), e.g. the module's settings; "" for none. */
    void (*record_json)(void *state, const attn_kernel *k, char *out, size_t len);
    /* --dump DIR: writes the module's tensors (inputs, stage outputs; an attention example's own
     * inputs beside the driver's q, k, v and references) as attn tensor files (attn/tensor.h).
     * 0, or 1 after a message on stderr. */
    int (*dump)(void *state, const char *dir);
    /* After the table of results. */
    void (*after_table)(void *state, const attn_example *ex, const attn_run_record *recs, int n);
    void (*release)(void *state);
} attn_module;

/* The module's hooks that most staged examples define (attn_module's members of the same names),
 * as types for their headers' declarations:  attn_module_setup_fn v4_setup; */
typedef int attn_module_prepare_fn(void *state, const attn_example *ex, const attn_cli *cli,
                                   const void *opts, attn_problem *p, char *why, size_t len);
typedef attn_verdict attn_module_verdict_fn(void *state, const attn_kernel *k,
                                            const attn_problem *p, char *why, size_t len);
typedef void attn_module_banner_fn(void *state, const attn_problem *p);
typedef int attn_module_setup_fn(void *state, const attn_problem *p, const attn_cli *cli,
                                 int check_rows, attn_buffers *b, int *chunks);
typedef double attn_module_flops_fn(void *state, const attn_kernel *k);
typedef void attn_module_release_fn(void *state);
typedef void attn_module_record_json_fn(void *state, const attn_kernel *k, char *out, size_t len);
typedef int attn_module_dump_fn(void *state, const char *dir);
typedef void attn_module_after_table_fn(void *state, const attn_example *ex,
                                        const attn_run_record *recs, int n);

/* A module's flags, table (an array of attn_option) parsed into a struct type: .options,
 * .num_options and .options_size. Its stages, rows (an array of attn_stage): .stages and
 * .num_stages. */
#define ATTN_MODULE_OPTIONS(table, type)                                                           \
    .options = (table), .num_options = ATTN_COUNT(table), .options_size = sizeof(type)
#define ATTN_STAGES(rows) .stages = (rows), .num_stages = ATTN_COUNT(rows)

/* The stage of kernel k in ex ("attention" for an example without stages). */
const char *attn_example_stage_name(const attn_example *ex, const attn_kernel *k);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_EXAMPLE_H */
