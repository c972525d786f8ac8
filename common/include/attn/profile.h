/* attn/profile.h — the --profile flag's side of the harness: the CPU simulator's profile of every
 * launch (common/cudasim/README.md, "The profile"), read from an instrumented build (the sim-check
 * preset). What a GPU's memory system would see, counted, not timed: global requests and 32-byte
 * sectors, DRAM bytes under an L2 model, shared-memory wavefronts and bank conflicts, mma FLOPs,
 * arithmetic intensity and the roofline lower bound on an H100 SXM and an A100 SXM.
 */
#ifndef ATTN_PROFILE_H
#define ATTN_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_profile {
    bool valid; /* false: nothing was profiled */
    unsigned long long launches;
    unsigned long long smem_bytes; /* dynamic shared memory per block (largest launch) */
    unsigned long long global_requests, global_sectors; /* loads, stores and atomics */
    /* bytes the lanes asked for (a byte several lanes of one request read counts once);
     * sector efficiency = global_bytes / (32 * global_sectors), 100 % when coalesced */
    unsigned long long global_bytes;
    unsigned long long shared_requests, shared_wavefronts, shared_conflicts;
    unsigned long long mma; /* warp-wide mma.m16n8k16, 4096 FLOPs each */
    double dram_bytes;      /* read + written under the L2 model */
    double footprint_bytes; /* distinct sectors touched: the compulsory traffic */
    double flops;           /* tensor FLOPs, else the caller's count (attn_profile_set_flops) */
    double intensity;       /* flops / dram_bytes */
    double bound_h100_s, bound_a100_s; /* roofline lower bounds, seconds */
} attn_profile;

/* How to get a build that profiles (one sentence, for messages and tables). */
const char *attn_profile_how(void);
/* True when this build's kernels can be profiled. */
bool attn_profile_available(void);
/* Profiles every following launch. 0, or ATTN_EXIT_USAGE with a one-line "--profile ..." reason
 * in why when this build cannot (a gpu build, a sim build without instrumentation). */
int attn_profile_start(char *why, size_t why_len);
void attn_profile_stop(void);
/* FLOPs attributed to each following launch that runs no mma (attention: attn_problem_flops). */
void attn_profile_set_flops(double flops);
/* The launches since the last call, summed: their tables printed to f (NULL: not printed), the
 * numbers into *out (valid = false when none). Returns how many launches. */
int attn_profile_collect(FILE *f, attn_profile *out);
/* The profile as a JSON member for a record's extra_json: "profile":{...} ("" when !valid). */
void attn_profile_json(const attn_profile *p, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_PROFILE_H */
