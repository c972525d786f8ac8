/* cli.c — the command line every example shares (the flags are listed in attn/cli.h).
 *
 * Options take their value as the next argument or after '=' (--seqlen 512, --seqlen=512,
 * -L 512, -L=512). Numbers are strict: decimal digits only for integers (no sign, no spaces, no
 * suffix, no overflow), a complete finite positive number for reals. Every error is one line
 * naming the flag, and the parse stops at the first one. */
#include "attn/cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attn/device.h"
#include "attn/example.h"

typedef enum opt_id {
    OPT_HELP,
    OPT_LIST,
    OPT_KERNEL,
    OPT_BATCH,
    OPT_HEADS,
    OPT_SEQLEN,
    OPT_HEADDIM,
    OPT_LQ,
    OPT_LK,
    OPT_SEQLENS,
    OPT_SEQLENS_K,
    OPT_PATTERN,
    OPT_DTYPE,
    OPT_CAUSAL,
    OPT_SCALE,
    OPT_AMPLITUDE,
    OPT_INPUTS,
    OPT_SEED,
    OPT_REPS,
    OPT_WARMUP,
    OPT_CHECK_ONLY,
    OPT_CHECK_ROWS,
    OPT_CHECK_ALL,
    OPT_JSON,
    OPT_CSV,
    OPT_QUIET,
    OPT_PROFILE,
    OPT_DUMP,
    OPT_ALLOW_SLOW
} opt_id;

typedef struct opt {
    opt_id id;
    const char *short_name; /* NULL when there is none */
    const char *long_name;
    const char *value; /* what the value is, for --help; NULL for a plain switch */
    const char *help;
} opt;

/* Checking every row is the default while the reference costs at most this many double
 * multiply-adds (about 1.5 s on one core); beyond, a sample of CHECK_ROWS_SAMPLE rows. The
 * help text of --check-rows quotes both numbers. */
#define CHECK_ALL_MAX_MADDS 2e9
#define CHECK_ROWS_SAMPLE 4096

static const opt options[] = {
    {OPT_HELP, "-h", "--help", NULL, "this text"},
    {OPT_LIST, NULL, "--list", NULL, "list the kernels (id, name, what it changes, limits)"},
    {OPT_KERNEL, NULL, "--kernel", "N|all", "which kernel(s) to run (default: all)"},
    {OPT_BATCH, "-B", "--batch", "N", "batch size"},
    {OPT_HEADS, "-H", "--heads", "N", "number of heads"},
    {OPT_SEQLEN, "-L", "--seqlen", "N", "sequence length (queries and keys)"},
    {OPT_HEADDIM, "-D", "--headdim", "N", "head dimension"},
    {OPT_LQ, NULL, "--lq", "N", "query length (overrides -L)"},
    {OPT_LK, NULL, "--lk", "N", "key length (overrides -L)"},
    {OPT_SEQLENS, NULL, "--seqlens", "N1,N2,...",
     "variable-length batch (packed, cu_seqlens): one length per sequence, for queries and keys; "
     "B = count, Lq = Lk = max"},
    {OPT_SEQLENS_K, NULL, "--seqlens-k", "M1,M2,...",
     "key lengths per sequence when they differ from --seqlens (same count)"},
    {OPT_PATTERN, NULL, "--pattern", "SPEC",
     "sparse pattern (sparse examples): window:w=N, causal_window:w=N, dilated:w=N,d=N, "
     "strided:l=N, fixed:l=N,c=N, global:g=I,J-K, bigbird:b=N,r=N,seed=N; '+' joins; none"},
    {OPT_DTYPE, NULL, "--dtype", "f32|f16|bf16",
     "element type (default: the first one the "
     "kernels support)"},
    {OPT_CAUSAL, NULL, "--causal", NULL, "causal attention, bottom-right aligned"},
    {OPT_SCALE, NULL, "--scale", "X", "softmax scale (default 1/sqrt(D))"},
    {OPT_AMPLITUDE, NULL, "--amplitude", "X",
     "inputs uniform in [-X, X) (default 1; large values stress the softmax)"},
    {OPT_INPUTS, NULL, "--inputs", "uniform|opposed",
     "input signs: uniform (default), or opposed: Q, V in [0, X), K in (-X, 0], every score "
     "negative, so a masked key that leaks in with score 0 outweighs every real key"},
    {OPT_SEED, NULL, "--seed", "N", "input seed (default 1234)"},
    {OPT_REPS, NULL, "--reps", "N", "timed repetitions (default 20 on a GPU, 2 on the simulator)"},
    {OPT_WARMUP, NULL, "--warmup", "N", "untimed launches first (default 5 GPU, 0 simulator)"},
    {OPT_CHECK_ONLY, NULL, "--check-only", NULL, "check correctness, skip timing"},
    {OPT_CHECK_ROWS, NULL, "--check-rows", "N",
     "check a sample of N query rows, 0 = all (default: all if the reference costs at most 2e9 "
     "multiply-adds, else 4096)"},
    {OPT_CHECK_ALL, NULL, "--check-all", NULL, "check every row (= --check-rows 0)"},
    {OPT_JSON, NULL, "--json", "FILE", "append one JSON line per kernel ('-' = stdout)"},
    {OPT_CSV, NULL, "--csv", "FILE", "append one CSV row per kernel ('-' = stdout)"},
    {OPT_QUIET, NULL, "--quiet", NULL, "only the result lines"},
    {OPT_PROFILE, NULL, "--profile", NULL,
     "the simulator's profile of each kernel's checked launch (requests, sectors, DRAM bytes, "
     "bank conflicts, roofline bound); no timing; needs the sim-check preset"},
    {OPT_DUMP, NULL, "--dump", "DIR",
     "write the inputs, the reference and each kernel's output and log-sum-exp as tensor files "
     "into the existing folder DIR"},
    {OPT_ALLOW_SLOW, NULL, "--allow-slow", NULL,
     "run a problem the simulator would take more than its budget (~10 min) for"},
};

