/*
 * The MPI wrapper's cost (scripts/bench-mpi.sh): per call, and on a ping-pong loop.
 *
 *   mpirun -np 1 mpi_pingpong calls N      N calls of MPI_Iprobe (a local call that returns at
 *                                          once): prints ns per call
 *   mpirun -np 2 mpi_pingpong pingpong N   N round trips of an 8-byte message between ranks 0
 *                                          and 1 (MPI_Send/MPI_Recv): prints ns per round trip
 *
 * Timed with CLOCK_MONOTONIC after a warm-up of N/10; rank 0 prints `ns_per_op=X`.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void probes(long n)
{
    int flag;
    MPI_Status st;
    for (long i = 0; i < n; i++)
        MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, &st);
}

static void pingpong(int rank, long n)
{
    char buf[8] = {0};
    for (long i = 0; i < n; i++) {
        if (rank == 0) {
            MPI_Send(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3 || (strcmp(argv[1], "calls") && strcmp(argv[1], "pingpong"))) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_pingpong calls|pingpong N\n");
        MPI_Finalize();
        return 2;
    }
    long n = atol(argv[2]);
    int pp = !strcmp(argv[1], "pingpong");
    if (pp && size < 2) {
        if (rank == 0)
            fprintf(stderr, "mpi_pingpong pingpong needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    if (pp)
        pingpong(rank, n / 10);
    else
        probes(n / 10);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_ns();
    if (pp)
        pingpong(rank, n);
    else
        probes(n);
    double t1 = now_ns();
    if (rank == 0)
        printf("ns_per_op=%.1f\n", (t1 - t0) / (double)n);
    MPI_Finalize();
    return 0;
}
