/* dump_reference.c — writes the harness's inputs and the C reference's output for one problem,
 * so the Python tests can check attn_reference (and attn_uniform) against PyTorch/NumPy.
 *
 *   dump_reference --out DIR [--tile N] [the examples' problem flags: -B -H -L/--lq/--lk -D
 *                             --causal --seed --amplitude --scale --pattern]
 * writes DIR/{q,k,v,out,lse}.bin in attn_tensor_save's format ([B,H,L,D] and [B,H,Lq]). With
 * --pattern SPEC (attn/sparse/patterns.h) the reference is computed under the pattern, and the
 * pattern's C builders are dumped too: mask.bin [B,Lq,Lk] (1 where the CSR lists the entry) and the
 * block mask in N x N tiles (--tile, default 16) as kv_num.bin, full_num.bin [B,NQ] and kv_idx.bin,
 * full_idx.bin [B,NQ,NK] (unused list entries -1), and spec.txt: the canonical spec
 * (attn_pattern_format), for sparse_patterns.py.
 * Exit status 0, 1 on an I/O error, 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cli.h"
#include "attn/device.h"
#include "attn/reference.h"
#include "attn/sparse/patterns.h"
#include "attn/tensor.h"

static int save(const char *dir, const char *name, const float *data, int ndim,
                const int64_t *dims) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    if (attn_tensor_save(path, data, ndim, dims) != 0) {
        fprintf(stderr, "error: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* DIR/spec.txt: the pattern's canonical spec, one line. */
static int save_spec(const char *dir, const attn_pattern *pat) {
    char path[4096], spec[1024];
    attn_pattern_format(pat, spec, sizeof spec);
    snprintf(path, sizeof path, "%s/spec.txt", dir);
    FILE *f = fopen(path, "w");
    int bad = f == NULL || fprintf(f, "%s\n", spec) < 0;
    if (f != NULL)
        bad |= fclose(f) != 0;
    if (bad)
        fprintf(stderr, "error: cannot write %s\n", path);
    return bad;
}

/* The C builders' view of the pattern: the token mask from the CSR, the block mask. */
static int save_pattern(const char *dir, const attn_pattern *pat, const attn_problem *p, int tile) {
    attn_block_mask m;
    attn_csr csr;
    if (attn_pattern_block_mask(&m, pat, p, tile, tile) != 0)
        return 1;
    if (attn_pattern_csr(&csr, pat, p, &m) != 0) {
        attn_block_mask_free(&m);
        return 1;
    }
    size_t cells = (size_t)p->B * p->Lq * p->Lk, rows = (size_t)p->B * m.num_q_blocks;
    size_t lists = rows * m.num_k_blocks;
    float *buf = calloc(cells > lists ? cells : lists, sizeof(float));
    int rc = buf == NULL;
    for (int64_t r = 0; !rc && r < csr.rows; ++r)
        for (int64_t e = csr.row_ptr[r]; e < csr.row_ptr[r + 1]; ++e)
            buf[r * p->Lk + csr.col_idx[e]] = 1.0f;
    int64_t md[3] = {p->B, p->Lq, p->Lk}, nd[2] = {p->B, m.num_q_blocks},
            ld[3] = {p->B, m.num_q_blocks, m.num_k_blocks};
    rc = rc || save(dir, "mask", buf, 3, md);
    const int32_t *counts[2] = {m.kv_num_blocks, m.full_kv_num_blocks};
    const int32_t *indices[2] = {m.kv_indices, m.full_kv_indices};
    const char *count_names[2] = {"kv_num", "full_num"}, *index_names[2] = {"kv_idx", "full_idx"};
    for (int l = 0; l < 2 && !rc; ++l) {
        for (size_t r = 0; r < rows; ++r)
            buf[r] = (float)counts[l][r];
        rc = save(dir, count_names[l], buf, 2, nd);
        for (size_t r = 0; r < rows && !rc; ++r)
            for (int t = 0; t < m.num_k_blocks; ++t)
                buf[r * m.num_k_blocks + t] =
                    t < counts[l][r] ? (float)indices[l][r * m.num_k_blocks + t] : -1.0f;
        rc = rc || save(dir, index_names[l], buf, 3, ld);
    }
    free(buf);
    attn_csr_free(&csr);
    attn_block_mask_free(&m);
    return rc;
}

int main(int argc, char **argv) {
    /* Take --out DIR out of argv; the rest are the shared problem flags. */
    const char *out_dir = NULL;
    int tile = 16;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nrest = 0;
    if (rest == NULL)
        return 1;
    for (int a = 0; a < argc; ++a) {
        if (strcmp(argv[a], "--out") == 0 && a + 1 < argc)
            out_dir = argv[++a];
        else if (strcmp(argv[a], "--tile") == 0 && a + 1 < argc)
            tile = atoi(argv[++a]);
        else
            rest[nrest++] = argv[a];
    }
    attn_cli cli;
    char err[512];
    if (attn_cli_parse(&cli, nrest, rest, err, sizeof err) != 0 || out_dir == NULL) {
        fprintf(stderr, "%s\n", out_dir == NULL ? "error: --out DIR is required" : err);
        free(rest);
        return ATTN_EXIT_USAGE;
    }
    free(rest);

    attn_problem p;
    attn_problem_init(&p, cli.B ? cli.B : 1, cli.H ? cli.H : 1, cli.Lq ? cli.Lq : 16,
                      cli.Lk ? cli.Lk : 16, cli.D ? cli.D : 16);
    p.causal = cli.causal;
    if (cli.scale != 0.0f)
        p.scale = cli.scale;
    attn_pattern pat;
    char why[256];
    if (attn_pattern_parse(cli.pattern, &pat, why, sizeof why) != 0) {
        fprintf(stderr, "error: --pattern: %s\n", why);
        return ATTN_EXIT_USAGE;
    }
    attn_pattern_ctx ctx = {&pat, &p};
    attn_mask mask = attn_pattern_mask(&ctx);
    if (tile <= 0) {
        fprintf(stderr, "error: --tile must be a positive integer\n");
        return ATTN_EXIT_USAGE;
    }
    if (attn_problem_validate(&p, err, sizeof err) != 0) {
        fprintf(stderr, "error: %s\n", err);
        return ATTN_EXIT_USAGE;
    }
    attn_host_inputs in;
    if (attn_host_inputs_make(&in, &p, cli.seed, cli.amplitude) != 0)
        return 1;
    float *out = malloc(attn_problem_q_elems(&p) * sizeof *out);
    float *lse = malloc(attn_problem_lse_elems(&p) * sizeof *lse);
    int rc = 1;
    if (out != NULL && lse != NULL &&
        attn_reference(&p, cli.pattern ? &mask : NULL, in.q, in.k, in.v, out, lse) == 0) {
        int64_t qd[4] = {p.B, p.H, p.Lq, p.D}, kd[4] = {p.B, p.H, p.Lk, p.D};
        int64_t ld[3] = {p.B, p.H, p.Lq};
        rc = save(out_dir, "q", in.q, 4, qd) | save(out_dir, "k", in.k, 4, kd) |
             save(out_dir, "v", in.v, 4, kd) | save(out_dir, "out", out, 4, qd) |
             save(out_dir, "lse", lse, 3, ld);
        if (rc == 0 && cli.pattern != NULL)
            rc = save_pattern(out_dir, &pat, &p, tile) | save_spec(out_dir, &pat);
    }
    free(out);
    free(lse);
    attn_host_inputs_free(&in);
    return rc;
}
