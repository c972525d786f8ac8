/* grader_case.c — the checks every case program makes (see grader_case.h for the order and why). */
#include "grader_case.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/bench.h"
#include "attn/check.h"
#include "attn/device.h"
#include "attn/sparse/block_mask.h"
#include "attn/tensor.h"

#ifdef ATTN_BACKEND_SIM
static const bool on_simulator = true;
#else
static const bool on_simulator = false;
#endif

/* Performance rule (grader/README.md): full points up to 1.25x the solution's time, none from 4x.
 */
#define PERF_FULL_RATIO 1.25
#define PERF_ZERO_RATIO 4.0

int grader_case_parse(grader_case *c, int argc, char **argv, const attn_example *ex) {
    memset(c, 0, sizeof *c);
    /* Grader flags out, the rest to the harness's parser (argv[0] kept). */
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (rest == NULL)
        return ATTN_EXIT_USAGE;
    int n = 0, to_runner = -1, from_runner = -1;
    rest[n++] = argv[0];
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "--case") == 0 && a + 1 < argc)
            c->name = argv[++a];
        else if (strcmp(argv[a], "--rpc") == 0 && a + 1 < argc)
            sscanf(argv[++a], "%d,%d", &to_runner, &from_runner);
        else if (strcmp(argv[a], "--perf") == 0)
            c->perf = true;
        else if (strcmp(argv[a], "--json") != 0)
            rest[n++] = argv[a];
    }
    char err[256];
    int status = attn_cli_parse(&c->cli, n, rest, err, sizeof err);
    free(rest);
    if (status != 0) {
        fprintf(stderr, "%s\n", err);
        return ATTN_EXIT_USAGE;
    }
    if (c->name == NULL) {
        fprintf(stderr, "error: --case NAME is required\n");
        return ATTN_EXIT_USAGE;
    }
    grader_remote_connect(to_runner, from_runner, c->name);
    const int *def = ex->defaults.sim;
    const attn_cli *o = &c->cli;
    attn_problem_init(&c->p, o->B ? o->B : def[0], o->H ? o->H : def[1], o->Lq ? o->Lq : def[2],
                      o->Lk ? o->Lk : def[2], o->D ? o->D : def[3]);
    c->p.dtype = o->dtype_set ? o->dtype : ATTN_F32;
    c->p.causal = o->causal;
    if (o->scale > 0.0f)
        c->p.scale = o->scale;
    char why[256];
    if (attn_problem_validate(&c->p, why, sizeof why) != 0) {
        fprintf(stderr, "error: %s\n", why);
        return ATTN_EXIT_USAGE;
    }
    return 0;
}

/* ---- device buffers with NaN guard zones --------------------------------------------------- */

/* One device buffer of `elems` elements of `esize` bytes, with `guard` bytes of 0xFF (NaN) on
 * both sides; data points at the elements. */
typedef struct guarded {
    unsigned char *base;
    void *data;
    size_t bytes, guard;
} guarded;

static int guarded_alloc(guarded *g, size_t bytes, size_t guard) {
    g->bytes = bytes;
    g->guard = guard;
    g->base = attn_device_alloc(bytes + 2 * guard);
    g->data = g->base ? g->base + guard : NULL;
    return g->base == NULL || attn_device_fill_nan(g->base, bytes + 2 * guard);
}

/* Index of the first byte of the guard zones that is no longer 0xFF, or -1. host: scratch of
 * 2 * guard bytes. */
static long guard_damage(const guarded *g, unsigned char *host) {
    if (attn_to_host(host, g->base, g->guard) ||
        attn_to_host(host + g->guard, g->base + g->guard + g->bytes, g->guard))
        return 0;
    for (size_t n = 0; n < 2 * g->guard; ++n)
        if (host[n] != 0xFF)
            return (long)n;
    return -1;
}

/* ---- the check ------------------------------------------------------------------------------ */

