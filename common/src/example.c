/* example.c — attn_example_main, the driver behind every example's main() (see attn/example.h).
 *
 * Order of work, and why:
 *   1. command line, --help, --list, the problem and whether the selected kernels can run it:
 *      all before touching the device, so that a usage error is exit 2 on every machine, with or
 *      without a GPU;
 *   2. the device (exit 77 with one "SKIP:" line when a gpu build finds no GPU);
 *   3. what a module adds (the hooks of attn/example.h: a sparse example's pattern, its block
 *      mask and CSR, attn/sparse/sparse_example.h), seeded inputs and the CPU reference (double
 *      precision, on every core where OpenMP is available; for fp16/bf16 also the same-precision
 *      implementation the tolerance rule needs; under a module's mask, plus a dense one where it
 *      asks for it). A big problem's reference would take minutes before the first kernel runs,
 *      so beyond a cost threshold only a sample of rows is computed and checked (--check-rows,
 *      --check-all);
 *   4. per kernel: NaN-filled outputs, launch, synchronise, copy back, check against its
 *      reference, time (a module may set a kernel's FLOPs), report; then the module's lines
 *      after the table.
 * Steps 3 and 4 (but the module's part) are attn/runner.h's, which the benchmark shares.
 */
#include "attn/example.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/cli.h"
#include "attn/device.h"
#include "attn/profile.h"
#include "attn/report.h"
#include "attn/runner.h"

#ifdef ATTN_BACKEND_SIM
static const bool on_simulator = true;
#else
static const bool on_simulator = false;
#endif

/* Everything one invocation holds. */
typedef struct session {
    const attn_example *ex;
    const attn_example_hooks *hooks; /* NULL for a dense example */
    attn_cli cli;
    attn_problem p;
    attn_device_info dev;
    attn_problem_data data; /* inputs, reference, device buffers (attn/runner.h) */
} session;

static const char *program_name(const char *argv0) {
    const char *slash = strrchr(argv0, '/');
    return slash ? slash + 1 : argv0;
}

/* ---- 1. command line and problem ------------------------------------------------------------- */

static void print_kernel_list(FILE *f, const attn_example *ex) {
    fprintf(f, "%s: %s\n", ex->name, ex->summary);
    for (int n = 0; n < ex->num_kernels; ++n) {
        const attn_kernel *k = &ex->kernels[n];
        const attn_requirements *req = &k->req;
        fprintf(f, "%3d  %s\n       %s\n       supports:", k->id, k->name, k->description);
        for (int t = ATTN_F32; t <= ATTN_BF16; ++t)
            if (req->dtypes & ATTN_DTYPE_BIT(t))
                fprintf(f, " %s", attn_dtype_name((attn_dtype)t));
        fprintf(f, "; D <= %d", req->max_d);
        if (req->d_multiple > 1)
            fprintf(f, ", multiple of %d", req->d_multiple);
        fprintf(f, "; %s; %s", req->causal ? "causal" : "not causal",
                req->varlen ? "varlen" : "not varlen");
        if (req->gpu_only)
            fprintf(f, "; GPU only (not on the simulator)");
        fputc('\n', f);
    }
}

static bool selected(const session *s, const attn_kernel *k) {
    return s->cli.kernel == 0 || s->cli.kernel == k->id;
}

/* The first dtype (lowest bit) that a selected kernel supports. */
static attn_dtype default_dtype(const session *s) {
    unsigned mask = 0;
    for (int n = 0; n < s->ex->num_kernels; ++n)
        if (selected(s, &s->ex->kernels[n]))
            mask |= s->ex->kernels[n].req.dtypes;
    for (int t = ATTN_F32; t <= ATTN_BF16; ++t)
        if (mask & ATTN_DTYPE_BIT(t))
            return (attn_dtype)t;
    return ATTN_F32;
}

