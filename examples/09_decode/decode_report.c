/* decode_report.c — what example 09 reports about a run (attn/example.h's report hooks): the
 * host bytes the driver checks before allocating, each version's FLOPs and modelled bytes, its
 * record in the results file, the --dump files and the lines after the table. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../05_deepseek_sparse/deepseek_sparse.h"
#include "attn/check.h"
#include "attn/device.h"
#include "attn/tensor.h"
#include "decode_stages.h"

/* What dec_setup allocates on the host (decode_stages.c), for the driver's check before any of it
 * is: the inputs in fp32, the pools before and after the append, the contiguous cache, the dense
 * and sparse references (O, LSE, the same-precision O), what is read back and the staging buffer
 * (packed Q, q_I and new rows up, O and a pool back), gqa's copy; on the simulator, whose device
 * memory is host memory, the device's copies too (but the split partials, whose count the device
 * decides). Latent: no V, no contiguous cache, no index-key pools. */
double dec_host_bytes(void *state, const attn_problem *p) {
    const dec_state *s = of(state);
    const double dz = (double)attn_dtype_size(p->dtype), f = sizeof(float), lat = s->latent;
    const double total_k = s->cu_k[s->B], rows = (double)s->B * s->Lq * s->H;
    const double tok = (double)s->B * s->Lq, HkD = (double)s->H_kv * s->D, Dv = s->Dv;
    const double QI = tok * s->opt.index_heads * s->opt.index_dim, DI = s->opt.index_dim;
    const double slots = (double)s->num_pages * s->P;
    const double inputs = rows * s->D * f + total_k * HkD * f * (2 - lat) + QI * f +
                          total_k * DI * f + tok * s->opt.index_heads * f;
    const double pools = slots * HkD * dz * (4 - 2 * lat) + (1 - lat) * slots * DI * dz * 2;
    const double contiguous = (1 - lat) * 2.0 * s->B * s->H_kv * (double)s->L_cap * s->D * dz;
    const double staging = fmax(fmax(rows * s->D, QI), slots * fmax(HkD, DI)) * dz;
    const double outputs = rows * Dv * (f + dz) + staging + rows * f * 2 + tok * s->L_cap * f +
                           tok * s->k_eff * 8.0 + 2 * rows * (2 * Dv + 1) * f;
    const double device = slots * (HkD * (2 - lat) + (1 - lat) * DI) * dz + contiguous / 2 +
                          rows * (s->D + Dv) * dz + tok * s->L_cap * f;
    /* --fp8: the dequantised K and V, the FP8 pools (codes, scales) before and after the append
     * and on the device, the reference over the dequantised cache */
    const double row8 = lat ? DEC_FP8_LATENT_BYTES : HkD, codes = slots * (row8 + 4 * s->H_kv);
    const double fp8 = total_k * HkD * f * 2 + codes * (2 - lat) * (2 + attn_on_simulator()) +
                       rows * (2 * Dv + 1) * f;
    return inputs + pools + contiguous + outputs + (attn_on_simulator() ? device : 0.0) +
           (s->opt.fp8 ? fp8 : 0.0);
}

/* --fp8: the codes and scales the attention reads, once per row tile. */
static double fp8_cache_bytes(const dec_state *s) {
    return (double)s->cu_k[s->B] * fp8_bytes_per_token(s) *
           ((s->Lq * (s->H / s->H_kv) + DEC_ROWS - 1) / DEC_ROWS);
}

/* ---- FLOPs, bytes, records, dump, the lines after the table ---------------------------------- */

/* Sum over the new tokens of what each sees, capped at cap (0: no cap). */
static double seen_keys(const dec_state *s, int cap) {
    double n = 0.0;
    for (int b = 0; b < s->B; ++b)
        for (int i = 0; i < s->Lq; ++i) {
            const int v = visible(s, b, i);
            n += cap > 0 && v > cap ? cap : v;
        }
    return n;
}

double dec_flops(void *state, const attn_kernel *k) {
    const dec_state *s = of(state);
    switch (k->stage) {
    case DEC_STAGE_ATTENTION: /* QK^T and PV: 2 D + 2 D_v flops per (row, key) */
        return 2.0 * seen_keys(s, 0) * s->H * (s->D + s->Dv);
    case DEC_STAGE_SPARSE:
        return 4.0 * seen_keys(s, s->k_eff) * s->H * s->D;
    case DEC_STAGE_INDEXER: /* H_I dot products of D_I per (token, key) */
        return 2.0 * seen_keys(s, 0) * s->opt.index_heads * s->opt.index_dim;
    default:
        return 0.0;
    }
}