typedef struct run_state {
    const attn_problem *p;
    attn_host_inputs in; /* the checker's own copy of the inputs (fp32 values) */
    void *packed[3];     /* Q, K, V in the problem's dtype, as uploaded */
    size_t in_bytes[3];  /* bytes of Q, K, V */
    guarded dq, dk, dv, dout, dlse;
    attn_buffers buf;
    attn_sparse_inputs sparse;        /* buf.sparse: the block mask handed to both kernels */
    const attn_block_mask *host_mask; /* the same on the host, sent to the submission */
    size_t guard;                     /* guard bytes on each side of a buffer */
    grader_remote_answer answer;      /* the submission's last launch */
    void *staging;                    /* download area, max(in_bytes, out) + 2 * guard */
    float *out, *lse;                 /* a kernel's output, unpacked */
} run_state;

static void set_message(grader_result *r, const char *fmt, const char *a, const char *b) {
    snprintf(r->message, sizeof r->message, fmt, a, b);
}

/* NaN-fills the outputs (and their guards) and launches kernel k; then synchronises and
 * downloads O and LSE. 0, or 1 with the CUDA error in r->message. */
static int launch_and_fetch(run_state *s, const attn_kernel *k, grader_result *r) {
    const attn_problem *p = s->p;
    if (grader_remote_is(k)) { /* the submission, in its own program */
        grader_remote_answer *a = &s->answer;
        grader_remote_launch(p, s->host_mask, s->packed, s->in_bytes, s->dout.bytes, s->dlse.bytes,
                             s->guard, a);
        if (a->error != 0) {
            set_message(r, "CUDA error at the launch: %s (%s)", a->error_name, a->error_text);
            return 1;
        }
        memcpy(s->lse, a->data[4], s->dlse.bytes);
        attn_unpack(s->out, a->data[3], attn_problem_q_elems(p), p->dtype);
        return 0;
    }
    if (attn_device_fill_nan(s->dout.base, s->dout.bytes + 2 * s->dout.guard) ||
        attn_device_fill_nan(s->dlse.base, s->dlse.bytes + 2 * s->dlse.guard))
        return 1;
    cudaGetLastError(); /* clear an earlier error */
    k->launch(p, &s->buf, 0);
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        set_message(r, "CUDA error at the launch: %s (%s)", cudaGetErrorName(err),
                    cudaGetErrorString(err));
        return 1;
    }
    if (attn_to_host(s->staging, s->dout.data, s->dout.bytes) ||
        attn_to_host(s->lse, s->dlse.data, s->dlse.bytes))
        return 1;
    attn_unpack(s->out, s->staging, attn_problem_q_elems(p), p->dtype);
    return 0;
}

/* "O differs from the reference at [b,h,i,d]: got x, want y; n of m elements wrong, ..." */
static void mismatch_message(grader_result *r, const char *what, const char *against,
                             const attn_check_result *c) {
    char where[160] = "";
    if (c->num_reported > 0) {
        const attn_mismatch *m = &c->first[0];
        char idx[64];
        if (m->d >= 0)
            snprintf(idx, sizeof idx, "[b=%d,h=%d,i=%d,d=%d]", m->b, m->h, m->i, m->d);
        else
            snprintf(idx, sizeof idx, "[b=%d,h=%d,i=%d]", m->b, m->h, m->i);
        snprintf(where, sizeof where, " at %s: got %.6g, want %.6g", idx,
                 isnan(m->got) ? NAN : m->got, m->want); /* NAN: print "nan", never "-nan" */
    }
    /* What a NaN tells: O starts as NaN, and NaN surrounds every input, so the element was
     * either never written or computed from a NaN (a read past an input's end, e.g. a key past
     * Lk, or a NaN made by the arithmetic itself). */
    const char *how_many = c->nonfinite == 0            ? ""
                           : c->nonfinite == c->checked ? ", all NaN/inf"
                                                        : ", some NaN/inf";
    const char *why = c->nonfinite == 0 ? ""
                                        : ": never written, or computed from a NaN (a read past "
                                          "the end of an input such as a key past Lk, or "
                                          "exp(-inf + inf))";
    snprintf(r->message, sizeof r->message,
             "%s differs from the %s%s; %zu of %zu elements wrong%s%s", what, against, where,
             c->bad, c->checked, how_many, why);
}

