/*
 * false_sharing: threads that share no data but share a cache line.
 *
 * THREADS threads each run ROUNDS rounds of: COMPUTE iterations of compute() on local
 * variables, then one increment of the thread's own counter.  The counters are adjacent
 * 8-byte words of one array, so up to 8 threads' counters sit in one 64-byte cache line:
 * no thread ever reads another's counter, yet every increment needs the line exclusive in
 * the incrementing core's cache, and on two cores the line moves back and forth between
 * them (false sharing).  That costs stall cycles, which are on-CPU time: the same work
 * takes more CPU time on 2 cores than on 1, which the Tudor & Teo model counts as
 * memory/hardware contention (the expected cause is `memory`).  With `-p` each counter has
 * a cache line of its own (the fix): the expected cause is `none`.
 *
 * The counter is incremented through a volatile pointer (a load and a store each round,
 * as in a statistics counter the compiler cannot keep in a register), and the new count
 * feeds the next compute(): without that dependency the core overlaps the load that misses
 * with the compute and buffers its stores, and the false sharing costs next to nothing
 * (measured here: +14 % a round at -k 8 without it).  At the default -k 2 a round costs
 * ~7.4 ns alone and ~13.3-15.9 ns while the other thread runs on the other core (a line
 * moves between two cores of this machine in ~25 ns): about twice the CPU time.
 *
 * The work is fixed: WORK_MS x ROUNDS_PER_MS rounds per thread.  ROUNDS_PER_MS is
 * calibrated at start (main runs rounds alone on a counter of its own until >= 5 ms of its
 * CPU time, CLOCK_THREAD_CPUTIME_ID) unless given with -i; `false_sharing -C` prints it and
 * exits, so that a script calibrates once (and passes the same -i to the padded run, to
 * compare the same work).  Workers are named worker-0, worker-1, ... and start together
 * (a pthread barrier with main).  It ends with one line, e.g.
 *   truth program=false_sharing threads=2 padded=0 stride_bytes=8 ... worker0.cpu_ns=...
 *     expect=memory elapsed_ns=...
 * Fields are documented in examples/README.md.
 *
 * usage: false_sharing [-t THREADS] [-w WORK_MS] [-k COMPUTE] [-p] [-i ROUNDS_PER_MS] [-C]
 * defaults: -t 2 -w 400 -k 2 -i 0 (calibrate)
 *
 * build: cc -O2 -g -pthread false_sharing.c -o false_sharing
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

#define LINE_WORDS 8 /* 8-byte counters per 64-byte cache line */

static int nthreads = 2, padded = 0;
static long work_ms = 400, compute_per_round = 2, rounds_per_ms = 0;
static uint64_t *counters; /* counter of thread i: counters[i * stride] */
static long stride = 1;
static pthread_barrier_t start_line;

/* ROUNDS rounds: COMPUTE iterations of compute(), then one increment of *counter.
 * noinline so that it has a name in a profile. */
__attribute__((noinline)) static uint64_t rounds(volatile uint64_t *counter, uint64_t h,
                                                 long n)
{
    for (long r = 0; r < n; r++) {
        uint64_t c = *counter + 1;
        *counter = c;
        /* The count feeds the next compute: a load that misses (the line was taken by
         * another core) stalls the chain instead of being overlapped with it. */
        h = compute(h ^ c, compute_per_round);
    }
    return h;
}

/* Rounds per ms of this thread's CPU time, on a counter alone in its cache line: double
 * until one run takes >= 5 ms, then scale. */
static long calibrate(void)
{
    static volatile uint64_t sink;
    static uint64_t own[LINE_WORDS] __attribute__((aligned(64)));
    for (long n = 1 << 10;; n *= 2) {
        int64_t c0 = thread_cpu_ns();
        sink = rounds(&own[0], sink, n);
        int64_t c = thread_cpu_ns() - c0;
        if (c >= 5000000 || n >= (1L << 40))
            return (long)((double)n * 1e6 / (double)(c > 0 ? c : 1)) + 1;
    }
}

struct worker {
    pthread_t thread;
    int id;
    long tid;
    int64_t cpu_ns, end_ns;
    uint64_t result;
} __attribute__((aligned(64))); /* one cache line each: only the counters share lines */

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    w->tid = gettid_long();
    pthread_barrier_wait(&start_line);
    w->result = rounds(&counters[(long)w->id * stride],
                       0x9e3779b97f4a7c15ULL * (uint64_t)(w->id + 1), work_ms * rounds_per_ms);
    w->cpu_ns = thread_cpu_ns();
    w->end_ns = now_ns();
    return NULL;
}

