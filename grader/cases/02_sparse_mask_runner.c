/* 02_sparse_mask_runner.c — Exercise 02's submission program: the learner's sparse_mask.cu (the
 * kernel, the pattern, the builder) and the channel to the checker (grader_runner.h). */
#include "grader_runner.h"
#include "sparse_mask.h"

extern const attn_example sparse_mask_example;

int main(int argc, char **argv) {
    grader_runner_hooks h = {&sparse_mask_example, sparse_mask_keep, sparse_mask_build_block_mask};
    return grader_runner_main(argc, argv, &h);
}
