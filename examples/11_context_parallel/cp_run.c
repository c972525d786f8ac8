/* cp_run.c — example 11's program (cp_run.h): the flags (cp_options.c), the device and the
 * transport, the seeded inputs every rank draws alike, the strategy's forward (and backward), the
 * result gathered on rank 0 (cp_gather.c) and checked there (cp_check.c); and --ranks, which
 * starts mpirun itself. */
#define _POSIX_C_SOURCE 200809L
#include "cp_run.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/device.h"
#include "attn/tensor.h"
#include "cp_check.h"
#include "cp_dsa.h"
#include "cp_gather.h"
#include "cp_options.h"
#include "cp_ring.h"

void cp_relaunch(int argc, char **argv) {
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE"))
        return; /* already one of mpirun's ranks */
    int at = 0;
    for (int i = 1; i + 1 < argc; ++i)
        if (strcmp(argv[i], "--ranks") == 0)
            at = i;
    if (!at)
        return;
    /* Bad flags are said here, in one line, before mpirun starts (else each rank says it and
     * mpirun adds its own report of the ranks' exit status). */
    cp_options o;
    char err[512];
    int P = atoi(argv[at + 1]); /* not a count of 1 or more: cp_parse says so */
    int rc = cp_parse(argc, argv, P >= 1 ? P : 1, &o, err, sizeof err);
    if (rc == -1) {
        fputs(cp_usage, stdout);
        exit(0);
    }
    if (rc) {
        fprintf(stderr, "%s\n", err);
        exit(rc);
    }
    /* ... and so is a gpu build without a GPU (exit 77), before mpirun spends seconds starting
     * ranks that would each find none */
    attn_device_info info;
    if (!attn_on_simulator() && (rc = attn_device_init_reported(&info)) != 0)
        exit(rc);
    char **args = calloc((size_t)argc + 8, sizeof *args);
    if (!args)
        exit(ATTN_EXIT_USAGE);
    int n = 0;
    args[n++] = (char *)CP_MPIEXEC;
    args[n++] = (char *)"--oversubscribe"; /* more ranks than cores: the simulator's runs */
    args[n++] = (char *)"-np";
    args[n++] = argv[at + 1];
    for (int i = 0; i < argc; ++i)
        if (i != at && i != at + 1)
            args[n++] = argv[i];
    /* Open MPI refuses root unless told (its documented variables): a container's CI runs as
     * root, and so does the tour there */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    /* shared memory by plain copies: containers often forbid cross-memory attach */
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    fflush(stdout);
    execv(CP_MPIEXEC, args);
    fprintf(stderr, "error: --ranks: cannot start %s\n", CP_MPIEXEC);
    exit(ATTN_EXIT_USAGE);
}

/* The forward, o->reps times (the ranks start each together); the time of the runs summed. */
static int cp_forward_runs(cp_transport *t, const cp_options *o, const attn_host_inputs *in,
                           const cp_dsa_inputs *din, cp_result *r, float **sel, double *seconds) {
    int failed = 0;
    *seconds = 0.0;
    for (int rep = 0; !failed && rep < o->reps; ++rep) {
        if (rep)
            cp_result_free(r);
        failed = t->barrier(t) != CP_OK;
        const double t0 = cp_now();
        if (o->dsa) {
            failed = failed || cp_dsa_forward(t, o->s.strategy, din, !o->gather_kv, o->plant_dsa, r,
                                              sel, r->bytes) != 0;
            r->dsa = true;
        } else
            failed = failed || cp_forward(t, &o->s, in, r) != 0;
        *seconds += cp_now() - t0;
    }
    return failed;
}

/* The backward of the loss sum(dO * O), dO seeded as example 07's (stream 3), and its dQ, dK, dV
 * gathered on rank 0. */
static int cp_backward_run(cp_transport *t, const cp_options *o, const attn_host_inputs *in,
                           cp_result *r, cp_result *rb, cp_grads *grads, cp_gathered *gb,
                           float **dout) {
    const size_t n = attn_problem_q_elems(&o->s.p);
    *dout = malloc(n * sizeof(float));
    if (*dout == NULL)
        return 1;
    attn_fill_uniform(*dout, n, (uint64_t)o->seed, 3, 1.0f, o->s.p.dtype);
    if (cp_backward(t, &o->s, in, *dout, r, rb, grads) != 0)
        return 1;
    gb->n = 3;
    for (int c = 0; c < r->nchunks; ++c) {
        gb->f[0].dev[c] = grads->dq[c], gb->f[1].dev[c] = grads->dk[c];
        gb->f[2].dev[c] = grads->dv[c];
        for (int i = 0; i < 3; ++i)
            gb->f[i].width = o->s.p.D;
    }
    return cp_gather(t, &o->s, rb, gb) != 0;
}