#define NUM_OPTIONS (sizeof options / sizeof options[0])

/* ---- errors ---------------------------------------------------------------------------------- */

static int usage_error(char *err, size_t err_len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return ATTN_EXIT_USAGE;
}

/* "-B/--batch" or "--lq": how error messages name an option. */
static const char *display_name(const opt *o, char *buf, size_t len) {
    if (o->short_name == NULL)
        return o->long_name;
    snprintf(buf, len, "%s/%s", o->short_name, o->long_name);
    return buf;
}

/* ---- strict number parsing ------------------------------------------------------------------- */

/* Decimal digits only, value <= max. 0 on success, -1 if malformed, -2 if too large. */
static int parse_unsigned(const char *s, uint64_t max, uint64_t *out) {
    uint64_t v = 0;
    if (*s == '\0')
        return -1;
    for (; *s != '\0'; ++s) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned digit = (unsigned)(*s - '0');
        if (v > (max - digit) / 10)
            return -2;
        v = v * 10 + digit;
    }
    *out = v;
    return 0;
}

int attn_cli_parse_int(const char *flag, const char *s, int min, int *out, char *err,
                       size_t err_len) {
    uint64_t v = 0;
    int rc = parse_unsigned(s, INT_MAX, &v);
    const char *what = min == 0 ? "a non-negative integer" : "a positive integer";
    if (rc == -2)
        return usage_error(err, err_len, "error: %s is too large (got '%s'; at most %d)", flag, s,
                           INT_MAX);
    if (rc != 0 || (int)v < min)
        return usage_error(err, err_len, "error: %s must be %s (got '%s')", flag, what, s);
    *out = (int)v;
    return 0;
}

/* An int in [min, INT_MAX], the option named as its error messages name it. */
static int parse_int(const opt *o, const char *s, int min, int *out, char *err, size_t err_len) {
    char name[32];
    return attn_cli_parse_int(display_name(o, name, sizeof name), s, min, out, err, err_len);
}

