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
 * and then `done: elapsed_ns=N`.  Format in examples/sharing/README.md.
 *
 * usage: reader_writer [-t THREADS] [-n ITERS] [padded]
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

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-t THREADS (2..256)] [-n ITERS] [padded]\n", prog);
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

__attribute__((noinline)) static void write_field(volatile long *field)
{
    for (long i = 0; i < iters; i++)
        *field = i;
}

__attribute__((noinline)) static long read_field(volatile long *field)
{
    long sum = 0;
    for (long i = 0; i < iters; i++)
        sum += *field;
    return sum;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    if (id == 0)
        write_field(padded ? &rw_padded.writer : &rw.writer);
    else
        sums[id] = read_field(padded ? &rw_padded.reader : &rw.reader);
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            nthreads = (int)number(argv[0], argv[++i], 2, 256);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc)
            iters = number(argv[0], argv[++i], 1, 1L << 40);
        else if (!strcmp(argv[i], "padded") || !strcmp(argv[i], "-p"))
            padded = 1;
        else
            usage(argv[0]);
    }
    if (padded)
        printf("truth: program=reader_writer case=none object=rw_padded kind=global size=%zu "
               "addr=%p fields=reader@%zu+8,writer@%zu+8 threads=%d iters=%ld\n",
               sizeof rw_padded, (void *)&rw_padded, offsetof(struct rw_padded, reader),
               offsetof(struct rw_padded, writer), nthreads, iters);
    else
        printf("truth: program=reader_writer case=false-sharing object=rw kind=global size=%zu "
               "addr=%p fields=reader@%zu+8,writer@%zu+8 threads=%d iters=%ld\n",
               sizeof rw, (void *)&rw, offsetof(struct rw_together, reader),
               offsetof(struct rw_together, writer), nthreads, iters);
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
    printf("done: elapsed_ns=%lld check=%ld\n", (long long)(t1 - t0), check);
    return 0;
}
