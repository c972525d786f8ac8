/* grader/cases/grader_case.h — what the exercises' case programs (the checkers) share
 * (grader/README.md, "Case programs"). A case program runs ONE test case of a submission and
 * prints ONE JSON line, the verdict:
 *
 *   {"case": NAME, "passed": true|false, "fraction": 0..1, "message": "...", "max_err": x,
 *    "time_ms": t|null, "solution_ms": t|null}
 *
 * and exits 0 (passed), 1 (failed), 2 (usage: a bug in grading.json) or 77 (needs a GPU).
 * The submission is not in this program: its kernel runs in the submission's own program
 * (grader_runner.h), reached through the channel (grader_rpc.h, grader_remote.c).
 * The checks it makes, in order: fresh inputs from --seed; the solution kernel runs first on the
 * same inputs, here, between NaN guard zones; the inputs are sent to the submission's program,
 * which surrounds them with NaN guard zones (on the simulator each input ends at an inaccessible
 * page: a read past its end stops that program with a line saying so), NaN-fills the outputs,
 * launches and sends back every buffer; the inputs and the guard zones must be unchanged
 * (compared with this program's own host copy); the output must match BOTH the C reference
 * (attn_reference, attn/check.h tolerance) and the solution's output; the log-sum-exp likewise.
 * Any NaN/inf fails, with a message saying where.
 */
#ifndef GRADER_CASE_H
#define GRADER_CASE_H

#include <stdbool.h>

#include "attn/cli.h"
#include "attn/problem.h"
#include "attn/reference.h"
#include "grader_rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grader_case {
    const char *name; /* --case NAME */
    bool perf;        /* --perf: time the submission against the solution (GPU only) */
    attn_cli cli;     /* shape flags, --seed, --amplitude, --scale (attn/cli.h) */
    attn_problem p;   /* the problem built from them */
} grader_case;

typedef struct grader_result {
    bool passed;
    double fraction;   /* share of the case's points earned, 0..1 */
    char message[640]; /* one line for the learner */
    double max_err;    /* vs the reference; < 0: not measured */
    double time_ms;    /* submission's median time; < 0: not measured */
    double solution_ms;
} grader_result;

/* Parses the command line: --case NAME (required), --perf, --json (accepted: the output is always
 * JSON) and the flags of attn/cli.h. Builds c->p (defaults: the example's simulator sizes; fp32).
 * On a usage error prints one line to stderr and returns ATTN_EXIT_USAGE; else 0. */
int grader_case_parse(grader_case *c, int argc, char **argv, const attn_example *ex);

/* Runs the check above for kernel id 1 of the submission (grader_remote_example(): the kernel
 * runs in the submission's own program) against kernel id 1 of the solution. mask: the
 * reference's mask on top of causality (NULL: none); block_mask: handed to both kernels in
 * attn_buffers.sparse (device arrays for the solution, and host_block_mask, the same on the host,
 * sent to the submission; both NULL for dense kernels; attn/sparse/block_mask.h). Fills r; returns
 * the exit status (0, 1, or 77 for a --perf case without a GPU, ATTN_EXIT_USAGE when the solution
 * refuses). */
struct attn_block_mask;
int grader_run_case(const grader_case *c, const attn_example *submission,
                    const attn_example *solution, const attn_mask *mask,
                    const struct attn_block_mask *block_mask,
                    const struct attn_block_mask *host_block_mask, grader_result *r);

/* ---- the submission, in its own program (grader_remote.c; channel: grader_rpc.h) ------------ */

/* What the submission's program answered to a launch: its CUDA error, and each buffer (Q, K, V,
 * O, LSE, then the extra ones in order) after the launch: the guard bytes before it, its data,
 * the guard bytes after it. */
#define GRADER_REMOTE_BUFFERS (5 + GRADER_RPC_MAX_EXTRA)
typedef struct grader_remote_answer {
    int error;
    char error_name[64], error_text[192];
    const unsigned char *lead[GRADER_REMOTE_BUFFERS], *data[GRADER_REMOTE_BUFFERS],
        *trail[GRADER_REMOTE_BUFFERS];
    size_t lead_bytes[GRADER_REMOTE_BUFFERS], trail_bytes[GRADER_REMOTE_BUFFERS];
} grader_remote_answer;

/* A buffer beyond Q, K, V, O and LSE (grader_rpc.h, LAUNCH): an input (its bytes sent, guarded
 * like Q) or an output (NaN-filled like O); the kernel finds their device addresses in order in
 * attn_buffers.args (void *const[]). name: for the runner's out-of-bounds message ("dO"). */
typedef struct grader_remote_extra {
    const char *name;
    bool input;
    const void *data; /* input: its bytes; output: NULL */
    size_t bytes;
} grader_remote_extra;

/* --rpc IN,OUT (grader_case_parse) connects the channel. */
void grader_remote_connect(int to_runner, int from_runner, const char *case_name);
/* The submission's registry as its program reports it: kernel 1, no launcher here. */
const attn_example *grader_remote_example(void);
bool grader_remote_is(const attn_kernel *k);
/* One launch of the submission's kernel 1 on these inputs (packed, the problem's dtype); the
 * answer stays valid until the next request. */
int grader_remote_launch(const attn_problem *p, const struct attn_block_mask *host_mask,
                         void *const packed[3], const size_t in_bytes[3], size_t o_bytes,
                         size_t lse_bytes, size_t guard, grader_remote_answer *a);
/* grader_remote_launch with n_extra (<= GRADER_RPC_MAX_EXTRA) extra buffers; the answer holds
 * them after LSE (index 5 on). */
int grader_remote_launch_extra(const attn_problem *p, const struct attn_block_mask *host_mask,
                               void *const packed[3], const size_t in_bytes[3], size_t o_bytes,
                               size_t lse_bytes, size_t guard, const grader_remote_extra *extra,
                               int n_extra, grader_remote_answer *a);
/* The median time of the last launch's configuration (GPU): 0, or 1. */
int grader_remote_time(double *ms);
/* What the submission's program answered to CONFIG (GRADER_SETUP_* of grader_rpc.h; 0 before
 * the first request). */
unsigned grader_remote_setup(void);
/* The submission's pattern predicate and block-mask builder (exercise 02), through the channel. */
int grader_remote_keep(int Lq, int Lk, int i, int j);
int grader_remote_build(struct attn_block_mask *m, const attn_problem *p, int block_q, int block_k);

/* A diagnosis for a wrong output: if it matches the reference under `mask` (instead of the
 * expected one), the failure message starts with `says`. Set before grader_run_case; (NULL, 0)
 * clears. The pointers must stay valid until then. */
typedef struct grader_hint {
    const attn_mask *mask;
    const char *says;
} grader_hint;
void grader_set_hints(const grader_hint *hints, int n);

/* A case program's main(): grader_case_parse, then check(c, r) with r zeroed (max_err, time_ms
 * and solution_ms not measured), then grader_emit with check's status. A usage error of the
 * command line is one line on stderr and ATTN_EXIT_USAGE, with no JSON line. */
int grader_case_main(int argc, char **argv, const attn_example *solution,
                     int (*check)(const grader_case *c, grader_result *r));

/* Prints r as the JSON line and returns status (pass-through, for `return grader_emit(...)`). */
int grader_emit(const grader_case *c, const grader_result *r, int status);

#ifdef __cplusplus
}
#endif
#endif /* GRADER_CASE_H */
