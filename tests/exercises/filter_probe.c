/* filter_probe.c — the grader's seccomp filters seen from inside (test grading.filters): run by
 * grader_exec --filter, as the submission's program is, it makes each call the base filter must
 * refuse from the first instruction on (code made writable and executable or executable once
 * written, /proc/self/mem opened for writing, a memory file, System V and POSIX IPC), then
 * installs the run filter (grader_seccomp.h) and makes the calls it must refuse too. Prints one
 * line per call and PASS when every one was refused with EPERM.
 *
 *   filter_probe             (under grader_exec --filter) every call refused
 *   filter_probe --open      (no filter) the same calls succeed: the probe can see a refusal
 *
 * In --open mode the calls that a container's own filter may refuse (personality, memory files,
 * POSIX queues, protection keys) are only reported; the others must succeed. */
#define _GNU_SOURCE /* memfd, MAP_ANONYMOUS, syscall numbers */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/personality.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "grader_seccomp.h"

static int failures;
static int open_mode;

/* One probe: rc < 0 with errno EPERM is a refusal. `must`: in --open mode it has to work. */
static void expect(const char *what, long rc, int must) {
    int refused = rc < 0 && errno == EPERM;
    const char *verdict;
    if (!open_mode) {
        verdict = refused ? "refused" : "ALLOWED";
        failures += !refused;
    } else {
        verdict = rc >= 0 ? "works" : must ? "FAILED" : "unavailable here";
        failures += rc < 0 && must;
    }
    printf("%-62s %s%s%s\n", what, verdict, rc < 0 ? ": " : "", rc < 0 ? strerror(errno) : "");
}

static void probe_code(const char *stage) {
    long page = sysconf(_SC_PAGESIZE);
    char what[96];
    /* this function's own page, made writable and executable (the patch of the judge's code) */
    uintptr_t code = (uintptr_t)&probe_code & ~(uintptr_t)(page - 1);
    snprintf(what, sizeof what, "%s: mprotect(code, RWX)", stage);
    long rc = mprotect((void *)code, (size_t)page, PROT_READ | PROT_WRITE | PROT_EXEC);
    expect(what, rc, 1);
    if (rc == 0)
        mprotect((void *)code, (size_t)page, PROT_READ | PROT_EXEC);
    /* a written page made executable */
    char *data =
        mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data != MAP_FAILED) {
        data[0] = (char)0xc3;
        snprintf(what, sizeof what, "%s: mprotect(written page, R-X)", stage);
        expect(what, mprotect(data, (size_t)page, PROT_READ | PROT_EXEC), 1);
    }
    snprintf(what, sizeof what, "%s: mmap(anonymous, RWX)", stage);
    void *rwx = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE | PROT_EXEC,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    expect(what, rwx == MAP_FAILED ? -1 : 0, 1);
    snprintf(what, sizeof what, "%s: pkey_mprotect(written page, R-X)", stage);
#ifdef SYS_pkey_mprotect
    expect(what,
           data == MAP_FAILED ? 0
                              : syscall(SYS_pkey_mprotect, data, page, PROT_READ | PROT_EXEC, -1),
           0);
#endif
    snprintf(what, sizeof what, "%s: personality(READ_IMPLIES_EXEC)", stage);
    int before = personality(0xffffffff);
    long pr = personality((unsigned long)before | READ_IMPLIES_EXEC);
    expect(what, pr, 0);
    if (pr >= 0)
        personality((unsigned long)before);
    snprintf(what, sizeof what, "%s: memfd_create", stage);
    long fd = syscall(SYS_memfd_create, "probe", 0);
    expect(what, fd, 0);
    if (fd >= 0)
        close((int)fd);
    snprintf(what, sizeof what, "%s: open(/proc/self/mem, O_RDWR)", stage);
    fd = open("/proc/self/mem", O_RDWR);
    expect(what, fd, 1);
    if (fd >= 0)
        close((int)fd);
}

static void probe_ipc(const char *stage) {
    char what[96];
    snprintf(what, sizeof what, "%s: msgget (System V message queue)", stage);
    int id = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
    expect(what, id, 1);
    if (id >= 0)
        msgctl(id, IPC_RMID, NULL);
    snprintf(what, sizeof what, "%s: shmget (System V shared memory)", stage);
    id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    expect(what, id, 1);
    if (id >= 0)
        shmctl(id, IPC_RMID, NULL);
    snprintf(what, sizeof what, "%s: semget (System V semaphores)", stage);
    id = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
    expect(what, id, 1);
    if (id >= 0)
        semctl(id, 0, IPC_RMID);
    snprintf(what, sizeof what, "%s: mq_open (POSIX message queue)", stage);
    long mq = syscall(SYS_mq_open, "attn_probe_mq", O_RDWR | O_CREAT, 0600, NULL);
    expect(what, mq, 0);
    if (mq >= 0) {
        close((int)mq);
        syscall(SYS_mq_unlink, "attn_probe_mq");
    }
}

int main(int argc, char **argv) {
    open_mode = argc > 1 && strcmp(argv[1], "--open") == 0;
    probe_code("base");
    probe_ipc("base");
    if (!open_mode) {
        if (grader_seccomp(GRADER_FILTER_RUN, getpid(), 0) != 0) {
            printf("FAIL: the run filter cannot be installed\n");
            return 1;
        }
        probe_code("run");
        long page = sysconf(_SC_PAGESIZE);
        void *rx =
            mmap(NULL, (size_t)page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        expect("run: mmap(anonymous, R-X)", rx == MAP_FAILED ? -1 : 0, 1);
    }
    if (failures) {
        printf("FAIL: %d call(s) %s\n", failures,
               open_mode ? "failed without a filter" : "allowed by the grader's filters");
        return 1;
    }
    printf("PASS\n");
    return 0;
}
