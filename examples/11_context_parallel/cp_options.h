/* cp_options.h — example 11's flags (cp_options.c): what a run asks for, parsed alike on every
 * rank and checked together before any rank touches its device. */
#ifndef CP_OPTIONS_H
#define CP_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "cp_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cp_options {
    cp_setup s;
    int docs, doc_len[CP_MAX_DOCS];  /* --docs: the document lengths */
    int window;                      /* --window W: keys i - W < j <= i; 0: none */
    int dsa, index_heads, index_dim; /* --dsa K: DeepSeek sparse attention, top-K; 0: none */
    int plant_dsa;                   /* --plant local-index, no-fetch: CP_DSA_PLANT_* */
    bool gather_kv;                  /* --kv gather: K/V all-gathered instead of fetched */
    const char *backend;
    double timeout_s;
    int seed, reps;
    bool quiet, backward;
} cp_options;

/* --help's text. */
extern const char cp_usage[];

/* The flags of argv for P ranks: 0; ATTN_EXIT_USAGE with one line in err; -1 and "help" for
 * --help. Sets the documents and the window of cp_layout (cp_set_documents, cp_set_window) and,
 * without --dsa, the kernels of each ring step (example 03's forward, 07's backward). */
int cp_parse(int argc, char **argv, int P, cp_options *o, char *err, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* CP_OPTIONS_H */
