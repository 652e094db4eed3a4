/*
 * mutex_kinds: pthread_mutex_{lock,trylock,unlock} on every mutex type, each both statically
 * initialised (PTHREAD_*_INITIALIZER*) and initialised with pthread_mutex_init, with the
 * error cases POSIX and glibc define: relock of an errorcheck mutex (EDEADLK), unlock by a
 * non-owner and unlock of an unlocked mutex (EPERM), recursion counts, tries on a lock held
 * by this or another thread (EBUSY), a contended lock that really blocks, and re-use of a
 * destroyed mutex's memory as a mutex of another type (a probe must not cache the type).
 * Undefined cases (relock or foreign unlock of a normal mutex) are not exercised.
 */
#include "common.h"

static pthread_mutex_t s_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t s_recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_adaptive = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;

enum kind { NORMAL, RECURSIVE, ERRORCHECK, ADAPTIVE };
static const char *const kind_name[] = {"normal", "recursive", "errorcheck", "adaptive"};
static const int kind_type[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE,
                                PTHREAD_MUTEX_ERRORCHECK, PTHREAD_MUTEX_ADAPTIVE_NP};

/* A thread that blocks in pthread_mutex_lock until the main thread releases the mutex. */
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
    CALL(c->unlock, pthread_mutex_unlock, c->m);
    return NULL;
}

static void contended(const char *label, pthread_mutex_t *m)
{
    char w[128];
    struct contender c = {.m = m};
    snprintf(w, sizeof w, "%s contended/owner-lock", label);
    CHECK(pthread_mutex_lock, w, 0, m);
    pthread_t t = spawn(contender_main, &c);
    while (atomic_load(&c.tid) == 0)
        sched_yield();
    wait_blocked(c.tid); /* the waiter is asleep in the lock: the slow path runs */
    snprintf(w, sizeof w, "%s contended/owner-unlock", label);
    CHECK(pthread_mutex_unlock, w, 0, m);
    join(t);
    snprintf(w, sizeof w, "%s contended/waiter-lock", label);
    SHOW(pthread_mutex_lock, w, 0, c.lock);
    snprintf(w, sizeof w, "%s contended/waiter-unlock", label);
    SHOW(pthread_mutex_unlock, w, 0, c.unlock);
}

static void exercise(const char *label, pthread_mutex_t *m, enum kind k)
{
    char w[128];
#define W(s) (snprintf(w, sizeof w, "%s %s", label, s), w)
    int self_try = k == RECURSIVE ? 0 : EBUSY;
    int owner_checked = k == RECURSIVE || k == ERRORCHECK;

    CHECK(pthread_mutex_trylock, W("free"), 0, m);
    CHECK(pthread_mutex_unlock, W("after-trylock"), 0, m);
    CHECK(pthread_mutex_lock, W("free"), 0, m);
    CHECK(pthread_mutex_trylock, W("held-by-self"), self_try, m);
    if (k == RECURSIVE)
        CHECK(pthread_mutex_unlock, W("undo-recursive-trylock"), 0, m);
    if (k == ERRORCHECK)
        CHECK(pthread_mutex_lock, W("relock-by-owner"), EDEADLK, m);
    if (k == RECURSIVE) {
        CHECK(pthread_mutex_lock, W("relock-by-owner-depth2"), 0, m);
        CHECK(pthread_mutex_lock, W("relock-by-owner-depth3"), 0, m);
        CHECK(pthread_mutex_unlock, W("unlock-depth3"), 0, m);
        CHECK(pthread_mutex_unlock, W("unlock-depth2"), 0, m);
    }
    SHOW(pthread_mutex_trylock, W("held-by-other"), EBUSY, on_other_thread(M_TRYLOCK, m));
    if (owner_checked)
        SHOW(pthread_mutex_unlock, W("unlock-by-non-owner"), EPERM, on_other_thread(M_UNLOCK, m));
    CHECK(pthread_mutex_unlock, W("by-owner"), 0, m);
    if (owner_checked) {
        CHECK(pthread_mutex_unlock, W("unlocked"), EPERM, m);
        /* The failed unlocks must not have changed the state: it is still free. */
        CHECK(pthread_mutex_trylock, W("free-after-failed-unlock"), 0, m);
        CHECK(pthread_mutex_unlock, W("after-trylock"), 0, m);
    }
    /* Lock on one thread, unlock on the same thread, many times: the hot path. */
    int bad = 0;
    for (int i = 0; i < 10000; i++) {
        errno = ERRNO_SENTINEL;
        bad += pthread_mutex_lock(m) != 0;
        bad += pthread_mutex_unlock(m) != 0;
        bad += errno != ERRNO_SENTINEL;
    }
    NOTE("loop %s lock+unlock x10000 failures=%d", label, bad);
    contended(label, m);
#undef W
}

int main(void)
{
    pthread_mutex_t *stat[] = {&s_normal, &s_recursive, &s_errorcheck, &s_adaptive};
    pthread_mutex_t dyn[4];
    char label[64];

    for (int k = 0; k < 4; k++) {
        snprintf(label, sizeof label, "%s/static", kind_name[k]);
        exercise(label, stat[k], (enum kind)k);
    }
    for (int k = 0; k < 4; k++) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, kind_type[k]);
        snprintf(label, sizeof label, "%s/dynamic init", kind_name[k]);
        CHECK(pthread_mutex_init, label, 0, &dyn[k], &a);
        pthread_mutexattr_destroy(&a);
        snprintf(label, sizeof label, "%s/dynamic", kind_name[k]);
        exercise(label, &dyn[k], (enum kind)k);
    }
    /* pthread_mutex_init(m, NULL): the default type, which glibc makes a normal mutex. */
    pthread_mutex_t def;
    CHECK(pthread_mutex_init, "default/dynamic init", 0, &def, NULL);
    exercise("default/dynamic", &def, NORMAL);

    /*
     * The same memory, destroyed and re-initialised as another type: behaviour must follow
     * the new type (a probe that caches per-address facts would get this wrong).
     */
    CHECK(pthread_mutex_destroy, "normal/dynamic destroy", 0, &dyn[NORMAL]);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    CHECK(pthread_mutex_init, "reused-as-errorcheck init", 0, &dyn[NORMAL], &a);
    pthread_mutexattr_destroy(&a);
    exercise("reused-as-errorcheck", &dyn[NORMAL], ERRORCHECK);
    /* Destroying a locked mutex: glibc refuses with EBUSY (and the mutex stays usable). */
    CHECK(pthread_mutex_lock, "errorcheck/static before-destroy", 0, &s_errorcheck);
    CHECK(pthread_mutex_destroy, "errorcheck/static locked", EBUSY, &s_errorcheck);
    CHECK(pthread_mutex_unlock, "errorcheck/static after-failed-destroy", 0, &s_errorcheck);

    for (int k = 0; k < 4; k++)
        pthread_mutex_destroy(&dyn[k]);
    pthread_mutex_destroy(&def);
    return finish();
}
