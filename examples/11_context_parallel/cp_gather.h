/* cp_gather.h — the result gathered on rank 0 (cp_gather.c): every rank's fields (the forward's
 * O and LSE, DSA's selection, the gradients) and its work counts, put back in the whole
 * problem's layout for the checks. */
#ifndef CP_GATHER_H
#define CP_GATHER_H

#include "cp_ring.h"
#include "transport.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rank 0 receives every rank's fields and work; the others send theirs. A field is one
 * [B, H, len, width] device tensor per chunk (the result's O and LSE, the gradients). */
#define CP_MAX_FIELDS 3
typedef struct cp_field {
    const float *dev[CP_MAX_CHUNKS]; /* this rank's, per chunk */
    int width;
    float *host; /* rank 0: the whole [B, H, L, width] */
} cp_field;

typedef struct cp_gathered {
    cp_field f[CP_MAX_FIELDS];
    int n;
    double *work; /* rank 0: [P][3]: entries, steps computed, steps skipped */
} cp_gathered;

void cp_gathered_free(cp_gathered *g);

/* Rank 0 receives every rank's g->f[i].dev per chunk into g->f[i].host and its work (r's
 * entries and steps, or DSA's bytes) into g->work; the others send theirs. 0, or 1 after an
 * error (a transfer that fails ends the job: cp_transfer_failed). */
int cp_gather(cp_transport *t, const cp_setup *s, const cp_result *r, cp_gathered *g);

#ifdef __cplusplus
}
#endif
#endif /* CP_GATHER_H */
