/* example.c — attn_example_main, the one driver behind every example's main() (attn/example.h).
 *
 * Order of work, and why:
 *   1. command line (the common flags and the example's own), --help, --list, the problem, what
 *      the example's module makes of its flags, whether the selected kernels can run it, and
 *      whether it fits (host memory; the simulator's time budget): all before touching the
 *      device, so that a usage error is exit 2 on every machine, with or without a GPU;
 *   2. the device (exit 77 with one "SKIP:" line when a gpu build finds no GPU);
 *   3. an attention example: what its module adds (a sparse example's pattern, its block mask
 *      and CSR), seeded inputs and the CPU reference (double precision, on every core where
 *      OpenMP is available; for fp16/bf16 also the same-precision implementation the tolerance
 *      rule needs). A big problem's reference would take minutes before the first kernel runs,
 *      so beyond a cost threshold only a sample of rows is computed and checked (--check-rows,
 *      --check-all). A staged example makes its own inputs and references (its module's setup);
 *   4. an attention example, per kernel: NaN-filled outputs, launch, synchronise, copy back,
 *      check, time (attn/runner.h, shared with the benchmark). A staged example: the stages in
 *      order, chunk by chunk where they work on query chunks, every kernel checked by its stage on
 *      every chunk; then each kernel timed over all chunks. Then the table and the module's lines.
 */
#include "attn/example.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/bench.h"
#include "attn/check.h"
#include "attn/cli.h"
#include "attn/device.h"
#include "attn/profile.h"
#include "attn/report.h"
#include "attn/runner.h"
#include "attn/tensor.h"

/* Everything one invocation holds. */
typedef struct session {
    const attn_example *ex;
    const attn_module *m; /* NULL for a dense example */
    attn_cli cli;
    void *opts;  /* the module's options (options_size bytes) */
    void *state; /* the module's state (state_size bytes) */
    attn_problem p;
    attn_device_info dev;
    attn_problem_data data; /* an attention example: inputs, reference, device buffers */
} session;

static const char *program_name(const char *argv0) {
    const char *slash = strrchr(argv0, '/');
    return slash ? slash + 1 : argv0;
}

const char *attn_example_stage_name(const attn_example *ex, const attn_kernel *k) {
    const attn_module *m = ex->module;
    return m != NULL && m->stages != NULL ? m->stages[k->stage].name : "attention";
}

static bool staged(const session *s) { return s->m != NULL && s->m->stages != NULL; }

/* ---- 1. command line and problem ------------------------------------------------------------- */