/* The split count kernel k runs with (1: versions without split-KV). */
static int splits_of(const dec_state *s, const attn_kernel *k) {
    return named(k, "split_kv") ? s->run.splits_split_kv
           : named(k, "gqa") || named(k, "paged") || named(k, "latent") || k->stage == DEC_STAGE_FP8
               ? s->run.splits_tiled
           : named(k, "sparse") ? s->run.splits_sparse
                                : 1;
}

/* README.md, "Bytes per decoded token": what each version must move, counted from its loops
 * (requests to global memory, as the simulator's profile counts them). */
static double model_bytes(const dec_state *s, const attn_kernel *k) {
    const double dz = (double)s->dsize, D = s->D, Dv = s->Dv, rows = (double)rows_of(s);
    const int g = s->H / s->H_kv, tiles = (s->Lq * g + DEC_ROWS - 1) / DEC_ROWS;
    const int tiles_g = (g + DEC_ROWS - 1) / DEC_ROWS, HI = s->opt.index_heads;
    const int DI = s->opt.index_dim;
    /* the block-table entries a warp's 32 keys fall in (lanes reading the same entry make one
     * request of it) */
    const double table = 4.0 * ((32 + s->P - 1) / s->P) / 32.0;
    /* q read by every split's block, O written once, the LSE; split partials written and read */
    double qo = 0.0, kv = 0.0;
    const int S = splits_of(s, k);
    if (named(k, "naive") || named(k, "split_kv")) {
        kv = seen_keys(s, 0) * s->H * 2.0 * D * dz;    /* every query head reads K and V itself */
    } else if (named(k, "gqa") || named(k, "paged")) { /* paged: the block table's entries too */
        /* once per K/V head and row tile: the most a row sees (the last new token's: all) */
        kv = (double)s->cu_k[s->B] * s->H_kv * tiles * (2.0 * D * dz + named(k, "paged") * table);
    } else if (named(k, "latent")) {
        /* the latent row (D = 576) once per row tile for all its heads: K and V are one read;
         * the block table's entries as paged */
        kv = (double)s->cu_k[s->B] * tiles * (D * dz + table);
    } else if (named(k, "sparse")) {
        kv = seen_keys(s, s->k_eff) * s->H_kv * tiles_g * (2.0 * D * dz + 4.0 + 4.0);
    } else if (k->stage == DEC_STAGE_FP8) {
        kv = fp8_cache_bytes(s);
    } else if (k->stage == DEC_STAGE_APPEND_FP8) { /* the rows in, codes and scales out */
        return s->tokens * ((s->latent ? D : 2.0 * s->H_kv * D) * dz + fp8_bytes_per_token(s) + 4);
    } else if (named(k, "append")) { /* latent: the one latent row */
        const double row = s->latent ? s->H_kv * D : 2.0 * s->H_kv * D + DI;
        return s->tokens * (row * dz * 2.0 + 4.0);
    } else if (named(k, "indexer")) {
        return seen_keys(s, 0) * (DI * dz + 4.0 + 4.0) + s->tokens * HI * (DI * dz + 4.0);
    } else if (named(k, "topk_radix") || named(k, "topk_bitonic")) {
        /* radix: the row read 3 times (the histogram and candidates pass, the output pass; the
         * later passes read the candidates in shared memory), bitonic once; k indices written;
         * each of the block's 8 warps reads its sequence's bounds (4 ints) */
        const double passes = named(k, "topk_radix") ? 3.0 : 1.0;
        double bytes = 0.0;
        for (int b = 0; b < s->B; ++b)
            for (int i = 0; i < s->Lq; ++i) {
                const int n = visible(s, b, i);
                bytes += (n > s->k_eff ? passes * n * 4.0 : 0.0) + s->k_eff * 4.0 + 8 * 16.0;
            }
        return bytes;
    }
    qo = rows * (D * dz * S + Dv * dz + 4.0);
    const double part = S > 1 ? S * rows * (2.0 * Dv * 4.0 + 3.0 * 4.0) : 0.0;
    return kv + qo + part;
}

