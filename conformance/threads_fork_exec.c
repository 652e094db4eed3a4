/*
 * threads_fork_exec: thread creation, exit and join; fork; exec.
 *
 * Threads: return values delivered through `return` and through pthread_exit (also from a
 * nested call), join of self (EDEADLK), tryjoin of a running thread (EBUSY), threads
 * created by threads, hundreds of short-lived threads that each take a lock (a probe's
 * per-thread state must come and go), and a thread with the minimum stack size
 * (PTHREAD_STACK_MIN) that takes locks: glibc carves static TLS out of the thread's stack,
 * so a probe with a large static TLS block makes that pthread_create fail, and a probe
 * that needs much stack overflows it.
 *
 * fork: while another thread holds a mutex, a rwlock and a spinlock (the child inherits
 * them held by a thread that does not exist there: tries say EBUSY, other locks work,
 * threads can be created); with pthread_atfork handlers that lock in prepare and unlock
 * in parent and child (an errorcheck mutex unlocked in the child says EPERM in glibc:
 * the child's thread has a new TID); fork from a non-main thread.
 *
 * exec: a forked child execs /proc/self/exe (and posix_spawn does the same), which takes
 * locks and exits with a known status; finally the process execs itself from a non-main
 * thread while another thread holds a lock and a third is blocked on it, and the new image
 * takes locks, then its main thread calls pthread_exit while another thread goes on.
 */
#include "common.h"
#include <spawn.h>
#include <stdint.h>
#include <sys/wait.h>

extern char **environ;

static pthread_mutex_t held_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t held_rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t held_sp;
static pthread_mutex_t free_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t free_ec = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;

/* ---- locks that must work anywhere (after fork, after exec) -------------------------- */

static void *lock_worker(void *arg)
{
    pthread_mutex_t *m = arg;
    int bad = 0;
    for (int i = 0; i < 1000; i++)
        bad += (pthread_mutex_lock(m) | pthread_mutex_unlock(m)) != 0;
    return (void *)(intptr_t)bad;
}

static void fresh_locks(const char *who)
{
    char w[128];
    struct timespec t;
#define W(s) (snprintf(w, sizeof w, "%s %s", who, s), w)
    pthread_mutex_t m;
    pthread_rwlock_t rw;
    pthread_spinlock_t sp;
    pthread_cond_t c;
    pthread_barrier_t b;
    CHECK(pthread_mutex_lock, W("static-free"), 0, &free_m);
    CHECK(pthread_mutex_unlock, W("static-free"), 0, &free_m);
    CHECK(pthread_mutex_lock, W("static-errorcheck"), 0, &free_ec);
    CHECK(pthread_mutex_lock, W("static-errorcheck relock"), EDEADLK, &free_ec);
    CHECK(pthread_mutex_unlock, W("static-errorcheck"), 0, &free_ec);
    pthread_mutex_init(&m, NULL);
    CHECK(pthread_mutex_lock, W("dynamic"), 0, &m);
    CHECK(pthread_mutex_trylock, W("dynamic held-by-self"), EBUSY, &m);
    t = abs_in(CLOCK_REALTIME, -1);
    pthread_cond_init(&c, NULL);
    CHECK(pthread_cond_timedwait, W("past"), ETIMEDOUT, &c, &m, &t);
    CHECK(pthread_mutex_unlock, W("dynamic"), 0, &m);
    pthread_rwlock_init(&rw, NULL);
    CHECK(pthread_rwlock_wrlock, W("dynamic"), 0, &rw);
    CHECK(pthread_rwlock_unlock, W("dynamic"), 0, &rw);
    CHECK(pthread_rwlock_rdlock, W("dynamic"), 0, &rw);
    CHECK(pthread_rwlock_unlock, W("dynamic"), 0, &rw);
    pthread_spin_init(&sp, PTHREAD_PROCESS_PRIVATE);
    CHECK(pthread_spin_lock, W("dynamic"), 0, &sp);
    CHECK(pthread_spin_trylock, W("dynamic held"), EBUSY, &sp);
    CHECK(pthread_spin_unlock, W("dynamic"), 0, &sp);
    /* threads in this process, contending for m */
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        CHECK(pthread_create, W("worker"), 0, &th[i], NULL, lock_worker, &m);
    long bad = 0;
    for (int i = 0; i < 3; i++) {
        void *v;
        CHECK(pthread_join, W("worker"), 0, th[i], &v);
        bad += (intptr_t)v;
    }
    NOTE("%s workers lock+unlock x3000 failures=%ld", who, bad);
    pthread_barrier_init(&b, NULL, 1);
    CHECK(pthread_barrier_wait, W("count-1"), PTHREAD_BARRIER_SERIAL_THREAD, &b);
    pthread_barrier_destroy(&b);
    pthread_cond_destroy(&c);
    pthread_mutex_destroy(&m);
    pthread_rwlock_destroy(&rw);
    pthread_spin_destroy(&sp);
#undef W
}

