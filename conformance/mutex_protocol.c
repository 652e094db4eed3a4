/*
 * mutex_protocol: priority-inheritance (PTHREAD_PRIO_INHERIT) and priority-protect
 * (PTHREAD_PRIO_PROTECT) mutexes through every pthread_mutex_* entry point.
 *
 * PI mutexes are implemented with FUTEX_LOCK_PI: the kernel knows the owner, so the lock
 * word holds the owner's TID (a probe must not touch it, nor "emulate" a try with CAS).
 * PP mutexes raise the caller to the ceiling priority while held, which needs permission
 * (CAP_SYS_NICE or RLIMIT_RTPRIO): without it glibc's lock fails (EINVAL or EPERM).  The
 * results are printed as they come (expectation ANY where the platform decides) so the run
 * with and without the probe can be compared on any machine.
 */
#include "common.h"
#include <sched.h>

enum kind { NORMAL, RECURSIVE, ERRORCHECK };
static const char *const kind_name[] = {"normal", "recursive", "errorcheck"};
static const int kind_type[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE,
                                PTHREAD_MUTEX_ERRORCHECK};

struct contender {
    pthread_mutex_t *m;
    _Atomic pid_t tid;
    struct res lock, unlock;
};

static void *contender_main(void *arg)
{
    struct contender *c = arg;
    atomic_store(&c->tid, my_tid());
    CALL(c->lock, pthread_mutex_lock, c->m);
    if (c->lock.ret == 0)
        CALL(c->unlock, pthread_mutex_unlock, c->m);
    return NULL;
}

static void exercise_pi(const char *label, pthread_mutex_t *m, enum kind k)
{
    char w[160];
    struct timespec t;
    struct holder h;
#define W(s) (snprintf(w, sizeof w, "%s %s", label, s), w)
    CHECK(pthread_mutex_lock, W("free"), 0, m);
    /* glibc quirk: an errorcheck PI (or PP) mutex's trylock by its owner says EDEADLK, where
     * the plain errorcheck mutex says EBUSY. */
    CHECK(pthread_mutex_trylock, W("held-by-self"),
          k == RECURSIVE ? 0 : k == ERRORCHECK ? EDEADLK : EBUSY, m);
    if (k == RECURSIVE)
        CHECK(pthread_mutex_unlock, W("undo-recursive-trylock"), 0, m);
    if (k == ERRORCHECK)
        CHECK(pthread_mutex_lock, W("relock-by-owner"), EDEADLK, m);
    if (k == RECURSIVE) {
        CHECK(pthread_mutex_lock, W("relock-by-owner"), 0, m);
        CHECK(pthread_mutex_unlock, W("unlock-depth2"), 0, m);
    }
    t = abs_in(CLOCK_REALTIME, -1);
    CHECK(pthread_mutex_timedlock, W("held-by-self/past"),
          k == RECURSIVE ? 0 : k == ERRORCHECK ? EDEADLK : ANY, m, &t);
    if (k == RECURSIVE)
        CHECK(pthread_mutex_unlock, W("undo-recursive-timedlock"), 0, m);
    SHOW(pthread_mutex_trylock, W("held-by-other"), EBUSY, on_other_thread(M_TRYLOCK, m));
    SHOW(pthread_mutex_timedlock, W("held-by-other/past"), ETIMEDOUT,
         on_other_thread(M_TIMEDLOCK_PAST, m));
    SHOW(pthread_mutex_timedlock, W("held-by-other/bad-nsec"), EINVAL,
         on_other_thread(M_TIMEDLOCK_BADNSEC, m));
    /* glibc: every PI kind checks the owner on unlock (the kernel needs it to hand over). */
    SHOW(pthread_mutex_unlock, W("unlock-by-non-owner"), EPERM, on_other_thread(M_UNLOCK, m));
    CHECK(pthread_mutex_unlock, W("by-owner"), 0, m);
    if (k != NORMAL)
        CHECK(pthread_mutex_unlock, W("unlocked"), EPERM, m);

    /* Held by another thread: the clock variants (PI + MONOTONIC needs FUTEX_LOCK_PI2). */
    hold_start(&h, m);
    t = abs_in(CLOCK_MONOTONIC, -1);
    CHECK(pthread_mutex_clocklock, W("held-by-other/MONOTONIC-past"), ANY, m, CLOCK_MONOTONIC,
          &t);
    t = abs_in(CLOCK_REALTIME, -1);
    CHECK(pthread_mutex_clocklock, W("held-by-other/REALTIME-past"), ETIMEDOUT, m,
          CLOCK_REALTIME, &t);
    CHECK(pthread_mutex_clocklock, W("held-by-other/clock-12345"), EINVAL, m, (clockid_t)12345,
          &t);
    hold_stop(&h, label);
    t = abs_in(CLOCK_MONOTONIC, 5);
    CHECK(pthread_mutex_clocklock, W("free/clock-12345"), EINVAL, m, (clockid_t)12345, &t);
    CHECK(pthread_mutex_trylock, W("still-free"), 0, m);
    CHECK(pthread_mutex_unlock, W("still-free/release"), 0, m);

    /* Contended: the waiter sleeps in FUTEX_LOCK_PI, the unlock hands the lock over. */
    struct contender c = {.m = m};
    CHECK(pthread_mutex_lock, W("contended/owner-lock"), 0, m);
    pthread_t th = spawn(contender_main, &c);
    while (atomic_load(&c.tid) == 0)
        sched_yield();
    wait_blocked(c.tid);
    CHECK(pthread_mutex_unlock, W("contended/owner-unlock"), 0, m);
    join(th);
    SHOW(pthread_mutex_lock, W("contended/waiter-lock"), 0, c.lock);
    SHOW(pthread_mutex_unlock, W("contended/waiter-unlock"), 0, c.unlock);
#undef W
}

