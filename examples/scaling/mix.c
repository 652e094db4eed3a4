/*
 * mix: half memory-bandwidth-bound, half serialised by one lock.
 *
 * THREADS threads each do two phases, one after the other:
 *   memory  WORK_MS/2 ms (of one thread's CPU time) of membw.c's stream,
 *           `a[i] = b[i] * 1.5 + a[i]` over the thread's own arrays (SIZE_MIB in all);
 *   lock    WORK_MS/2 ms of serialised.c's compute, all of it holding ONE mutex, `big_lock`,
 *           in chunks of CHUNK_MS, handed over between threads as serialised.c does.
 * So on 2 cores about half the single-thread time is lost to memory bandwidth and half
 * to waiting for big_lock: the expected causes are `memory+blocked`, and the share of each
 * is measured by running the components alone, with the same work: `-o memory` runs only
 * the memory phase (membw at half the work), `-o lock` only the lock phase (serialised at
 * half the work).  `-n` gives each thread its own lock (the fix: nothing waits, and only
 * the memory loss is left).
 *
 * The phases run in that order and not interleaved: were they interleaved, one thread's
 * stream would run while the other holds the lock, and the components would hide each
 * other's loss instead of adding up.
 *
 * The work is fixed: WORK_MS/2 x ELEMS_PER_MS elements and WORK_MS/2 x ITERS_PER_MS
 * iterations of compute() per thread.  Both rates are calibrated at start as in membw.c
 * and independent.c (on CLOCK_THREAD_CPUTIME_ID) unless given with -e and -i; `mix -C`
 * prints both and exits, so that a script calibrates once.  Arrays are filled before the
 * start barrier, so page faults are not in the timed phase.  Workers are named worker-0,
 * worker-1, ... and start together (a pthread barrier with main).  It ends with one line,
 * e.g.
 *   truth program=mix threads=2 only=both own_locks=0 work_ms=400 ... worker0.mem_ns=...
 *     worker0.lock_wait_ns=... big_lock.addr=0x55... expect=memory+blocked elapsed_ns=...
 * Fields are documented in examples/README.md.
 *
 * usage: mix [-t THREADS] [-w WORK_MS] [-s SIZE_MIB] [-c CHUNK_MS] [-o memory|lock] [-n]
 *            [-e ELEMS_PER_MS] [-i ITERS_PER_MS] [-C]
 * defaults: -t 2 -w 400 -s 64 -c 10 -e 0 -i 0 (calibrate)
 *
 * build: cc -O2 -g -pthread mix.c -o mix
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* ---- the memory phase: membw.c's stream ---- */

__attribute__((noinline)) static void stream(double *restrict a, const double *restrict b,
                                             size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] * 1.5 + a[i];
}

static void map_arrays(size_t n, double **a, double **b)
{
    size_t bytes = n * sizeof(double);
    for (int k = 0; k < 2; k++) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("mix: mmap");
            exit(1);
        }
        if (k == 0)
            *a = p;
        else
            *b = p;
    }
    for (size_t i = 0; i < n; i++) {
        (*a)[i] = 1.0;
        (*b)[i] = (double)(i & 1023) * 0.001;
    }
}

static void unmap_arrays(size_t n, double *a, double *b)
{
    munmap(a, n * sizeof(double));
    munmap(b, n * sizeof(double));
}

/* Elements streamed per ms of this thread's CPU time (as in membw.c). */
static long calibrate_stream(size_t n)
{
    double *a, *b;
    map_arrays(n, &a, &b);
    stream(a, b, n);
    int64_t c0 = thread_cpu_ns();
    long passes = 0;
    int64_t c;
    do {
        stream(a, b, n);
        passes++;
        c = thread_cpu_ns() - c0;
    } while (c < 50000000);
    unmap_arrays(n, a, b);
    return (long)((double)n * (double)passes * 1e6 / (double)c) + 1;
}

/* ---- the lock phase: serialised.c's chunks under big_lock ---- */

/* A lock with the counts the hand-over needs (see serialised.c): the acquisitions let a
 * releaser see that the lock changed hands, `waiting` counts threads inside
 * pthread_mutex_lock. */