/* Inputs on the device equal to the checker's copy, guard zones intact? 0, or 1 with a message. */
static bool all_ff(const unsigned char *x, size_t n) {
    for (size_t e = 0; e < n; ++e)
        if (x[e] != 0xFF)
            return false;
    return true;
}

static int inputs_intact(run_state *s, grader_result *r) {
    static const char *names[3] = {"Q", "K", "V"};
    if (s->answer.data[0] != NULL) { /* the buffers as the submission's program left them */
        const grader_remote_answer *a = &s->answer;
        for (int t = 0; t < 5; ++t) {
            bool guards =
                all_ff(a->lead[t], a->lead_bytes[t]) && all_ff(a->trail[t], a->trail_bytes[t]);
            if (t < 3 && memcmp(a->data[t], s->packed[t], s->in_bytes[t]) != 0) {
                set_message(r, "the kernel wrote into its input %s (inputs are read-only: %s)",
                            names[t], "outputs go to O and LSE only");
                return 1;
            }
            if (!guards) {
                set_message(r,
                            t < 3 ? "the kernel wrote outside its buffers (next to input %s)%s"
                                  : "the kernel wrote past the start or end of %s%s",
                            t < 3 ? names[t] : "O or LSE",
                            t < 3 ? "" : " (check the row and tail-tile bounds)");
                return 1;
            }
        }
        return 0;
    }
    const guarded *g[3] = {&s->dq, &s->dk, &s->dv};
    for (int t = 0; t < 3; ++t) {
        if (attn_to_host(s->staging, g[t]->data, s->in_bytes[t]))
            return 1;
        if (memcmp(s->staging, s->packed[t], s->in_bytes[t]) != 0) {
            set_message(r, "the kernel wrote into its input %s (inputs are read-only: %s)",
                        names[t], "outputs go to O and LSE only");
            return 1;
        }
        if (guard_damage(g[t], s->staging) >= 0) {
            set_message(r, "the kernel wrote outside its buffers (next to input %s)%s", names[t],
                        "");
            return 1;
        }
    }
    if (guard_damage(&s->dout, s->staging) >= 0 || guard_damage(&s->dlse, s->staging) >= 0) {
        set_message(r, "the kernel wrote past the start or end of %s%s", "O or LSE",
                    " (check the row and tail-tile bounds)");
        return 1;
    }
    return 0;
}

static bool all_nan(const float *x, size_t n) {
    for (size_t e = 0; e < n; ++e)
        if (!isnan(x[e]))
            return false;
    return true;
}

/* Times kernel k (GPU only). */
static int time_kernel(run_state *s, const attn_kernel *k, double *ms) {
    if (grader_remote_is(k))
        return grader_remote_time(ms);
    attn_timing_opts opts = {.warmup = 5, .reps = 20, .flush_l2 = 1};
    attn_stats st;
    if (attn_time_kernel(k, s->p, &s->buf, &opts, &st))
        return 1;
    *ms = st.median_ms;
    return 0;
}

static const grader_hint *hints;
static int num_hints;

void grader_set_hints(const grader_hint *h, int n) {
    hints = h;
    num_hints = n;
}

