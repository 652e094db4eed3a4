/*
 * cancel: thread cancellation through the interposed functions.
 *
 * pthread_cond_wait, _timedwait and _clockwait are cancellation points.  A thread cancelled
 * while waiting re-acquires the mutex before its cleanup handlers run, and glibc unwinds the
 * thread's stack (a forced unwind) through every frame above the wait -- including an
 * interposer's frames, which therefore need unwind tables and must not abort on a foreign
 * unwind.  Cleanup handlers here unlock an errorcheck mutex: 0 proves it was held.
 *
 * Mutex, rwlock and spin functions are *not* cancellation points.  A thread with a
 * cancellation pending must get through any number of lock/unlock calls untouched and be
 * cancelled only at the next cancellation point.  A probe that calls write(), fsync(),
 * nanosleep() or other cancellation points on the hot path (e.g. to flush a buffer) would
 * cancel the thread inside pthread_mutex_unlock: the counters below would fall short.
 */
#include "common.h"

static pthread_mutex_t m = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;

struct victim {
    int kind; /* 0 wait, 1 timedwait, 2 clockwait */
    _Atomic pid_t tid;
    int cleanup_ran;
    struct res cleanup_unlock, cleanup_unlock_again;
};

static void cleanup(void *arg)
{
    struct victim *v = arg;
    v->cleanup_ran++;
    CALL(v->cleanup_unlock, pthread_mutex_unlock, &m);
    CALL(v->cleanup_unlock_again, pthread_mutex_unlock, &m);
}

static void *victim_main(void *arg)
{
    struct victim *v = arg;
    struct timespec t;
    pthread_mutex_lock(&m);
    pthread_cleanup_push(cleanup, v);
    atomic_store(&v->tid, my_tid());
    for (;;) { /* only cancellation ends this */
        switch (v->kind) {
        case 0: pthread_cond_wait(&c, &m); break;
        case 1:
            t = abs_in(CLOCK_REALTIME, 30);
            pthread_cond_timedwait(&c, &m, &t);
            break;
        default:
            t = abs_in(CLOCK_MONOTONIC, 30);
            pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &t);
            break;
        }
    }
    pthread_cleanup_pop(0);
    return NULL;
}

/* Lock traffic with a cancellation already pending; cancelled only at pthread_testcancel. */
#define PAIRS 200000
static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t prw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t psp;
static sem_t pending_ready, pending_go;
static long pairs_done;
static int pairs_failed;
static int pending_cleanup_ran;

static void pending_cleanup(void *arg)
{
    (void)arg;
    pending_cleanup_ran++;
}

static void *pending_main(void *arg)
{
    (void)arg;
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    sem_post(&pending_ready);
    sem_wait_nointr(&pending_go); /* main has cancelled us by now: pending, not acted on */
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    pthread_cleanup_push(pending_cleanup, NULL);
    for (long i = 0; i < PAIRS; i++) {
        int bad = 0;
        bad |= pthread_mutex_lock(&pm) | pthread_mutex_unlock(&pm);
        bad |= pthread_mutex_trylock(&pm) | pthread_mutex_unlock(&pm);
        bad |= pthread_rwlock_rdlock(&prw) | pthread_rwlock_unlock(&prw);
        bad |= pthread_rwlock_wrlock(&prw) | pthread_rwlock_unlock(&prw);
        bad |= pthread_spin_lock(&psp) | pthread_spin_unlock(&psp);
        pairs_failed += bad != 0;
        pairs_done++;
    }
    pthread_testcancel(); /* the first cancellation point: ends the thread here */
    pairs_done = -1;      /* not reached */
    pthread_cleanup_pop(0);
    return NULL;
}

int main(void)
{
    static const char *const names[] = {"pthread_cond_wait", "pthread_cond_timedwait",
                                        "pthread_cond_clockwait"};
    for (int k = 0; k < 3; k++) {
        struct victim v = {.kind = k};
        pthread_t t = spawn(victim_main, &v);
        while (atomic_load(&v.tid) == 0)
            sched_yield();
        wait_blocked(v.tid);
        CHECK(pthread_cancel, "blocked-in-cond-wait", 0, t);
        void *ret = join(t);
        NOTE("%s cancelled joined=%s cleanup-ran=%d", names[k],
             ret == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "other", v.cleanup_ran);
        char w[128];
        snprintf(w, sizeof w, "cleanup-after-cancel-in/%s", names[k]);
        SHOW(pthread_mutex_unlock, w, 0, v.cleanup_unlock);
        snprintf(w, sizeof w, "cleanup-after-cancel-in/%s again", names[k]);
        SHOW(pthread_mutex_unlock, w, EPERM, v.cleanup_unlock_again);
    }
    /* The mutex is free again. */
    CHECK(pthread_mutex_trylock, "after-cancellations", 0, &m);
    CHECK(pthread_mutex_unlock, "after-cancellations", 0, &m);

    pthread_spin_init(&psp, PTHREAD_PROCESS_PRIVATE);
    sem_init(&pending_ready, 0, 0);
    sem_init(&pending_go, 0, 0);
    pthread_t t = spawn(pending_main, NULL);
    sem_wait_nointr(&pending_ready);
    CHECK(pthread_cancel, "cancel-pending-while-disabled", 0, t);
    sem_post(&pending_go);
    void *ret = join(t);
    NOTE("cancel-pending lock+unlock sets=%ld (want %d) failures=%d joined=%s cleanup-ran=%d",
         pairs_done, PAIRS, pairs_failed, ret == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "other",
         pending_cleanup_ran);
    if (pairs_done != PAIRS || pairs_failed)
        unexpected_count++;
    pthread_spin_destroy(&psp);
    return finish();
}
