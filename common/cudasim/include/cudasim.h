/* cudasim.h — controls and queries of the CUDA simulator, for tests and tools (C and C++).
 *
 * A kernel never needs this header. Programs that want to steer the simulator (thread order,
 * worker threads) or read its last error report include it in sim builds only.
 */
#ifndef CUDASIM_H
#define CUDASIM_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* In which order the threads of a block run, and are released after each barrier. A kernel
 * that is only correct in one order is missing a barrier. Default: forward, or the environment
 * variable CUDASIM_ORDER=forward|reverse|shuffle (seed: CUDASIM_SEED). */
typedef enum cudasim_order {
    CUDASIM_ORDER_FORWARD = 0,
    CUDASIM_ORDER_REVERSE = 1,
    CUDASIM_ORDER_SHUFFLE = 2
} cudasim_order;

void cudasim_set_order(cudasim_order order, unsigned long long seed);
cudasim_order cudasim_get_order(void);

/* OS threads that run blocks in parallel (default: CUDASIM_THREADS or the number of cores; always
 * 1 in ASan builds). Returns the number in effect. */
int cudasim_set_threads(int threads);
int cudasim_get_threads(void);

/* The watchdog: a launch whose running block makes no progress (no barrier or warp collective
 * completes, no thread exits) for this many seconds is ended with a report naming the block and
 * its threads, and returns cudaErrorLaunchTimeout. Default: CUDASIM_WATCHDOG or 10; 0 turns it
 * off; a negative value changes nothing. Returns the value in effect. */
double cudasim_set_watchdog(double seconds);

/* The sim-check build's checkers (memcheck, racecheck, initcheck): on (default) or off, as
 * CUDASIM_CHECK=0 sets them at the start. Returns 1 when they are on (always 0 in a build that
 * is not instrumented). */
int cudasim_set_checks(int on);
int cudasim_get_checks(void);
unsigned long long cudasim_get_seed(void);

/* Fixes the settings above (order and seed, threads, watchdog, checks) for the rest of the
 * process: later calls of the setters change nothing, and the memory that holds them becomes
 * read-only. For a program that runs code it does not trust after its own set-up (the grader's
 * submission program, grader/README.md). Returns 0, or -1 if the memory could not be protected
 * (the settings are fixed all the same). */
int cudasim_lock_settings(void);

/* Starts now what the first launch would start: the OS threads that run blocks
 * (cudasim_set_threads), the watchdog, and each thread's signal handlers. For a program that
 * forbids thread creation and signal-handler changes afterwards (a seccomp filter). */
void cudasim_prepare(void);

/* Tells the simulator that [lo, lo + bytes) is inaccessible memory (PROT_NONE) placed right after
 * a buffer whose data ends at data_end, e.g. a page after a kernel's input: a kernel's access
 * there is reported like the simulator's other errors, "out-of-bounds read past the end of
 * <name> (byte +N after its last element)", with the kernel, block, thread and, in the checked
 * build, the line, and fails the launch (cudaErrorIllegalAddress). Up to 16 regions; 0, or -1
 * when the table is full. cudasim_clear_guard_regions() forgets them (between launches). */
int cudasim_add_guard_region(const void *lo, size_t bytes, const void *data_end, const char *name);
void cudasim_clear_guard_regions(void);

/* Symbolization of the sim-check build's reports through a running llvm-symbolizer (started
 * with --functions=none; its stdin is to_fd, its stdout from_fd) instead of one started per
 * report: for a program that may not create processes when it reports. -1, -1: the default. */
void cudasim_set_symbolizer(int to_fd, int from_fd);

/* The simulator's explanation of the last error: a failed launch (the report printed after
 * "cudasim: error: "), a rejected launch configuration, or a failed runtime call (e.g. a copy
 * outside a cudaMalloc'd block). "" if none since the start or the last cudaDeviceReset. */
const char *cudasim_last_error_message(void);

/* Names the launches that follow (NULL or "": unnamed), for the barrier record of the checked
 * build: with CUDASIM_BARRIER_RECORD=<folder>, a process writes <folder>/barriers.<pid>.tsv at
 * exit, one line per launch label, kernel and __syncthreads() site its blocks completed, with 1
 * when racecheck saw that barrier matter (two threads' conflicting accesses to one shared byte
 * ordered by it alone: deleting it is a race) and 0 when it was only reached. The harness labels
 * each launch "<example>:<kernel version>" (tests/README.md, "Every barrier shown to matter"). */
void cudasim_set_launch_label(const char *label);

/* Measures one fiber switch (two fibers switching back and forth): nanoseconds per switch. */
double cudasim_measure_switch_ns(long iterations);

/* The profile (src/profile.h): memory requests, sectors, a DRAM model, shared-memory wavefronts
 * and bank conflicts, mma FLOPs and a roofline bound, per launch, from the access stream of an
 * instrumented build (the sim-check preset). */
typedef struct cudasim_profile_summary {
    unsigned long long launches;
    unsigned long long dyn_smem_bytes; /* dynamic shared memory per block (largest launch) */
    unsigned long long global_load_requests, global_load_sectors;
    unsigned long long global_store_requests, global_store_sectors; /* stores and atomics */
    unsigned long long shared_requests, shared_wavefronts, shared_conflicts;
    unsigned long long dram_bytes;      /* read + written, under the L2 model */
    unsigned long long footprint_bytes; /* distinct 32-byte sectors touched (compulsory) */
    unsigned long long mma;             /* warp-wide mma.m16n8k16 */
    double flops;        /* tensor FLOPs, or those given to cudasim_profile_set_flops */
    double intensity;    /* flops / dram_bytes */
    double bound_h100_s; /* roofline lower bound on an H100 SXM, seconds */
    double bound_a100_s; /* and on an A100 SXM */
    /* bytes the lanes asked for (a byte several lanes of one request read counts once): the
     * sector efficiency is bytes / (32 * sectors) */
    unsigned long long global_load_bytes, global_store_bytes; /* stores and atomics */
} cudasim_profile_summary;

/* 1 when this program's kernels were compiled instrumented (the profile can see them). */
int cudasim_profile_available(void);
/* Starts (on != 0) or stops profiling every launch. While on, blocks run on one OS thread (the
 * stream's order, hence the L2 model, is reproducible). Returns -1 when not available. */
int cudasim_profile_enable(int on);
/* FLOPs attributed to each following launch that runs no mma (e.g. 4*entries*D for attention). */
void cudasim_profile_set_flops(double flops);
/* Prints the tables of the launches profiled since the last report, summed, to f (NULL: no
 * print), fills *summary (may be NULL) and forgets them. Returns how many launches. */
int cudasim_profile_report(FILE *f, cudasim_profile_summary *summary);

#ifdef __cplusplus
}
#endif
#endif /* CUDASIM_H */
