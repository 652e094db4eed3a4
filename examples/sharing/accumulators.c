/*
 * accumulators: per-thread accumulators in one array -- the linear-regression kernel of the
 * Phoenix benchmarks (Ranger et al., HPCA 2007), the textbook false-sharing case.
 *
 * Each thread sums its share of N points (x, y) into its own element of
 *     struct { long long SX, SY, SXX, SYY, SXY; } *args;     (40 bytes per element)
 * allocated with calloc (Phoenix uses malloc; clang turns malloc + memset into calloc).
 * No two threads touch the same element, but 40-byte elements straddle 64-byte lines: args[0] is bytes 0-39 and args[1] bytes 40-79 of the
 * block, so the end of thread 0's sums and the start of thread 1's share a line (the allocator's
 * 16-byte alignment does not help; with more threads every neighbour pair shares one).  The
 * accumulators are written through a volatile pointer, as the unoptimised original stores
 * them on every point, so the compiler cannot keep them in registers.
 * With `padded`, each element is padded and aligned to a line of its own (aligned_alloc):
 * no sharing.
 *
 * It prints what it planted, e.g.
 *   truth: program=accumulators case=false-sharing object=args kind=heap allocator=calloc
 *          site=accumulators.c:93 size=80 addr=0x55d0c2f1a2a0 fields=args[0]@0+40,args[1]@40+40
 *          threads=2 iters=20000000
 * (one line; `padded`: case=none allocator=aligned_alloc size=128 fields=args[0]@0+40,
 * args[1]@64+40), then `done: elapsed_ns=N sx=... sxy=... iters=N0,N1` (the points each thread
 * summed).  With `-c CPU_MS` each thread works until its own CPU time reaches CPU_MS (the
 * truth line then says cpu_ms=CPU_MS instead of iters=ITERS).  Format in examples/sharing/README.md.
 *
 * usage: accumulators [-t THREADS] [-n POINTS_PER_THREAD | -c CPU_MS] [padded]
 * defaults: -t 2 -n 20000000   (about 0.3 s on 2 CPUs, uninstrumented)
 *
 * build: contend cc -- cc -O2 -g accumulators.c -o accumulators
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Phoenix's lreg_args: 40 bytes. */
typedef struct {
    long long SX, SY, SXX, SYY, SXY;
} lreg_args;

/* The fix: one line per thread. */
typedef struct {
    _Alignas(64) long long SX;
    long long SY, SXX, SYY, SXY;
} lreg_padded;

static long iters = 20000000;
static int nthreads = 2;
static int padded;
static pthread_barrier_t start;
static void *args;

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
    fprintf(stderr, "usage: %s [-t THREADS (1..256)] [-n POINTS_PER_THREAD | -c CPU_MS] [padded]\n", prog);
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

/* The accumulation: points generated on the fly (a small LCG per thread) instead of read from
 * a file, so the only memory the threads write is their accumulators. */
__attribute__((noinline)) static void linear_regression(volatile long long *a, unsigned *state,
                                                         long n)
{
    unsigned s = *state;
    for (long i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        long long x = (s >> 16) & 0xff, y = (s >> 8) & 0xff;
        a[0] += x;     /* SX */
        a[1] += y;     /* SY */
        a[2] += x * x; /* SXX */
        a[3] += y * y; /* SYY */
        a[4] += x * y; /* SXY */
    }
    *state = s;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    volatile long long *mine = padded ? &((lreg_padded *)args)[id].SX : &((lreg_args *)args)[id].SX;
    pthread_barrier_wait(&start);
    unsigned seed = 12345u + (unsigned)id;
    long done = 0, n;
    while ((n = next_chunk(done)) > 0) {
        linear_regression(mine, &seed, n);
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
    size_t elem = padded ? sizeof(lreg_padded) : sizeof(lreg_args);
    size_t size = elem * (size_t)nthreads;
    int site;
    if (padded) {
        site = __LINE__ + 1;
        args = aligned_alloc(64, size);
    } else {
        /* calloc, not malloc + memset: clang turns the pair into calloc anyway. */
        site = __LINE__ + 1;
        args = calloc((size_t)nthreads, elem);
    }
    if (!args) {
        perror("allocating the accumulators");
        return 1;
    }
    if (padded)
        memset(args, 0, size);
    printf("truth: program=accumulators case=%s object=args kind=heap allocator=%s "
           "site=accumulators.c:%d size=%zu addr=%p fields=",
           padded ? "none" : (nthreads > 1 ? "false-sharing" : "none"),
           padded ? "aligned_alloc" : "calloc", site, size, args);
    for (int i = 0; i < nthreads; i++)
        printf("%sargs[%d]@%zu+%zu", i ? "," : "", i, (size_t)i * elem, sizeof(lreg_args));
    printf(" threads=%d ", nthreads);
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
    long long sx = 0, sxy = 0;
    for (int i = 0; i < nthreads; i++) {
        const long long *a = padded ? &((lreg_padded *)args)[i].SX : &((lreg_args *)args)[i].SX;
        sx += a[0];
        sxy += a[4];
    }
    printf("done: elapsed_ns=%lld sx=%lld sxy=%lld", (long long)(t1 - t0), sx, sxy);
    print_done_iters();
    free(args);
    return 0;
}
