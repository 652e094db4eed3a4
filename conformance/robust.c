/*
 * robust: robust mutexes (PTHREAD_MUTEX_ROBUST) whose owner dies holding them.
 *
 * When the owner thread exits (or the owner process dies) the kernel walks its robust list
 * and marks the lock word FUTEX_OWNER_DIED; the next locker acquires the mutex and gets
 * EOWNERDEAD.  It must then call pthread_mutex_consistent, or on unlock the mutex becomes
 * permanently unusable (ENOTRECOVERABLE).  EOWNERDEAD means "you hold it now": a probe that
 * treats any non-zero result of a try as "contended, now block in lock" would relock a mutex
 * it already holds.  Cases: lock/trylock/timedlock/clocklock after the owner died, a waiter
 * that is already blocked when the owner dies, the ENOTRECOVERABLE path, errorcheck and
 * recursive robust kinds, robust + priority inheritance, and a process-shared robust mutex
 * whose owner is a child process that exits.
 */
#include "common.h"
#include <sys/mman.h>
#include <sys/wait.h>

static void init_robust(pthread_mutex_t *m, int type, int protocol, int pshared)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, type);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutexattr_setprotocol(&a, protocol);
    pthread_mutexattr_setpshared(&a, pshared);
    int e = pthread_mutex_init(m, &a);
    if (e)
        die("pthread_mutex_init(robust)", e);
    pthread_mutexattr_destroy(&a);
}

/* A thread that locks `m` (`depth` times) and exits without unlocking. */
struct dier {
    pthread_mutex_t *m;
    int depth;
    struct res lock;
};

static void *dier_main(void *arg)
{
    struct dier *d = arg;
    for (int i = 0; i < d->depth; i++)
        CALL(d->lock, pthread_mutex_lock, d->m);
    return NULL; /* exits holding the mutex */
}

static void owner_dies(const char *label, pthread_mutex_t *m, int depth)
{
    char w[160];
    struct dier d = {m, depth, {0, 0}};
    join(spawn(dier_main, &d)); /* after join the kernel has processed its robust list */
    snprintf(w, sizeof w, "%s owner-lock-then-exit", label);
    SHOW(pthread_mutex_lock, w, 0, d.lock);
}

/* A waiter already asleep in pthread_mutex_lock when the owner exits. */
struct waiter {
    pthread_mutex_t *m;
    _Atomic pid_t tid;
    struct res lock, consistent, unlock;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    atomic_store(&w->tid, my_tid());
    CALL(w->lock, pthread_mutex_lock, w->m);
    if (w->lock.ret == EOWNERDEAD)
        CALL(w->consistent, pthread_mutex_consistent, w->m);
    CALL(w->unlock, pthread_mutex_unlock, w->m);
    return NULL;
}

struct blocking_owner {
    pthread_mutex_t *m;
    struct waiter *w;
    pthread_t waiter_thread;
    struct res lock;
};

static void *blocking_owner_main(void *arg)
{
    struct blocking_owner *o = arg;
    CALL(o->lock, pthread_mutex_lock, o->m);
    o->waiter_thread = spawn(waiter_main, o->w);
    while (atomic_load(&o->w->tid) == 0)
        sched_yield();
    wait_blocked(o->w->tid);
    return NULL; /* dies holding the mutex while the waiter sleeps on it */
}

