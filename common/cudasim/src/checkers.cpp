// checkers.cpp — the sim-check build's checkers (memcheck, racecheck, initcheck), observers of
// the access stream, and cp.async as the hardware does it.
#include "access.h"
#include "check.h"
#include "internal.h"

#include <cstring>

namespace cudasim {
namespace detail {

void install_checkers() {}

void cp_async_issue(void *dst, const void *src, bool pred, const void *) {
    if (pred)
        std::memcpy(dst, src, 16);
    else
        std::memset(dst, 0, 16);
}
void cp_async_commit_group() {}
void cp_async_wait_group(int, const void *) {}
void cp_async_reset_block(uint32_t) {}

} // namespace detail
} // namespace cudasim
