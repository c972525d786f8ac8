/* grader/cases/grader_runner.h — the submission's program (grader/README.md, "Case programs").
 * It links the learner's file, the harness's device layer and nothing that judges: no reference,
 * no checker, no solution. It answers the checker's requests on the channel of grader_rpc.h
 * (runs kernel 1 on the inputs it is sent, evaluates the learner's host functions) and decides
 * nothing; whatever it prints is not read by the grader. An exercise's runner is a main() that
 * names the learner's symbols:
 *   grader_runner_hooks h = {&mini_flash_example, NULL, NULL};
 *   return grader_runner_main(argc, argv, &h);
 * Each input buffer ends at an inaccessible page on the simulator: a read past the end of Q, K
 * or V stops the program with a line naming the input, the distance and the simulated thread. */
#ifndef GRADER_RUNNER_H
#define GRADER_RUNNER_H

#include "attn/problem.h"
#include "attn/sparse/block_mask.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grader_runner_hooks {
    const attn_example *example;               /* the learner's registry: kernel id 1 is graded */
    int (*keep)(int Lq, int Lk, int i, int j); /* a pattern predicate (NULL: none) */
    int (*build)(attn_block_mask *m, const attn_problem *p, int block_q, int block_k);
} grader_runner_hooks;

/* Serves requests from --rpc IN,OUT until the checker closes the channel. Returns 0, or 2 on a
 * bad command line. */
int grader_runner_main(int argc, char **argv, const grader_runner_hooks *hooks);

/* "block (x,y,z) thread (x,y,z)" of the simulated thread running on this OS thread, or "" (a GPU
 * build); grader_runner_sim.cu. */
void grader_runner_where(char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* GRADER_RUNNER_H */
