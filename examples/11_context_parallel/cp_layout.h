/* cp_layout.h — lesson code: which query and key positions each rank holds, and which ring
 * steps it computes.
 *
 * The sequence of L positions is cut into chunks: chunk c of n starts at floor(c * L / n), so the
 * chunks differ by at most one position when n does not divide L.
 *   ring (pass-KV, contiguous): n = P chunks; rank r holds chunk r of Q, K and V.
 *   zigzag:                     n = 2P chunks; rank r holds chunks r and 2P-1-r (one from each
 *                               end: under causality every rank then computes the same amount).
 *   ulysses:                    as ring; the all-to-all then hands each rank all L positions of
 *                               its share of the heads (heads [g*H/P, (g+1)*H/P) to rank g).
 * A query chunk against a key chunk is, under causality, computed whole (every key before every
 * query), skipped (every key after every query), or the diagonal (the same chunk: causal inside);
 * chunks never partly overlap, so these are the only cases. A sliding window (cp_set_window) adds
 * skipped pairs (every key out of every window) and pairs cut by the window's edge. */
#ifndef CP_LAYOUT_H
#define CP_LAYOUT_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cp_strategy { CP_RING = 0, CP_ZIGZAG = 1, CP_ULYSSES = 2 } cp_strategy;

/* "ring", "zigzag", "ulysses"; 0 on success, -1 for an unknown name. */
int cp_strategy_parse(const char *s, cp_strategy *out);
const char *cp_strategy_name(cp_strategy s);

typedef struct cp_chunk {
    int start, len; /* positions [start, start + len) */
    int doc;        /* its document (--docs), -1 without documents */
} cp_chunk;

/* The most chunks a rank holds: 2 (zigzag), each cut at the document boundaries it spans. */
#define CP_MAX_CHUNKS 32

/* A document mask (--docs): the sequence is documents of the given lengths, consecutive, summing
 * to L; a query sees only keys of its own document (and causality applies inside it). Every
 * chunk is then cut at the document boundaries, so that a pair of chunks is in one document or in
 * two (skipped whole). Set once, before the layout is used; n = 0: no documents. 0, or -1 when
 * there are more than CP_MAX_DOCS. */
#define CP_MAX_DOCS 64
int cp_set_documents(const int *lens, int n);

/* A sliding window (--window W): query i sees keys i - W < j <= i (causal, the W most recent
 * positions, its own included; example 04's causal_window:w, Mistral's). Set once, before the
 * layout is used; 0: no window. Under a window a pair of chunks is also skipped when every key
 * is W or more positions older than every query, whole when every key is inside every query's
 * window, and otherwise CP_PAIR_WINDOW: the window's edge cuts through it, and it is computed
 * with the window masked inside (cp_ring.h, cp_window_attend). */
void cp_set_window(int W);
int cp_window(void);

/* Rank r's chunks (1 for ring and ulysses, 2 for zigzag, more where documents cut them) into
 * out[]; returns their number. */
int cp_rank_chunks(cp_strategy s, int L, int P, int r, cp_chunk out[CP_MAX_CHUNKS]);

typedef enum cp_pair_kind {
    CP_PAIR_SKIP = 0,
    CP_PAIR_FULL = 1,
    CP_PAIR_DIAGONAL = 2,
    CP_PAIR_WINDOW = 3 /* cut by the sliding window's edge (cp_set_window) */
} cp_pair_kind;

/* How query chunk q meets key chunk k (non-causal: always FULL; an empty chunk, or chunks of
 * two documents: SKIP). */
cp_pair_kind cp_pair(cp_chunk q, cp_chunk k, bool causal);

/* Score entries of one pair per (sequence, head): q.len * k.len whole, q.len (q.len + 1) / 2
 * on the diagonal, 0 skipped; under a window, per query the keys of k inside its window. */
double cp_pair_entries(cp_chunk q, cp_chunk k, bool causal);

/* What rank r computes over the P ring steps (pass-KV: step s brings rank (r - s) mod P's keys),
 * per (sequence, head): score entries, steps with something to compute, and steps skipped whole
 * (every pair masked). Ulysses: the entries of its heads over all L positions, per sequence, in
 * one step. */
typedef struct cp_work {
    double entries;
    int steps_computed, steps_skipped;
} cp_work;

cp_work cp_rank_work(cp_strategy s, int L, int H, int P, int r, bool causal);

/* Ulysses: the heads rank g attends to, [*h0, *h1). */
void cp_rank_heads(int H, int P, int g, int *h0, int *h1);

#ifdef __cplusplus
}
#endif
#endif /* CP_LAYOUT_H */