int attn_cli_parse_real(const char *flag, const char *s, double *out, char *err, size_t err_len) {
    char *end = NULL;
    errno = 0;
    double v = isspace((unsigned char)s[0]) ? NAN : strtod(s, &end);
    if (s[0] == '\0' || end == NULL || *end != '\0' || errno == ERANGE || !(v >= 0.0) ||
        !isfinite(v))
        return usage_error(err, err_len, "error: %s must be a non-negative number (got '%s')", flag,
                           s);
    *out = v;
    return 0;
}

/* The items of a comma-separated list, one at a time: copies item n into buf. Returns the
 * number of items. */
static int list_item(const char *list, int n, char *buf, size_t len) {
    int count = 0;
    for (const char *item = list;; ++count) {
        const char *comma = strchr(item, ',');
        size_t k = comma ? (size_t)(comma - item) : strlen(item);
        if (count == n)
            snprintf(buf, len, "%.*s", (int)(k < len - 1 ? k : len - 1), item);
        if (comma == NULL)
            return count + 1;
        item = comma + 1;
    }
}

/* One item of a list: 0 with its value in *out, or -1. */
typedef int (*item_parser)(const char *item, int *out);

/* A positive integer with an optional k suffix (x1024), at most 2^24. */
static int count_item(const char *item, int *out) {
    char digits[24];
    uint64_t v = 0;
    size_t n = strspn(item, "0123456789");
    bool k = item[n] == 'k' || item[n] == 'K';
    if (n == 0 || n >= sizeof digits || item[n + (k ? 1 : 0)] != '\0')
        return -1;
    snprintf(digits, sizeof digits, "%.*s", (int)n, item);
    if (parse_unsigned(digits, 1u << 24, &v) != 0 || v == 0 || (k && v > (1u << 24) / 1024))
        return -1;
    *out = (int)(k ? v * 1024 : v);
    return 0;
}

static int dtype_item(const char *item, int *out) {
    attn_dtype t;
    if (attn_dtype_parse(item, &t) != 0)
        return -1;
    *out = (int)t;
    return 0;
}

/* A comma-separated list of at most max items, each read by one; accepted names them for the
 * error message. */
static int parse_list(const char *flag, const char *s, int *out, int max, int *n, item_parser one,
                      const char *accepted, char *err, size_t err_len) {
    int count = list_item(s, -1, NULL, 0);
    if (count > max)
        return usage_error(err, err_len, "error: %s takes at most %d values (got '%s')", flag, max,
                           s);
    for (int i = 0; i < count; ++i) {
        char item[32];
        list_item(s, i, item, sizeof item);
        if (one(item, &out[i]) != 0)
            return usage_error(err, err_len, "error: %s takes %s, comma-separated (got '%s')", flag,
                               accepted, s);
    }
    *n = count;
    return 0;
}

int attn_cli_parse_counts(const char *flag, const char *s, int *out, int max, int *n, char *err,
                          size_t err_len) {
    return parse_list(flag, s, out, max, n, count_item, "positive integers (k = x1024)", err,
                      err_len);
}

int attn_cli_parse_dtypes(const char *flag, const char *s, int *out, int max, int *n, char *err,
                          size_t err_len) {
    return parse_list(flag, s, out, max, n, dtype_item, "f32, f16 or bf16", err, err_len);
}

/* A finite number > 0 that is still finite and non-zero as a float. */
static int parse_positive_real(const opt *o, const char *s, float *out, char *err, size_t err_len) {
    char *end = NULL;
    errno = 0;
    double v = isspace((unsigned char)s[0]) ? NAN : strtod(s, &end);
    float f = (float)v;
    if (s[0] == '\0' || end == NULL || *end != '\0' || errno == ERANGE || !(v > 0.0) ||
        !isfinite(f) || f == 0.0f)
        return usage_error(err, err_len, "error: %s must be a positive finite number (got '%s')",
                           o->long_name, s);
    *out = f;
    return 0;
}

/* An existing folder this process can write into. */
static int parse_dir(const char *flag, const char *v, const char **out, char *err, size_t err_len) {
    struct stat st;
    if (v[0] == '\0')
        return usage_error(err, err_len, "error: %s needs a folder name", flag);
    if (stat(v, &st) != 0 || !S_ISDIR(st.st_mode))
        return usage_error(err, err_len,
                           "error: %s: '%s' is not an existing folder (create it first)", flag, v);
    if (access(v, W_OK | X_OK) != 0)
        return usage_error(err, err_len, "error: %s: cannot write into '%s'", flag, v);
    *out = v;
    return 0;
}

