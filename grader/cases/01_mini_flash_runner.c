/* 01_mini_flash_runner.c — Exercise 01's submission program: the learner's mini_flash.cu and the
 * channel to the checker (grader_runner.h); no reference, no solution. */
#include "grader_runner.h"

extern const attn_example mini_flash_example; /* the submission's mini_flash.cu */

int main(int argc, char **argv) {
    grader_runner_hooks h = {&mini_flash_example, NULL, NULL};
    return grader_runner_main(argc, argv, &h);
}
