/* kernel_on_tensors.c — example 04's kernels on Q/K/V read from files (a real model's, written by
 * quality/kernel_check.py) instead of the harness's seeded inputs.
 *
 *   kernel_on_tensors --in DIR --out DIR --pattern SPEC [--causal] [--dtype f16|bf16]
 *   kernel_on_tensors --probe      exit 0 where a device answers, 77 (and SKIP: why) where none
 *
 * DIR/{q,k,v}.bin: [1, H, L, D] in attn_tensor_save's format. The inputs are rounded to the dtype
 * (the kernels read f16/bf16), the C reference is recomputed on them under the pattern, and every
 * kernel of example 04 that serves the pattern here runs through the harness (attn_run_kernel:
 * checked against that reference). Per kernel one line "kernel ID NAME STATUS max_abs_err X" and
 * OUT/kernel_ID.bin [1, H, L, D] (OUT/baseline_ID.bin for a dense baseline, which ignores the
 * pattern); OUT/inputs_{q,k,v}.bin are the rounded inputs.
 * Exit status 0, 1 on a FAIL or an error, 2 on a usage error, 77 when no kernel can run here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "attn/reference.h"
#include "attn/runner.h"
#include "attn/sparse/sparse_run.h"
#include "attn/tensor.h"

extern const attn_example sparse_patterns_example; /* sparse_patterns.cu */

/* Reads an attn-tensor v1 f32 file with 4 dims into a malloc'ed array. NULL on error. */
static float *load4(const char *dir, const char *name, int64_t dims[4]) {
    char path[4096], magic[32];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "rb");
    long long d[4];
    if (f == NULL ||
        fscanf(f, "attn-tensor v1 %31s %lld %lld %lld %lld", magic, &d[0], &d[1], &d[2], &d[3]) !=
            5 ||
        strcmp(magic, "f32") != 0 || fgetc(f) != '\n') {
        fprintf(stderr, "error: %s: not an attn-tensor v1 f32 file with 4 dims\n", path);
        if (f != NULL)
            fclose(f);
        return NULL;
    }
    size_t count = (size_t)(d[0] * d[1] * d[2] * d[3]);
    float *x = malloc(count * sizeof *x);
    for (size_t n = 0; x != NULL && n < count; ++n) {
        unsigned char le[4];
        if (fread(le, 1, 4, f) != 4) {
            fprintf(stderr, "error: %s: truncated\n", path);
            free(x);
            x = NULL;
            break;
        }
        uint32_t u = le[0] | (uint32_t)le[1] << 8 | (uint32_t)le[2] << 16 | (uint32_t)le[3] << 24;
        memcpy(&x[n], &u, sizeof u);
    }
    fclose(f);
    for (int n = 0; n < 4; ++n)
        dims[n] = d[n];
    return x;
}

