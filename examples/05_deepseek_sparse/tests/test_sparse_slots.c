/* test_sparse_slots.c — example 05's attention kernels (sparse_mma, sparse_gather) on selections
 * written by hand: -1 slots (no key) in the first slots of a row, between keys, a whole row of
 * -1, and rows selecting more than one tile of 64 keys, checked against the harness's reference
 * with the selection's keys as its mask (ds_selection_csr), output and log-sum-exp.
 *
 * The top-k kernels only ever write "keys ascending, then -1", so the program's cases put -1 in
 * a row's last slots only; a kernel that treated a -1 slot as a key would pass them whenever its
 * first slots come first. Here -1 stands anywhere in a row. The inputs have opposed signs
 * (attn_inputs_apply, attn/tensor.h: every score negative), so that a -1 slot taken as a key (a
 * zero-filled row, score 0) would outweigh every selected key: the error is of the order of the
 * output, not within the fp16 tolerance. H = 17 puts two warps in a sparse_mma block, and 70
 * slots make two tiles of 64.
 *
 * Exit status: 0 when both kernels pass every row, 1 otherwise, 77 on a gpu build without a GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/check.h"
#include "attn/device.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "deepseek_sparse.h"

enum { B = 1, H = 17, L = 80, D = 64, K = 70 };

/* Query i's selection: ascending keys with -1 slots in between, by row kind. */
static void make_row(int i, int32_t *row) {
    for (int s = 0; s < K; ++s)
        row[s] = -1;
    switch (i % 5) {
    case 0: /* -1 in the first 3 slots, then 40 keys */
        for (int s = 3; s < 43; ++s)
            row[s] = 2 * (s - 3) + i % 2;
        break;
    case 1: /* keys and -1 alternating over two tiles of slots */
        for (int s = 0; s < K; s += 2)
            row[s] = s + i % 3;
        break;
    case 2: /* every slot -1: no key, output 0 and LSE -inf */
        break;
    case 3: /* -1 in slot 0 only, then 69 keys: the second tile of slots holds keys too */
        for (int s = 1; s < K; ++s)
            row[s] = s + (i % 2) * 10;
        break;
    default: /* one key, in the second tile of slots, after 66 -1 slots */
        row[66] = (7 * i) % L;
        break;
    }
}

static int check_kernel(const char *name, void (*launch)(const ds_args *, cudaStream_t),
                        const ds_args *a, const attn_problem *p, const float *ref,
                        const float *ref_lse, const float *lowp, void *staging, float *out,
                        float *lse) {
    const size_t q_elems = attn_problem_q_elems(p), nl = attn_problem_lse_elems(p);
    if (attn_device_fill_nan(a->o, q_elems * 2) || attn_device_fill_nan(a->lse, nl * 4))
        return 1;
    launch(a, NULL);
    if (cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess) {
        printf("FAIL  %s: the launch failed\n", name);
        return 1;
    }
    if (attn_to_host(staging, a->o, q_elems * 2) || attn_to_host(lse, a->lse, nl * 4))
        return 1;
    attn_unpack(out, staging, q_elems, p->dtype);
    const attn_check_result co = attn_check_output(p, out, ref, lowp, 1.0);
    const attn_check_result cl = attn_check_lse_at(p, lse, ref_lse, 1.0);
    printf("%s  %s: output max error %.3g (bound %.3g), LSE %s\n",
           co.pass && cl.pass ? "PASS" : "FAIL", name, co.max_abs_err, co.bound,
           cl.pass ? "right" : "wrong");
    return co.pass && cl.pass ? 0 : 1;
}