/* ---- threads ------------------------------------------------------------------------- */

static void nested_exit(int v) { pthread_exit((void *)(intptr_t)v); }

static void *ret_value(void *arg) { return (void *)((intptr_t)arg * 2); }
static void *exit_value(void *arg)
{
    nested_exit((int)(intptr_t)arg + 1000);
    return NULL; /* not reached */
}

static sem_t park;
static void *parked(void *arg)
{
    sem_wait_nointr(&park);
    return arg;
}

static void *spawner(void *arg)
{
    (void)arg;
    pthread_t t;
    void *v = NULL;
    if (pthread_create(&t, NULL, ret_value, (void *)(intptr_t)21) != 0)
        return (void *)-1;
    pthread_join(t, &v);
    return v; /* 42 */
}

static _Atomic long churn_bad;
static void *churn(void *arg)
{
    (void)arg;
    if (pthread_mutex_lock(&free_m) | pthread_mutex_unlock(&free_m))
        atomic_fetch_add(&churn_bad, 1);
    return NULL;
}

static void *small_stack(void *arg)
{
    (void)arg;
    int bad = 0;
    for (int i = 0; i < 100; i++) {
        bad += (pthread_mutex_lock(&free_m) | pthread_mutex_unlock(&free_m)) != 0;
        bad += (pthread_rwlock_rdlock(&held_rw) | pthread_rwlock_unlock(&held_rw)) != 0;
    }
    return (void *)(intptr_t)bad;
}

static void threads(void)
{
    pthread_t t;
    void *v;
    CHECK(pthread_create, "return-value", 0, &t, NULL, ret_value, (void *)(intptr_t)21);
    CHECK(pthread_join, "return-value", 0, t, &v);
    NOTE("pthread_join return-value value=%ld", (long)(intptr_t)v);
    CHECK(pthread_create, "pthread_exit-value", 0, &t, NULL, exit_value, (void *)(intptr_t)7);
    CHECK(pthread_join, "pthread_exit-value", 0, t, &v);
    NOTE("pthread_join pthread_exit-value value=%ld", (long)(intptr_t)v);
    CHECK(pthread_join, "self", EDEADLK, pthread_self(), NULL);
    sem_init(&park, 0, 0);
    CHECK(pthread_create, "parked", 0, &t, NULL, parked, (void *)(intptr_t)5);
    CHECK(pthread_tryjoin_np, "running", EBUSY, t, &v);
    sem_post(&park);
    CHECK(pthread_join, "parked", 0, t, &v);
    NOTE("pthread_join parked value=%ld", (long)(intptr_t)v);
    CHECK(pthread_create, "thread-creates-thread", 0, &t, NULL, spawner, NULL);
    CHECK(pthread_join, "thread-creates-thread", 0, t, &v);
    NOTE("pthread_join thread-creates-thread value=%ld", (long)(intptr_t)v);

    int created = 0;
    for (int i = 0; i < 300; i++) {
        if (pthread_create(&t, NULL, churn, NULL) == 0) {
            pthread_join(t, NULL);
            created++;
        }
    }
    NOTE("pthread_create churn created=300/%d lock-failures=%ld", created, atomic_load(&churn_bad));

    pthread_attr_t a;
    pthread_attr_init(&a);
    CHECK(pthread_attr_setstacksize, "PTHREAD_STACK_MIN", 0, &a, PTHREAD_STACK_MIN);
    struct res r;
    CALL(r, pthread_create, &t, &a, small_stack, NULL);
    SHOW(pthread_create, "stack=PTHREAD_STACK_MIN", 0, r);
    if (r.ret == 0) {
        CHECK(pthread_join, "stack=PTHREAD_STACK_MIN", 0, t, &v);
        NOTE("small-stack thread lock failures=%ld", (long)(intptr_t)v);
    }
    pthread_attr_destroy(&a);

    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    CHECK(pthread_create, "detached", 0, &t, &a, parked, NULL);
    pthread_attr_destroy(&a);
    sem_post(&park); /* let it finish on its own */
}

