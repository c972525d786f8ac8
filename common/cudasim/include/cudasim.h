/* cudasim.h — controls and queries of the CUDA simulator, for tests and tools (C and C++).
 *
 * A kernel never needs this header. Programs that want to steer the simulator (thread order,
 * worker threads) or read its last error report include it in sim builds only.
 */
#ifndef CUDASIM_H
#define CUDASIM_H

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

/* The simulator's explanation of the last error: a failed launch (the report printed after
 * "cudasim: error: "), a rejected launch configuration, or a failed runtime call (e.g. a copy
 * outside a cudaMalloc'd block). "" if none since the start or the last cudaDeviceReset. */
const char *cudasim_last_error_message(void);

/* Measures one fiber switch (two fibers switching back and forth): nanoseconds per switch. */
double cudasim_measure_switch_ns(long iterations);

#ifdef __cplusplus
}
#endif
#endif /* CUDASIM_H */
