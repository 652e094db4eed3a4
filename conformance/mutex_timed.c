/*
 * mutex_timed: pthread_mutex_timedlock and pthread_mutex_clocklock on normal, recursive and
 * errorcheck mutexes (static and dynamic init): free locks, locks held by another thread
 * with a deadline in the past (ETIMEDOUT, without waiting), invalid deadlines (EINVAL when
 * the call would block), locks held by the caller (ETIMEDOUT / 0 / EDEADLK by type), a
 * contended wait that succeeds before a future deadline, and clocklock's clock argument:
 * CLOCK_MONOTONIC and CLOCK_REALTIME work, any other clock is EINVAL -- even on a free
 * mutex, which must then still be free.  (glibc checks the clock before trying the lock but
 * checks tv_nsec only when it has to wait: a probe that "tries first" gets the first wrong.)
 */
#include "common.h"

static pthread_mutex_t s_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t s_recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;

enum kind { NORMAL, RECURSIVE, ERRORCHECK };
static const char *const kind_name[] = {"normal", "recursive", "errorcheck"};
static const int kind_type[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE,
                                PTHREAD_MUTEX_ERRORCHECK};

/* A thread that waits in timedlock/clocklock (deadline 30 s away) until the main thread lets go. */
struct waiter {
    pthread_mutex_t *m;
    int use_clock; /* 0: timedlock (REALTIME), else clocklock on this clock + 1 */
    _Atomic pid_t tid;
    struct res lock, unlock;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    atomic_store(&w->tid, my_tid());
    if (w->use_clock) {
        clockid_t clk = (clockid_t)(w->use_clock - 1);
        struct timespec t = abs_in(clk, 30);
        CALL(w->lock, pthread_mutex_clocklock, w->m, clk, &t);
    } else {
        struct timespec t = abs_in(CLOCK_REALTIME, 30);
        CALL(w->lock, pthread_mutex_timedlock, w->m, &t);
    }
    if (w->lock.ret == 0)
        CALL(w->unlock, pthread_mutex_unlock, w->m);
    return NULL;
}

static void contended(const char *label, const char *fn, const char *clk, pthread_mutex_t *m,
                      int use_clock)
{
    char w[160];
    struct waiter c = {.m = m, .use_clock = use_clock};
    pthread_mutex_lock(m);
    pthread_t t = spawn(waiter_main, &c);
    while (atomic_load(&c.tid) == 0)
        sched_yield();
    wait_blocked(c.tid);
    pthread_mutex_unlock(m);
    join(t);
    snprintf(w, sizeof w, "%s contended-future-deadline/%s", label, clk);
    report(fn, w, c.lock.ret, c.lock.err, 0);
    snprintf(w, sizeof w, "%s contended/waiter-unlock", label);
    SHOW(pthread_mutex_unlock, w, 0, c.unlock);
}

