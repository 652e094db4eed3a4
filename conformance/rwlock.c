/*
 * rwlock: pthread_rwlock_{rdlock,tryrdlock,timedrdlock,wrlock,trywrlock,timedwrlock,unlock}
 * (and the glibc 2.30 clock variants clockrdlock/clockwrlock, which libstdc++'s
 * shared_timed_mutex uses) on the default (reader-preferring) rwlock and the
 * writer-preferring kind (PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP), statically and
 * dynamically initialised.  Cases: shared readers, trywrlock/timedwrlock on a read-held lock
 * (EBUSY / ETIMEDOUT), the write owner asking again (EDEADLK for rdlock, wrlock and their
 * timed forms; EBUSY for the tries), tries and timed locks from another thread while
 * write-held, invalid deadlines and clocks (EINVAL; glibc checks the deadline of a timed
 * rwlock even when the lock is free, unlike the mutex's, so "try first" is wrong here), writers
 * and readers that really block, and the preference rule: with a writer queued, a new
 * tryrdlock succeeds on the default kind and fails (EBUSY) on the writer-preferring kind.
 */
#include "common.h"

static pthread_rwlock_t s_default = PTHREAD_RWLOCK_INITIALIZER;
static pthread_rwlock_t s_writer = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

enum rop { R_RD, R_TRYRD, R_TIMEDRD_PAST, R_WR, R_TRYWR, R_TIMEDWR_PAST, R_UNLOCK,
           R_CLOCKRD_PAST, R_CLOCKWR_PAST };

struct rcall {
    enum rop op;
    pthread_rwlock_t *l;
    int hold; /* keep the lock until `release` is posted, then unlock */
    _Atomic pid_t tid;
    sem_t acquired, release;
    struct res r, unlock;
};

static void rdo(struct rcall *c)
{
    struct timespec t;
    switch (c->op) {
    case R_RD: CALL(c->r, pthread_rwlock_rdlock, c->l); break;
    case R_TRYRD: CALL(c->r, pthread_rwlock_tryrdlock, c->l); break;
    case R_WR: CALL(c->r, pthread_rwlock_wrlock, c->l); break;
    case R_TRYWR: CALL(c->r, pthread_rwlock_trywrlock, c->l); break;
    case R_UNLOCK: CALL(c->r, pthread_rwlock_unlock, c->l); break;
    case R_TIMEDRD_PAST:
        t = abs_in(CLOCK_REALTIME, -1);
        CALL(c->r, pthread_rwlock_timedrdlock, c->l, &t);
        break;
    case R_TIMEDWR_PAST:
        t = abs_in(CLOCK_REALTIME, -1);
        CALL(c->r, pthread_rwlock_timedwrlock, c->l, &t);
        break;
    case R_CLOCKRD_PAST:
        t = abs_in(CLOCK_MONOTONIC, -1);
        CALL(c->r, pthread_rwlock_clockrdlock, c->l, CLOCK_MONOTONIC, &t);
        break;
    case R_CLOCKWR_PAST:
        t = abs_in(CLOCK_MONOTONIC, -1);
        CALL(c->r, pthread_rwlock_clockwrlock, c->l, CLOCK_MONOTONIC, &t);
        break;
    }
}

static void *rcall_main(void *arg)
{
    struct rcall *c = arg;
    atomic_store(&c->tid, my_tid());
    rdo(c);
    if (c->hold) {
        sem_post(&c->acquired);
        sem_wait_nointr(&c->release);
        if (c->r.ret == 0)
            CALL(c->unlock, pthread_rwlock_unlock, c->l);
    }
    return NULL;
}

/* One operation on a fresh thread, which exits right after: only for calls that fail. */
static struct res other(enum rop op, pthread_rwlock_t *l)
{
    struct rcall c = {.op = op, .l = l};
    join(spawn(rcall_main, &c));
    return c.r;
}

/* A thread that acquires (possibly blocking), reports, and holds until released. */
static pthread_t start_holder(struct rcall *c, enum rop op, pthread_rwlock_t *l)
{
    c->op = op;
    c->l = l;
    c->hold = 1;
    atomic_store(&c->tid, 0);
    sem_init(&c->acquired, 0, 0);
    sem_init(&c->release, 0, 0);
    return spawn(rcall_main, c);
}

static void stop_holder(struct rcall *c, pthread_t t)
{
    sem_post(&c->release);
    join(t);
    sem_destroy(&c->acquired);
    sem_destroy(&c->release);
}

