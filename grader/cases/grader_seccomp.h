/* grader/cases/grader_seccomp.h — the system calls the submission's program may make
 * (grader/README.md, "The sandbox"). Two seccomp filters, each added on top of the ones before
 * (a filter can never be removed):
 *
 *   GRADER_FILTER_BASE  from the first instruction of the submission's program on (grader_exec
 *                       installs it, then executes the program, so static constructors run under
 *                       it too): no new process (fork, vfork, clone without CLONE_THREAD,
 *                       clone3), no signal to another process, no ptrace or access to another
 *                       process's memory, no socket, no namespace, mount, keyring, BPF program,
 *                       perf counter, io_uring or userfaultfd; and, except in a GPU program
 *                       (whose driver opens its device files for writing and may make code of
 *                       its own): no file opened for writing (/proc/self/mem included),
 *                       created, renamed, removed or changed (the program writes only to the
 *                       standard output and error it was given); no System V message queue,
 *                       shared memory or semaphore, no POSIX message queue (in the user mode
 *                       they would outlive the case); and no page executable once written:
 *                       no mprotect or pkey_mprotect that adds execute, no mmap writable and
 *                       executable at once, no memfd_create, no personality(READ_IMPLIES_EXEC)
 *                       (the loader maps the program's code with mmap and needs none of them).
 *   GRADER_FILTER_RUN   after the program's set-up (grader_runner.c), before it runs any code of
 *                       the submission's kernel or host functions: also no file opened, created,
 *                       renamed, removed or looked up by name, no program executed, no thread
 *                       created, no signal handler changed, no ioctl or prctl, no executable
 *                       mapping at all, and memory mappings only added (mmap at an address of
 *                       the kernel's choice) or made inaccessible (mprotect to PROT_NONE): no
 *                       mprotect that opens a guard page again, no mmap over an existing
 *                       mapping, no munmap or mremap. In the GPU build (the driver maps and
 *                       opens what it needs during launches) only no program executed is added
 *                       to the base; under AddressSanitizer or ThreadSanitizer (their runtimes
 *                       map shadow memory at fixed addresses) no program executed and no
 *                       executable mapping.
 *
 * A call a filter forbids fails with EPERM (clone3 with ENOSYS, so that glibc falls back to
 * clone, which the filter can inspect); a system call of another architecture (the 32-bit
 * entry on x86-64) ends the process. Linux on x86-64 and AArch64 only; elsewhere
 * grader_seccomp() returns -1 and installs nothing. */
#ifndef GRADER_SECCOMP_H
#define GRADER_SECCOMP_H

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { GRADER_FILTER_BASE = 1, GRADER_FILTER_RUN = 2 };

/* Sets no_new_privs and adds the filter `level` for every thread of the process. self: this
 * process's id (signals to it stay allowed); device_files: the program drives a GPU (the base
 * filter then leaves file writes alone). Returns 0, or -1 (unsupported here, or refused). */
int grader_seccomp(int level, pid_t self, int device_files);

#ifdef __cplusplus
}
#endif
#endif /* GRADER_SECCOMP_H */
