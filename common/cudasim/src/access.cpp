// access.cpp — the observers of the instrumented access stream (see access.h).
#include "access.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace cudasim {
namespace detail {

namespace {
std::vector<access_observer *> &observers() {
    static std::vector<access_observer *> v;
    return v;
}
std::atomic<bool> any_observer{false};
} // namespace

void add_access_observer(access_observer *o) {
    auto &v = observers();
    if (std::find(v.begin(), v.end(), o) == v.end())
        v.push_back(o);
    any_observer.store(!v.empty(), std::memory_order_release);
}

void remove_access_observer(access_observer *o) {
    auto &v = observers();
    v.erase(std::remove(v.begin(), v.end(), o), v.end());
    any_observer.store(!v.empty(), std::memory_order_release);
}

bool have_access_observers() { return any_observer.load(std::memory_order_relaxed); }

void deliver_access(const access_event &e) {
    if (!have_access_observers())
        return;
    for (access_observer *o : observers())
        o->access(e);
}

void deliver_mma(uint64_t block, uint32_t warp, uint64_t flops, const char *file, int line) {
    if (!have_access_observers())
        return;
    for (access_observer *o : observers())
        o->mma(block, warp, flops, file, line);
}

void deliver_launch_begin(const launch_info &li) {
    if (!have_access_observers())
        return;
    for (access_observer *o : observers())
        o->launch_begin(li);
}

void deliver_launch_end(const launch_info &li, bool failed) {
    if (!have_access_observers())
        return;
    for (access_observer *o : observers())
        o->launch_end(li, failed);
}

} // namespace detail
} // namespace cudasim