static void sequence(const char *label, int type, int protocol)
{
    pthread_mutex_t m;
    char w[160];
    struct timespec t;
#define W(s) (snprintf(w, sizeof w, "%s %s", label, s), w)

    /* 1. lock after the owner died: EOWNERDEAD, consistent, then usable again. */
    init_robust(&m, type, protocol, PTHREAD_PROCESS_PRIVATE);
    owner_dies(label, &m, 1);
    CHECK(pthread_mutex_lock, W("owner-died/lock"), EOWNERDEAD, &m);
    SHOW(pthread_mutex_trylock, W("owner-died/held-inconsistent/other-trylock"), EBUSY,
         on_other_thread(M_TRYLOCK, &m));
    CHECK(pthread_mutex_consistent, W("owner-died/consistent"), 0, &m);
    CHECK(pthread_mutex_consistent, W("already-consistent"), EINVAL, &m);
    CHECK(pthread_mutex_unlock, W("owner-died/unlock"), 0, &m);
    CHECK(pthread_mutex_lock, W("recovered/lock"), 0, &m);
    CHECK(pthread_mutex_unlock, W("recovered/unlock"), 0, &m);
    pthread_mutex_destroy(&m);

    /* 2. trylock after the owner died; unlock without consistent: ENOTRECOVERABLE forever. */
    init_robust(&m, type, protocol, PTHREAD_PROCESS_PRIVATE);
    owner_dies(label, &m, 1);
    CHECK(pthread_mutex_trylock, W("owner-died/trylock"), EOWNERDEAD, &m);
    CHECK(pthread_mutex_unlock, W("owner-died/unlock-without-consistent"), 0, &m);
    CHECK(pthread_mutex_lock, W("not-recoverable/lock"), ENOTRECOVERABLE, &m);
    t = abs_in(CLOCK_REALTIME, 1);
    CHECK(pthread_mutex_timedlock, W("not-recoverable/timedlock"), ENOTRECOVERABLE, &m, &t);
    t = abs_in(CLOCK_MONOTONIC, 1);
    CHECK(pthread_mutex_clocklock, W("not-recoverable/clocklock"), ENOTRECOVERABLE, &m,
          CLOCK_MONOTONIC, &t);
    SHOW(pthread_mutex_lock, W("not-recoverable/other-thread-lock"), ENOTRECOVERABLE,
         on_other_thread(M_LOCK, &m));
    CHECK(pthread_mutex_trylock, W("not-recoverable/trylock"), ENOTRECOVERABLE, &m);
    /*
     * glibc 2.36 bug: an ENOTRECOVERABLE trylock on a robust non-PI mutex leaves the lock
     * word holding the caller's TID (it decides whether to undo its CAS by comparing the CAS's
     * result -- the old value, 0 -- with its TID).  So now another thread's trylock says EBUSY
     * and a lock would block forever.  Printed, not judged: a pass-through probe must show the
     * same.  (That is also why no other thread tries before this point: a trylock by a thread
     * that then exits leaves a dead TID in the word and everything after is EBUSY.)
     */
    SHOW(pthread_mutex_trylock, W("not-recoverable/after-own-trylock/other-thread-trylock"), ANY,
         on_other_thread(M_TRYLOCK, &m));
    CHECK(pthread_mutex_destroy, W("not-recoverable/destroy"), 0, &m);
    init_robust(&m, type, protocol, PTHREAD_PROCESS_PRIVATE);
    CHECK(pthread_mutex_lock, W("reinitialised/lock"), 0, &m);
    CHECK(pthread_mutex_unlock, W("reinitialised/unlock"), 0, &m);
    pthread_mutex_destroy(&m);

    /* 3. timedlock and clocklock after the owner died. */
    init_robust(&m, type, protocol, PTHREAD_PROCESS_PRIVATE);
    owner_dies(label, &m, 1);
    t = abs_in(CLOCK_REALTIME, 5);
    CHECK(pthread_mutex_timedlock, W("owner-died/timedlock"), EOWNERDEAD, &m, &t);
    CHECK(pthread_mutex_consistent, W("owner-died/consistent"), 0, &m);
    CHECK(pthread_mutex_unlock, W("owner-died/unlock"), 0, &m);
    owner_dies(label, &m, 1);
    t = abs_in(CLOCK_MONOTONIC, 5);
    CHECK(pthread_mutex_clocklock, W("owner-died/clocklock"), EOWNERDEAD, &m, CLOCK_MONOTONIC,
          &t);
    CHECK(pthread_mutex_consistent, W("owner-died/consistent"), 0, &m);
    CHECK(pthread_mutex_unlock, W("owner-died/unlock"), 0, &m);
    pthread_mutex_destroy(&m);

    /* 4. a waiter blocked in lock when the owner dies gets EOWNERDEAD. */
    init_robust(&m, type, protocol, PTHREAD_PROCESS_PRIVATE);
    struct waiter wt = {.m = &m};
    struct blocking_owner o = {.m = &m, .w = &wt};
    join(spawn(blocking_owner_main, &o));
    join(o.waiter_thread);
    SHOW(pthread_mutex_lock, W("blocked-waiter/owner-lock"), 0, o.lock);
    SHOW(pthread_mutex_lock, W("blocked-waiter/lock"), EOWNERDEAD, wt.lock);
    SHOW(pthread_mutex_consistent, W("blocked-waiter/consistent"), 0, wt.consistent);
    SHOW(pthread_mutex_unlock, W("blocked-waiter/unlock"), 0, wt.unlock);
    pthread_mutex_destroy(&m);

    /* 5. kind-specific behaviour of a healthy robust mutex. */
    init_robust(&m, type, protocol, PTHREAD_PROCESS_PRIVATE);
    CHECK(pthread_mutex_lock, W("healthy/lock"), 0, &m);
    if (type == PTHREAD_MUTEX_ERRORCHECK) {
        CHECK(pthread_mutex_lock, W("healthy/relock-by-owner"), EDEADLK, &m);
        SHOW(pthread_mutex_unlock, W("healthy/unlock-by-non-owner"), EPERM,
             on_other_thread(M_UNLOCK, &m));
    }
    if (type == PTHREAD_MUTEX_RECURSIVE) {
        CHECK(pthread_mutex_lock, W("healthy/relock-by-owner"), 0, &m);
        CHECK(pthread_mutex_unlock, W("healthy/unlock-depth2"), 0, &m);
    }
    CHECK(pthread_mutex_unlock, W("healthy/unlock"), 0, &m);
    if (type != PTHREAD_MUTEX_NORMAL)
        CHECK(pthread_mutex_unlock, W("healthy/unlocked"), EPERM, &m);
    pthread_mutex_destroy(&m);

    /* 6. recursive robust: owner dies holding it twice; the new owner holds it once. */
    if (type == PTHREAD_MUTEX_RECURSIVE) {
        init_robust(&m, type, protocol, PTHREAD_PROCESS_PRIVATE);
        owner_dies(label, &m, 2);
        CHECK(pthread_mutex_lock, W("owner-died-depth2/lock"), EOWNERDEAD, &m);
        CHECK(pthread_mutex_consistent, W("owner-died-depth2/consistent"), 0, &m);
        CHECK(pthread_mutex_unlock, W("owner-died-depth2/unlock"), 0, &m);
        CHECK(pthread_mutex_unlock, W("owner-died-depth2/unlock-again"), EPERM, &m);
        pthread_mutex_destroy(&m);
    }
#undef W
}

