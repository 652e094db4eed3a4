/*
 * Shared helpers for the conformance programs.
 *
 * Every check calls one pthread function with errno set to a sentinel first and prints one
 * line: the function, the case, what it returned (symbolically) and what became of errno:
 *
 *     pthread_mutex_trylock errorcheck/static held-by-self -> EBUSY errno=kept
 *
 * Lines must never contain addresses, thread ids, pids or times, so that a run with and a run
 * without LD_PRELOAD=<probe.so> give byte-identical stdout.  Where POSIX or glibc fixes the
 * answer the check also states its expectation, and a line that disagrees ends in
 * "UNEXPECTED(want X)"; the program then exits 1.  That is a note about this libc, not the
 * test itself: the test is the comparison of the two runs (conformance/run.sh).
 *
 * Checks made on other threads store {ret, errno} in a `struct res` and the main thread
 * prints them after joining, so the output order never depends on scheduling.  Sequencing
 * between threads uses POSIX semaphores, which a pthread probe does not interpose, so a probe
 * bug shows up in the check that exercises it rather than in the harness.
 */
#ifndef CONFORMANCE_COMMON_H
#define CONFORMANCE_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/*
 * Line-buffered stdout even into a pipe or file: when a run hangs and is killed by the
 * harness's timeout, everything printed so far is there to compare.  (Every line is then
 * written at once, so nothing is left in the buffer to be duplicated by fork.)
 */
__attribute__((constructor)) static void conformance_line_buffered(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
}

/* Not an errno value on Linux: any write to errno by the call under test is visible. */
#define ERRNO_SENTINEL 7919
/* Expectation "none": the result is printed and compared, but not judged. */
#define ANY (-100000)

static int unexpected_count;

/* Symbolic name of an errno value (or of 0).  Thread-local buffer for unknown values. */
static inline const char *err_name(int e)
{
    static __thread char buf[32];
    switch (e) {
    case 0: return "0";
#define E_(x) case x: return #x;
    E_(EPERM) E_(ENOENT) E_(ESRCH) E_(EINTR) E_(EIO) E_(ECHILD) E_(EAGAIN) E_(ENOMEM)
    E_(EACCES) E_(EFAULT) E_(EBUSY) E_(EEXIST) E_(EINVAL) E_(ENOSPC) E_(ERANGE)
    E_(EDEADLK) E_(ENOSYS) E_(ETIMEDOUT) E_(EOWNERDEAD) E_(ENOTRECOVERABLE) E_(ENOTSUP)
    E_(EOVERFLOW) E_(ECANCELED)
#undef E_
    case ERRNO_SENTINEL: return "SENTINEL";
    case PTHREAD_BARRIER_SERIAL_THREAD: return "PTHREAD_BARRIER_SERIAL_THREAD";
    default:
        snprintf(buf, sizeof buf, "E#%d", e);
        return buf;
    }
}

/* Print one check.  `err` is errno after the call; `kept` means the call left it alone. */
static inline void report(const char *fn, const char *what, int ret, int err, int expect)
{
    printf("%s %s -> %s errno=%s", fn, what, err_name(ret),
           err == ERRNO_SENTINEL ? "kept" : err_name(err));
    if (expect != ANY && ret != expect) {
        printf(" UNEXPECTED(want %s)", err_name(expect));
        unexpected_count++;
    }
    /* pthread functions report errors by return value; glibc's mostly leave errno alone. */
    if (expect != ANY && err != ERRNO_SENTINEL) {
        printf(" UNEXPECTED(errno changed)");
        unexpected_count++;
    }
    putchar('\n');
}

/* Result of a call made on another thread, reported later by the main thread. */
struct res {
    int ret, err;
};

/* CALL(r, fn, args...): call fn(args) with the errno sentinel, store ret and errno in r. */
#define CALL(r, fn, ...)                                                                       \
    do {                                                                                       \
        errno = ERRNO_SENTINEL;                                                                \
        (r).ret = fn(__VA_ARGS__);                                                             \
        (r).err = errno;                                                                       \
    } while (0)