static void usage(const char *prog, FILE *to, int code)
{
    fprintf(to,
            "usage: %s [-t THREADS] [-w WORK_MS] [-k COMPUTE] [-p] [-i ROUNDS_PER_MS] [-C]\n"
            "  -t  worker threads (default 2)\n"
            "  -w  rounds per thread, in ms of one thread's CPU time alone here (default 400)\n"
            "  -k  compute() iterations between two increments of the counter (default 2)\n"
            "  -p  pad: each counter in a cache line of its own (no false sharing)\n"
            "  -i  rounds per ms (default 0: calibrate at start)\n"
            "  -C  calibrate, print `calibration ... rounds_per_ms=N` and exit\n"
            "Prints a `truth ...` line with each worker's CPU time and the wall time.\n",
            prog);
    exit(code);
}

int main(int argc, char **argv)
{
    int opt, calibrate_only = 0;
    while ((opt = getopt(argc, argv, "t:w:k:pi:Ch")) != -1) {
        switch (opt) {
        case 't': nthreads = (int)parse_count(argv[0], 't', optarg, 1, 1024); break;
        case 'w': work_ms = parse_count(argv[0], 'w', optarg, 0, 100000000); break;
        case 'k': compute_per_round = parse_count(argv[0], 'k', optarg, 0, 1000000); break;
        case 'p': padded = 1; break;
        case 'i': rounds_per_ms = parse_count(argv[0], 'i', optarg, 0, 1000000000); break;
        case 'C': calibrate_only = 1; break;
        case 'h': usage(argv[0], stdout, 0); break;
        default: usage(argv[0], stderr, 2);
        }
    }
    if (optind != argc)
        usage(argv[0], stderr, 2);

    int64_t cal0 = now_ns();
    if (rounds_per_ms == 0 || calibrate_only)
        rounds_per_ms = calibrate();
    int64_t calibration_ns = now_ns() - cal0;
    if (calibrate_only) {
        printf("calibration program=false_sharing compute_per_round=%ld rounds_per_ms=%ld "
               "calibration_ns=%lld\n",
               compute_per_round, rounds_per_ms, (long long)calibration_ns);
        return 0;
    }

    stride = padded ? LINE_WORDS : 1;
    size_t words = (size_t)nthreads * (size_t)stride;
    words = (words + LINE_WORDS - 1) / LINE_WORDS * LINE_WORDS; /* whole lines */
    counters = aligned_alloc(64, words * sizeof *counters);
    struct worker *w = aligned_alloc(64, sizeof *w * (size_t)nthreads);
    if (!counters || !w)
        return 1;
    memset(counters, 0, words * sizeof *counters);
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

    long per_thread = work_ms * rounds_per_ms;
    uint64_t checksum = 0;
    int64_t cpu_min = INT64_MAX, cpu_max = 0, cpu_total = 0;
    for (int i = 0; i < nthreads; i++) {
        /* Plain increments of words no other thread writes: none may be lost. */
        if (counters[(long)i * stride] != (uint64_t)per_thread) {
            fprintf(stderr, "false_sharing: worker %d counted %llu, not %ld\n", i,
                    (unsigned long long)counters[(long)i * stride], per_thread);
            return 1;
        }
        checksum ^= w[i].result;
        cpu_total += w[i].cpu_ns;
        if (w[i].cpu_ns < cpu_min)
            cpu_min = w[i].cpu_ns;
        if (w[i].cpu_ns > cpu_max)
            cpu_max = w[i].cpu_ns;
    }
    printf("truth program=false_sharing threads=%d cpus=%d padded=%d stride_bytes=%ld "
           "threads_per_line=%ld work_ms=%ld compute_per_round=%ld rounds_per_ms=%ld "
           "rounds_per_thread=%ld calibration_ns=%lld counters.addr=%p",
           nthreads, allowed_cpus(), padded, stride * 8, LINE_WORDS / stride, work_ms,
           compute_per_round, rounds_per_ms, per_thread, (long long)calibration_ns,
           (void *)counters);
    for (int i = 0; i < nthreads; i++)
        printf(" worker%d.tid=%ld worker%d.cpu_ns=%lld worker%d.busy_ns=%lld", i, w[i].tid, i,
               (long long)w[i].cpu_ns, i, (long long)(w[i].end_ns - start));
    printf(" cpu_ns_min=%lld cpu_ns_max=%lld cpu_ns_total=%lld ns_per_round=%.2f expect=%s"
           " elapsed_ns=%lld checksum=%016llx\n",
           (long long)cpu_min, (long long)cpu_max, (long long)cpu_total,
           per_thread > 0 ? (double)cpu_total / nthreads / (double)per_thread : 0.0,
           padded ? "none" : "memory", (long long)wall, (unsigned long long)checksum);
    pthread_barrier_destroy(&start_line);
    free(counters);
    free(w);
    return 0;
}
