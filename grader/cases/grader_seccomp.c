/* grader_seccomp.c — the seccomp filters of the submission's program (grader_seccomp.h). Each is
 * a classic BPF program: check the architecture, load the system call number, then one short
 * block per rule (the number, and where a rule depends on them, the arguments). */
#define _GNU_SOURCE /* syscall numbers, MAP_FIXED_NOREPLACE, AT_EMPTY_PATH */
#include "grader_seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define GRADER_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define GRADER_ARCH AUDIT_ARCH_AARCH64
#endif

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef SECCOMP_FILTER_FLAG_TSYNC
#define SECCOMP_FILTER_FLAG_TSYNC 1
#endif

#if defined(GRADER_ARCH)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GRADER_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GRADER_SANITIZED 1
#endif
#endif

#define MAX_INSNS 1024
#define ARG_LO(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define ARG_HI(n) (ARG_LO(n) + 4) /* little-endian: x86-64 and AArch64 */

typedef struct filter {
    struct sock_filter insn[MAX_INSNS];
    unsigned short n;
    int overflow;
} filter;

static void emit(filter *f, unsigned short code, unsigned char jt, unsigned char jf, uint32_t k) {
    if (f->n == MAX_INSNS) {
        f->overflow = 1;
        return;
    }
    struct sock_filter s = {code, jt, jf, k};
    f->insn[f->n++] = s;
}

/* The system calls one architecture lacks (AArch64 has no open, fork, ...): -1, no call. */
#ifndef SYS_fork
#define SYS_fork -1
#define SYS_vfork -1
#endif
#ifndef SYS_open
#define SYS_open -1
#define SYS_creat -1
#define SYS_unlink -1
#define SYS_rename -1
#define SYS_link -1
#define SYS_symlink -1
#define SYS_mkdir -1
#define SYS_rmdir -1
#define SYS_mknod -1
#define SYS_chmod -1
#define SYS_chown -1
#define SYS_lchown -1
#define SYS_utime -1
#define SYS_utimes -1
#define SYS_futimesat -1
#define SYS_stat -1
#define SYS_lstat -1
#define SYS_access -1
#define SYS_readlink -1
#endif
#ifndef SYS_renameat
#define SYS_renameat -1
#endif
#ifndef SYS_clone3
#define SYS_clone3 -1
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open -1
#define SYS_pidfd_getfd -1
#define SYS_pidfd_send_signal -1
#endif
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup -1
#define SYS_io_uring_enter -1
#define SYS_io_uring_register -1
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise -1
#endif
#ifndef SYS_fsopen
#define SYS_fsopen -1
#define SYS_fsmount -1
#define SYS_move_mount -1
#define SYS_open_tree -1
#endif
#ifndef SYS_openat2
#define SYS_openat2 -1
#endif
#ifndef SYS_faccessat2
#define SYS_faccessat2 -1
#endif
#ifndef SYS_pkey_mprotect
#define SYS_pkey_mprotect -1
#define SYS_pkey_alloc -1
#endif

/* grader_seccomp.h says what each filter forbids, and why. The calls each one denies outright
 * (EPERM); the rules on arguments are in grader_seccomp() below. */
/* base: other processes, the network, the system */
static const long base_denied[] = {SYS_fork,
                                   SYS_vfork,
                                   SYS_tkill,
                                   SYS_ptrace,
                                   SYS_process_vm_readv,
                                   SYS_process_vm_writev,
                                   SYS_kcmp,
                                   SYS_socket,
                                   SYS_socketpair,
                                   SYS_unshare,
                                   SYS_setns,
                                   SYS_mount,
                                   SYS_umount2,
                                   SYS_pivot_root,
                                   SYS_chroot,
                                   SYS_keyctl,
                                   SYS_add_key,
                                   SYS_request_key,
                                   SYS_bpf,
                                   SYS_perf_event_open,
                                   SYS_userfaultfd,
                                   SYS_pidfd_open,
                                   SYS_pidfd_getfd,
                                   SYS_pidfd_send_signal,
                                   SYS_io_uring_setup,
                                   SYS_io_uring_enter,
                                   SYS_io_uring_register,
                                   SYS_process_madvise,
                                   SYS_fsopen,
                                   SYS_fsmount,
                                   SYS_move_mount,
                                   SYS_open_tree};
/* base, not in a GPU program: a file written, made, renamed or removed */
static const long base_host_denied[] = {SYS_unlinkat,
                                        SYS_renameat2,
                                        SYS_linkat,
                                        SYS_symlinkat,
                                        SYS_mkdirat,
                                        SYS_mknodat,
                                        SYS_fchmodat,
                                        SYS_fchownat,
                                        SYS_utimensat,
                                        SYS_truncate,
                                        SYS_setxattr,
                                        SYS_lsetxattr,
                                        SYS_removexattr,
                                        SYS_lremovexattr,
                                        SYS_open_by_handle_at,
                                        SYS_name_to_handle_at,
                                        SYS_creat,
                                        SYS_unlink,
                                        SYS_rename,
                                        SYS_renameat,
                                        SYS_link,
                                        SYS_symlink,
                                        SYS_mkdir,
                                        SYS_rmdir,
                                        SYS_mknod,
                                        SYS_chmod,
                                        SYS_chown,
                                        SYS_lchown,
                                        SYS_utime,
                                        SYS_utimes,
                                        SYS_futimesat};
