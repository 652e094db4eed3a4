/*
 * planted_hold: a lock held for a known time by a known number of threads.
 *
 * THREADS threads each take the global `hot_lock` HOLDS times, always from one call site in
 * update_shared_counter(), and keep it while doing HOLD_US microseconds of CPU work (a
 * busy-wait on the thread's CPU clock, CLOCK_THREAD_CPUTIME_ID, so the holder stays on the
 * CPU and a holder that is preempted does not count the time it was off it as work done:
 * the hold is HOLD_US or longer on the wall clock); between holds each does WORK_US of CPU
 * work outside the lock, spun the same way.  So the program's CPU demand is fixed, whatever
 * the machine's load: THREADS x HOLDS x (HOLD_US + WORK_US).  With the defaults the lock is
 * wanted ~90 % of the time by each of 4 threads, so almost every acquisition waits.
 * Thread 0 alone also takes `cold_lock` COLD times per round from record_private_stat():
 * no other thread ever touches it, so it can never be contended.
 *
 * The program measures, per acquisition, the time from calling pthread_mutex_lock to its
 * return (the wait, including the ~20-50 ns an uncontended lock costs plus one clock read)
 * and from that return to the call of pthread_mutex_unlock (the hold).  Sums are exact to
 * about two clock reads (~50 ns) per acquisition; no sampling.  A probe that measures
 * inside pthread_mutex_lock sees slightly less wait than this (not the caller's clock
 * read) and slightly more hold (its own exit path): well under 1 % at the defaults.
 * Each thread takes `warm_lock` once before the measured phase, so that a probe's one-time
 * set-up on a thread's first record (milliseconds, seen on a loaded machine) is not inside
 * a measured hold.
 *
 * For tests that must hold on a loaded machine it also prints: `*.hold_ns_max`, the longest
 * hold (on a busy machine, 1 ms plus the longest time a holder was kept off the CPU);
 * `*.held_at_call`, the calls made at least 10 us before the previous holder's last clock
 * read in its hold (which it leaves in a variable the lock protects): those find the lock
 * taken, whatever the machine's speed, unless the caller is preempted for that long before
 * its first step inside pthread_mutex_lock; `*.hold_ns2_total` and `*.hold_ns2_free`, the
 * sums of the squares of all holds and of the holds of the other calls (ns^2, for the
 * variance of an estimate that samples the uncontended acquisitions).
 *
 * It ends with one line, e.g.
 *   truth program=planted_hold threads=4 holds_per_thread=100 hold_ns=1000000 ...
 *     hot_lock.acquisitions=400 hot_lock.hold_ns_total=400012345 hot_lock.wait_ns_total=...
 *     cold_lock.acquisitions=2500 ... elapsed_ns=...
 * (one line; fields documented in examples/README.md).
 *
 * With -s the holder sleeps through its hold (nanosleep) instead of spinning: on a machine
 * busy with other work a spinning holder that is preempted keeps the lock for whole time
 * slices of the others, a sleeping one only for its wake-up latency.
 *
 * With -n ("no lock") every thread takes a lock of its own instead of hot_lock, by the same
 * calls at the same site, doing the same work: the program with the contention fixed, whose
 * run time is what a what-if on hot_lock should predict (`own_locks=1` in the truth line;
 * the hot_lock.* fields then add up the threads' own locks, hot_lock.addr is thread 0's).
 *
 * usage: planted_hold [-t THREADS] [-k HOLDS] [-H HOLD_US] [-w WORK_US] [-c COLD] [-s] [-n]
 * defaults: -t 4 -k 100 -H 1000 -w 100 -c 25   (about 0.43 s on 2 CPUs)
 *
 * build: cc -O2 -g -pthread planted_hold.c -o planted_hold
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

/* ---- timing helpers (the same in every lock example; each file stands alone so that
 * `contend demo` can build it from its embedded source) ---------------------------- */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
