/*
 * poll_test: a late sender whose receiver polls MPI_Test in a loop (the MPI_Wait of
 * nonblocking.c written as a polling loop, as hpcc's MPIRandomAccess does). Built with
 * -DPOLL_TESTANY (poll_testany) it polls MPI_Testany on an array of its one request instead,
 * as MPIRandomAccess also does; "MPI_Test" below then reads "MPI_Testany".
 *
 * 2 ranks.  In each of ITERATIONS rounds rank 0 sleeps DELAY_MS (nanosleep) and then sends
 * one int to rank 1 with MPI_Send; rank 1 posts MPI_Irecv at once and calls MPI_Test until
 * the message is there, counting the calls that found nothing.  Barriers as in
 * late_sender.c.  The wrapper records each run of unsuccessful tests as one event (first
 * poll, count, end), so the trace stays small however many polls there are.
 *
 * Expected: Late Sender, waiting rank 1 in MPI_Test (from its first poll to the successful
 * one, as an MPI_Wait would), caused by rank 0, about DELAY_MS per round.
 *
 * Truth, printed by rank 0 after the loop:
 *   truth: pattern=late-sender rank=1 cause=0 delay_ns=N count=K function=MPI_Test
 *   polls: rank=1 function=MPI_Test unsuccessful=P
 * N, K as in late_sender.c; P = rank 1's unsuccessful MPI_Test calls in the loop (sent to
 * rank 0 after it).
 *
 * usage: mpirun -np 2 poll_test [DELAY_MS] [ITERATIONS]
 * defaults: 100 3   (about 0.3 s)
 *
 * build: mpicc -O2 -g -Wall -Wextra poll_test.c -o poll_test
 */
#ifdef POLL_TESTANY
#define PROGRAM "poll_testany"
#define FUNCTION "MPI_Testany"
#else
#define PROGRAM "poll_test"
#define FUNCTION "MPI_Test"
#endif
#define RANKS 2
#define ABOUT "rank 0 sleeps delay_ms and then MPI_Sends to rank 1, which polls " FUNCTION " on its MPI_Irecv\n"
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

    int64_t slept_ns = 0; /* rank 0: the measured planted sleeps, summed */
    long planted = 0, wrong = 0;
    long long unsuccessful = 0; /* rank 1: polls that found nothing */
    int64_t *exits = calloc((size_t)iterations + 1, sizeof *exits); /* see print_exits */
    int64_t in_barriers = 0; /* time inside the rounds' barriers (see print_exits) */
    MPI_Barrier(MPI_COMM_WORLD); /* start together */
    for (long i = 0; i < iterations; i++) {
        if (exits)
            exits[i] = now_ns();
        int msg = (int)i;
        if (rank == 0) {
            if (delay_ms > 0) {
                slept_ns += planted_sleep(delay_ms);
                planted++;
            }
            MPI_Send(&msg, 1, MPI_INT, 1, TAG, MPI_COMM_WORLD);
        } else {
            MPI_Request req;
            MPI_Status status;
            int flag = 0;
            MPI_Irecv(&msg, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD, &req);
            for (;;) {
#ifdef POLL_TESTANY
                int index;
                MPI_Testany(1, &req, &index, &flag, &status); /* the wait, polled */
#else
                MPI_Test(&req, &flag, &status); /* the wait, polled */
#endif
                if (flag)
                    break;
                unsuccessful++;
            }
            wrong += msg != (int)i || status.MPI_SOURCE != 0 || status.MPI_TAG != TAG;
        }
        int64_t entered = now_ns();
        MPI_Barrier(MPI_COMM_WORLD); /* keep the rounds independent */
        in_barriers += now_ns() - entered;
    }
    if (exits)
        exits[iterations] = now_ns(); /* left the last barrier */

    /* Rank 1's count of unsuccessful polls goes into rank 0's truth line. */
    if (rank == 1)
        MPI_Send(&unsuccessful, 1, MPI_LONG_LONG, 0, TAG + 1, MPI_COMM_WORLD);
    else
        MPI_Recv(&unsuccessful, 1, MPI_LONG_LONG, 1, TAG + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (wrong)
        fprintf(stderr, "%s: rank %d received %ld wrong messages\n", PROGRAM, rank, wrong);
    if (rank == 0 && planted > 0) {
        print_truth("late-sender", 1, 0, slept_ns, planted, FUNCTION);
        printf("polls: rank=1 function=%s unsuccessful=%lld\n", FUNCTION, unsuccessful);
        fflush(stdout);
    }
    print_exits(rank, exits, iterations + 1, in_barriers);
    free(exits);
    MPI_Finalize();
    return wrong ? 1 : 0;
}