static void build_problem(session *s) {
    const attn_cli *c = &s->cli;
    const int *def = on_simulator ? s->ex->default_sim : s->ex->default_gpu;
    attn_problem_init(&s->p, c->B ? c->B : def[0], c->H ? c->H : def[1], c->Lq ? c->Lq : def[2],
                      c->Lk ? c->Lk : def[2], c->D ? c->D : def[3]);
    s->p.dtype = c->dtype_set ? c->dtype : default_dtype(s);
    s->p.causal = c->causal;
    if (c->scale > 0.0f)
        s->p.scale = c->scale;
    s->p.cu_seqlens_q = c->cu_seqlens_q; /* NULL unless --seqlens (a packed varlen batch) */
    s->p.cu_seqlens_k = c->cu_seqlens_k;
}

/* Can kernel k run the problem here? The module's verdict (a kernel that does not serve the
 * pattern cannot), else attn_kernel_verdict. */
static attn_verdict kernel_verdict(const session *s, const attn_kernel *k, char *why, size_t len) {
    if (s->hooks != NULL && s->hooks->verdict != NULL)
        return s->hooks->verdict(s->hooks->ctx, k, &s->p, why, len);
    return attn_kernel_verdict(k, &s->p, why, len);
}

/* 0 when at least one selected kernel can run the problem here; else ATTN_EXIT_USAGE (nothing
 * can run it) or ATTN_EXIT_NO_GPU (only GPU-only kernels could), with the reason in why. */
static int check_selection(const session *s, char *why, size_t len) {
    int needs_gpu = 0, max_d = 0;
    char reasons[768] = "", gpu_reason[256] = ""; /* every kernel's reason, "; "-separated */
    for (int n = 0; n < s->ex->num_kernels; ++n) {
        const attn_kernel *k = &s->ex->kernels[n];
        char reason[256];
        if (!selected(s, k))
            continue;
        max_d = k->req.max_d > max_d ? k->req.max_d : max_d;
        switch (kernel_verdict(s, k, reason, sizeof reason)) {
        case ATTN_KERNEL_RUNS:
            return 0;
        case ATTN_KERNEL_NEEDS_GPU:
            if (needs_gpu++ == 0)
                snprintf(gpu_reason, sizeof gpu_reason, "%s", reason);
            break;
        case ATTN_KERNEL_CANNOT: {
            size_t used = strlen(reasons);
            snprintf(reasons + used, sizeof reasons - used, "%s%s", used ? "; " : "", reason);
            break;
        }
        }
    }
    if (needs_gpu > 0) {
        snprintf(why, len, "%s", gpu_reason);
        return ATTN_EXIT_NO_GPU;
    }
    if (s->cli.kernel != 0)
        snprintf(why, len, "%s", reasons);
    else if (s->p.D > max_d)
        snprintf(why, len, "D=%d is larger than any kernel of this example supports (max %d)",
                 s->p.D, max_d);
    else
        snprintf(why, len, "no kernel of this example can run this problem: %s", reasons);
    return ATTN_EXIT_USAGE;
}

/* Steps 1: returns -1 to go on, or the exit status. */
static int prepare(session *s, int argc, char **argv) {
    char msg[512];
    if (attn_cli_parse(&s->cli, argc, argv, msg, sizeof msg) != 0) {
        fprintf(stderr, "%s\n", msg);
        return ATTN_EXIT_USAGE;
    }
    if (s->cli.help) {
        attn_cli_usage(stdout, program_name(argv[0]), s->ex);
        return 0;
    }
    if (s->cli.list) {
        print_kernel_list(stdout, s->ex);
        return 0;
    }
    if (s->cli.kernel != 0 && attn_example_find(s->ex, s->cli.kernel) == NULL) {
        fprintf(stderr, "error: no kernel %d in this example (use --list)\n", s->cli.kernel);
        return ATTN_EXIT_USAGE;
    }
    build_problem(s);
    if (attn_problem_validate(&s->p, msg, sizeof msg) != 0) {
        fprintf(stderr, "error: %s\n", msg);
        return ATTN_EXIT_USAGE;
    }
    if (s->hooks != NULL && s->hooks->prepare != NULL) {
        if (s->hooks->prepare(s->hooks->ctx, &s->cli, msg, sizeof msg) != 0) {
            fprintf(stderr, "error: %s\n", msg);
            return ATTN_EXIT_USAGE;
        }
    } else if (s->cli.pattern != NULL) {
        fprintf(stderr, "error: --pattern: the kernels of this example compute dense attention "
                        "(sparse patterns start with example 04)\n");
        return ATTN_EXIT_USAGE;
    }
    int rc = check_selection(s, msg, sizeof msg);
    if (rc == 0 && s->cli.profile && attn_profile_start(msg, sizeof msg) != 0) {
        fprintf(stderr, "error: %s\n", msg);
        return ATTN_EXIT_USAGE;
    }
    if (rc != 0)
        fprintf(stderr, "%s%s\n", rc == ATTN_EXIT_NO_GPU ? "SKIP: " : "error: ", msg);
    return rc != 0 ? rc : -1;
}