struct lock_slot {
    pthread_mutex_t *mutex;
    atomic_long acquisitions;
    atomic_int waiting;
    uint64_t state; /* protected by *mutex */
} __attribute__((aligned(64)));

static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
/* Source line of the pthread_mutex_lock call; atomic because with -n the threads set it
 * under different locks. */
static atomic_int lock_line;

static int nthreads = 2, own_locks = 0, do_memory = 1, do_lock = 1;
static long work_ms = 400, size_mib = 64, chunk_ms = 10, elems_per_ms = 0, iters_per_ms = 0;
static size_t elems; /* per array */
static struct lock_slot *slots;
static pthread_barrier_t start_line;

struct worker {
    pthread_t thread;
    int id;
    long tid, chunks, handover_spins;
    double *a, *b;
    int64_t cpu_ns, mem_ns, mem_cpu_ns, lock_ns, wait_ns, hold_ns, handover_ns, end_ns;
    double result;
} __attribute__((aligned(64)));

/* One chunk of work under the thread's lock (big_lock unless -n). */
__attribute__((noinline)) static void run_chunk(struct worker *w, struct lock_slot *s,
                                                long iters)
{
    atomic_fetch_add(&s->waiting, 1);
    int64_t t0 = now_ns();
    pthread_mutex_lock(s->mutex); atomic_store_explicit(&lock_line, __LINE__, memory_order_relaxed);
    int64_t t1 = now_ns();
    atomic_fetch_sub(&s->waiting, 1);
    long seq = atomic_fetch_add(&s->acquisitions, 1) + 1;
    s->state = compute(s->state ^ (uint64_t)w->id, iters);
    int64_t t2 = now_ns();
    pthread_mutex_unlock(s->mutex);
    w->chunks++;
    w->wait_ns += t1 - t0;
    w->hold_ns += t2 - t1;

    /* Hand over: if someone is waiting, let them have it before asking again. */
    if (atomic_load(&s->waiting) > 0 && atomic_load(&s->acquisitions) == seq) {
        int64_t h0 = now_ns();
        const struct timespec step = {0, 20000}; /* 20 µs */
        while (atomic_load(&s->acquisitions) == seq)
            nanosleep(&step, NULL);
        w->handover_spins++;
        w->handover_ns += now_ns() - h0;
    }
}

/* The memory phase's work, in chunks of 1 ms of one thread's stream, shared by all threads
 * (as in membw.c): each takes the next until none is left, so the threads end the phase
 * within a chunk of each other and their streams overlap the whole phase.  With a fixed
 * share each, the thread that got less bandwidth streamed on alone while the other was
 * already in the lock phase. */
static atomic_long mem_chunks_left;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    w->tid = gettid_long();
    if (do_memory)
        map_arrays(elems, &w->a, &w->b);
    pthread_barrier_wait(&start_line);

    int64_t t0 = now_ns(), c0 = thread_cpu_ns();
    if (do_memory) {
        size_t at = 0;
        while (atomic_fetch_sub_explicit(&mem_chunks_left, 1, memory_order_relaxed) > 0) {
            long left = elems_per_ms;
            while (left > 0) {
                size_t n = elems - at;
                if ((size_t)left < n)
                    n = (size_t)left;
                stream(w->a + at, w->b + at, n);
                at = (at + n) % elems;
                left -= (long)n;
            }
        }
        w->result = w->a[0] + w->a[elems / 2] + w->a[elems - 1];
    }
    int64_t t1 = now_ns();
    w->mem_ns = t1 - t0;
    w->mem_cpu_ns = thread_cpu_ns() - c0;
    if (do_lock) {
        struct lock_slot *s = &slots[own_locks ? w->id : 0];
        long left = work_ms / 2 * iters_per_ms, chunk = chunk_ms * iters_per_ms;
        if (chunk < 1)
            chunk = 1;
        while (left > 0) {
            long n = left < chunk ? left : chunk;
            run_chunk(w, s, n);
            left -= n;
        }
    }
    w->end_ns = now_ns();
    w->lock_ns = w->end_ns - t1;
    w->cpu_ns = thread_cpu_ns();
    return NULL;
}

