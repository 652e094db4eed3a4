/*
 * spin: pthread_spin_{lock,trylock,unlock} on private and process-shared spinlocks, on the
 * stack, in static storage and in shared memory (there is no static initialiser: a
 * zero-filled pthread_spinlock_t is *locked* on x86-64 glibc, whose unlocked value is 1 --
 * printed after init to show it), tries on a held lock from this thread and another (EBUSY), a waiter that really spins
 * until the holder lets go, a counter incremented under the lock by several threads (the
 * total is exact), and a process-shared spinlock held by the parent and tried by a child.
 */
#include "common.h"
#include <sys/mman.h>
#include <sys/wait.h>

static pthread_spinlock_t global_lock; /* static storage, pthread_spin_init'ed in main */

struct spinner {
    pthread_spinlock_t *s;
    _Atomic int started;
    struct res r, unlock;
};

static void *try_main(void *arg)
{
    struct spinner *c = arg;
    CALL(c->r, pthread_spin_trylock, c->s);
    return NULL;
}

static void *lock_main(void *arg)
{
    struct spinner *c = arg;
    atomic_store(&c->started, 1);
    CALL(c->r, pthread_spin_lock, c->s); /* spins until main unlocks */
    CALL(c->unlock, pthread_spin_unlock, c->s);
    return NULL;
}

#define COUNT_THREADS 4
#define COUNT_ITERS 20000
static pthread_spinlock_t count_lock;
static long counter;
static _Atomic int count_failures;

static void *count_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < COUNT_ITERS; i++) {
        errno = ERRNO_SENTINEL;
        int a = pthread_spin_lock(&count_lock);
        counter++;
        int b = pthread_spin_unlock(&count_lock);
        if (a || b || errno != ERRNO_SENTINEL)
            atomic_fetch_add(&count_failures, 1);
    }
    return NULL;
}

static void exercise(const char *label, pthread_spinlock_t *s)
{
    char w[160];
    struct spinner c = {.s = s};
#define W(x) (snprintf(w, sizeof w, "%s %s", label, x), w)
    CHECK(pthread_spin_trylock, W("free"), 0, s);
    CHECK(pthread_spin_unlock, W("after-trylock"), 0, s);
    CHECK(pthread_spin_lock, W("free"), 0, s);
    CHECK(pthread_spin_trylock, W("held-by-self"), EBUSY, s);
    join(spawn(try_main, &c));
    SHOW(pthread_spin_trylock, W("held-by-other"), EBUSY, c.r);
    CHECK(pthread_spin_unlock, W("by-owner"), 0, s);
    CHECK(pthread_spin_trylock, W("free-again"), 0, s);
    CHECK(pthread_spin_unlock, W("after-trylock-again"), 0, s);

    /* A waiter that spins in pthread_spin_lock: the holder waits a little (it cannot see
     * a spinning thread from outside) so the contended path runs in practice. */
    struct spinner d = {.s = s};
    CHECK(pthread_spin_lock, W("contended/owner-lock"), 0, s);
    pthread_t t = spawn(lock_main, &d);
    while (!atomic_load(&d.started))
        sched_yield();
    sleep_ms(5);
    CHECK(pthread_spin_unlock, W("contended/owner-unlock"), 0, s);
    join(t);
    SHOW(pthread_spin_lock, W("contended/waiter-lock"), 0, d.r);
    SHOW(pthread_spin_unlock, W("contended/waiter-unlock"), 0, d.unlock);
#undef W
}

int main(void)
{
    pthread_spinlock_t priv;
    CHECK(pthread_spin_init, "private init", 0, &priv, PTHREAD_PROCESS_PRIVATE);
    exercise("private", &priv);
    CHECK(pthread_spin_destroy, "private destroy", 0, &priv);
    CHECK(pthread_spin_init, "global init", 0, &global_lock, PTHREAD_PROCESS_PRIVATE);
    NOTE("note spinlock value after init=%d (not 0: a zero-filled spinlock is held)",
         (int)global_lock);
    exercise("global", &global_lock);

    /* Several threads incrementing a counter under the lock: the total must be exact. */
    pthread_spin_init(&count_lock, PTHREAD_PROCESS_PRIVATE);
    pthread_t th[COUNT_THREADS];
    for (int i = 0; i < COUNT_THREADS; i++)
        th[i] = spawn(count_main, NULL);
    for (int i = 0; i < COUNT_THREADS; i++)
        join(th[i]);
    NOTE("counter threads=%d iterations=%d total=%ld (want %ld) failures=%d", COUNT_THREADS,
         COUNT_ITERS, counter, (long)COUNT_THREADS * COUNT_ITERS, atomic_load(&count_failures));
    if (counter != (long)COUNT_THREADS * COUNT_ITERS)
        unexpected_count++;

    /* Process-shared spinlock in shared memory, held by the parent, tried by a child. */
    pthread_spinlock_t *ps = (pthread_spinlock_t *)mmap(NULL, sizeof *ps, PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ps == MAP_FAILED)
        die("mmap", errno);
    CHECK(pthread_spin_init, "pshared init", 0, ps, PTHREAD_PROCESS_SHARED);
    exercise("pshared", ps);
    CHECK(pthread_spin_lock, "pshared parent-holds", 0, ps);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int r = pthread_spin_trylock(ps);
        _exit(r == EBUSY ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    NOTE("fork pshared child-trylock-EBUSY exit=%d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    CHECK(pthread_spin_unlock, "pshared parent-releases", 0, ps);
    pthread_spin_destroy(ps);
    munmap((void *)ps, sizeof *ps);
    return finish();
}
