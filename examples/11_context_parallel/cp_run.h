/* cp_run.h — example 11's program around the strategies: flags, the ranks' set-up, the inputs,
 * the gathered result and its checks, the work table. main.c calls it between MPI_Init and
 * MPI_Finalize. */
#ifndef CP_RUN_H
#define CP_RUN_H

#ifdef __cplusplus
extern "C" {
#endif

/* --ranks N outside mpirun: runs this program again under mpirun with N ranks (exec; does not
 * return unless that fails, then exits 2). Bad flags (exit 2) and, on a gpu build, no GPU (exit
 * 77) are said once before mpirun starts. Returns without doing anything when --ranks is not
 * given or the process already runs under mpirun. Before MPI_Init. */
void cp_relaunch(int argc, char **argv);

/* The program; returns its exit status (0 pass, 1 a check failed or an error, 2 bad input on
 * every rank, 77 no GPU). */
int cp_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* CP_RUN_H */
