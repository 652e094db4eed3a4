/*
 * lock_and_data: a lock and hot data in one cache line -- the perf c2c slides' `struct maps`
 * case (a reader-writer lock followed by the fields it protects, and a statistics field that
 * a different thread updates).
 *
 *     struct maps {                       offset  size
 *         pthread_rwlock_t lock;               0    56   taken for reading by the readers
 *         int nr_maps;                        56     4   read by the readers under the lock
 *         int updates;                        60     4   written by the updater, no lock
 *     };                                  (aligned to 64: all three in one line)
 *
 * Thread 0 (the updater) increments `updates` ITERS times; every other thread (a reader)
 * ITERS times takes the read lock, reads `nr_maps` and lets go.  Nobody touches another's
 * field -- the updater never writes `nr_maps` after setting it up -- but the updater's writes
 * take the line from the readers on every lookup: false sharing between the lock and `nr_maps`
 * (the readers') and `updates` (the updater's).  The rwlock's own bytes are written inside
 * glibc on every read lock and unlock; glibc is not instrumented, but contend's sharing runtime
 * records each lock operation as a 4-byte atomic write at the lock's address, so the lock word
 * shows up as the readers' field too (with several readers it is truly shared among them).
 * With `padded`, the updater's field is on a line of its own (`maps_padded`): none.
 *
 * It prints what it planted, e.g.
 *   truth: program=lock_and_data case=false-sharing object=maps kind=global size=64
 *          addr=0x55d0c1a4c040 fields=lock@0+56,nr_maps@56+4,updates@60+4 threads=2 iters=10000000
 * (one line; `padded`: case=none object=maps_padded size=128 fields=lock@0+56,nr_maps@56+4,
 * updates@64+4), then `done: elapsed_ns=N lookups=L updates=U iters=N0,N1` (the iterations each
 * thread did: U = N0, L = N1 + ...).  With `-c CPU_MS` each thread works until its own CPU time
 * reaches CPU_MS (the truth line then says cpu_ms=CPU_MS instead of iters=ITERS).
 *
 * usage: lock_and_data [-t THREADS] [-n ITERS | -c CPU_MS] [padded]
 * defaults: -t 2 -n 10000000   (about 0.3 s on 2 CPUs, uninstrumented)
 *
 * build: contend cc -- cc -O2 -g lock_and_data.c -o lock_and_data
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct maps {
    _Alignas(64) pthread_rwlock_t lock;
    int nr_maps;
    int updates;
};
_Static_assert(offsetof(struct maps, updates) + sizeof(int) <= 64,
               "struct maps must fit one 64-byte line");

struct maps_padded {
    _Alignas(64) pthread_rwlock_t lock;
    int nr_maps;
    _Alignas(64) int updates;
};

_Alignas(64) struct maps maps = {PTHREAD_RWLOCK_INITIALIZER, 0, 0};
_Alignas(64) struct maps_padded maps_padded = {PTHREAD_RWLOCK_INITIALIZER, 0, 0};

static long iters = 10000000;
static int nthreads = 2;
static int padded;
static pthread_barrier_t start;
static long found[256];

/* -c CPU_MS: each thread works until its own CPU time reaches CPU_MS, whatever the machine's
 * speed or load (0: -n ITERS iterations).  Each thread checks its own clock between chunks:
 * a shared stop flag would itself be shared memory, and a thread that barely ran would stop
 * when the other did. */
#define CHUNK 16384
static long cpu_ms;
static long done_iters[256];

static long thread_cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* How many iterations to do next, `done` being done: the rest of ITERS, or with -c a chunk
 * while the thread's CPU time is short of CPU_MS.  0: finished. */
static long next_chunk(long done)
{
    if (cpu_ms == 0)
        return iters - done;
    return thread_cpu_ms() >= cpu_ms ? 0 : CHUNK;
}

/* ` iters=N0,N1,...`: the iterations each thread did, for the done: line. */
static void print_done_iters(void)
{
    printf(" iters=");
    for (int i = 0; i < nthreads; i++)
        printf("%s%ld", i ? "," : "", done_iters[i]);
    printf("\n");
}

/* The truth line's sizing: `iters=ITERS`, or `cpu_ms=CPU_MS` when sized by CPU time. */
static void print_sizing(void)
{
    if (cpu_ms)
        printf("cpu_ms=%ld", cpu_ms);
    else
        printf("iters=%ld", iters);
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-t THREADS (2..256)] [-n ITERS | -c CPU_MS] [padded]\n", prog);
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

/* A lookup: the read lock, the protected field, unlock. */
__attribute__((noinline)) static long lookups(pthread_rwlock_t *lock, volatile int *nr_maps, long n)
{
    long sum = 0;
    for (long i = 0; i < n; i++) {
        pthread_rwlock_rdlock(lock);
        sum += *nr_maps;
        pthread_rwlock_unlock(lock);
    }
    return sum;
}

/* The statistics the updater keeps, next to the lock and data. */
__attribute__((noinline)) static void count_updates(volatile int *updates, long n)
{
    for (long i = 0; i < n; i++)
        *updates = (int)((unsigned)*updates + 1u); /* wraps in long -c runs, never overflows */
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    long done = 0, n;
    while ((n = next_chunk(done)) > 0) {
        if (id == 0)
            count_updates(padded ? &maps_padded.updates : &maps.updates, n);
        else
            found[id] += padded ? lookups(&maps_padded.lock, &maps_padded.nr_maps, n)
                                : lookups(&maps.lock, &maps.nr_maps, n);
        done += n;
    }
    done_iters[id] = done;
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            nthreads = (int)number(argv[0], argv[++i], 2, 256);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            iters = number(argv[0], argv[++i], 1, 1L << 40);
        else if (!strcmp(argv[i], "-c") && i + 1 < argc)
            cpu_ms = number(argv[0], argv[++i], 1, 3600000);
        else if (!strcmp(argv[i], "padded") || !strcmp(argv[i], "-p"))
            padded = 1;
        else
            usage(argv[0]);
    }
    maps.nr_maps = 3;
    maps_padded.nr_maps = 3;
    if (padded)
        printf("truth: program=lock_and_data case=none object=maps_padded kind=global size=%zu "
               "addr=%p fields=lock@0+%zu,nr_maps@%zu+4,updates@%zu+4 threads=%d ",
               sizeof maps_padded, (void *)&maps_padded, sizeof(pthread_rwlock_t),
               offsetof(struct maps_padded, nr_maps), offsetof(struct maps_padded, updates),
               nthreads);
    else
        printf("truth: program=lock_and_data case=false-sharing object=maps kind=global size=%zu "
               "addr=%p fields=lock@0+%zu,nr_maps@%zu+4,updates@%zu+4 threads=%d ",
               sizeof maps, (void *)&maps, sizeof(pthread_rwlock_t),
               offsetof(struct maps, nr_maps), offsetof(struct maps, updates), nthreads);
    print_sizing();
    printf("\n");
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
    long lookups_done = 0;
    for (int i = 1; i < nthreads; i++)
        lookups_done += found[i] / 3;
    printf("done: elapsed_ns=%lld lookups=%ld updates=%d", (long long)(t1 - t0), lookups_done,
           padded ? maps_padded.updates : maps.updates);
    print_done_iters();
    return 0;
}