/* What one run holds between its steps. */
typedef struct cp_run {
    cp_options o;
    cp_transport *t;
    int rank, P;
    attn_host_inputs in; /* ring, zigzag, Ulysses */
    cp_dsa_inputs din;   /* --dsa */
    cp_result r, rb;     /* the forward's result; the backward's work */
    cp_grads grads;
    cp_gathered g, gb; /* on rank 0: the forward's result, the gradients */
    float *dout, *sel[CP_MAX_CHUNKS];
} cp_run;

/* The flags, the device, the transport: 0, or the exit status with rank 0's one line said
 * (-1: --help printed, exit 0). */
static int cp_start(cp_run *x, int argc, char **argv) {
    MPI_Comm_rank(MPI_COMM_WORLD, &x->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &x->P);
    char err[512];
    int rc = cp_parse(argc, argv, x->P, &x->o, err, sizeof err);
    if (rc == -1) {
        if (x->rank == 0)
            fputs(cp_usage, stdout);
        return -1;
    }
    if (rc == 0) {
        char why[480];
        attn_device_info info;
        rc = attn_device_init(&info, why, sizeof why);
        /* after the device: NCCL then picks this rank's GPU (attn_device_init takes device 0) */
        if (rc == 0 &&
            (x->t = cp_transport_open(x->o.backend, x->o.timeout_s, why, sizeof why, &rc)) != NULL)
            return 0;
        snprintf(err, sizeof err, "%s: %s", rc == ATTN_EXIT_NO_GPU ? "SKIP" : "error", why);
    }
    if (x->rank == 0)
        fprintf(stderr, "%s\n", err);
    return rc;
}

/* The inputs, the forward, the result gathered on rank 0, then the backward if asked: 0, or 1
 * after an error. */
static int cp_compute(cp_run *x, double *seconds) {
    const cp_options *o = &x->o;
    attn_problem dp = o->s.p;
    dp.dtype = ATTN_BF16;
    int failed = o->dsa ? cp_dsa_inputs_make(&x->din, &dp, o->index_heads, o->index_dim, o->dsa,
                                             (uint64_t)o->seed) != 0
                        : attn_host_inputs_make(&x->in, &o->s.p, (uint64_t)o->seed, 1.0f) != 0;
    failed = failed || cp_forward_runs(x->t, o, &x->in, &x->din, &x->r, x->sel, seconds);
    x->g.n = o->dsa ? 3 : 2;
    for (int c = 0; !failed && c < x->r.nchunks; ++c) {
        x->g.f[0].dev[c] = x->r.o[c], x->g.f[0].width = o->s.p.D;
        x->g.f[1].dev[c] = x->r.lse[c], x->g.f[1].width = 1;
        x->g.f[2].dev[c] = x->sel[c], x->g.f[2].width = o->dsa;
    }
    failed = failed || cp_gather(x->t, &o->s, &x->r, &x->g) != 0;
    if (!failed && o->backward)
        failed = cp_backward_run(x->t, o, &x->in, &x->r, &x->rb, &x->grads, &x->gb, &x->dout);
    return failed;
}

/* Rank 0's checks and its verdict line; true if they pass (the other ranks: true). */
static bool cp_verdict(const cp_run *x, double seconds) {
    const cp_options *o = &x->o;
    if (x->rank != 0)
        return true;
    if (!o->quiet)
        printf("time per forward on rank 0: %.3g ms over %d run(s) (wall clock, transfers "
               "included%s)\n",
               1e3 * seconds / o->reps, o->reps,
               attn_on_simulator() ? "; the simulator's CPU time, not a GPU's" : "");
    bool pass = o->dsa ? cp_report_dsa(o, x->P, &x->din, &x->g) : cp_report(o, x->P, &x->in, &x->g);
    if (o->backward)
        pass = cp_report_backward(o, x->P, &x->in, x->dout, &x->gb) && pass;
    printf("%s\n", pass ? "PASS" : "FAIL");
    return pass;
}

static void cp_finish(cp_run *x) {
    if (x->o.backward) {
        cp_grads_free(&x->grads);
        cp_result_free(&x->rb);
    }
    cp_result_free(&x->r);
    if (x->o.dsa)
        cp_dsa_inputs_free(&x->din);
    else
        attn_host_inputs_free(&x->in);
    cp_gathered_free(&x->g);
    cp_gathered_free(&x->gb);
    free(x->dout);
    x->t->close(x->t);
}

int cp_main(int argc, char **argv) {
    cp_run x;
    memset(&x, 0, sizeof x);
    const int rc = cp_start(&x, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    double seconds = 0.0;
    if (cp_compute(&x, &seconds)) {
        fprintf(stderr, "error: rank %d: the run failed (the line above says why)\n", x.rank);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    const bool pass = cp_verdict(&x, seconds);
    cp_finish(&x);
    return pass ? 0 : 1;
}