static void exercise(const char *label, pthread_rwlock_t *l, int writer_pref)
{
    char w[160];
    struct timespec t;
    struct rcall a, b;
    pthread_t ta, tb;
#define W(s) (snprintf(w, sizeof w, "%s %s", label, s), w)

    /* Free. */
    CHECK(pthread_rwlock_tryrdlock, W("free"), 0, l);
    CHECK(pthread_rwlock_unlock, W("after-tryrdlock"), 0, l);
    CHECK(pthread_rwlock_trywrlock, W("free"), 0, l);
    CHECK(pthread_rwlock_unlock, W("after-trywrlock"), 0, l);
    t = abs_in(CLOCK_REALTIME, 5);
    CHECK(pthread_rwlock_timedrdlock, W("free/future"), 0, l, &t);
    CHECK(pthread_rwlock_unlock, W("after-timedrdlock"), 0, l);
    CHECK(pthread_rwlock_timedwrlock, W("free/future"), 0, l, &t);
    CHECK(pthread_rwlock_unlock, W("after-timedwrlock"), 0, l);
    t = abs_in(CLOCK_MONOTONIC, 5);
    CHECK(pthread_rwlock_clockrdlock, W("free/MONOTONIC"), 0, l, CLOCK_MONOTONIC, &t);
    CHECK(pthread_rwlock_unlock, W("after-clockrdlock"), 0, l);
    CHECK(pthread_rwlock_clockwrlock, W("free/MONOTONIC"), 0, l, CLOCK_MONOTONIC, &t);
    CHECK(pthread_rwlock_unlock, W("after-clockwrlock"), 0, l);
    CHECK(pthread_rwlock_clockrdlock, W("free/clock-12345"), EINVAL, l, (clockid_t)12345, &t);
    CHECK(pthread_rwlock_clockwrlock, W("free/clock-12345"), EINVAL, l, (clockid_t)12345, &t);
    CHECK(pthread_rwlock_trywrlock, W("still-free-after-EINVAL"), 0, l);
    CHECK(pthread_rwlock_unlock, W("still-free-after-EINVAL/release"), 0, l);
    t = abs_bad_nsec(CLOCK_REALTIME);
    CHECK(pthread_rwlock_timedwrlock, W("free/bad-nsec"), ANY, l, &t); /* glibc: EINVAL */
    CHECK(pthread_rwlock_timedrdlock, W("free/bad-nsec"), ANY, l, &t);
    CHECK(pthread_rwlock_trywrlock, W("free-after-bad-nsec"), ANY, l);
    CHECK(pthread_rwlock_unlock, W("free-after-bad-nsec/release"), ANY, l);

    /* Read-held by this thread. */
    CHECK(pthread_rwlock_rdlock, W("free"), 0, l);
    CHECK(pthread_rwlock_rdlock, W("read-held-by-self/again"), 0, l);
    CHECK(pthread_rwlock_tryrdlock, W("read-held-by-self"), 0, l);
    CHECK(pthread_rwlock_trywrlock, W("read-held-by-self"), EBUSY, l);
    t = abs_in(CLOCK_REALTIME, -1);
    CHECK(pthread_rwlock_timedwrlock, W("read-held-by-self/past"), ETIMEDOUT, l, &t);
    /* Other readers share it (each releases its own read lock). */
    tb = start_holder(&b, R_TRYRD, l);
    sem_wait_nointr(&b.acquired);
    stop_holder(&b, tb);
    SHOW(pthread_rwlock_tryrdlock, W("read-held/other"), 0, b.r);
    SHOW(pthread_rwlock_unlock, W("read-held/other-releases"), 0, b.unlock);
    tb = start_holder(&b, R_TIMEDRD_PAST, l);
    sem_wait_nointr(&b.acquired);
    stop_holder(&b, tb);
    SHOW(pthread_rwlock_timedrdlock, W("read-held/other-past"), 0, b.r);
    SHOW(pthread_rwlock_unlock, W("read-held/other-releases"), 0, b.unlock);
    SHOW(pthread_rwlock_trywrlock, W("read-held/other"), EBUSY, other(R_TRYWR, l));
    SHOW(pthread_rwlock_timedwrlock, W("read-held/other-past"), ETIMEDOUT,
         other(R_TIMEDWR_PAST, l));
    SHOW(pthread_rwlock_clockwrlock, W("read-held/other-MONOTONIC-past"), ETIMEDOUT,
         other(R_CLOCKWR_PAST, l));
    CHECK(pthread_rwlock_unlock, W("read-1"), 0, l);
    CHECK(pthread_rwlock_unlock, W("read-2"), 0, l);
    CHECK(pthread_rwlock_unlock, W("read-3"), 0, l);

    /* Write-held by this thread. */
    CHECK(pthread_rwlock_wrlock, W("free"), 0, l);
    CHECK(pthread_rwlock_rdlock, W("write-held-by-self"), EDEADLK, l);
    CHECK(pthread_rwlock_wrlock, W("write-held-by-self"), EDEADLK, l);
    CHECK(pthread_rwlock_tryrdlock, W("write-held-by-self"), EBUSY, l);
    CHECK(pthread_rwlock_trywrlock, W("write-held-by-self"), EBUSY, l);
    t = abs_in(CLOCK_REALTIME, -1);
    CHECK(pthread_rwlock_timedrdlock, W("write-held-by-self/past"), EDEADLK, l, &t);
    CHECK(pthread_rwlock_timedwrlock, W("write-held-by-self/past"), EDEADLK, l, &t);
    t = abs_in(CLOCK_MONOTONIC, -1);
    CHECK(pthread_rwlock_clockrdlock, W("write-held-by-self/MONOTONIC-past"), EDEADLK, l,
          CLOCK_MONOTONIC, &t);
    CHECK(pthread_rwlock_clockwrlock, W("write-held-by-self/MONOTONIC-past"), EDEADLK, l,
          CLOCK_MONOTONIC, &t);
    SHOW(pthread_rwlock_tryrdlock, W("write-held/other"), EBUSY, other(R_TRYRD, l));
    SHOW(pthread_rwlock_trywrlock, W("write-held/other"), EBUSY, other(R_TRYWR, l));
    SHOW(pthread_rwlock_timedrdlock, W("write-held/other-past"), ETIMEDOUT,
         other(R_TIMEDRD_PAST, l));
    SHOW(pthread_rwlock_timedwrlock, W("write-held/other-past"), ETIMEDOUT,
         other(R_TIMEDWR_PAST, l));
    SHOW(pthread_rwlock_clockrdlock, W("write-held/other-MONOTONIC-past"), ETIMEDOUT,
         other(R_CLOCKRD_PAST, l));
    CHECK(pthread_rwlock_unlock, W("write"), 0, l);

    /* Contended: a writer blocks behind a reader, readers block behind a writer. */
    CHECK(pthread_rwlock_rdlock, W("contended/reader-holds"), 0, l);
    ta = start_holder(&a, R_WR, l);
    while (atomic_load(&a.tid) == 0)
        sched_yield();
    wait_blocked(a.tid);
    /*
     * The preference rule, observable because a writer is now queued: the default kind
     * still admits readers, the writer-preferring kind refuses them (EBUSY), the current
     * reader included (hence "nonrecursive": its rdlock would deadlock).
     */
    CHECK(pthread_rwlock_tryrdlock, W("writer-queued/tryrdlock-by-reader"),
          writer_pref ? EBUSY : 0, l);
    if (!writer_pref)
        CHECK(pthread_rwlock_unlock, W("writer-queued/reader-releases-extra"), 0, l);
    tb = start_holder(&b, R_TRYRD, l);
    sem_wait_nointr(&b.acquired);
    stop_holder(&b, tb);
    SHOW(pthread_rwlock_tryrdlock, W("writer-queued/tryrdlock-by-new-reader"),
         writer_pref ? EBUSY : 0, b.r);
    if (!writer_pref)
        SHOW(pthread_rwlock_unlock, W("writer-queued/new-reader-releases"), 0, b.unlock);
    CHECK(pthread_rwlock_unlock, W("contended/reader-releases"), 0, l);
    sem_wait_nointr(&a.acquired);
    SHOW(pthread_rwlock_wrlock, W("contended/writer-after-reader"), 0, a.r);
    tb = start_holder(&b, R_RD, l);
    while (atomic_load(&b.tid) == 0)
        sched_yield();
    wait_blocked(b.tid);
    stop_holder(&a, ta);
    SHOW(pthread_rwlock_unlock, W("contended/writer-releases"), 0, a.unlock);
    sem_wait_nointr(&b.acquired);
    SHOW(pthread_rwlock_rdlock, W("contended/reader-after-writer"), 0, b.r);
    stop_holder(&b, tb);
    SHOW(pthread_rwlock_unlock, W("contended/reader-releases"), 0, b.unlock);
#undef W
}