/* ---- applying one option --------------------------------------------------------------------- */

/* Sizes given on the command line; -L and --lq/--lk are merged once all flags are read so that
 * --lq/--lk override -L whatever their order. */
typedef struct lengths {
    int L, Lq, Lk;
    const char *seqlens_q, *seqlens_k; /* the --seqlens / --seqlens-k lists, parsed at the end */
    const char *length_flag;           /* the last of -L/--lq/--lk given, for errors */
} lengths;

static int apply(attn_cli *cli, lengths *len, const opt *o, const char *v, char *err,
                 size_t err_len) {
    /* The switches, and the options that take an integer (>= min) and only store it. */
    bool *const flags[] = {[OPT_HELP] = &cli->help,
                           [OPT_LIST] = &cli->list,
                           [OPT_CAUSAL] = &cli->causal,
                           [OPT_CHECK_ONLY] = &cli->check_only,
                           [OPT_QUIET] = &cli->quiet,
                           [OPT_PROFILE] = &cli->profile,
                           [OPT_ALLOW_SLOW] = &cli->allow_slow};
    const struct {
        int *value;
        int min;
    } ints[] = {[OPT_BATCH] = {&cli->B, 1},       [OPT_HEADS] = {&cli->H, 1},
                [OPT_HEADDIM] = {&cli->D, 1},     [OPT_REPS] = {&cli->reps, 1},
                [OPT_WARMUP] = {&cli->warmup, 0}, [OPT_CHECK_ROWS] = {&cli->check_rows, 0}};
    if (o->id < (int)ATTN_COUNT(flags) && flags[o->id] != NULL) {
        *flags[o->id] = true;
        return 0;
    }
    if (o->id < (int)ATTN_COUNT(ints) && ints[o->id].value != NULL)
        return parse_int(o, v, ints[o->id].min, ints[o->id].value, err, err_len);
    uint64_t seed = 0;
    switch (o->id) {
    case OPT_CHECK_ALL:
        cli->check_rows = 0;
        return 0;
    case OPT_DUMP:
        return parse_dir(o->long_name, v, &cli->dump_dir, err, err_len);
    case OPT_KERNEL:
        if (strcmp(v, "all") == 0) {
            cli->kernel = 0;
            return 0;
        }
        if (parse_int(o, v, 1, &cli->kernel, err, err_len) != 0)
            return usage_error(err, err_len,
                               "error: --kernel must be 'all' or a kernel id >= 1 (got '%s')", v);
        return 0;
    case OPT_SEQLEN:
        len->length_flag = "-L/--seqlen";
        return parse_int(o, v, 1, &len->L, err, err_len);
    case OPT_LQ:
        len->length_flag = "--lq";
        return parse_int(o, v, 1, &len->Lq, err, err_len);
    case OPT_LK:
        len->length_flag = "--lk";
        return parse_int(o, v, 1, &len->Lk, err, err_len);
    case OPT_SEQLENS:
        len->seqlens_q = v;
        return 0;
    case OPT_SEQLENS_K:
        len->seqlens_k = v;
        return 0;
    case OPT_PATTERN: /* parsed by the sparse module (attn/sparse/sparse_example.h) */
        cli->pattern = v;
        return 0;
    case OPT_DTYPE:
        if (attn_dtype_parse(v, &cli->dtype) != 0)
            return usage_error(err, err_len, "error: --dtype must be f32, f16 or bf16 (got '%s')",
                               v);
        cli->dtype_set = true;
        return 0;
    case OPT_SCALE:
        return parse_positive_real(o, v, &cli->scale, err, err_len);
    case OPT_AMPLITUDE:
        return parse_positive_real(o, v, &cli->amplitude, err, err_len);
    case OPT_INPUTS:
        if (strcmp(v, "uniform") == 0 || strcmp(v, "opposed") == 0) {
            cli->inputs = v[0] == 'u' ? ATTN_INPUTS_UNIFORM : ATTN_INPUTS_OPPOSED;
            return 0;
        }
        return usage_error(err, err_len, "error: --inputs must be uniform or opposed (got '%s')",
                           v);
    case OPT_SEED:
        if (parse_unsigned(v, UINT64_MAX, &seed) != 0)
            return usage_error(err, err_len,
                               "error: --seed must be an integer in 0..%llu (got '%s')",
                               (unsigned long long)UINT64_MAX, v);
        cli->seed = seed;
        cli->seed_set = true;
        return 0;
    case OPT_JSON:
    case OPT_CSV:
        if (v[0] == '\0')
            return usage_error(err, err_len, "error: %s needs a file name ('-' = stdout)",
                               o->long_name);
        *(o->id == OPT_JSON ? &cli->json_path : &cli->csv_path) = v;
        return 0;
    default: /* a switch or an integer option: above */
        return 0;
    }
}

