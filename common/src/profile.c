/* profile.c — the harness's --profile (attn/profile.h): the simulator's profile in a sim build,
 * a one-line refusal in a gpu build (Nsight Compute profiles a real GPU). */
#include "attn/profile.h"

#include <string.h>

#include "attn/device.h"

#ifdef ATTN_BACKEND_SIM
#include <cudasim.h>
#endif

const char *attn_profile_how(void) {
    return "the profile needs kernels compiled with the simulator's instrumentation: "
           "cmake --preset sim-check && cmake --build --preset sim-check, then run the "
           "programs under build/sim-check";
}

#ifdef ATTN_BACKEND_SIM

bool attn_profile_available(void) { return cudasim_profile_available() != 0; }

int attn_profile_start(char *why, size_t why_len) {
    if (cudasim_profile_enable(1) == 0)
        return 0;
    snprintf(why, why_len, "--profile: this build is not instrumented; %s", attn_profile_how());
    return ATTN_EXIT_USAGE;
}

void attn_profile_stop(void) { (void)cudasim_profile_enable(0); }

void attn_profile_set_flops(double flops) { cudasim_profile_set_flops(flops); }

int attn_profile_collect(FILE *f, attn_profile *out) {
    cudasim_profile_summary s;
    int n = cudasim_profile_report(f, &s);
    memset(out, 0, sizeof *out);
    out->valid = n > 0;
    out->launches = s.launches;
    out->smem_bytes = s.dyn_smem_bytes;
    out->global_requests = s.global_load_requests + s.global_store_requests;
    out->global_sectors = s.global_load_sectors + s.global_store_sectors;
    out->global_bytes = s.global_load_bytes + s.global_store_bytes;
    out->shared_requests = s.shared_requests;
    out->shared_wavefronts = s.shared_wavefronts;
    out->shared_conflicts = s.shared_conflicts;
    out->mma = s.mma;
    out->dram_bytes = (double)s.dram_bytes;
    out->footprint_bytes = (double)s.footprint_bytes;
    out->flops = s.flops;
    out->intensity = s.intensity;
    out->bound_h100_s = s.bound_h100_s;
    out->bound_a100_s = s.bound_a100_s;
    return n;
}

#else

bool attn_profile_available(void) { return false; }

int attn_profile_start(char *why, size_t why_len) {
    snprintf(why, why_len,
             "--profile is the CPU simulator's (on a GPU use Nsight Compute: ncu); %s",
             attn_profile_how());
    return ATTN_EXIT_USAGE;
}

void attn_profile_stop(void) {}
void attn_profile_set_flops(double flops) { (void)flops; }

int attn_profile_collect(FILE *f, attn_profile *out) {
    (void)f;
    memset(out, 0, sizeof *out);
    return 0;
}

#endif

void attn_profile_json(const attn_profile *p, char *buf, size_t len) {
    if (!p->valid) {
        snprintf(buf, len, "%s", "");
        return;
    }
    snprintf(
        buf, len,
        "\"profile\":{\"model\":\"cudasim profile: LRU L2 of 50 MiB, 32 B sectors\","
        "\"launches\":%llu,\"smem_bytes\":%llu,\"global_requests\":%llu,\"global_sectors\":%llu,"
        "\"global_bytes\":%llu,\"sector_efficiency\":%.4f,"
        "\"shared_requests\":%llu,\"shared_wavefronts\":%llu,\"shared_conflicts\":%llu,"
        "\"mma\":%llu,\"dram_bytes\":%.0f,\"footprint_bytes\":%.0f,\"flops\":%.6g,"
        "\"intensity\":%.6g,\"bound_h100_s\":%.6g,\"bound_a100_s\":%.6g}",
        p->launches, p->smem_bytes, p->global_requests, p->global_sectors, p->global_bytes,
        p->global_sectors ? (double)p->global_bytes / (32.0 * (double)p->global_sectors) : 0.0,
        p->shared_requests, p->shared_wavefronts, p->shared_conflicts, p->mma, p->dram_bytes,
        p->footprint_bytes, p->flops, p->intensity, p->bound_h100_s, p->bound_a100_s);
}
