/*
 * signals: locks taken in signal handlers, and signals delivered to threads blocked in
 * lock functions.
 *
 * Only trylock-style calls are used inside handlers (no pthread function is
 * async-signal-safe; a non-blocking try on a lock the interrupted code may hold is the
 * usual, practically safe pattern): pthread_spin_trylock/unlock and
 * pthread_mutex_trylock/unlock, delivered synchronously with raise() while the interrupted
 * code holds some of the locks (EBUSY) and not others (0).  A probe sees a reentrant call
 * here -- its own wrapper may be the code that was interrupted.
 *
 * Then a handler (installed without SA_RESTART) is delivered with pthread_kill to threads
 * blocked in pthread_mutex_lock, pthread_rwlock_wrlock/rdlock, pthread_cond_wait,
 * pthread_barrier_wait and pthread_spin_lock.  None of these may return EINTR: each returns
 * 0 once the lock is released, and the handler ran exactly once.  errno is preserved across
 * everything (the handlers save and restore it, as handlers must).
 */
#include "common.h"
#include <signal.h>

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t unheld = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t held_ec = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t async_free = PTHREAD_MUTEX_INITIALIZER; /* only the handler uses it */
static pthread_spinlock_t spin_held, spin_free;

/* Results recorded by the synchronous handler (raise() runs it before returning, so plain
 * objects are fine here; the asynchronous handler below uses atomics only). */
static struct res h_spin_free, h_spin_free_unlock, h_spin_held, h_mutex_held, h_mutex_free,
    h_mutex_free_unlock, h_ec_held;
static int h_errno_changed;

static void sync_handler(int sig)
{
    (void)sig;
    int saved = errno;
    CALL(h_spin_free, pthread_spin_trylock, &spin_free);
    CALL(h_spin_free_unlock, pthread_spin_unlock, &spin_free);
    CALL(h_spin_held, pthread_spin_trylock, &spin_held);
    CALL(h_mutex_held, pthread_mutex_trylock, &held);
    CALL(h_mutex_free, pthread_mutex_trylock, &unheld);
    CALL(h_mutex_free_unlock, pthread_mutex_unlock, &unheld);
    CALL(h_ec_held, pthread_mutex_trylock, &held_ec);
    errno = saved;
}

/* Handler for signals sent to blocked threads: a try/unlock pair and a count. */
static _Atomic int async_hits;
static _Atomic int async_bad; /* atomics: the only objects a handler may touch */
static pthread_spinlock_t spin_async;
static void async_handler(int sig)
{
    (void)sig;
    int saved = errno;
    if (pthread_spin_trylock(&spin_async) == 0)
        pthread_spin_unlock(&spin_async);
    else
        atomic_fetch_add(&async_bad, 1);
    if (pthread_mutex_trylock(&async_free) == 0)
        pthread_mutex_unlock(&async_free);
    else
        atomic_fetch_add(&async_bad, 1);
    atomic_fetch_add(&async_hits, 1);
    errno = saved;
}

static void install(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: an interrupted wait must still not fail with EINTR */
    sigaction(sig, &sa, NULL);
}

/* ---- blocked threads ----------------------------------------------------------------- */

enum blk { B_MUTEX, B_WRLOCK, B_RDLOCK, B_COND, B_BARRIER, B_SPIN };
static const char *const blk_name[] = {"pthread_mutex_lock", "pthread_rwlock_wrlock",
                                       "pthread_rwlock_rdlock", "pthread_cond_wait",
                                       "pthread_barrier_wait", "pthread_spin_lock"};

static pthread_mutex_t bm = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t brw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_cond_t bc = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t bb;
static pthread_spinlock_t bsp;
static int cond_flag;

struct blocked {
    enum blk kind;
    _Atomic pid_t tid;
    _Atomic int started;
    struct res r;
    int cond_waits_nonzero;
};

static void *blocked_main(void *arg)
{
    struct blocked *b = arg;
    atomic_store(&b->tid, my_tid());
    atomic_store(&b->started, 1);
    errno = ERRNO_SENTINEL;
    switch (b->kind) {
    case B_MUTEX:
        CALL(b->r, pthread_mutex_lock, &bm);
        pthread_mutex_unlock(&bm);
        break;
    case B_WRLOCK:
        CALL(b->r, pthread_rwlock_wrlock, &brw);
        pthread_rwlock_unlock(&brw);
        break;
    case B_RDLOCK:
        CALL(b->r, pthread_rwlock_rdlock, &brw);
        pthread_rwlock_unlock(&brw);
        break;
    case B_COND:
        pthread_mutex_lock(&bm);
        b->r.ret = 0;
        b->r.err = ERRNO_SENTINEL;
        while (!cond_flag) {
            struct res r;
            CALL(r, pthread_cond_wait, &bc, &bm);
            if (r.ret != 0 || r.err != ERRNO_SENTINEL)
                b->r = r;
        }
        pthread_mutex_unlock(&bm);
        break;
    case B_BARRIER:
        CALL(b->r, pthread_barrier_wait, &bb);
        if (b->r.ret == PTHREAD_BARRIER_SERIAL_THREAD)
            b->r.ret = 0; /* which side is serial is unspecified: fold it */
        break;
    case B_SPIN:
        CALL(b->r, pthread_spin_lock, &bsp);
        pthread_spin_unlock(&bsp);
        break;
    }
    return NULL;
}

