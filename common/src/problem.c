/* problem.c — problem description: dtypes, validation, both layouts' offsets, work counts, and
 * the kernel-requirements check. Conventions: common/README.md, "Conventions". */
#include "attn/problem.h"

#include "fail.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- dtypes ---------------------------------------------------------------------------------- */

size_t attn_dtype_size(attn_dtype t) { return t == ATTN_F32 ? 4 : 2; }

const char *attn_dtype_name(attn_dtype t) {
    switch (t) {
    case ATTN_F32:
        return "f32";
    case ATTN_F16:
        return "f16";
    case ATTN_BF16:
        return "bf16";
    }
    return "?";
}

int attn_dtype_parse(const char *s, attn_dtype *out) {
    static const struct {
        const char *name;
        attn_dtype t;
    } names[] = {{"f32", ATTN_F32},  {"fp32", ATTN_F32},  {"float32", ATTN_F32},
                 {"f16", ATTN_F16},  {"fp16", ATTN_F16},  {"float16", ATTN_F16},
                 {"half", ATTN_F16}, {"bf16", ATTN_BF16}, {"bfloat16", ATTN_BF16}};
    for (size_t n = 0; n < sizeof names / sizeof names[0]; ++n) {
        if (strcmp(s, names[n].name) == 0) {
            *out = names[n].t;
            return 0;
        }
    }
    return -1;
}

/* ---- construction and validation ------------------------------------------------------------- */

void attn_problem_init(attn_problem *p, int B, int H, int Lq, int Lk, int D) {
    memset(p, 0, sizeof *p);
    p->B = B;
    p->H = H;
    p->Lq = Lq;
    p->Lk = Lk;
    p->D = D;
    p->dtype = ATTN_F32;
    p->causal = false;
    p->scale = D > 0 ? (float)(1.0 / sqrt((double)D)) : 1.0f;
}

