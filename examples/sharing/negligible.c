/*
 * negligible: false sharing that does not matter, next to false sharing that does -- a
 * report must rank the first low.
 *
 * Two threads (thread 0 and 1; with -t N the others join thread 1's side).  Every iteration
 * each does some private work (a few multiply-adds on locals) and then:
 *   - writes its own field of `busy_a` (every iteration), `busy_b` (every 2nd) and `busy_c`
 *     (every 4th): three structs, each a line of its own, whose two 8-byte fields belong
 *     to the two threads -- real false sharing of decreasing volume;
 *   - every RARE-th iteration (default 100 000) writes its own field of `rare` -- the same
 *     pattern, but ITERS/RARE writes per thread: negligible.
 * So `rare` has at least 25 000 times fewer transfers than `busy_c` (with the defaults), and
 * must not be in a report's top 3; a detector with a hot threshold may not list it at all.
 *
 * It prints what it planted, one line per object, e.g.
 *   truth: program=negligible case=false-sharing object=busy_a kind=global size=64
 *          addr=0x55d0c1a4c040 fields=t0@0+8,t1@8+8 threads=2 iters=20000000 writes=20000000
 *   ... busy_b (writes=10000000), busy_c (writes=5000000) ...
 *   truth: program=negligible case=negligible object=rare kind=global size=64 addr=...
 *          fields=t0@0+8,t1@8+8 threads=2 iters=20000000 writes=200
 * (`writes` per thread; `every=K`: written every Kth iteration), then
 * `done: elapsed_ns=N check=... iters=N0,N1` (the iterations each thread did).  With
 * `-c CPU_MS` each thread works until its own CPU time reaches CPU_MS (the truth lines then
 * say cpu_ms=CPU_MS instead of iters=ITERS, and have no `writes`: N/K per thread).
 *
 * usage: negligible [-t THREADS] [-n ITERS | -c CPU_MS] [-r RARE]
 * defaults: -t 2 -n 20000000 -r 100000   (about 0.3 s on 2 CPUs, uninstrumented)
 *
 * build: contend cc -- cc -O2 -g negligible.c -o negligible
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Aligned (and so padded) to a line: each object has its line to itself. */
struct pair {
    _Alignas(64) long t0;
    long t1;
};

_Alignas(64) struct pair busy_a;
_Alignas(64) struct pair busy_b;
_Alignas(64) struct pair busy_c;
_Alignas(64) struct pair rare;

static long iters = 20000000;
static long rare_every = 100000;
static int nthreads = 2;
static pthread_barrier_t start;
static long results[256];

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
    fprintf(stderr, "usage: %s [-t THREADS (2..256)] [-n ITERS | -c CPU_MS] [-r RARE]\n", prog);
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

__attribute__((noinline)) static long work(int side, long seed, long from, long n)
{
    volatile long *a = side ? &busy_a.t1 : &busy_a.t0;
    volatile long *b = side ? &busy_b.t1 : &busy_b.t0;
    volatile long *c = side ? &busy_c.t1 : &busy_c.t0;
    volatile long *r = side ? &rare.t1 : &rare.t0;
    long x = seed;
    for (long i = from + 1; i <= from + n; i++) {
        /* private work: registers only */
        x = x * 6364136223846793005L + 1442695040888963407L;
        x ^= x >> 29;
        *a = x;
        if ((i & 1) == 0)
            *b = x;
        if ((i & 3) == 0)
            *c = x;
        if (i % rare_every == 0)
            *r = x;
    }
    return x;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    long x = 1 + id, done = 0, n;
    while ((n = next_chunk(done)) > 0) {
        x = work(id != 0, x, done, n);
        done += n;
    }
    results[id] = x;
    done_iters[id] = done;
    return NULL;
}

static void truth(const char *name, const char *kase, const struct pair *p, long every)
{
    printf("truth: program=negligible case=%s object=%s kind=global size=%zu addr=%p "
           "fields=t0@%zu+8,t1@%zu+8 threads=%d ",
           kase, name, sizeof *p, (const void *)p, offsetof(struct pair, t0),
           offsetof(struct pair, t1), nthreads);
    print_sizing();
    if (!cpu_ms)
        printf(" writes=%ld", iters / every);
    printf(" every=%ld\n", every);
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
        else if (!strcmp(argv[i], "-r") && i + 1 < argc)
            rare_every = number(argv[0], argv[++i], 1, 1L << 40);
        else
            usage(argv[0]);
    }
    truth("busy_a", "false-sharing", &busy_a, 1);
    truth("busy_b", "false-sharing", &busy_b, 2);
    truth("busy_c", "false-sharing", &busy_c, 4);
    truth("rare", "negligible", &rare, rare_every);
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
    long check = 0;
    for (int i = 0; i < nthreads; i++)
        check ^= results[i];
    printf("done: elapsed_ns=%lld check=%ld", (long long)(t1 - t0), check & 0xffff);
    print_done_iters();
    return 0;
}
