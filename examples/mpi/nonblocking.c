/*
 * nonblocking: a late sender seen at the completion call of non-blocking operations
 * (Scalasca's Late Sender, in MPI_Waitall).
 *
 * 2 ranks exchanging one int each way.  In each of ITERATIONS rounds rank 0 posts
 * MPI_Irecv from rank 1 and MPI_Isend to rank 1 and calls MPI_Waitall on both at once; rank
 * 1 sleeps DELAY_MS (nanosleep) and then posts MPI_Isend to rank 0 and MPI_Irecv from rank
 * 0 and calls MPI_Waitall.  Rank 0's send is small and goes out eagerly, so its Waitall
 * waits only for rank 1's message: about DELAY_MS.  Rank 1's Waitall returns at once (rank
 * 0's message arrived long ago).  An MPI_Barrier before the loop makes the ranks start
 * together, and one after every round keeps the rounds independent; it is nearly balanced.
 *
 * Statuses: rank 0, the waiting side, passes MPI_STATUSES_IGNORE to MPI_Waitall, so a
 * tracer that needs the receive's status (source, tag, size) to match it with rank 1's send
 * has to substitute its own status array; rank 1 passes a real array and checks it.
 *
 * Expected: Late Sender at MPI_Waitall on rank 0 (the receive posted by MPI_Irecv from
 * rank 1, completed there), caused by rank 1, ≈ DELAY_MS per round.
 *
 * Truth, printed by rank 1 (the rank that slept and measured it) after the loop:
 *   truth: pattern=late-sender rank=0 cause=1 delay_ns=N count=K function=MPI_Waitall
 * N = the sum over rounds of rank 1's sleep, measured on CLOCK_MONOTONIC around nanosleep
 * (rank 0 does not sleep, so nothing is subtracted); K = ITERATIONS.  With DELAY_MS 0
 * nothing is planted and no truth line is printed.
 *
 * usage: mpirun -np 2 nonblocking [DELAY_MS] [ITERATIONS]
 * defaults: 100 3   (about 0.3 s)
 *
 * build: mpicc -O2 -g -Wall -Wextra nonblocking.c -o nonblocking
 */
#define PROGRAM "nonblocking"
#define RANKS 2
#define ABOUT "rank 0: MPI_Irecv, MPI_Isend, MPI_Waitall at once; rank 1 sleeps delay_ms first\n"
/* ---- helpers (the same in every MPI example; each file stands alone so that it can be
 * built from its embedded source) ---------------------------------------------------- */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The planted delay: sleep `ms` milliseconds with nanosleep (resumed after a signal) and
 * return the time actually slept, measured on CLOCK_MONOTONIC around the sleep.  nanosleep
 * overshoots by tens of µs (more on a loaded machine, where the woken rank may wait for a
 * CPU): the truth is what was measured, not what was asked. */
static int64_t planted_sleep(long ms)
{
    struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
    int64_t t0 = now_ns();
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
    return now_ns() - t0;
}

/* `[delay_ms] [iterations]`, defaults 100 and 3.  Every rank parses the same arguments;
 * rank 0 alone explains a mistake.  Returns 0 if they are good; `-h` prints the usage and
 * ends the program. */
static int parse_args(int argc, char **argv, int rank, long *delay_ms, long *iterations)
{
    static const long min[2] = {0, 1}, max[2] = {60000, 1000000};
    long *out[2] = {delay_ms, iterations};
    *delay_ms = 100;
    *iterations = 3;
    int help = argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
    if (help || argc > 3) {
        if (rank == 0)
            fprintf(help ? stdout : stderr,
                    "usage: mpirun -np %d %s [delay_ms] [iterations]   (defaults 100 3)\n%s",
                    RANKS, PROGRAM, ABOUT);
        if (!help)
            return 1;
        MPI_Finalize();
        exit(0);
    }
    for (int i = 1; i < argc; i++) {
        char *end;
        long v = strtol(argv[i], &end, 10);
        if (*argv[i] == 0 || *end != 0 || v < min[i - 1] || v > max[i - 1]) {
            if (rank == 0)
                fprintf(stderr, "%s: %s wants an integer in [%ld, %ld], got '%s'\n", PROGRAM,
                        i == 1 ? "delay_ms" : "iterations", min[i - 1], max[i - 1],
                        argv[i]);
            return 1;
        }
        *out[i - 1] = v;
    }
    return 0;
}

/* The program is written for exactly RANKS ranks: rank 0 says so if run with another
 * number.  Returns 0 if the count is right. */
static int check_ranks(int rank, int size)
{
    if (size == RANKS)
        return 0;
    if (rank == 0)
        fprintf(stderr,
                "%s: needs exactly %d MPI ranks, got %d: run it as\n"
                "  mpirun -np %d %s [delay_ms] [iterations]\n",
                PROGRAM, RANKS, size, RANKS, PROGRAM);
    return 1;
}