/* CHECK(fn, "case", expected, args...): call now, on this thread, and print. */
#define CHECK(fn, what, expect, ...)                                                           \
    do {                                                                                       \
        struct res r_;                                                                         \
        CALL(r_, fn, __VA_ARGS__);                                                             \
        report(#fn, what, r_.ret, r_.err, expect);                                             \
    } while (0)

/* SHOW(fn, "case", expected, r): print a result stored by CALL on another thread. */
#define SHOW(fn, what, expect, r) report(#fn, what, (r).ret, (r).err, expect)

/* A free-form deterministic line (counts, values). */
#define NOTE(...)                                                                              \
    do {                                                                                       \
        printf(__VA_ARGS__);                                                                   \
        putchar('\n');                                                                         \
    } while (0)

static inline int finish(void)
{
    printf("summary unexpected=%d\n", unexpected_count);
    fflush(stdout);
    return unexpected_count ? 1 : 0;
}

static inline void die(const char *what, int e)
{
    fprintf(stderr, "conformance: %s: %s\n", what, strerror(e));
    exit(99);
}

/* ---- time ---------------------------------------------------------------------------- */

/* Absolute time on `clk` offset by `sec` seconds (negative: in the past). */
static inline struct timespec abs_in(clockid_t clk, int sec)
{
    struct timespec t;
    clock_gettime(clk, &t);
    t.tv_sec += sec;
    return t;
}

/* A timespec whose tv_nsec is out of range: POSIX says EINVAL if the call would block. */
static inline struct timespec abs_bad_nsec(clockid_t clk)
{
    struct timespec t = abs_in(clk, 1);
    t.tv_nsec = 1000000000L;
    return t;
}

static inline void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) == -1 && errno == EINTR)
        ;
}

/* ---- semaphores: sequencing that the probe does not see ------------------------------- */

static inline void sem_wait_nointr(sem_t *s)
{
    while (sem_wait(s) == -1 && errno == EINTR)
        ;
}

/* ---- threads --------------------------------------------------------------------------- */

static inline pid_t my_tid(void) { return (pid_t)syscall(SYS_gettid); }

static inline pthread_t spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    int e = pthread_create(&t, NULL, fn, arg);
    if (e)
        die("pthread_create", e);
    return t;
}

static inline void *join(pthread_t t)
{
    void *v = NULL;
    int e = pthread_join(t, &v);
    if (e)
        die("pthread_join", e);
    return v;
}

/*
 * Wait until a task is asleep in the kernel: state 'S' (or 'D') in its /proc stat file.
 * Used to make sure a thread or process is really blocked in a lock (so the contended path
 * is exercised) before the holder releases it.  It only affects which code path runs, never
 * what is printed, so its timeout (~10 s) is harmless.
 */
static inline void wait_blocked_path(const char *path)
{
    char buf[512];
    for (int i = 0; i < 10000; i++) {
        FILE *f = fopen(path, "r");
        if (!f)
            return; /* already gone */
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && (p[2] == 'S' || p[2] == 'D'))
            return;
        sleep_ms(1);
    }
}

/* A thread of this process. */
static inline void wait_blocked(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    wait_blocked_path(path);
}

/* Another process (its main thread). */
static inline void wait_blocked_pid(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    wait_blocked_path(path);
}

/*
 * A helper thread that holds mutex `m` until told to let go: the "held by another thread"
 * state for checks made on the main thread.
 */
struct holder {
    pthread_t th;
    pthread_mutex_t *m;
    sem_t held, release;
    struct res lock, unlock;
};

static inline void *holder_main(void *arg)
{
    struct holder *h = arg;
    CALL(h->lock, pthread_mutex_lock, h->m);
    sem_post(&h->held);
    sem_wait_nointr(&h->release);
    CALL(h->unlock, pthread_mutex_unlock, h->m);
    return NULL;
}