/*
 * PP checks print whatever happens (ANY): whether the boost to the ceiling works depends on
 * the thread's scheduling policy and privileges.  glibc 2.36 on a SCHED_OTHER thread: the
 * first PP lock fails with EINVAL *and sets errno* (sched_setscheduler(SCHED_OTHER, prio>0)
 * is refused), but leaves its per-thread ceiling bookkeeping raised, so later PP locks by the
 * same thread succeed without a boost.  A probe must reproduce that exactly, including errno
 * (so it must not "restore" errno after calling the real function).
 */
static void exercise_pp(const char *label, pthread_mutex_t *m, enum kind k)
{
    char w[160];
    struct res r;
    struct timespec t;
    struct sched_param sp;
#define W(s) (snprintf(w, sizeof w, "%s %s", label, s), w)
    CALL(r, pthread_mutex_lock, m);
    SHOW(pthread_mutex_lock, W("free"), ANY, r);
    if (r.ret != 0) {
        CALL(r, pthread_mutex_lock, m);
        SHOW(pthread_mutex_lock, W("free/second-attempt"), ANY, r);
    }
    if (r.ret != 0)
        return;
    /* The kernel's view (pthread_getschedparam reports glibc's cached base priority). */
    if (sched_getparam(my_tid(), &sp) == 0)
        NOTE("note %s priority-while-held=%d", label, sp.sched_priority);
    CHECK(pthread_mutex_trylock, W("held-by-self"), ANY, m);
    if (k == RECURSIVE)
        CHECK(pthread_mutex_unlock, W("undo-recursive-trylock"), ANY, m);
    if (k == ERRORCHECK)
        CHECK(pthread_mutex_lock, W("relock-by-owner"), ANY, m);
    SHOW(pthread_mutex_trylock, W("held-by-other"), ANY, on_other_thread(M_TRYLOCK, m));
    SHOW(pthread_mutex_timedlock, W("held-by-other/past"), ANY,
         on_other_thread(M_TIMEDLOCK_PAST, m));
    if (k != NORMAL)
        SHOW(pthread_mutex_unlock, W("unlock-by-non-owner"), ANY, on_other_thread(M_UNLOCK, m));
    CHECK(pthread_mutex_unlock, W("by-owner"), ANY, m);
    if (sched_getparam(my_tid(), &sp) == 0)
        NOTE("note %s priority-after-unlock=%d", label, sp.sched_priority);
    CALL(r, pthread_mutex_trylock, m);
    SHOW(pthread_mutex_trylock, W("free"), ANY, r);
    if (r.ret == 0)
        CHECK(pthread_mutex_unlock, W("after-trylock"), ANY, m);
    t = abs_in(CLOCK_REALTIME, 1);
    CALL(r, pthread_mutex_timedlock, m, &t);
    SHOW(pthread_mutex_timedlock, W("free"), ANY, r);
    if (r.ret == 0)
        CHECK(pthread_mutex_unlock, W("after-timedlock"), ANY, m);
    int ceiling = -1;
    CHECK(pthread_mutex_getprioceiling, W("getprioceiling"), 0, m, &ceiling);
    NOTE("note %s ceiling=%d", label, ceiling);
#undef W
}

