/* cp_gather.c — the result gathered on rank 0 (cp_gather.h), chunk by chunk, through the
 * transport. */
#include "cp_gather.h"

#include <stdlib.h>
#include <string.h>

#include "attn/device.h"

void cp_gathered_free(cp_gathered *g) {
    for (int i = 0; i < g->n; ++i)
        free(g->f[i].host);
    free(g->work);
    memset(g, 0, sizeof *g);
}

/* Posts the n transfers started (rc: how starting them went) and waits for each. */
static int cp_post_wait(cp_transport *t, cp_request *req, int n, int rc) {
    if (rc == CP_OK)
        rc = t->post(t);
    for (int i = 0; rc == CP_OK && i < n; ++i)
        rc = t->wait(t, &req[i]);
    return rc;
}

int cp_gather(cp_transport *t, const cp_setup *s, const cp_result *r, cp_gathered *g) {
    const int P = t->size, BH = s->p.B * s->p.H, L = s->p.Lq;
    double mine[3] = {r->entries, r->steps_computed, r->steps_skipped};
    if (r->dsa)
        memcpy(mine, r->bytes, sizeof mine);
    double *dwork = attn_device_alloc(sizeof mine);
    if (!dwork || attn_to_device(dwork, mine, sizeof mine))
        return 1;
    if (t->rank != 0) {
        cp_request req[1 + CP_MAX_CHUNKS * CP_MAX_FIELDS];
        int n = 0, rc = t->isend(t, dwork, sizeof mine, 0, &req[n++]);
        for (int c = 0; c < r->nchunks; ++c)
            for (int i = 0; rc == CP_OK && i < g->n; ++i)
                rc = t->isend(t, g->f[i].dev[c],
                              (size_t)BH * r->chunk[c].len * g->f[i].width * sizeof(float), 0,
                              &req[n++]);
        if ((rc = cp_post_wait(t, req, n, rc)) != CP_OK)
            cp_transfer_failed(t, rc, -1, 0, "result", true);
        attn_device_free(dwork);
        return 0;
    }
    g->work = malloc((size_t)P * 3 * sizeof(double));
    size_t most = 1;
    for (int i = 0; i < g->n; ++i) {
        g->f[i].host = malloc((size_t)BH * L * g->f[i].width * sizeof(float));
        if (!g->f[i].host)
            return 1;
        most += (size_t)BH * ((L + P - 1) / P + 1) * g->f[i].width;
    }
    float *tmp = attn_device_alloc(most * sizeof(float)), *host = malloc(most * sizeof(float));
    if (!g->work || !tmp || !host)
        return 1;
    memcpy(g->work, mine, sizeof mine);
    for (int src = 0; src < P; ++src) {
        cp_chunk ch[CP_MAX_CHUNKS];
        const int nc = cp_rank_chunks(s->strategy, L, P, src, ch);
        cp_request req[1 + CP_MAX_FIELDS];
        for (int c = -1; c < nc; ++c) { /* c = -1: the work counts */
            const size_t rows = c < 0 ? 0 : (size_t)BH * ch[c].len;
            const float *dev[CP_MAX_FIELDS];
            size_t at[CP_MAX_FIELDS], end = 0;
            for (int i = 0; c >= 0 && i < g->n; ++i) {
                at[i] = end;
                end += rows * g->f[i].width;
                dev[i] = src ? tmp + at[i] : g->f[i].dev[c];
            }
            if (src) {
                int n = 0, rc = c < 0 ? t->irecv(t, dwork, sizeof mine, src, &req[n++]) : CP_OK;
                for (int i = 0; c >= 0 && rc == CP_OK && i < g->n; ++i)
                    rc = t->irecv(t, tmp + at[i], rows * g->f[i].width * sizeof(float), src,
                                  &req[n++]);
                if ((rc = cp_post_wait(t, req, n, rc)) != CP_OK)
                    cp_transfer_failed(t, rc, -1, src, "result", false);
            }
            if (c < 0) {
                if (src && attn_to_host(g->work + 3 * src, dwork, sizeof mine))
                    return 1;
                continue;
            }
            for (int i = 0; i < g->n; ++i) {
                if (rows && attn_to_host(host, dev[i], rows * g->f[i].width * sizeof(float)))
                    return 1;
                cp_unslice(g->f[i].host, host, BH, L, g->f[i].width, ch[c]);
            }
        }
    }
    attn_device_free(tmp);
    attn_device_free(dwork);
    free(host);
    return 0;
}