static void usage(const char *prog, FILE *to, int code)
{
    fprintf(to,
            "usage: %s [-t THREADS] [-w WORK_MS] [-s SIZE_MIB] [-c CHUNK_MS] [-o memory|lock] [-n]\n"
            "          [-e ELEMS_PER_MS] [-i ITERS_PER_MS] [-C]\n"
            "  -t  worker threads (default 2)\n"
            "  -w  work per thread, in ms of one thread's CPU time here, half memory stream,\n"
            "      half compute under big_lock (default 400)\n"
            "  -s  MiB of arrays per thread for the memory phase (default 64)\n"
            "  -c  compute per hold of the lock, ms (default 10)\n"
            "  -o  only one component: `memory` (the stream) or `lock` (the locked compute)\n"
            "  -n  each thread its own lock instead of big_lock (nothing waits)\n"
            "  -e  elements streamed per ms (default 0: calibrate at start)\n"
            "  -i  iterations of compute() per ms (default 0: calibrate at start)\n"
            "  -C  calibrate, print `calibration ... elems_per_ms=N iters_per_ms=N` and exit\n"
            "Prints a `truth ...` line with each worker's phases, lock waits and the wall time.\n",
            prog);
    exit(code);
}

int main(int argc, char **argv)
{
    int opt, calibrate_only = 0;
    const char *only = "both";
    while ((opt = getopt(argc, argv, "t:w:s:c:o:ne:i:Ch")) != -1) {
        switch (opt) {
        case 't': nthreads = (int)parse_count(argv[0], 't', optarg, 1, 1024); break;
        case 'w': work_ms = parse_count(argv[0], 'w', optarg, 0, 100000000); break;
        case 's': size_mib = parse_count(argv[0], 's', optarg, 1, 1L << 20); break;
        case 'c': chunk_ms = parse_count(argv[0], 'c', optarg, 1, 100000000); break;
        case 'o':
            if (strcmp(optarg, "memory") == 0) {
                do_lock = 0;
                only = "memory";
            } else if (strcmp(optarg, "lock") == 0) {
                do_memory = 0;
                only = "lock";
            } else {
                fprintf(stderr, "%s: -o wants `memory` or `lock`, got '%s'\n", argv[0], optarg);
                return 2;
            }
            break;
        case 'n': own_locks = 1; break;
        case 'e': elems_per_ms = parse_count(argv[0], 'e', optarg, 0, 1000000000); break;
        case 'i': iters_per_ms = parse_count(argv[0], 'i', optarg, 0, 1000000000); break;
        case 'C': calibrate_only = 1; break;
        case 'h': usage(argv[0], stdout, 0); break;
        default: usage(argv[0], stderr, 2);
        }
    }
    if (optind != argc)
        usage(argv[0], stderr, 2);
    elems = (size_t)size_mib * 1024 * 1024 / 2 / sizeof(double);

    int64_t cal0 = now_ns();
    if ((do_memory && elems_per_ms == 0) || calibrate_only)
        elems_per_ms = calibrate_stream(elems);
    if ((do_lock && iters_per_ms == 0) || calibrate_only)
        iters_per_ms = calibrate();
    int64_t calibration_ns = now_ns() - cal0;
    if (calibrate_only) {
        printf("calibration program=mix size_mib=%ld elems_per_ms=%ld iters_per_ms=%ld "
               "calibration_ns=%lld\n",
               size_mib, elems_per_ms, iters_per_ms, (long long)calibration_ns);
        return 0;
    }

    int nslots = own_locks ? nthreads : 1;
    slots = aligned_alloc(64, sizeof *slots * (size_t)nslots);
    pthread_mutex_t *own = own_locks ? calloc((size_t)nthreads, sizeof *own) : NULL;
    struct worker *w = aligned_alloc(64, sizeof *w * (size_t)nthreads);
    if (!slots || !w || (own_locks && !own))
        return 1;
    memset(slots, 0, sizeof *slots * (size_t)nslots);
    for (int i = 0; i < nslots; i++) {
        if (own_locks) {
            pthread_mutex_init(&own[i], NULL);
            slots[i].mutex = &own[i];
        } else {
            slots[i].mutex = &big_lock;
        }
        slots[i].state = 0x243f6a8885a308d3ULL + (uint64_t)i;
    }
    memset(w, 0, sizeof *w * (size_t)nthreads);
    atomic_store(&mem_chunks_left, (long)nthreads * (work_ms / 2));
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

    long chunks = 0, spins = 0, acquisitions = 0;
    int64_t cpu_total = 0, mem_total = 0, lock_total = 0, wait_total = 0, hold_total = 0,
            handover_total = 0;
    double checksum = 0;
    uint64_t state = 0;
    for (int i = 0; i < nthreads; i++) {
        chunks += w[i].chunks;
        spins += w[i].handover_spins;
        cpu_total += w[i].cpu_ns;
        mem_total += w[i].mem_ns;
        lock_total += w[i].lock_ns;
        wait_total += w[i].wait_ns;
        hold_total += w[i].hold_ns;
        handover_total += w[i].handover_ns;
        checksum += w[i].result;
    }
    for (int i = 0; i < nslots; i++) {
        acquisitions += atomic_load(&slots[i].acquisitions);
        state ^= slots[i].state;
    }
    if (chunks != acquisitions) {
        fprintf(stderr, "mix: chunk counts disagree: the lock did not exclude\n");
        return 1;
    }
    char site[128] = "none";
    if (atomic_load(&lock_line)) {
        const char *file = strrchr(__FILE__, '/');
        snprintf(site, sizeof site, "%s:%d:run_chunk", file ? file + 1 : __FILE__,
                 atomic_load(&lock_line));
    }
    /* What the scaling model should find, by construction: the stream's bandwidth
     * contention, the wait for one shared lock, both, or (only the lock, each its own)
     * nothing. */
    const char *expect = do_memory && do_lock && !own_locks ? "memory+blocked"
                         : do_memory                         ? "memory"
                         : own_locks                         ? "none"
                                                             : "blocked";
    printf("truth program=mix threads=%d cpus=%d only=%s own_locks=%d work_ms=%ld "
           "memory_ms=%ld lock_ms=%ld size_mib=%ld chunk_ms=%ld elems_per_ms=%ld "
           "iters_per_ms=%ld calibration_ns=%lld",
           nthreads, allowed_cpus(), only, own_locks, work_ms, do_memory ? work_ms / 2 : 0,
           do_lock ? work_ms / 2 : 0, size_mib, chunk_ms, elems_per_ms, iters_per_ms,
           (long long)calibration_ns);
    for (int i = 0; i < nthreads; i++)
        printf(" worker%d.tid=%ld worker%d.cpu_ns=%lld worker%d.mem_ns=%lld worker%d.mem_cpu_ns=%lld"
               " worker%d.lock_ns=%lld worker%d.lock_wait_ns=%lld worker%d.hold_ns=%lld",
               i, w[i].tid, i, (long long)w[i].cpu_ns, i, (long long)w[i].mem_ns, i,
               (long long)w[i].mem_cpu_ns, i, (long long)w[i].lock_ns, i,
               (long long)w[i].wait_ns, i, (long long)w[i].hold_ns);
    printf(" cpu_ns_total=%lld mem_ns_total=%lld lock_ns_total=%lld lock_wait_ns_total=%lld"
           " hold_ns_total=%lld big_lock.addr=%p big_lock.site=%s locks=%d acquisitions=%ld"
           " handover_spins=%ld handover_ns_total=%lld expect=%s elapsed_ns=%lld"
           " checksum=%.6g/%016llx\n",
           (long long)cpu_total, (long long)mem_total, (long long)lock_total,
           (long long)wait_total, (long long)hold_total, (void *)&big_lock, site, nslots,
           acquisitions, spins, (long long)handover_total, expect, (long long)wall, checksum,
           (unsigned long long)state);
    for (int i = 0; i < nthreads; i++)
        if (do_memory)
            unmap_arrays(elems, w[i].a, w[i].b);
    if (own)
        for (int i = 0; i < nthreads; i++)
            pthread_mutex_destroy(&own[i]);
    pthread_barrier_destroy(&start_line);
    free(own);
    free(slots);
    free(w);
    return 0;
}