static int save4(const char *dir, const char *name, const float *x, const int64_t dims[4]) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    if (attn_tensor_save(path, x, 4, dims) != 0) {
        fprintf(stderr, "error: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* Replaces the seeded inputs of d by x[0..2] (rounded to the dtype), recomputes the references
 * and uploads the inputs. */
static int use_inputs(attn_problem_data *d, const attn_mask *mask, float *const x[3]) {
    const attn_problem *p = &d->p;
    size_t count = attn_problem_q_elems(p);
    float *in[3] = {d->in.q, d->in.k, d->in.v};
    const void *dev[3] = {d->dev.q, d->dev.k, d->dev.v};
    for (int t = 0; t < 3; ++t) {
        for (size_t n = 0; n < count; ++n)
            in[t][n] = attn_round_dtype(x[t][n], p->dtype);
        attn_pack(d->staging, in[t], count, p->dtype);
        if (attn_to_device((void *)dev[t], d->staging, count * attn_dtype_size(p->dtype)))
            return 1;
    }
    int rc = attn_reference(p, mask, d->in.q, d->in.k, d->in.v, d->ref, d->ref_lse);
    if (rc == 0 && d->lowp != NULL)
        rc = attn_reference_lowp(p, mask, d->in.q, d->in.k, d->in.v, d->lowp);
    if (rc == 0 && d->dense_ref != NULL)
        rc = attn_reference(p, NULL, d->in.q, d->in.k, d->in.v, d->dense_ref, d->dense_ref_lse);
    if (rc == 0 && d->dense_lowp != NULL)
        rc = attn_reference_lowp(p, NULL, d->in.q, d->in.k, d->in.v, d->dense_lowp);
    return rc != 0;
}

/* Runs every kernel of example 04 that serves the pattern; returns the exit status. */
static int run_kernels(attn_sparse_run *st, attn_problem_data *d, const char *out,
                       const int64_t dims[4], const char *device) {
    const attn_example *ex = &sparse_patterns_example;
    int rc = 0, ran = 0;
    for (int n = 0; n < ex->num_kernels; ++n) {
        const attn_kernel *k = &ex->kernels[n];
        char why[256], name[32];
        if (attn_sparse_verdict(st, k, &d->p, why, sizeof why) != ATTN_KERNEL_RUNS) {
            printf("kernel %d %s SKIP %s\n", k->id, k->name, why);
            continue;
        }
        attn_run_opts opts = {.quiet = true};
        attn_sparse_kernel_options(st, k, &d->p, &opts, why, sizeof why);
        attn_outcome o;
        attn_outcome_init(&o, ex, k, &d->p, device);
        attn_run_kernel(d, k, &opts, &o);
        printf("kernel %d %s %s max_abs_err %.3g %s\n", k->id, k->name, o.rec.status,
               (double)o.rec.max_abs_err, o.note);
        /* A dense baseline beside the pattern is checked against the dense reference. */
        snprintf(name, sizeof name, "%s_%d", opts.dense_reference ? "baseline" : "kernel", k->id);
        if (strcmp(o.rec.status, "PASS") != 0 || save4(out, name, d->out, dims) != 0)
            rc = 1;
        ran += strcmp(o.rec.status, "SKIP") != 0;
    }
    return rc != 0 ? 1 : ran == 0 ? 77 : 0;
}

int main(int argc, char **argv) {
    const char *in_dir = NULL, *out_dir = NULL, *spec = NULL;
    bool causal = false;
    attn_dtype dtype = ATTN_F16;
    if (argc == 2 && strcmp(argv[1], "--probe") == 0) { /* before a caller loads a model */
        attn_device_info dev;
        return attn_device_init_reported(&dev);
    }
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "--in") == 0 && a + 1 < argc)
            in_dir = argv[++a];
        else if (strcmp(argv[a], "--out") == 0 && a + 1 < argc)
            out_dir = argv[++a];
        else if (strcmp(argv[a], "--pattern") == 0 && a + 1 < argc)
            spec = argv[++a];
        else if (strcmp(argv[a], "--dtype") == 0 && a + 1 < argc)
            dtype = strcmp(argv[++a], "bf16") == 0 ? ATTN_BF16 : ATTN_F16;
        else if (strcmp(argv[a], "--causal") == 0)
            causal = true;
        else if (strcmp(argv[a], "--probe") == 0) {
            fprintf(stderr, "error: --probe is given alone (kernel_on_tensors --probe)\n");
            return ATTN_EXIT_USAGE;
        } else {
            fprintf(stderr,
                    "error: unknown argument '%s' (usage: kernel_on_tensors --in DIR "
                    "--out DIR --pattern SPEC [--causal] [--dtype f16|bf16], or --probe)\n",
                    argv[a]);
            return ATTN_EXIT_USAGE;
        }
    }
    if (in_dir == NULL || out_dir == NULL || spec == NULL) {
        fprintf(stderr, "error: --in DIR, --out DIR and --pattern SPEC are required\n");
        return ATTN_EXIT_USAGE;
    }
    int64_t dims[4], kd[4], vd[4];
    float *x[3] = {load4(in_dir, "q", dims), load4(in_dir, "k", kd), load4(in_dir, "v", vd)};
    int rc = 1;
    if (x[0] && x[1] && x[2] &&
        (memcmp(dims, kd, sizeof dims) != 0 || memcmp(dims, vd, sizeof dims) != 0 ||
         dims[0] != 1)) {
        fprintf(stderr, "error: q, k and v must all be [1, H, L, D]\n");
        rc = ATTN_EXIT_USAGE;
    } else if (x[0] && x[1] && x[2]) {
        attn_problem p;
        attn_problem_init(&p, 1, (int)dims[1], (int)dims[2], (int)dims[2], (int)dims[3]);
        p.causal = causal;
        p.dtype = dtype;
        attn_device_info dev;
        attn_sparse_run st;
        attn_problem_data d;
        char why[256];
        memset(&st, 0, sizeof st);
        memset(&d, 0, sizeof d);
        if ((rc = attn_device_init_reported(&dev)) == 0 &&
            (rc = attn_sparse_prepare(&st, attn_sparse_config_of(&sparse_patterns_example), spec,
                                      why, sizeof why))) {
            fprintf(stderr, "error: %s\n", why);
        } else if (rc == 0) {
            bool csr = false, dense = false;
            for (int n = 0; n < sparse_patterns_example.num_kernels; ++n)
                attn_sparse_needs(&st, &sparse_patterns_example.kernels[n], &csr, &dense);
            rc = attn_sparse_build(&st, &p, csr, true) != 0 ||
                 attn_problem_data_make(&d, &p, &st.mask, dense, 1, 1.0f, 0, true) != 0 ||
                 use_inputs(&d, &st.mask, x) != 0;
            if (rc == 0) {
                attn_sparse_buffers(&st, &d.dev);
                rc = save4(out_dir, "inputs_q", d.in.q, dims) ||
                     save4(out_dir, "inputs_k", d.in.k, dims) ||
                     save4(out_dir, "inputs_v", d.in.v, dims);
            }
            if (rc == 0)
                rc = run_kernels(&st, &d, out_dir, dims, dev.name);
        }
        attn_problem_data_free(&d);
        attn_sparse_free(&st);
    }
    for (int t = 0; t < 3; ++t)
        free(x[t]);
    return rc;
}
