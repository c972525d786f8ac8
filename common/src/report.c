/* report.c — the human table and the machine-readable lines of each run.
 *
 * JSON Lines: one object per line, keys always present and in this order:
 *   example      string  example name, e.g. "01_attention_basics"
 *   kernel       string  kernel name;  kernel_id  int  its --kernel id
 *   backend      string  "gpu" or "sim";  device  string  device name
 *   B, H, Lq, Lk, D      int  problem shape (Lq/Lk: maxima for a variable-length batch)
 *   dtype        string  "f32", "f16" or "bf16";  causal  bool
 *   varlen       bool    a packed variable-length batch (cu_seqlens, --seqlens)
 *   seqlens, seqlens_k   [int]  varlen: the query and key length of each sequence, in batch
 *                        order (B entries); null for the dense layout
 *   status       string  "PASS", "FAIL", "SKIP" or "ERROR";  note  string  why SKIP/ERROR, or ""
 *   max_abs_err  number  largest |out - ref| (null when not checked, NaN in the record, or when
 *                        an output was not finite, infinity in the record)
 *   median_ms, min_ms, max_ms  number  kernel time (null when untimed)
 *   reps         int     timed repetitions (0 when untimed)
 *   tflops, gbps number  from the FLOP and byte models at the median time (null when untimed)
 *   workspace_bytes      number  scratch the kernel was given
 *   followed by the record's extra_json members, if any (the benchmark's, benchmarks/README.md)
 * CSV: the same keys as the header row except varlen, seqlens and seqlens_k (JSON only), the same
 * values; null is an empty field, strings are quoted (RFC 4180) when they contain a comma, a
 * quote or a line break. */
#include "attn/report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- human table ----------------------------------------------------------------------------- */

void attn_report_header(FILE *f) {
    fprintf(f, "%3s %-18s %4s %4s %6s %6s %4s %-5s %-6s %-6s %9s %10s %10s %10s %8s %8s\n", "id",
            "kernel", "B", "H", "Lq", "Lk", "D", "dtype", "causal", "status", "max err",
            "median ms", "min ms", "max ms", "TFLOP/s", "GB/s");
}

/* A right-aligned number in a column of `width`: "-" when there is none (untimed, unchecked:
 * NaN), "inf" for an infinite one (an error where the output was not finite). */
static void cell(FILE *f, int width, const char *fmt, double x, bool present) {
    char buf[32] = "-";
    if (present && isinf(x))
        snprintf(buf, sizeof buf, "inf");
    else if (present && !isnan(x))
        snprintf(buf, sizeof buf, fmt, x);
    fprintf(f, " %*s", width, buf);
}

