/* bench_attention.c — every kernel of the chapter's examples over a grid of problem sizes: each
 * result checked against the CPU reference (a kernel that fails is reported FAIL and never timed),
 * then timed (CUDA events, warm-up, L2 flush, repetitions until the spread is small), one JSON
 * line per (problem, kernel) with TFLOP/s, GB/s, peak device memory and provenance.
 *
 *   bench_attention_sim                                   the simulator grid (small sizes)
 *   bench_attention_gpu --grid issue3 --out benchmarks/results/<device>/bench_attention.jsonl
 *   bench_attention_gpu --L 1k,2k --D 64,128 --H 16 --dtype f16,bf16 --causal both --impl fa2_mma
 *   bench_attention_sim --list          the implementations;  --grids  the preset grids
 *   bench_attention_sim --dry-run       what would run, without touching the device
 *
 * The kernels come from the examples listed in benchmarks/CMakeLists.txt (ATTN_BENCH_EXAMPLES),
 * through their registries (attn/problem.h); checking and timing are the harness's
 * (attn/runner.h), the same code the examples' programs run. Output keys: benchmarks/README.md.
 * Exit status: 0 every run passed or was skipped, 1 a FAIL or ERROR, 2 usage, 77 no GPU.
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
#include "attn/device.h"
#include "attn/report.h"
#include "attn/runner.h"

/* benchmarks/CMakeLists.txt generates this array from ATTN_BENCH_EXAMPLES, NULL-terminated. */
extern const attn_example *const attn_bench_examples[];

#ifndef ATTN_SOURCE_DIR
#define ATTN_SOURCE_DIR "."
#endif

#define SIM_WARNING "CPU simulator timings: they measure the simulator, not GPU performance"

/* ---- grids ------------------------------------------------------------------------------------
 */

#define MAX_VALUES 16
typedef struct int_list {
    int n;
    int v[MAX_VALUES];
} int_list;

/* A cartesian product of values; a grid is the union of a few blocks. */
typedef struct grid_block {
    int_list B, H, L, D, dtype, causal;
} grid_block;

#define MAX_BLOCKS 4
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
#define ISSUE3_L LIST(1024, 2048, 4096, 8192, 16384)

static const grid_preset presets[] = {
    {"sim",
     "simulator default: B=1 H=2 D=64, L 128..1024, every dtype, causal and not",
     1,
     {{LIST(1), LIST(2), LIST(128, 256, 512, 1024), LIST(64), LIST(F32, F16, BF16), LIST(0, 1)}}},
    {"tiny",
     "smallest check of the pipeline (the CTest): B=1 H=1 D=64, L 16 and 40",
     1,
     {{LIST(1), LIST(1), LIST(16, 40), LIST(64), LIST(F32, F16), LIST(0, 1)}}},
    {"issue3",
     "issue 3: B*H=16 heads of D=128 and 32 heads of D=64, L 1k..16k, f16/bf16, causal and not",
     2,
     {{LIST(1), LIST(16), ISSUE3_L, LIST(128), LIST(F16, BF16), LIST(0, 1)},
      {LIST(1), LIST(32), ISSUE3_L, LIST(64), LIST(F16, BF16), LIST(0, 1)}}},
    {"fp32",
     "the fp32 kernels (examples 01, 02, 03 v1): B=1 H=16 D=64, L 1k..16k, causal and not",
     1,
     {{LIST(1), LIST(16), ISSUE3_L, LIST(64), LIST(F32), LIST(0, 1)}}},
};
#define NUM_PRESETS (int)(sizeof presets / sizeof presets[0])

/* ---- command line -----------------------------------------------------------------------------
 */

typedef struct options {
    bool help, list, grids, dry_run, quiet, append;
    const grid_preset *grid[NUM_PRESETS]; /* --grid (several allowed); none: sim or issue3 */
    int num_grids;
    grid_block override;  /* lists given on the command line replace the grid's (n = 0: not) */
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
        "simulator, issue3 on a GPU)\n"
        "  --B LIST --H LIST --L LIST --D LIST   replace the grid's values (e.g. --L 1k,2k,4096)\n"
        "  --dtype LIST         f32,f16,bf16      --causal no|yes|both\n"
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
        "  --seed N --commit SHA --quiet --list --grids --dry-run --help\n",
        prog);
}

/* Integer with an optional k (x1024) suffix, > 0 (>= 0 when zero_ok). 0 on success. */
static int parse_count(const char *s, bool zero_ok, int *out) {
    char *end = NULL;
    if (s[0] < '0' || s[0] > '9')
        return 1;
    long v = strtol(s, &end, 10);
    if (*end == 'k' || *end == 'K') {
        v *= 1024;
        ++end;
    }
    if (*end != '\0' || v > 1 << 24 || (v == 0 && !zero_ok))
        return 1;
    *out = (int)v;
    return 0;
}