/* ---- fork ---------------------------------------------------------------------------- */

static sem_t holding, let_go;
static void *holder(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&held_m);
    pthread_rwlock_wrlock(&held_rw);
    pthread_spin_lock(&held_sp);
    sem_post(&holding);
    sem_wait_nointr(&let_go);
    pthread_spin_unlock(&held_sp);
    pthread_rwlock_unlock(&held_rw);
    pthread_mutex_unlock(&held_m);
    return NULL;
}

static pthread_mutex_t atfork_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t atfork_ec = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static struct res af_prepare, af_prepare_ec, af_parent, af_parent_ec, af_child, af_child_ec;
static int atfork_on;
static void prepare(void)
{
    if (!atfork_on)
        return;
    CALL(af_prepare, pthread_mutex_lock, &atfork_m);
    CALL(af_prepare_ec, pthread_mutex_lock, &atfork_ec);
}
static void in_parent(void)
{
    if (!atfork_on)
        return;
    CALL(af_parent_ec, pthread_mutex_unlock, &atfork_ec);
    CALL(af_parent, pthread_mutex_unlock, &atfork_m);
}
static void in_child(void)
{
    if (!atfork_on)
        return;
    CALL(af_child_ec, pthread_mutex_unlock, &atfork_ec);
    CALL(af_child, pthread_mutex_unlock, &atfork_m);
}

static void wait_child(const char *what, pid_t pid)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        die("waitpid", errno);
    NOTE("%s child %s=%d", what, WIFEXITED(st) ? "exit" : "signal",
         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

static void forks(void)
{
    pthread_spin_init(&held_sp, PTHREAD_PROCESS_PRIVATE);
    sem_init(&holding, 0, 0);
    sem_init(&let_go, 0, 0);
    pthread_t h = spawn(holder, NULL);
    sem_wait_nointr(&holding);

    pthread_atfork(prepare, in_parent, in_child);
    atfork_on = 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        NOTE("child: begins");
        SHOW(pthread_mutex_lock, "atfork-prepare", 0, af_prepare);
        SHOW(pthread_mutex_lock, "atfork-prepare errorcheck", 0, af_prepare_ec);
        SHOW(pthread_mutex_unlock, "atfork-child", 0, af_child);
        /* glibc: the errorcheck mutex's owner is the parent thread's TID: EPERM here. */
        SHOW(pthread_mutex_unlock, "atfork-child errorcheck", ANY, af_child_ec);
        CHECK(pthread_mutex_trylock, "child held-by-vanished-thread", EBUSY, &held_m);
        CHECK(pthread_rwlock_tryrdlock, "child held-by-vanished-thread", EBUSY, &held_rw);
        CHECK(pthread_rwlock_trywrlock, "child held-by-vanished-thread", EBUSY, &held_rw);
        CHECK(pthread_spin_trylock, "child held-by-vanished-thread", EBUSY, &held_sp);
        fresh_locks("child");
        fflush(stdout);
        exit(finish() ? 11 : 10); /* exit(), not _exit(): atexit handlers run in the child */
    }
    atfork_on = 0;
    wait_child("fork-while-another-thread-holds-locks", pid);
    SHOW(pthread_mutex_lock, "atfork-prepare (parent)", 0, af_prepare);
    SHOW(pthread_mutex_unlock, "atfork-parent", 0, af_parent);
    SHOW(pthread_mutex_unlock, "atfork-parent errorcheck", 0, af_parent_ec);
    sem_post(&let_go);
    join(h);
    CHECK(pthread_mutex_trylock, "parent released-by-holder", 0, &held_m);
    CHECK(pthread_mutex_unlock, "parent released-by-holder", 0, &held_m);
}

