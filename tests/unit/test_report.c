/* test_report.c — the JSON line parses (a small strict parser below) with the documented keys in
 * order, strings are escaped, untimed values are null; CSV header and rows have the same number
 * of fields; files get the CSV header once; the human table shows the row. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attn/report.h"
#include "unit_test.h"

/* ---- a strict parser for one flat JSON object of scalars and arrays -------------------------- */

typedef struct json_reader {
    const char *s;
    char keys[32][32]; /* keys in order of appearance */
    int num_keys;
} json_reader;

static void skip_space(json_reader *j) {
    while (*j->s == ' ')
        j->s++;
}

/* A string literal; copies it (escapes resolved, \u00XX only) into out when out is not NULL. */
static bool json_parse_string(json_reader *j, char *out, size_t len) {
    size_t n = 0;
    if (*j->s++ != '"')
        return false;
    while (*j->s != '"') {
        char c = *j->s++;
        if ((unsigned char)c < 0x20 || c == '\0')
            return false; /* raw control characters are not allowed in JSON strings */
        if (c == '\\') {
            char e = *j->s++;
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e == 'u') {
                for (int k = 0; k < 4; ++k)
                    if (!isxdigit((unsigned char)*j->s++))
                        return false;
                c = '?';
            } else if (simple == NULL || e == '\0') {
                return false;
            } else {
                c = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            }
        }
        if (out != NULL && n + 1 < len)
            out[n++] = c;
    }
    j->s++;
    if (out != NULL)
        out[n] = '\0';
    return true;
}

static bool json_parse_value(json_reader *j) {
    if (*j->s == '"')
        return json_parse_string(j, NULL, 0);
    if (*j->s == '[') { /* an array of values, possibly empty */
        j->s++;
        skip_space(j);
        for (bool first = true; *j->s != ']'; first = false) {
            if (!first && *j->s++ != ',')
                return false;
            skip_space(j);
            if (!json_parse_value(j))
                return false;
            skip_space(j);
        }
        j->s++;
        return true;
    }
    static const char *const words[3] = {"true", "false", "null"};
    for (int w = 0; w < 3; ++w)
        if (strncmp(j->s, words[w], strlen(words[w])) == 0) {
            j->s += strlen(words[w]);
            return true;
        }
    char *end = NULL;
    if (*j->s != '-' && !isdigit((unsigned char)*j->s))
        return false;
    strtod(j->s, &end);
    if (end == j->s)
        return false;
    j->s = end;
    return true;
}

/* Parses {"k":v,...}\n exactly; records the keys. */
static bool json_parse_line(json_reader *j, const char *line) {
    j->s = line;
    j->num_keys = 0;
    if (*j->s++ != '{')
        return false;
    for (;;) {
        skip_space(j);
        if (j->num_keys == 32 || !json_parse_string(j, j->keys[j->num_keys++], 32))
            return false;
        skip_space(j);
        if (*j->s++ != ':')
            return false;
        skip_space(j);
        if (!json_parse_value(j))
            return false;
        skip_space(j);
        if (*j->s == ',') {
            j->s++;
            continue;
        }
        return strcmp(j->s, "}\n") == 0;
    }
}

/* ---- fixtures -------------------------------------------------------------------------------- */

static attn_run_record sample_record(bool timed) {
    attn_run_record r;
    memset(&r, 0, sizeof r);
    r.example = "01_attention_basics";
    r.kernel = "naive";
    r.kernel_id = 1;
    r.backend = "sim";
    r.device = "cudasim \"virtual\" device\\x\r\x01";
    attn_problem_init(&r.problem, 2, 4, 1024, 512, 64);
    r.problem.dtype = ATTN_BF16;
    r.problem.causal = true;
    r.status = timed ? "PASS" : "SKIP";
    r.note = timed ? "" : "needs a GPU,\n\tsee --list";
    r.max_abs_err = timed ? 1.5e-7 : NAN;
    r.timed = timed;
    r.time.reps = 20;
    r.time.median_ms = 1.25;
    r.time.min_ms = 1.0;
    r.time.max_ms = 2.5;
    r.tflops = 12.5;
    r.gbps = 800.0;
    r.workspace_bytes = 4194304.0;
    return r;
}

static const char *const documented_keys[] = {"example",     "kernel",
                                              "kernel_id",   "backend",
                                              "device",      "B",
                                              "H",           "Lq",
                                              "Lk",          "D",
                                              "dtype",       "causal",
                                              "status",      "note",
                                              "max_abs_err", "median_ms",
                                              "min_ms",      "max_ms",
                                              "reps",        "tflops",
                                              "gbps",        "workspace_bytes"};
#define NUM_KEYS ((int)(sizeof documented_keys / sizeof documented_keys[0]))
/* Keys of the JSON line only (the CSV has none of them), written after "causal". */
static const char *const json_only_keys[] = {"varlen", "seqlens", "seqlens_k"};
#define NUM_JSON_ONLY ((int)(sizeof json_only_keys / sizeof json_only_keys[0]))

