/* test_example.c — attn_example_main's exit statuses and messages for everything decided before
 * the device is touched (usage errors, --help, --list, kernels that cannot run the problem), and
 * the "no GPU" skip of a gpu build. On the simulator, where device memory is host memory, it
 * also runs the whole pipeline with a host-side "kernel": a correct one passes (exit 0), one that
 * writes nothing fails (exit 1).
 *
 * With --check-rows, the driver computes and checks only a sample of rows: a kernel wrong
 * outside the sample passes, one that writes nothing still fails, and the lines say so.
 *
 * The driver's stderr (and, where a test reads it, its stdout) is redirected to a file for each
 * call and read back. */
#define _POSIX_C_SOURCE 200809L /* dup, dup2, fileno: to put stdout back after redirecting it */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "attn/device.h"
#include "attn/example.h"
#include "attn/reference.h"
#include "attn/tensor.h"
#include "unit_test.h"

static const char *stderr_path = "attn_unit_example.stderr";

static void writes_nothing(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)p;
    (void)b;
    (void)s;
}

/* The correct answer, computed on the host into the buffers (valid only where device pointers
 * are host pointers: the simulator). */
static void host_reference(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)s;
    attn_reference(p, NULL, (const float *)b->q, (const float *)b->k, (const float *)b->v,
                   (float *)b->o, b->lse);
}

/* The correct output, but no log-sum-exp (some kernels do not compute it). */
static void host_reference_no_lse(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)s;
    attn_reference(p, NULL, (const float *)b->q, (const float *)b->k, (const float *)b->v,
                   (float *)b->o, NULL);
}

/* The correct output for the default scale 1/sqrt(D), whatever the problem says. */
static void default_scale_only(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    attn_problem fixed = *p;
    fixed.scale = 1.0f / sqrtf((float)p->D);
    host_reference(&fixed, b, s);
}

/* The correct answer except in one row, i = 5 of (b = 0, h = 0), a row a sample of 2 rows leaves
 * out (it takes the last row of each head). */
static void wrong_in_row_5(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    host_reference(p, b, s);
    ((float *)b->o)[attn_problem_row_offset(p, true, 0, 0, 5)] += 1.0f;
}

/* A kernel that claims varlen but treats the packed batch as dense [B, H, Lq, D]: wrong as soon
 * as the sequences differ in length. */
static void dense_only(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    attn_problem dense = *p;
    dense.cu_seqlens_q = dense.cu_seqlens_k = NULL;
    dense.Lq = (int)(attn_problem_q_rows(p) / p->B);
    dense.Lk = (int)(attn_problem_k_rows(p) / p->B);
    host_reference(&dense, b, s);
}

/* Requirements: dtypes, max_d, d_multiple, causal, varlen, gpu_only. */
#define F32_D128                                                                                   \
    { ATTN_DTYPE_BIT(ATTN_F32), 128, 1, true, false, false }
#define F16_GPU_ONLY                                                                               \
    { ATTN_DTYPE_BIT(ATTN_F16), 256, 8, true, false, true }

#define F32_VARLEN                                                                                 \
    { ATTN_DTYPE_BIT(ATTN_F32), 128, 1, true, true, false }

static const attn_kernel kernels[8] = {
    {1, "first", "the first kernel", host_reference, F32_D128, NULL, 0, NULL},
    {2, "second", "uses wgmma", writes_nothing, F16_GPU_ONLY, NULL, 0, NULL},
    {3, "broken", "writes nothing", writes_nothing, F32_D128, NULL, 0, NULL},
    {4, "no_lse", "leaves the LSE alone", host_reference_no_lse, F32_D128, NULL, 0, NULL},
    {5, "fixed_scale", "ignores --scale", default_scale_only, F32_D128, NULL, 0, NULL},
    {6, "wrong_row", "wrong in one row", wrong_in_row_5, F32_D128, NULL, 0, NULL},
    {7, "varlen", "takes cu_seqlens", host_reference, F32_VARLEN, NULL, 0, NULL},
    {8, "varlen_dense", "takes cu_seqlens but ignores them", dense_only, F32_VARLEN, NULL, 0, NULL},
};

static const attn_example example = {.name = "99_unit",
                                     .summary = "the unit test's example",
                                     ATTN_KERNELS(kernels),
                                     .defaults = {.gpu = {1, 2, 64, 32}, .sim = {1, 2, 40, 16}}};

/* The start of file path (at most len - 1 bytes) as a string in buf; "" when it cannot be read. */
static void read_text(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (f != NULL) {
        buf[fread(buf, 1, len - 1, f)] = '\0';
        fclose(f);
    }
}