/* base, not in a GPU program: code made from written bytes (a memory file, protection keys);
 * messages, memory and semaphores shared with other processes (System V and POSIX IPC: in the
 * user mode they would outlive the case and reach the next one) */
static const long base_host_code_ipc_denied[] = {
    SYS_memfd_create, SYS_pkey_mprotect, SYS_pkey_alloc,   SYS_msgget,          SYS_msgsnd,
    SYS_msgrcv,       SYS_msgctl,        SYS_semget,       SYS_semop,           SYS_semtimedop,
    SYS_semctl,       SYS_shmget,        SYS_shmat,        SYS_shmctl,          SYS_shmdt,
    SYS_mq_open,      SYS_mq_unlink,     SYS_mq_timedsend, SYS_mq_timedreceive, SYS_mq_notify,
    SYS_mq_getsetattr};
/* run: no program executed */
static const long run_denied[] = {SYS_execve, SYS_execveat};
/* run, plain simulator builds: a file opened or looked up by name; a thread, a signal handler,
 * a device, a process setting; a mapping moved, removed, shared or re-protected */
static const long run_plain_denied[] = {
    SYS_openat,          SYS_faccessat,     SYS_faccessat2, SYS_readlinkat,
    SYS_chdir,           SYS_fchdir,        SYS_statfs,     SYS_inotify_add_watch,
    SYS_fanotify_mark,   SYS_getxattr,      SYS_lgetxattr,  SYS_listxattr,
    SYS_llistxattr,      SYS_memfd_create,  SYS_open,       SYS_stat,
    SYS_lstat,           SYS_access,        SYS_readlink,   SYS_clone,
    SYS_rt_sigaction,    SYS_ioctl,         SYS_prctl,      SYS_munmap,
    SYS_mremap,          SYS_pkey_mprotect, SYS_shmat,      SYS_shmget,
    SYS_remap_file_pages};

/* What a rule checks before it denies a call. */
enum {
    ALWAYS,       /* nothing: the call fails */
    UNLESS_EQUAL, /* fails unless the low 32 bits of argument `arg` equal `value` */
    UNLESS_BITS,  /* fails unless argument `arg` has one of the bits `value` */
    IF_BITS,      /* fails if argument `arg` has one of the bits `value` */
    IF_ALL_BITS,  /* fails if argument `arg` has every bit of `value` */
    IF_BITS_SET,  /* fails if argument `arg` has one of the bits `value` and is not ~0 (a query) */
    PLACED,       /* fails if the address (argument 0) is not NULL or the flags (3) fix it */
};

/* One rule's block: load the number; if it is not this rule's, jump past the block; else check
 * the argument and return err (EPERM when 0). */
static void emit_rule(filter *f, long nr, int what, int arg, uint32_t value, int err) {
    if (nr < 0)
        return; /* a call this architecture does not have */
    uint32_t deny = SECCOMP_RET_ERRNO | (uint32_t)(err ? err : EPERM);
    unsigned char size = what == ALWAYS ? 1 : what == PLACED ? 7 : what >= IF_ALL_BITS ? 4 : 3;
    emit(f, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr));
    emit(f, BPF_JMP | BPF_JEQ | BPF_K, 0, size, (uint32_t)nr);
    if (what == PLACED) { /* allowed only with a NULL address and no fixing flag */
        emit(f, BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_LO(0));
        emit(f, BPF_JMP | BPF_JEQ | BPF_K, 0, 4, 0);
        emit(f, BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_HI(0));
        emit(f, BPF_JMP | BPF_JEQ | BPF_K, 0, 2, 0);
        emit(f, BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_LO(3));
        emit(f, BPF_JMP | BPF_JSET | BPF_K, 0, 1, value);
    } else if (what != ALWAYS) {
        emit(f, BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_LO(arg));
        if (what == UNLESS_EQUAL)
            emit(f, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, value); /* equal: past the deny */
        else if (what == UNLESS_BITS)
            emit(f, BPF_JMP | BPF_JSET | BPF_K, 1, 0, value); /* a bit set: past the deny */
        else if (what == IF_BITS)
            emit(f, BPF_JMP | BPF_JSET | BPF_K, 0, 1, value); /* no bit set: past the deny */
        else if (what == IF_ALL_BITS) { /* not all of the bits: past the deny */
            emit(f, BPF_ALU | BPF_AND | BPF_K, 0, 0, value);
            emit(f, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, value);
        } else { /* IF_BITS_SET: a query (~0), or no bit set: past the deny */
            emit(f, BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 0xffffffffu);
            emit(f, BPF_JMP | BPF_JSET | BPF_K, 0, 1, value);
        }
    }
    emit(f, BPF_RET | BPF_K, 0, 0, deny);
}

