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

void attn_report_json(FILE *f, const attn_run_record *r) {
    const attn_problem *p = &r->problem;
    fputs("{\"example\":", f);
    json_string(f, r->example);
    fputs(",\"kernel\":", f);
    json_string(f, r->kernel);
    fprintf(f, ",\"kernel_id\":%d,\"backend\":", r->kernel_id);
    json_string(f, r->backend);
    fputs(",\"device\":", f);
    json_string(f, r->device);
    fprintf(f, ",\"B\":%d,\"H\":%d,\"Lq\":%d,\"Lk\":%d,\"D\":%d,\"dtype\":\"%s\",\"causal\":%s",
            p->B, p->H, p->Lq, p->Lk, p->D, attn_dtype_name(p->dtype),
            p->causal ? "true" : "false");
    fprintf(f, ",\"varlen\":%s,\"seqlens\":", attn_problem_is_varlen(p) ? "true" : "false");
    json_lengths(f, p->cu_seqlens_q, p->B);
    fputs(",\"seqlens_k\":", f);
    json_lengths(f, p->cu_seqlens_k, p->B);
    fputs(",\"status\":", f);
    json_string(f, r->status);
    fputs(",\"note\":", f);
    json_string(f, r->note);
    fputs(",\"max_abs_err\":", f);
    json_number(f, r->max_abs_err, true);
    fputs(",\"median_ms\":", f);
    json_number(f, r->time.median_ms, r->timed);
    fputs(",\"min_ms\":", f);
    json_number(f, r->time.min_ms, r->timed);
    fputs(",\"max_ms\":", f);
    json_number(f, r->time.max_ms, r->timed);
    fprintf(f, ",\"reps\":%d,\"tflops\":", r->timed ? r->time.reps : 0);
    json_number(f, r->tflops, r->timed);
    fputs(",\"gbps\":", f);
    json_number(f, r->gbps, r->timed);
    fprintf(f, ",\"workspace_bytes\":%.0f", r->workspace_bytes);
    if (r->extra_json != NULL && r->extra_json[0] != '\0')
        fprintf(f, ",%s", r->extra_json);
    fputs("}\n", f);
}

/* ---- CSV ------------------------------------------------------------------------------------- */

void attn_report_csv_header(FILE *f) {
    fputs("example,kernel,kernel_id,backend,device,B,H,Lq,Lk,D,dtype,causal,status,note,"
          "max_abs_err,median_ms,min_ms,max_ms,reps,tflops,gbps,workspace_bytes\n",
          f);
}

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

/* A CSV number; absent or non-finite values are empty fields. */
static void csv_number(FILE *f, double x, bool present) {
    fputc(',', f);
    if (present && isfinite(x))
        fprintf(f, "%.6g", x);
}

void attn_report_csv(FILE *f, const attn_run_record *r) {
    const attn_problem *p = &r->problem;
    csv_string(f, r->example);
    fputc(',', f);
    csv_string(f, r->kernel);
    fprintf(f, ",%d,", r->kernel_id);
    csv_string(f, r->backend);
    fputc(',', f);
    csv_string(f, r->device);
    fprintf(f, ",%d,%d,%d,%d,%d,%s,%s,", p->B, p->H, p->Lq, p->Lk, p->D, attn_dtype_name(p->dtype),
            p->causal ? "true" : "false");
    csv_string(f, r->status);
    fputc(',', f);
    csv_string(f, r->note);
    csv_number(f, r->max_abs_err, true);
    csv_number(f, r->time.median_ms, r->timed);
    csv_number(f, r->time.min_ms, r->timed);
    csv_number(f, r->time.max_ms, r->timed);
    fprintf(f, ",%d", r->timed ? r->time.reps : 0);
    csv_number(f, r->tflops, r->timed);
    csv_number(f, r->gbps, r->timed);
    fprintf(f, ",%.0f\n", r->workspace_bytes);
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