/* ---- variable-length batches ----------------------------------------------------------------- */

/* Parses a comma-separated list of lengths (each >= 0, their sum <= INT_MAX) into the prefix sums
 * cu[0..count] (cu[0] = 0), allocated here; *max_len is the largest length. 0 on success. */
static int parse_seqlens(const char *flag, const char *list, int **cu_out, int *count_out,
                         int *max_len, char *err, size_t err_len) {
    if (list[0] == '\0')
        return usage_error(err, err_len, "error: %s needs at least one length (N1,N2,...)", flag);
    int count = 1;
    for (const char *c = list; *c != '\0'; ++c)
        count += *c == ',';
    int *cu = (int *)malloc(((size_t)count + 1) * sizeof *cu);
    if (cu == NULL)
        return usage_error(err, err_len, "error: %s: out of memory for %d lengths", flag, count);
    cu[0] = 0;
    *max_len = 0;
    const char *item = list;
    for (int b = 0; b < count; ++b) {
        const char *comma = strchr(item, ',');
        size_t n = comma ? (size_t)(comma - item) : strlen(item);
        char text[24];
        uint64_t v = 0;
        snprintf(text, sizeof text, "%.*s", (int)(n < sizeof text - 1 ? n : sizeof text - 1), item);
        /* an entry too long for text is malformed unless it is all digits (then too large) */
        int rc = n < sizeof text                   ? parse_unsigned(text, INT_MAX, &v)
                 : strspn(item, "0123456789") >= n ? -2
                                                   : -1;
        if (rc == 0 && (int64_t)cu[b] + (int64_t)v > INT_MAX)
            rc = -3;
        if (rc != 0) {
            free(cu);
            if (rc == -1)
                return usage_error(err, err_len,
                                   "error: %s must be a comma-separated list of non-negative "
                                   "integers (entry %d is '%.*s' in '%s')",
                                   flag, b + 1, (int)n, item, list);
            if (rc == -2)
                return usage_error(err, err_len, "error: %s: entry %d is too large (at most %d)",
                                   flag, b + 1, INT_MAX);
            return usage_error(err, err_len,
                               "error: %s: the lengths add up to more than %d (at entry %d)", flag,
                               INT_MAX, b + 1);
        }
        cu[b + 1] = cu[b] + (int)v;
        *max_len = (int)v > *max_len ? (int)v : *max_len;
        item = comma ? comma + 1 : item + n;
    }
    if (*max_len == 0) {
        free(cu);
        return usage_error(err, err_len, "error: %s: every sequence is empty (got '%s')", flag,
                           list);
    }
    *cu_out = cu;
    *count_out = count;
    return 0;
}

/* Turns --seqlens / --seqlens-k into the batch: B = count, Lq/Lk = the longest sequence. -L,
 * --lq and --lk contradict the lists (they would set the lengths twice) and are refused, as is a
 * -B other than the count. 0 on success. */
