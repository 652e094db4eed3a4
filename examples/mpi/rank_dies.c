/*
 * rank_dies: a job that loses a rank part-way (SIGKILL or MPI_Abort), for checking what a
 * recording keeps of the others.
 *
 * 2 ranks.  First ITERATIONS rounds of a planted Late Sender (as late_sender.c: rank 0 sleeps
 * DELAY_MS, then MPI_Sends one int to rank 1, which waits in MPI_Recv; an MPI_Barrier ends
 * every round).  Then PINGPONGS quick round trips (rank 0 MPI_Send, rank 1 MPI_Recv and
 * MPI_Send back, rank 0 MPI_Recv), a few ms in all.  Then rank 1 sleeps LINGER_MS (as a rank
 * computing before it crashes would) and ends:
 *   kill   raise(SIGKILL): the rank vanishes without a word;
 *   abort  MPI_Abort(MPI_COMM_WORLD, 3): the launcher ends the job.
 * Rank 0
 * meanwhile waits in an MPI_Recv from rank 1 that never comes, until the launcher kills it.
 * The wrapper writes out records that have waited 50 ms, so everything both ranks did before
 * is on disk by then (the call rank 0 was blocked in is not: a call is written when it
 * returns).
 *
 * Truth, printed by rank 0 before its last receive:
 *   truth: pattern=late-sender rank=1 cause=0 delay_ns=N count=K function=MPI_Recv
 *   done: pingpongs=P
 * (N = the sum of rank 0's measured sleeps, K = ITERATIONS, P = PINGPONGS completed.)
 *
 * usage: mpirun -np 2 rank_dies kill|abort [DELAY_MS] [ITERATIONS] [PINGPONGS] [LINGER_MS]
 * defaults: 100 2 200 250
 *
 * build: mpicc -O2 -g -Wall -Wextra rank_dies.c -o rank_dies
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRAM "rank_dies"
#define TAG 7
#define PING_TAG 8
#define NEVER_TAG 9

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Sleeps `ms` and returns the time actually slept (the truth is what was measured). */
static int64_t planted_sleep(long ms)
{
    struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
    int64_t t0 = now_ns();
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
    return now_ns() - t0;
}

static long arg(int argc, char **argv, int i, long dflt, long max)
{
    if (argc <= i)
        return dflt;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*argv[i] == 0 || *end != 0 || v < 0 || v > max) {
        fprintf(stderr, "%s: argument %d wants an integer in [0, %ld], got '%s'\n", PROGRAM, i,
                max, argv[i]);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = argc > 1 ? argv[1] : "";
    int kill_mode = strcmp(mode, "kill") == 0, abort_mode = strcmp(mode, "abort") == 0;
    if ((!kill_mode && !abort_mode) || size != 2) {
        if (rank == 0)
            fprintf(stderr,
                    "usage: mpirun -np 2 %s kill|abort [delay_ms] [iterations] [pingpongs] "
                    "[linger_ms]\n",
                    PROGRAM);
        MPI_Finalize();
        return 2;
    }
    long delay_ms = arg(argc, argv, 2, 100, 60000);
    long iterations = arg(argc, argv, 3, 2, 1000000);
    long pingpongs = arg(argc, argv, 4, 200, 1000000);
    long linger_ms = arg(argc, argv, 5, 250, 60000);

    int64_t slept_ns = 0, in_barriers = 0;
    /* When this rank left the barrier starting each round, and the last one, and its time
     * inside the rounds' barriers: printed as in the other examples (`exits:`, see
     * README.md), for tests to allow for a rank kept off the CPU on a loaded machine. */
    int64_t *exits = calloc((size_t)iterations + 1, sizeof *exits);
    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = 0; i < iterations; i++) {
        int msg = (int)i;
        if (exits)
            exits[i] = now_ns();
        if (rank == 0) {
            slept_ns += planted_sleep(delay_ms);
            MPI_Send(&msg, 1, MPI_INT, 1, TAG, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&msg, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* the wait */
        }
        int64_t entered = now_ns();
        MPI_Barrier(MPI_COMM_WORLD);
        in_barriers += now_ns() - entered;
    }
    size_t cap = 64 + ((size_t)iterations + 1) * 21;
    char *line = exits ? malloc(cap) : NULL;
    if (line) { /* built whole and written at once, so that ranks' lines do not interleave */
        exits[iterations] = now_ns();
        size_t at = (size_t)snprintf(line, cap, "exits: rank=%d ns=", rank);
        for (long i = 0; i <= iterations; i++)
            at += (size_t)snprintf(line + at, cap - at, "%s%lld", i ? "," : "",
                                   (long long)exits[i]);
        snprintf(line + at, cap - at, " barrier_ns=%lld\n", (long long)in_barriers);
        fputs(line, stdout); /* one write even where MPI leaves stdout unbuffered */
        fflush(stdout);
    }
    free(line);
    free(exits);
    long done = 0;
    for (long i = 0; i < pingpongs; i++) {
        int msg = (int)i;
        if (rank == 0) {
            MPI_Send(&msg, 1, MPI_INT, 1, PING_TAG, MPI_COMM_WORLD);
            MPI_Recv(&msg, 1, MPI_INT, 1, PING_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&msg, 1, MPI_INT, 0, PING_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&msg, 1, MPI_INT, 0, PING_TAG, MPI_COMM_WORLD);
        }
        done++;
    }
    if (rank == 0) {
        printf("truth: pattern=late-sender rank=1 cause=0 delay_ns=%lld count=%ld "
               "function=MPI_Recv\n",
               (long long)slept_ns, iterations);
        printf("done: pingpongs=%ld\n", done);
        fflush(stdout);
        int never;
        MPI_Recv(&never, 1, MPI_INT, 1, NEVER_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        fprintf(stderr, "%s: rank 0 received a message nobody sent\n", PROGRAM);
    } else {
        /* Let rank 0 print and reach its last receive first. */
        planted_sleep(linger_ms);
        if (kill_mode)
            raise(SIGKILL);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Finalize();
    return 1;
}