/* Process-shared robust mutex in shared memory; the owner is a child process that exits. */
static void cross_process(void)
{
    pthread_mutex_t *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        die("mmap", errno);
    init_robust(m, PTHREAD_MUTEX_NORMAL, PTHREAD_PRIO_NONE, PTHREAD_PROCESS_SHARED);
    fflush(stdout); /* or the child would print our buffered lines again */
    pid_t pid = fork();
    if (pid == 0) {
        int r = pthread_mutex_lock(m);
        _exit(r == 0 ? 0 : 1); /* dies holding it */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    NOTE("fork pshared-robust child exit=%d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    CHECK(pthread_mutex_lock, "pshared-robust owner-process-died/lock", EOWNERDEAD, m);
    CHECK(pthread_mutex_consistent, "pshared-robust owner-process-died/consistent", 0, m);
    CHECK(pthread_mutex_unlock, "pshared-robust owner-process-died/unlock", 0, m);

    /* A non-robust process-shared mutex: the child blocks until the parent unlocks. */
    pthread_mutex_t *n = m + 0;
    pthread_mutex_destroy(m);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(n, &a);
    pthread_mutexattr_destroy(&a);
    CHECK(pthread_mutex_lock, "pshared parent/lock", 0, n);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        int r1 = pthread_mutex_trylock(n); /* held by the parent: EBUSY */
        int r2 = pthread_mutex_lock(n);    /* blocks until the parent unlocks */
        int r3 = pthread_mutex_unlock(n);
        _exit(r1 == EBUSY && r2 == 0 && r3 == 0 ? 0 : 1);
    }
    wait_blocked_pid(pid);
    CHECK(pthread_mutex_unlock, "pshared parent/unlock", 0, n);
    waitpid(pid, &st, 0);
    NOTE("fork pshared child trylock=EBUSY,lock=0,unlock=0 exit=%d",
         WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    pthread_mutex_destroy(n);
    munmap(m, sizeof *m);
}

int main(void)
{
    pthread_mutex_t plain = PTHREAD_MUTEX_INITIALIZER;
    CHECK(pthread_mutex_consistent, "non-robust", EINVAL, &plain);
    sequence("robust-normal", PTHREAD_MUTEX_NORMAL, PTHREAD_PRIO_NONE);
    sequence("robust-errorcheck", PTHREAD_MUTEX_ERRORCHECK, PTHREAD_PRIO_NONE);
    sequence("robust-recursive", PTHREAD_MUTEX_RECURSIVE, PTHREAD_PRIO_NONE);
    sequence("robust-pi-normal", PTHREAD_MUTEX_NORMAL, PTHREAD_PRIO_INHERIT);
    sequence("robust-pi-errorcheck", PTHREAD_MUTEX_ERRORCHECK, PTHREAD_PRIO_INHERIT);
    cross_process();
    return finish();
}