static inline int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Nanoseconds of CPU time of the calling thread. */
static inline int64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Busy-wait (on the CPU, not asleep) for `ns` of this thread's CPU time: time spent preempted
 * does not count, so the work done is the same on an idle or a busy machine.  The CPU clock
 * is a system call (~0.3 us), so in between the loop spins on CLOCK_MONOTONIC (vDSO) for at
 * most what is left, in steps of up to 20 us: a step cut by a preemption ends with less CPU
 * time than wall time, and the next reading of the CPU clock makes it up.  Exact to one CPU
 * clock read. */
static inline void spin_cpu(int64_t ns)
{
    int64_t deadline = thread_cpu_ns() + ns;
    for (;;) {
        int64_t left = deadline - thread_cpu_ns();
        if (left <= 0)
            return;
        int64_t until = now_ns() + (left < 20000 ? left : 20000);
        while (now_ns() < until)
            ;
    }
}

/* Parse a non-negative integer option value or exit with a usage message. */
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

/* The source file's base name, for "site=file:line:function" fields. */
static inline const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}
/* ----------------------------------------------------------------------------------- */

/* A lock and what it protects: a counter, and its last holder's final clock read before
 * unlocking. */
struct lane {
    pthread_mutex_t *lock;
    long counter;
    int64_t hold_end;
};

static pthread_mutex_t hot_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lane hot_lane = {&hot_lock, 0, 0};
static pthread_mutex_t cold_lock = PTHREAD_MUTEX_INITIALIZER;

static long private_stat;    /* protected by cold_lock (only thread 0 uses it) */

static int nthreads = 4;
static long holds = 100, cold_per_round = 25;
static int64_t hold_ns = 1000000, work_ns = 100000;
static int sleep_hold; /* -s */
static int own_locks;  /* -n */

static int hot_line, cold_line; /* source lines of the two pthread_mutex_lock calls */
/* cold_lock's last holder's final clock read before unlocking, protected by it. */
static int64_t cold_hold_end;
static pthread_mutex_t warm_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int go;

/* Per-lock sums, one set per thread (no sharing while running). */
struct sums {
    long acquisitions, waits_over_5us, held_at_call;
    int64_t wait_ns, hold_ns, max_wait_ns, max_hold_ns;
    double hold2_ns, hold2_free; /* ns^2: 1e8 holds of 1 ms would overflow int64 */
};

/* t0: before the lock call; t1: after it returned; t2: the last clock read before the
 * unlock call; prev_end: the previous holder's t2 (0 if none). */
static void account(struct sums *s, int64_t t0, int64_t t1, int64_t t2, int64_t prev_end)
{
    int64_t wait = t1 - t0, hold = t2 - t1;
    s->acquisitions++;
    s->wait_ns += wait;
    s->hold_ns += hold;
    s->hold2_ns += (double)hold * (double)hold;
    if (hold > s->max_hold_ns)
        s->max_hold_ns = hold;
    if (wait > s->max_wait_ns)
        s->max_wait_ns = wait;
    if (wait > 5000)
        s->waits_over_5us++;
    if (t0 + 10000 < prev_end)
        s->held_at_call++;
    else
        s->hold2_free += (double)hold * (double)hold;
}

/* The planted hot spot: the only place hot_lock (or, with -n, a thread's own lock) is taken. */
__attribute__((noinline)) static void update_shared_counter(struct sums *s, struct lane *l)
{
    int64_t t0 = now_ns();
    pthread_mutex_lock(l->lock); hot_line = __LINE__;
    int64_t t1 = now_ns();
    int64_t prev_end = l->hold_end;
    l->counter++;
    if (sleep_hold) { /* the planted hold, asleep */
        struct timespec d = {hold_ns / 1000000000, hold_ns % 1000000000};
        while (nanosleep(&d, &d) != 0)
            ;
    } else {
        spin_cpu(hold_ns); /* the planted hold: HOLD_US of CPU work */
    }
    int64_t t2 = now_ns();
    l->hold_end = t2;
    pthread_mutex_unlock(l->lock);
    account(s, t0, t1, t2, prev_end);
}