/* The first hint whose reference the output matches: its text before the message. */
static void diagnose(run_state *s, const grader_case *c, float *scratch, float *scratch_lse,
                     grader_result *r) {
    for (int n = 0; n < num_hints; ++n) {
        if (attn_reference(s->p, hints[n].mask, s->in.q, s->in.k, s->in.v, scratch, scratch_lse) !=
            0)
            continue;
        if (attn_check_output(s->p, s->out, scratch, NULL, c->cli.amplitude).pass) {
            char was[sizeof r->message];
            snprintf(was, sizeof was, "%s", r->message);
            snprintf(r->message, sizeof r->message, "%s: %.500s", hints[n].says, was);
            return;
        }
    }
}

/* Appends whether the LSE is right to a failed O's message: a right LSE with a wrong O means the
 * running max m and sum l are right, and the accumulator (its rescaling, its normalisation, or
 * the V it sums) is not. */
static void lse_verdict(const attn_problem *p, const float *lse, const float *ref_lse,
                        double amplitude, grader_result *r) {
    attn_check_result cl = attn_check_lse_at(p, lse, ref_lse, amplitude);
    size_t n = strlen(r->message);
    if (cl.pass) {
        snprintf(r->message + n, sizeof r->message - n,
                 "; LSE: correct (so m and l are right: look at how O's accumulator is rescaled "
                 "and normalised)");
    } else if (cl.num_reported > 0) {
        const attn_mismatch *m = &cl.first[0];
        snprintf(r->message + n, sizeof r->message - n,
                 "; LSE: wrong too (%zu of %zu, first at [b=%d,h=%d,i=%d]: got %.6g, want %.6g)",
                 cl.bad, cl.checked, m->b, m->h, m->i, isnan(m->got) ? NAN : m->got, m->want);
    } else {
        snprintf(r->message + n, sizeof r->message - n, "; LSE: wrong too");
    }
}

static int run_checks(run_state *s, const grader_case *c, const attn_kernel *sub,
                      const attn_kernel *sol, const attn_mask *mask, grader_result *r) {
    const attn_problem *p = s->p;
    const size_t q_elems = attn_problem_q_elems(p), lse_elems = attn_problem_lse_elems(p);
    char why[256];

    /* The solution first, on the same inputs: its output is the second oracle. */
    if (launch_and_fetch(s, sol, r)) {
        fprintf(stderr, "grader error: the solution failed on this case: %s\n", r->message);
        return ATTN_EXIT_USAGE;
    }
    float *sol_out = malloc(q_elems * sizeof(float)), *sol_lse = malloc(lse_elems * sizeof(float));
    float *ref = malloc(q_elems * sizeof(float)), *ref_lse = malloc(lse_elems * sizeof(float));
    int status = 1;
    if (!sol_out || !sol_lse || !ref || !ref_lse)
        goto done;
    memcpy(sol_out, s->out, q_elems * sizeof(float));
    memcpy(sol_lse, s->lse, lse_elems * sizeof(float));

    if (attn_kernel_supports(sub, p, !on_simulator, why, sizeof why) == 0) {
        /* the learner's registry accepts the problem */
    } else {
        snprintf(r->message, sizeof r->message,
                 "your kernel's requirements (registry) refuse this case: %s", why);
        goto done;
    }
    if (launch_and_fetch(s, sub, r) || inputs_intact(s, r))
        goto done;

    /* The reference from the checker's own copy of the inputs, computed after the launch. */
    if (attn_reference(p, mask, s->in.q, s->in.k, s->in.v, ref, ref_lse) != 0) {
        snprintf(r->message, sizeof r->message, "grader error: the reference failed");
        status = ATTN_EXIT_USAGE;
        goto done;
    }
    attn_check_result cr = attn_check_output(p, s->out, ref, NULL, c->cli.amplitude);
    r->max_err = cr.max_abs_err;
    if (!cr.pass) {
        mismatch_message(r, "O", "reference", &cr);
        if (!all_nan(sol_lse, lse_elems)) /* what the LSE says, as the harness's run does */
            lse_verdict(p, s->lse, ref_lse, c->cli.amplitude, r);
        diagnose(s, c, sol_out, sol_lse, r); /* the solution's copies are not needed any more */
        goto done;
    }
    attn_check_result cs = attn_check_output(p, s->out, sol_out, NULL, c->cli.amplitude);
    if (!cs.pass) {
        mismatch_message(r, "O", "solution kernel's output", &cs);
        goto done;
    }
    if (!all_nan(sol_lse, lse_elems)) { /* the solution writes the LSE: so must the submission */
        attn_check_result cl = attn_check_lse_at(p, s->lse, ref_lse, c->cli.amplitude);
        if (!cl.pass) {
            mismatch_message(r, "LSE", "reference", &cl);
            goto done;
        }
    }
    r->passed = true;
    r->fraction = 1.0;
    snprintf(r->message, sizeof r->message, "correct (max abs error %.2g)", cr.max_abs_err);
    status = 0;

    if (c->perf) {
        double t_sub, t_sol;
        if (time_kernel(s, sol, &t_sol) || time_kernel(s, sub, &t_sub)) {
            r->passed = false;
            r->fraction = 0.0;
            snprintf(r->message, sizeof r->message, "timing failed (a CUDA error, see stderr)");
            status = 1;
            goto done;
        }
        double ratio = t_sub / t_sol;
        double f = (PERF_ZERO_RATIO - ratio) / (PERF_ZERO_RATIO - PERF_FULL_RATIO);
        r->fraction = f > 1.0 ? 1.0 : (f < 0.0 ? 0.0 : f);
        r->passed = r->fraction > 0.0;
        r->time_ms = t_sub;
        r->solution_ms = t_sol;
        snprintf(r->message, sizeof r->message,
                 "%.3f ms vs the solution's %.3f ms (%.2fx): full points up to %.2fx, none from "
                 "%.0fx",
                 t_sub, t_sol, ratio, PERF_FULL_RATIO, PERF_ZERO_RATIO);
        status = r->passed ? 0 : 1;
    }
done:
    free(sol_out);
    free(sol_lse);
    free(ref);
    free(ref_lse);
    return status;
}

