/* attn/report.h — results: a human table, and one machine-readable line per run (JSON Lines or
 * CSV with a header) so that tables and plots are generated from files, never parsed from prose.
 */
#ifndef ATTN_REPORT_H
#define ATTN_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "attn/bench.h"
#include "attn/check.h"
#include "attn/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_run_record {
    const char *example; /* e.g. "01_attention_basics" */
    const char *kernel;  /* kernel name */
    int kernel_id;
    const char *backend; /* "gpu" or "sim" */
    const char *device;  /* device name */
    attn_problem problem;
    const char *status; /* "PASS", "FAIL", "SKIP", "ERROR" */
    const char *note;   /* why SKIP/ERROR, or "" */
    double max_abs_err;
    bool timed;
    attn_stats time; /* valid when timed */
    double tflops;   /* from attn_problem_flops and the median time */
    double gbps;     /* from attn_problem_min_bytes and the median time */
    double workspace_bytes;
    /* More JSON members, written after the documented keys (e.g. the benchmark's provenance:
     * "\"commit\":\"abc\",\"date\":\"...\""); NULL or "" for none. JSON output only. */
    const char *extra_json;
} attn_run_record;

/* Human table: a header once, then one row per record. */
void attn_report_header(FILE *f);
void attn_report_row(FILE *f, const attn_run_record *r);

/* One JSON object on one line (keys documented in report.c). */
void attn_report_json(FILE *f, const attn_run_record *r);
/* CSV: header (call when the file is new) and one row. */
void attn_report_csv_header(FILE *f);
void attn_report_csv(FILE *f, const attn_run_record *r);

/* Appends r to path ("-" = stdout) as JSON or CSV (writing the CSV header if the file is empty
 * or new). Returns 0, or 1 with a message on stderr if the file cannot be written. */
int attn_report_append(const char *path, bool csv, const attn_run_record *r);

/* ---- a standalone check program's output (example 10's flash3_fp8) ------------------------- */

/* One check's line: "<name> <check> PASS|FAIL  <detail>" (name and check padded to 11 and 10
 * columns), the detail formatted as printf's. */
void attn_check_line(const char *name, const char *check, bool pass, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Appends one line formatted as printf's (a JSON object, say: the caller writes its braces and
 * the newline) to path ("-" = stdout). 0, or 1 with "error: cannot open <path>" on stderr. */
int attn_json_append(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif /* ATTN_REPORT_H */
