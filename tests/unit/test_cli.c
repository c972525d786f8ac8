/* test_cli.c — every flag in both spellings, defaults, and every kind of bad value (exit 2 with a
 * one-line message naming the flag); how many rows are checked by default. */
#include <stddef.h>
#include <stdint.h>

#include "attn/cli.h"
#include "attn/device.h"
#include "unit_test.h"

/* Parses a NULL-terminated list of arguments (argv[0] is added). */
static int parse(attn_cli *cli, char *err, size_t err_len, const char *const *args) {
    char *argv[64] = {"prog"};
    int argc = 1;
    while (args[argc - 1] != NULL && argc < 63) {
        argv[argc] = (char *)args[argc - 1];
        argc++;
    }
    err[0] = '\0';
    return attn_cli_parse(cli, argc, argv, err, err_len);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_defaults(void) {
    attn_cli c;
    char err[256];
    static const char *const none[] = {NULL};
    CHECK_EQ(parse(&c, err, sizeof err, none), 0);
    CHECK(!c.help && !c.list && !c.check_only && !c.quiet && !c.causal && !c.dtype_set);
    CHECK(c.kernel == 0 && c.B == 0 && c.H == 0 && c.Lq == 0 && c.Lk == 0 && c.D == 0);
    CHECK(c.scale == 0.0f && c.amplitude == 1.0f && c.seed == 1234u);
    CHECK(c.inputs == ATTN_INPUTS_UNIFORM);
    CHECK(c.reps == -1 && c.warmup == -1 && c.json_path == NULL && c.csv_path == NULL);
    CHECK(c.check_rows == -1);
}

static void test_every_flag(void) {
    attn_cli c;
    char err[256];
    CHECK_EQ(
        parse(&c, err, sizeof err,
              ARGS("-B", "2", "--heads=3", "-L", "100", "--lq", "50", "-D=64", "--dtype", "bf16",
                   "--causal", "--scale", "0.5", "--amplitude=10", "--inputs", "opposed", "--seed",
                   "18446744073709551615", "--reps", "7", "--warmup", "0", "--check-only", "--json",
                   "out.json", "--csv=-", "--quiet", "--kernel", "2", "--list", "-h")),
        0);
    CHECK(err[0] == '\0');
    CHECK(c.B == 2 && c.H == 3 && c.Lq == 50 && c.Lk == 100 && c.D == 64);
    CHECK(c.dtype_set && c.dtype == ATTN_BF16 && c.causal);
    CHECK(c.scale == 0.5f && c.amplitude == 10.0f && c.seed == UINT64_MAX);
    CHECK(c.inputs == ATTN_INPUTS_OPPOSED);
    CHECK(c.reps == 7 && c.warmup == 0 && c.check_only && c.quiet && c.list && c.help);
    CHECK(c.kernel == 2 && strcmp(c.json_path, "out.json") == 0 && strcmp(c.csv_path, "-") == 0);

    CHECK_EQ(parse(&c, err, sizeof err,
                   ARGS("--batch", "4", "-H", "5", "--seqlen=9", "--headdim", "16", "--lk", "11",
                        "--help", "--kernel=all", "--dtype=half")),
             0);
    CHECK(c.B == 4 && c.H == 5 && c.Lq == 9 && c.Lk == 11 && c.D == 16 && c.help);
    CHECK(c.kernel == 0 && c.dtype == ATTN_F16);

    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--check-rows", "100")), 0);
    CHECK_EQ(c.check_rows, 100);
    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--check-rows=0")), 0);
    CHECK_EQ(c.check_rows, 0);
    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--check-rows", "5", "--check-all")), 0);
    CHECK_EQ(c.check_rows, 0);
    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--check-all", "--check-rows", "7")), 0);
    CHECK_EQ(c.check_rows, 7); /* the last one given wins */

    /* --lq/--lk override -L whatever the order */
    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--lq", "3", "-L", "8")), 0);
    CHECK(c.Lq == 3 && c.Lk == 8);
    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--lk", "5", "--lq", "6")), 0);
    CHECK(c.Lq == 6 && c.Lk == 5);
}

/* Each bad command line: exit 2 and a message containing `want` (the flag's name, usually). */
static void test_bad_values(void) {
    static const struct {
        const char *args[4];
        const char *want;
    } cases[] = {
        {{"-B", "0"}, "-B/--batch must be a positive integer (got '0')"},
        {{"-B", "12x"}, "-B/--batch must be a positive integer (got '12x')"},
        {{"--batch", "-1"}, "-B/--batch must be a positive integer (got '-1')"},
        {{"-B", " 4"}, "-B/--batch must be a positive integer"},
        {{"-B", "+4"}, "-B/--batch must be a positive integer"},
        {{"-B", "99999999999"}, "-B/--batch is too large (got '99999999999'; at most 2147483647)"},
        {{"-B", "2147483648"}, "-B/--batch is too large"},
        {{"--batch"}, "option --batch needs a value (N)"},
        {{"-H", ""}, "-H/--heads must be a positive integer (got '')"},
        {{"--heads=x"}, "-H/--heads must be a positive integer (got 'x')"},
        {{"-L", "abc"}, "-L/--seqlen must be a positive integer"},
        {{"-L", "1.5"}, "-L/--seqlen must be a positive integer"},
        {{"-D", "0"}, "-D/--headdim must be a positive integer"},
        {{"--lq", "0"}, "--lq must be a positive integer"},
        {{"--lk", "x"}, "--lk must be a positive integer"},
        {{"--dtype", "fp8"}, "--dtype must be f32, f16 or bf16 (got 'fp8')"},
        {{"--dtype"}, "option --dtype needs a value (f32|f16|bf16)"},
        {{"--scale", "0"}, "--scale must be a positive finite number (got '0')"},
        {{"--scale", "-1"}, "--scale must be a positive finite number"},
        {{"--scale", "nan"}, "--scale must be a positive finite number"},
        {{"--scale", "inf"}, "--scale must be a positive finite number"},
        {{"--scale", "1e999"}, "--scale must be a positive finite number"},
        {{"--scale", "1e-60"}, "--scale must be a positive finite number"},
        {{"--scale", "0.5x"}, "--scale must be a positive finite number"},
        {{"--amplitude", "0"}, "--amplitude must be a positive finite number"},
        {{"--amplitude="}, "--amplitude must be a positive finite number (got '')"},
        {{"--inputs", "gaussian"}, "--inputs must be uniform or opposed (got 'gaussian')"},
        {{"--seed", "-1"}, "--seed must be an integer in 0..18446744073709551615 (got '-1')"},
        {{"--seed", "18446744073709551616"}, "--seed must be an integer"},
        {{"--reps", "0"}, "--reps must be a positive integer"},
        {{"--warmup", "-1"}, "--warmup must be a non-negative integer (got '-1')"},
        {{"--check-rows", "-1"}, "--check-rows must be a non-negative integer (got '-1')"},
        {{"--check-rows", "10k"}, "--check-rows must be a non-negative integer (got '10k')"},
        {{"--check-rows="}, "--check-rows must be a non-negative integer (got '')"},
        {{"--check-rows", "4294967296"}, "--check-rows is too large"},
        {{"--check-rows"}, "option --check-rows needs a value (N)"},
        {{"--check-all=1"}, "option --check-all takes no value"},
        {{"--kernel", "0"}, "--kernel must be 'all' or a kernel id >= 1 (got '0')"},
        {{"--kernel", "two"}, "--kernel must be 'all' or a kernel id >= 1 (got 'two')"},
        {{"--json"}, "option --json needs a value (FILE)"},
        {{"--json="}, "--json needs a file name"},
        {{"--csv", ""}, "--csv needs a file name"},
        {{"--causal=1"}, "option --causal takes no value (got '--causal=1')"},
        {{"--quiet=yes"}, "option --quiet takes no value"},
        {{"--foo"}, "error: unknown option '--foo' (see --help)"},
        {{"--foo=3"}, "error: unknown option '--foo' (see --help)"},
        {{"-x"}, "error: unknown option '-x' (see --help)"},
        {{"-B4"}, "error: unknown option '-B4' (see --help)"},
        {{"stray"}, "error: unexpected argument 'stray' (see --help)"},
        {{"-L", "8", "-"}, "error: unexpected argument '-' (see --help)"},
    };
    int wrong_status = 0, wrong_prefix = 0, multi_line = 0;
    for (size_t n = 0; n < sizeof cases / sizeof cases[0]; ++n) {
        attn_cli c;
        char err[256];
        wrong_status += parse(&c, err, sizeof err, cases[n].args) != ATTN_EXIT_USAGE;
        CHECK_CONTAINS(err, cases[n].want);
        wrong_prefix += strncmp(err, "error: ", 7) != 0;
        multi_line += strchr(err, '\n') != NULL;
    }
    CHECK_EQ(wrong_status, 0);
    CHECK_EQ(wrong_prefix, 0);
    CHECK_EQ(multi_line, 0);
}

/* --seqlens / --seqlens-k: B = count, Lq/Lk = longest, cu_seqlens = prefix sums; zero lengths
 * allowed; every contradiction or malformed list is one line and exit 2, with nothing allocated. */
static void test_seqlens(void) {
    attn_cli c;
    char err[256];
    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--seqlens", "1,17,0,129", "-H", "2")), 0);
    CHECK(c.B == 4 && c.Lq == 129 && c.Lk == 129 && c.H == 2);
    CHECK(c.cu_seqlens_q != NULL && c.cu_seqlens_k != NULL);
    if (c.cu_seqlens_q != NULL && c.cu_seqlens_k != NULL) {
        static const int want[5] = {0, 1, 18, 18, 147};
        for (int b = 0; b < 5; ++b) {
            CHECK_EQ(c.cu_seqlens_q[b], want[b]);
            CHECK_EQ(c.cu_seqlens_k[b], want[b]);
        }
    }
    attn_cli_free(&c);
    CHECK(c.cu_seqlens_q == NULL && c.cu_seqlens_k == NULL);

    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--seqlens-k=300,5", "--seqlens=7,64", "-B", "2")), 0);
    CHECK(c.B == 2 && c.Lq == 64 && c.Lk == 300);
    if (c.cu_seqlens_q != NULL && c.cu_seqlens_k != NULL)
        CHECK(c.cu_seqlens_q[1] == 7 && c.cu_seqlens_q[2] == 71 && c.cu_seqlens_k[1] == 300 &&
              c.cu_seqlens_k[2] == 305);
    attn_cli_free(&c);
    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--seqlens", "5")), 0);
    CHECK(c.B == 1 && c.Lq == 5 && c.Lk == 5);
    attn_problem p = unit_varlen_problem(c.B, 1, c.Lq, c.Lk, 8, c.cu_seqlens_q, c.cu_seqlens_k);
    CHECK_EQ(attn_problem_validate(&p, err, sizeof err), 0);
    attn_cli_free(&c);

    static const struct {
        const char *args[6];
        const char *want;
    } bad[] = {
        {{"--seqlens", ""}, "error: --seqlens needs at least one length (N1,N2,...)"},
        {{"--seqlens="}, "error: --seqlens needs at least one length"},
        {{"--seqlens"}, "option --seqlens needs a value (N1,N2,...)"},
        {{"--seqlens", "3,-1"},
         "error: --seqlens must be a comma-separated list of non-negative integers (entry 2 is "
         "'-1' in '3,-1')"},
        {{"--seqlens", "3,,4"}, "(entry 2 is '' in '3,,4')"},
        {{"--seqlens", "3,"}, "(entry 2 is '' in '3,')"},
        {{"--seqlens", "a"}, "(entry 1 is 'a' in 'a')"},
        {{"--seqlens", "1.5"}, "(entry 1 is '1.5' in '1.5')"},
        {{"--seqlens", "1 ,2"}, "(entry 1 is '1 ' in '1 ,2')"},
        {{"--seqlens", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, "must be a comma-separated list"},
        {{"--seqlens", "1,99999999999999999999999999999"},
         "error: --seqlens: entry 2 is too large (at most 2147483647)"},
        {{"--seqlens", "1,2147483647"},
         "error: --seqlens: the lengths add up to more than 2147483647 (at entry 2)"},
        {{"--seqlens", "0,0"}, "error: --seqlens: every sequence is empty (got '0,0')"},
        {{"--seqlens", "3,4", "--seqlens-k", "0,0"}, "error: --seqlens-k: every sequence is empty"},
        {{"--seqlens", "3,4", "--seqlens-k", "5"},
         "error: --seqlens-k has 1 lengths but --seqlens has 2 (one per sequence in both)"},
        {{"--seqlens", "3,4", "--seqlens-k", "5,x"},
         "error: --seqlens-k must be a comma-separated"},
        {{"--seqlens-k", "5"}, "error: --seqlens-k needs --seqlens (the query lengths)"},
        {{"--seqlens", "3,4", "-B", "3"},
         "error: -B/--batch 3 contradicts --seqlens, which lists 2 sequences"},
        {{"-L", "8", "--seqlens", "3,4"},
         "error: -L/--seqlen cannot be combined with --seqlens (the lengths come from the list)"},
        {{"--seqlens", "3,4", "--lq", "8"}, "error: --lq cannot be combined with --seqlens"},
        {{"--seqlens", "3,4", "--lk=8"}, "error: --lk cannot be combined with --seqlens"},
    };
    int wrong_status = 0, leaked = 0, multi_line = 0;
    for (size_t n = 0; n < sizeof bad / sizeof bad[0]; ++n) {
        wrong_status += parse(&c, err, sizeof err, bad[n].args) != ATTN_EXIT_USAGE;
        CHECK_CONTAINS(err, bad[n].want);
        leaked += c.cu_seqlens_q != NULL || c.cu_seqlens_k != NULL;
        multi_line += strchr(err, '\n') != NULL;
    }
    CHECK_EQ(wrong_status, 0);
    CHECK_EQ(leaked, 0);
    CHECK_EQ(multi_line, 0);
}

static void noop_launch(const attn_problem *p, const attn_buffers *b, cudaStream_t s) {
    (void)p;
    (void)b;
    (void)s;
}

/* Requirements: dtypes, max_d, d_multiple, causal, varlen, gpu_only. */
#define F32_ONLY                                                                                   \
    { ATTN_DTYPE_BIT(ATTN_F32), 128, 1, true, false, false }
#define F16_GPU_ONLY                                                                               \
    { ATTN_DTYPE_BIT(ATTN_F16), 256, 8, true, true, true }

static void test_pattern(void) {
    attn_cli c;
    char err[256];
    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--pattern", "window:w=8+global:g=0,3")), 0);
    CHECK(c.pattern != NULL && strcmp(c.pattern, "window:w=8+global:g=0,3") == 0);
    /* kept as given: the sparse module parses it (attn_sparse_prepare; example 04's tests check
     * its errors), and a dense example refuses any pattern */
    CHECK_EQ(parse(&c, err, sizeof err, ARGS("--pattern=bigbird:b=64")), 0);
    CHECK(c.pattern != NULL && strcmp(c.pattern, "bigbird:b=64") == 0);
    CHECK_EQ(parse(&c, err, sizeof err, ARGS("-L", "8")), 0);
    CHECK(c.pattern == NULL);
}

static void test_usage(void) {
    static const attn_kernel kernels[2] = {
        {1, "first_kernel", "does the first thing", noop_launch, F32_ONLY, NULL, 0, NULL},
        {2, "second_kernel", "does it faster", noop_launch, F16_GPU_ONLY, NULL, 0, NULL},
    };
    attn_example ex = {.name = "99_test",
                       .summary = "an example for the tests",
                       ATTN_KERNELS(kernels),
                       .defaults = {.gpu = {4, 8, 2048, 64}, .sim = {1, 2, 256, 32}}};
    FILE *tmp = tmpfile();
    char text[8192] = "";
    attn_cli_usage(tmp, "my_prog", &ex);
    unit_read_back(tmp, text, sizeof text);
    static const char *const expected[] = {"usage: my_prog [options]",
                                           "99_test: an example for the tests",
                                           "-h, --help",
                                           "--list",
                                           "--kernel N|all",
                                           "-B, --batch N",
                                           "-H, --heads N",
                                           "-L, --seqlen N",
                                           "-D, --headdim N",
                                           "--lq N",
                                           "--lk N",
                                           "--seqlens N1,N2,...",
                                           "--seqlens-k M1,M2,...",
                                           "--dtype f32|f16|bf16",
                                           "--causal",
                                           "--scale X",
                                           "--amplitude X",
                                           "--inputs uniform|opposed",
                                           "--seed N",
                                           "--reps N",
                                           "--warmup N",
                                           "--check-only",
                                           "--check-rows N",
                                           "0 = all (default: all if the reference costs at most "
                                           "2e9 multiply-adds, else 4096)",
                                           "--check-all",
                                           "--json FILE",
                                           "--csv FILE",
                                           "--quiet",
                                           "1  first_kernel",
                                           "does the first thing",
                                           "2  second_kernel",
                                           "B=4 H=8 L=2048 D=64 on a GPU",
                                           "B=1 H=2 L=256 D=32 on the simulator",
                                           "77 no GPU"};
    for (size_t n = 0; n < sizeof expected / sizeof expected[0]; ++n)
        CHECK_CONTAINS(text, expected[n]);
}

/* The default checks every row up to 2e9 multiply-adds of reference work (2 * entries * D), then
 * a sample of 4096 rows; an explicit count is used as given, up to the number of rows. */
static void test_rows_to_check(void) {
    attn_cli c;
    char err[256];
    static const char *const none[] = {NULL};
    parse(&c, err, sizeof err, none);
    attn_problem p;
    attn_problem_init(&p, 1, 10, 1000, 1000, 100); /* 2 * 1e7 * 100 = 2e9 exactly */
    CHECK_EQ(attn_cli_rows_to_check(&c, &p), 0);
    p.D = 101;
    CHECK_EQ(attn_cli_rows_to_check(&c, &p), 4096);
    p.causal = true; /* about half the entries */
    CHECK_EQ(attn_cli_rows_to_check(&c, &p), 0);
    attn_problem_init(&p, 4, 8, 8192, 8192, 64);
    CHECK_EQ(attn_cli_rows_to_check(&c, &p), 4096);
    attn_problem_init(&p, 1, 1, 3000, 3000000, 64); /* expensive, but fewer rows than a sample */
    CHECK_EQ(attn_cli_rows_to_check(&c, &p), 0);

    attn_problem_init(&p, 1, 4, 1024, 1024, 64); /* 4096 rows */
    parse(&c, err, sizeof err, ARGS("--check-rows", "100"));
    CHECK_EQ(attn_cli_rows_to_check(&c, &p), 100);
    parse(&c, err, sizeof err, ARGS("--check-rows", "4096"));
    CHECK_EQ(attn_cli_rows_to_check(&c, &p), 0);
    parse(&c, err, sizeof err, ARGS("--check-rows", "4095"));
    CHECK_EQ(attn_cli_rows_to_check(&c, &p), 4095);
    attn_problem_init(&p, 4, 8, 8192, 8192, 64);
    parse(&c, err, sizeof err, ARGS("--check-all"));
    CHECK_EQ(attn_cli_rows_to_check(&c, &p), 0);
}

/* The value parsers the benchmark shares (attn_cli_parse_counts, _dtypes, _int, _real). */
static void test_value_parsers(void) {
    int v[4] = {0}, n = 0, i = 0;
    double x = 0.0;
    char err[256];
    CHECK_EQ(attn_cli_parse_counts("--L", "1k,2048,16K", v, 4, &n, err, sizeof err), 0);
    CHECK(n == 3 && v[0] == 1024 && v[1] == 2048 && v[2] == 16384);
    const char *bad[] = {"", "0", "1x", "k", "1,,2", "-3", "2kk", "20000k", "1,2,3,4,5"};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; ++b) {
        err[0] = '\0';
        CHECK_EQ(attn_cli_parse_counts("--L", bad[b], v, 4, &n, err, sizeof err), ATTN_EXIT_USAGE);
        CHECK_CONTAINS(err, "error: --L takes");
    }
    CHECK_EQ(attn_cli_parse_dtypes("--dtype", "f16,bf16,fp32", v, 4, &n, err, sizeof err), 0);
    CHECK(n == 3 && v[0] == ATTN_F16 && v[1] == ATTN_BF16 && v[2] == ATTN_F32);
    CHECK_EQ(attn_cli_parse_dtypes("--dtype", "f8", v, 4, &n, err, sizeof err), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "--dtype takes f32, f16 or bf16");
    CHECK_EQ(attn_cli_parse_int("--reps", "7", 1, &i, err, sizeof err), 0);
    CHECK_EQ(i, 7);
    CHECK_EQ(attn_cli_parse_int("--reps", "0", 1, &i, err, sizeof err), ATTN_EXIT_USAGE);
    CHECK_CONTAINS(err, "--reps must be a positive integer");
    CHECK_EQ(attn_cli_parse_real("--max-seconds", "2.5", &x, err, sizeof err), 0);
    CHECK(x == 2.5);
    CHECK_EQ(attn_cli_parse_real("--max-seconds", "-1", &x, err, sizeof err), ATTN_EXIT_USAGE);
    CHECK_EQ(attn_cli_parse_real("--max-seconds", "inf", &x, err, sizeof err), ATTN_EXIT_USAGE);
}

/* An example's own factor flag (ATTN_OPTION_FACTOR: a double in (0, 1e4], its default applied),
 * and attn_cli.seed_set (a program with its own default seed keeps it unless --seed is given). */
static void test_factor_option(void) {
    typedef struct {
        double f;
    } opts;
    static const attn_option o[] = {{"--factor", "F", "a factor", ATTN_OPTION_FACTOR,
                                     offsetof(opts, f), 0, 0, NULL, "1", NULL}};
    attn_cli c;
    opts v = {0.0};
    char err[256] = "";
    char *def[] = {"prog"}, *given[] = {"prog", "--factor", "2.5", "--seed", "7"};
    CHECK_EQ(attn_cli_parse_options(&c, 1, def, o, 1, &v, err, sizeof err), 0);
    CHECK(v.f == 1.0 && !c.seed_set);
    CHECK_EQ(attn_cli_parse_options(&c, 5, given, o, 1, &v, err, sizeof err), 0);
    CHECK(v.f == 2.5 && c.seed_set && c.seed == 7u);
    const char *bad[] = {"0", "-1", "1e5", "x", "nan"};
    for (int n = 0; n < 5; ++n) {
        char *argv[] = {"prog", "--factor", (char *)bad[n]};
        err[0] = '\0';
        CHECK_EQ(attn_cli_parse_options(&c, 3, argv, o, 1, &v, err, sizeof err), ATTN_EXIT_USAGE);
        CHECK(strstr(err, "error: --factor takes a factor in (0, 1e4]") == err);
    }
}

int main(void) {
    test_factor_option();
    test_defaults();
    test_every_flag();
    test_bad_values();
    test_seqlens();
    test_pattern();
    test_usage();
    test_rows_to_check();
    test_value_parsers();
    return unit_finish();
}
