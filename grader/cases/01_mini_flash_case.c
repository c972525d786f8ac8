/* 01_mini_flash_case.c — Exercise 01's case program (the checker): one test case of a
 * mini_flash.cu submission, run in the submission's own program (01_mini_flash_runner.c), against
 * the C reference and the solution (grader/README.md, "Case programs"). grade.py starts both:
 *   grader_01_mini_flash_sim --case tail --seed 3 -B 1 -H 2 --lq 45 --lk 45 -D 32 --causal
 *                            --rpc TO_RUNNER,FROM_RUNNER */
#include "grader_case.h"

extern const attn_example mini_flash_example_solution; /* solutions/01_mini_flash, renamed */

static int check(const grader_case *c, grader_result *r) {
    return grader_run_case(c, grader_remote_example(), &mini_flash_example_solution, NULL, NULL,
                           NULL, r);
}

int main(int argc, char **argv) {
    return grader_case_main(argc, argv, &mini_flash_example_solution, check);
}