void attn_report_row(FILE *f, const attn_run_record *r) {
    const attn_problem *p = &r->problem;
    fprintf(f, "%3d %-18s %4d %4d %6d %6d %4d %-5s %-6s %-6s", r->kernel_id, r->kernel, p->B, p->H,
            p->Lq, p->Lk, p->D, attn_dtype_name(p->dtype), p->causal ? "yes" : "no", r->status);
    cell(f, 9, "%.1e", r->max_abs_err, true);
    cell(f, 10, "%.4f", r->time.median_ms, r->timed);
    cell(f, 10, "%.4f", r->time.min_ms, r->timed);
    cell(f, 10, "%.4f", r->time.max_ms, r->timed);
    cell(f, 8, "%.3f", r->tflops, r->timed);
    cell(f, 8, "%.1f", r->gbps, r->timed);
    if (r->note != NULL && r->note[0] != '\0')
        fprintf(f, "  %s", r->note);
    fputc('\n', f);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

/* A JSON string literal: quotes, backslashes and control characters escaped (RFC 8259). */
static void json_string(FILE *f, const char *s) {
    /* a character of plain is written as a backslash and its counterpart in escaped */
    static const char plain[] = "\"\\\n\r\t", escaped[] = "\"\\nrt";
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c != '\0'; ++c) {
        const char *at = strchr(plain, *c);
        if (at != NULL)
            fprintf(f, "\\%c", escaped[at - plain]);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

/* JSON has no NaN or infinity: such values (and absent ones) are null. */
static void json_number(FILE *f, double x, bool present) {
    if (present && isfinite(x))
        fprintf(f, "%.6g", x);
    else
        fputs("null", f);
}

/* The B lengths of a cu_seqlens array as a JSON array; null when there is none (dense). */
static void json_lengths(FILE *f, const int *cu, int B) {
    if (cu == NULL) {
        fputs("null", f);
        return;
    }
    fputc('[', f);
    for (int b = 0; b < B; ++b)
        fprintf(f, "%s%d", b > 0 ? "," : "", cu[b + 1] - cu[b]);
    fputc(']', f);
}

/* ---- CSV ------------------------------------------------------------------------------------- */

/* A CSV field: quoted, with quotes doubled, when it contains a separator, quote or line break. */
static void csv_string(FILE *f, const char *s) {
    s = s ? s : "";
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s != '\0'; ++s) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* ---- one record, three forms ----------------------------------------------------------------- */

/* Writes a record's fields in one of the forms: a JSON object, a CSV row, or the CSV header row
 * (the keys). The fields are listed once, in write_record. */
typedef enum { FORM_JSON, FORM_CSV, FORM_CSV_HEADER } form;
typedef struct writer {
    FILE *f;
    form form;
    int fields; /* written so far */
} writer;

/* The separator and the key of the next field; false when only the key is wanted (header). */
static bool field(writer *w, const char *key) {
    if (w->form == FORM_JSON)
        fprintf(w->f, "%s\"%s\":", w->fields++ ? "," : "{", key);
    else if (w->fields++)
        fputc(',', w->f);
    if (w->form == FORM_CSV_HEADER)
        fputs(key, w->f);
    return w->form != FORM_CSV_HEADER;
}

static void put_string(writer *w, const char *key, const char *s) {
    if (field(w, key))
        (w->form == FORM_JSON ? json_string : csv_string)(w->f, s);
}

static void put_int(writer *w, const char *key, double x) { /* exact up to 2^53 */
    if (field(w, key))
        fprintf(w->f, "%.0f", x);
}

static void put_bool(writer *w, const char *key, bool b) {
    if (field(w, key))
        fputs(b ? "true" : "false", w->f);
}

/* An absent or non-finite value: null in JSON, an empty CSV field. */
static void put_number(writer *w, const char *key, double x, bool present) {
    if (!field(w, key))
        return;
    if (w->form == FORM_JSON)
        json_number(w->f, x, present);
    else if (present && isfinite(x))
        fprintf(w->f, "%.6g", x);
}

/* r's fields (the keys at the top of this file); r is NULL for the header. */
static void write_record(writer *w, const attn_run_record *r) {
    static const attn_run_record none;
    const attn_run_record *v = r ? r : &none;
    const attn_problem *p = &v->problem;
    put_string(w, "example", v->example);
    put_string(w, "kernel", v->kernel);
    put_int(w, "kernel_id", v->kernel_id);
    put_string(w, "backend", v->backend);
    put_string(w, "device", v->device);
    const char *dims[] = {"B", "H", "Lq", "Lk", "D"};
    const int dim[] = {p->B, p->H, p->Lq, p->Lk, p->D};
    for (int d = 0; d < 5; ++d)
        put_int(w, dims[d], dim[d]);
    put_string(w, "dtype", attn_dtype_name(p->dtype));
    put_bool(w, "causal", p->causal);
    if (w->form == FORM_JSON) { /* the variable-length batch: JSON only */
        put_bool(w, "varlen", attn_problem_is_varlen(p));
        field(w, "seqlens");
        json_lengths(w->f, p->cu_seqlens_q, p->B);
        field(w, "seqlens_k");
        json_lengths(w->f, p->cu_seqlens_k, p->B);
    }
    put_string(w, "status", v->status);
    put_string(w, "note", v->note);
    put_number(w, "max_abs_err", v->max_abs_err, true);
    put_number(w, "median_ms", v->time.median_ms, v->timed);
    put_number(w, "min_ms", v->time.min_ms, v->timed);
    put_number(w, "max_ms", v->time.max_ms, v->timed);
    put_int(w, "reps", v->timed ? v->time.reps : 0);
    put_number(w, "tflops", v->tflops, v->timed);
    put_number(w, "gbps", v->gbps, v->timed);
    put_int(w, "workspace_bytes", v->workspace_bytes);
    if (w->form == FORM_JSON && v->extra_json != NULL && v->extra_json[0] != '\0')
        fprintf(w->f, ",%s", v->extra_json);
    fputs(w->form == FORM_JSON ? "}\n" : "\n", w->f);
}

void attn_report_json(FILE *f, const attn_run_record *r) {
    write_record(&(writer){f, FORM_JSON, 0}, r);
}

void attn_report_csv_header(FILE *f) { write_record(&(writer){f, FORM_CSV_HEADER, 0}, NULL); }

void attn_report_csv(FILE *f, const attn_run_record *r) {
    write_record(&(writer){f, FORM_CSV, 0}, r);
}

/* ---- files ----------------------------------------------------------------------------------- */

int attn_report_append(const char *path, bool csv, const attn_run_record *r) {
    /* On stdout there is no "empty file" to look at: the CSV header goes out once per process. */
    static bool stdout_header_done;
    if (strcmp(path, "-") == 0) {
        if (csv && !stdout_header_done)
            attn_report_csv_header(stdout);
        stdout_header_done = stdout_header_done || csv;
        (csv ? attn_report_csv : attn_report_json)(stdout, r);
        return fflush(stdout) != 0;
    }
    FILE *f = fopen(path, "a");
    if (f == NULL) {
        fprintf(stderr, "error: cannot open '%s' for appending results: %s\n", path,
                strerror(errno));
        return 1;
    }
    if (csv && fseek(f, 0, SEEK_END) == 0 && ftell(f) == 0)
        attn_report_csv_header(f);
    (csv ? attn_report_csv : attn_report_json)(f, r);
    int failed = ferror(f);
    if (fclose(f) != 0 || failed) {
        fprintf(stderr, "error: cannot write results to '%s'\n", path);
        return 1;
    }
    return 0;
}

void attn_check_line(const char *name, const char *check, bool pass, const char *fmt, ...) {
    va_list ap;
    printf("%-11s %-10s %s  ", name, check, pass ? "PASS" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

int attn_json_append(const char *path, const char *fmt, ...) {
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "a");
    if (f == NULL) {
        fprintf(stderr, "error: cannot open %s\n", path);
        return 1;
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (f != stdout)
        fclose(f);
    return 0;
}
