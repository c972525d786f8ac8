/* 01_mini_flash_case.c — Exercise 01's case program (the checker): one test case of a
 * mini_flash.cu submission, run in the submission's own program (01_mini_flash_runner.c), against
 * the C reference and the solution (grader/README.md, "Case programs"). grade.py starts both:
 *   grader_01_mini_flash_sim --case tail --seed 3 -B 1 -H 2 --lq 45 --lk 45 -D 32 --causal
 *                            --rpc TO_RUNNER,FROM_RUNNER */
#include "grader_case.h"

extern const attn_example mini_flash_example_solution; /* solutions/01_mini_flash, renamed */

int main(int argc, char **argv) {
    grader_case c;
    grader_result r;
    int status = grader_case_parse(&c, argc, argv, &mini_flash_example_solution);
    if (status != 0)
        return status;
    status = grader_run_case(&c, grader_remote_example(), &mini_flash_example_solution, NULL, NULL,
                             NULL, &r);
    return grader_emit(&c, &r, status);
}