static int parse_real(const char *s, double *out) {
    char *end = NULL;
    double v = strtod(s, &end);
    if (s[0] == '\0' || *end != '\0' || !(v >= 0.0) || !isfinite(v))
        return 1;
    *out = v;
    return 0;
}

/* One value of a list option: a count, a dtype or a causal word. */
static int parse_value(const char *flag, const char *s, int *out) {
    attn_dtype t;
    if (strcmp(flag, "--dtype") == 0) {
        if (attn_dtype_parse(s, &t) != 0)
            return 1;
        *out = (int)t;
        return 0;
    }
    return parse_count(s, false, out);
}

/* A comma-separated list into l. --causal takes one word: no, yes or both. */
static int parse_list(const char *flag, const char *s, int_list *l) {
    if (strcmp(flag, "--causal") == 0) {
        bool no = strcmp(s, "no") == 0, yes = strcmp(s, "yes") == 0, both = strcmp(s, "both") == 0;
        if (!no && !yes && !both)
            return usage("--causal must be no, yes or both (got '%s')%s", s, "");
        *l = both ? (int_list)LIST(0, 1) : (int_list)LIST(yes);
        return 0;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    l->n = 0;
    for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
        if (l->n == MAX_VALUES)
            return usage("%s takes at most 16 values (got '%s')", flag, s);
        if (parse_value(flag, tok, &l->v[l->n++]) != 0)
            return usage(strcmp(flag, "--dtype") == 0
                             ? "%s takes f32, f16 or bf16, comma-separated (got '%s')"
                             : "%s takes positive integers (k = x1024), comma-separated (got '%s')",
                         flag, s);
    }
    return l->n == 0 ? usage("%s needs at least one value (got '%s')", flag, s) : 0;
}

static int parse_grids(options *o, const char *s) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
        int g = 0;
        while (g < NUM_PRESETS && strcmp(presets[g].name, tok) != 0)
            ++g;
        if (g == NUM_PRESETS)
            return usage("unknown grid '%s'%s: sim, tiny, issue3 or fp32 (--grids)", tok, "");
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
    for (size_t n = 0; n < sizeof nums / sizeof nums[0]; ++n) {
        if (strcmp(flag, nums[n].name) != 0)
            continue;
        if (nums[n].i ? parse_count(v, nums[n].zero_ok, nums[n].i) : parse_real(v, nums[n].d))
            return usage(nums[n].i ? "%s must be an integer (got '%s')"
                                   : "%s must be a non-negative number (got '%s')",
                         flag, v);
        return 0;
    }
    if (strcmp(flag, "--seed") == 0) {
        char *end = NULL;
        o->seed = strtoull(v, &end, 10);
        return v[0] >= '0' && v[0] <= '9' && *end == '\0'
                   ? 0
                   : usage("--seed must be a non-negative integer (got '%s')%s", v, "");
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
    } const switches[] = {{"--help", &o->help},       {"-h", &o->help},
                          {"--list", &o->list},       {"--grids", &o->grids},
                          {"--dry-run", &o->dry_run}, {"--quiet", &o->quiet},
                          {"--append", &o->append}};
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

/* ---- implementations --------------------------------------------------------------------------
 */

