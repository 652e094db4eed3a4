/*
 * histograms: per-thread histograms side by side -- the Phoenix histogram pattern.
 *
 * Each thread classifies ITERS values into its own 8 bins of 4 bytes (32 bytes per thread),
 * and the threads' histograms are adjacent in one calloc'd array `hist[THREADS][8]`, so two
 * neighbouring threads' bins share every 64-byte line: false sharing, although no bin is
 * ever touched by two threads.  The block is aligned to 64 bytes (aligned_alloc), so which
 * threads share is exact: threads 2k and 2k+1 share line k.  The bins are updated through a
 * volatile pointer, as a histogram in memory is.
 * With `padded`, each thread's bins start a line of their own (64 bytes per thread): none.
 *
 * It prints what it planted, e.g.
 *   truth: program=histograms case=false-sharing object=hist kind=heap allocator=aligned_alloc
 *          site=histograms.c:101 size=64 addr=0x55d0c2f1a2c0 fields=hist[0]@0+32,hist[1]@32+32
 *          threads=2 iters=80000000
 * (one line; `padded`: case=none size=128 fields=hist[0]@0+32,hist[1]@64+32), then
 * `done: elapsed_ns=N total=... iters=N0,N1` (the values each thread classified).  With
 * `-c CPU_MS` each thread works until its own CPU time reaches CPU_MS (the truth line then
 * says cpu_ms=CPU_MS instead of iters=ITERS).  Format in examples/sharing/README.md.
 *
 * usage: histograms [-t THREADS] [-n VALUES_PER_THREAD | -c CPU_MS] [padded]
 * defaults: -t 2 -n 80000000   (about 0.3 s on 2 CPUs, uninstrumented)
 *
 * build: contend cc -- cc -O2 -g histograms.c -o histograms
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BINS 8

static long iters = 80000000;
static int nthreads = 2;
static int padded;
static pthread_barrier_t start;
static unsigned *hist;
/* Bins between the starts of two threads' histograms: 8 (adjacent) or 16 (a line each). */
static size_t stride;

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
    fprintf(stderr, "usage: %s [-t THREADS (1..256)] [-n VALUES_PER_THREAD | -c CPU_MS] [padded]\n", prog);
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

__attribute__((noinline)) static void classify(volatile unsigned *bins, unsigned *state, long n)
{
    unsigned s = *state;
    for (long i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        bins[(s >> 24) % BINS]++;
    }
    *state = s;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    unsigned seed = 77u + (unsigned)id;
    long done = 0, n;
    while ((n = next_chunk(done)) > 0) {
        classify(hist + (size_t)id * stride, &seed, n);
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
    stride = padded ? 64 / sizeof(unsigned) : BINS;
    size_t size = stride * sizeof(unsigned) * (size_t)nthreads;
    /* aligned_alloc wants a multiple of the alignment. */
    size_t alloc = (size + 63) / 64 * 64;
    int site = __LINE__ + 1;
    hist = aligned_alloc(64, alloc);
    if (!hist) {
        perror("allocating the histograms");
        return 1;
    }
    memset(hist, 0, alloc);
    printf("truth: program=histograms case=%s object=hist kind=heap allocator=aligned_alloc "
           "site=histograms.c:%d size=%zu addr=%p fields=",
           !padded && nthreads > 1 ? "false-sharing" : "none", site, alloc, (void *)hist);
    for (int i = 0; i < nthreads; i++)
        printf("%shist[%d]@%zu+%zu", i ? "," : "", i, (size_t)i * stride * sizeof(unsigned),
               BINS * sizeof(unsigned));
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
    unsigned long long total = 0;
    for (int i = 0; i < nthreads; i++)
        for (int b = 0; b < BINS; b++)
            total += hist[(size_t)i * stride + (size_t)b];
    printf("done: elapsed_ns=%lld total=%llu", (long long)(t1 - t0), total);
    print_done_iters();
    free(hist);
    return 0;
}
