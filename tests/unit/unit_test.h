/* unit_test.h — the few checks the harness's unit tests share, and unit_varlen_problem.
 *
 * Each CHECK counts one passed or failed assertion and, on failure, prints where and what (on
 * stdout, so that a test may redirect stderr to inspect the messages of the code under test).
 * A test program ends with `return unit_finish();`, which prints "N passed, M failed" and
 * returns non-zero when anything failed (CTest reads the exit status). */
#ifndef ATTN_UNIT_TEST_H
#define ATTN_UNIT_TEST_H

#include "attn/problem.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int unit_passed, unit_failed;

/* A packed variable-length problem: attn_problem_init's (Lq, Lk the longest sequences) with the
 * prefix sums cu_q and cu_k. */
static inline attn_problem unit_varlen_problem(int B, int H, int Lq, int Lk, int D, const int *cu_q,
                                               const int *cu_k) {
    attn_problem p;
    attn_problem_init(&p, B, H, Lq, Lk, D);
    p.cu_seqlens_q = cu_q;
    p.cu_seqlens_k = cu_k;
    return p;
}

static bool unit_check(bool ok, const char *file, int line, const char *what) {
    if (ok) {
        unit_passed++;
    } else {
        unit_failed++;
        printf("%s:%d: FAILED: %s\n", file, line, what);
    }
    return ok;
}

#define CHECK(cond) unit_check((cond), __FILE__, __LINE__, #cond)

/* Integer equality, printing both values on failure. */
#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long unit_a_ = (long long)(a), unit_b_ = (long long)(b);                              \
        if (!unit_check(unit_a_ == unit_b_, __FILE__, __LINE__, #a " == " #b))                     \
            printf("    %lld != %lld\n", unit_a_, unit_b_);                                        \
    } while (0)

/* |a - b| <= tol, NaN-safe, printing both values on failure. */
#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double unit_a_ = (double)(a), unit_b_ = (double)(b);                                       \
        if (!unit_check(fabs(unit_a_ - unit_b_) <= (tol), __FILE__, __LINE__,                      \
                        "|" #a " - " #b "| <= " #tol))                                             \
            printf("    %.9g vs %.9g\n", unit_a_, unit_b_);                                        \
    } while (0)

/* haystack contains needle, printing the haystack on failure. */
#define CHECK_CONTAINS(haystack, needle)                                                           \
    do {                                                                                           \
        const char *unit_h_ = (haystack);                                                          \
        if (!unit_check(strstr(unit_h_, (needle)) != NULL, __FILE__, __LINE__,                     \
                        #haystack " contains " #needle))                                           \
            printf("    in: %s\n", unit_h_);                                                       \
    } while (0)

/* What a function under test printed to f (a tmpfile()), at most len - 1 bytes, as a string in
 * text; closes f. */
static inline void unit_read_back(FILE *f, char *text, size_t len) {
    rewind(f);
    text[fread(text, 1, len - 1, f)] = '\0';
    fclose(f);
}

static int unit_finish(void) {
    printf("%d passed, %d failed\n", unit_passed, unit_failed);
    return unit_failed != 0;
}

#endif /* ATTN_UNIT_TEST_H */
