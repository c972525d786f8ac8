/* attn/runner.h — one problem's data (seeded inputs, the CPU reference, device buffers) and the
 * checked, optionally timed, run of one kernel on it: the work that an example's program
 * (attn/example.h) and the benchmark (benchmarks/bench_attention.c) share.
 *
 *   attn_problem_data d;
 *   if (attn_problem_data_make(&d, &p, mask, dense_too, seed, amplitude, check_rows, quiet) == 0)
 *       for each kernel k: attn_outcome_init(&o, ex, k, &p, device); attn_run_kernel(&d, k, &opts,
 * &o); attn_problem_data_free(&d);
 *
 * A run: can the kernel run p here (else SKIP with the reason)? workspace, NaN-filled outputs,
 * launch, synchronise, copy back, check against the reference (PASS/FAIL), then time it.
 * The log-sum-exp buffer is NaN-filled like O; a kernel that leaves it entirely NaN did not
 * produce it (some kernels do not compute it) and it is not checked. A partly written LSE is
 * checked, and fails.
 */
#ifndef ATTN_RUNNER_H
#define ATTN_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attn/bench.h"
#include "attn/problem.h"
#include "attn/reference.h"
#include "attn/report.h"
#include "attn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Host arrays are fp32 in the problem's layout. */
typedef struct attn_problem_data {
    attn_problem p;
    float amplitude;   /* of the inputs: the fp32 tolerance depends on it */
    bool quiet;        /* no progress or check lines on stdout */
    size_t mem_before; /* attn_device_mem_used() before the device buffers were allocated */
    attn_host_inputs in;
    float *ref;     /* [q_elems] double-precision reference output (NaN in rows not computed) */
    float *ref_lse; /* [lse_elems] */
    float *lowp;    /* [q_elems] same-precision output (fp16/bf16 only, else NULL) */
    float *out;     /* [q_elems] the kernel's output, unpacked */
    float *lse;     /* [lse_elems] the kernel's log-sum-exp */
    void *staging;  /* [max(q_elems, k_elems)] elements of the dtype, for upload/download */
    /* Under a mask (e.g. a sparse pattern), the reference above is masked; a dense reference for
     * the kernels checked without it (dense_too; NULL unless asked for). */
    float *dense_ref, *dense_ref_lse, *dense_lowp;
    attn_buffers dev; /* device Q, K, V, O, LSE, varlen offsets (the workspace is per kernel; a
                         caller may set dev.sparse, which every kernel then gets) */
} attn_problem_data;

/* Seeded inputs (attn_host_inputs_make), the CPU reference (double precision, and for fp16/bf16
 * the same-precision implementation the tolerance rule needs) under mask (NULL: dense) on every
 * row (check_rows = 0) or on a deterministic sample of check_rows rows
 * (attn_reference_sample_rows; the other rows stay NaN and the checkers skip them), with
 * dense_too also a dense one (dense_ref), and the device buffers with the inputs (and a varlen
 * problem's cu_seqlens) uploaded. p and mask must outlive d. Returns 0, or 1 after a message on
 * stderr (out of host or device memory). Free with attn_problem_data_free in either case. */
int attn_problem_data_make(attn_problem_data *d, const attn_problem *p, const attn_mask *mask,
                           bool dense_too, uint64_t seed, float amplitude, int check_rows,
                           bool quiet);
/* What a caller may do to the seeded inputs before the reference is computed from them (in
 * place; the device gets the changed inputs too): e.g. rotate Q and K by a position embedding, so
 * that the reference is attention on the rotated inputs. ctx is the caller's. 0, or 1 after a
 * message on stderr. */
typedef int (*attn_inputs_fn)(void *ctx, const attn_problem *p, attn_host_inputs *in);
/* attn_problem_data_make with such a change (inputs NULL: none). */
int attn_problem_data_make_with(attn_problem_data *d, const attn_problem *p, const attn_mask *mask,
                                bool dense_too, uint64_t seed, float amplitude, int check_rows,
                                bool quiet, attn_inputs_fn inputs, void *ctx);
void attn_problem_data_free(attn_problem_data *d);

typedef enum attn_verdict {
    ATTN_KERNEL_RUNS,
    ATTN_KERNEL_NEEDS_GPU,
    ATTN_KERNEL_CANNOT
} attn_verdict;

/* Can kernel k run p on this backend? A kernel refused only for being GPU-only on the simulator
 * needs a GPU (a skip); any other refusal is about the problem. The reason goes to why. */
attn_verdict attn_kernel_verdict(const attn_kernel *k, const attn_problem *p, char *why,
                                 size_t len);

typedef struct attn_run_opts {
    bool time;        /* time the kernel after checking it */
    bool time_failed; /* also time a kernel that FAILed its check (a benchmark must not) */
    attn_timing_opts timing;
    bool quiet; /* no check lines on stdout */
    /* Per kernel (set by the sparse module, attn/sparse/sparse_run.h): */
    const char *refusal;  /* non-NULL: SKIP with this reason, before anything else */
    bool dense_reference; /* check against d->dense_ref (a baseline beside masked kernels) */
    double flops;         /* the kernel's FLOPs for TFLOP/s; 0: attn_problem_flops */
} attn_run_opts;

/* The result of one kernel: the record (its note points into note) and what it used. */
typedef struct attn_outcome {
    attn_run_record rec;
    char note[256];
    bool out_of_memory; /* ERROR because its workspace could not be allocated */
    size_t mem_used;    /* device bytes in use while it ran, beyond mem_before: the problem's
                           buffers and its workspace (0 when it did not run) */
} attn_outcome;

/* An outcome for kernel k of example ex on p, not yet run (max_abs_err NaN: not checked). The
 * outcome must stay where it is: rec.note points into it. */
void attn_outcome_init(attn_outcome *o, const attn_example *ex, const attn_kernel *k,
                       const attn_problem *p, const char *device);

/* Launches k on p with b (stream 0), waits for it, and returns 0; or 1 with "<error name>:
 * <error string>" in note (a launch error: configuration, shared memory; or one while it ran:
 * a bad address, a trap). */
int attn_launch_synchronized(const attn_kernel *k, const attn_problem *p, const attn_buffers *b,
                             char *note, size_t len);

/* Runs k on d as described above and fills o: status PASS, FAIL, SKIP (cannot run p here, with
 * the reason) or ERROR (launch or runtime error, or no memory for the workspace). */
void attn_run_kernel(attn_problem_data *d, const attn_kernel *k, const attn_run_opts *opts,
                     attn_outcome *o);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_RUNNER_H */
