/*
 * cond: pthread_cond_{wait,timedwait,clockwait}.
 *
 * A condition wait releases the mutex, sleeps, and re-acquires the mutex before returning,
 * whatever the result: these checks use errorcheck mutexes so that "unlock -> 0, unlock
 * again -> EPERM" proves the caller holds the mutex exactly once afterwards.  (glibc
 * re-acquires it internally, not through pthread_mutex_lock, so a probe never sees that
 * acquisition as a call.)  Cases: timeouts in the past (ETIMEDOUT) on REALTIME and
 * MONOTONIC clocks and with a condattr clock, invalid clocks and deadlines (EINVAL, with
 * the mutex still held), waits woken by pthread_cond_signal and pthread_cond_broadcast
 * before a far deadline, a ping-pong of signalled hand-offs with exact counters, and waits
 * with a recursive mutex locked once and with a priority-inheritance mutex.
 */
#include "common.h"

static pthread_cond_t s_cond = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t s_ec = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;

/* "The caller holds m exactly once": unlock succeeds, a second unlock is EPERM. */
static void held_once(const char *label, const char *after, pthread_mutex_t *m)
{
    char w[160];
    snprintf(w, sizeof w, "%s after-%s/unlock", label, after);
    CHECK(pthread_mutex_unlock, w, 0, m);
    snprintf(w, sizeof w, "%s after-%s/unlock-again", label, after);
    CHECK(pthread_mutex_unlock, w, EPERM, m);
}

static void timeouts(const char *label, pthread_cond_t *c, pthread_mutex_t *m, clockid_t cclk)
{
    char w[160];
    struct timespec t;
#define W(s) (snprintf(w, sizeof w, "%s %s", label, s), w)
    pthread_mutex_lock(m);
    t = abs_in(cclk, -1);
    CHECK(pthread_cond_timedwait, W("past"), ETIMEDOUT, c, m, &t);
    held_once(label, "timedwait-past", m);

    pthread_mutex_lock(m);
    t.tv_sec = -1;
    t.tv_nsec = 0;
    CHECK(pthread_cond_timedwait, W("negative-sec"), ETIMEDOUT, c, m, &t);
    held_once(label, "timedwait-negative-sec", m);

    pthread_mutex_lock(m);
    t = abs_bad_nsec(cclk);
    CHECK(pthread_cond_timedwait, W("bad-nsec"), EINVAL, c, m, &t);
    held_once(label, "timedwait-bad-nsec", m);

    pthread_mutex_lock(m);
    t = abs_in(CLOCK_MONOTONIC, -1);
    CHECK(pthread_cond_clockwait, W("MONOTONIC-past"), ETIMEDOUT, c, m, CLOCK_MONOTONIC, &t);
    held_once(label, "clockwait-MONOTONIC-past", m);

    pthread_mutex_lock(m);
    t = abs_in(CLOCK_REALTIME, -1);
    CHECK(pthread_cond_clockwait, W("REALTIME-past"), ETIMEDOUT, c, m, CLOCK_REALTIME, &t);
    held_once(label, "clockwait-REALTIME-past", m);

    pthread_mutex_lock(m);
    t = abs_in(CLOCK_MONOTONIC, 5);
    CHECK(pthread_cond_clockwait, W("PROCESS_CPUTIME"), EINVAL, c, m, CLOCK_PROCESS_CPUTIME_ID,
          &t);
    CHECK(pthread_cond_clockwait, W("clock-12345"), EINVAL, c, m, (clockid_t)12345, &t);
    held_once(label, "clockwait-EINVAL", m);

    pthread_mutex_lock(m);
    t = abs_bad_nsec(CLOCK_MONOTONIC);
    CHECK(pthread_cond_clockwait, W("MONOTONIC-bad-nsec"), EINVAL, c, m, CLOCK_MONOTONIC, &t);
    held_once(label, "clockwait-bad-nsec", m);
#undef W
}