/* Runs the driver on the NULL-terminated args; returns its status, its stderr in err. */
static int run(char *err, size_t err_len, const char *const *args) {
    char *argv[32] = {"unit_example"};
    int argc = 1;
    while (args[argc - 1] != NULL && argc < 31) {
        argv[argc] = (char *)args[argc - 1];
        argc++;
    }
    fflush(stdout);
    if (freopen(stderr_path, "w", stderr) == NULL)
        return -1;
    int rc = attn_example_main(argc, argv, &example);
    fflush(stdout);
    fflush(stderr);
    read_text(stderr_path, err, err_len);
    return rc;
}

/* run() with the driver's stdout in out as well. */
static int run_capturing(char *out, size_t out_len, char *err, size_t err_len,
                         const char *const *args) {
    static const char *out_path = "attn_unit_example.stdout";
    fflush(stdout);
    int saved = dup(fileno(stdout));
    if (saved < 0 || freopen(out_path, "w", stdout) == NULL)
        return -1;
    int rc = run(err, err_len, args);
    fflush(stdout);
    dup2(saved, fileno(stdout));
    close(saved);
    read_text(out_path, out, out_len);
    remove(out_path);
    return rc;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_before_the_device(void) {
    char err[1024];
    CHECK_EQ(run(err, sizeof err, ARGS("--help")), 0);
    CHECK_EQ(run(err, sizeof err, ARGS("--list", "--kernel", "3")), 0);
    CHECK_EQ(run(err, sizeof err, ARGS("--foo")), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "error: unknown option '--foo' (see --help)\n");
    CHECK_EQ(run(err, sizeof err, ARGS("-L", "0")), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "error: -L/--seqlen must be a positive integer (got '0')");
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "9")), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "error: no kernel 9 in this example (use --list)");
    CHECK_EQ(run(err, sizeof err, ARGS("-D", "512")), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err,
                   "error: D=512 is larger than any kernel of this example supports (max 256)");
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "1", "-D", "200")), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "error: D=200 exceeds the kernel's maximum 128");
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "1", "--dtype", "bf16")), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "error: dtype bf16 not supported by kernel 'first' (supports f32)");
    CHECK_EQ(run(err, sizeof err, ARGS("--dtype", "bf16")), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "error: no kernel of this example can run this problem: dtype bf16");
    CHECK_EQ(run(err, sizeof err, ARGS("-B", "100000", "-H", "1000", "-L", "1000000")),
             ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "error: problem too large");
    CHECK_EQ(run(err, sizeof err, ARGS("--check-rows", "-5")), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "error: --check-rows must be a non-negative integer (got '-5')\n");
}

/* A gpu build on a machine without a GPU: exit 77 and one "SKIP:" line. (With a GPU, or on the
 * simulator, there is a device and this case does not apply.) */
static void test_no_gpu(void) {
    int count = 0;
    if (strcmp(attn_backend_name(), "gpu") != 0 ||
        (cudaGetDeviceCount(&count) == cudaSuccess && count > 0))
        return;
    (void)cudaGetLastError();
    char err[1024];
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "1")), ATTN_EXIT_NO_GPU);
    const char *prefix = "SKIP: no CUDA GPU available: cudaGetDeviceCount failed with ";
    CHECK(strncmp(err, prefix, strlen(prefix)) == 0);
    CHECK_CONTAINS(err, "use the simulator build (build/sim)\n");
    CHECK(strchr(err, '\n') == err + strlen(err) - 1);
}