/* fork from a non-main thread while the main thread holds a lock. */
static void *forker(void *arg)
{
    (void)arg;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        NOTE("child-of-thread: begins");
        CHECK(pthread_mutex_trylock, "child-of-thread held-by-main", EBUSY, &held_m);
        fresh_locks("child-of-thread");
        fflush(stdout);
        _exit(finish() ? 21 : 20);
    }
    wait_child("fork-from-thread", pid);
    return NULL;
}

/* ---- exec ---------------------------------------------------------------------------- */

static int exec_child(void)
{
    NOTE("exec-child: begins");
    fresh_locks("exec-child");
    return finish() ? 31 : 30;
}

static void execs(void)
{
    char self[] = "/proc/self/exe", arg[] = "exec-child";
    char *argv[] = {self, arg, NULL};
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    wait_child("fork+exec", pid);
    fflush(stdout);
    /* The result is printed after the child has ended: printed before, it would race with
     * the child's own output to the same stdout. */
    struct res spawned;
    CALL(spawned, posix_spawn, &pid, "/proc/self/exe", NULL, NULL, argv, environ);
    int st = 0;
    if (spawned.ret == 0 && waitpid(pid, &st, 0) != pid)
        die("waitpid", errno);
    SHOW(posix_spawn, "exec-child", 0, spawned);
    if (spawned.ret == 0)
        NOTE("posix_spawn child %s=%d", WIFEXITED(st) ? "exit" : "signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* The last act: exec ourselves from a thread while locks are held and waited for. */
static _Atomic pid_t blocked_tid;
static void *blocked_waiter(void *arg)
{
    (void)arg;
    atomic_store(&blocked_tid, my_tid());
    pthread_mutex_lock(&held_m); /* never returns: the exec ends this process image */
    return NULL;
}

static void *execer(void *arg)
{
    (void)arg;
    char self[] = "/proc/self/exe", arg1[] = "after-exec", arg2[16];
    char *argv[] = {self, arg1, arg2, NULL};
    snprintf(arg2, sizeof arg2, "%d", unexpected_count);
    NOTE("exec-from-thread: main holds a mutex, another thread waits for it");
    fflush(stdout);
    execv("/proc/self/exe", argv);
    die("execv", errno);
    return NULL;
}

static pthread_t after_main;
static void *after_exec_thread(void *arg)
{
    (void)arg;
    void *v = (void *)1;
    /* The main thread has called pthread_exit: it can still be joined. */
    CHECK(pthread_join, "after-exec main-thread", 0, after_main, &v);
    NOTE("after-exec main-thread value=%ld", (long)(intptr_t)v);
    fresh_locks("after-exec-thread");
    if (finish() != 0)
        exit(1);
    return NULL; /* the last thread returns: the process exits with status 0 */
}

static int after_exec(const char *unexpected_before)
{
    unexpected_count = atoi(unexpected_before); /* carried over from the image before exec */
    NOTE("after-exec: begins");
    fresh_locks("after-exec");
    after_main = pthread_self();
    pthread_t t;
    CHECK(pthread_create, "after-exec thread", 0, &t, NULL, after_exec_thread, NULL);
    fflush(stdout);
    pthread_exit((void *)(intptr_t)77);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-child") == 0)
        return exec_child();
    if (argc > 2 && strcmp(argv[1], "after-exec") == 0)
        return after_exec(argv[2]);

    threads();
    forks();

    CHECK(pthread_mutex_lock, "main holds for fork-from-thread", 0, &held_m);
    join(spawn(forker, NULL));
    CHECK(pthread_mutex_unlock, "main releases", 0, &held_m);

    execs();

    CHECK(pthread_mutex_lock, "main holds for exec", 0, &held_m);
    spawn(blocked_waiter, NULL);
    while (atomic_load(&blocked_tid) == 0)
        sched_yield();
    wait_blocked(blocked_tid);
    join(spawn(execer, NULL)); /* never returns */
    return 99;
}
