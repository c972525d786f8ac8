/* bench_attention.c — every kernel of the chapter's examples over a grid of problem sizes: each
 * result checked against the CPU reference (a kernel that fails is reported FAIL and never timed),
 * then timed (CUDA events, warm-up, L2 flush, repetitions until the spread is small), one JSON
 * line per (problem, kernel) with TFLOP/s, GB/s, peak device memory and provenance.
 *
 *   bench_attention_sim                                   the simulator grid (small sizes)
 *   bench_attention_gpu --grid dense --out benchmarks/results/<device>/bench_attention.jsonl
 *   bench_attention_gpu --L 1k,2k --D 64,128 --H 16 --dtype f16,bf16 --causal both --impl fa2_mma
 *   bench_attention_gpu --grid sparse --out ...   example 04's sparse kernels vs its dense baseline
 *   bench_attention_sim --grid sim-sparse --pattern dilated:w=16,d=4
 *   bench_attention_sim --grid seed-table --table   the course's comparison table (Markdown)
 *   bench_attention_sim --list          the implementations;  --grids  the preset grids
 *   bench_attention_sim --launch-shapes each kernel's threads and dynamic shared memory (JSON)
 *   bench_attention_sim --dry-run       what would run, without touching the device
 *
 * The kernels come from the examples listed in benchmarks/CMakeLists.txt (ATTN_BENCH_EXAMPLES),
 * through their registries (attn/problem.h); checking and timing are the harness's
 * (attn/runner.h), the same code the examples' programs run. A problem with a sparse pattern
 * (attn/sparse/patterns.h) runs the kernels of the sparse examples (attn/sparse/sparse_run.h: block
 * mask, CSR, the reference under the pattern, the baseline's dense one); a problem without one, the
 * dense examples' kernels. Output keys: benchmarks/README.md. Exit status: 0 every run passed or
 * was skipped, 1 a FAIL or ERROR, 2 usage, 77 no GPU.
 */
#define _POSIX_C_SOURCE 200809L /* popen: the commit from git when --commit is not given */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attn/bench.h"
#include "attn/cli.h"
#include "attn/device.h"
#include "attn/profile.h"
#include "attn/report.h"
#include "attn/runner.h"
#include "attn/sparse/sparse_run.h"
#include "bench_examples.h"

#ifndef ATTN_SOURCE_DIR
#define ATTN_SOURCE_DIR "."
#endif

#define SIM_WARNING "CPU simulator timings: they measure the simulator, not GPU performance"

/* ---- grids ----------------------------------------------------------------------------------- */

#define MAX_VALUES 16
typedef struct int_list {
    int n;
    int v[MAX_VALUES];
} int_list;

/* A cartesian product of values (and of patterns: none is the dense problem); a grid is the union
 * of a few blocks. */
#define MAX_PATTERNS 8
typedef struct grid_block {
    int_list B, H, L, D, dtype, causal;
    int num_patterns;
    const char *patterns[MAX_PATTERNS]; /* attn/sparse/patterns.h specs */
    /* A row of a comparison table (seed-table): the one kernel the block runs (an --impl name,
     * e.g. "01_attention_basics/naive") and the row's name in --table; NULL: every kernel. */
    const char *impl, *label;
} grid_block;

#define MAX_BLOCKS 8
typedef struct grid_preset {
    const char *name;
    const char *about;
    int num_blocks;
    grid_block blocks[MAX_BLOCKS];
} grid_preset;

#define LIST(...)                                                                                  \
    {                                                                                              \
        sizeof((int[]){__VA_ARGS__}) / sizeof(int), { __VA_ARGS__ }                                \
    }
#define F32 ATTN_F32
#define F16 ATTN_F16
#define BF16 ATTN_BF16
#define NO_PATTERN 0, {NULL}, NULL, NULL /* the dense problem, every kernel */
#define DENSE_L LIST(1024, 2048, 4096, 8192, 16384)
/* The sparse grid: 16 heads of D=128, f16/bf16. The window half-widths w and BigBird's random
 * blocks r give densities of 50 % at L=4k, 25 % at 8k and 10 % at 16k (window: (L(2w+1) -
 * w(w+1)) / L^2 = 50.0/25.0/10.0 %; BigBird b=128, NB = L/128 blocks: about ((NB-2)(5+r) + 2 NB)
 * / NB^2 = 50.0/24.3/10.0 %, r <= 16), then Mistral's causal window W=4096 at L=128k against
 * dense causal. */