int grader_run_case(const grader_case *c, const attn_example *submission,
                    const attn_example *solution, const attn_mask *mask,
                    const struct attn_block_mask *block_mask,
                    const struct attn_block_mask *host_block_mask, grader_result *r) {
    memset(r, 0, sizeof *r);
    r->max_err = r->time_ms = r->solution_ms = -1.0;
    const attn_problem *p = &c->p;
    const attn_kernel *sub = attn_example_find(submission, 1);
    const attn_kernel *sol = attn_example_find(solution, 1);
    char why[256];
    if (sol == NULL || attn_kernel_supports(sol, p, true, why, sizeof why) != 0) {
        snprintf(r->message, sizeof r->message, "grader error: the solution cannot run this case");
        return ATTN_EXIT_USAGE;
    }
    if (sub == NULL) {
        snprintf(r->message, sizeof r->message, "no kernel with id 1 in the submission's registry");
        return 1;
    }
    if (c->perf && on_simulator) {
        snprintf(r->message, sizeof r->message,
                 "not run: performance points need a GPU (simulator timings are not GPU "
                 "performance)");
        return ATTN_EXIT_NO_GPU;
    }
    attn_device_info dev;
    if (attn_device_init(&dev, why, sizeof why) != 0) {
        snprintf(r->message, sizeof r->message, "not run: %s", why);
        return ATTN_EXIT_NO_GPU;
    }

    run_state s;
    memset(&s, 0, sizeof s);
    s.p = p;
    const size_t esize = attn_dtype_size(p->dtype);
    const size_t q_elems = attn_problem_q_elems(p), k_elems = attn_problem_k_elems(p);
    const size_t lse_elems = attn_problem_lse_elems(p);
    /* Guard zones: at least a full K/V tile of rows past the end (64 rows of D). */
    const size_t guard = (size_t)64 * (size_t)p->D * esize + 4096;
    s.guard = guard;
    s.host_mask = host_block_mask;
    int status = 1;
    if (attn_host_inputs_make(&s.in, p, c->cli.seed, c->cli.amplitude) != 0)
        goto cleanup;
    s.in_bytes[0] = q_elems * esize;
    s.in_bytes[1] = s.in_bytes[2] = k_elems * esize;
    const float *src[3] = {s.in.q, s.in.k, s.in.v};
    guarded *dst[3] = {&s.dq, &s.dk, &s.dv};
    for (int t = 0; t < 3; ++t) {
        s.packed[t] = malloc(s.in_bytes[t]);
        if (s.packed[t] == NULL || guarded_alloc(dst[t], s.in_bytes[t], guard))
            goto cleanup;
        attn_pack(s.packed[t], src[t], s.in_bytes[t] / esize, p->dtype);
        if (attn_to_device(dst[t]->data, s.packed[t], s.in_bytes[t]))
            goto cleanup;
    }
    size_t big = s.in_bytes[0] > s.in_bytes[1] ? s.in_bytes[0] : s.in_bytes[1];
    s.staging = malloc(big + 2 * guard);
    s.out = malloc(q_elems * sizeof(float));
    s.lse = malloc(lse_elems * sizeof(float));
    if (!s.staging || !s.out || !s.lse || guarded_alloc(&s.dout, q_elems * esize, guard) ||
        guarded_alloc(&s.dlse, lse_elems * sizeof(float), guard))
        goto cleanup;
    s.buf.q = s.dq.data;
    s.buf.k = s.dk.data;
    s.buf.v = s.dv.data;
    s.buf.o = s.dout.data;
    s.buf.lse = (float *)s.dlse.data;
    s.sparse.block_mask = block_mask; /* attn_buffers.sparse: the block mask, no pattern */
    s.buf.sparse = &s.sparse;
    status = run_checks(&s, c, sub, sol, mask, r);
cleanup:
    if (status == 1 && r->message[0] == '\0')
        snprintf(r->message, sizeof r->message, "runtime error (see stderr)");
    attn_device_free(s.dq.base);
    attn_device_free(s.dk.base);
    attn_device_free(s.dv.base);
    attn_device_free(s.dout.base);
    attn_device_free(s.dlse.base);
    for (int t = 0; t < 3; ++t)
        free(s.packed[t]);
    free(s.staging);
    free(s.out);
    free(s.lse);
    attn_host_inputs_free(&s.in);
    return status;
}