static int apply_seqlens(attn_cli *cli, const lengths *len, char *err, size_t err_len) {
    int count_q = 0, count_k = 0;
    if (len->seqlens_q == NULL)
        return len->seqlens_k == NULL ? 0
                                      : usage_error(err, err_len,
                                                    "error: --seqlens-k needs --seqlens (the query "
                                                    "lengths)");
    if (len->length_flag != NULL)
        return usage_error(err, err_len,
                           "error: %s cannot be combined with --seqlens (the lengths come from "
                           "the list)",
                           len->length_flag);
    if (parse_seqlens("--seqlens", len->seqlens_q, &cli->cu_seqlens_q, &count_q, &cli->Lq, err,
                      err_len) != 0)
        return ATTN_EXIT_USAGE;
    const char *k_flag = len->seqlens_k ? "--seqlens-k" : "--seqlens";
    if (parse_seqlens(k_flag, len->seqlens_k ? len->seqlens_k : len->seqlens_q, &cli->cu_seqlens_k,
                      &count_k, &cli->Lk, err, err_len) != 0)
        return ATTN_EXIT_USAGE;
    if (count_k != count_q)
        return usage_error(err, err_len,
                           "error: --seqlens-k has %d lengths but --seqlens has %d (one per "
                           "sequence in both)",
                           count_k, count_q);
    if (cli->B != 0 && cli->B != count_q)
        return usage_error(err, err_len,
                           "error: -B/--batch %d contradicts --seqlens, which lists %d sequences",
                           cli->B, count_q);
    cli->B = count_q;
    return 0;
}

void attn_cli_free(attn_cli *cli) {
    free(cli->cu_seqlens_q);
    free(cli->cu_seqlens_k);
    cli->cu_seqlens_q = cli->cu_seqlens_k = NULL;
}

/* ---- parsing --------------------------------------------------------------------------------- */

static const opt *find_option(const char *name, size_t name_len) {
    for (size_t n = 0; n < NUM_OPTIONS; ++n) {
        const opt *o = &options[n];
        if ((strlen(o->long_name) == name_len && strncmp(o->long_name, name, name_len) == 0) ||
            (o->short_name != NULL && strlen(o->short_name) == name_len &&
             strncmp(o->short_name, name, name_len) == 0))
            return o;
    }
    return NULL;
}

static void set_defaults(attn_cli *cli) {
    memset(cli, 0, sizeof *cli);
    cli->dtype = ATTN_F32;
    cli->amplitude = 1.0f;
    cli->seed = 1234;
    cli->reps = -1;
    cli->warmup = -1;
    cli->check_rows = -1;
}

/* ---- an example's own flags ------------------------------------------------------------------ */

static const attn_option *find_extra(const attn_option *extra, int n_extra, const char *name,
                                     size_t name_len) {
    for (int n = 0; n < n_extra; ++n)
        if (strlen(extra[n].name) == name_len && strncmp(extra[n].name, name, name_len) == 0)
            return &extra[n];
    return NULL;
}

/* An int in [min, max]; a leading '-' where min < 0. */
static int parse_ranged_int(const char *flag, const char *s, int min, int max, int *out, char *err,
                            size_t err_len) {
    bool neg = s[0] == '-' && min < 0;
    uint64_t v = 0;
    int rc = parse_unsigned(neg ? s + 1 : s, neg ? (uint64_t)INT_MAX + 1 : (uint64_t)INT_MAX, &v);
    long long x = neg ? -(long long)v : (long long)v;
    if (rc != 0 || x < min || x > max)
        return usage_error(err, err_len, "error: %s must be an integer in [%d, %d] (got '%s')",
                           flag, min, max, s);
    *out = (int)x;
    return 0;
}