/* ---- 2. device and banner -------------------------------------------------------------------- */

/* "<what> 5,0,17 (total 22)": the lengths of a varlen batch, the first 16 of them. */
static void print_seqlens(const char *what, const int *cu, int B) {
    printf("%s ", what);
    for (int b = 0; b < B && b < 16; ++b)
        printf("%s%d", b ? "," : "", cu[b + 1] - cu[b]);
    printf("%s (total %d)", B > 16 ? ",..." : "", cu[B]);
}

static void print_banner(const session *s) {
    const attn_problem *p = &s->p;
    const attn_device_info *d = &s->dev;
    printf("%s: %s\n", s->ex->name, s->ex->summary);
    printf("backend: %s, device: %s (sm_%d%d, %d SMs, %.1f GiB)\n", attn_backend_name(), d->name,
           d->cc_major, d->cc_minor, d->sm_count, (double)d->global_mem / (1 << 30));
    if (d->simulated)
        printf("CPU simulator: results are checked exactly as on a GPU, but timings are not GPU "
               "performance.\n");
    printf("problem: B=%d H=%d Lq=%d Lk=%d D=%d %s %s, scale %g, seed %llu, amplitude %g "
           "(%.3g GFLOP)\n",
           p->B, p->H, p->Lq, p->Lk, p->D, attn_dtype_name(p->dtype),
           p->causal ? "causal" : "non-causal", (double)p->scale, (unsigned long long)s->cli.seed,
           (double)s->cli.amplitude, attn_problem_flops(p) * 1e-9);
    if (attn_problem_is_varlen(p)) {
        print_seqlens("varlen: packed [total, H, D], query lengths", p->cu_seqlens_q, p->B);
        print_seqlens(", key lengths", p->cu_seqlens_k, p->B);
        putchar('\n');
    }
}

/* ---- 3. the module's part, inputs and reference ---------------------------------------------- */

/* A module first (a sparse example: the pattern's masks, since the reference needs its
 * predicate, and for a dense baseline timed beside the sparse kernels a second, dense,
 * reference); a dense example goes straight to the inputs and the reference. */
static int make_data(session *s) {
    const attn_mask *mask = NULL;
    bool dense_too = false;
    const attn_example_hooks *h = s->hooks;
    if (h != NULL && h->build != NULL) {
        bool *sel = (bool *)calloc((size_t)s->ex->num_kernels, sizeof *sel);
        for (int n = 0; sel != NULL && n < s->ex->num_kernels; ++n)
            sel[n] = selected(s, &s->ex->kernels[n]);
        int rc =
            sel == NULL ? 1 : h->build(h->ctx, s->ex, sel, &s->p, s->cli.quiet, &mask, &dense_too);
        free(sel);
        if (rc != 0)
            return 1;
    }
    if (attn_problem_data_make(&s->data, &s->p, mask, dense_too, s->cli.seed, s->cli.amplitude,
                               attn_cli_rows_to_check(&s->cli, &s->p), s->cli.quiet) != 0)
        return 1;
    if (h != NULL && h->buffers != NULL)
        h->buffers(h->ctx, &s->data.dev);
    return 0;
}

/* The examples time a kernel even when it fails its check: a student sees both. The simulator
 * has no clocks or caches to warm up and its timings are only indicative: 2 launches keep a plain
 * run of an example within a few seconds. */
static attn_run_opts run_options(const session *s) {
    const attn_cli *c = &s->cli;
    attn_run_opts opts = {.time = !c->check_only, .time_failed = true, .quiet = c->quiet};
    opts.timing.warmup = c->warmup >= 0 ? c->warmup : (on_simulator ? 0 : 5);
    opts.timing.reps = c->reps > 0 ? c->reps : (on_simulator ? 2 : 20);
    opts.timing.flush_l2 = 1;
    return opts;
}