static void signal_blocked(enum blk kind)
{
    struct blocked b = {.kind = kind};
    int before = atomic_load(&async_hits);
    switch (kind) {
    case B_MUTEX: pthread_mutex_lock(&bm); break;
    case B_WRLOCK: pthread_rwlock_rdlock(&brw); break;
    case B_RDLOCK: pthread_rwlock_wrlock(&brw); break;
    case B_COND: cond_flag = 0; break;
    case B_BARRIER: pthread_barrier_init(&bb, NULL, 2); break;
    case B_SPIN: pthread_spin_lock(&bsp); break;
    }
    pthread_t t = spawn(blocked_main, &b);
    while (atomic_load(&b.tid) == 0)
        sched_yield();
    if (kind == B_SPIN)
        sleep_ms(5); /* a spinning thread is running, not asleep: give it time to spin */
    else
        wait_blocked(b.tid);
    pthread_kill(t, SIGUSR2);
    while (atomic_load(&async_hits) == before) /* the handler has run ... */
        sched_yield();
    if (kind != B_SPIN)
        wait_blocked(b.tid); /* ... and the thread went back to waiting */
    switch (kind) {
    case B_MUTEX: pthread_mutex_unlock(&bm); break;
    case B_WRLOCK:
    case B_RDLOCK: pthread_rwlock_unlock(&brw); break;
    case B_COND:
        pthread_mutex_lock(&bm);
        cond_flag = 1;
        pthread_cond_signal(&bc);
        pthread_mutex_unlock(&bm);
        break;
    case B_BARRIER: pthread_barrier_wait(&bb); break;
    case B_SPIN: pthread_spin_unlock(&bsp); break;
    }
    join(t);
    if (kind == B_BARRIER)
        pthread_barrier_destroy(&bb);
    char w[96];
    snprintf(w, sizeof w, "interrupted-by-signal handler-runs=%d",
             atomic_load(&async_hits) - before);
    report(blk_name[kind], w, b.r.ret, b.r.err, 0);
}

int main(void)
{
    pthread_spin_init(&spin_held, PTHREAD_PROCESS_PRIVATE);
    pthread_spin_init(&spin_free, PTHREAD_PROCESS_PRIVATE);
    pthread_spin_init(&spin_async, PTHREAD_PROCESS_PRIVATE);
    pthread_spin_init(&bsp, PTHREAD_PROCESS_PRIVATE);

    install(SIGUSR1, sync_handler);
    /* The interrupted code holds `held`, `held_ec` and `spin_held`. */
    pthread_mutex_lock(&held);
    pthread_mutex_lock(&held_ec);
    pthread_spin_lock(&spin_held);
    errno = ERRNO_SENTINEL;
    int r = raise(SIGUSR1);
    h_errno_changed = errno != ERRNO_SENTINEL;
    pthread_spin_unlock(&spin_held);
    pthread_mutex_unlock(&held_ec);
    pthread_mutex_unlock(&held);
    NOTE("raise SIGUSR1 ret=%d errno-preserved-across-handler=%s", r,
         h_errno_changed ? "no" : "yes");
    SHOW(pthread_spin_trylock, "in-handler free", 0, h_spin_free);
    SHOW(pthread_spin_unlock, "in-handler free", 0, h_spin_free_unlock);
    SHOW(pthread_spin_trylock, "in-handler held-by-interrupted-code", EBUSY, h_spin_held);
    SHOW(pthread_mutex_trylock, "in-handler held-by-interrupted-code", EBUSY, h_mutex_held);
    SHOW(pthread_mutex_trylock, "in-handler errorcheck held-by-interrupted-code", EBUSY,
         h_ec_held);
    SHOW(pthread_mutex_trylock, "in-handler free", 0, h_mutex_free);
    SHOW(pthread_mutex_unlock, "in-handler free", 0, h_mutex_free_unlock);

    /* Signals raised in a tight loop of lock/unlock: the handler interrupts the probe. */
    install(SIGUSR2, async_handler);
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        errno = ERRNO_SENTINEL;
        bad += pthread_mutex_lock(&unheld) != 0;
        if (i % 10 == 0)
            raise(SIGUSR2);
        bad += pthread_mutex_unlock(&unheld) != 0;
        bad += errno != ERRNO_SENTINEL;
    }
    NOTE("lock/raise/unlock x2000 failures=%d handler-runs=%d", bad, atomic_load(&async_hits));

    for (int k = 0; k <= B_SPIN; k++)
        signal_blocked((enum blk)k);
    NOTE("async handler try failures=%d", atomic_load(&async_bad));
    return finish();
}
