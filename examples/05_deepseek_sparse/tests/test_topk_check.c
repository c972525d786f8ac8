/* test_topk_check.c — example 05's top-k tie rule (ds_check_selection) accepts every right
 * selection and rejects each kind of wrong one, so that the example's top-k checks can fail.
 * Exit 0 when every case gives the expected verdict, else 1 naming the case. */
#include <math.h>
#include <stdio.h>

#include "deepseek_sparse.h"

static int failures = 0;

static void expect(const char *name, const float *scores, int n, int topk, const int32_t *sel,
                   int want_right) {
    char why[200] = "";
    const int right = ds_check_selection(scores, n, topk, sel, why, sizeof why) == 0;
    printf("%-28s %s%s%s\n", name, right ? "right" : "wrong", right ? "" : ": ", why);
    if (right != want_right) {
        printf("  FAIL: expected %s\n", want_right ? "right" : "wrong");
        failures++;
    }
}

int main(void) {
    const float s[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, 2.0f};
    const float eq[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    const float ninf[3] = {-INFINITY, -INFINITY, -INFINITY};
    /* top-3 of s: 3.0 (1), 3.0 (3) and one of the two 2.0 (4 or 5): ties may go either way */
    expect("top3 lowest tie", s, 6, 3, (const int32_t[]){1, 3, 4}, 1);
    expect("top3 other tie", s, 6, 3, (const int32_t[]){1, 3, 5}, 1);
    expect("equal scores", eq, 4, 2, (const int32_t[]){0, 3}, 1);
    expect("-inf row", ninf, 3, 2, (const int32_t[]){1, 2}, 1);
    expect("k > visible", s, 2, 4, (const int32_t[]){0, 1, -1, -1}, 1);
    expect("k = visible", s, 3, 3, (const int32_t[]){0, 1, 2}, 1);
    expect("no visible key", s, 0, 2, (const int32_t[]){-1, -1}, 1);
    /* wrong ones */
    expect("score below k-th", s, 6, 3, (const int32_t[]){0, 1, 3}, 0);
    expect("not ascending", s, 6, 3, (const int32_t[]){3, 1, 4}, 0);
    expect("duplicate", s, 6, 3, (const int32_t[]){1, 1, 3}, 0);
    expect("missing key (-1)", s, 6, 3, (const int32_t[]){1, 3, -1}, 0);
    expect("out of range", s, 4, 3, (const int32_t[]){1, 3, 4}, 0);
    expect("k > visible, no -1", s, 2, 3, (const int32_t[]){0, 1, 1}, 0);
    expect("negative index", eq, 4, 2, (const int32_t[]){-2, 1}, 0);
    printf("%s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