/* One truth line: `waiter` waited in `function` for `cause`, `count` planted times,
 * `delay_ns` in all.  Called after the measured loop only. */
static void print_truth(const char *pattern, int waiter, int cause, int64_t delay_ns,
                        long count, const char *function)
{
    printf("truth: pattern=%s rank=%d cause=%d delay_ns=%lld count=%ld function=%s\n",
           pattern, waiter, cause, (long long)delay_ns, count, function);
    fflush(stdout);
}

/* The moment this rank left each barrier that starts a round, and the last one
 * (CLOCK_MONOTONIC), printed after the loop as one line per rank:
 *   exits: rank=R ns=E0,E1,...,En barrier_ns=T
 * A rank kept off the CPU leaves a barrier late and so starts its planted round late, which
 * moves the wait it causes or suffers by as much: tests allow for the spread of these
 * moments across ranks (on one machine, where the ranks share CLOCK_MONOTONIC).  T is the
 * time it spent inside the rounds' barriers: all the waiting that was not planted (on a
 * loaded machine, a polling rank that yields its CPU can take many time slices of other
 * programs to finish a call). */
static void print_exits(int rank, const int64_t *exits, long n, int64_t in_barriers)
{
    size_t cap = 64 + (size_t)n * 21;
    char *line = exits ? malloc(cap) : NULL;
    if (!line)
        return;
    size_t at = (size_t)snprintf(line, cap, "exits: rank=%d ns=", rank);
    for (long i = 0; i < n; i++)
        at += (size_t)snprintf(line + at, cap - at, "%s%lld", i ? "," : "", (long long)exits[i]);
    snprintf(line + at, cap - at, " barrier_ns=%lld\n", (long long)in_barriers);
    fputs(line, stdout); /* one write even where MPI leaves stdout unbuffered: ranks' lines */
    fflush(stdout);      /* do not interleave */
    free(line);
}
/* ----------------------------------------------------------------------------------- */

#define TAG 7

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long delay_ms, iterations;
    if (parse_args(argc, argv, rank, &delay_ms, &iterations) || check_ranks(rank, size)) {
        MPI_Finalize();
        return 2;
    }

    int64_t slept_ns = 0; /* rank 1: the measured planted sleeps, summed */
    long planted = 0, wrong = 0;
    int64_t *exits = calloc((size_t)iterations + 1, sizeof *exits); /* see print_exits */
    int64_t in_barriers = 0; /* time inside the rounds' barriers (see print_exits) */
    MPI_Barrier(MPI_COMM_WORLD); /* start together */
    for (long i = 0; i < iterations; i++) {
        if (exits)
            exits[i] = now_ns();
        MPI_Request req[2];
        int out = 2 * (int)i + rank, in = -1; /* rank 0 sends even, rank 1 odd numbers */
        if (rank == 0) {
            MPI_Irecv(&in, 1, MPI_INT, 1, TAG, MPI_COMM_WORLD, &req[0]);
            MPI_Isend(&out, 1, MPI_INT, 1, TAG, MPI_COMM_WORLD, &req[1]);
/* MPICH defines MPI_STATUSES_IGNORE as (MPI_Status *)1, and GCC >= 11 warns that MPI_Waitall
 * would write statuses into a region of size 0 (a false positive, which MPICH will not
 * change: github.com/pmodels/mpich/issues/5687). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE); /* the wait */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
            wrong += in != 2 * (int)i + 1;
        } else {
            if (delay_ms > 0) {
                slept_ns += planted_sleep(delay_ms);
                planted++;
            }
            MPI_Status status[2];
            MPI_Isend(&out, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD, &req[0]);
            MPI_Irecv(&in, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD, &req[1]);
            MPI_Waitall(2, req, status);
            wrong += in != 2 * (int)i || status[1].MPI_SOURCE != 0 || status[1].MPI_TAG != TAG;
        }
        int64_t entered = now_ns();
        MPI_Barrier(MPI_COMM_WORLD); /* keep the rounds independent */
        in_barriers += now_ns() - entered;
    }
    if (exits)
        exits[iterations] = now_ns(); /* left the last barrier */

    if (wrong)
        fprintf(stderr, "%s: rank %d received %ld wrong messages\n", PROGRAM, rank, wrong);
    if (rank == 1 && planted > 0)
        print_truth("late-sender", 0, 1, slept_ns, planted, "MPI_Waitall");
    print_exits(rank, exits, iterations + 1, in_barriers);
    free(exits);
    MPI_Finalize();
    return wrong ? 1 : 0;
}