void dec_record_json(void *state, const attn_kernel *k, char *out, size_t len) {
    dec_state *s = of(state);
    snprintf(out, len,
             "\"kv_heads\":%d,\"queries\":%d,\"page_size\":%d,\"splits\":%d,\"topk\":%d,"
             "\"index_heads\":%d,\"index_dim\":%d,\"decoded_tokens\":%d,\"model_bytes\":%.0f,"
             "\"latent\":%s,\"d_v\":%d",
             s->H_kv, s->Lq, s->P, splits_of(s, k), s->k_eff, s->opt.index_heads, s->opt.index_dim,
             s->tokens, model_bytes(s, k), s->latent ? "true" : "false", s->Dv);
    const size_t n = strlen(out);
    if (s->opt.fp8) /* what the FP8 checks measured (the errors: decode_fp8.c) */
        snprintf(out + n, len - n,
                 ",\"outliers\":%g,\"bytes_per_token\":%.0f,\"cache_bytes\":%.0f,"
                 "\"err_fp64\":%.6g,\"err_over_bound\":%.6g,\"err_dequant\":%.6g,"
                 "\"err_unquantised\":%.6g,\"k_err\":%.6g,\"k_max\":%.6g",
                 s->opt.outliers, (double)fp8_bytes_per_token(s), fp8_cache_bytes(s), s->err_fp64,
                 s->err_over_bound, s->err_dequant, s->err16, s->k_err, s->k_max);
}

/* --dump DIR: the inputs in the paged layout, the block table, the references and the selection
 * (attn tensor files, fp32), for decode.py's checks (tests/test_decode.py). */
int dec_dump(void *state, const char *dir) {
    dec_state *s = of(state);
    const bool lat = s->latent; /* the latent pool alone (its V: the first D_v columns of K) */
    float *pool[3] = {NULL, NULL, NULL}; /* K, V, index keys as a right append leaves them, fp32 */
    for (int n = 0; s->pools[n].name != NULL; ++n) {
        const size_t count = (size_t)s->num_pages * s->P * s->pools[n].row / s->dsize;
        if ((pool[n] = alloc_host(s, count * sizeof(float))) != NULL)
            attn_unpack(pool[n], s->pools[n].after, count, s->p.dtype);
    }
    const int IH = s->opt.index_heads, ID = s->opt.index_dim;
    const attn_dump_tensor t[] = {
        {"q", s->q, NULL, 4, {s->B, s->Lq, s->H, s->D}},
        {"k_pages", pool[0], NULL, 4, {s->num_pages, s->P, s->H_kv, s->D}},
        {"v_pages", pool[1], NULL, 4, {s->num_pages, s->P, s->H_kv, s->D}},
        {"block_table", NULL, s->table, 2, {s->B, s->W}},
        {"cache_seqlens", NULL, s->lens, 1, {s->B}},
        {"o_ref", s->ref.o, NULL, 4, {s->B, s->Lq, s->H, s->Dv}},
        {"q_index", lat ? NULL : s->qi, NULL, 4, {s->B, s->Lq, IH, ID}},
        {"ki_pages", pool[2], NULL, 3, {s->num_pages, s->P, ID}},
        {"weights", lat ? NULL : s->w, NULL, 3, {s->B, s->Lq, IH}},
        {"sel", NULL, lat ? NULL : s->sel, 3, {s->B, s->Lq, s->k_eff}},
        {"o_sparse_ref", s->sref.o, NULL, 4, {s->B, s->Lq, s->H, s->D}},
    };
    return s->mem.failed || attn_dump_tensors(dir, t, (int)(sizeof t / sizeof t[0]));
}

void dec_after_table(void *state, const attn_example *ex, const attn_run_record *recs, int n) {
    dec_state *s = of(state);
    if (s->paged_same >= 0)
        printf("\npaged vs gqa (contiguous cache), %d split%s: %s\n", s->run.splits_tiled,
               s->run.splits_tiled > 1 ? "s" : "",
               s->paged_same ? "bit-identical (same arithmetic in the same order)"
                             : "NOT bit-identical");
    double paged = 0.0, sparse = 0.0;
    printf("\nbytes per decoded token (model, README.md \"Bytes per decoded token\"; %d new "
           "token%s in the step):\n",
           s->tokens, s->tokens > 1 ? "s" : "");
    for (int r = 0; r < n; ++r) {
        const attn_kernel *k = attn_example_find(ex, recs[r].kernel_id);
        if (k == NULL || strcmp(recs[r].status, "SKIP") == 0)
            continue;
        printf("  %-13s %12.0f\n", k->name, model_bytes(s, k) / (s->tokens ? s->tokens : 1));
        if (recs[r].timed && named(k, "paged"))
            paged = recs[r].time.median_ms;
        if (recs[r].timed && named(k, "sparse"))
            sparse = recs[r].time.median_ms;
    }
    if (paged > 0.0 && sparse > 0.0)
        printf("\nDSA sparse (k = %d) vs dense paged: %.2fx%s\n", s->k_eff, paged / sparse,
               attn_on_simulator() ? " (CPU simulator timings, not GPU performance)" : "");
}

void dec_release(void *state) { attn_allocs_free(&of(state)->mem); }