#define SPARSE_BLOCK(L, w, r)                                                                      \
    {                                                                                              \
        LIST(1), LIST(16), LIST(L), LIST(128), LIST(F16, BF16), LIST(0), 2,                        \
            {"window:w=" #w, "bigbird:b=128,r=" #r ",seed=1"}, "04_sparse_patterns", NULL          \
    }

/* Example 06's ladder (ladder:b=64,s=1,w=W) on its kernels (example 04's block_sparse specialised
 * on the ladder) against dense causal FA2, 16 heads of D=128, f16/bf16: w from
 * examples/06_custom_pattern/ladder.py --table, densities 51.0/26.0/10.4 % of the causal entries at
 * L=4k/8k/16k (the brief's 50/25/10 %). */
#define LADDER_BLOCK(L, w)                                                                         \
    {                                                                                              \
        LIST(1), LIST(16), LIST(L), LIST(128), LIST(F16, BF16), LIST(1), 1,                        \
            {"ladder:b=64,s=1,w=" #w}, "06_custom_pattern", NULL                                   \
    }

/* The crossover lab (benchmarks/crossover.py): example 04's kernels against dense causal FA2, 16
 * heads of D=128, fp16, causal windows of about 3, 23 and 75 % of the causal entries (w = L/64,
 * L/8, L/2) at L = 1k, 4k, 16k and the sparsest at 64k: the times gpu.sh's step crossover fits the
 * cost model's parameters to. */
#define CROSS_BLOCK(L, w1, w2, w3)                                                                 \
    {                                                                                              \
        LIST(1), LIST(16), LIST(L), LIST(128), LIST(F16), LIST(1), 3,                              \
            {"causal_window:w=" #w1, "causal_window:w=" #w2, "causal_window:w=" #w3},              \
            "04_sparse_patterns", NULL                                                             \
    }

/* The course's comparison table: naive (example 01), flash (02), flash-v2 (03's fa2_mma, f16) and
 * a sliding window (04's window kernel), non-causal, D=64; --table prints it. One block per row:
 * its kernel, dtype and pattern. On a GPU the window keeps 2w+1 = 513 keys per query
 * (window:w=256) at L = 2048 and 8192: 25 % and 6.2 % of the score matrix. */
#define SEED_ROW(B, H, L1, L2, impl, label, dtype, pattern)                                        \
    { LIST(B), LIST(H), LIST(L1, L2), LIST(64), LIST(dtype), LIST(0), pattern, impl, label }
#define SEED_DENSE                                                                                 \
    0, { NULL }
#define SEED_PATTERN(spec)                                                                         \
    1, { spec }
#define SEED_ROWS(B, H, L1, L2, window, window_label)                                              \
    {                                                                                              \
        SEED_ROW(B, H, L1, L2, "01_attention_basics/naive", "naive (01)", F32, SEED_DENSE),        \
            SEED_ROW(B, H, L1, L2, "02_flash_attention_minimal/flash_fwd", "flash (02)", F32,      \
                     SEED_DENSE),                                                                  \
            SEED_ROW(B, H, L1, L2, "03_flash_attention_v2/fa2_mma", "flash-v2 (03 fa2_mma, f16)",  \
                     F16, SEED_DENSE),                                                             \
            SEED_ROW(B, H, L1, L2, "04_sparse_patterns/window", window_label, F16,                 \
                     SEED_PATTERN(window))                                                         \
    }

/* On the simulator, --grid seed-table runs the same rows at sizes that finish in seconds: one
 * head, L = 512 and 1024, and a window scaled with L so that it is as sparse as the GPU's:
 * window:w=64 keeps 129 keys per query, 24 % and 12 % of the score matrix (at L = 256 and 512,
 * the GPU's w=256 would have kept 100 % and 75 %: no sparse row at all). */
static const grid_preset seed_table_sim = {
    "seed-table", "", 4,
    SEED_ROWS(1, 1, 512, 1024, "window:w=64", "sparse k=129 (04 window w=64, f16)")};

static const grid_preset presets[] = {
    {"sim",
     "simulator default: B=1 H=2 D=64, L 128..1024, every dtype, causal and not",
     1,
     {{LIST(1), LIST(2), LIST(128, 256, 512, 1024), LIST(64), LIST(F32, F16, BF16), LIST(0, 1),
       NO_PATTERN}}},
    {"tiny",
     "smallest check of the pipeline (the CTest): B=1 H=1 D=64, L 16 and 40",
     1,
     {{LIST(1), LIST(1), LIST(16, 40), LIST(64), LIST(F32, F16), LIST(0, 1), NO_PATTERN}}},
    {"dense",
     "the dense kernels on a GPU: B*H=16 heads of D=128 and 32 heads of D=64, L 1k..16k, "
     "f16/bf16, causal and not",
     2,
     {{LIST(1), LIST(16), DENSE_L, LIST(128), LIST(F16, BF16), LIST(0, 1), NO_PATTERN},
      {LIST(1), LIST(32), DENSE_L, LIST(64), LIST(F16, BF16), LIST(0, 1), NO_PATTERN}}},
    {"fp32",
     "the fp32 kernels (examples 01, 02, 03 v1): B=1 H=16 D=64, L 1k..16k, causal and not",
     1,
     {{LIST(1), LIST(16), DENSE_L, LIST(64), LIST(F32), LIST(0, 1), NO_PATTERN}}},
    {"sparse",
     "example 04's kernels vs dense_fa2 on a GPU, B=1 H=16 D=128 f16/bf16: window and BigBird at "
     "density 50/25/10 % (L 4k/8k/16k), causal_window:w=4096 at L=128k causal",
     4,
     {SPARSE_BLOCK(4096, 1199, 10),
      SPARSE_BLOCK(8192, 1097, 9),
      SPARSE_BLOCK(16384, 840, 6),
      {LIST(1),
       LIST(16),
       LIST(131072),
       LIST(128),
       LIST(F16, BF16),
       LIST(1),
       1,
       {"causal_window:w=4096"},
       "04_sparse_patterns",
       NULL}}},
    {"ladder",
     "example 06's ladder on its block_sparse vs dense_fa2, causal, B=1 H=16 D=128 "
     "f16/bf16: density 51/26/10 % of the causal entries at L 4k/8k/16k",
     3,
     {LADDER_BLOCK(4096, 18), LADDER_BLOCK(8192, 15), LADDER_BLOCK(16384, 10)}},
    {"crossover",
     "the crossover lab on a GPU: example 04's kernels vs dense_fa2, causal, B=1 H=16 D=128 f16, "
     "causal windows w = L/64, L/8, L/2 at L 1k/4k/16k, w = L/64 at 64k",
     4,
     {CROSS_BLOCK(1024, 16, 128, 512),
      CROSS_BLOCK(4096, 64, 512, 2048),
      CROSS_BLOCK(16384, 256, 2048, 8192),
      {LIST(1),
       LIST(16),
       LIST(65536),
       LIST(128),
       LIST(F16),
       LIST(1),
       1,
       {"causal_window:w=1024"},
       "04_sparse_patterns",
       NULL}}},
    {"seed-128k",
     "the course's 128K table: example 04's kernels vs dense_fa2 at L=128k, not causal, B=1 H=16 "
     "D=128 f16: sliding window (1 %), BigBird b=256 (3 %), dilated d=4 (2 %)",
     1,
     {{LIST(1),
       LIST(16),
       LIST(131072),
       LIST(128),
       LIST(F16),
       LIST(0),
       3,
       {"window:w=655", "bigbird:b=256,r=9,seed=1", "dilated:w=1310,d=4"},
       "04_sparse_patterns",
       NULL}}},
    {"sim-sparse",
     "example 04 on the simulator: B=1 H=1 D=64 f16, L 512/1024: window, BigBird, dilated; "
     "causal window at L=1024",
     2,
     {{LIST(1),
       LIST(1),
       LIST(512, 1024),
       LIST(64),
       LIST(F16),
       LIST(0),
       3,
       {"window:w=64", "bigbird:b=64,r=1,seed=1", "dilated:w=16,d=4"},
       "04_sparse_patterns",
       NULL},
      {LIST(1),
       LIST(1),
       LIST(1024),
       LIST(64),
       LIST(F16),
       LIST(1),
       1,
       {"causal_window:w=128"},
       "04_sparse_patterns",
       NULL}}},
    {"tiny-sparse",
     "smallest check of the sparse path (a CTest): B=1 H=1 D=64 f16, L 40 and 100, a window and "
     "a strided pattern, causal and not",
     1,
     {{LIST(1),
       LIST(1),
       LIST(40, 100),
       LIST(64),
       LIST(F16),
       LIST(0, 1),
       2,
       {"window:w=8", "strided:l=8"},
       "04_sparse_patterns",
       NULL}}},
    {"seed-table",
     "the course's comparison table (use --table): naive (01), flash (02), flash-v2 (03 fa2_mma "
     "f16), sparse (04 window, f16), non-causal; B=4 H=8 D=64 L 2048/8192 with window w=256 "
     "(513 keys per query) on a GPU, B=1 H=1 D=64 L 512/1024 with w=64 (129 keys) on the "
     "simulator",
     4, SEED_ROWS(4, 8, 2048, 8192, "window:w=256", "sparse k=513 (04 window w=256, f16)")},
};
#define NUM_PRESETS (int)(sizeof presets / sizeof presets[0])

/* ---- command line ---------------------------------------------------------------------------- */

typedef struct options {
    bool help, list, grids, dry_run, quiet, append, table, launch_shapes, profile;
    const grid_preset *grid[NUM_PRESETS]; /* --grid (several allowed); none: sim or dense */
    int num_grids;
    grid_block override;  /* lists given on the command line replace the grid's (n = 0: not);
                             override.patterns: --pattern, each checked by attn_pattern_parse */
    const char *impl[32]; /* --impl patterns; none: every kernel */
    int num_impl;
    const char *out;                        /* JSON Lines file; NULL: none */
    const char *commit;                     /* NULL: from git */
    int warmup, reps, max_reps, check_rows; /* -1: the backend's default */
    double target_spread, max_seconds, budget_s, sim_max_gflop;
    unsigned long long seed;
} options;

static int usage(const char *fmt, const char *a, const char *b) {
    fputs("error: ", stderr);
    fprintf(stderr, fmt, a, b);
    fputs(" (see --help)\n", stderr);
    return ATTN_EXIT_USAGE;
}

static void print_help(const char *prog) {
    printf(
        "usage: %s [options]\n"
        "Runs every selected kernel over a grid of problems: check, then time; one JSON line "
        "per run.\n"
        "  --grid NAME[,NAME]   preset grid(s) (--grids lists them; default: sim on the "
        "simulator, dense on a GPU)\n"
        "  --B LIST --H LIST --L LIST --D LIST   replace the grid's values (e.g. --L 1k,2k,4096)\n"
        "  --dtype LIST         f32,f16,bf16      --causal no|yes|both\n"
        "  --pattern SPEC       a sparse pattern (attn/sparse/patterns.h, e.g. window:w=128, "
        "bigbird:b=64,r=3); repeat for several, 'none' = dense; replaces the grid's. Problems "
        "with a pattern run the sparse examples' kernels (04), the others the dense ones\n"
        "  --impl LIST          kernels: a kernel name (fa2_mma), an example (03 or "
        "03_flash_attention_v2) or example/kernel\n"
        "  --out FILE           JSON Lines output ('-' = stdout); truncated unless --append\n"
        "  --warmup N --reps N  warm-up launches; timed launches per batch (GPU 3/10, sim 0/3)\n"
        "  --max-reps N         batches until the spread (IQR/median) <= --target-spread X or "
        "N samples (GPU 100/0.02, sim: off)\n"
        "  --max-seconds S      stop adding batches after S s of timed launches (default 2)\n"
        "  --budget-s S         stop starting new problems after S s (default: no limit)\n"
        "  --check-rows N       query rows checked against the CPU reference (default 256, 0 = "
        "all)\n"
        "  --sim-max-gflop X    on the simulator, skip problems above X GFLOP (default 1)\n"
        "  --table              after the run, one Markdown table: a line per L and "
        "implementation (a grid's row name, e.g. seed-table's) with the keys per query, the "
        "median time (ms), the peak device memory (MiB) and, on an instrumented simulator build, "
        "the modelled DRAM bytes, FLOP per byte and H100 bound\n"
        "  --launch-shapes      each kernel's launch shape from its registry (threads per block, "
        "dynamic shared memory) for D = 64 and 128 and each dtype, one JSON line each; no device "
        "needed\n"
        "  --profile            profile each run's checked launch on the simulator (an "
        "instrumented build: the sim-check preset) and carry it in the record; --table on such "
        "a build adds the modelled columns\n"
        "  --seed N --commit SHA --quiet --list --grids --dry-run --help\n",
        prog);
}

/* One message for every usage error of the value parsers (attn/cli.h): it is in err. */
static int cli_error(int rc, const char *err) {
    if (rc != 0)
        fprintf(stderr, "%s (see --help)\n", err);
    return rc;
}

/* A comma-separated list into l, with the harness's parsers (attn/cli.h). --causal takes one
 * word: no, yes or both. */
static int parse_list(const char *flag, const char *s, int_list *l) {
    char err[256];
    if (strcmp(flag, "--causal") == 0) {
        bool no = strcmp(s, "no") == 0, yes = strcmp(s, "yes") == 0, both = strcmp(s, "both") == 0;
        if (!no && !yes && !both)
            return usage("--causal must be no, yes or both (got '%s')%s", s, "");
        *l = both ? (int_list)LIST(0, 1) : (int_list)LIST(yes);
        return 0;
    }
    if (strcmp(flag, "--dtype") == 0)
        return cli_error(attn_cli_parse_dtypes(flag, s, l->v, MAX_VALUES, &l->n, err, sizeof err),
                         err);
    return cli_error(attn_cli_parse_counts(flag, s, l->v, MAX_VALUES, &l->n, err, sizeof err), err);
}

static int parse_grids(options *o, const char *s) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
        int g = 0;
        while (g < NUM_PRESETS && strcmp(presets[g].name, tok) != 0)
            ++g;
        if (g == NUM_PRESETS)
            return usage("unknown grid '%s'%s: see --grids", tok, "");
        if (o->num_grids < NUM_PRESETS)
            o->grid[o->num_grids++] = &presets[g];
    }
    return 0;
}

/* The list option named flag in o->override, or NULL if flag is not one. */
static int_list *list_option(options *o, const char *flag) {
    static const char *const names[] = {"--B", "--H", "--L", "--D", "--dtype", "--causal"};
    int_list *lists[] = {&o->override.B, &o->override.H,     &o->override.L,
                         &o->override.D, &o->override.dtype, &o->override.causal};
    for (int n = 0; n < 6; ++n)
        if (strcmp(flag, names[n]) == 0)
            return lists[n];
    return NULL;
}

/* Options with a value (as the next argument or after '='). */
static int apply_value(options *o, const char *flag, const char *v) {
    int_list *l = list_option(o, flag);
    if (l != NULL)
        return parse_list(flag, v, l);
    if (strcmp(flag, "--grid") == 0)
        return parse_grids(o, v);
    if (strcmp(flag, "--pattern") == 0) {
        attn_pattern pat;
        char why[256];
        if (o->override.num_patterns == MAX_PATTERNS)
            return usage("at most 8 --pattern values%s%s", "", "");
        if (attn_pattern_parse(v, &pat, why, sizeof why) != 0)
            return usage("--pattern: %s%s", why, "");
        o->override.patterns[o->override.num_patterns++] = v;
        return 0;
    }
    if (strcmp(flag, "--impl") == 0) {
        if (o->num_impl == 32)
            return usage("too many --impl values%s%s", "", "");
        o->impl[o->num_impl++] = v; /* split on commas when matched */
        return 0;
    }
    if (strcmp(flag, "--out") == 0 || strcmp(flag, "--commit") == 0) {
        *(strcmp(flag, "--out") == 0 ? &o->out : &o->commit) = v;
        return 0;
    }
    struct {
        const char *name;
        int *i;
        double *d;
        bool zero_ok;
    } const nums[] = {{"--warmup", &o->warmup, NULL, true},
                      {"--reps", &o->reps, NULL, false},
                      {"--max-reps", &o->max_reps, NULL, false},
                      {"--check-rows", &o->check_rows, NULL, true},
                      {"--target-spread", NULL, &o->target_spread, true},
                      {"--max-seconds", NULL, &o->max_seconds, true},
                      {"--budget-s", NULL, &o->budget_s, true},
                      {"--sim-max-gflop", NULL, &o->sim_max_gflop, true}};
    char err[256];
    for (size_t n = 0; n < sizeof nums / sizeof nums[0]; ++n) {
        if (strcmp(flag, nums[n].name) != 0)
            continue;
        return cli_error(nums[n].i ? attn_cli_parse_int(flag, v, nums[n].zero_ok ? 0 : 1, nums[n].i,
                                                        err, sizeof err)
                                   : attn_cli_parse_real(flag, v, nums[n].d, err, sizeof err),
                         err);
    }
    if (strcmp(flag, "--seed") == 0) {
        int seed = 0;
        int rc = cli_error(attn_cli_parse_int(flag, v, 0, &seed, err, sizeof err), err);
        o->seed = (unsigned long long)seed;
        return rc;
    }
    return usage("unknown option '%s'%s", flag, "");
}

static int parse_args(options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->warmup = o->reps = o->max_reps = o->check_rows = -1;
    o->target_spread = -1.0;
    o->max_seconds = 2.0;
    o->sim_max_gflop = 1.0;
    o->seed = 1234;
    struct {
        const char *name;
        bool *flag;
    } const switches[] = {{"--help", &o->help},
                          {"-h", &o->help},
                          {"--list", &o->list},
                          {"--grids", &o->grids},
                          {"--dry-run", &o->dry_run},
                          {"--quiet", &o->quiet},
                          {"--append", &o->append},
                          {"--table", &o->table},
                          {"--launch-shapes", &o->launch_shapes},
                          {"--profile", &o->profile}};
    for (int a = 1; a < argc; ++a) {
        const char *arg = argv[a];
        bool done = false;
        for (size_t n = 0; n < sizeof switches / sizeof switches[0] && !done; ++n)
            if (strcmp(arg, switches[n].name) == 0)
                done = *switches[n].flag = true;
        if (done)
            continue;
        if (strncmp(arg, "--", 2) != 0)
            return usage("unexpected argument '%s'%s", arg, "");
        char flag[64];
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        snprintf(flag, sizeof flag, "%.*s", (int)(len < 63 ? len : 63), arg);
        const char *v = eq ? eq + 1 : (a + 1 < argc ? argv[++a] : NULL);
        if (v == NULL)
            return usage("%s needs a value%s", flag, "");
        int rc = apply_value(o, flag, v);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- implementations ------------------------------------------------------------------------- */

typedef struct impl {
    const attn_example *ex;
    const attn_sparse_config *sparse; /* its example's sparse settings, or NULL: dense */
    const attn_kernel *k;
    int index;      /* of k in ex->kernels */
    char name[128]; /* example/kernel */
} impl;

#define MAX_IMPLS 64

/* Does one --impl pattern name this kernel: its name, its example's name or number, or both? */
static bool pattern_matches(const char *pat, const impl *m) {
    return strcmp(pat, m->k->name) == 0 || strcmp(pat, m->ex->name) == 0 ||
           strcmp(pat, m->name) == 0 || (strlen(pat) == 2 && strncmp(pat, m->ex->name, 2) == 0);
}

/* Every kernel of every example, filtered by --impl (each pattern must name something). */
static int select_impls(const options *o, impl *out, int *count) {
    impl all[MAX_IMPLS];
    int n = 0;
    for (const attn_example *const *e = attn_bench_examples; *e != NULL; ++e) {
        const attn_example *ex = *e;
        for (int k = 0; k < ex->num_kernels && n < MAX_IMPLS; ++k, ++n) {
            all[n] = (impl){ex, attn_sparse_config_of(ex), &ex->kernels[k], k, ""};
            snprintf(all[n].name, sizeof all[n].name, "%s/%s", ex->name, all[n].k->name);
        }
    }
    bool chosen[MAX_IMPLS] = {false};
    for (int i = 0; i < o->num_impl; ++i) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", o->impl[i]);
        for (char *pat = strtok(buf, ","); pat != NULL; pat = strtok(NULL, ",")) {
            bool any = false;
            for (int m = 0; m < n; ++m)
                if (pattern_matches(pat, &all[m]))
                    any = chosen[m] = true;
            if (!any)
                return usage("--impl '%s' names no kernel%s (see --list)", pat, "");
        }
    }
    *count = 0;
    for (int m = 0; m < n; ++m)
        if (o->num_impl == 0 || chosen[m])
            out[(*count)++] = all[m];
    return 0;
}

/* --launch-shapes: each kernel's launch shape from its registry entry (attn_kernel.launch_shape),
 * for D = 64 and 128 and every dtype it supports: what benchmarks/resource_usage.py reads. */
static void print_launch_shapes(const impl *impls, int n) {
    for (int m = 0; m < n; ++m) {
        const attn_kernel *k = impls[m].k;
        if (k->launch_shape == NULL)
            continue;
        for (int t = ATTN_F32; t <= ATTN_BF16; ++t)
            for (int D = 64; D <= 128; D += 64) {
                attn_problem p;
                char why[256];
                attn_problem_init(&p, 1, 1, 128, 128, D);
                p.dtype = (attn_dtype)t;
                if (attn_kernel_supports(k, &p, true, why, sizeof why) != 0)
                    continue;
                attn_launch_shape s = k->launch_shape(&p);
                printf("{\"impl\":\"%s\",\"kernel\":\"%s\",\"global\":\"%s\",\"dtype\":\"%s\","
                       "\"D\":%d,\"threads\":%d,\"dynamic_shared_bytes\":%zu}\n",
                       impls[m].name, k->name, s.global, attn_dtype_name(p.dtype), D, s.threads,
                       s.smem_bytes);
            }
    }
}

static void print_impls(const impl *impls, int n) {
    for (int m = 0; m < n; ++m)
        printf("%-40s %s%s\n", impls[m].name, impls[m].k->description,
               impls[m].sparse ? " [problems with a pattern]" : "");
}

/* ---- problems -------------------------------------------------------------------------------- */

#define MAX_PROBLEMS 4096

/* A problem of the grid: the shape, the sparse pattern (NULL: dense), and for a table's row the
 * one kernel it runs and the row's name (NULL: every kernel). */
typedef struct bench_problem {
    attn_problem p;
    const char *pattern;
    const char *impl, *label;
} bench_problem;

/* "none" and "dense" are the dense problem. */
static const char *pattern_or_null(const char *spec) {
    return strcmp(spec, "none") == 0 || strcmp(spec, "dense") == 0 ? NULL : spec;
}

/* The union of the grids' blocks, each list replaced by the command line's where given. */
static int make_problems(const options *o, bool on_sim, bench_problem *out, int *count) {
    const grid_preset *dflt = &presets[on_sim ? 0 : 2];
    int num_grids = o->num_grids ? o->num_grids : 1;
    *count = 0;
    for (int g = 0; g < num_grids; ++g) {
        const grid_preset *pre = o->num_grids ? o->grid[g] : dflt;
        if (on_sim && strcmp(pre->name, seed_table_sim.name) == 0)
            pre = &seed_table_sim; /* the simulator's sizes */
        for (int b = 0; b < pre->num_blocks; ++b) {
            grid_block blk = pre->blocks[b];
            const int_list *ov[] = {&o->override.B, &o->override.H,     &o->override.L,
                                    &o->override.D, &o->override.dtype, &o->override.causal};
            int_list *dst[] = {&blk.B, &blk.H, &blk.L, &blk.D, &blk.dtype, &blk.causal};
            for (int n = 0; n < 6; ++n)
                if (ov[n]->n > 0)
                    *dst[n] = *ov[n];
            if (o->override.num_patterns > 0) {
                blk.num_patterns = o->override.num_patterns;
                memcpy(blk.patterns, o->override.patterns, sizeof blk.patterns);
            }
            int np = blk.num_patterns > 0 ? blk.num_patterns : 1;
            for (int d = 0; d < blk.D.n; ++d)
                for (int t = 0; t < blk.dtype.n; ++t)
                    for (int h = 0; h < blk.H.n; ++h)
                        for (int bb = 0; bb < blk.B.n; ++bb)
                            for (int l = 0; l < blk.L.n; ++l)
                                for (int c = 0; c < blk.causal.n; ++c)
                                    for (int q = 0; q < np; ++q) {
                                        if (*count == MAX_PROBLEMS)
                                            return usage("the grid has more than %s problems%s",
                                                         "4096", "");
                                        bench_problem *bp = &out[(*count)++];
                                        attn_problem_init(&bp->p, blk.B.v[bb], blk.H.v[h],
                                                          blk.L.v[l], blk.L.v[l], blk.D.v[d]);
                                        bp->p.dtype = (attn_dtype)blk.dtype.v[t];
                                        bp->p.causal = blk.causal.v[c] != 0;
                                        bp->pattern = blk.num_patterns > 0
                                                          ? pattern_or_null(blk.patterns[q])
                                                          : NULL;
                                        bp->impl = blk.impl;
                                        bp->label = blk.label;
                                    }
        }
    }
    return 0;
}

/* Does implementation m run problem bp at all? Sparse examples' kernels run the problems with a
 * pattern, dense examples' kernels those without; a table's row, its one kernel. */
static bool pairs(const impl *m, const bench_problem *bp) {
    return (m->sparse != NULL) == (bp->pattern != NULL) &&
           (bp->impl == NULL || pattern_matches(bp->impl, m));
}

/* ---- provenance ------------------------------------------------------------------------------ */

typedef struct provenance {
    char commit[64], date[32], host[160], runtime[16], driver[16], grid[64];
} provenance;

/* The first line of a command's output, or "" (trailing newline removed). */
static void command_line_output(const char *cmd, char *out, size_t len) {
    out[0] = '\0';
    FILE *f = popen(cmd, "r");
    if (f == NULL)
        return;
    if (fgets(out, (int)len, f) == NULL)
        out[0] = '\0';
    pclose(f);
    out[strcspn(out, "\r\n")] = '\0';
}

static void version_string(int v, char *out, size_t len) {
    if (v > 0)
        snprintf(out, len, "%d.%d", v / 1000, (v % 1000) / 10);
    else
        snprintf(out, len, "unknown");
}

static void make_provenance(const options *o, const attn_device_info *dev, provenance *pv) {
    if (o->commit != NULL)
        snprintf(pv->commit, sizeof pv->commit, "%s", o->commit);
    else
        command_line_output("cd '" ATTN_SOURCE_DIR "' && c=$(git rev-parse --short HEAD) && "
                            "{ git diff --quiet HEAD && echo $c || echo $c-dirty; } 2>/dev/null",
                            pv->commit, sizeof pv->commit);
    if (pv->commit[0] == '\0')
        snprintf(pv->commit, sizeof pv->commit, "unknown");
    time_t now = time(NULL);
    strftime(pv->date, sizeof pv->date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char cpu[128];
    command_line_output("sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo 2>/dev/null", cpu,
                        sizeof cpu);
    snprintf(pv->host, sizeof pv->host, "%s, %ld cores", cpu[0] ? cpu : "unknown cpu",
             sysconf(_SC_NPROCESSORS_ONLN));
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess)
        (void)cudaGetLastError();
    version_string(dev->runtime_version, pv->runtime, sizeof pv->runtime);
    version_string(driver, pv->driver, sizeof pv->driver);
    pv->grid[0] = '\0';
    for (int g = 0; g < o->num_grids; ++g)
        snprintf(pv->grid + strlen(pv->grid), sizeof pv->grid - strlen(pv->grid), "%s%s",
                 g ? "+" : "", o->grid[g]->name);
    if (o->num_grids == 0)
        snprintf(pv->grid, sizeof pv->grid, "%s", dev->simulated ? "sim" : "dense");
    if (o->override.B.n + o->override.H.n + o->override.L.n + o->override.D.n +
            o->override.dtype.n + o->override.causal.n + o->override.num_patterns >
        0)
        snprintf(pv->grid + strlen(pv->grid), sizeof pv->grid - strlen(pv->grid), "%s",
                 " (modified)");
}

/* ---- one record ------------------------------------------------------------------------------ */

/* Q, K, V, O and LSE in the problem's dtype, plus the kernel's workspace: the device memory a run
 * needs by the model (what attn_problem_data allocates). */
static double model_memory(const attn_problem *p, double workspace) {
    double elem = (double)attn_dtype_size(p->dtype);
    return elem * (2.0 * (double)attn_problem_q_elems(p) + 2.0 * (double)attn_problem_k_elems(p)) +
           4.0 * (double)attn_problem_lse_elems(p) + workspace;
}

/* The pattern's members of a record: its canonical spec and what it costs on the problem
 * (attn_pattern_stats), or "dense" and nulls. */
static void pattern_members(const attn_sparse_run *st, char *out, size_t len) {
    if (!st->has_pattern) {
        snprintf(out, len,
                 "\"pattern\":\"dense\",\"density\":null,\"speedup_bound\":null,"
                 "\"block_density\":null,\"block_fill\":null,\"mask_bytes\":null");
        return;
    }
    char spec[256];
    const attn_pattern_stats *s = &st->stats;
    attn_pattern_format(&st->pattern, spec, sizeof spec);
    snprintf(out, len,
             "\"pattern\":\"%s\",\"density\":%.6g,\"speedup_bound\":%.6g,\"block_density\":%.6g,"
             "\"block_fill\":%.6g,\"mask_bytes\":%zu",
             spec, s->density, s->speedup_bound, s->blocks.block_density, s->block_fill,
             s->blocks.metadata_bytes);
}

/* The members added to the harness's record (benchmarks/README.md lists them). flops: the
 * kernel's (a sparse kernel counts the entries it computes; attn_sparse_kernel_options). */
static void extra_members(const provenance *pv, const attn_device_info *dev, const impl *m,
                          const attn_outcome *o, const attn_run_opts *ro, const attn_sparse_run *st,
                          int check_rows, char *out, size_t len) {
    const attn_problem *p = &o->rec.problem;
    char mem[32] = "null", spread[32] = "null", pat[512];
    if (o->mem_used > 0)
        snprintf(mem, sizeof mem, "%zu", o->mem_used);
    if (o->rec.timed)
        snprintf(spread, sizeof spread, "%.4g", o->rec.time.spread);
    pattern_members(st, pat, sizeof pat);
    snprintf(
        out, len,
        "\"bench\":\"bench_attention\",\"impl\":\"%s\",\"simulated\":%s,\"timing_note\":\"%s\","
        "\"flops\":%.6g,\"bytes_model\":%.6g,\"mem_peak_bytes\":%s,\"mem_model_bytes\":%.6g,"
        "\"oom\":%s,%s,"
        "\"spread\":%s,\"warmup\":%d,\"check_rows\":%d,\"grid\":\"%s\",\"commit\":\"%s\","
        "\"date\":\"%s\",\"cuda_runtime\":\"%s\",\"cuda_driver\":\"%s\",\"cc\":\"%d.%d\","
        "\"host\":\"%s\"",
        m->name, dev->simulated ? "true" : "false", dev->simulated ? SIM_WARNING : "",
        ro->flops > 0.0 ? ro->flops : attn_problem_flops(p), attn_problem_min_bytes(p), mem,
        model_memory(p, o->rec.workspace_bytes), o->out_of_memory ? "true" : "false", pat, spread,
        ro->timing.warmup, check_rows, pv->grid, pv->commit, pv->date, pv->runtime, pv->driver,
        dev->cc_major, dev->cc_minor, pv->host);
}

/* ---- the run --------------------------------------------------------------------------------- */

/* --table: one line per L and implementation (a grid's row name), grouped by L. */
#define MAX_TABLE_ROWS 32
#define MAX_TABLE_LS 8
typedef struct table_cell {
    bool set, timed, oom;
    const char *status;
    double keys;       /* keys per query row, on average: L when dense, fewer under a pattern */
    double ms;         /* median */
    size_t mem;        /* device bytes in use while it ran (0: not measured) */
    attn_profile prof; /* the simulator's profile of its checked launch (valid: profiled) */
} table_cell;
typedef struct table {
    int rows, ls;
    char row[MAX_TABLE_ROWS][160];
    int L[MAX_TABLE_LS];
    table_cell cell[MAX_TABLE_ROWS][MAX_TABLE_LS];
    int B, H, D; /* the problems' sizes, -1 where they differ */
    bool causal, mixed_causal;
} table;

typedef struct bench {
    options opt;
    table tab;
    attn_device_info dev;
    provenance pv;
    attn_run_opts run;
    int check_rows;
    FILE *out;      /* NULL: no JSON */
    bool table;     /* the human table on stdout */
    bool profiling; /* each run's checked launch is profiled first (attn/profile.h) */
    int failures, done, total;
    double t0;
} bench;

static double now_s(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void describe(const bench_problem *bp, char *out, size_t len) {
    const attn_problem *p = &bp->p;
    snprintf(out, len, "B=%d H=%d L=%d D=%d %s%s%s%s", p->B, p->H, p->Lq, p->D,
             attn_dtype_name(p->dtype), p->causal ? " causal" : "", bp->pattern ? " " : "",
             bp->pattern ? bp->pattern : "");
}

/* Index of v in list[0..*n), appended (sorted, for the L columns) when absent and there is
 * room; -1 when full. */
static int table_slot(int *list, int *n, int max, int v) {
    int at = 0;
    while (at < *n && list[at] < v)
        ++at;
    if (at < *n && list[at] == v)
        return at;
    if (*n == max)
        return -1;
    memmove(list + at + 1, list + at, sizeof *list * (size_t)(*n - at));
    list[at] = v;
    ++*n;
    return at;
}

/* Keys per query row on average: the score entries computed (under the pattern, with
 * causality) over the query rows. */
static double keys_per_query(const attn_problem *p, const attn_sparse_run *st) {
    double rows = (double)p->B * p->H * p->Lq;
    if (st->has_pattern)
        return st->stats.density * (double)p->B * p->H * p->Lq * p->Lk / rows;
    return attn_problem_entries(p) / rows;
}

/* Records one run in the --table. */
static void table_add(table *t, const bench_problem *bp, const impl *m, const attn_outcome *o,
                      const attn_sparse_run *st, const attn_profile *prof) {
    const attn_problem *p = &bp->p;
    char name[160];
    if (bp->label != NULL)
        snprintf(name, sizeof name, "%s", bp->label);
    else
        snprintf(name, sizeof name, "%s %s%s%s%s", m->name, attn_dtype_name(p->dtype),
                 p->causal ? " causal" : "", bp->pattern ? " " : "",
                 bp->pattern ? bp->pattern : "");
    int r = 0;
    while (r < t->rows && strcmp(t->row[r], name) != 0)
        ++r;
    if (r == t->rows) {
        if (r == MAX_TABLE_ROWS)
            return;
        snprintf(t->row[t->rows++], sizeof t->row[0], "%s", name);
    }
    int old_ls = t->ls, c = table_slot(t->L, &t->ls, MAX_TABLE_LS, p->Lq);
    if (c < 0)
        return;
    if (t->ls > old_ls) /* a new column: move the cells right of it */
        for (int row = 0; row < MAX_TABLE_ROWS; ++row) {
            memmove(&t->cell[row][c + 1], &t->cell[row][c],
                    sizeof(table_cell) * (size_t)(t->ls - 1 - c));
            memset(&t->cell[row][c], 0, sizeof(table_cell));
        }
    bool first = r == 0 && t->rows == 1 && t->ls == 1;
    t->B = first || t->B == p->B ? p->B : -1;
    t->H = first || t->H == p->H ? p->H : -1;
    t->D = first || t->D == p->D ? p->D : -1;
    t->mixed_causal |= !first && t->causal != p->causal;
    t->causal = p->causal;
    t->cell[r][c] = (table_cell){true,
                                 o->rec.timed,
                                 o->out_of_memory,
                                 o->rec.status,
                                 keys_per_query(p, st),
                                 o->rec.time.median_ms,
                                 o->mem_used,
                                 *prof};
}

/* The Markdown table of --table, with a line naming the device and the sizes: one line per L
 * and implementation, each quantity in its own column with its unit. */
static void table_print(const table *t, const bench *b) {
    char sizes[96] = "";
    size_t used = 0;
    const char *names[] = {"B", "H", "D"};
    const int values[] = {t->B, t->H, t->D};
    for (int n = 0; n < 3; ++n)
        if (values[n] > 0)
            used +=
                (size_t)snprintf(sizes + used, sizeof sizes - used, "%s=%d ", names[n], values[n]);
    printf("\n%s (%s backend), %s%s; time: median of the timed launches; memory: peak device "
           "memory in use while the kernel ran\n",
           b->dev.name, attn_backend_name(), sizes,
           t->mixed_causal ? "causal and not" : (t->causal ? "causal" : "non-causal"));
    if (b->dev.simulated)
        printf("CPU-simulator timings, not GPU performance.\n");
    /* The simulator's modelled columns (attn/profile.h): a model, not a measurement of a GPU;
     * only where this build profiles (an instrumented build). */
    bool model = b->dev.simulated && b->profiling;
    printf("\n| L | implementation | keys per query | time (ms) | memory (MiB) |%s\n",
           model ? " DRAM (MB, model) | work (MFLOP, model) | FLOP per DRAM byte (model) | H100 "
                   "bound (µs, model) |"
                 : "");
    printf("|---:|---|---:|---:|---:|%s\n", model ? "---:|---:|---:|---:|" : "");
    for (int c = 0; c < t->ls; ++c)
        for (int r = 0; r < t->rows; ++r) {
            const table_cell *x = &t->cell[r][c];
            if (!x->set)
                continue;
            printf("| %d | %s | %.0f |", t->L[c], t->row[r], x->keys);
            if (x->timed)
                printf(" %.3f |", x->ms);
            else
                printf(" %s |", x->oom ? "OOM" : x->status);
            if (x->mem > 0)
                printf(" %.1f |", (double)x->mem / (1024.0 * 1024.0));
            else
                printf(" - |");
            if (model && x->prof.valid)
                printf(" %.3g | %.3g | %.3g | %.3g |", x->prof.dram_bytes * 1e-6,
                       x->prof.flops * 1e-6, x->prof.intensity, x->prof.bound_h100_s * 1e6);
            else if (model)
                printf(" - | - | - | - |");
            putchar('\n');
        }
    if (model)
        printf("\nModelled columns: the simulator's profile of one checked launch (common/cudasim/"
               "README.md, \"The profile\"): bytes reaching DRAM under an LRU L2 of 50 MiB (at "
               "these sizes every input fits in it: each byte is read once, dense or sparse), the "
               "FLOPs of the launch (its mma instructions, whole tiles; without mma 4 D per score "
               "entry), FLOPs per DRAM byte, "
               "the roofline lower bound on an H100 SXM from its published peaks (memory-bound "
               "where the FLOPs are few). A model, not a measurement of a GPU. Timings: the "
               "instrumented (sim-check) build's, without its checkers.\n");
    else if (b->dev.simulated)
        printf("\nNo modelled columns (DRAM bytes, FLOPs, FLOP per DRAM byte, roofline bound on "
               "an H100): %s.\n",
               attn_profile_how());
}

/* Writes the record (JSON line, table row, progress line) and counts failures. */
static void emit(bench *b, const bench_problem *bp, const impl *m, attn_outcome *o,
                 const attn_run_opts *ro, const attn_sparse_run *st, const attn_profile *prof) {
    char extra[2560], what[160];
    extra_members(&b->pv, &b->dev, m, o, ro, st, b->check_rows, extra, sizeof extra);
    if (prof->valid) { /* the record carries the profile */
        size_t used = strlen(extra);
        snprintf(extra + used, sizeof extra - used, "%s", used ? "," : "");
        used = strlen(extra);
        attn_profile_json(prof, extra + used, sizeof extra - used);
    }
    o->rec.extra_json = extra;
    if (b->out != NULL) {
        attn_report_json(b->out, &o->rec);
        fflush(b->out);
    }
    if (b->table)
        attn_report_row(stdout, &o->rec);
    if (b->opt.table)
        table_add(&b->tab, bp, m, o, st, prof);
    bool failed = (strcmp(o->rec.status, "FAIL") == 0 || strcmp(o->rec.status, "ERROR") == 0) &&
                  !o->out_of_memory;
    b->failures += failed;
    describe(bp, what, sizeof what);
    fprintf(stderr, "[%3d/%d %5.0f s] %-28s %-38s %-5s", b->done, b->total, now_s() - b->t0, what,
            m->name, o->out_of_memory ? "OOM" : o->rec.status);
    if (o->rec.timed)
        fprintf(stderr, " %9.4f ms %8.3f TFLOP/s", o->rec.time.median_ms, o->rec.tflops);
    else if (o->note[0] != '\0')
        fprintf(stderr, " %s", o->note);
    fputc('\n', stderr);
}

/* Why a problem is not run at all here (the simulator's size limit), or "". */
static void problem_refusal(const bench *b, const attn_problem *p, char *why, size_t len) {
    why[0] = '\0';
    double gflop = attn_problem_flops(p) * 1e-9;
    if (b->dev.simulated && gflop > b->opt.sim_max_gflop)
        snprintf(why, len,
                 "too large for the simulator (%.2f GFLOP > --sim-max-gflop %.2f): a GPU size",
                 gflop, b->opt.sim_max_gflop);
}

/* Why implementation m cannot run bp here (the problem's size, a pattern it does not serve, its
 * requirements, no GPU), or "" when it can. st: the pattern of m's example; b NULL: no size
 * limit (a dry run). */
static void kernel_refusal(const bench *b, const bench_problem *bp, const impl *m,
                           const attn_sparse_run *st, char *why, size_t len) {
    why[0] = '\0';
    if (b != NULL)
        problem_refusal(b, &bp->p, why, len);
    if (why[0] != '\0')
        return;
    attn_verdict v = m->sparse != NULL ? attn_sparse_verdict(st, m->k, &bp->p, why, len)
                                       : attn_kernel_verdict(m->k, &bp->p, why, len);
    if (v == ATTN_KERNEL_RUNS)
        why[0] = '\0';
}

/* With profiling: a first, untimed run of the kernel under the simulator's profile (its checked
 * launch; the timed run after it is not slowed by the profile). */
static void profile_checked_launch(attn_problem_data *data, const attn_kernel *k,
                                   const attn_run_opts *ro, const attn_outcome *o,
                                   attn_profile *prof) {
    attn_outcome scratch = *o;
    attn_run_opts once = *ro;
    char why[512];
    once.time = false;
    once.quiet = true;
    attn_profile_set_flops(ro->flops > 0.0 ? ro->flops : attn_problem_flops(&data->p));
    if (attn_profile_start(why, sizeof why) == 0) {
        attn_run_kernel(data, k, &once, &scratch);
        attn_profile_collect(NULL, prof);
        attn_profile_stop();
    }
}

/* The kernels of one example on one problem: a sparse example's pattern and masks (the sparse
 * module; a dense example's group does no sparse work), the data (inputs, reference under the
 * pattern, the baseline's dense one) made once, and only when some kernel can run. */
static void run_group(bench *b, const bench_problem *bp, const impl *impls, int n) {
    attn_sparse_run st;
    const bool sparse = impls[0].sparse != NULL;
    char why[256], refusal[MAX_IMPLS][256];
    memset(&st, 0, sizeof st);
    if (sparse) /* the spec was parsed with the command line or is a grid's */
        (void)attn_sparse_prepare(&st, impls[0].sparse, bp->pattern, why, sizeof why);
    bool any = false, need_csr = false, need_dense = false;
    for (int m = 0; m < n; ++m) {
        kernel_refusal(b, bp, &impls[m], &st, refusal[m], sizeof refusal[m]);
        if (refusal[m][0] != '\0')
            continue;
        any = true;
        if (sparse)
            attn_sparse_needs(&st, impls[m].k, &need_csr, &need_dense);
    }
    attn_problem_data data;
    bool have_data = false;
    if (any && (!sparse || attn_sparse_build(&st, &bp->p, need_csr, true) == 0)) {
        have_data = attn_problem_data_make(&data, &bp->p, st.has_pattern ? &st.mask : NULL,
                                           need_dense, b->opt.seed, 1.0f, b->check_rows, true) == 0;
        if (have_data && sparse)
            attn_sparse_buffers(&st, &data.dev);
        else if (!have_data)
            attn_problem_data_free(&data);
    }
    for (int m = 0; m < n; ++m) {
        attn_outcome o;
        attn_profile prof = {0};
        attn_run_opts ro = b->run;
        attn_outcome_init(&o, impls[m].ex, impls[m].k, &bp->p, b->dev.name);
        if (sparse)
            attn_sparse_kernel_options(&st, impls[m].k, &bp->p, &ro, why, sizeof why);
        ++b->done;
        if (refusal[m][0] != '\0') {
            o.rec.status = "SKIP";
            snprintf(o.note, sizeof o.note, "%.255s", refusal[m]);
        } else if (!have_data) {
            o.rec.status = "ERROR";
            o.out_of_memory = true;
            snprintf(o.note, sizeof o.note,
                     "the problem's inputs, reference or block mask could not be allocated (see "
                     "above)");
        } else {
            if (b->profiling)
                profile_checked_launch(&data, impls[m].k, &ro, &o, &prof);
            attn_run_kernel(&data, impls[m].k, &ro, &o);
        }
        emit(b, bp, &impls[m], &o, &ro, &st, &prof);
    }
    if (have_data)
        attn_problem_data_free(&data);
    attn_sparse_free(&st);
}

/* Every selected kernel that pairs with the problem, one example at a time. */
static void run_problem(bench *b, const bench_problem *bp, const impl *impls, int n) {
    impl group[MAX_IMPLS];
    for (int m = 0; m < n;) {
        int count = 0, end = m;
        for (; end < n && impls[end].ex == impls[m].ex; ++end)
            if (pairs(&impls[end], bp))
                group[count++] = impls[end];
        if (count > 0)
            run_group(b, bp, group, count);
        m = end;
    }
}

/* The number of (problem, implementation) runs. */
static int count_runs(const bench_problem *problems, int np, const impl *impls, int ni) {
    int total = 0;
    for (int q = 0; q < np; ++q)
        for (int m = 0; m < ni; ++m)
            total += pairs(&impls[m], &problems[q]);
    return total;
}

static void set_defaults(bench *b) {
    const options *o = &b->opt;
    bool sim = b->dev.simulated;
    attn_timing_opts *t = &b->run.timing;
    b->run.time = true;
    b->run.time_failed = false; /* a wrong kernel's time is not a result */
    b->run.quiet = true;
    t->warmup = o->warmup >= 0 ? o->warmup : (sim ? 0 : 3);
    t->reps = o->reps > 0 ? o->reps : (sim ? 3 : 10);
    t->flush_l2 = 1;
    t->max_reps = o->max_reps > 0 ? o->max_reps : (sim ? 0 : 100);
    t->target_spread = o->target_spread >= 0.0 ? o->target_spread : 0.02;
    t->max_seconds = o->max_seconds;
    b->check_rows = o->check_rows >= 0 ? o->check_rows : 256;
}

static void print_dry_run(const bench_problem *problems, int np, const impl *impls, int ni) {
    for (int q = 0; q < np; ++q) {
        char what[160];
        describe(&problems[q], what, sizeof what);
        for (int m = 0; m < ni; ++m) {
            if (!pairs(&impls[m], &problems[q]))
                continue;
            attn_sparse_run st;
            char why[256] = "";
            memset(&st, 0, sizeof st);
            if (impls[m].sparse != NULL)
                (void)attn_sparse_prepare(&st, impls[m].sparse, problems[q].pattern, why,
                                          sizeof why);
            kernel_refusal(NULL, &problems[q], &impls[m], &st, why, sizeof why);
            printf("%-40s %-40s %s%s\n", what, impls[m].name, why[0] ? "skip: " : "runs", why);
        }
    }
    printf("%d problems, %d runs\n", np, count_runs(problems, np, impls, ni));
}

/* Opens --out: with probe, only checks that it can be written (before the device is looked for:
 * a usage error is exit 2 everywhere, and a machine without a GPU must not truncate results). */
static int open_output(bench *b, bool probe) {
    const char *path = b->opt.out;
    b->table = !b->opt.quiet;
    if (path == NULL)
        return 0;
    if (strcmp(path, "-") == 0) {
        b->out = stdout;
        b->table = false; /* stdout carries the JSON */
        return 0;
    }
    b->out = fopen(path, probe || b->opt.append ? "a" : "w");
    if (b->out == NULL) {
        fprintf(stderr, "error: cannot open '%s' for writing (does its folder exist?)\n", path);
        return ATTN_EXIT_USAGE;
    }
    if (probe) {
        fclose(b->out);
        b->out = NULL;
    }
    return 0;
}

int main(int argc, char **argv) {
    static bench b; /* static: the options hold a few KiB of lists */
    static bench_problem problems[MAX_PROBLEMS];
    impl impls[MAX_IMPLS];
    int np = 0, ni = 0;
    /* The pattern kinds the benchmarked examples define themselves (example 06's ladder), before
     * --pattern and the grids' specs are parsed. */
    for (const attn_example *const *e = attn_bench_examples; *e != NULL; ++e)
        if (attn_sparse_config_of(*e) != NULL &&
            attn_pattern_register(attn_sparse_config_of(*e)->kinds) != 0) {
            fprintf(stderr, "error: %s: its pattern kinds cannot be registered\n", (*e)->name);
            return 1;
        }
    int rc = parse_args(&b.opt, argc, argv);
    if (rc != 0)
        return rc;
    if (b.opt.help) {
        print_help(argv[0]);
        return 0;
    }
    if (b.opt.grids) {
        for (int g = 0; g < NUM_PRESETS; ++g)
            printf("%-12s %s\n", presets[g].name, presets[g].about);
        return 0;
    }
    rc = select_impls(&b.opt, impls, &ni);
    if (rc != 0)
        return rc;
    if (b.opt.list) {
        print_impls(impls, ni);
        return 0;
    }
    if (b.opt.launch_shapes) {
        print_launch_shapes(impls, ni);
        return 0;
    }
    bool on_sim = strcmp(attn_backend_name(), "sim") == 0;
    if ((rc = make_problems(&b.opt, on_sim, problems, &np)) != 0)
        return rc;
    if (b.opt.dry_run) {
        print_dry_run(problems, np, impls, ni);
        return 0;
    }
    if ((rc = open_output(&b, true)) != 0)
        return rc;
    if ((rc = attn_device_init_reported(&b.dev)) != 0)
        return rc;
    if ((rc = open_output(&b, false)) != 0)
        return rc;
    if (b.opt.table)
        b.table = false; /* the Markdown table after the run replaces the per-run rows */
    /* --profile, or --table on an instrumented simulator build (its modelled columns) */
    b.profiling = b.opt.profile || (b.opt.table && b.dev.simulated && attn_profile_available());
    /* The benchmark measures, it does not hunt bugs: in the instrumented build its runs go without
     * the checkers (several times slower) unless CUDASIM_CHECK is set. Read at the first launch. */
    if (b.profiling)
        setenv("CUDASIM_CHECK", "0", 0);
    if (b.opt.profile && !attn_profile_available()) {
        char why[512];
        attn_profile_start(why, sizeof why);
        fprintf(stderr, "error: %s\n", why);
        return ATTN_EXIT_USAGE;
    }
    set_defaults(&b);
    make_provenance(&b.opt, &b.dev, &b.pv);
    if (attn_bench_flush_init() != 0)
        return 1;
    fprintf(stderr, "bench_attention: %d problems, %d runs on %s (%s), commit %s\n", np,
            count_runs(problems, np, impls, ni), b.dev.name, attn_backend_name(), b.pv.commit);
    if (b.dev.simulated)
        fprintf(stderr, "NOTE: %s.\n", SIM_WARNING);
    if (b.table) {
        if (b.dev.simulated)
            printf("NOTE: %s.\n", SIM_WARNING);
        attn_report_header(stdout);
    }
    b.total = count_runs(problems, np, impls, ni);
    b.t0 = now_s();
    int q = 0;
    for (; q < np; ++q) {
        if (b.opt.budget_s > 0.0 && now_s() - b.t0 > b.opt.budget_s)
            break;
        run_problem(&b, &problems[q], impls, ni);
    }
    if (q < np)
        fprintf(stderr, "budget: --budget-s %.0f reached; %d of %d problems not run\n",
                b.opt.budget_s, np - q, np);
    if (b.out != NULL && b.out != stdout && fclose(b.out) != 0) {
        fprintf(stderr, "error: cannot write '%s'\n", b.opt.out);
        return 1;
    }
    fprintf(stderr, "bench_attention: %d runs in %.1f s, %d failed\n", b.done, now_s() - b.t0,
            b.failures);
    if (b.opt.table)
        table_print(&b.tab, &b);
    return b.failures ? 1 : 0;
}
