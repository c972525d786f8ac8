/* cp_dsa_inputs.c — DeepSeek sparse attention's inputs, seeded alike on every rank, and example
 * 05's pipeline on the whole problem on one device, the run the ranks' selection and output are
 * checked against (cp_dsa.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/device.h"
#include "attn/tensor.h"
#include "cp_dsa.h"

int cp_dsa_inputs_make(cp_dsa_inputs *in, const attn_problem *p, int HI, int DI, int K,
                       uint64_t seed) {
    memset(in, 0, sizeof *in);
    in->p = *p;
    in->HI = HI, in->DI = DI, in->K = K;
    const size_t rows = (size_t)p->B * p->Lq;
    in->q = malloc(attn_problem_q_elems(p) * sizeof(float) + 1);
    in->k = malloc(rows * p->D * sizeof(float) + 1);
    in->v = malloc(rows * p->D * sizeof(float) + 1);
    in->qi = malloc(rows * HI * DI * sizeof(float) + 1);
    in->ki = malloc(rows * DI * sizeof(float) + 1);
    in->w = malloc(rows * HI * sizeof(float) + 1);
    if (!in->q || !in->k || !in->v || !in->qi || !in->ki || !in->w)
        return 1;
    attn_fill_uniform(in->q, attn_problem_q_elems(p), seed, 0, 1.0f, p->dtype);
    attn_fill_uniform(in->k, rows * p->D, seed, 1, 1.0f, p->dtype);
    attn_fill_uniform(in->v, rows * p->D, seed, 2, 1.0f, p->dtype);
    attn_fill_uniform(in->qi, rows * HI * DI, seed, 3, 1.0f, p->dtype);
    attn_fill_uniform(in->ki, rows * DI, seed, 4, 1.0f, p->dtype);
    attn_fill_uniform(in->w, rows * HI, seed, 5, 1.0f / sqrtf((float)HI * DI), ATTN_F32);
    return 0;
}

void cp_dsa_inputs_free(cp_dsa_inputs *in) {
    free(in->q), free(in->k), free(in->v), free(in->qi), free(in->ki), free(in->w);
    memset(in, 0, sizeof *in);
}

int cp_dsa_one_device(const cp_dsa_inputs *in, float *o, float *lse, int32_t *sel) {
    const attn_problem *p = &in->p;
    const int B = p->B, L = p->Lq, D = p->D, HI = in->HI, DI = in->DI, K = in->K;
    const size_t rows = (size_t)B * L, nq = attn_problem_q_elems(p);
    const attn_dtype dt = p->dtype;
    void *staging = malloc(rows * HI * DI * 4 + nq * 4 + 16);
    void *dq = NULL, *dk = NULL, *dv = NULL, *dqi = NULL, *dki = NULL, *dw = NULL;
    CP_TRY(!staging || attn_device_upload(&dq, in->q, nq, dt, staging) ||
           attn_device_upload(&dk, in->k, rows * D, dt, staging) ||
           attn_device_upload(&dv, in->v, rows * D, dt, staging) ||
           attn_device_upload(&dqi, in->qi, rows * HI * DI, dt, staging) ||
           attn_device_upload(&dki, in->ki, rows * DI, dt, staging) ||
           attn_device_upload(&dw, in->w, rows * HI, ATTN_F32, staging));
    float *logits = attn_device_alloc(rows * L * sizeof(float) + 16);
    int32_t *dsel = attn_device_alloc(rows * K * sizeof(int32_t) + 16);
    void *dout = attn_device_alloc(nq * attn_dtype_size(dt) + 16);
    float *dlse = attn_device_alloc(attn_problem_lse_elems(p) * sizeof(float) + 16);
    CP_TRY(!logits || !dsel || !dout || !dlse);
    ds_args a;
    memset(&a, 0, sizeof a);
    a.p = p;
    a.index_heads = HI, a.index_dim = DI, a.topk = K, a.chunk = L;
    a.q_index = dqi, a.k_index = dki, a.w = dw, a.logits = logits, a.sel = dsel;
    a.q = dq, a.k = dk, a.v = dv, a.o = dout, a.lse = dlse;
    ds_launch_pipeline(&a, 0);
    CP_TRY(attn_cuda_report(cudaDeviceSynchronize(), "example 05's pipeline", __FILE__, __LINE__) ||
           attn_to_host(staging, dout, nq * attn_dtype_size(dt)) ||
           attn_to_host(lse, dlse, attn_problem_lse_elems(p) * sizeof(float)) ||
           attn_to_host(sel, dsel, rows * K * sizeof(int32_t)));
    attn_unpack(o, staging, nq, dt);
    attn_device_free(dq), attn_device_free(dk), attn_device_free(dv), attn_device_free(dqi);
    attn_device_free(dki), attn_device_free(dw), attn_device_free(logits), attn_device_free(dsel);
    attn_device_free(dout), attn_device_free(dlse);
    free(staging);
    return 0;
}