static sem_t pp_go; /* the thread starts once main has printed pthread_create's result */

/* All PP kinds, on a thread of its own (glibc keeps the ceiling bookkeeping per thread). */
static void *pp_thread(void *arg)
{
    const char *policy = arg;
    sem_wait_nointr(&pp_go);
    char label[64];
    pthread_mutex_t m;
    pthread_mutexattr_t a;
    int ceiling = sched_get_priority_min(SCHED_FIFO) + 1;
    for (int k = 0; k < 3; k++) {
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, kind_type[k]);
        snprintf(label, sizeof label, "pp-%s/%s setprotocol", kind_name[k], policy);
        CHECK(pthread_mutexattr_setprotocol, label, 0, &a, PTHREAD_PRIO_PROTECT);
        snprintf(label, sizeof label, "pp-%s/%s setprioceiling(fifo-min+1)", kind_name[k], policy);
        CHECK(pthread_mutexattr_setprioceiling, label, 0, &a, ceiling);
        snprintf(label, sizeof label, "pp-%s/%s init", kind_name[k], policy);
        CHECK(pthread_mutex_init, label, 0, &m, &a);
        pthread_mutexattr_destroy(&a);
        snprintf(label, sizeof label, "pp-%s/%s", kind_name[k], policy);
        exercise_pp(label, &m, (enum kind)k);
        snprintf(label, sizeof label, "pp-%s/%s destroy", kind_name[k], policy);
        CHECK(pthread_mutex_destroy, label, 0, &m);
    }
    return NULL;
}

int main(void)
{
    char label[64];
    pthread_mutex_t m;
    pthread_mutexattr_t a;

    for (int k = 0; k < 3; k++) {
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, kind_type[k]);
        snprintf(label, sizeof label, "pi-%s setprotocol", kind_name[k]);
        CHECK(pthread_mutexattr_setprotocol, label, 0, &a, PTHREAD_PRIO_INHERIT);
        snprintf(label, sizeof label, "pi-%s init", kind_name[k]);
        CHECK(pthread_mutex_init, label, 0, &m, &a);
        pthread_mutexattr_destroy(&a);
        snprintf(label, sizeof label, "pi-%s", kind_name[k]);
        exercise_pi(label, &m, (enum kind)k);
        snprintf(label, sizeof label, "pi-%s destroy", kind_name[k]);
        CHECK(pthread_mutex_destroy, label, 0, &m);
    }

    /* PP on an ordinary SCHED_OTHER thread, then on a SCHED_FIFO one where permitted. */
    sem_init(&pp_go, 0, 1);
    join(spawn(pp_thread, "sched-other"));
    pthread_attr_t ta;
    struct sched_param sp = {.sched_priority = sched_get_priority_min(SCHED_FIFO)};
    pthread_attr_init(&ta);
    pthread_attr_setinheritsched(&ta, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(&ta, SCHED_FIFO);
    pthread_attr_setschedparam(&ta, &sp);
    pthread_t th;
    struct res r;
    CALL(r, pthread_create, &th, &ta, pp_thread, "sched-fifo");
    SHOW(pthread_create, "sched-fifo-thread (needs CAP_SYS_NICE or RLIMIT_RTPRIO)", ANY, r);
    if (r.ret == 0) {
        sem_post(&pp_go);
        join(th);
    }
    pthread_attr_destroy(&ta);

    /* A ceiling outside SCHED_FIFO's range is refused when the attribute is set. */
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_PROTECT);
    CHECK(pthread_mutexattr_setprioceiling, "pp setprioceiling(1000)", EINVAL, &a, 1000);
    pthread_mutexattr_destroy(&a);
    return finish();
}
