/*
 * late_receiver: a synchronous send that waits for its receive to be posted (Scalasca's
 * Late Receiver).
 *
 * 2 ranks.  In each of ITERATIONS rounds rank 0 calls MPI_Ssend of a 4 MiB message to rank 1
 * at once; rank 1 sleeps DELAY_MS (nanosleep) and only then calls MPI_Recv.  A synchronous
 * send cannot complete before the matching receive has started (and 4 MiB is far above
 * any eager limit anyway), so rank 0 sits in MPI_Ssend for about DELAY_MS, then both copy
 * the 4 MiB (about a millisecond) and return at nearly the same time.  Both buffers are
 * allocated and touched before the loop, so no page faults land in the measured part.  An
 * MPI_Barrier before the loop makes the ranks start together, and one after every round
 * keeps the rounds independent; it is nearly balanced.
 *
 * Expected: Late Receiver, waiting rank 0 in MPI_Ssend, caused by rank 1, ≈ DELAY_MS per
 * round.
 *
 * Truth, printed by rank 1 (the rank that slept and measured it) after the loop:
 *   truth: pattern=late-receiver rank=0 cause=1 delay_ns=N count=K function=MPI_Ssend
 * N = the sum over rounds of rank 1's sleep, measured on CLOCK_MONOTONIC around nanosleep
 * (rank 0 does not sleep, so nothing is subtracted); K = ITERATIONS.  The transfer itself
 * is not counted: it is not a wait state.  With DELAY_MS 0 nothing is planted and no truth
 * line is printed.
 *
 * usage: mpirun -np 2 late_receiver [DELAY_MS] [ITERATIONS]
 * defaults: 100 3   (about 0.3 s)
 *
 * build: mpicc -O2 -g -Wall -Wextra late_receiver.c -o late_receiver
 */
#define PROGRAM "late_receiver"
#define RANKS 2
#define ABOUT "rank 0 MPI_Ssends 4 MiB to rank 1 at once; rank 1 sleeps delay_ms before MPI_Recv\n"
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
#define BYTES (4 << 20)
#define STAMP 4096 /* every STAMP-th byte carries the round number, checked on receipt */

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

    unsigned char *buf = malloc(BYTES);
    if (!buf) {
        fprintf(stderr, "%s: rank %d: out of memory\n", PROGRAM, rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    memset(buf, rank == 0 ? 0 : 0xff, BYTES); /* touch every page before the loop */

    int64_t slept_ns = 0; /* rank 1: the measured planted sleeps, summed */
    long planted = 0, wrong = 0;
    int64_t *exits = calloc((size_t)iterations + 1, sizeof *exits); /* see print_exits */
    int64_t in_barriers = 0; /* time inside the rounds' barriers (see print_exits) */
    MPI_Barrier(MPI_COMM_WORLD); /* start together */
    for (long i = 0; i < iterations; i++) {
        if (exits)
            exits[i] = now_ns();
        if (rank == 0) {
            for (size_t at = 0; at < BYTES; at += STAMP)
                buf[at] = (unsigned char)(i + 1); /* stamp the round into every page */
            MPI_Ssend(buf, BYTES, MPI_BYTE, 1, TAG, MPI_COMM_WORLD); /* the wait */
        } else {
            if (delay_ms > 0) {
                slept_ns += planted_sleep(delay_ms);
                planted++;
            }
            MPI_Status status;
            MPI_Recv(buf, BYTES, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, &status);
            int count;
            MPI_Get_count(&status, MPI_BYTE, &count);
            long bad = count != BYTES;
            for (size_t at = 0; at < BYTES; at += STAMP)
                bad |= buf[at] != (unsigned char)(i + 1);
            wrong += bad;
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
        print_truth("late-receiver", 0, 1, slept_ns, planted, "MPI_Ssend");
    free(buf);
    print_exits(rank, exits, iterations + 1, in_barriers);
    free(exits);
    MPI_Finalize();
    return wrong ? 1 : 0;
}
