/*
 * independent: threads that never wait for each other.
 *
 * THREADS threads each do WORK_MS milliseconds' worth of pure compute: an integer hash
 * chain in compute(), a fixed number of iterations (WORK_MS x ITERS_PER_MS), on local
 * variables only.  Nothing is shared while they run: each writes its result into its own
 * cache-line-sized slot once, at the end, and main combines the slots into a checksum (so
 * the compiler cannot drop the work).  No lock, no I/O, no sleep: with THREADS <= CPUs
 * every thread is on a CPU from start to end, so the average number of active threads is
 * A ~= THREADS (2 on a 2-CPU machine), and on fewer CPUs than threads the threads are
 * runnable all the time, on a CPU or waiting on a run queue.
 *
 * ITERS_PER_MS is calibrated at start (main runs compute() alone, doubling the
 * iterations until one run takes >= 5 ms of its own CPU time, ~10 ms in all) unless
 * given with -i; calibrating on CLOCK_THREAD_CPUTIME_ID makes it independent of how busy
 * the machine is (time waiting for a CPU is not counted), so WORK_MS is "ms of CPU time on
 * this CPU", and the same work on 1 or 2 CPUs.
 *
 * The workers are named worker-0, worker-1, ... (pthread_setname_np) and start together
 * (a pthread barrier with main).  It ends with one line, e.g.
 *   truth program=independent threads=2 work_ms=400 iters_per_ms=331000 ...
 *     worker0.tid=1234 worker0.cpu_ns=400123456 worker1.tid=1235 worker1.cpu_ns=... wall_ns=...
 * where workerI.cpu_ns is the thread's whole CPU time (CLOCK_THREAD_CPUTIME_ID, read as
 * its last act), workerI.busy_ns the wall time from the start to its end (it never sleeps,
 * so it is active throughout), wall_ns the time from the barrier to the last join
 * (CLOCK_MONOTONIC) and active_threads = sum of busy_ns / wall_ns: the program's own
 * measure of A, lower than THREADS when a shared machine lets one worker finish first.
 * Fields are documented in examples/README.md.
 *
 * usage: independent [-t THREADS] [-w WORK_MS] [-i ITERS_PER_MS]
 * defaults: -t 2 -w 400 -i 0 (calibrate)   (about 0.42 s on 2 CPUs)
 *
 * build: cc -O2 -g -pthread independent.c -o independent
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers (the same in both scaling examples; each file stands alone so that
 * `contend demo` can build it from its embedded source) ---------------------------- */

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
/* ----------------------------------------------------------------------------------- */

static int nthreads = 2;
static long work_ms = 400, iters_per_ms = 0;
static pthread_barrier_t start_line;

struct worker {
    pthread_t thread;
    int id;
    long tid;
    int64_t cpu_ns, end_ns;
    uint64_t result;
} __attribute__((aligned(64))); /* one cache line each: no false sharing */

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    w->tid = gettid_long();
    pthread_barrier_wait(&start_line);
    uint64_t r = compute(0x9e3779b97f4a7c15ULL * (uint64_t)(w->id + 1), work_ms * iters_per_ms);
    w->result = r;
    w->cpu_ns = thread_cpu_ns();
    w->end_ns = now_ns();
    return NULL;
}

static void usage(const char *prog, FILE *to, int code)
{
    fprintf(to,
            "usage: %s [-t THREADS] [-w WORK_MS] [-i ITERS_PER_MS]\n"
            "  -t  worker threads (default 2)\n"
            "  -w  compute per thread, in ms of CPU time on this machine (default 400)\n"
            "  -i  iterations of compute() per ms (default 0: calibrate at start)\n"
            "Prints a `truth ...` line with each worker's CPU time and the wall time.\n",
            prog);
    exit(code);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "t:w:i:h")) != -1) {
        switch (opt) {
        case 't': nthreads = (int)parse_count(argv[0], 't', optarg, 1, 1024); break;
        case 'w': work_ms = parse_count(argv[0], 'w', optarg, 0, 100000000); break;
        case 'i': iters_per_ms = parse_count(argv[0], 'i', optarg, 0, 1000000000); break;
        case 'h': usage(argv[0], stdout, 0); break;
        default: usage(argv[0], stderr, 2);
        }
    }
    if (optind != argc)
        usage(argv[0], stderr, 2);

    int64_t cal0 = now_ns();
    if (iters_per_ms == 0)
        iters_per_ms = calibrate();
    int64_t calibration_ns = now_ns() - cal0;

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

    /* Each worker never sleeps between the start and its end, so it is active (on a CPU or
     * waiting for one) throughout: the program's own measure of its active threads is
     * the sum of those spans over the wall time. */
    int64_t busy_total = 0;
    for (int i = 0; i < nthreads; i++)
        busy_total += w[i].end_ns - start;
    uint64_t checksum = 0;
    int64_t cpu_min = INT64_MAX, cpu_max = 0, cpu_total = 0;
    for (int i = 0; i < nthreads; i++) {
        checksum ^= w[i].result;
        cpu_total += w[i].cpu_ns;
        if (w[i].cpu_ns < cpu_min)
            cpu_min = w[i].cpu_ns;
        if (w[i].cpu_ns > cpu_max)
            cpu_max = w[i].cpu_ns;
    }
    printf("truth program=independent threads=%d work_ms=%ld iters_per_ms=%ld "
           "iters_per_thread=%ld calibration_ns=%lld",
           nthreads, work_ms, iters_per_ms, work_ms * iters_per_ms,
           (long long)calibration_ns);
    for (int i = 0; i < nthreads; i++)
        printf(" worker%d.tid=%ld worker%d.cpu_ns=%lld worker%d.busy_ns=%lld", i, w[i].tid, i,
               (long long)w[i].cpu_ns, i, (long long)(w[i].end_ns - start));
    printf(" cpu_ns_min=%lld cpu_ns_max=%lld cpu_ns_total=%lld busy_ns_total=%lld"
           " active_threads=%.3f wall_ns=%lld checksum=%016llx\n",
           (long long)cpu_min, (long long)cpu_max, (long long)cpu_total, (long long)busy_total,
           wall > 0 ? (double)busy_total / (double)wall : 0.0, (long long)wall,
           (unsigned long long)checksum);
    pthread_barrier_destroy(&start_line);
    free(w);
    return 0;
}
