/* 02_sparse_mask_local.c — the channel's API (grader_case.h, "the submission, in its own
 * program") answered in process, for the exercise's own check program sparse_mask_check
 * (exercises/02_sparse_mask/CMakeLists.txt): there the learner's file is linked beside the case
 * program, nothing is sandboxed and nothing is graded, so no second process is needed. The grader
 * never links this file: it runs the submission in its own program (grader_remote.c). */
#include <stdio.h>

#include "grader_case.h"
#include "sparse_mask.h"

void grader_remote_connect(int to_runner, int from_runner, const char *case_name) {
    (void)to_runner;
    (void)from_runner;
    (void)case_name;
}

const attn_example *grader_remote_example(void) { return &sparse_mask_example; }

bool grader_remote_is(const attn_kernel *k) {
    (void)k;
    return false; /* kernel 1 is launched in process */
}

int grader_remote_launch(const attn_problem *p, const struct attn_block_mask *host_mask,
                         void *const packed[3], const size_t in_bytes[3], size_t o_bytes,
                         size_t lse_bytes, size_t guard, grader_remote_answer *a) {
    (void)p, (void)host_mask, (void)packed, (void)in_bytes, (void)o_bytes, (void)lse_bytes;
    (void)guard, (void)a;
    return -1; /* never called: grader_remote_is is false */
}

unsigned grader_remote_setup(void) { return 0; }

int grader_remote_time(double *ms) {
    (void)ms;
    return 1;
}

int grader_remote_keep(int Lq, int Lk, int i, int j) { return sparse_mask_keep(Lq, Lk, i, j); }

int grader_remote_build(struct attn_block_mask *m, const attn_problem *p, int block_q,
                        int block_k) {
    return sparse_mask_build_block_mask(m, p, block_q, block_k);
}
