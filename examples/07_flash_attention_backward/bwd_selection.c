/* bwd_selection.c — example 07's seeded top-k selection (the gradients' reference is the
 * harness's attn_reference_backward, common/src/reference_backward.c). */
#include "attn/tensor.h"
#include "flash_bwd.h"

/* ---- the top-k selection --------------------------------------------------------------------- */

void bwd_random_selection(const attn_problem *p, int K, uint64_t seed, int32_t *sel) {
    for (int b = 0; b < p->B; ++b)
        for (int i = 0; i < attn_problem_seq_q(p, b); ++i) {
            const int64_t row = attn_problem_token_index(p, true, b, i);
            int32_t *out = sel + row * K;
            const int n = attn_problem_row_keys(p, b, i);
            int need = n < K ? n : K, got = 0;
            /* selection sampling (Knuth, TAOCP 3.4.2, Algorithm S): key t is taken with
             * probability need / (n - t); the keys come out ascending */
            for (int t = 0; t < n && need > 0; ++t) {
                const double u =
                    0.5 * ((double)attn_uniform(seed, 6, (uint64_t)row * 1000003u + t) + 1.0);
                if (u * (n - t) < need) {
                    out[got++] = t;
                    --need;
                }
            }
            for (; got < K; ++got)
                out[got] = -1;
        }
}