typedef struct impl {
    const attn_example *ex;
    const attn_kernel *k;
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
    for (int e = 0; attn_bench_examples[e] != NULL; ++e)
        for (int k = 0; k < attn_bench_examples[e]->num_kernels && n < MAX_IMPLS; ++k, ++n) {
            all[n].ex = attn_bench_examples[e];
            all[n].k = &attn_bench_examples[e]->kernels[k];
            snprintf(all[n].name, sizeof all[n].name, "%s/%s", all[n].ex->name, all[n].k->name);
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

static void print_impls(const impl *impls, int n) {
    for (int m = 0; m < n; ++m)
        printf("%-40s %s\n", impls[m].name, impls[m].k->description);
}

/* ---- problems ---------------------------------------------------------------------------------
 */

#define MAX_PROBLEMS 4096

/* The union of the grids' blocks, each list replaced by the command line's where given. */
static int make_problems(const options *o, bool on_sim, attn_problem *out, int *count) {
    const grid_preset *dflt = &presets[on_sim ? 0 : 2];
    int num_grids = o->num_grids ? o->num_grids : 1;
    *count = 0;
    for (int g = 0; g < num_grids; ++g) {
        const grid_preset *pre = o->num_grids ? o->grid[g] : dflt;
        for (int b = 0; b < pre->num_blocks; ++b) {
            grid_block blk = pre->blocks[b];
            const int_list *ov[] = {&o->override.B, &o->override.H,     &o->override.L,
                                    &o->override.D, &o->override.dtype, &o->override.causal};
            int_list *dst[] = {&blk.B, &blk.H, &blk.L, &blk.D, &blk.dtype, &blk.causal};
            for (int n = 0; n < 6; ++n)
                if (ov[n]->n > 0)
                    *dst[n] = *ov[n];
            for (int d = 0; d < blk.D.n; ++d)
                for (int t = 0; t < blk.dtype.n; ++t)
                    for (int h = 0; h < blk.H.n; ++h)
                        for (int bb = 0; bb < blk.B.n; ++bb)
                            for (int l = 0; l < blk.L.n; ++l)
                                for (int c = 0; c < blk.causal.n; ++c) {
                                    if (*count == MAX_PROBLEMS)
                                        return usage("the grid has more than %s problems%s", "4096",
                                                     "");
                                    attn_problem *p = &out[(*count)++];
                                    attn_problem_init(p, blk.B.v[bb], blk.H.v[h], blk.L.v[l],
                                                      blk.L.v[l], blk.D.v[d]);
                                    p->dtype = (attn_dtype)blk.dtype.v[t];
                                    p->causal = blk.causal.v[c] != 0;
                                }
        }
    }
    return 0;
}

/* ---- provenance -------------------------------------------------------------------------------
 */

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
        snprintf(pv->grid, sizeof pv->grid, "%s", dev->simulated ? "sim" : "issue3");
    if (o->override.B.n + o->override.H.n + o->override.L.n + o->override.D.n +
            o->override.dtype.n + o->override.causal.n >
        0)
        snprintf(pv->grid + strlen(pv->grid), sizeof pv->grid - strlen(pv->grid), "%s",
                 " (modified)");
}

/* ---- one record -------------------------------------------------------------------------------
 */

/* Q, K, V, O and LSE in the problem's dtype, plus the kernel's workspace: the device memory a run
 * needs by the model (what attn_problem_data allocates). */
static double model_memory(const attn_problem *p, double workspace) {
    double elem = (double)attn_dtype_size(p->dtype);
    return elem * (2.0 * (double)attn_problem_q_elems(p) + 2.0 * (double)attn_problem_k_elems(p)) +
           4.0 * (double)attn_problem_lse_elems(p) + workspace;
}

/* The members added to the harness's record (benchmarks/README.md lists them). */
static void extra_members(const provenance *pv, const attn_device_info *dev, const impl *m,
                          const attn_outcome *o, const attn_run_opts *ro, int check_rows, char *out,
                          size_t len) {
    const attn_problem *p = &o->rec.problem;
    char mem[32] = "null", spread[32] = "null";
    if (o->mem_used > 0)
        snprintf(mem, sizeof mem, "%zu", o->mem_used);
    if (o->rec.timed)
        snprintf(spread, sizeof spread, "%.4g", o->rec.time.spread);
    snprintf(
        out, len,
        "\"bench\":\"bench_attention\",\"impl\":\"%s\",\"simulated\":%s,\"timing_note\":\"%s\","
        "\"flops\":%.6g,\"bytes_model\":%.6g,\"mem_peak_bytes\":%s,\"mem_model_bytes\":%.6g,"
        "\"oom\":%s,\"pattern\":\"dense\","
        "\"spread\":%s,\"warmup\":%d,\"check_rows\":%d,\"grid\":\"%s\",\"commit\":\"%s\","
        "\"date\":\"%s\",\"cuda_runtime\":\"%s\",\"cuda_driver\":\"%s\",\"cc\":\"%d.%d\","
        "\"host\":\"%s\"",
        m->name, dev->simulated ? "true" : "false", dev->simulated ? SIM_WARNING : "",
        attn_problem_flops(p), attn_problem_min_bytes(p), mem,
        model_memory(p, o->rec.workspace_bytes), o->out_of_memory ? "true" : "false", spread,
        ro->timing.warmup, check_rows, pv->grid, pv->commit, pv->date, pv->runtime, pv->driver,
        dev->cc_major, dev->cc_minor, pv->host);
}

/* ---- the run ----------------------------------------------------------------------------------
 */

typedef struct bench {
    options opt;
    attn_device_info dev;
    provenance pv;
    attn_run_opts run;
    int check_rows;
    FILE *out;  /* NULL: no JSON */
    bool table; /* the human table on stdout */
    int failures, done, total;
    double t0;
} bench;

static double now_s(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void describe(const attn_problem *p, char *out, size_t len) {
    snprintf(out, len, "B=%d H=%d L=%d D=%d %s%s", p->B, p->H, p->Lq, p->D,
             attn_dtype_name(p->dtype), p->causal ? " causal" : "");
}

/* Writes the record (JSON line, table row, progress line) and counts failures. */
static void emit(bench *b, const impl *m, attn_outcome *o) {
    char extra[1024], what[96];
    extra_members(&b->pv, &b->dev, m, o, &b->run, b->check_rows, extra, sizeof extra);
    o->rec.extra_json = extra;
    if (b->out != NULL) {
        attn_report_json(b->out, &o->rec);
        fflush(b->out);
    }
    if (b->table)
        attn_report_row(stdout, &o->rec);
    bool failed = (strcmp(o->rec.status, "FAIL") == 0 || strcmp(o->rec.status, "ERROR") == 0) &&
                  !o->out_of_memory;
    b->failures += failed;
    describe(&o->rec.problem, what, sizeof what);
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

/* Every selected kernel on one problem: the data (inputs, reference) is made once, and only when
 * some kernel can run the problem here. */
static void run_problem(bench *b, const attn_problem *p, const impl *impls, int n) {
    char refusal[256];
    problem_refusal(b, p, refusal, sizeof refusal);
    bool any = false;
    for (int m = 0; m < n && refusal[0] == '\0'; ++m)
        any = any || attn_kernel_verdict(impls[m].k, p, NULL, 0) == ATTN_KERNEL_RUNS;
    attn_problem_data data;
    bool have_data = any && attn_problem_data_make(&data, p, NULL, false, b->opt.seed, 1.0f,
                                                   b->check_rows, true) == 0;
    for (int m = 0; m < n; ++m) {
        attn_outcome o;
        attn_outcome_init(&o, impls[m].ex, impls[m].k, p, b->dev.name);
        ++b->done;
        if (refusal[0] != '\0') {
            o.rec.status = "SKIP";
            snprintf(o.note, sizeof o.note, "%s", refusal);
        } else if (any && !have_data &&
                   attn_kernel_verdict(impls[m].k, p, NULL, 0) == ATTN_KERNEL_RUNS) {
            o.rec.status = "ERROR";
            o.out_of_memory = true;
            snprintf(o.note, sizeof o.note,
                     "the problem's inputs or reference could not be "
                     "allocated (see above)");
        } else if (have_data) {
            attn_run_kernel(&data, impls[m].k, &b->run, &o);
        } else {
            o.rec.status = "SKIP";
            attn_kernel_verdict(impls[m].k, p, o.note, sizeof o.note);
        }
        emit(b, &impls[m], &o);
    }
    if (any)
        attn_problem_data_free(&data);
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

static void print_dry_run(const attn_problem *problems, int np, const impl *impls, int ni) {
    for (int q = 0; q < np; ++q) {
        char what[96];
        describe(&problems[q], what, sizeof what);
        for (int m = 0; m < ni; ++m) {
            char why[256] = "";
            attn_verdict v = attn_kernel_verdict(impls[m].k, &problems[q], why, sizeof why);
            printf("%-26s %-40s %s%s\n", what, impls[m].name,
                   v == ATTN_KERNEL_RUNS ? "runs" : "skip: ", v == ATTN_KERNEL_RUNS ? "" : why);
        }
    }
    printf("%d problems x %d implementations\n", np, ni);
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
    static attn_problem problems[MAX_PROBLEMS];
    impl impls[MAX_IMPLS];
    int np = 0, ni = 0;
    int rc = parse_args(&b.opt, argc, argv);
    if (rc != 0)
        return rc;
    if (b.opt.help) {
        print_help(argv[0]);
        return 0;
    }
    if (b.opt.grids) {
        for (int g = 0; g < NUM_PRESETS; ++g)
            printf("%-8s %s\n", presets[g].name, presets[g].about);
        return 0;
    }
    rc = select_impls(&b.opt, impls, &ni);
    if (rc != 0)
        return rc;
    if (b.opt.list) {
        print_impls(impls, ni);
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
    set_defaults(&b);
    make_provenance(&b.opt, &b.dev, &b.pv);
    if (attn_bench_flush_init() != 0)
        return 1;
    fprintf(stderr, "bench_attention: %d problems x %d implementations on %s (%s), commit %s\n", np,
            ni, b.dev.name, attn_backend_name(), b.pv.commit);
    if (b.dev.simulated)
        fprintf(stderr, "NOTE: %s.\n", SIM_WARNING);
    if (b.table) {
        if (b.dev.simulated)
            printf("NOTE: %s.\n", SIM_WARNING);
        attn_report_header(stdout);
    }
    b.total = np * ni;
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
    return b.failures ? 1 : 0;
}