int main(void)
{
    pthread_rwlock_t d_default, d_writer, d_reader;
    pthread_rwlockattr_t a;

    exercise("default/static", &s_default, 0);
    exercise("prefer-writer-nonrecursive/static", &s_writer, 1);

    CHECK(pthread_rwlock_init, "default/dynamic init", 0, &d_default, NULL);
    exercise("default/dynamic", &d_default, 0);
    pthread_rwlockattr_init(&a);
    CHECK(pthread_rwlockattr_setkind_np, "prefer-writer-nonrecursive setkind", 0, &a,
          PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    CHECK(pthread_rwlock_init, "prefer-writer-nonrecursive/dynamic init", 0, &d_writer, &a);
    pthread_rwlockattr_destroy(&a);
    exercise("prefer-writer-nonrecursive/dynamic", &d_writer, 1);
    pthread_rwlockattr_init(&a);
    CHECK(pthread_rwlockattr_setkind_np, "prefer-reader setkind", 0, &a,
          PTHREAD_RWLOCK_PREFER_READER_NP);
    CHECK(pthread_rwlock_init, "prefer-reader/dynamic init", 0, &d_reader, &a);
    pthread_rwlockattr_destroy(&a);
    exercise("prefer-reader/dynamic", &d_reader, 0);

    /* (Unlocking an unlocked rwlock, or another thread's read lock, is undefined: not done.) */
    pthread_rwlock_destroy(&d_default);
    pthread_rwlock_destroy(&d_writer);
    pthread_rwlock_destroy(&d_reader);
    return finish();
}
