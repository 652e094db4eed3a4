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
 * counts[1]@64+8), then `done: elapsed_ns=N total=T iters=N0,N1` where T is the sum of the
 * iterations each thread did (N0 + N1; THREADS x ITERS with -n).  With `-c CPU_MS` each thread
 * works until its own CPU time reaches CPU_MS (the truth line then says cpu_ms=CPU_MS instead
 * of iters=ITERS).
 *
 * usage: atomic_counter [-t THREADS] [-n ITERS | -c CPU_MS] [padded]
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
    fprintf(stderr, "usage: %s [-t THREADS (1..256)] [-n ITERS | -c CPU_MS] [padded]\n", prog);
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

__attribute__((noinline)) static void count(_Atomic long *c, long n)
{
    for (long i = 0; i < n; i++)
        atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    long done = 0, n;
    while ((n = next_chunk(done)) > 0) {
        count(padded ? &private_counts[id].count : &counter.value, n);
        done += n;
    }
    done_iters[id] = done;
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            nthreads = (int)number(argv[0], argv[++i], 1, 256);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            iters = number(argv[0], argv[++i], 1, 1L << 40);
        else if (!strcmp(argv[i], "-c") && i + 1 < argc)
            cpu_ms = number(argv[0], argv[++i], 1, 3600000);
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
        printf(" threads=%d ", nthreads);
    } else {
        printf("truth: program=atomic_counter case=%s object=counter kind=global size=%zu "
               "addr=%p fields=value@0+8 threads=%d ",
               nthreads > 1 ? "true-sharing" : "none", sizeof counter, (void *)&counter, nthreads);
    }
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
    long total = atomic_load(&counter.value);
    for (int i = 0; i < nthreads; i++)
        total += atomic_load(&private_counts[i].count);
    long expected = 0;
    for (int i = 0; i < nthreads; i++)
        expected += done_iters[i];
    printf("done: elapsed_ns=%lld total=%ld", (long long)(t1 - t0), total);
    print_done_iters();
    return total == expected ? 0 : 1;
}
