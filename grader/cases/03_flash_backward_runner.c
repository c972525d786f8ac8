/* 03_flash_backward_runner.c — Exercise 03's submission program: the learner's flash_backward.cu
 * and the channel to the checker (grader_runner.h); no reference, no solution. The backward's
 * tensors beyond Q, K, V arrive as the launch's extra buffers, in attn_buffers.args. */
#include "flash_backward.h"
#include "grader_runner.h"

int main(int argc, char **argv) {
    grader_runner_hooks h = {&flash_backward_example, NULL, NULL};
    return grader_runner_main(argc, argv, &h);
}