static int apply_extra(const attn_option *o, const char *v, void *values, char *err,
                       size_t err_len) {
    void *field = (char *)values + o->offset;
    switch (o->type) {
    case ATTN_OPTION_SWITCH:
        *(int *)field = 1;
        return 0;
    case ATTN_OPTION_INT:
        return parse_ranged_int(o->name, v, o->min, o->max, (int *)field, err, err_len);
    case ATTN_OPTION_CHOICE: { /* choices are '|'-separated */
        int n = 0;
        for (const char *c = o->choices; c != NULL; ++n) {
            const char *bar = strchr(c, '|');
            size_t len = bar ? (size_t)(bar - c) : strlen(c);
            if (strlen(v) == len && strncmp(c, v, len) == 0) {
                *(int *)field = n;
                return 0;
            }
            c = bar ? bar + 1 : NULL;
        }
        return usage_error(err, err_len, "error: %s must be one of %s (got '%s')", o->name,
                           o->choices, v);
    }
    case ATTN_OPTION_TEXT:
        if (v[0] == '\0')
            return usage_error(err, err_len, "error: %s needs a value (%s)", o->name, o->value);
        *(const char **)field = v;
        return 0;
    case ATTN_OPTION_DIR:
        return parse_dir(o->name, v, (const char **)field, err, err_len);
    case ATTN_OPTION_FACTOR: {
        double x = 0.0;
        if (attn_cli_parse_real(o->name, v, &x, err, err_len) != 0 || !(x > 0.0) || !(x <= 1e4))
            return usage_error(err, err_len, "error: %s takes a factor in (0, 1e4] (got '%s')",
                               o->name, v);
        *(double *)field = x;
        return 0;
    }
    }
    return 0;
}

/* The defaults of the example's flags (def, or def_gpu on a GPU build). */
static int extra_defaults(const attn_option *extra, int n_extra, void *values, char *err,
                          size_t err_len) {
    for (int n = 0; n < n_extra; ++n) {
        const attn_option *o = &extra[n];
        const char *d = !attn_on_simulator() && o->def_gpu ? o->def_gpu : o->def;
        if (d != NULL && o->type != ATTN_OPTION_SWITCH && apply_extra(o, d, values, err, err_len))
            return ATTN_EXIT_USAGE; /* a wrong default: the registry's bug, caught by its tests */
    }
    return 0;
}

/* ---- parsing --------------------------------------------------------------------------------- */

int attn_cli_parse_options(attn_cli *cli, int argc, char **argv, const attn_option *extra,
                           int n_extra, void *values, char *err, size_t err_len) {
    lengths len = {0, 0, 0, NULL, NULL, NULL};
    set_defaults(cli);
    if (extra_defaults(extra, n_extra, values, err, err_len) != 0)
        return ATTN_EXIT_USAGE;
    for (int a = 1; a < argc; ++a) {
        const char *arg = argv[a];
        if (arg[0] != '-' || arg[1] == '\0')
            return usage_error(err, err_len, "error: unexpected argument '%s' (see --help)", arg);
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        const opt *o = find_option(arg, name_len);
        const attn_option *x = o ? NULL : find_extra(extra, n_extra, arg, name_len);
        if (o == NULL && x == NULL)
            return usage_error(err, err_len, "error: unknown option '%.*s' (see --help)",
                               (int)name_len, arg);
        const char *takes = o ? o->value : x->value;
        const char *value = eq ? eq + 1 : NULL;
        if (takes == NULL && value != NULL)
            return usage_error(err, err_len, "error: option %.*s takes no value (got '%s')",
                               (int)name_len, arg, arg);
        if (takes != NULL && value == NULL) {
            if (a + 1 >= argc)
                return usage_error(err, err_len, "error: option %.*s needs a value (%s)",
                                   (int)name_len, arg, takes);
            value = argv[++a];
        }
        if ((o ? apply(cli, &len, o, value, err, err_len)
               : apply_extra(x, value, values, err, err_len)) != 0)
            return ATTN_EXIT_USAGE;
    }
    cli->Lq = len.Lq ? len.Lq : len.L;
    cli->Lk = len.Lk ? len.Lk : len.L;
    if (apply_seqlens(cli, &len, err, err_len) != 0) {
        attn_cli_free(cli);
        return ATTN_EXIT_USAGE;
    }
    return 0;
}

int attn_cli_parse(attn_cli *cli, int argc, char **argv, char *err, size_t err_len) {
    return attn_cli_parse_options(cli, argc, argv, NULL, 0, NULL, err, err_len);
}

/* ---- what a run may cost --------------------------------------------------------------------- */

