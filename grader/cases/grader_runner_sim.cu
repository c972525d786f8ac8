// grader_runner_sim.cu — which simulated thread is running (grader_runner.h): the simulator keeps
// blockIdx and threadIdx per OS thread, so the runner's fault handler can name the thread whose
// read hit a guard page. A GPU build has no such thing on the host: "".
#include <cstdio>

#include "grader_runner.h"

extern "C" void grader_runner_where(char *buf, size_t len) {
#ifdef ATTN_BACKEND_SIM
    std::snprintf(buf, len, "block (%u,%u,%u) thread (%u,%u,%u)", blockIdx.x, blockIdx.y,
                  blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
#else
    if (len > 0)
        buf[0] = '\0';
#endif
}