/* The JSON keys in order: the documented ones with json_only_keys after "causal". */
static int json_keys(const char *keys[NUM_KEYS + NUM_JSON_ONLY]) {
    int n = 0;
    for (int k = 0; k < NUM_KEYS; ++k) {
        keys[n++] = documented_keys[k];
        for (int e = 0; e < NUM_JSON_ONLY && strcmp(documented_keys[k], "causal") == 0; ++e)
            keys[n++] = json_only_keys[e];
    }
    return n;
}

/* ---- tests ----------------------------------------------------------------------------------- */

/* r's JSON line (csv: its CSV row) in text. */
static void record_text(const attn_run_record *r, bool csv, char *text, size_t len) {
    FILE *tmp = tmpfile();
    (csv ? attn_report_csv : attn_report_json)(tmp, r);
    unit_read_back(tmp, text, len);
}

/* A header and the rows of a timed and a skipped sample record, as header() and row() write
 * them (the CSV file, the console table), in text. */
static void two_rows(void (*header)(FILE *), void (*row)(FILE *, const attn_run_record *),
                     char *text, size_t len) {
    FILE *tmp = tmpfile();
    attn_run_record timed = sample_record(true), skipped = sample_record(false);
    header(tmp);
    row(tmp, &timed);
    row(tmp, &skipped);
    unit_read_back(tmp, text, len);
}

static void test_json(void) {
    char text[4096];
    const char *keys[NUM_KEYS + NUM_JSON_ONLY];
    const int num_keys = json_keys(keys);
    for (int timed = 0; timed < 2; ++timed) {
        attn_run_record r = sample_record(timed);
        record_text(&r, false, text, sizeof text);
        json_reader j;
        CHECK(json_parse_line(&j, text));
        CHECK_EQ(j.num_keys, num_keys);
        int misplaced = 0;
        for (int k = 0; k < num_keys && k < j.num_keys; ++k)
            misplaced += strcmp(j.keys[k], keys[k]) != 0;
        CHECK_EQ(misplaced, 0);
        CHECK_CONTAINS(text, "\"device\":\"cudasim \\\"virtual\\\" device\\\\x\\r\\u0001\"");
        CHECK_CONTAINS(text, "\"B\":2,\"H\":4,\"Lq\":1024,\"Lk\":512,\"D\":64,\"dtype\":\"bf16\"");
        CHECK_CONTAINS(text,
                       "\"causal\":true,\"varlen\":false,\"seqlens\":null,\"seqlens_k\":null,");
        CHECK_CONTAINS(text, "\"workspace_bytes\":4194304}");
        if (timed) {
            CHECK_CONTAINS(text, "\"status\":\"PASS\",\"note\":\"\",\"max_abs_err\":1.5e-07");
            CHECK_CONTAINS(text, "\"median_ms\":1.25,\"min_ms\":1,\"max_ms\":2.5,\"reps\":20");
            CHECK_CONTAINS(text, "\"tflops\":12.5,\"gbps\":800");
        } else {
            CHECK_CONTAINS(text, "\"note\":\"needs a GPU,\\n\\tsee --list\"");
            CHECK_CONTAINS(text, "\"max_abs_err\":null,\"median_ms\":null,\"min_ms\":null");
            CHECK_CONTAINS(text, "\"reps\":0,\"tflops\":null,\"gbps\":null");
        }
    }
    json_reader j; /* the parser itself rejects broken lines */
    CHECK(!json_parse_line(&j, "{\"a\":nan}\n"));
    CHECK(!json_parse_line(&j, "{\"a\":\"x\ny\"}\n"));
    CHECK(!json_parse_line(&j, "{\"a\":1,}\n"));
}

/* Fields of one CSV line, quotes respected. */
static int csv_fields(const char *line) {
    int fields = 1;
    bool quoted = false;
    for (const char *c = line; *c != '\0'; ++c) {
        if (*c == '"')
            quoted = !quoted;
        else if (*c == ',' && !quoted)
            fields++;
        else if (*c == '\n' && !quoted)
            break;
    }
    return fields;
}

static void test_csv(void) {
    char text[4096];
    two_rows(attn_report_csv_header, attn_report_csv, text, sizeof text);
    const char *row1 = strchr(text, '\n') + 1;
    const char *row2 = strchr(row1, '\n') + 1; /* row1's note is empty: no quoted line break */
    CHECK_EQ(csv_fields(text), NUM_KEYS);
    CHECK_EQ(csv_fields(row1), NUM_KEYS);
    CHECK_EQ(csv_fields(row2), NUM_KEYS);
    const char *header = "example,kernel,kernel_id,backend,device,B,H,Lq,Lk,D,dtype,causal,";
    CHECK(strncmp(text, header, strlen(header)) == 0);
    CHECK_CONTAINS(row1,
                   ",\"cudasim \"\"virtual\"\" device\\x\r\x01\",2,4,1024,512,64,bf16,true,PASS,,");
    CHECK_CONTAINS(row1, ",1.25,1,2.5,20,12.5,800,4194304\n");
    CHECK_CONTAINS(text, "SKIP,\"needs a GPU,\n\tsee --list\",,,,,0,,,4194304\n");

    attn_run_record skipped = sample_record(false);
    skipped.note = "D=300, too large"; /* a comma alone is reason enough to quote */
    record_text(&skipped, true, text, sizeof text);
    CHECK_CONTAINS(text, ",SKIP,\"D=300, too large\",");
    CHECK_EQ(csv_fields(text), NUM_KEYS);
}