/* Waiters that block until woken, each with its own deadline kind. */
enum wkind { WAIT, TIMEDWAIT, CLOCKWAIT };
static const char *const wkind_name[] = {"pthread_cond_wait", "pthread_cond_timedwait",
                                         "pthread_cond_clockwait"};

struct wake {
    pthread_cond_t *c;
    pthread_mutex_t *m;
    clockid_t cclk; /* the cond's clock, for timedwait */
    enum wkind kind;
    int *flag;
    _Atomic pid_t tid;
    int waits, bad; /* calls made, calls that returned non-zero or changed errno */
    struct res unlock, unlock_again;
};

static void *wake_main(void *arg)
{
    struct wake *w = arg;
    atomic_store(&w->tid, my_tid());
    pthread_mutex_lock(w->m);
    while (!*w->flag) { /* predicate loop: spurious wake-ups are allowed */
        struct timespec t;
        int r;
        errno = ERRNO_SENTINEL;
        switch (w->kind) {
        case WAIT: r = pthread_cond_wait(w->c, w->m); break;
        case TIMEDWAIT:
            t = abs_in(w->cclk, 30);
            r = pthread_cond_timedwait(w->c, w->m, &t);
            break;
        default:
            t = abs_in(CLOCK_MONOTONIC, 30);
            r = pthread_cond_clockwait(w->c, w->m, CLOCK_MONOTONIC, &t);
            break;
        }
        w->waits++;
        if (r != 0 || errno != ERRNO_SENTINEL)
            w->bad++;
    }
    CALL(w->unlock, pthread_mutex_unlock, w->m);
    CALL(w->unlock_again, pthread_mutex_unlock, w->m);
    return NULL;
}

#define NWAITERS 3

/* Three waiters (wait, timedwait, clockwait) all blocked, then signal or broadcast. */
static void wakeups(const char *label, pthread_cond_t *c, pthread_mutex_t *m, clockid_t cclk,
                    int broadcast)
{
    int flag = 0;
    struct wake w[NWAITERS];
    pthread_t t[NWAITERS];
    for (int i = 0; i < NWAITERS; i++) {
        w[i] = (struct wake){.c = c, .m = m, .cclk = cclk, .kind = (enum wkind)i, .flag = &flag};
        t[i] = spawn(wake_main, &w[i]);
    }
    for (int i = 0; i < NWAITERS; i++) {
        while (atomic_load(&w[i].tid) == 0)
            sched_yield();
        wait_blocked(w[i].tid);
    }
    pthread_mutex_lock(m);
    flag = 1;
    if (broadcast) {
        pthread_cond_broadcast(c);
    } else {
        for (int i = 0; i < NWAITERS; i++)
            pthread_cond_signal(c);
    }
    pthread_mutex_unlock(m);
    for (int i = 0; i < NWAITERS; i++) {
        char s[160];
        join(t[i]);
        /* How many times it waited can vary (spurious wake-ups); that it failed never. */
        NOTE("%s %s %s woken-before-deadline failures=%d", wkind_name[i], label,
             broadcast ? "broadcast" : "signal", w[i].bad);
        snprintf(s, sizeof s, "%s %s-waiter/%s after-wake/unlock", label,
                 broadcast ? "broadcast" : "signal", wkind_name[i] + 13);
        SHOW(pthread_mutex_unlock, s, 0, w[i].unlock);
        snprintf(s, sizeof s, "%s %s-waiter/%s after-wake/unlock-again", label,
                 broadcast ? "broadcast" : "signal", wkind_name[i] + 13);
        SHOW(pthread_mutex_unlock, s, EPERM, w[i].unlock_again);
    }
}

/* Ping-pong: two threads hand a token back and forth ROUNDS times through one cond. */
#define ROUNDS 2000
static pthread_mutex_t pp_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pp_c = PTHREAD_COND_INITIALIZER;
static int pp_turn, pp_moves[2], pp_bad;

