/*
 * The MPI wrapper's cost per unsuccessful poll (scripts/bench-mpi-poll.sh): one rank calls
 * MPI_Test N times on a receive that cannot complete (posted on MPI_COMM_SELF, never sent),
 * and prints the CPU time per call (CLOCK_THREAD_CPUTIME_ID around the loop: time the rank
 * spent, not time other programs took from it).
 *
 *   mpirun -np 1 mpi_poll_cost [N] [test|testany]      (defaults 20000000, test)
 *
 * `testany`: MPI_Testany on an array of that one request (as hpcc's MPIRandomAccess polls).
 *
 * Prints one line: `ns_per_call=X calls=N unsuccessful=U`; U must equal N.
 *
 * build: mpicc -O2 -g mpi_poll_cost.c -o mpi_poll_cost
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : 20000000L;
    if (n <= 0) {
        fprintf(stderr, "usage: mpirun -np 1 mpi_poll_cost [N > 0]\n");
        MPI_Finalize();
        return 2;
    }
    int buf = 0, flag = 0;
    MPI_Request req;
    MPI_Irecv(&buf, 1, MPI_INT, 0, 999, MPI_COMM_SELF, &req);
    int any = argc > 2 && strcmp(argv[2], "testany") == 0;
    long unsuccessful = 0;
    double t0 = cpu_ns();
    if (any) {
        for (long i = 0; i < n; i++) {
            int index;
            MPI_Testany(1, &req, &index, &flag, MPI_STATUS_IGNORE);
            unsuccessful += !flag;
        }
    } else {
        for (long i = 0; i < n; i++) {
            MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            unsuccessful += !flag;
        }
    }
    double t1 = cpu_ns();
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    printf("ns_per_call=%.2f calls=%ld unsuccessful=%ld\n", (t1 - t0) / (double)n, n,
           unsuccessful);
    MPI_Finalize();
    return unsuccessful == n ? 0 : 1;
}
