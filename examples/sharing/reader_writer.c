/*
 * reader_writer: the perf c2c slides' false sharing -- one field only read, another only
 * written, in the same cache line.
 *
 * Thread 0 (the writer) stores to `writer` ITERS times; every other thread (the readers)
 * loads `reader` ITERS times.  No thread ever touches the other's field, yet in the default
 * layout both fields live in one 64-byte line (`rw`, aligned and padded to 64), so every write
 * takes the line away from the readers: false sharing.  With `padded` the program uses
 * `rw_padded` instead, where `writer` is aligned to the next line: no sharing at all.  Both
 * layouts are in every build, so one binary gives the case and its twin.
 *
 * It prints what it planted, e.g.
 *   truth: program=reader_writer case=false-sharing object=rw kind=global size=64
 *          addr=0x55d0c1a4c040 fields=reader@0+8,writer@8+8 threads=2 iters=200000000
 * (one line; `padded` gives case=none object=rw_padded size=128 fields=reader@0+8,writer@64+8)
 * and then `done: elapsed_ns=N check=C iters=N0,N1` (the iterations each thread did).
 * With `-c CPU_MS` each thread works until its own CPU time reaches CPU_MS (the truth line
 * then says cpu_ms=CPU_MS instead of iters=ITERS).  Format in examples/sharing/README.md.
 *
 * usage: reader_writer [-t THREADS] [-n ITERS | -c CPU_MS] [padded]
 * defaults: -t 2 -n 200000000   (about 0.2 s on 2 CPUs, uninstrumented)
 *
 * build: contend cc -- cc -O2 -g reader_writer.c -o reader_writer
 *        (plain twin: cc -O2 -g -pthread reader_writer.c -o reader_writer.plain)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The slides' struct: a field the readers read and one the writer writes, in one line.  (The
 * type is aligned to the line, which also pads it to 64 bytes, so that no other variable shares
 * its line and the report shows only what is planted.) */
struct rw_together {
    _Alignas(64) long reader;
    long writer;
};

/* Its fix: the written field on a line of its own. */
struct rw_padded {
    _Alignas(64) long reader;
    _Alignas(64) long writer;
};

_Alignas(64) struct rw_together rw;
_Alignas(64) struct rw_padded rw_padded;

static long iters = 200000000;
static int nthreads = 2;
static int padded;
static pthread_barrier_t start;
static long sums[256];

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

__attribute__((noinline)) static void write_field(volatile long *field, long from, long n)
{
    for (long i = from; i < from + n; i++)
        *field = i;
}

__attribute__((noinline)) static long read_field(volatile long *field, long n)
{
    long sum = 0;
    for (long i = 0; i < n; i++)
        sum += *field;
    return sum;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    long done = 0, n, sum = 0;
    while ((n = next_chunk(done)) > 0) {
        if (id == 0)
            write_field(padded ? &rw_padded.writer : &rw.writer, done, n);
        else
            sum += read_field(padded ? &rw_padded.reader : &rw.reader, n);
        done += n;
    }
    sums[id] = sum;
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
    if (padded)
        printf("truth: program=reader_writer case=none object=rw_padded kind=global size=%zu "
               "addr=%p fields=reader@%zu+8,writer@%zu+8 threads=%d ",
               sizeof rw_padded, (void *)&rw_padded, offsetof(struct rw_padded, reader),
               offsetof(struct rw_padded, writer), nthreads);
    else
        printf("truth: program=reader_writer case=false-sharing object=rw kind=global size=%zu "
               "addr=%p fields=reader@%zu+8,writer@%zu+8 threads=%d ",
               sizeof rw, (void *)&rw, offsetof(struct rw_together, reader),
               offsetof(struct rw_together, writer), nthreads);
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
    long check = 0;
    for (int i = 1; i < nthreads; i++)
        check += sums[i] & 1;
    printf("done: elapsed_ns=%lld check=%ld", (long long)(t1 - t0), check);
    print_done_iters();
    return 0;
}