static void deny_all(filter *f, const long *calls, size_t n) {
    for (size_t i = 0; i < n; ++i)
        emit_rule(f, calls[i], ALWAYS, 0, 0, 0);
}

#define DENY_ALL(f, calls) deny_all(f, calls, sizeof calls / sizeof calls[0])

/* A system call without libc (the submission's file could define syscall() or prctl()); the
 * fourth and fifth arguments are 0. */
static long raw_syscall3(long nr, long a, long b, long c) {
    long ret;
#if defined(__x86_64__)
    register long r10 __asm__("r10") = 0;
    register long r8 __asm__("r8") = 0;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
#else
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = 0;
    register long x4 __asm__("x4") = 0;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
    ret = x0;
#endif
    return ret;
}

int grader_seccomp(int level, pid_t self, int device_files) {
    static filter f; /* 8 KiB: not on a possibly small stack */
    f.n = 0;
    f.overflow = 0;
    emit(&f, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, arch));
    emit(&f, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, GRADER_ARCH);
    emit(&f, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_KILL_PROCESS);
#if defined(__x86_64__)
    emit(&f, BPF_LD | BPF_W | BPF_ABS, 0, 0, offsetof(struct seccomp_data, nr)); /* x32 calls */
    emit(&f, BPF_JMP | BPF_JGE | BPF_K, 0, 1, 0x40000000u);
    emit(&f, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ERRNO | EPERM);
#endif
    int plain = !device_files; /* the run filter's files and memory rules */
#ifdef GRADER_SANITIZED
    plain = 0;
#endif
    if (level == GRADER_FILTER_BASE) {
        emit_rule(&f, SYS_clone, UNLESS_BITS, 0, CLONE_THREAD, 0); /* a thread, not a fork */
        emit_rule(&f, SYS_clone3, ALWAYS, 0, 0, ENOSYS); /* glibc then uses clone (seen) */
        const long to_self[] = {SYS_kill, SYS_tgkill, SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo};
        for (size_t i = 0; i < sizeof to_self / sizeof to_self[0]; ++i)
            emit_rule(&f, to_self[i], UNLESS_EQUAL, 0, (uint32_t)self, 0);
        DENY_ALL(&f, base_denied);
        if (!device_files) {
            const uint32_t writing = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
            emit_rule(&f, SYS_openat, IF_BITS, 2, writing, 0);
            emit_rule(&f, SYS_open, IF_BITS, 1, writing, 0);
            emit_rule(&f, SYS_openat2, ALWAYS, 0, 0, ENOSYS); /* glibc then uses openat */
            DENY_ALL(&f, base_host_denied);
            /* Code is never written and written bytes never run, from the first instruction:
             * no page made executable (the loader maps the program's code executable with mmap,
             * and never needs mprotect for it), none mapped writable and executable at once,
             * no reading implying execution (personality), no memory file to map */
            emit_rule(&f, SYS_mprotect, IF_BITS, 2, PROT_EXEC, 0);
            emit_rule(&f, SYS_mmap, IF_ALL_BITS, 2, PROT_WRITE | PROT_EXEC, 0);
            emit_rule(&f, SYS_personality, IF_BITS_SET, 0, READ_IMPLIES_EXEC, 0);
            DENY_ALL(&f, base_host_code_ipc_denied);
        }
    } else {
        DENY_ALL(&f, run_denied);
        if (!device_files) /* the program is loaded: no executable mapping at all any more */
            emit_rule(&f, SYS_mmap, IF_BITS, 2, PROT_EXEC, 0);
        if (plain) {
            DENY_ALL(&f, run_plain_denied);
            emit_rule(&f, SYS_mprotect, UNLESS_EQUAL, 2, PROT_NONE, 0);
            emit_rule(&f, SYS_mmap, PLACED, 0, MAP_FIXED | MAP_FIXED_NOREPLACE, 0);
            /* fstat(fd) is newfstatat(fd, "", AT_EMPTY_PATH) in glibc; a path is a lookup */
            emit_rule(&f, SYS_newfstatat, UNLESS_BITS, 3, AT_EMPTY_PATH, 0);
            emit_rule(&f, SYS_statx, UNLESS_BITS, 2, AT_EMPTY_PATH, 0);
        }
    }
    emit(&f, BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW);
    if (f.overflow)
        return -1;
    struct sock_fprog prog = {f.n, f.insn};
    if (raw_syscall3(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0) != 0)
        return -1;
    return raw_syscall3(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                        (long)&prog) == 0
               ? 0
               : -1;
}

#else /* not x86-64 or AArch64 Linux */

int grader_seccomp(int level, pid_t self, int device_files) {
    (void)level;
    (void)self;
    (void)device_files;
    return -1;
}

#endif