static inline void hold_start(struct holder *h, pthread_mutex_t *m)
{
    h->m = m;
    sem_init(&h->held, 0, 0);
    sem_init(&h->release, 0, 0);
    h->th = spawn(holder_main, h);
    sem_wait_nointr(&h->held);
}

/* Release and join; print the holder's own lock and unlock results as checks too. */
static inline void hold_stop(struct holder *h, const char *what)
{
    char buf[160];
    sem_post(&h->release);
    join(h->th);
    sem_destroy(&h->held);
    sem_destroy(&h->release);
    snprintf(buf, sizeof buf, "%s holder-lock", what);
    SHOW(pthread_mutex_lock, buf, 0, h->lock);
    snprintf(buf, sizeof buf, "%s holder-unlock", what);
    SHOW(pthread_mutex_unlock, buf, 0, h->unlock);
}

/*
 * Run one mutex operation on a fresh thread and return its result: the "another thread"
 * for non-owner unlocks and tries on a lock the caller holds.
 */
enum mop { M_LOCK, M_TRYLOCK, M_UNLOCK, M_TIMEDLOCK_PAST, M_TIMEDLOCK_BADNSEC };

struct mop_call {
    enum mop op;
    pthread_mutex_t *m;
    struct res r;
};

static inline void *mop_main(void *arg)
{
    struct mop_call *c = arg;
    struct timespec t;
    switch (c->op) {
    case M_LOCK: CALL(c->r, pthread_mutex_lock, c->m); break;
    case M_TRYLOCK: CALL(c->r, pthread_mutex_trylock, c->m); break;
    case M_UNLOCK: CALL(c->r, pthread_mutex_unlock, c->m); break;
    case M_TIMEDLOCK_PAST:
        t = abs_in(CLOCK_REALTIME, -1);
        CALL(c->r, pthread_mutex_timedlock, c->m, &t);
        break;
    case M_TIMEDLOCK_BADNSEC:
        t = abs_bad_nsec(CLOCK_REALTIME);
        CALL(c->r, pthread_mutex_timedlock, c->m, &t);
        break;
    }
    return NULL;
}

static inline struct res on_other_thread(enum mop op, pthread_mutex_t *m)
{
    struct mop_call c = {op, m, {0, 0}};
    join(spawn(mop_main, &c));
    return c.r;
}

/*
 * Checks made before main (constructors, preinit) or inside a library are recorded into a
 * buffer and printed by main, in order.  vsnprintf is fine that early: glibc initialises
 * itself before running any constructor or preinit function.
 */
#include <stdarg.h>
struct logbuf {
    char text[16384];
    size_t len;
    int unexpected;
};

__attribute__((format(printf, 2, 3))) static inline void logbuf_printf(struct logbuf *b,
                                                                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (b->len < sizeof b->text) {
        int n = vsnprintf(b->text + b->len, sizeof b->text - b->len, fmt, ap);
        if (n > 0)
            b->len += (size_t)n;
        if (b->len > sizeof b->text)
            b->len = sizeof b->text;
    }
    va_end(ap);
}

static inline void record(struct logbuf *b, const char *fn, const char *what, int ret, int err,
                          int expect)
{
    logbuf_printf(b, "%s %s -> %s errno=%s", fn, what, err_name(ret),
                  err == ERRNO_SENTINEL ? "kept" : err_name(err));
    if (expect != ANY && ret != expect) {
        logbuf_printf(b, " UNEXPECTED(want %s)", err_name(expect));
        b->unexpected++;
    }
    if (expect != ANY && err != ERRNO_SENTINEL) {
        logbuf_printf(b, " UNEXPECTED(errno changed)");
        b->unexpected++;
    }
    logbuf_printf(b, "\n");
}

/* RECORD(buf, fn, "case", expected, args...): like CHECK, into a buffer. */
#define RECORD(b, fn, what, expect, ...)                                                       \
    do {                                                                                       \
        struct res r_;                                                                         \
        CALL(r_, fn, __VA_ARGS__);                                                             \
        record(b, #fn, what, r_.ret, r_.err, expect);                                          \
    } while (0)

#endif
