/*
 * barrier: pthread_barrier_wait.  In every round exactly one of the N waiting threads gets
 * PTHREAD_BARRIER_SERIAL_THREAD (-1) and the others 0; which one is not specified, so only
 * the counts are printed.  Cases: N = 4 threads over many rounds (the barrier is reused),
 * a count of 1 (every call is the serial thread, nobody waits), a barrier destroyed and
 * re-initialised with another count at the same address, and a process-shared barrier
 * between a parent and a child process.  errno must be untouched by every wait.
 */
#include "common.h"
#include <sys/mman.h>
#include <sys/wait.h>

#define NTHREADS 4
#define ROUNDS 300

struct tally {
    pthread_barrier_t *b;
    int rounds;
    int serial, zero, other, errno_changed;
};

static void *waiter(void *arg)
{
    struct tally *t = arg;
    for (int i = 0; i < t->rounds; i++) {
        errno = ERRNO_SENTINEL;
        int r = pthread_barrier_wait(t->b);
        if (errno != ERRNO_SENTINEL)
            t->errno_changed++;
        if (r == PTHREAD_BARRIER_SERIAL_THREAD)
            t->serial++;
        else if (r == 0)
            t->zero++;
        else
            t->other++;
    }
    return NULL;
}

static void run(const char *label, pthread_barrier_t *b, int nthreads, int rounds)
{
    struct tally t[NTHREADS + 1];
    pthread_t th[NTHREADS + 1];
    int serial = 0, zero = 0, other = 0, errno_changed = 0, most = 0;
    for (int i = 0; i < nthreads; i++) {
        t[i] = (struct tally){.b = b, .rounds = rounds};
        th[i] = spawn(waiter, &t[i]);
    }
    for (int i = 0; i < nthreads; i++) {
        join(th[i]);
        serial += t[i].serial;
        zero += t[i].zero;
        other += t[i].other;
        errno_changed += t[i].errno_changed;
        if (t[i].serial > most)
            most = t[i].serial;
    }
    NOTE("pthread_barrier_wait %s threads=%d rounds=%d serial=%d zero=%d other=%d "
         "errno-changed=%d",
         label, nthreads, rounds, serial, zero, other, errno_changed);
    if (serial != rounds || zero != rounds * (nthreads - 1) || other || errno_changed)
        unexpected_count++;
}

int main(void)
{
    pthread_barrier_t b;
    CHECK(pthread_barrier_init, "count-0 init", EINVAL, &b, NULL, 0);
    CHECK(pthread_barrier_init, "count-4 init", 0, &b, NULL, NTHREADS);
    run("count-4", &b, NTHREADS, ROUNDS);
    CHECK(pthread_barrier_destroy, "count-4 destroy", 0, &b);

    CHECK(pthread_barrier_init, "count-1 init", 0, &b, NULL, 1);
    CHECK(pthread_barrier_wait, "count-1 main-thread", PTHREAD_BARRIER_SERIAL_THREAD, &b);
    run("count-1", &b, 1, ROUNDS);
    CHECK(pthread_barrier_destroy, "count-1 destroy", 0, &b);

    /* Same memory, new count: a probe must not remember the old one. */
    CHECK(pthread_barrier_init, "reinit-count-3 init", 0, &b, NULL, 3);
    run("reinit-count-3", &b, 3, ROUNDS);
    CHECK(pthread_barrier_destroy, "reinit-count-3 destroy", 0, &b);

    /* Main thread plus threads: the main thread's result is printed too. */
    CHECK(pthread_barrier_init, "count-2 init", 0, &b, NULL, 2);
    struct tally one = {.b = &b, .rounds = 1};
    pthread_t th = spawn(waiter, &one);
    errno = ERRNO_SENTINEL;
    int r = pthread_barrier_wait(&b);
    join(th);
    NOTE("pthread_barrier_wait count-2 main+thread serial=%d (exactly one of the two)",
         (r == PTHREAD_BARRIER_SERIAL_THREAD) + one.serial);
    pthread_barrier_destroy(&b);

    /* Process-shared: parent and child meet ROUNDS times. */
    struct shared {
        pthread_barrier_t b;
        int child_serial;
    } *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        die("mmap", errno);
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    CHECK(pthread_barrier_init, "pshared init", 0, &sh->b, &ba, 2);
    pthread_barrierattr_destroy(&ba);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < ROUNDS; i++)
            sh->child_serial += pthread_barrier_wait(&sh->b) == PTHREAD_BARRIER_SERIAL_THREAD;
        _exit(0);
    }
    int serial = 0;
    for (int i = 0; i < ROUNDS; i++)
        serial += pthread_barrier_wait(&sh->b) == PTHREAD_BARRIER_SERIAL_THREAD;
    int st = 0;
    waitpid(pid, &st, 0);
    NOTE("pthread_barrier_wait pshared parent+child rounds=%d serial=%d child-exit=%d", ROUNDS,
         serial + sh->child_serial, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    if (serial + sh->child_serial != ROUNDS)
        unexpected_count++;
    pthread_barrier_destroy(&sh->b);
    munmap(sh, sizeof *sh);
    return finish();
}
