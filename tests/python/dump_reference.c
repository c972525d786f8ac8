/* dump_reference.c — writes the harness's inputs and the C reference's output for one problem,
 * so the Python tests can check attn_reference (and attn_uniform) against PyTorch/NumPy.
 *
 *   dump_reference --out DIR [the examples' problem flags: -B -H -L/--lq/--lk -D --causal
 *                             --seed --amplitude --scale]
 * writes DIR/{q,k,v,out,lse}.bin in attn_tensor_save's format ([B,H,L,D] and [B,H,Lq]).
 * Exit status 0, 1 on an I/O error, 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cli.h"
#include "attn/device.h"
#include "attn/reference.h"
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

int main(int argc, char **argv) {
    /* Take --out DIR out of argv; the rest are the shared problem flags. */
    const char *out_dir = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nrest = 0;
    if (rest == NULL)
        return 1;
    for (int a = 0; a < argc; ++a) {
        if (strcmp(argv[a], "--out") == 0 && a + 1 < argc)
            out_dir = argv[++a];
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
    if (out != NULL && lse != NULL && attn_reference(&p, NULL, in.q, in.k, in.v, out, lse) == 0) {
        int64_t qd[4] = {p.B, p.H, p.Lq, p.D}, kd[4] = {p.B, p.H, p.Lk, p.D};
        int64_t ld[3] = {p.B, p.H, p.Lq};
        rc = save(out_dir, "q", in.q, 4, qd) | save(out_dir, "k", in.k, 4, kd) |
             save(out_dir, "v", in.v, 4, kd) | save(out_dir, "out", out, 4, qd) |
             save(out_dir, "lse", lse, 3, ld);
    }
    free(out);
    free(lse);
    attn_host_inputs_free(&in);
    return rc;
}
