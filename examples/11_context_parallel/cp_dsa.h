/* cp_dsa.h — lesson code: DeepSeek sparse attention (example 05) across P ranks. Each rank
 * holds its query positions (the ring's or the zigzag's chunks) and, for those positions, the
 * indexer's queries, head weights and keys and the attention's K and V (one shared head, MQA:
 * DeepSeek's MLA in its absorbed form). The indexer key of every position is needed by every later
 * query, so:
 *   1. all-gather of the indexer keys (one D_I row per position);
 *   2. per query chunk: example 05's indexer and radix top-k over the GLOBAL causal prefix, keys
 *      [0, chunk end): the selection holds global positions;
 *   3. K and V of the selected positions fetched from their owners (three all-to-alls: how many
 *      rows, which, the rows), or of every position all-gathered;
 *   4. example 05's sparse_mma over the selection.
 * Example 05's kernels are called through its header, not copied. fp16/bf16, as its kernels. */
#ifndef CP_DSA_H
#define CP_DSA_H

#include <stdint.h>

#include "attn/problem.h"
#include "cp_layout.h"
#include "cp_ring.h"
#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The whole problem's inputs, the same on every rank (seeded), fp32 values already rounded to
 * the dtype; a rank reads only its own positions' rows (the others reach it by the transport). */
typedef struct cp_dsa_inputs {
    attn_problem p;     /* B, H, L (Lq = Lk), D, dtype f16/bf16, causal */
    int HI, DI, K;      /* indexer heads, indexer head dimension, top-k */
    float *q;           /* [B, H, L, D] */
    float *k, *v;       /* [B, L, D]: one key/value head shared by the H query heads */
    float *qi, *ki, *w; /* [B*L, HI, DI], [B*L, DI], [B*L, HI] */
} cp_dsa_inputs;

/* Streams as example 05's (Q, K, V: 0-2; q_I, k_I: 3-4; w: 5, scaled by (HI DI)^-1/2). 0 or 1. */
int cp_dsa_inputs_make(cp_dsa_inputs *in, const attn_problem *p, int HI, int DI, int K,
                       uint64_t seed);
void cp_dsa_inputs_free(cp_dsa_inputs *in);

/* This rank's share: out->o, out->lse per chunk as fp32 [B, H, len, D], [B, H, len] (device),
 * sel[c] the selection of each of its queries as floats [B, H, len, K] (the same for every head;
 * -1 past the visible keys); bytes[0] indexer-key bytes received, bytes[1] the K/V bytes of the
 * all-gather, bytes[2] those of the fetch of the selected rows (the one not run counted: what it
 * would have received). fetch_kv: fetch, else all-gather. plant: a bug the checks must catch,
 * CP_DSA_PLANT_LOCAL_INDEX (the other ranks' indexer keys left zero) or CP_DSA_PLANT_NO_FETCH
 * (the fetched rows dropped), else 0. 0 or 1. */
enum { CP_DSA_PLANT_LOCAL_INDEX = 1, CP_DSA_PLANT_NO_FETCH = 2 };
int cp_dsa_forward(cp_transport *t, cp_strategy s, const cp_dsa_inputs *in, bool fetch_kv,
                   int plant, cp_result *out, float *sel[CP_MAX_CHUNKS], double bytes[3]);

/* Example 05's pipeline on the whole problem on one device: o, lse (fp32 host, the attention's
 * layouts) and sel [B*L, K]. 0 or 1. */
int cp_dsa_one_device(const cp_dsa_inputs *in, float *o, float *lse, int32_t *sel);

#ifdef __cplusplus
}
#endif
#endif /* CP_DSA_H */
