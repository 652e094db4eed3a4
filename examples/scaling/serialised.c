/*
 * serialised: threads that do all their work under one lock.
 *
 * The same compute as independent.c (THREADS threads, WORK_MS ms of the same integer hash
 * chain each), but every piece of it is done while holding ONE mutex, `big_lock`, in chunks
 * of CHUNK_MS: in run_chunk() a thread takes big_lock, advances the shared hash state that
 * the lock protects by CHUNK_MS worth of iterations, and releases it.  So whatever the
 * number of CPUs, only one thread computes at a time: the average number of active threads
 * is A ~= 1, the others wait in pthread_mutex_lock, and each thread waits about
 * (THREADS-1)/THREADS of the wall time (with 2 threads: half of it).
 *
 * Handing the lock over.  glibc's mutex is not fair: a thread that unlocks and at once
 * locks again nearly always gets the lock back before the waiter it woke has been
 * scheduled, so one thread would do all its chunks and then the next (still serialised, but
 * as one long wait rather than a queue).  Here a thread that releases big_lock while another
 * is waiting for it (an atomic count of threads inside pthread_mutex_lock) does not lock
 * again until big_lock has changed hands: it polls the acquisition count, sleeping 20 µs
 * (nanosleep) between looks: sleeping, not spinning, so that on one CPU it does not keep
 * the waiter it has just woken from running.  That wait is lock-free and short (the
 * waiter's wake-up, tens of µs per chunk; `handover_ns_total` in the truth line), and often
 * nothing at all because the woken waiter already has the lock (always on one CPU, where
 * it preempts the releaser at once; the releaser then sits a few ms on the run queue before
 * it gets to block on the lock, so A ~= 1.1 there).  The waiting is all in
 * pthread_mutex_lock, where a lock probe sees it.
 *
 * ITERS_PER_MS is calibrated at start exactly as in independent.c (or given with -i), on
 * CLOCK_THREAD_CPUTIME_ID.  Workers are named worker-0, worker-1, ... and start together (a
 * pthread barrier with main).  It ends with one line, e.g.
 *   truth program=serialised threads=2 work_ms=400 chunk_ms=25 ... worker0.tid=1234
 *     worker0.cpu_ns=401234567 worker0.wait_ns=399876543 ... big_lock.addr=0x55... wall_ns=...
 * Fields are documented in examples/README.md.
 *
 * With -n ("no lock") each thread takes a lock of its own instead of big_lock, by the same
 * call, around the same chunks of the same compute (on a hash state of its own, no hand-over
 * wait): the program with the serialisation fixed, whose run time a what-if on big_lock
 * should predict (`own_locks=1` in the truth line; big_lock.* then add up the threads' own
 * locks, big_lock.addr is thread 0's).
 *
 * usage: serialised [-t THREADS] [-w WORK_MS] [-c CHUNK_MS] [-i ITERS_PER_MS] [-n]
 * defaults: -t 2 -w 400 -c 25 -i 0 (calibrate)   (about 0.82 s on any number of CPUs)
 *
 * build: cc -O2 -g -pthread serialised.c -o serialised
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
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

/* A lock and what it protects. */
struct lane {
    pthread_mutex_t *lock;
    uint64_t state;
    long chunks_done;
    int last_holder;
    long hand_offs;
};

static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lane big = {&big_lock, 0x243f6a8885a308d3ULL, 0, -1, 0};
static int own_locks; /* -n */

static atomic_long acquisitions; /* bumped by each holder: lets a releaser see a handover */
static atomic_int waiting;       /* threads inside pthread_mutex_lock(&big_lock) */

static int nthreads = 2;
static long work_ms = 400, chunk_ms = 25, iters_per_ms = 0;
static int lock_line; /* source line of the pthread_mutex_lock call */
static pthread_barrier_t start_line;

struct worker {
    pthread_t thread;
    pthread_mutex_t own_lock; /* used instead of big_lock with -n */
    struct lane own;
    int id;
    long tid, chunks, handover_spins;
    int64_t cpu_ns, wait_ns, hold_ns, max_wait_ns, handover_ns;
} __attribute__((aligned(64)));

