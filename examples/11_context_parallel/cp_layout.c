/* cp_layout.c — lesson code: the chunk layouts and the ring's work per rank (cp_layout.h). */
#include "cp_layout.h"

#include <string.h>

static const char *const cp_names[] = {"ring", "zigzag", "ulysses"};

int cp_strategy_parse(const char *s, cp_strategy *out) {
    for (int i = 0; i < 3; ++i)
        if (strcmp(s, cp_names[i]) == 0) {
            *out = (cp_strategy)i;
            return 0;
        }
    return -1;
}

const char *cp_strategy_name(cp_strategy s) { return cp_names[s]; }

static cp_chunk cp_chunk_of(int L, int n, int c) {
    const int a = (int)((long long)c * L / n), b = (int)((long long)(c + 1) * L / n);
    cp_chunk ch = {a, b - a, -1};
    return ch;
}

static int cp_docs, cp_doc_start[CP_MAX_DOCS + 1]; /* document d: [start[d], start[d + 1]) */

static int cp_win; /* --window W, 0: none */

void cp_set_window(int W) { cp_win = W; }
int cp_window(void) { return cp_win; }

int cp_set_documents(const int *lens, int n) {
    if (n > CP_MAX_DOCS)
        return -1;
    cp_docs = n;
    cp_doc_start[0] = 0;
    for (int d = 0; d < n; ++d)
        cp_doc_start[d + 1] = cp_doc_start[d] + lens[d];
    return 0;
}

/* Appends chunk c cut at the document boundaries inside it (whole without documents). */
static int cp_cut(cp_chunk c, cp_chunk *out, int n) {
    if (cp_docs == 0 || c.len == 0) {
        out[n] = c;
        return n + 1;
    }
    for (int d = 0; d < cp_docs; ++d) {
        const int a = c.start > cp_doc_start[d] ? c.start : cp_doc_start[d];
        const int e = c.start + c.len, b = e < cp_doc_start[d + 1] ? e : cp_doc_start[d + 1];
        if (b > a && n < CP_MAX_CHUNKS) {
            const cp_chunk part = {a, b - a, d};
            out[n++] = part;
        }
    }
    return n;
}

int cp_rank_chunks(cp_strategy s, int L, int P, int r, cp_chunk out[CP_MAX_CHUNKS]) {
    if (s == CP_ZIGZAG)
        return cp_cut(cp_chunk_of(L, 2 * P, 2 * P - 1 - r), out,
                      cp_cut(cp_chunk_of(L, 2 * P, r), out, 0));
    return cp_cut(cp_chunk_of(L, P, r), out, 0);
}

cp_pair_kind cp_pair(cp_chunk q, cp_chunk k, bool causal) {
    if (q.len == 0 || k.len == 0 || q.doc != k.doc)
        return CP_PAIR_SKIP;
    if (!causal && cp_win == 0)
        return CP_PAIR_FULL;
    if (cp_win == 0 && k.start + k.len <= q.start)
        return CP_PAIR_FULL;
    if (k.start >= q.start + q.len)
        return CP_PAIR_SKIP;
    if (cp_win > 0) { /* causal too: the window holds keys i - W < j <= i */
        if (k.start + k.len - 1 <= q.start - cp_win)
            return CP_PAIR_SKIP;        /* every key W or more positions older than every query */
        if (k.start + k.len <= q.start) /* every key before every query */
            return k.start >= q.start + q.len - cp_win ? CP_PAIR_FULL : CP_PAIR_WINDOW;
        return q.len <= cp_win ? CP_PAIR_DIAGONAL : CP_PAIR_WINDOW;
    }
    return CP_PAIR_DIAGONAL; /* chunks partition the sequence: overlapping means the same one */
}

double cp_pair_entries(cp_chunk q, cp_chunk k, bool causal) {
    switch (cp_pair(q, k, causal)) {
    case CP_PAIR_FULL:
        return (double)q.len * k.len;
    case CP_PAIR_DIAGONAL:
        return (double)q.len * (q.len + 1) / 2.0;
    case CP_PAIR_WINDOW: { /* query i: keys max(k.start, i - W + 1) .. min(k.end - 1, i) */
        double e = 0.0;
        for (int i = q.start; i < q.start + q.len; ++i) {
            const int lo = k.start > i - cp_win + 1 ? k.start : i - cp_win + 1;
            const int hi = k.start + k.len - 1 < i ? k.start + k.len - 1 : i;
            e += hi >= lo ? hi - lo + 1 : 0;
        }
        return e;
    }
    default:
        return 0.0;
    }
}

void cp_rank_heads(int H, int P, int g, int *h0, int *h1) {
    *h0 = (int)((long long)g * H / P);
    *h1 = (int)((long long)(g + 1) * H / P);
}

cp_work cp_rank_work(cp_strategy s, int L, int H, int P, int r, bool causal) {
    cp_work w = {0.0, 0, 0};
    if (s == CP_ULYSSES) {
        int h0, h1;
        cp_rank_heads(H, P, r, &h0, &h1);
        const cp_chunk all = {0, L, -1};
        w.entries = (h1 - h0) * cp_pair_entries(all, all, causal);
        w.steps_computed = h1 > h0;
        w.steps_skipped = h1 == h0;
        return w;
    }
    cp_chunk mine[CP_MAX_CHUNKS], theirs[CP_MAX_CHUNKS];
    const int nq = cp_rank_chunks(s, L, P, r, mine);
    for (int step = 0; step < P; ++step) {
        const int owner = ((r - step) % P + P) % P;
        const int nk = cp_rank_chunks(s, L, P, owner, theirs);
        double e = 0.0;
        for (int a = 0; a < nq; ++a)
            for (int b = 0; b < nk; ++b)
                e += cp_pair_entries(mine[a], theirs[b], causal);
        w.entries += H * e;
        if (e > 0.0)
            w.steps_computed++;
        else
            w.steps_skipped++;
    }
    return w;
}
