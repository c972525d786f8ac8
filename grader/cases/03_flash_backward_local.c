/* 03_flash_backward_local.c — the channel's API (grader_case.h, "the submission, in its own
 * program") answered in process, for the exercise's own check program flash_backward_check_sim
 * (exercises/03_flash_backward/CMakeLists.txt): there the learner's file is linked beside the
 * case program, nothing is sandboxed and nothing is graded, so no second process is needed. The
 * buffers are laid out as the submission's program lays them out (NaN guard zones around each;
 * no inaccessible page), and sent back the same way. The grader never links this file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/device.h"
#include "flash_backward.h"
#include "grader_case.h"

void grader_remote_connect(int to_runner, int from_runner, const char *case_name) {
    (void)to_runner, (void)from_runner, (void)case_name;
}

const attn_example *grader_remote_example(void) { return &flash_backward_example; }

bool grader_remote_is(const attn_kernel *k) {
    (void)k;
    return false;
}

int grader_remote_launch(const attn_problem *p, const struct attn_block_mask *host_mask,
                         void *const packed[3], const size_t in_bytes[3], size_t o_bytes,
                         size_t lse_bytes, size_t guard, grader_remote_answer *a) {
    return grader_remote_launch_extra(p, host_mask, packed, in_bytes, o_bytes, lse_bytes, guard,
                                      NULL, 0, a);
}

/* The buffers of the last launch, on the host (the answer points into them). */
static unsigned char *host_copy[GRADER_REMOTE_BUFFERS];

int grader_remote_launch_extra(const attn_problem *p, const struct attn_block_mask *host_mask,
                               void *const packed[3], const size_t in_bytes[3], size_t o_bytes,
                               size_t lse_bytes, size_t guard, const grader_remote_extra *extra,
                               int n_extra, grader_remote_answer *a) {
    (void)host_mask;
    memset(a, 0, sizeof *a);
    const attn_kernel *k =
        flash_backward_example.num_kernels > 0 ? &flash_backward_example.kernels[0] : NULL;
    size_t bytes[GRADER_REMOTE_BUFFERS] = {in_bytes[0], in_bytes[1], in_bytes[2], o_bytes,
                                           lse_bytes};
    const void *src[GRADER_REMOTE_BUFFERS] = {packed[0], packed[1], packed[2], NULL, NULL};
    unsigned char *dev[GRADER_REMOTE_BUFFERS] = {0};
    void *args[GRADER_RPC_MAX_EXTRA] = {0};
    const int n = 5 + n_extra;
    for (int x = 0; x < n_extra; ++x) {
        bytes[5 + x] = extra[x].bytes;
        src[5 + x] = extra[x].input ? extra[x].data : NULL;
    }
    int rc = k == NULL;
    for (int t = 0; rc == 0 && t < n; ++t) {
        dev[t] = attn_device_alloc(bytes[t] + 2 * guard);
        rc = dev[t] == NULL || attn_device_fill_nan(dev[t], bytes[t] + 2 * guard) ||
             (src[t] != NULL && attn_to_device(dev[t] + guard, src[t], bytes[t]));
        if (t >= 5)
            args[t - 5] = dev[t] + guard;
    }
    if (rc != 0) {
        snprintf(a->error_name, sizeof a->error_name, "%s", k ? "out of memory" : "no kernel 1");
        a->error = -1;
    } else {
        attn_buffers b;
        memset(&b, 0, sizeof b);
        b.q = dev[0] + guard, b.k = dev[1] + guard, b.v = dev[2] + guard;
        b.o = dev[3] + guard, b.lse = (float *)(dev[4] + guard);
        b.args = n_extra > 0 ? args : NULL;
        cudaGetLastError();
        k->launch(p, &b, 0);
        cudaError_t err = cudaGetLastError();
        if (err == cudaSuccess)
            err = cudaDeviceSynchronize();
        a->error = (int)err;
        snprintf(a->error_name, sizeof a->error_name, "%s", cudaGetErrorName(err));
        snprintf(a->error_text, sizeof a->error_text, "%s", cudaGetErrorString(err));
    }
    for (int t = 0; t < n; ++t) {
        free(host_copy[t]);
        host_copy[t] = malloc(bytes[t] + 2 * guard);
        if (a->error == 0 &&
            (host_copy[t] == NULL || attn_to_host(host_copy[t], dev[t], bytes[t] + 2 * guard))) {
            fprintf(stderr, "error: cannot read the buffers back\n");
            exit(1);
        }
        a->lead[t] = host_copy[t];
        a->data[t] = host_copy[t] + guard;
        a->trail[t] = host_copy[t] + guard + bytes[t];
        a->lead_bytes[t] = a->trail_bytes[t] = guard;
        attn_device_free(dev[t]);
    }
    return 0;
}

unsigned grader_remote_setup(void) { return 0; }

int grader_remote_time(double *ms) {
    (void)ms;
    return 1;
}