int main(void) {
    attn_device_info dev;
    if (attn_device_init_reported(&dev) != 0)
        return ATTN_EXIT_NO_GPU;
    attn_problem p;
    attn_problem_init(&p, B, H, L, L, D);
    p.dtype = ATTN_F16;
    const size_t q_elems = attn_problem_q_elems(&p), k_elems = attn_problem_k_elems(&p);
    const size_t k1_elems = (size_t)L * D, nl = attn_problem_lse_elems(&p);
    float *q = malloc(q_elems * 4), *k1 = malloc(k1_elems * 4), *v1 = malloc(k1_elems * 4);
    float *kx = malloc(k_elems * 4), *vx = malloc(k_elems * 4);
    float *ref = malloc(q_elems * 4), *lowp = malloc(q_elems * 4), *out = malloc(q_elems * 4);
    float *ref_lse = malloc(nl * 4), *lse = malloc(nl * 4);
    int32_t *sel = malloc((size_t)L * K * 4), *col = malloc((size_t)L * K * 4);
    int64_t *row_ptr = malloc(((size_t)L + 1) * 8);
    void *staging = malloc(q_elems * 2);
    if (!q || !k1 || !v1 || !kx || !vx || !ref || !lowp || !out || !ref_lse || !lse || !sel ||
        !col || !row_ptr || !staging) {
        printf("error: out of host memory\n");
        return 1;
    }
    attn_fill_uniform(q, q_elems, 5, 0, 1.0f, p.dtype);
    attn_fill_uniform(k1, k1_elems, 5, 1, 1.0f, p.dtype);
    attn_fill_uniform(v1, k1_elems, 5, 2, 1.0f, p.dtype);
    attn_inputs_apply(ATTN_INPUTS_OPPOSED, q, q_elems, k1, k1_elems, v1, k1_elems);
    for (int h = 0; h < H; ++h) /* the reference's MHA view: the one K/V head in every head */
        for (int t = 0; t < L; ++t) {
            memcpy(kx + attn_problem_row_offset(&p, false, 0, h, t), k1 + (size_t)t * D, D * 4);
            memcpy(vx + attn_problem_row_offset(&p, false, 0, h, t), v1 + (size_t)t * D, D * 4);
        }
    for (int i = 0; i < L; ++i)
        make_row(i, sel + (size_t)i * K);
    ds_selection_csr(&p, K, sel, row_ptr, col);
    attn_mask mask = {ATTN_MASK_CSR, NULL, NULL, row_ptr, col};
    if (attn_reference_rows(&p, &mask, q, kx, vx, ref, ref_lse, NULL) != 0 ||
        attn_reference_lowp_rows(&p, &mask, q, kx, vx, lowp, NULL) != 0) {
        printf("error: the reference failed\n");
        return 1;
    }

    void *d_q = attn_device_alloc(q_elems * 2), *d_k = attn_device_alloc(k1_elems * 2);
    void *d_v = attn_device_alloc(k1_elems * 2), *d_o = attn_device_alloc(q_elems * 2);
    float *d_lse = attn_device_alloc(nl * 4);
    int32_t *d_sel = attn_device_alloc((size_t)L * K * 4);
    if (!d_q || !d_k || !d_v || !d_o || !d_lse || !d_sel)
        return 1;
    attn_pack(staging, q, q_elems, p.dtype);
    int rc = attn_to_device(d_q, staging, q_elems * 2);
    attn_pack(staging, k1, k1_elems, p.dtype);
    rc |= attn_to_device(d_k, staging, k1_elems * 2);
    attn_pack(staging, v1, k1_elems, p.dtype);
    rc |= attn_to_device(d_v, staging, k1_elems * 2);
    rc |= attn_to_device(d_sel, sel, (size_t)L * K * 4);
    if (rc)
        return 1;
    const ds_args a = {
        .p = &p, .topk = K, .sel = d_sel, .q = d_q, .k = d_k, .v = d_v, .o = d_o, .lse = d_lse};
    int failed = check_kernel("sparse_mma", ds_launch_sparse_mma, &a, &p, ref, ref_lse, lowp,
                              staging, out, lse);
    failed |= check_kernel("sparse_gather", ds_launch_sparse_gather, &a, &p, ref, ref_lse, lowp,
                           staging, out, lse);
    printf("%s\n", failed ? "FAIL" : "PASS");
    void *device[] = {d_q, d_k, d_v, d_o, d_lse, d_sel};
    for (size_t n = 0; n < sizeof device / sizeof device[0]; ++n)
        attn_device_free(device[n]);
    void *host[] = {q, k1, v1, kx, vx, ref, lowp, out, ref_lse, lse, sel, col, row_ptr, staging};
    for (size_t n = 0; n < sizeof host / sizeof host[0]; ++n)
        free(host[n]);
    return failed ? 1 : 0;
}
