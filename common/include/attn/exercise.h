/* attn/exercise.h — an exercise's registry in one declaration (exercises/NN_name/<file>.cu and its
 * solution): one fp32 kernel version, causal supported, D up to max_d. It stands at the end of
 * the file the learner edits, out of the way of the kernel they write:
 *
 *   ATTN_EXERCISE(mini_flash_example, "01_mini_flash", "Exercise 01: ... (fp32)",
 *                 ATTN_VERSION(1, "mini_flash", "what the version does"), launch_mini_flash,
 *                 MF_MAX_D, .gpu = {4, 8, 1024, 64}, .sim = {1, 2, 256, 64});
 *
 * declares the registry row `static const attn_kernel mini_flash_example_kernels[1]` and the
 * example `extern "C" const attn_example mini_flash_example` (the name the exercise's main.c and
 * the grader link), whose default sizes (B, H, L, D) are the designated initialisers at the end.
 * C++ only: an exercise's kernel file is a .cu. */
#ifndef ATTN_EXERCISE_H
#define ATTN_EXERCISE_H

#include "attn/problem.h"

#define ATTN_EXERCISE(example, name_, summary_, version, launcher, max_d_, ...)                    \
    static const attn_kernel example##_kernels[] = {                                               \
        {version, .launch = (launcher),                                                            \
         .req = {.dtypes = ATTN_DTYPE_BIT(ATTN_F32), .max_d = (max_d_), .causal = true}}};         \
    extern "C" const attn_example example = {.name = (name_),                                      \
                                             .summary = (summary_),                                \
                                             ATTN_KERNELS(example##_kernels),                      \
                                             .defaults = {__VA_ARGS__}}

#endif /* ATTN_EXERCISE_H */