/* ---- output --------------------------------------------------------------------------------- */

static void json_string(const char *s) {
    putchar('"');
    for (; *s; ++s) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void json_number(double x) {
    if (x < 0.0 || !isfinite(x))
        printf("null");
    else
        printf("%.6g", x);
}

int grader_emit(const grader_case *c, const grader_result *r, int status) {
    printf("{\"case\": ");
    json_string(c->name ? c->name : "");
    printf(", \"passed\": %s, \"fraction\": %.4f, \"message\": ", r->passed ? "true" : "false",
           r->fraction);
    json_string(r->message);
    printf(", \"max_err\": ");
    json_number(r->max_err);
    printf(", \"time_ms\": ");
    json_number(r->time_ms);
    printf(", \"solution_ms\": ");
    json_number(r->solution_ms);
    printf(", \"runner_setup\": %u}\n", grader_remote_setup());
    fflush(stdout);
    return status;
}

int grader_case_main(int argc, char **argv, const attn_example *solution,
                     int (*check)(const grader_case *c, grader_result *r)) {
    grader_case c;
    int status = grader_case_parse(&c, argc, argv, solution);
    if (status != 0)
        return status;
    grader_result r;
    memset(&r, 0, sizeof r);
    r.max_err = r.time_ms = r.solution_ms = -1.0;
    return grader_emit(&c, &r, check(&c, &r));
}
