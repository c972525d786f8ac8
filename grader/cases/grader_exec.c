/* grader_exec.c — runs one step of a submission (its compile, or its program in a case) in the
 * sandbox grade.py chose (grader/README.md, "The sandbox"). Trusted: built with the chapter,
 * never with a submission.
 *
 *   grader_exec [--root DIR --wd DIR [--ro PATH]... [--rw PATH]... [--devices]]
 *               [--uid N | --drop-caps] [--limit cpu|as|fsize|nproc=N]...
 *               [--filter [--gpu] [--symbolizer]] -- PROGRAM ARGS...
 *
 * --root (inside the new mount and PID namespaces `unshare` made): DIR, an empty folder, becomes
 *     the step's root: a tmpfs holding the system directories (/usr, /bin, /sbin, /lib*:
 *     read-only), of /etc only alternatives and ld.so.cache, a fresh /proc, a /dev of null,
 *     zero, full, random and urandom (--devices: the GPU's devices and /sys too), fresh tmpfs
 *     /tmp, /var/tmp and /dev/shm, and the paths --ro (read-only) and --rw at their own paths;
 *     then the step runs in it, in --wd, as a child of this process, which stays the PID
 *     namespace's first process and exits with the child's status (128 + N for signal N);
 * --uid N: the step runs as user and group N, without supplementary groups (root only);
 *     --drop-caps: it keeps its user (the namespace's root in a user namespace) and loses every
 *     capability; either way with no new privileges;
 * --limit: resource limits (setrlimit): CPU seconds, address space, file size, processes;
 * --filter: the base seccomp filter (grader_seccomp.h) right before PROGRAM runs, so that its
 *     static constructors are filtered too (--gpu: PROGRAM drives a GPU). --symbolizer (the
 *     checked build, whose reports name source lines): starts llvm-symbolizer-14 first, which
 *     the filtered program could not start itself, and passes it as `--symbolizer TO,FROM`.
 * The inherited file descriptors stay open. Exit status 2 on a bad command line or a sandbox
 * that cannot be made (one line on stderr), 127 if PROGRAM cannot be executed. */
#define _GNU_SOURCE /* setresuid, mount flags, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grader_seccomp.h"

#define MAX_PATHS 64

static _Noreturn void die(const char *what, const char *path) {
    fprintf(stderr, "grader_exec: %s%s%s: %s\n", what, path ? " " : "", path ? path : "",
            strerror(errno));
    exit(2);
}

/* mkdir -p for the folders of path (and path itself when dir). */
static void make_dirs(const char *path, int dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; ++s) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            die("cannot make", p);
        *s = '/';
    }
    if (dir && mkdir(p, 0755) != 0 && errno != EEXIST)
        die("cannot make", p);
}

/* The mount flags a read-only remount must keep (a user namespace may not drop them). */
static unsigned long kept_flags(const char *path) {
    static const unsigned long pairs[][2] = {
        {ST_NOSUID, MS_NOSUID},   {ST_NODEV, MS_NODEV},           {ST_NOEXEC, MS_NOEXEC},
        {ST_NOATIME, MS_NOATIME}, {ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME}};
    struct statvfs v;
    unsigned long f = 0;
    if (statvfs(path, &v) != 0)
        return 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; ++i)
        if (v.f_flag & pairs[i][0])
            f |= pairs[i][1];
    return f;
}

/* src bound at root + src (the same path inside), read-only unless writable. */
static void bind(const char *root, const char *src, int writable, int recursive) {
    struct stat st;
    if (stat(src, &st) != 0)
        return; /* nothing to show */
    char dst[4096];
    snprintf(dst, sizeof dst, "%s%s", root, src);
    make_dirs(dst, S_ISDIR(st.st_mode));
    if (!S_ISDIR(st.st_mode)) {
        int fd = open(dst, O_WRONLY | O_CREAT, 0644);
        if (fd < 0)
            die("cannot make", dst);
        close(fd);
    }
    if (mount(src, dst, NULL, MS_BIND | (recursive ? MS_REC : 0), NULL) != 0)
        die("cannot bind", src);
    if (!writable &&
        mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | kept_flags(src), NULL) != 0)
        die("cannot make read-only", src);
}

