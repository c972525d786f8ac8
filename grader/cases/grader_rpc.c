/* grader_rpc.c — the messages between the checker and the submission's program (grader_rpc.h).
 * Linked into both; it judges nothing. */
#include "grader_rpc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void grader_rpc_put(grader_rpc_buf *b, const void *x, size_t n) {
    if (b->bad || n == 0)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *d = realloc(b->data, cap);
        if (d == NULL) {
            b->bad = true;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, x, n);
    b->len += n;
}

const void *grader_rpc_get(grader_rpc_buf *b, size_t n) {
    if (b->bad || n > b->len - b->pos) {
        b->bad = true;
        return NULL;
    }
    const void *x = b->data + b->pos;
    b->pos += n;
    return x;
}

int grader_rpc_read(grader_rpc_buf *b, void *x, size_t n) {
    const void *at = grader_rpc_get(b, n);
    if (at == NULL)
        return -1;
    memcpy(x, at, n);
    return 0;
}

void grader_rpc_free(grader_rpc_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* Writes (or reads) all n bytes, through short transfers and signals: 0, or -1. */
static int transfer_all(int fd, void *x, size_t n, bool writing) {
    unsigned char *p = x;
    while (n > 0) {
        ssize_t done = writing ? write(fd, p, n) : read(fd, p, n);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return -1;
        p += done;
        n -= (size_t)done;
    }
    return 0;
}

static int write_all(int fd, const void *x, size_t n) {
    return transfer_all(fd, (void *)x, n, true);
}

static int read_all(int fd, void *x, size_t n) { return transfer_all(fd, x, n, false); }

int grader_rpc_send(int fd, uint32_t type, grader_rpc_buf *b) {
    grader_rpc_header h = {GRADER_RPC_MAGIC, type, b->len};
    int rc = b->bad || write_all(fd, &h, sizeof h) || write_all(fd, b->data, b->len) ? -1 : 0;
    b->len = b->pos = 0;
    return rc;
}

int grader_rpc_recv(int fd, uint32_t *type, grader_rpc_buf *b, size_t max_bytes) {
    grader_rpc_header h;
    b->len = b->pos = 0;
    b->bad = false;
    if (read_all(fd, &h, sizeof h))
        return -1;
    if (h.magic != GRADER_RPC_MAGIC)
        return -2; /* not a message of the channel */
    if (h.bytes > max_bytes) {
        b->bad = true; /* more than the request allows: nothing is read or allocated */
        return -1;
    }
    if (h.bytes > b->cap) {
        unsigned char *d = realloc(b->data, h.bytes);
        if (d == NULL)
            return -1;
        b->data = d;
        b->cap = h.bytes;
    }
    if (read_all(fd, b->data, h.bytes))
        return -1;
    b->len = h.bytes;
    *type = h.type;
    return 0;
}

void grader_rpc_put_problem(grader_rpc_buf *b, const attn_problem *p) {
    int32_t f[7] = {p->B, p->H, p->Lq, p->Lk, p->D, (int32_t)p->dtype, p->causal};
    grader_rpc_put(b, f, sizeof f);
    grader_rpc_put(b, &p->scale, sizeof p->scale);
}

int grader_rpc_get_problem(grader_rpc_buf *b, attn_problem *p) {
    int32_t f[7];
    float scale;
    if (grader_rpc_read(b, f, sizeof f) || grader_rpc_read(b, &scale, sizeof scale))
        return -1;
    attn_problem_init(p, f[0], f[1], f[2], f[3], f[4]);
    p->dtype = (attn_dtype)f[5];
    p->causal = f[6] != 0;
    p->scale = scale;
    return attn_problem_validate(p, NULL, 0) == 0 ? 0 : -1;
}

static size_t mask_rows(const attn_block_mask *m) {
    return (size_t)m->batches * (size_t)m->num_q_blocks;
}

void grader_rpc_put_mask(grader_rpc_buf *b, const attn_block_mask *m) {
    int32_t f[7] = {m->batches, m->Lq,           m->Lk,          m->block_q,
                    m->block_k, m->num_q_blocks, m->num_k_blocks};
    grader_rpc_put(b, f, sizeof f);
    size_t rows = mask_rows(m), cells = rows * (size_t)m->num_k_blocks;
    grader_rpc_put(b, m->kv_num_blocks, rows * sizeof(int32_t));
    grader_rpc_put(b, m->kv_indices, cells * sizeof(int32_t));
    grader_rpc_put(b, m->full_kv_num_blocks, rows * sizeof(int32_t));
    grader_rpc_put(b, m->full_kv_indices, cells * sizeof(int32_t));
}

int grader_rpc_get_mask(grader_rpc_buf *b, attn_block_mask *m) {
    memset(m, 0, sizeof *m);
    int32_t f[7];
    if (grader_rpc_read(b, f, sizeof f) || f[0] <= 0 || f[1] <= 0 || f[2] <= 0 || f[3] <= 0 ||
        f[4] <= 0)
        return -1;
    /* The four arrays must be in the message before anything is allocated for them. */
    uint64_t nq = ((uint64_t)f[1] + (uint64_t)f[3] - 1) / (uint64_t)f[3];
    uint64_t nk = ((uint64_t)f[2] + (uint64_t)f[4] - 1) / (uint64_t)f[4];
    uint64_t need = 2 * (uint64_t)f[0] * nq * (1 + nk) * sizeof(int32_t);
    if (need > b->len - b->pos || attn_block_mask_alloc(m, f[0], f[1], f[2], f[3], f[4]) != 0)
        return -1;
    if (m->num_q_blocks != f[5] || m->num_k_blocks != f[6]) {
        attn_block_mask_free(m);
        return -1;
    }
    size_t rows = mask_rows(m), cells = rows * (size_t)m->num_k_blocks;
    int32_t *dst[4] = {m->kv_num_blocks, m->kv_indices, m->full_kv_num_blocks, m->full_kv_indices};
    size_t n[4] = {rows, cells, rows, cells};
    for (int a = 0; a < 4; ++a) {
        const void *src = grader_rpc_get(b, n[a] * sizeof(int32_t));
        if (src == NULL) {
            attn_block_mask_free(m);
            return -1;
        }
        memcpy(dst[a], src, n[a] * sizeof(int32_t));
    }
    return 0;
}