static void *pingpong(void *arg)
{
    int me = (int)(long)arg;
    for (int i = 0; i < ROUNDS; i++) {
        pthread_mutex_lock(&pp_m);
        while (pp_turn != me) {
            errno = ERRNO_SENTINEL;
            if (pthread_cond_wait(&pp_c, &pp_m) != 0 || errno != ERRNO_SENTINEL)
                pp_bad++;
        }
        pp_moves[me]++;
        pp_turn = !me;
        pthread_cond_signal(&pp_c);
        pthread_mutex_unlock(&pp_m);
    }
    return NULL;
}

int main(void)
{
    pthread_cond_t dyn, mono;
    pthread_condattr_t ca;
    pthread_mutex_t ec_dyn, rec, pi;
    pthread_mutexattr_t ma;

    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&ec_dyn, &ma);
    pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT);
    pthread_mutex_init(&pi, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&rec, &ma);
    pthread_mutexattr_destroy(&ma);

    CHECK(pthread_cond_init, "dynamic init", 0, &dyn, NULL);
    pthread_condattr_init(&ca);
    CHECK(pthread_condattr_setclock, "monotonic setclock", 0, &ca, CLOCK_MONOTONIC);
    CHECK(pthread_cond_init, "monotonic init", 0, &mono, &ca);
    pthread_condattr_destroy(&ca);

    timeouts("static-cond/static-errorcheck", &s_cond, &s_ec, CLOCK_REALTIME);
    timeouts("dynamic-cond/dynamic-errorcheck", &dyn, &ec_dyn, CLOCK_REALTIME);
    timeouts("monotonic-cond/errorcheck", &mono, &ec_dyn, CLOCK_MONOTONIC);
    timeouts("dynamic-cond/pi-errorcheck", &dyn, &pi, CLOCK_REALTIME);

    wakeups("static-cond/errorcheck", &s_cond, &s_ec, CLOCK_REALTIME, 0);
    wakeups("static-cond/errorcheck", &s_cond, &s_ec, CLOCK_REALTIME, 1);
    wakeups("monotonic-cond/errorcheck", &mono, &ec_dyn, CLOCK_MONOTONIC, 1);
    wakeups("dynamic-cond/pi-errorcheck", &dyn, &pi, CLOCK_REALTIME, 1);

    /* A recursive mutex locked once: the wait releases it fully and takes it back once. */
    struct timespec t;
    pthread_mutex_lock(&rec);
    t = abs_in(CLOCK_REALTIME, -1);
    CHECK(pthread_cond_timedwait, "dynamic-cond/recursive-locked-once past", ETIMEDOUT, &dyn,
          &rec, &t);
    SHOW(pthread_mutex_trylock, "recursive-locked-once after-timedwait/other-thread-trylock",
         EBUSY, on_other_thread(M_TRYLOCK, &rec));
    held_once("dynamic-cond/recursive-locked-once", "timedwait-past", &rec);
    wakeups("dynamic-cond/recursive-locked-once", &dyn, &rec, CLOCK_REALTIME, 1);

    /* Signalled hand-offs with exact counts. */
    pthread_t a = spawn(pingpong, (void *)0L), b = spawn(pingpong, (void *)1L);
    join(a);
    join(b);
    NOTE("pthread_cond_wait ping-pong rounds=%d moves=%d+%d failures=%d", ROUNDS, pp_moves[0],
         pp_moves[1], pp_bad);
    if (pp_moves[0] != ROUNDS || pp_moves[1] != ROUNDS || pp_bad)
        unexpected_count++;

    CHECK(pthread_cond_destroy, "dynamic destroy", 0, &dyn);
    CHECK(pthread_cond_destroy, "monotonic destroy", 0, &mono);
    pthread_mutex_destroy(&ec_dyn);
    pthread_mutex_destroy(&pi);
    pthread_mutex_destroy(&rec);
    return finish();
}