static void fresh_tmpfs(const char *root, const char *dir, const char *options) {
    char dst[4096];
    snprintf(dst, sizeof dst, "%s%s", root, dir);
    make_dirs(dst, 1);
    if (mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV, options) != 0)
        die("cannot mount a tmpfs on", dst);
}

/* The step's root (see --root at the top). */
static void make_root(const char *root, char **ro, int n_ro, char **rw, int n_rw, int devices) {
    if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755") != 0)
        die("cannot mount the root on", root);
    static const char *system_dirs[] = {"/usr",   "/bin",   "/sbin",  "/lib",
                                        "/lib64", "/lib32", "/libx32"};
    char p[4096], target[4096];
    for (size_t i = 0; i < sizeof system_dirs / sizeof system_dirs[0]; ++i) {
        ssize_t n = readlink(system_dirs[i], target, sizeof target - 1);
        snprintf(p, sizeof p, "%s%s", root, system_dirs[i]);
        if (n > 0) { /* /bin -> usr/bin on a merged-/usr system */
            target[n] = '\0';
            if (symlink(target, p) != 0)
                die("cannot link", p);
        } else {
            bind(root, system_dirs[i], 0, 1);
        }
    }
    bind(root, "/etc/alternatives", 0, 0);
    bind(root, "/etc/ld.so.cache", 0, 0);
    snprintf(p, sizeof p, "%s/proc", root);
    make_dirs(p, 1);
    if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        die("cannot mount /proc on", p);
    fresh_tmpfs(root, "/dev", "size=1m,mode=0755");
    static const char *nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
                                  "/dev/urandom"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; ++i)
        bind(root, nodes[i], 1, 0);
    if (devices) { /* a GPU build: the driver's devices and /sys */
        static const char *gpu[] = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                    "/dev/nvidia-modeset"};
        for (size_t i = 0; i < sizeof gpu / sizeof gpu[0]; ++i)
            bind(root, gpu[i], 1, 0);
        for (int n = 0; n < 64; ++n) {
            snprintf(p, sizeof p, "/dev/nvidia%d", n);
            bind(root, p, 1, 0);
        }
        bind(root, "/sys", 0, 1);
    }
    fresh_tmpfs(root, "/tmp", "size=256m,mode=1777");
    fresh_tmpfs(root, "/var/tmp", "size=256m,mode=1777");
    fresh_tmpfs(root, "/dev/shm", "size=256m,mode=1777");
    for (int i = 0; i < n_ro; ++i)
        bind(root, ro[i], 0, 0);
    for (int i = 0; i < n_rw; ++i)
        bind(root, rw[i], 1, 0);
}

/* Every capability gone: the bounding set, then the sets of this process. */
static void drop_caps(void) {
    for (int cap = 0; cap <= 63; ++cap)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
            die("cannot drop a capability", NULL);
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capset, &h, d) != 0)
        die("cannot clear the capabilities", NULL);
}