/* One chunk of work under big_lock: the only place big_lock is taken. */
__attribute__((noinline)) static void run_chunk(struct worker *w, struct lane *l, long iters)
{
    atomic_fetch_add(&waiting, 1);
    int64_t t0 = now_ns();
    pthread_mutex_lock(l->lock); lock_line = __LINE__;
    int64_t t1 = now_ns();
    atomic_fetch_sub(&waiting, 1);
    long seq = atomic_fetch_add(&acquisitions, 1) + 1;
    l->state = compute(l->state ^ (uint64_t)w->id, iters);
    l->chunks_done++;
    if (l->last_holder >= 0 && l->last_holder != w->id)
        l->hand_offs++;
    l->last_holder = w->id;
    int64_t t2 = now_ns();
    pthread_mutex_unlock(l->lock);

    int64_t wait = t1 - t0;
    w->chunks++;
    w->wait_ns += wait;
    w->hold_ns += t2 - t1;
    if (wait > w->max_wait_ns)
        w->max_wait_ns = wait;

    /* Hand over: if someone is waiting, let them have it before we ask again.  (Often the
     * woken waiter has the lock already by now, and there is nothing to wait for.) */
    if (!own_locks && atomic_load(&waiting) > 0 && atomic_load(&acquisitions) == seq) {
        int64_t h0 = now_ns();
        const struct timespec step = {0, 20000}; /* 20 µs */
        while (atomic_load(&acquisitions) == seq)
            nanosleep(&step, NULL);
        w->handover_spins++;
        w->handover_ns += now_ns() - h0;
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    w->tid = gettid_long();
    pthread_barrier_wait(&start_line);
    struct lane *l = own_locks ? &w->own : &big;
    long left = work_ms * iters_per_ms, chunk = chunk_ms * iters_per_ms;
    if (chunk < 1)
        chunk = 1;
    while (left > 0) {
        long n = left < chunk ? left : chunk;
        run_chunk(w, l, n);
        left -= n;
    }
    w->cpu_ns = thread_cpu_ns();
    return NULL;
}

static void usage(const char *prog, FILE *to, int code)
{
    fprintf(to,
            "usage: %s [-t THREADS] [-w WORK_MS] [-c CHUNK_MS] [-i ITERS_PER_MS] [-n]\n"
            "  -t  worker threads (default 2)\n"
            "  -w  compute per thread, in ms of CPU time on this machine (default 400)\n"
            "  -c  compute per hold of big_lock, ms (default 25)\n"
            "  -i  iterations of compute() per ms (default 0: calibrate at start)\n"
            "  -n  each thread takes a lock of its own instead of big_lock (no serialisation)\n"
            "Prints a `truth ...` line with each worker's CPU time, lock waits and holds.\n",
            prog);
    exit(code);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "t:w:c:i:nh")) != -1) {
        switch (opt) {
        case 't': nthreads = (int)parse_count(argv[0], 't', optarg, 1, 1024); break;
        case 'w': work_ms = parse_count(argv[0], 'w', optarg, 0, 100000000); break;
        case 'c': chunk_ms = parse_count(argv[0], 'c', optarg, 1, 100000000); break;
        case 'i': iters_per_ms = parse_count(argv[0], 'i', optarg, 0, 1000000000); break;
        case 'n': own_locks = 1; break;
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
        pthread_mutex_init(&w[i].own_lock, NULL);
        w[i].own = (struct lane){&w[i].own_lock, big.state, 0, -1, 0};
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

    long chunks = 0, spins = 0, chunks_done = big.chunks_done, hand_offs = big.hand_offs;
    uint64_t checksum = big.state;
    int64_t cpu_min = INT64_MAX, cpu_max = 0, cpu_total = 0, wait_total = 0, hold_total = 0,
            wait_max = 0, handover_total = 0;
    for (int i = 0; i < nthreads; i++) {
        chunks += w[i].chunks;
        chunks_done += w[i].own.chunks_done;
        hand_offs += w[i].own.hand_offs;
        if (own_locks)
            checksum ^= w[i].own.state;
        spins += w[i].handover_spins;
        cpu_total += w[i].cpu_ns;
        wait_total += w[i].wait_ns;
        hold_total += w[i].hold_ns;
        handover_total += w[i].handover_ns;
        if (w[i].cpu_ns < cpu_min)
            cpu_min = w[i].cpu_ns;
        if (w[i].cpu_ns > cpu_max)
            cpu_max = w[i].cpu_ns;
        if (w[i].max_wait_ns > wait_max)
            wait_max = w[i].max_wait_ns;
    }
    if (chunks != chunks_done || chunks != atomic_load(&acquisitions)) {
        fprintf(stderr, "serialised: chunk counts disagree: the lock did not exclude\n");
        return 1;
    }
    char site[128] = "none";
    if (lock_line) {
        const char *file = strrchr(__FILE__, '/');
        snprintf(site, sizeof site, "%s:%d:run_chunk", file ? file + 1 : __FILE__, lock_line);
    }
    printf("truth program=serialised threads=%d work_ms=%ld chunk_ms=%ld iters_per_ms=%ld "
           "iters_per_thread=%ld calibration_ns=%lld own_locks=%d",
           nthreads, work_ms, chunk_ms, iters_per_ms, work_ms * iters_per_ms,
           (long long)calibration_ns, own_locks);
    for (int i = 0; i < nthreads; i++)
        printf(" worker%d.tid=%ld worker%d.cpu_ns=%lld worker%d.wait_ns=%lld worker%d.hold_ns=%lld",
               i, w[i].tid, i, (long long)w[i].cpu_ns, i, (long long)w[i].wait_ns, i,
               (long long)w[i].hold_ns);
    printf(" cpu_ns_min=%lld cpu_ns_max=%lld cpu_ns_total=%lld"
           " big_lock.addr=%p big_lock.site=%s big_lock.acquisitions=%ld"
           " big_lock.wait_ns_total=%lld big_lock.wait_ns_max=%lld big_lock.hold_ns_total=%lld"
           " big_lock.hand_offs=%ld handover_spins=%ld handover_ns_total=%lld wall_ns=%lld"
           " checksum=%016llx\n",
           (long long)cpu_min, (long long)cpu_max, (long long)cpu_total,
           (void *)(own_locks ? &w[0].own_lock : &big_lock),
           site, chunks, (long long)wait_total, (long long)wait_max, (long long)hold_total,
           hand_offs, spins, (long long)handover_total, (long long)wall,
           (unsigned long long)checksum);
    pthread_barrier_destroy(&start_line);
    free(w);
    return 0;
}
