/* grader_exec.c — starts the submission's program under the base seccomp filter
 * (grader_seccomp.h), so that its static constructors, which run before its main(), are
 * filtered too (grader/README.md, "The sandbox"). grade.py runs, inside the case's sandbox:
 *
 *   grader_exec [--symbolizer] -- PROGRAM ARGS...
 *
 * --symbolizer (the checked build, whose reports name source lines): starts llvm-symbolizer-14
 * first, which the filtered program could not start itself, and passes it to the program as
 * `--symbolizer TO_FD,FROM_FD` (its stdin, its stdout; cudasim_set_symbolizer). Then it installs
 * the filter and executes PROGRAM with ARGS (the inherited descriptors stay open). Trusted: built
 * with the chapter, never with a submission. Exit status 2 on a bad command line, 127 if PROGRAM
 * cannot be executed. */
#define _GNU_SOURCE /* pipe2 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "grader_seccomp.h"

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

int main(int argc, char **argv) {
    int a = 1;
    int symbolizer = 0, gpu = 0;
    for (; a < argc && strncmp(argv[a], "--", 2) == 0 && argv[a][2] != '\0'; ++a) {
        if (strcmp(argv[a], "--symbolizer") == 0)
            symbolizer = 1;
        else if (strcmp(argv[a], "--gpu") == 0)
            gpu = 1;
        else
            break;
    }
    if (a + 1 >= argc || strcmp(argv[a], "--") != 0) {
        fprintf(stderr, "usage: grader_exec [--gpu] [--symbolizer] -- PROGRAM ARGS... (started by "
                        "grader/grade.py)\n");
        return 2;
    }
    ++a;
    char **args = calloc((size_t)(argc - a + 3), sizeof *args);
    if (args == NULL)
        return 2;
    int n = 0;
    for (int i = a; i < argc; ++i)
        args[n++] = argv[i];
    char fds[32];
    int to = -1, from = -1;
    if (symbolizer && start_symbolizer(&to, &from) == 0) {
        snprintf(fds, sizeof fds, "%d,%d", to, from);
        args[n++] = "--symbolizer";
        args[n++] = fds;
    }
    args[n] = NULL;
    if (grader_seccomp(GRADER_FILTER_BASE, getpid(), gpu) != 0)
        fprintf(stderr, "grader_exec: warning: no seccomp filter on this system\n");
    execv(args[0], args);
    perror("grader_exec: cannot execute the submission's program");
    return 127;
}
