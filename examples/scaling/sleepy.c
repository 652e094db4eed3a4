/*
 * sleepy: threads that mostly sleep, as if waiting for I/O.
 *
 * THREADS threads each run ROUNDS rounds of: sleep SLEEP_US (nanosleep, standing for a
 * disk or network wait), then a burst of BURST_US of CPU work (compute() on local
 * variables).  Nothing is shared, no lock is taken: the threads never wait for each other,
 * they wait for the clock.  So a thread is active (on a CPU or runnable) only
 * BURST/(SLEEP+BURST) of the time, about a tenth at the defaults, whatever the number of
 * cores: the speed-up lost against m busy threads is lost to waiting that is not for a
 * lock (the expected cause is `blocked`, with lock waits a negligible part of it) and the
 * CPU time is a small part of the wall time.
 *
 * The work is fixed by counts, never by the clock: ROUNDS sleeps of SLEEP_US each (the
 * kernel overshoots each by its timer slack, ~50 µs: the measured sum is in the truth
 * line) and ROUNDS bursts of BURST_US x ITERS_PER_MS / 1000 iterations of compute().
 * ITERS_PER_MS is calibrated at start as in independent.c (on CLOCK_THREAD_CPUTIME_ID)
 * unless given with -i; `sleepy -C` prints it and exits.  Workers are named worker-0,
 * worker-1, ... and start together (a pthread barrier with main).  It ends with one line,
 * e.g.
 *   truth program=sleepy threads=2 rounds=200 sleep_us=2000 burst_us=200 ...
 *     worker0.cpu_ns=... worker0.sleep_ns=... cpu_share=0.09 expect=blocked elapsed_ns=...
 * Fields are documented in examples/README.md.
 *
 * usage: sleepy [-t THREADS] [-r ROUNDS] [-s SLEEP_US] [-b BURST_US] [-i ITERS_PER_MS] [-C]
 * defaults: -t 2 -r 200 -s 2000 -b 200 -i 0 (calibrate)   (about 0.45 s)
 *
 * build: cc -O2 -g -pthread sleepy.c -o sleepy
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers (the same in every scaling example: each file stands alone, to be built
 * by itself as `contend demo` builds independent.c and serialised.c) ------------------ */

/* Nanoseconds on CLOCK_MONOTONIC. */
static inline int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* CPU time of the calling thread, ns (what the kernel's schedstat calls on-CPU time). */
static inline int64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Parse an integer option value or exit with a usage message. */
static inline long parse_count(const char *prog, char opt, const char *s, long min, long max)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < min || v > max) {
        fprintf(stderr, "%s: -%c wants an integer in [%ld, %ld], got '%s'\n", prog, opt, min,
                max, s);
        exit(2);
    }
    return v;
}

/* The unit of work: a serial chain of integer hashes (the finaliser of MurmurHash3).
 * Each step depends on the previous one, so it can be neither vectorised nor skipped;
 * about 10-15 cycles per iteration. */
__attribute__((noinline)) static uint64_t compute(uint64_t h, long iters)
{
    for (long i = 0; i < iters; i++) {
        h += (uint64_t)i;
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        h *= 0xc4ceb9fe1a85ec53ULL;
        h ^= h >> 33;
    }
    return h;
}

/* Iterations of compute() per ms of this thread's CPU time: double until one run takes
 * >= 5 ms, then scale. */
static long calibrate(void)
{
    static volatile uint64_t sink;
    for (long n = 1 << 14;; n *= 2) {
        int64_t c0 = thread_cpu_ns();
        sink = compute(sink, n);
        int64_t c = thread_cpu_ns() - c0;
        if (c >= 5000000 || n >= (1L << 40))
            return (long)((double)n * 1e6 / (double)(c > 0 ? c : 1)) + 1;
    }
}

static inline long gettid_long(void)
{
    return (long)syscall(SYS_gettid);
}

/* CPUs this process may run on (what `contend scale` pins it to), not the machine's. */
static inline int allowed_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return (int)sysconf(_SC_NPROCESSORS_ONLN);
    return CPU_COUNT(&set);
}
/* ----------------------------------------------------------------------------------- */

static int nthreads = 2;
static long rounds = 200, sleep_us = 2000, burst_us = 200, iters_per_ms = 0;
static pthread_barrier_t start_line;

struct worker {
    pthread_t thread;
    int id;
    long tid;
    int64_t cpu_ns, sleep_ns, end_ns;
    uint64_t result;
} __attribute__((aligned(64))); /* one cache line each: no false sharing */