static void exercise(const char *label, pthread_mutex_t *m, enum kind k)
{
    char w[160];
    struct timespec t;
    struct holder h;
#define W(s) (snprintf(w, sizeof w, "%s %s", label, s), w)

    /* Free mutex. */
    t = abs_in(CLOCK_REALTIME, 5);
    CHECK(pthread_mutex_timedlock, W("free/future"), 0, m, &t);
    CHECK(pthread_mutex_unlock, W("after-timedlock"), 0, m);
    t = abs_in(CLOCK_REALTIME, -1);
    CHECK(pthread_mutex_timedlock, W("free/past"), 0, m, &t); /* no wait needed: succeeds */
    CHECK(pthread_mutex_unlock, W("after-timedlock-past"), 0, m);
    /* glibc validates tv_nsec only when it has to wait, so this succeeds; POSIX allows both. */
    struct res r;
    t = abs_bad_nsec(CLOCK_REALTIME);
    CALL(r, pthread_mutex_timedlock, m, &t);
    SHOW(pthread_mutex_timedlock, W("free/bad-nsec"), ANY, r);
    if (r.ret == 0)
        CHECK(pthread_mutex_unlock, W("after-timedlock-bad-nsec"), 0, m);
    t = abs_in(CLOCK_MONOTONIC, 5);
    CHECK(pthread_mutex_clocklock, W("free/MONOTONIC"), 0, m, CLOCK_MONOTONIC, &t);
    CHECK(pthread_mutex_unlock, W("after-clocklock-MONOTONIC"), 0, m);
    t = abs_in(CLOCK_REALTIME, 5);
    CHECK(pthread_mutex_clocklock, W("free/REALTIME"), 0, m, CLOCK_REALTIME, &t);
    CHECK(pthread_mutex_unlock, W("after-clocklock-REALTIME"), 0, m);
    t = abs_in(CLOCK_MONOTONIC, 5);
    CHECK(pthread_mutex_clocklock, W("free/PROCESS_CPUTIME"), EINVAL, m,
          CLOCK_PROCESS_CPUTIME_ID, &t);
    CHECK(pthread_mutex_clocklock, W("free/clock-12345"), EINVAL, m, (clockid_t)12345, &t);
    CHECK(pthread_mutex_clocklock, W("free/clock-minus-1"), EINVAL, m, (clockid_t)-1, &t);
    /* The refused clocklocks must not have taken the lock. */
    if (k == NORMAL) {
        CHECK(pthread_mutex_trylock, W("still-free-after-EINVAL"), 0, m);
        CHECK(pthread_mutex_unlock, W("still-free-after-EINVAL/release"), 0, m);
    } else {
        CHECK(pthread_mutex_unlock, W("not-held-after-EINVAL"), EPERM, m);
    }

    /* Held by another thread. */
    hold_start(&h, m);
    t = abs_in(CLOCK_REALTIME, -1);
    CHECK(pthread_mutex_timedlock, W("held-by-other/past"), ETIMEDOUT, m, &t);
    t.tv_sec = -1;
    t.tv_nsec = 0;
    CHECK(pthread_mutex_timedlock, W("held-by-other/negative-sec"), ETIMEDOUT, m, &t);
    t = abs_bad_nsec(CLOCK_REALTIME);
    CHECK(pthread_mutex_timedlock, W("held-by-other/bad-nsec"), EINVAL, m, &t);
    t = abs_in(CLOCK_MONOTONIC, -1);
    CHECK(pthread_mutex_clocklock, W("held-by-other/MONOTONIC-past"), ETIMEDOUT, m,
          CLOCK_MONOTONIC, &t);
    t = abs_in(CLOCK_REALTIME, -1);
    CHECK(pthread_mutex_clocklock, W("held-by-other/REALTIME-past"), ETIMEDOUT, m,
          CLOCK_REALTIME, &t);
    t = abs_bad_nsec(CLOCK_MONOTONIC);
    CHECK(pthread_mutex_clocklock, W("held-by-other/MONOTONIC-bad-nsec"), EINVAL, m,
          CLOCK_MONOTONIC, &t);
    t = abs_in(CLOCK_MONOTONIC, 5);
    CHECK(pthread_mutex_clocklock, W("held-by-other/clock-12345"), EINVAL, m,
          (clockid_t)12345, &t);
    hold_stop(&h, label);

    /* Held by the caller. */
    CHECK(pthread_mutex_lock, W("self-hold"), 0, m);
    t = abs_in(CLOCK_REALTIME, -1);
    CHECK(pthread_mutex_timedlock, W("held-by-self/past"),
          k == NORMAL ? ETIMEDOUT : k == RECURSIVE ? 0 : EDEADLK, m, &t);
    if (k == RECURSIVE)
        CHECK(pthread_mutex_unlock, W("undo-recursive-timedlock"), 0, m);
    t = abs_in(CLOCK_MONOTONIC, -1);
    CHECK(pthread_mutex_clocklock, W("held-by-self/MONOTONIC-past"),
          k == NORMAL ? ETIMEDOUT : k == RECURSIVE ? 0 : EDEADLK, m, CLOCK_MONOTONIC, &t);
    if (k == RECURSIVE)
        CHECK(pthread_mutex_unlock, W("undo-recursive-clocklock"), 0, m);
    t = abs_in(CLOCK_MONOTONIC, -1);
    CHECK(pthread_mutex_clocklock, W("held-by-self/clock-12345"), EINVAL, m,
          (clockid_t)12345, &t);
    CHECK(pthread_mutex_unlock, W("self-release"), 0, m);
    if (k != NORMAL)
        CHECK(pthread_mutex_unlock, W("released-exactly-once"), EPERM, m);

    contended(label, "pthread_mutex_timedlock", "REALTIME", m, 0);
    contended(label, "pthread_mutex_clocklock", "MONOTONIC", m, 1 + CLOCK_MONOTONIC);
    contended(label, "pthread_mutex_clocklock", "REALTIME", m, 1 + CLOCK_REALTIME);
#undef W
}

int main(void)
{
    pthread_mutex_t *stat[] = {&s_normal, &s_recursive, &s_errorcheck};
    pthread_mutex_t dyn[3];
    char label[64];
    for (int k = 0; k < 3; k++) {
        snprintf(label, sizeof label, "%s/static", kind_name[k]);
        exercise(label, stat[k], (enum kind)k);
    }
    for (int k = 0; k < 3; k++) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, kind_type[k]);
        pthread_mutex_init(&dyn[k], &a);
        pthread_mutexattr_destroy(&a);
        snprintf(label, sizeof label, "%s/dynamic", kind_name[k]);
        exercise(label, &dyn[k], (enum kind)k);
        pthread_mutex_destroy(&dyn[k]);
    }
    return finish();
}
