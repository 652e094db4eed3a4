/*
 * atomic_counter: true sharing -- one `_Atomic long` incremented by every thread.
 *
 * All threads add 1 to the global `counter.value` ITERS times (atomic_fetch_add, relaxed order).
 * Every thread reads and writes the same 8 bytes: the line moves on every increment, and no
 * layout can fix that -- it is true sharing and must never be called false sharing.  (The
 * fix is algorithmic: per-thread counts summed at the end.)  With `padded`, that is what the
 * program does instead: each thread counts into its own line-aligned slot of
 * `private_counts` and the slots are added up after the join (case=none).
 *
 * It prints what it planted, e.g.
 *   truth: program=atomic_counter case=true-sharing object=counter kind=global size=64
 *          addr=0x55d0c1a4c040 fields=value@0+8 threads=2 iters=10000000
 * (one line; `padded`: case=none object=private_counts size=16384 fields=counts[0]@0+8,
 * counts[1]@64+8), then `done: elapsed_ns=N total=T` where T = THREADS x ITERS.
 *
 * usage: atomic_counter [-t THREADS] [-n ITERS] [padded]
 * defaults: -t 2 -n 10000000   (about 0.3 s on 2 CPUs, uninstrumented)
 *
 * build: contend cc -- cc -O2 -g atomic_counter.c -o atomic_counter
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The counter, on a line of its own (the type's alignment pads it to 64 bytes). */
struct shared_counter {
    _Alignas(64) _Atomic long value;
};
struct shared_counter counter;

/* The fix: one line per thread. */
struct slot {
    _Alignas(64) _Atomic long count;
};
struct slot private_counts[256];

static long iters = 10000000;
static int nthreads = 2;
static int padded;
static pthread_barrier_t start;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-t THREADS (1..256)] [-n ITERS] [padded]\n", prog);
    exit(2);
}

static long number(const char *prog, const char *s, long min, long max)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > max)
        usage(prog);
    return v;
}

__attribute__((noinline)) static void count(_Atomic long *c)
{
    for (long i = 0; i < iters; i++)
        atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    count(padded ? &private_counts[id].count : &counter.value);
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            nthreads = (int)number(argv[0], argv[++i], 1, 256);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            iters = number(argv[0], argv[++i], 1, 1L << 40);
        else if (!strcmp(argv[i], "padded") || !strcmp(argv[i], "-p"))
            padded = 1;
        else
            usage(argv[0]);
    }
    if (padded) {
        printf("truth: program=atomic_counter case=none object=private_counts kind=global "
               "size=%zu addr=%p fields=",
               sizeof private_counts, (void *)private_counts);
        for (int i = 0; i < nthreads; i++)
            printf("%scounts[%d]@%zu+8", i ? "," : "", i, (size_t)i * sizeof(struct slot));
        printf(" threads=%d iters=%ld\n", nthreads, iters);
    } else {
        printf("truth: program=atomic_counter case=%s object=counter kind=global size=%zu "
               "addr=%p fields=value@0+8 threads=%d iters=%ld\n",
               nthreads > 1 ? "true-sharing" : "none", sizeof counter, (void *)&counter, nthreads,
               iters);
    }
    fflush(stdout);

    pthread_t t[256];
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    int64_t t0 = now_ns();
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) != 0) {
            perror("pthread_create");
            return 1;
        }
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    int64_t t1 = now_ns();
    long total = atomic_load(&counter.value);
    for (int i = 0; i < nthreads; i++)
        total += atomic_load(&private_counts[i].count);
    printf("done: elapsed_ns=%lld total=%ld\n", (long long)(t1 - t0), total);
    return total == (long)nthreads * iters ? 0 : 1;
}