/* The per-kernel part of the options, a module's: a pattern the kernel does not serve, the
 * reference it is checked against (a baseline of a sparse example: the dense one), its FLOPs. */
static void kernel_options(const session *s, const attn_kernel *k, attn_run_opts *opts, char *why,
                           size_t len) {
    if (s->hooks != NULL && s->hooks->kernel_options != NULL)
        s->hooks->kernel_options(s->hooks->ctx, k, &s->p, opts, why, len);
}

/* Runs every selected kernel; prints the table and a sparse example's speedups. Returns the exit
 * status. */
static int run_all(session *s, attn_outcome *outcomes) {
    int n_run = 0, rc = 0;
    attn_run_opts opts = run_options(s);
    for (int n = 0; n < s->ex->num_kernels; ++n) {
        const attn_kernel *k = &s->ex->kernels[n];
        if (!selected(s, k))
            continue;
        attn_outcome *o = &outcomes[n_run++];
        attn_outcome_init(o, s->ex, k, &s->p, s->dev.name);
        if (!s->cli.quiet) {
            printf("[%d] %s: %s\n", k->id, k->name, k->description);
            fflush(stdout);
        }
        char why[256];
        kernel_options(s, k, &opts, why, sizeof why);
        char profile_json[1024] = "";
        if (s->cli.profile) { /* the checked launch only, profiled (attn/profile.h) */
            opts.time = false;
            attn_profile_set_flops(opts.flops > 0.0 ? opts.flops : attn_problem_flops(&s->p));
        }
        attn_run_kernel(&s->data, k, &opts, o);
        if (s->cli.profile) {
            attn_profile prof;
            attn_profile_collect(stdout, &prof);
            attn_profile_json(&prof, profile_json, sizeof profile_json);
            o->rec.extra_json = profile_json;
        }
        if (strcmp(o->rec.status, "FAIL") == 0 || strcmp(o->rec.status, "ERROR") == 0)
            rc = 1;
        if ((s->cli.json_path && attn_report_append(s->cli.json_path, false, &o->rec)) ||
            (s->cli.csv_path && attn_report_append(s->cli.csv_path, true, &o->rec)))
            rc = 1;
        o->rec.extra_json = NULL; /* profile_json ends here */
    }
    if (!s->cli.quiet)
        putchar('\n');
    attn_report_header(stdout);
    for (int n = 0; n < n_run; ++n)
        attn_report_row(stdout, &outcomes[n].rec);
    attn_run_record *recs = (attn_run_record *)malloc(sizeof *recs * (size_t)(n_run + 1));
    for (int n = 0; recs != NULL && n < n_run; ++n)
        recs[n] = outcomes[n].rec;
    if (recs != NULL && s->hooks != NULL && s->hooks->after_table != NULL)
        s->hooks->after_table(s->hooks->ctx, s->ex, recs, n_run);
    free(recs);
    return rc;
}

/* ---- the driver ------------------------------------------------------------------------------ */

int attn_example_run(int argc, char **argv, const attn_example *ex,
                     const attn_example_hooks *hooks) {
    session s;
    memset(&s, 0, sizeof s);
    s.ex = ex;
    s.hooks = hooks;
    int rc = prepare(&s, argc, argv);
    if (rc < 0 && (rc = attn_device_init_reported(&s.dev)) == 0) {
        if (!s.cli.quiet)
            print_banner(&s);
        attn_outcome *outcomes = (attn_outcome *)calloc((size_t)ex->num_kernels, sizeof *outcomes);
        rc = outcomes == NULL || make_data(&s) != 0 ? 1 : run_all(&s, outcomes);
        free(outcomes);
        attn_problem_data_free(&s.data);
    }
    if (hooks != NULL && hooks->release != NULL)
        hooks->release(hooks->ctx);
    attn_cli_free(&s.cli);
    return rc;
}

int attn_example_main(int argc, char **argv, const attn_example *ex) {
    return attn_example_run(argc, argv, ex, NULL);
}