/* Starts llvm-symbolizer-14 reading addresses on a pipe; fills to/from (the program's ends). */
static int start_symbolizer(int *to, int *from) {
    int in[2], out[2]; /* the symbolizer's stdin and stdout */
    if (pipe(in) != 0 || pipe(out) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || (null >= 0 && dup2(null, 2) < 0))
            _exit(127);
        for (int fd = 3; fd < 1024; ++fd)
            close(fd);
        execlp("llvm-symbolizer-14", "llvm-symbolizer-14", "--functions=none", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    *to = in[1];
    *from = out[0];
    return 0;
}

static int limit_of(const char *name) {
    static const struct {
        const char *name;
        int resource;
    } known[] = {
        {"cpu", RLIMIT_CPU}, {"as", RLIMIT_AS}, {"fsize", RLIMIT_FSIZE}, {"nproc", RLIMIT_NPROC}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i)
        if (strcmp(known[i].name, name) == 0)
            return known[i].resource;
    return -1;
}

int main(int argc, char **argv) {
    const char *root = NULL, *wd = NULL;
    char *ro[MAX_PATHS], *rw[MAX_PATHS];
    int n_ro = 0, n_rw = 0, devices = 0, drop = 0, filter = 0, gpu = 0, symbolizer = 0;
    long uid = -1;
    struct rlimit limits[RLIM_NLIMITS];
    int limited[RLIM_NLIMITS] = {0};
    int a = 1;
    for (; a < argc && strcmp(argv[a], "--") != 0; ++a) {
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (strcmp(o, "--root") == 0 && v)
            root = argv[++a];
        else if (strcmp(o, "--wd") == 0 && v)
            wd = argv[++a];
        else if (strcmp(o, "--ro") == 0 && v && n_ro < MAX_PATHS)
            ro[n_ro++] = argv[++a];
        else if (strcmp(o, "--rw") == 0 && v && n_rw < MAX_PATHS)
            rw[n_rw++] = argv[++a];
        else if (strcmp(o, "--uid") == 0 && v)
            uid = strtol(argv[++a], NULL, 10);
        else if (strcmp(o, "--limit") == 0 && v && strchr(v, '=')) {
            char name[16];
            snprintf(name, sizeof name, "%.*s", (int)(strchr(v, '=') - v), v);
            int r = limit_of(name);
            if (r < 0)
                break;
            limits[r].rlim_cur = limits[r].rlim_max = strtoull(strchr(v, '=') + 1, NULL, 10);
            limited[r] = 1;
            ++a;
        } else if (strcmp(o, "--devices") == 0)
            devices = 1;
        else if (strcmp(o, "--drop-caps") == 0)
            drop = 1;
        else if (strcmp(o, "--filter") == 0)
            filter = 1;
        else if (strcmp(o, "--gpu") == 0)
            gpu = 1;
        else if (strcmp(o, "--symbolizer") == 0)
            symbolizer = 1;
        else
            break;
    }
    if (a + 1 >= argc || strcmp(argv[a], "--") != 0 || (root && !wd)) {
        fprintf(stderr,
                "usage: grader_exec [--root DIR --wd DIR [--ro P]... [--rw P]... "
                "[--devices]] [--uid N | --drop-caps] [--limit RES=N]... [--filter "
                "[--gpu] [--symbolizer]] -- PROGRAM ARGS... (started by grader/grade.py)\n");
        return 2;
    }
    ++a;
    if (root) {
        make_root(root, ro, n_ro, rw, n_rw, devices);
        /* This process stays the PID namespace's first one (the kernel ignores some signals
         * sent to that one, e.g. abort()'s SIGABRT): the step runs as its child. */
        pid_t child = fork();
        if (child < 0)
            die("cannot fork", NULL);
        if (child > 0) {
            int status;
            while (waitpid(child, &status, 0) < 0)
                if (errno != EINTR)
                    return 2;
            return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        }
        if (chroot(root) != 0)
            die("cannot enter the root", root);
        if (chdir(wd) != 0)
            die("cannot enter", wd);
    }
    for (int r = 0; r < RLIM_NLIMITS; ++r)
        if (limited[r] && setrlimit(r, &limits[r]) != 0)
            die("cannot set a limit", NULL);
    if (uid >= 0 && (setgroups(0, NULL) != 0 || setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) ||
                     setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid)))
        die("cannot become the sandbox user", NULL);
    if (drop)
        drop_caps();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        die("cannot set no_new_privs", NULL);
    char **args = calloc((size_t)(argc - a + 3), sizeof *args);
    if (args == NULL)
        return 2;
    int n = 0;
    for (int i = a; i < argc; ++i)
        args[n++] = argv[i];
    char fds[32];
    int to = -1, from = -1;
    if (filter && symbolizer && start_symbolizer(&to, &from) == 0) {
        snprintf(fds, sizeof fds, "%d,%d", to, from);
        args[n++] = "--symbolizer";
        args[n++] = fds;
    }
    args[n] = NULL;
    if (filter && grader_seccomp(GRADER_FILTER_BASE, getpid(), gpu) != 0)
        fprintf(stderr, "grader_exec: warning: no seccomp filter on this system\n");
    execv(args[0], args);
    perror("grader_exec: cannot execute the step's program");
    return 127;
}