/* The stand-in for an I/O wait.  noinline so that it has a name in a profile. */
__attribute__((noinline)) static int64_t wait_for_io(long us)
{
    struct timespec d = {us / 1000000, (us % 1000000) * 1000};
    int64_t t0 = now_ns();
    while (nanosleep(&d, &d) != 0)
        ; /* interrupted: sleep the rest */
    return now_ns() - t0;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    w->tid = gettid_long();
    pthread_barrier_wait(&start_line);
    uint64_t h = 0x9e3779b97f4a7c15ULL * (uint64_t)(w->id + 1);
    long burst = burst_us * iters_per_ms / 1000;
    for (long r = 0; r < rounds; r++) {
        w->sleep_ns += wait_for_io(sleep_us);
        h = compute(h, burst);
    }
    w->result = h;
    w->cpu_ns = thread_cpu_ns();
    w->end_ns = now_ns();
    return NULL;
}

static void usage(const char *prog, FILE *to, int code)
{
    fprintf(to,
            "usage: %s [-t THREADS] [-r ROUNDS] [-s SLEEP_US] [-b BURST_US] [-i ITERS_PER_MS] [-C]\n"
            "  -t  worker threads (default 2)\n"
            "  -r  rounds of sleep and burst per thread (default 200)\n"
            "  -s  sleep per round, µs (default 2000)\n"
            "  -b  CPU work per round, in µs of CPU time on this machine (default 200)\n"
            "  -i  iterations of compute() per ms (default 0: calibrate at start)\n"
            "  -C  calibrate, print `calibration ... iters_per_ms=N` and exit\n"
            "Prints a `truth ...` line with each worker's CPU and sleep time and the wall time.\n",
            prog);
    exit(code);
}

int main(int argc, char **argv)
{
    int opt, calibrate_only = 0;
    while ((opt = getopt(argc, argv, "t:r:s:b:i:Ch")) != -1) {
        switch (opt) {
        case 't': nthreads = (int)parse_count(argv[0], 't', optarg, 1, 1024); break;
        case 'r': rounds = parse_count(argv[0], 'r', optarg, 0, 100000000); break;
        case 's': sleep_us = parse_count(argv[0], 's', optarg, 0, 100000000); break;
        case 'b': burst_us = parse_count(argv[0], 'b', optarg, 0, 100000000); break;
        case 'i': iters_per_ms = parse_count(argv[0], 'i', optarg, 0, 1000000000); break;
        case 'C': calibrate_only = 1; break;
        case 'h': usage(argv[0], stdout, 0); break;
        default: usage(argv[0], stderr, 2);
        }
    }
    if (optind != argc)
        usage(argv[0], stderr, 2);

    int64_t cal0 = now_ns();
    if (iters_per_ms == 0 || calibrate_only)
        iters_per_ms = calibrate();
    int64_t calibration_ns = now_ns() - cal0;
    if (calibrate_only) {
        printf("calibration program=sleepy iters_per_ms=%ld calibration_ns=%lld\n",
               iters_per_ms, (long long)calibration_ns);
        return 0;
    }

    struct worker *w = aligned_alloc(64, sizeof *w * (size_t)nthreads);
    if (!w)
        return 1;
    memset(w, 0, sizeof *w * (size_t)nthreads);
    pthread_barrier_init(&start_line, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        w[i].id = i;
        if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    pthread_barrier_wait(&start_line);
    int64_t start = now_ns();
    for (int i = 0; i < nthreads; i++)
        pthread_join(w[i].thread, NULL);
    int64_t wall = now_ns() - start;

    uint64_t checksum = 0;
    int64_t cpu_total = 0, sleep_total = 0;
    for (int i = 0; i < nthreads; i++) {
        checksum ^= w[i].result;
        cpu_total += w[i].cpu_ns;
        sleep_total += w[i].sleep_ns;
    }
    printf("truth program=sleepy threads=%d cpus=%d rounds=%ld sleep_us=%ld burst_us=%ld "
           "iters_per_ms=%ld iters_per_burst=%ld calibration_ns=%lld",
           nthreads, allowed_cpus(), rounds, sleep_us, burst_us, iters_per_ms,
           burst_us * iters_per_ms / 1000, (long long)calibration_ns);
    for (int i = 0; i < nthreads; i++)
        printf(" worker%d.tid=%ld worker%d.cpu_ns=%lld worker%d.sleep_ns=%lld worker%d.busy_ns=%lld",
               i, w[i].tid, i, (long long)w[i].cpu_ns, i, (long long)w[i].sleep_ns, i,
               (long long)(w[i].end_ns - start));
    /* cpu_share: the threads' CPU time over THREADS x the wall time, the share of the
     * ideal (every thread busy throughout) that was used. */
    printf(" cpu_ns_total=%lld sleep_ns_total=%lld cpu_share=%.3f expect=blocked"
           " elapsed_ns=%lld checksum=%016llx\n",
           (long long)cpu_total, (long long)sleep_total,
           wall > 0 ? (double)cpu_total / ((double)nthreads * (double)wall) : 0.0,
           (long long)wall, (unsigned long long)checksum);
    pthread_barrier_destroy(&start_line);
    free(w);
    return 0;
}