/* The whole pipeline on the simulator. */
static void test_simulator_run(void) {
    if (strcmp(attn_backend_name(), "sim") != 0)
        return;
    char err[1024];
    /* the GPU-only kernel alone: skipped, as on a machine without a GPU */
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "2")), ATTN_EXIT_NO_GPU);
    CHECK_CONTAINS(err, "SKIP: kernel 'second' needs a GPU (uses wgmma); this is the simulator");
    CHECK_EQ(run(err, sizeof err,
                 ARGS("--kernel", "1", "--causal", "--lq", "33", "--lk", "20", "--check-only",
                      "--json", "attn_unit_example.jsonl")),
             0);
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "1", "--reps", "2", "--warmup", "0")), 0);
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "3", "--check-only")), 1);
    /* an LSE buffer left entirely NaN was not produced: not checked, not a failure */
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "4", "--check-only")), 0);
    /* --scale reaches the problem: a kernel that ignores it fails only when it is given */
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "5", "--check-only")), 0);
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "5", "--check-only", "--scale", "0.3")), 1);
    /* a sample of rows: the row kernel 6 gets wrong is not in it; every row: it fails */
    char out[8192];
    CHECK_EQ(run_capturing(out, sizeof out, err, sizeof err,
                           ARGS("--kernel", "6", "--check-only", "--check-rows", "2")),
             0);
    CHECK_CONTAINS(out, "reference: 2 of 80 rows sampled (use --check-all for every row), ");
    CHECK_CONTAINS(out, "output: PASS 32 checked, 1248 not sampled, ");
    CHECK_CONTAINS(out, "lse: PASS 2 checked, 78 not sampled, ");
    CHECK_EQ(run_capturing(out, sizeof out, err, sizeof err, ARGS("--kernel", "6", "--check-only")),
             1); /* the default for a problem this small: every row */
    CHECK(strstr(out, "sampled") == NULL);
    CHECK_CONTAINS(out, "output: FAIL 1/1280 bad (0 non-finite), ");
    CHECK_EQ(run(err, sizeof err,
                 ARGS("--kernel", "6", "--check-only", "--check-rows", "2", "--check-all")),
             1);
    /* a kernel that writes nothing fails on the sampled rows */
    CHECK_EQ(run_capturing(out, sizeof out, err, sizeof err,
                           ARGS("--kernel", "3", "--check-only", "--check-rows", "2")),
             1);
    CHECK_CONTAINS(out, "output: FAIL 32/32 bad (32 non-finite), 1248 not sampled, ");
    /* all kernels: 1, 4, 5 pass, 2 is skipped (f16 only; the default dtype is f32), 3 and 6 fail */
    CHECK_EQ(run(err, sizeof err, ARGS("--check-only", "--quiet")), 1);
    FILE *f = fopen("attn_unit_example.jsonl", "r");
    char line[2048] = "";
    CHECK(f != NULL && fgets(line, sizeof line, f) != NULL);
    CHECK_CONTAINS(line, "\"kernel\":\"first\"");
    CHECK_CONTAINS(line, "\"Lq\":33,\"Lk\":20");
    CHECK_CONTAINS(line, "\"status\":\"PASS\"");
    if (f != NULL)
        fclose(f);
    remove("attn_unit_example.jsonl");
}

/* --seqlens: a packed batch reaches the kernel with its cu_seqlens on the device; kernels without
 * varlen are refused; a kernel that ignores the offsets fails. */
static void test_varlen(void) {
    char err[1024], out[8192];
    CHECK_EQ(run(err, sizeof err, ARGS("--kernel", "1", "--seqlens", "3,5")), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "error: kernel 'first' does not support variable-length batches");
    CHECK_EQ(run(err, sizeof err, ARGS("--seqlens", "3,5,x")), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "error: --seqlens must be a comma-separated list");
    if (strcmp(attn_backend_name(), "sim") != 0)
        return;
    CHECK_EQ(run_capturing(out, sizeof out, err, sizeof err,
                           ARGS("--kernel", "7", "--seqlens", "5,0,17,1", "--seqlens-k", "9,4,3,1",
                                "--causal", "--check-only")),
             0);
    CHECK_CONTAINS(out, "problem: B=4 H=2 Lq=17 Lk=9 D=16");
    CHECK_CONTAINS(out, "varlen: packed [total, H, D], query lengths 5,0,17,1 (total 23), key "
                        "lengths 9,4,3,1 (total 17)");
    CHECK_CONTAINS(out, "output: PASS");
    CHECK_EQ(
        run(err, sizeof err, ARGS("--kernel", "8", "--seqlens", "6,6", "-H", "1", "--check-only")),
        0); /* one head, equal lengths: the packed layout is the dense one */
    CHECK_EQ(
        run(err, sizeof err, ARGS("--kernel", "8", "--seqlens", "2,10", "-H", "1", "--check-only")),
        1);
    /* every kernel: only 7 and 8 take the batch, the others are skipped with the reason; 8 fails
     * (with two heads a packed row is not a dense row) */
    CHECK_EQ(
        run_capturing(out, sizeof out, err, sizeof err, ARGS("--seqlens", "4,4", "--check-only")),
        1);
    CHECK_CONTAINS(out, "SKIP: kernel 'first' does not support variable-length batches");
}