int attn_reason(char *why, size_t why_len, int rc, const char *fmt, ...) {
    if (why != NULL && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int attn_fail(char *why, size_t why_len, const char *fmt, ...) {
    if (why != NULL && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* cu_seqlens must start at 0, never decrease, and no sequence may exceed the declared maximum
 * (kernels size their grids from Lq/Lk). */
static int validate_cu(const int *cu, int B, int max_len, const char *name, const char *max_name,
                       char *why, size_t why_len) {
    if (cu[0] != 0)
        return attn_fail(why, why_len, "%s must start at 0 and be non-decreasing (%s[0] = %d)",
                         name, name, cu[0]);
    for (int b = 0; b < B; ++b) {
        int len = cu[b + 1] - cu[b];
        if (cu[b + 1] < cu[b])
            return attn_fail(why, why_len,
                             "%s must start at 0 and be non-decreasing (%s[%d] = %d < %s[%d] = %d)",
                             name, name, b + 1, cu[b + 1], name, b, cu[b]);
        if (len > max_len)
            return attn_fail(why, why_len, "sequence %d of %s has length %d, more than %s = %d", b,
                             name, len, max_name, max_len);
    }
    return 0;
}

int attn_problem_validate(const attn_problem *p, char *why, size_t why_len) {
    const struct {
        const char *name;
        int value;
    } sizes[] = {{"B", p->B}, {"H", p->H}, {"Lq", p->Lq}, {"Lk", p->Lk}, {"D", p->D}};
    for (size_t n = 0; n < sizeof sizes / sizeof sizes[0]; ++n)
        if (sizes[n].value < 1)
            return attn_fail(why, why_len, "%s must be >= 1 (got %d)", sizes[n].name,
                             sizes[n].value);
    if (p->dtype != ATTN_F32 && p->dtype != ATTN_F16 && p->dtype != ATTN_BF16)
        return attn_fail(why, why_len, "unknown dtype %d", (int)p->dtype);
    if (!isfinite(p->scale))
        return attn_fail(why, why_len, "scale must be finite (got %g)", (double)p->scale);
    if ((p->cu_seqlens_q == NULL) != (p->cu_seqlens_k == NULL))
        return attn_fail(why, why_len, "cu_seqlens_q and cu_seqlens_k must be given together");
    if (attn_problem_is_varlen(p)) {
        if (validate_cu(p->cu_seqlens_q, p->B, p->Lq, "cu_seqlens_q", "Lq", why, why_len) ||
            validate_cu(p->cu_seqlens_k, p->B, p->Lk, "cu_seqlens_k", "Lk", why, why_len))
            return -1;
    }
    /* Offsets are int64 and element counts size_t: keep every tensor far below both limits
     * (2^50 elements is 4 PiB of fp32, beyond any machine). */
    const double limit = 0x1p50;
    double q_elems = (double)p->B * p->Lq * p->H * p->D;
    double k_elems = (double)p->B * p->Lk * p->H * p->D;
    if (q_elems > limit || k_elems > limit)
        return attn_fail(why, why_len, "problem too large: Q has %.3g and K %.3g elements", q_elems,
                         k_elems);
    return 0;
}

/* ---- layout ---------------------------------------------------------------------------------- */

bool attn_problem_is_varlen(const attn_problem *p) { return p->cu_seqlens_q != NULL; }

int64_t attn_problem_q_rows(const attn_problem *p) {
    return attn_problem_is_varlen(p) ? p->cu_seqlens_q[p->B] : (int64_t)p->B * p->Lq;
}

int64_t attn_problem_k_rows(const attn_problem *p) {
    return attn_problem_is_varlen(p) ? p->cu_seqlens_k[p->B] : (int64_t)p->B * p->Lk;
}

size_t attn_problem_q_elems(const attn_problem *p) {
    return (size_t)attn_problem_q_rows(p) * (size_t)p->H * (size_t)p->D;
}

size_t attn_problem_k_elems(const attn_problem *p) {
    return (size_t)attn_problem_k_rows(p) * (size_t)p->H * (size_t)p->D;
}

size_t attn_problem_lse_elems(const attn_problem *p) {
    return (size_t)attn_problem_q_rows(p) * (size_t)p->H;
}

int attn_problem_seq_q(const attn_problem *p, int b) {
    return attn_problem_is_varlen(p) ? p->cu_seqlens_q[b + 1] - p->cu_seqlens_q[b] : p->Lq;
}

int attn_problem_seq_k(const attn_problem *p, int b) {
    return attn_problem_is_varlen(p) ? p->cu_seqlens_k[b + 1] - p->cu_seqlens_k[b] : p->Lk;
}

int64_t attn_problem_token_index(const attn_problem *p, bool is_q, int b, int i) {
    const int *cu = is_q ? p->cu_seqlens_q : p->cu_seqlens_k;
    return cu != NULL ? (int64_t)cu[b] + i : (int64_t)b * (is_q ? p->Lq : p->Lk) + i;
}

int64_t attn_problem_row_offset(const attn_problem *p, bool is_q, int b, int h, int i) {
    if (attn_problem_is_varlen(p)) {
        const int *cu = is_q ? p->cu_seqlens_q : p->cu_seqlens_k;
        return (((int64_t)cu[b] + i) * p->H + h) * p->D;
    }
    int L = is_q ? p->Lq : p->Lk;
    return (((int64_t)b * p->H + h) * L + i) * p->D;
}

int64_t attn_problem_lse_index(const attn_problem *p, int b, int h, int i) {
    if (attn_problem_is_varlen(p))
        return (int64_t)h * p->cu_seqlens_q[p->B] + p->cu_seqlens_q[b] + i;
    return ((int64_t)b * p->H + h) * p->Lq + i;
}

/* ---- rows ------------------------------------------------------------------------------------ */

int64_t attn_problem_row_count(const attn_problem *p) { return attn_problem_q_rows(p) * p->H; }

/* The sequence that owns packed query row t (0 <= t < cu[B]): the last b with cu[b] <= t. An empty
 * sequence b has cu[b] == cu[b + 1], so the last such b is the non-empty one after it. */
static int owning_sequence(const attn_problem *p, int64_t t) {
    const int *cu = p->cu_seqlens_q;
    int lo = 0, hi = p->B - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (cu[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

attn_row attn_row_at(const attn_problem *p, int64_t n) {
    attn_row r = {0};
    r.index = n;
    r.valid = n >= 0 && n < attn_problem_row_count(p);
    if (!r.valid)
        return r;
    if (attn_problem_is_varlen(p)) { /* memory order [total, H, D]: h fastest, then the token */
        int64_t t = n / p->H;
        r.h = (int)(n % p->H);
        r.b = owning_sequence(p, t);
        r.i = (int)(t - p->cu_seqlens_q[r.b]);
    } else { /* memory order [B, H, L, D]: i fastest, then h */
        r.i = (int)(n % p->Lq);
        r.h = (int)(n / p->Lq % p->H);
        r.b = (int)(n / p->Lq / p->H);
    }
    r.offset = attn_problem_row_offset(p, true, r.b, r.h, r.i);
    r.lse_index = attn_problem_lse_index(p, r.b, r.h, r.i);
    return r;
}

attn_row attn_row_first(const attn_problem *p) { return attn_row_at(p, 0); }

void attn_row_next(const attn_problem *p, attn_row *r) { *r = attn_row_at(p, r->index + 1); }

/* ---- work counts ----------------------------------------------------------------------------- */

/* Visible entries of one (Lq x Lk) head. Causal, bottom-right: row i sees
 * n_i = min(Lk, max(0, i + Lk - Lq + 1)) keys. Since i <= Lq - 1, n_i <= Lk always, and n_i > 0
 * from i0 = max(0, Lq - Lk) on, where it grows by one per row up to n_{Lq-1} = Lk: an arithmetic
 * series of Lq - i0 terms from i0 + Lk - Lq + 1 to Lk. */
static double head_entries(int Lq, int Lk, bool causal) {
    if (!causal)
        return (double)Lq * Lk;
    int i0 = Lq > Lk ? Lq - Lk : 0;
    double terms = (double)(Lq - i0);
    double first = (double)i0 + Lk - Lq + 1;
    return terms * (first + (double)Lk) / 2.0;
}

double attn_problem_entries(const attn_problem *p) {
    double total = 0.0;
    for (int b = 0; b < p->B; ++b)
        total += head_entries(attn_problem_seq_q(p, b), attn_problem_seq_k(p, b), p->causal);
    return total * p->H;
}

int attn_problem_row_keys(const attn_problem *p, int b, int i) {
    int Lk = attn_problem_seq_k(p, b);
    if (!p->causal)
        return Lk;
    int64_t n = (int64_t)i + Lk - attn_problem_seq_q(p, b) + 1; /* keys j <= i + Lk - Lq */
    return n < 0 ? 0 : n > Lk ? Lk : (int)n;
}

double attn_problem_flops(const attn_problem *p) { return 4.0 * attn_problem_entries(p) * p->D; }

/* ---- kernel registry ------------------------------------------------------------------------- */

/* "f32, f16" from a dtype mask. */
static void dtype_list(unsigned mask, char *buf, size_t len) {
    buf[0] = '\0';
    for (int t = ATTN_F32; t <= ATTN_BF16; ++t) {
        if (!(mask & ATTN_DTYPE_BIT(t)))
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s%s", used ? ", " : "", attn_dtype_name((attn_dtype)t));
    }
}

int attn_kernel_supports(const attn_kernel *k, const attn_problem *p, bool on_gpu, char *why,
                         size_t why_len) {
    const attn_requirements *req = &k->req;
    if (!(req->dtypes & ATTN_DTYPE_BIT(p->dtype))) {
        char list[32];
        dtype_list(req->dtypes, list, sizeof list);
        return attn_fail(why, why_len, "dtype %s not supported by kernel '%s' (supports %s)",
                         attn_dtype_name(p->dtype), k->name, list);
    }
    if (req->max_d > 0 && p->D > req->max_d)
        return attn_fail(why, why_len, "D=%d exceeds the kernel's maximum %d", p->D, req->max_d);
    if (req->d_multiple > 1 && p->D % req->d_multiple != 0)
        return attn_fail(why, why_len, "D=%d is not a multiple of %d, as kernel '%s' requires",
                         p->D, req->d_multiple, k->name);
    if (p->causal && !req->causal)
        return attn_fail(why, why_len, "kernel '%s' does not support causal attention", k->name);
    if (attn_problem_is_varlen(p) && !req->varlen)
        return attn_fail(why, why_len, "kernel '%s' does not support variable-length batches",
                         k->name);
    if (req->gpu_only && !on_gpu)
        return attn_fail(why, why_len, "kernel '%s' needs a GPU (%s); this is the simulator build",
                         k->name, k->description);
    return 0;
}

const attn_kernel *attn_example_find(const attn_example *ex, int id) {
    for (int n = 0; n < ex->num_kernels; ++n)
        if (ex->kernels[n].id == id)
            return &ex->kernels[n];
    return NULL;
}
