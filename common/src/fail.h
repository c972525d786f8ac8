/* fail.h — the harness's own sources only (not part of its API). */
#ifndef ATTN_SRC_FAIL_H
#define ATTN_SRC_FAIL_H

#include <stddef.h>

/* Writes the formatted reason into why (when why is not NULL and why_len > 0) and returns -1,
 * so that a check can `return attn_fail(why, why_len, "...", ...)`. Defined in problem.c. */
int attn_fail(char *why, size_t why_len, const char *fmt, ...);

#endif /* ATTN_SRC_FAIL_H */