/* ---- the shapes a staged example's header and registry share (attn/example.h, problem.h) ---- */
typedef struct shape_args {
    int launched;
    cudaStream_t stream;
} shape_args;
typedef struct shape_opts {
    int m, n;
} shape_opts;
static const attn_option shape_options[] = {
    {"-m", "M", "m", ATTN_OPTION_INT, offsetof(shape_opts, m), 1, 9, NULL, "1", NULL},
    {"-n", "N", "n", ATTN_OPTION_INT, offsetof(shape_opts, n), 1, 9, NULL, "1", NULL},
};
static void shape_launch(const shape_args *a, cudaStream_t s) {
    ((shape_args *)a)->launched++;
    ((shape_args *)a)->stream = s;
}
ATTN_LAUNCH_ARGS(shape_run, shape_launch, shape_args)
/* declared through the hook types, defined with their signatures: a mismatch does not compile */
static attn_stage_clear_fn shape_clear;
static attn_stage_check_fn shape_check;
static attn_module_setup_fn shape_setup;
static int shape_clear(void *state, const attn_kernel *k, int chunk) {
    (void)k;
    return *(int *)state + chunk;
}
static int shape_check(void *state, const attn_kernel *k, int chunk, attn_stage_check *out) {
    (void)state, (void)k, (void)chunk;
    out->pass = true;
    return 0;
}
static int shape_setup(void *state, const attn_problem *p, const attn_cli *cli, int check_rows,
                       attn_buffers *b, int *chunks) {
    (void)state, (void)p, (void)cli, (void)b;
    *chunks = check_rows;
    return 0;
}

static void test_module_shapes(void) {
    static const attn_stage stages[] = {{"one", false, NULL, shape_clear, shape_check},
                                        {"two", true, NULL, shape_clear, shape_check},
                                        {"three", false, NULL, NULL, NULL}};
    const attn_module m = {ATTN_MODULE_OPTIONS(shape_options, shape_opts), ATTN_STAGES(stages),
                           .setup = shape_setup};
    CHECK(m.options == shape_options);
    CHECK_EQ(m.num_options, 2);
    CHECK_EQ(m.options_size, sizeof(shape_opts));
    CHECK(m.stages == stages);
    CHECK_EQ(m.num_stages, 3);
    int state = 4, chunks = 0;
    CHECK_EQ(m.stages[1].clear(&state, NULL, 3), 7);
    CHECK_EQ(m.setup(&state, NULL, NULL, 5, NULL, &chunks), 0);
    CHECK_EQ(chunks, 5);
    /* the launcher gets the module's arguments and the stream, nothing else */
    shape_args a = {0, NULL};
    const attn_buffers b = {.args = &a};
    const attn_kernel k = {ATTN_VERSION(1, "shape", "ATTN_LAUNCH_ARGS"), .launch = shape_run};
    k.launch(NULL, &b, (cudaStream_t)&state);
    k.launch(NULL, &b, (cudaStream_t)&state);
    CHECK_EQ(a.launched, 2);
    CHECK(a.stream == (cudaStream_t)&state);
}

/* attn_device_write and attn_device_read (and attn_device_put and attn_device_get) round-trip the
 * dtype's values (the simulator: device memory is host memory); a value that is not one of the
 * dtype's comes back rounded. */
static void test_device_read_write(void) {
    if (strcmp(attn_backend_name(), "sim") != 0)
        return;
    const float x[4] = {1.0f, -0.3330078125f, 1.0f / 3.0f, 65504.0f};
    const attn_dtype types[2] = {ATTN_F16, ATTN_BF16};
    for (int i = 0; i < 2; ++i) {
        float in[4], back[4] = {0};
        uint16_t staging[4];
        for (int j = 0; j < 4; ++j)
            in[j] = attn_round_dtype(x[j], types[i]);
        void *d = attn_device_alloc(sizeof staging);
        CHECK(d != NULL);
        CHECK_EQ(attn_device_write(d, x, 4, types[i], staging), 0);
        CHECK_EQ(attn_device_read(back, d, 4, types[i], staging), 0);
        for (int j = 0; j < 4; ++j)
            CHECK(back[j] == in[j]);
        CHECK(back[2] != x[2]); /* 1/3 is not a 16-bit value */
        /* attn_device_put and attn_device_get: the same through a scratch grown from nothing */
        void *grown = NULL;
        size_t cap = 0;
        float again[4] = {0};
        CHECK_EQ(attn_device_write(d, again, 4, types[i], staging), 0); /* zeros first */
        CHECK_EQ(attn_device_put(d, x, 4, types[i], &grown, &cap), 0);
        CHECK(grown != NULL && cap >= sizeof staging);
        CHECK_EQ(attn_device_get(again, d, 4, types[i], &grown, &cap), 0);
        for (int j = 0; j < 4; ++j)
            CHECK(again[j] == in[j]);
        free(grown);
        attn_device_free(d);
    }
}

int main(void) {
    test_module_shapes();
    test_device_read_write();
    test_before_the_device();
    test_no_gpu();
    test_simulator_run();
    test_varlen();
    remove(stderr_path);
    return unit_finish();
}