/* A varlen record says so, with each sequence's lengths (an empty sequence, Lq != Lk); its CSV
 * row keeps the documented fields. */
static void test_json_varlen(void) {
    static const int cu_q[] = {0, 3, 3, 8}, cu_k[] = {0, 4, 5, 5};
    attn_run_record r = sample_record(true);
    attn_problem_init(&r.problem, 3, 2, 5, 4, 64);
    r.problem.cu_seqlens_q = cu_q;
    r.problem.cu_seqlens_k = cu_k;
    char text[4096];
    record_text(&r, false, text, sizeof text);
    json_reader j;
    CHECK(json_parse_line(&j, text));
    CHECK_EQ(j.num_keys, NUM_KEYS + NUM_JSON_ONLY);
    CHECK_CONTAINS(text, "\"causal\":false,\"varlen\":true,\"seqlens\":[3,0,5],"
                         "\"seqlens_k\":[4,1,0],\"status\"");
    record_text(&r, true, text, sizeof text);
    CHECK_EQ(csv_fields(text), NUM_KEYS);
}

static void test_append(void) {
    const char *csv = "attn_unit_report.csv", *json = "attn_unit_report.jsonl";
    remove(csv);
    remove(json);
    attn_run_record r = sample_record(true);
    CHECK_EQ(attn_report_append(csv, true, &r), 0);
    CHECK_EQ(attn_report_append(csv, true, &r), 0);
    CHECK_EQ(attn_report_append(json, false, &r), 0);
    CHECK_EQ(attn_report_append(json, false, &r), 0);
    char text[8192];
    FILE *f = fopen(csv, "r");
    CHECK(f != NULL);
    if (f != NULL) {
        unit_read_back(f, text, sizeof text);
        int lines = 0, headers = 0;
        for (const char *c = text; (c = strchr(c, '\n')) != NULL; ++c)
            lines++;
        for (const char *c = text; (c = strstr(c, "example,kernel")) != NULL; ++c)
            headers++;
        CHECK(lines == 3 && headers == 1);
    }
    f = fopen(json, "r");
    CHECK(f != NULL);
    if (f != NULL) {
        char line[2048];
        int lines = 0, parsed = 0;
        json_reader j;
        while (fgets(line, sizeof line, f) != NULL) {
            lines++;
            parsed += json_parse_line(&j, line);
        }
        fclose(f);
        CHECK(lines == 2 && parsed == 2);
    }
    remove(csv);
    remove(json);
    CHECK(attn_report_append("/nonexistent-dir/r.csv", true, &r) != 0);
}

static void test_table(void) {
    char text[4096];
    two_rows(attn_report_header, attn_report_row, text, sizeof text);
    const char *row1 = strchr(text, '\n') + 1;
    const char *row2 = strchr(row1, '\n') + 1;
    CHECK_CONTAINS(text, "kernel");
    CHECK_CONTAINS(text, "median ms");
    CHECK_CONTAINS(text, "TFLOP/s");
    CHECK_CONTAINS(row1, "  1 naive");
    CHECK_CONTAINS(row1, " 1024    512   64 bf16  yes    PASS     1.5e-07     1.2500     1.0000");
    CHECK_CONTAINS(row1, "12.500    800.0\n");
    CHECK_CONTAINS(row2, "SKIP           -          -          -          -        -        -");
    CHECK_CONTAINS(row2, "needs a GPU");
    /* columns line up: the header and the timed row have the same length */
    CHECK_EQ(strchr(text, '\n') - text, strchr(row1, '\n') - row1);
}

/* A standalone program's JSON line (attn_json_append): appended, formatted; a path that cannot be
 * opened is 1. */
static void test_json_append(void) {
    const char *path = "attn_unit_json_append.jsonl";
    remove(path);
    CHECK_EQ(attn_json_append(path, "{\"a\": %d}\n", 1), 0);
    CHECK_EQ(attn_json_append(path, "{\"b\": \"%s\"}\n", "x"), 0);
    char text[256] = "";
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f != NULL)
        unit_read_back(f, text, sizeof text); /* closes f */
    CHECK(strcmp(text, "{\"a\": 1}\n{\"b\": \"x\"}\n") == 0);
    remove(path);
    CHECK_EQ(attn_json_append("no/such/folder/x.jsonl", "{}\n"), 1);
}

int main(void) {
    test_json_append();
    test_json();
    test_json_varlen();
    test_csv();
    test_append();
    test_table();
    return unit_finish();
}