static void print_kernel_list(FILE *f, const attn_example *ex) {
    fprintf(f, "%s: %s\n", ex->name, ex->summary);
    for (int n = 0; n < ex->num_kernels; ++n) {
        const attn_kernel *k = &ex->kernels[n];
        const attn_requirements *req = &k->req;
        fprintf(f, "%3d  %s", k->id, k->name);
        if (ex->module != NULL && ex->module->stages != NULL)
            fprintf(f, " (stage: %s)", attn_example_stage_name(ex, k));
        fprintf(f, "\n       %s\n       supports:", k->description);
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
    const int *def = attn_on_simulator() ? s->ex->defaults.sim : s->ex->defaults.gpu;
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
    if (s->m != NULL && s->m->verdict != NULL)
        return s->m->verdict(s->state, k, &s->p, why, len);
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

/* What the run costs, refused up front when it cannot fit: host memory for the inputs, the
 * reference and the results (the module's count when it has one, else an attention example's,
 * as attn/runner.h allocates them: Q, O, the reference, the same-precision one, the output read
 * back, a staging copy; K and V), and on the simulator the time its kernels would take. */
static int check_cost(const session *s, char *why, size_t len) {
    const attn_problem *p = &s->p;
    double q = (double)attn_problem_q_elems(p), k = (double)attn_problem_k_elems(p);
    const double host = s->m != NULL && s->m->host_bytes != NULL ? s->m->host_bytes(s->state, p)
                                                                 : 4.0 * (6.0 * q + 3.0 * k);
    if (attn_cli_memory_check(host, why, len) != 0)
        return ATTN_EXIT_USAGE;
    int kernels = 0;
    for (int n = 0; n < s->ex->num_kernels; ++n)
        kernels += selected(s, &s->ex->kernels[n]);
    return attn_cli_sim_budget_check(&s->cli, attn_problem_flops(p) * kernels, why, len);
}

/* Step 1: returns -1 to go on, or the exit status. */
static int prepare(session *s, int argc, char **argv) {
    char msg[512];
    const attn_module *m = s->m;
    if (m != NULL && (m->options_size > 0 || m->state_size > 0)) {
        s->opts = calloc(1, m->options_size ? m->options_size : 1);
        s->state = calloc(1, m->state_size ? m->state_size : 1);
        if (s->opts == NULL || s->state == NULL) {
            fprintf(stderr, "error: out of host memory\n");
            return 1;
        }
    }
    if (attn_cli_parse_options(&s->cli, argc, argv, m ? m->options : NULL, m ? m->num_options : 0,
                               s->opts, msg, sizeof msg) != 0) {
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
    if (m != NULL && m->prepare != NULL) {
        if (m->prepare(s->state, s->ex, &s->cli, s->opts, &s->p, msg, sizeof msg) != 0) {
            fprintf(stderr, "error: %s\n", msg);
            return ATTN_EXIT_USAGE;
        }
    } else if (s->cli.pattern != NULL) {
        fprintf(stderr, "error: --pattern: the kernels of this example compute dense attention "
                        "(sparse patterns start with example 04)\n");
        return ATTN_EXIT_USAGE;
    }
    int rc = check_selection(s, msg, sizeof msg);
    if (rc == 0)
        rc = check_cost(s, msg, sizeof msg);
    if (rc == 0 && s->cli.profile && attn_profile_start(msg, sizeof msg) != 0)
        rc = ATTN_EXIT_USAGE;
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
    const char *read_from =
        s->m != NULL && s->m->inputs_read_from != NULL ? s->m->inputs_read_from(s->state) : NULL;
    printf("problem: B=%d H=%d Lq=%d Lk=%d D=%d %s %s, scale %g, ", p->B, p->H, p->Lq, p->Lk, p->D,
           attn_dtype_name(p->dtype), p->causal ? "causal" : "non-causal", (double)p->scale);
    if (read_from != NULL) /* no seed or amplitude made them */
        printf("inputs read from %s", read_from);
    else
        printf("seed %llu, amplitude %g%s", (unsigned long long)s->cli.seed,
               (double)s->cli.amplitude,
               s->cli.inputs == ATTN_INPUTS_OPPOSED ? ", opposed signs (Q, V >= 0, K <= 0)" : "");
    printf(" (%.3g GFLOP)\n", attn_problem_flops(p) * 1e-9);
    if (attn_problem_is_varlen(p)) {
        print_seqlens("varlen: packed [total, H, D], query lengths", p->cu_seqlens_q, p->B);
        print_seqlens(", key lengths", p->cu_seqlens_k, p->B);
        putchar('\n');
    }
    if (s->m != NULL && s->m->banner != NULL)
        s->m->banner(s->state, p);
}

/* ---- run options, shared by both kinds ------------------------------------------------------- */

/* The examples time a kernel even when it fails its check: a student sees both. The simulator
 * has no clocks or caches to warm up and its timings are only indicative: 2 launches keep a plain
 * run of an example within a few seconds. */
static attn_run_opts run_options(const session *s) {
    const attn_cli *c = &s->cli;
    attn_run_opts opts = {.time = !c->check_only, .time_failed = true, .quiet = c->quiet};
    opts.timing.warmup = c->warmup >= 0 ? c->warmup : (attn_on_simulator() ? 0 : 5);
    opts.timing.reps = c->reps > 0 ? c->reps : (attn_on_simulator() ? 2 : 20);
    opts.timing.flush_l2 = 1;
    return opts;
}

/* Appends o's record to the --json/--csv files; 1 when one cannot be written. */
static int append_record(const session *s, const attn_run_record *rec) {
    return (s->cli.json_path && attn_report_append(s->cli.json_path, false, rec)) ||
           (s->cli.csv_path && attn_report_append(s->cli.csv_path, true, rec));
}

/* The table of results, then the module's lines. */
static void print_table(const session *s, attn_outcome *outcomes, int n_run) {
    if (!s->cli.quiet)
        putchar('\n');
    attn_report_header(stdout);
    for (int n = 0; n < n_run; ++n)
        attn_report_row(stdout, &outcomes[n].rec);
    attn_run_record *recs = (attn_run_record *)malloc(sizeof *recs * (size_t)(n_run + 1));
    for (int n = 0; recs != NULL && n < n_run; ++n)
        recs[n] = outcomes[n].rec;
    if (recs != NULL && s->m != NULL && s->m->after_table != NULL)
        s->m->after_table(s->state, s->ex, recs, n_run);
    free(recs);
}

/* ---- 3 and 4: an attention example ----------------------------------------------------------- */

/* A module first (a sparse example: the pattern's masks, since the reference needs its
 * predicate, and for a dense baseline timed beside the sparse kernels a second, dense,
 * reference); a dense example goes straight to the inputs and the reference. */
static int make_data(session *s) {
    const attn_mask *mask = NULL;
    bool dense_too = false;
    const attn_module *m = s->m;
    if (m != NULL && m->build != NULL) {
        bool *sel = (bool *)calloc((size_t)s->ex->num_kernels, sizeof *sel);
        for (int n = 0; sel != NULL && n < s->ex->num_kernels; ++n)
            sel[n] = selected(s, &s->ex->kernels[n]);
        int rc = sel == NULL
                     ? 1
                     : m->build(s->state, s->ex, sel, &s->p, s->cli.quiet, &mask, &dense_too);
        free(sel);
        if (rc != 0)
            return 1;
    }
    attn_inputs_fn change = m != NULL ? m->inputs : NULL;
    if (attn_problem_data_make_with(&s->data, &s->p, mask, dense_too, s->cli.seed, s->cli.amplitude,
                                    s->cli.inputs, attn_cli_rows_to_check(&s->cli, &s->p),
                                    s->cli.quiet, change, s->state) != 0)
        return 1;
    if (m != NULL && m->buffers != NULL)
        m->buffers(s->state, &s->data.dev);
    return 0;
}

/* --dump DIR of an attention example: the inputs and the reference (q, k, v, o_ref [rows, D],
 * lse_ref [lse_elems]), once; each kernel's output and log-sum-exp (o_<kernel>, lse_<kernel>, as
 * fp32 values) after its checked run; then the module's own tensors (attn_module.dump). */
static int dump_tensor(const session *s, const char *name, const float *data, int64_t rows,
                       int64_t cols) {
    char path[1024];
    int64_t dims[2] = {rows, cols};
    snprintf(path, sizeof path, "%s/%s.bin", s->cli.dump_dir, name);
    if (attn_tensor_save(path, data, cols > 0 ? 2 : 1, dims) != 0) {
        fprintf(stderr, "error: --dump: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static int dump_inputs(const session *s) {
    const attn_problem_data *d = &s->data;
    const int D = s->p.D;
    int64_t q_rows = (int64_t)(attn_problem_q_elems(&s->p) / (size_t)D);
    int64_t k_rows = (int64_t)(attn_problem_k_elems(&s->p) / (size_t)D);
    return dump_tensor(s, "q", d->in.q, q_rows, D) || dump_tensor(s, "k", d->in.k, k_rows, D) ||
           dump_tensor(s, "v", d->in.v, k_rows, D) || dump_tensor(s, "o_ref", d->ref, q_rows, D) ||
           dump_tensor(s, "lse_ref", d->ref_lse, (int64_t)attn_problem_lse_elems(&s->p), 0) ||
           (s->m != NULL && s->m->dump != NULL && s->m->dump(s->state, s->cli.dump_dir) != 0);
}

static int run_attention(session *s, attn_outcome *outcomes, int *n_run) {
    int rc = 0;
    attn_run_opts opts = run_options(s);
    if (s->cli.dump_dir != NULL && dump_inputs(s) != 0)
        return 1;
    for (int n = 0; n < s->ex->num_kernels; ++n) {
        const attn_kernel *k = &s->ex->kernels[n];
        if (!selected(s, k))
            continue;
        attn_outcome *o = &outcomes[(*n_run)++];
        attn_outcome_init(o, s->ex, k, &s->p, s->dev.name);
        if (!s->cli.quiet) {
            printf("[%d] %s: %s\n", k->id, k->name, k->description);
            fflush(stdout);
        }
        char why[256];
        if (s->m != NULL && s->m->kernel_options != NULL)
            s->m->kernel_options(s->state, k, &s->p, &opts, why, sizeof why);
        char profile_json[1024] = "", mine[512] = "", extra[1536];
        if (s->cli.profile) { /* the checked launch only, profiled (attn/profile.h) */
            opts.time = false;
            attn_profile_set_flops(opts.flops > 0.0 ? opts.flops : attn_problem_flops(&s->p));
        }
        attn_run_kernel(&s->data, k, &opts, o);
        if (s->cli.profile) {
            attn_profile prof;
            attn_profile_collect(stdout, &prof);
            attn_profile_json(&prof, profile_json, sizeof profile_json);
        }
        if (s->m != NULL && s->m->record_json != NULL)
            s->m->record_json(s->state, k, mine, sizeof mine);
        snprintf(extra, sizeof extra, "%s%s%s", mine, mine[0] && profile_json[0] ? "," : "",
                 profile_json);
        o->rec.extra_json = extra;
        if (strcmp(o->rec.status, "FAIL") == 0 || strcmp(o->rec.status, "ERROR") == 0)
            rc = 1;
        if (append_record(s, &o->rec))
            rc = 1;
        o->rec.extra_json = NULL; /* extra ends here */
        if (s->cli.dump_dir != NULL && strcmp(o->rec.status, "SKIP") != 0) {
            char name[96];
            snprintf(name, sizeof name, "o_%s", k->name);
            if (dump_tensor(s, name, s->data.out,
                            (int64_t)(attn_problem_q_elems(&s->p) / (size_t)s->p.D), s->p.D))
                rc = 1;
            snprintf(name, sizeof name, "lse_%s", k->name);
            if (dump_tensor(s, name, s->data.lse, (int64_t)attn_problem_lse_elems(&s->p), 0))
                rc = 1;
        }
    }
    return rc;
}

/* ---- 3 and 4: a staged example --------------------------------------------------------------- */

/* Which kernels run: the selected ones, and for every stage before the last selected kernel's
 * stage, the kernel whose output the next stage reads (its last kernel that can run here), so
 * that --kernel N has its inputs. runs[n]: kernel n runs. */
static void staged_plan(const session *s, bool *runs) {
    const attn_example *ex = s->ex;
    int last_stage = -1;
    for (int n = 0; n < ex->num_kernels; ++n) {
        runs[n] = selected(s, &ex->kernels[n]);
        if (runs[n] && ex->kernels[n].stage > last_stage)
            last_stage = ex->kernels[n].stage;
    }
    for (int st = 0; st < last_stage; ++st) {
        int producer = -1, any = 0;
        for (int n = 0; n < ex->num_kernels; ++n) {
            char why[256];
            if (ex->kernels[n].stage != st)
                continue;
            any |= runs[n];
            if (kernel_verdict(s, &ex->kernels[n], why, sizeof why) == ATTN_KERNEL_RUNS)
                producer = n;
        }
        if (!any && producer >= 0)
            runs[producer] = true;
    }
}

/* One kernel's run over the chunks: its verdict, workspace and the merged checks. */
typedef struct stage_run {
    attn_outcome *o;
    const attn_kernel *k;
    bool runnable, failed_launch;
    void *workspace;
    size_t workspace_bytes;
    attn_stage_check check; /* merged over the chunks */
} stage_run;

static void merge_check(attn_stage_check *all, const attn_stage_check *one) {
    if (all->pass && !one->pass)
        snprintf(all->detail, sizeof all->detail, "%s", one->detail);
    all->pass = all->pass && one->pass;
    all->rows += one->rows;
    if (isnan(all->max_err) || one->max_err > all->max_err)
        all->max_err = one->max_err;
    if (isnan(all->bound) || one->bound > all->bound)
        all->bound = one->bound;
}

static attn_buffers kernel_buffers(const attn_buffers *b, const stage_run *r) {
    attn_buffers kb = *b;
    kb.workspace = r->workspace;
    kb.workspace_bytes = r->workspace_bytes;
    return kb;
}

/* Launches r's kernel on chunk c, waits, and has its stage check it. 0, or 1 on a runtime error
 * (the outcome says which). */
static int run_chunk(session *s, const attn_stage *st, stage_run *r, const attn_buffers *b, int c) {
    attn_buffers kb = kernel_buffers(b, r);
    kb.chunk = c;
    kb.chunks = 0;
    if (st->clear != NULL && st->clear(s->state, r->k, c) != 0)
        return 1;
    attn_device_label_launches(s->ex->name, r->k->name);
    if (attn_launch_synchronized(r->k, &s->p, &kb, r->o->note, sizeof r->o->note) != 0) {
        r->o->rec.status = "ERROR";
        r->failed_launch = true;
        return 1;
    }
    attn_stage_check one = {true, 0, NAN, NAN, ""};
    if (st->check(s->state, r->k, c, &one) != 0) {
        snprintf(r->o->note, sizeof r->o->note, "the check of stage %s failed to run", st->name);
        r->o->rec.status = "ERROR";
        r->failed_launch = true;
        return 1;
    }
    merge_check(&r->check, &one);
    return 0;
}

static void print_stage_verdict(const session *s, const stage_run *r, int chunks, bool chunked) {
    const attn_stage_check *c = &r->check;
    if (s->cli.quiet && c->pass)
        return;
    printf("[%d] %-14s %-9s %s  %lld query rows%s", r->k->id, r->k->name,
           attn_example_stage_name(s->ex, r->k), c->pass ? "PASS" : "FAIL", (long long)c->rows,
           chunked && chunks > 1 ? " (checked chunk by chunk)" : "");
    if (!isnan(c->max_err))
        printf(", max err %.3g", c->max_err);
    if (!isnan(c->bound))
        printf(" (bound %.3g)", c->bound);
    printf("%s%s\n", c->pass ? "" : ": ", c->pass ? "" : c->detail);
}

/* The stages' checks: runs[] from staged_plan. 0 when every run kernel ran (PASS or FAIL), else
 * the exit status. */
static int check_stages(session *s, const attn_buffers *b, int chunks, stage_run *rs, int n_rs) {
    const attn_module *m = s->m;
    for (int st0 = 0; st0 < m->num_stages;) {
        /* a group: one stage, or consecutive chunked stages, run chunk by chunk */
        int st1 = st0 + 1;
        while (m->stages[st0].chunked && st1 < m->num_stages && m->stages[st1].chunked)
            ++st1;
        bool any = false;
        for (int r = 0; r < n_rs; ++r)
            any |= rs[r].runnable && rs[r].k->stage >= st0 && rs[r].k->stage < st1;
        if (!any) {
            st0 = st1;
            continue;
        }
        for (int st = st0; st < st1; ++st) {
            char why[512];
            int rc = m->stages[st].prepare ? m->stages[st].prepare(s->state, why, sizeof why) : 0;
            if (rc == ATTN_EXIT_USAGE)
                fprintf(stderr, "error: %s\n", why);
            if (rc != 0)
                return rc;
        }
        const bool chunked = m->stages[st0].chunked;
        const int n_chunks = chunked ? chunks : 1;
        for (int c = 0; c < n_chunks; ++c)
            for (int r = 0; r < n_rs; ++r) {
                stage_run *x = &rs[r];
                if (x->runnable && !x->failed_launch && x->k->stage >= st0 && x->k->stage < st1 &&
                    run_chunk(s, &m->stages[x->k->stage], x, b, chunked ? c : 0) != 0)
                    if (!s->cli.quiet)
                        printf("[%d] %s: ERROR: %s\n", x->k->id, x->k->name, x->o->note);
            }
        for (int r = 0; r < n_rs; ++r) {
            stage_run *x = &rs[r];
            if (!x->runnable || x->k->stage < st0 || x->k->stage >= st1 || x->failed_launch)
                continue;
            x->o->rec.status = x->check.pass ? "PASS" : "FAIL";
            x->o->rec.max_abs_err = x->check.max_err;
            print_stage_verdict(s, x, n_chunks, chunked);
        }
        st0 = st1;
    }
    return 0;
}

/* A staged kernel timed like any other (attn/bench.h): every chunk per launch. */
static void time_staged(session *s, stage_run *r, const attn_buffers *b, int chunks,
                        const attn_run_opts *opts, char *profile_json, size_t len) {
    attn_buffers kb = kernel_buffers(b, r);
    kb.chunks = s->ex->module->stages[r->k->stage].chunked ? chunks : 0;
    attn_timing_opts t = opts->timing;
    attn_profile prof;
    const double flops = s->m->flops ? s->m->flops(s->state, r->k) : 0.0;
    if (s->cli.profile) { /* one launch (every chunk), profiled; earlier launches dropped */
        attn_profile_collect(NULL, &prof);
        t.reps = 1, t.warmup = 0, t.flush_l2 = 0;
        attn_profile_set_flops(flops);
        if (!s->cli.quiet)
            printf("[%d] %s (%s): one launch, profiled\n", r->k->id, r->k->name,
                   attn_example_stage_name(s->ex, r->k));
    }
    if (attn_time_kernel(r->k, &s->p, &kb, &t, &r->o->rec.time) != 0) {
        r->o->rec.status = "ERROR";
        snprintf(r->o->note, sizeof r->o->note, "a launch failed while timing (see above)");
        return;
    }
    if (s->cli.profile) {
        attn_profile_collect(stdout, &prof);
        attn_profile_json(&prof, profile_json, len);
    }
    const double sec = r->o->rec.time.median_ms * 1e-3;
    r->o->rec.timed = true;
    r->o->rec.tflops = flops > 0.0 && sec > 0.0 ? flops / sec * 1e-12 : 0.0;
}

static int run_staged(session *s, attn_outcome *outcomes, int *n_run) {
    const attn_module *m = s->m;
    const attn_example *ex = s->ex;
    attn_buffers b;
    memset(&b, 0, sizeof b);
    int chunks = 1, rc = 0;
    if (m->setup(s->state, &s->p, &s->cli, attn_cli_rows_to_check(&s->cli, &s->p), &b, &chunks))
        return 1;
    bool *runs = (bool *)calloc((size_t)ex->num_kernels, sizeof *runs);
    stage_run *rs = (stage_run *)calloc((size_t)ex->num_kernels, sizeof *rs);
    if (runs == NULL || rs == NULL) {
        free(runs);
        free(rs);
        fprintf(stderr, "error: out of host memory\n");
        return 1;
    }
    staged_plan(s, runs);
    for (int n = 0; n < ex->num_kernels; ++n) {
        if (!runs[n])
            continue;
        stage_run *r = &rs[*n_run];
        r->k = &ex->kernels[n];
        r->o = &outcomes[(*n_run)++];
        attn_outcome_init(r->o, ex, r->k, &s->p, s->dev.name);
        r->check = (attn_stage_check){true, 0, NAN, NAN, ""};
        char why[256];
        if (kernel_verdict(s, r->k, why, sizeof why) != ATTN_KERNEL_RUNS) {
            r->o->rec.status = "SKIP";
            snprintf(r->o->note, sizeof r->o->note, "%s", why);
            if (!s->cli.quiet)
                printf("[%d] %s: SKIP: %s\n", r->k->id, r->k->name, why);
            continue;
        }
        r->workspace_bytes = r->k->workspace_bytes ? r->k->workspace_bytes(&s->p) : 0;
        r->workspace = r->workspace_bytes ? attn_device_alloc(r->workspace_bytes) : NULL;
        r->o->rec.workspace_bytes = (double)r->workspace_bytes;
        if (r->workspace_bytes != 0 && r->workspace == NULL) {
            r->o->rec.status = "ERROR";
            snprintf(r->o->note, sizeof r->o->note, "cannot allocate %zu bytes of workspace",
                     r->workspace_bytes);
            continue;
        }
        r->runnable = true;
    }
    rc = check_stages(s, &b, chunks, rs, *n_run);
    if (rc == 0 && s->cli.dump_dir != NULL && m->dump != NULL && m->dump(s->state, s->cli.dump_dir))
        rc = 1;
    attn_run_opts opts = run_options(s);
    if (rc == 0 && (opts.time || s->cli.profile)) {
        if (!s->cli.quiet)
            printf("\n%s timings (median of %d%s):\n", s->dev.simulated ? "CPU simulator" : "GPU",
                   s->cli.profile ? 1 : opts.timing.reps,
                   s->dev.simulated ? "; CPU time, not GPU performance" : "");
        for (int r = 0; r < *n_run; ++r) {
            char profile_json[1024] = "";
            if (rs[r].runnable && !rs[r].failed_launch)
                time_staged(s, &rs[r], &b, chunks, &opts, profile_json, sizeof profile_json);
            char extra[1536] = "", mine[512] = "";
            if (m->record_json != NULL)
                m->record_json(s->state, rs[r].k, mine, sizeof mine);
            snprintf(extra, sizeof extra, "%s%s%s", mine, mine[0] && profile_json[0] ? "," : "",
                     profile_json);
            rs[r].o->rec.extra_json = extra;
            if (append_record(s, &rs[r].o->rec))
                rc = 1;
            rs[r].o->rec.extra_json = NULL;
        }
    } else if (rc == 0) {
        for (int r = 0; r < *n_run; ++r) {
            char mine[512] = "";
            if (m->record_json != NULL)
                m->record_json(s->state, rs[r].k, mine, sizeof mine);
            rs[r].o->rec.extra_json = mine;
            if (append_record(s, &rs[r].o->rec))
                rc = 1;
            rs[r].o->rec.extra_json = NULL;
        }
    }
    for (int r = 0; r < *n_run; ++r) {
        const char *st = outcomes[r].rec.status;
        if (st == NULL) /* a stage never reached (an earlier stage's refusal) */
            outcomes[r].rec.status = "SKIP";
        else if (strcmp(st, "FAIL") == 0 || strcmp(st, "ERROR") == 0)
            rc = rc ? rc : 1;
        attn_device_free(rs[r].workspace);
    }
    free(runs);
    free(rs);
    return rc;
}

/* ---- the driver ------------------------------------------------------------------------------ */

int attn_example_main(int argc, char **argv, const attn_example *ex) {
    session s;
    memset(&s, 0, sizeof s);
    s.ex = ex;
    s.m = ex->module;
    int rc = prepare(&s, argc, argv);
    if (rc < 0 && (rc = attn_device_init_reported(&s.dev)) == 0) {
        if (!s.cli.quiet)
            print_banner(&s);
        attn_outcome *outcomes = (attn_outcome *)calloc((size_t)ex->num_kernels, sizeof *outcomes);
        int n_run = 0;
        if (outcomes == NULL)
            rc = 1;
        else if (staged(&s))
            rc = run_staged(&s, outcomes, &n_run);
        else
            rc = make_data(&s) != 0 ? 1 : run_attention(&s, outcomes, &n_run);
        if (outcomes != NULL && n_run > 0 && rc != ATTN_EXIT_USAGE)
            print_table(&s, outcomes, n_run);
        free(outcomes);
        attn_problem_data_free(&s.data);
    }
    if (s.m != NULL && s.m->release != NULL && s.state != NULL)
        s.m->release(s.state);
    free(s.opts);
    free(s.state);
    attn_cli_free(&s.cli);
    return rc;
}