int attn_cli_sim_budget_check(const attn_cli *cli, double flops, char *why, size_t len) {
    if (!attn_on_simulator() || cli->allow_slow || flops <= ATTN_SIM_BUDGET_FLOPS)
        return 0;
    snprintf(why, len,
             "this problem computes %.3g GFLOP of attention: on the CPU simulator that is more "
             "than its budget of %.0f GFLOP (about 10 minutes); make it smaller, or add "
             "--allow-slow to run it anyway",
             flops * 1e-9, ATTN_SIM_BUDGET_FLOPS * 1e-9);
    return ATTN_EXIT_USAGE;
}

int attn_cli_memory_check(double bytes, char *why, size_t len) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : INFINITY;
    if (bytes <= have)
        return 0;
    snprintf(why, len,
             "this problem needs %.3g GiB of host memory for its inputs, reference and results; "
             "this machine has %.3g GiB",
             bytes / 1073741824.0, have / 1073741824.0);
    return ATTN_EXIT_USAGE;
}

int attn_cli_rows_to_check(const attn_cli *cli, const attn_problem *p) {
    int rows = cli->check_rows;
    if (rows < 0) /* QK^T and PV: D multiply-adds each per entry */
        rows = 2.0 * attn_problem_entries(p) * p->D <= CHECK_ALL_MAX_MADDS ? 0 : CHECK_ROWS_SAMPLE;
    return rows < attn_problem_row_count(p) ? rows : 0;
}

/* ---- usage ----------------------------------------------------------------------------------- */

static void usage_line(FILE *f, const char *short_name, const char *long_name, const char *value,
                       const char *help) {
    char spelled[48];
    snprintf(spelled, sizeof spelled, "%s%s%s%s%s", short_name ? short_name : "",
             short_name ? ", " : "", long_name, value ? " " : "", value ? value : "");
    fprintf(f, "  %-26s %s\n", spelled, help);
}

void attn_cli_usage(FILE *f, const char *prog, const attn_example *ex) {
    fprintf(f, "usage: %s [options]\n%s: %s\n\noptions:\n", prog, ex->name, ex->summary);
    for (size_t n = 0; n < NUM_OPTIONS; ++n)
        usage_line(f, options[n].short_name, options[n].long_name, options[n].value,
                   options[n].help);
    const attn_module *m = ex->module;
    if (m != NULL && m->num_options > 0) {
        fprintf(f, "\n%s options:\n", ex->name);
        for (int n = 0; n < m->num_options; ++n) {
            const attn_option *o = &m->options[n];
            char help[320];
            if (o->def != NULL && o->def_gpu != NULL && strcmp(o->def, o->def_gpu) != 0)
                snprintf(help, sizeof help, "%s (default: simulator %s, GPU %s)", o->help, o->def,
                         o->def_gpu);
            else if (o->def != NULL)
                snprintf(help, sizeof help, "%s (default %s)", o->help, o->def);
            else
                snprintf(help, sizeof help, "%s", o->help);
            usage_line(f, NULL, o->name, o->value, help);
        }
    }
    if (m != NULL && m->usage != NULL)
        m->usage(ex, f);
    fprintf(f,
            "\ndefault problem: B=%d H=%d L=%d D=%d on a GPU, B=%d H=%d L=%d D=%d on the "
            "simulator\n",
            ex->defaults.gpu[0], ex->defaults.gpu[1], ex->defaults.gpu[2], ex->defaults.gpu[3],
            ex->defaults.sim[0], ex->defaults.sim[1], ex->defaults.sim[2], ex->defaults.sim[3]);
    fprintf(f, "\nkernels (--kernel N; --list for their limits):\n");
    for (int n = 0; n < ex->num_kernels; ++n)
        fprintf(f, "  %2d  %-20s %s%s%s\n", ex->kernels[n].id, ex->kernels[n].name,
                m && m->stages ? m->stages[ex->kernels[n].stage].name : "",
                m && m->stages ? ": " : "", ex->kernels[n].description);
    fprintf(f, "\nexit status: 0 every selected kernel passed, 1 a failure or runtime error, "
               "2 usage error, 77 no GPU (gpu build)\n");
}
