/* inputs_check.c — reads the Q, K, V an example dumped (--dump DIR) after a run with
 * --inputs opposed --amplitude A, and checks that the example honoured both shared input flags:
 * every value of Q and V in [0, A], of K in [-A, 0] (opposed signs), and each tensor's largest
 * magnitude above A / 2 (the amplitude applied, not the default 1: with A = 3 a tensor drawn in
 * [-1, 1) fails). The tensors: q, k, v (the harness's dump and examples 05 and 07), or q,
 * k_pages, v_pages (example 09's paged caches, whose slots no sequence holds are NaN and not
 * looked at; a latent cache has no v_pages: its K is its V).
 * Prints one line per tensor; exit 0 when every check passes, 1 otherwise, 2 on bad usage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/tensor.h"

/* sign: +1 (values >= 0), -1 (values <= 0). 0 checked, 1 failed, -1 file missing. */
static int check(const char *dir, const char *name, int sign, double amp) {
    char path[1024], why[256];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    fclose(f);
    float *x = NULL;
    int64_t dims[4] = {0, 0, 0, 0};
    int ndim = 0;
    if (attn_tensor_load(path, &x, &ndim, dims, 4, why, sizeof why) != 0) {
        printf("%s: %s\n", name, why);
        return 1;
    }
    int64_t n = 1, wrong_sign = 0, too_large = 0;
    for (int d = 0; d < ndim; ++d)
        n *= dims[d];
    double largest = 0.0;
    const int pool = strstr(name, "_pages") != NULL; /* NaN: a slot no sequence holds */
    for (int64_t e = 0; e < n; ++e) {
        const double v = x[e];
        if (pool && isnan(v))
            continue;
        wrong_sign += !(sign * v >= 0.0); /* NaN counts as wrong */
        too_large += !(fabs(v) <= amp);
        largest = fabs(v) > largest ? fabs(v) : largest;
    }
    free(x);
    const int ok = n > 0 && wrong_sign == 0 && too_large == 0 && largest > amp / 2;
    printf("%-8s %9lld values: %lld of the wrong sign (want %s), %lld beyond %g, largest |x| %.3g "
           "(want > %g): %s\n",
           name, (long long)n, (long long)wrong_sign, sign > 0 ? ">= 0" : "<= 0",
           (long long)too_large, amp, largest, amp / 2, ok ? "ok" : "FAIL");
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc != 3 || atof(argv[2]) <= 0.0) {
        fprintf(stderr, "usage: inputs_check DIR AMPLITUDE\n");
        return 2;
    }
    const double amp = atof(argv[2]);
    const char *dir = argv[1];
    int bad = 0;
    int rq = check(dir, "q", +1, amp);
    int rk = check(dir, "k", -1, amp);
    if (rk < 0)
        rk = check(dir, "k_pages", -1, amp);
    int rv = check(dir, "v", +1, amp);
    if (rv < 0)
        rv = check(dir, "v_pages", +1, amp);
    bad = (rq != 0) + (rk != 0) + (rv < 0 && rk < 0) + (rv > 0);
    if (rq < 0 || rk < 0)
        printf("missing: %s%s\n", rq < 0 ? "q.bin " : "", rk < 0 ? "k.bin (or k_pages.bin)" : "");
    printf("%s\n", bad ? "FAIL" : "inputs honoured");
    return bad ? 1 : 0;
}