/* The never-contended lock: only thread 0 ever calls this. */
__attribute__((noinline)) static void record_private_stat(struct sums *s)
{
    int64_t t0 = now_ns();
    pthread_mutex_lock(&cold_lock); cold_line = __LINE__;
    int64_t t1 = now_ns();
    int64_t prev_end = cold_hold_end;
    private_stat++;
    int64_t t2 = now_ns();
    cold_hold_end = t2;
    pthread_mutex_unlock(&cold_lock);
    account(s, t0, t1, t2, prev_end);
}

struct worker {
    pthread_t thread;
    int id;
    struct sums hot, cold;
    /* The thread's own lock, used instead of hot_lock with -n (a cache line of its own). */
    pthread_mutex_t own_lock __attribute__((aligned(64)));
    struct lane own;
} __attribute__((aligned(64)));

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "holder-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&warm_lock); /* see the top of the file */
    pthread_mutex_unlock(&warm_lock);
    while (!atomic_load(&go)) /* start together, without a pthread barrier in the trace */
        ;
    struct lane *l = own_locks ? &w->own : &hot_lane;
    for (long i = 0; i < holds; i++) {
        update_shared_counter(&w->hot, l);
        if (w->id == 0)
            for (long j = 0; j < cold_per_round; j++)
                record_private_stat(&w->cold);
        spin_cpu(work_ns); /* work outside the lock */
    }
    return NULL;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-t THREADS] [-k HOLDS] [-H HOLD_US] [-w WORK_US] [-c COLD] [-s] [-n]\n"
            "  -t  threads taking hot_lock (default 4)\n"
            "  -k  acquisitions of hot_lock per thread (default 100)\n"
            "  -H  hold time of hot_lock: microseconds of CPU work, unless -s (default 1000)\n"
            "  -w  CPU work between acquisitions in microseconds (default 100)\n"
            "  -c  acquisitions of cold_lock per round, thread 0 only (default 25)\n"
            "  -s  hold hot_lock asleep (nanosleep) rather than busy\n"
            "  -n  each thread takes a lock of its own instead of hot_lock (no contention)\n",
            prog);
    exit(2);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "t:k:H:w:c:snh")) != -1) {
        switch (opt) {
        case 't': nthreads = (int)parse_count(argv[0], 't', optarg, 1, 1024); break;
        case 'k': holds = parse_count(argv[0], 'k', optarg, 1, 100000000); break;
        case 'H': hold_ns = parse_count(argv[0], 'H', optarg, 0, 10000000) * 1000; break;
        case 'w': work_ns = parse_count(argv[0], 'w', optarg, 0, 10000000) * 1000; break;
        case 'c': cold_per_round = parse_count(argv[0], 'c', optarg, 0, 1000000); break;
        case 's': sleep_hold = 1; break;
        case 'n': own_locks = 1; break;
        default: usage(argv[0]);
        }
    }
    if (optind != argc)
        usage(argv[0]);

    struct worker *w = aligned_alloc(64, sizeof *w * (size_t)nthreads);
    if (!w)
        return 1;
    memset(w, 0, sizeof *w * (size_t)nthreads);
    for (int i = 0; i < nthreads; i++) {
        w[i].id = i;
        pthread_mutex_init(&w[i].own_lock, NULL);
        w[i].own.lock = &w[i].own_lock;
        if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    int64_t start = now_ns();
    atomic_store(&go, 1);
    for (int i = 0; i < nthreads; i++)
        pthread_join(w[i].thread, NULL);
    int64_t elapsed = now_ns() - start;

    struct sums hot = {0}, cold = {0};
    long counted = hot_lane.counter;
    for (int i = 0; i < nthreads; i++) {
        counted += w[i].own.counter;
        hot.acquisitions += w[i].hot.acquisitions;
        hot.held_at_call += w[i].hot.held_at_call;
        hot.hold2_ns += w[i].hot.hold2_ns;
        hot.hold2_free += w[i].hot.hold2_free;
        if (w[i].hot.max_hold_ns > hot.max_hold_ns)
            hot.max_hold_ns = w[i].hot.max_hold_ns;
        hot.waits_over_5us += w[i].hot.waits_over_5us;
        hot.wait_ns += w[i].hot.wait_ns;
        hot.hold_ns += w[i].hot.hold_ns;
        if (w[i].hot.max_wait_ns > hot.max_wait_ns)
            hot.max_wait_ns = w[i].hot.max_wait_ns;
        cold.acquisitions += w[i].cold.acquisitions;
        cold.held_at_call += w[i].cold.held_at_call;
        cold.hold2_ns += w[i].cold.hold2_ns;
        cold.hold2_free += w[i].cold.hold2_free;
        if (w[i].cold.max_hold_ns > cold.max_hold_ns)
            cold.max_hold_ns = w[i].cold.max_hold_ns;
        cold.waits_over_5us += w[i].cold.waits_over_5us;
        cold.wait_ns += w[i].cold.wait_ns;
        cold.hold_ns += w[i].cold.hold_ns;
        if (w[i].cold.max_wait_ns > cold.max_wait_ns)
            cold.max_wait_ns = w[i].cold.max_wait_ns;
    }
    if (counted != hot.acquisitions || private_stat != cold.acquisitions) {
        fprintf(stderr, "planted_hold: counters disagree: the locks did not exclude\n");
        return 1;
    }
    /* A site is known only if the lock was taken there ("none" otherwise, e.g. -c 0). */
    const char *file = base_name(__FILE__);
    char hot_site[128] = "none", cold_site[128] = "none";
    if (hot_line)
        snprintf(hot_site, sizeof hot_site, "%s:%d:update_shared_counter", file, hot_line);
    if (cold_line)
        snprintf(cold_site, sizeof cold_site, "%s:%d:record_private_stat", file, cold_line);
    printf("truth program=planted_hold threads=%d holds_per_thread=%ld hold_ns=%lld "
           "work_ns=%lld cold_per_round=%ld own_locks=%d "
           "hot_lock.addr=%p hot_lock.site=%s hot_lock.threads=%d "
           "hot_lock.acquisitions=%ld hot_lock.hold_ns_total=%lld hot_lock.wait_ns_total=%lld "
           "hot_lock.wait_ns_max=%lld hot_lock.waits_over_5us=%ld hot_lock.held_at_call=%ld "
           "hot_lock.hold_ns_max=%lld hot_lock.hold_ns2_total=%.0f hot_lock.hold_ns2_free=%.0f "
           "cold_lock.addr=%p cold_lock.site=%s cold_lock.threads=%d "
           "cold_lock.acquisitions=%ld cold_lock.hold_ns_total=%lld cold_lock.wait_ns_total=%lld "
           "cold_lock.wait_ns_max=%lld cold_lock.waits_over_5us=%ld cold_lock.held_at_call=%ld "
           "cold_lock.hold_ns_max=%lld cold_lock.hold_ns2_total=%.0f cold_lock.hold_ns2_free=%.0f "
           "elapsed_ns=%lld\n",
           nthreads, holds, (long long)hold_ns, (long long)work_ns, cold_per_round, own_locks,
           (void *)(own_locks ? &w[0].own_lock : &hot_lock), hot_site, own_locks ? 1 : nthreads,
           hot.acquisitions,
           (long long)hot.hold_ns, (long long)hot.wait_ns, (long long)hot.max_wait_ns,
           hot.waits_over_5us, hot.held_at_call, (long long)hot.max_hold_ns, hot.hold2_ns,
           hot.hold2_free,
           (void *)&cold_lock, cold_site,
           cold.acquisitions ? 1 : 0, cold.acquisitions, (long long)cold.hold_ns,
           (long long)cold.wait_ns, (long long)cold.max_wait_ns, cold.waits_over_5us,
           cold.held_at_call, (long long)cold.max_hold_ns, cold.hold2_ns, cold.hold2_free,
           (long long)elapsed);
    free(w);
    return 0;
}
