/* False sharing (two threads taking turns writing fields 0 and 8 of a 64-byte global, as
 * sharing.c's `together`), then an end other than returning from main:
 *   abort     abort()
 *   segv      a write through a null pointer
 *   term      raise(SIGTERM), left at its default action
 *   _exit     _exit(3)            _Exit   _Exit(4)
 *   execv     execv of `sh -c "exit 5"`         execl   the same with execl, exit 6
 *   execfail  execv of a missing file (fails), the sharing again, then return 0
 *   handled   a SIGTERM handler of its own that counts; raise(SIGTERM); return 0
 *   handler   a SIGSEGV handler of its own (checking the query first says SIG_DFL) that calls
 *             _exit(7); then a write through a null pointer
 *   reraise   a SIGSEGV handler that restores SIG_DFL with signal() and re-raises
 *   vfork     a vfork child that execs `true` (it shares this process's memory: it must not
 *             write this process's results nor stop its statistics), the sharing again, 0
 *   forkexec  a forked child that execs `true` at once (no results of its own), then 0
 * Prints the struct's address; no core file is written (RLIMIT_CORE 0). */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define TURNS 600
#define PER_TURN 10

static struct {
    volatile long a;
    volatile long b;
    char pad[48];
} together __attribute__((aligned(64)));

static volatile int turn __attribute__((aligned(64)));

struct job {
    int me;
    volatile long *field;
};

static void *worker(void *arg) {
    struct job *j = arg;
    for (int t = 0; t < TURNS; t++) {
        while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != j->me)
            sched_yield();
        for (int i = 0; i < PER_TURN; i++)
            *j->field += 1;
        __atomic_store_n(&turn, 1 - j->me, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void share(void) {
    struct job ja = {0, &together.a}, jb = {1, &together.b};
    pthread_t ta, tb;
    turn = 0;
    pthread_create(&ta, NULL, worker, &ja);
    pthread_create(&tb, NULL, worker, &jb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
}

static volatile sig_atomic_t terms;

static void count_term(int sig) {
    (void)sig;
    terms++;
}

static void exit_7(int sig) {
    (void)sig;
    _exit(7);
}

static void reraise(int sig) {
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "abort";
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    printf("struct %p\n", (void *)&together);
    fflush(stdout);
    if (!strcmp(mode, "handler")) {
        struct sigaction old, act;
        if (sigaction(SIGSEGV, NULL, &old) != 0 || old.sa_handler != SIG_DFL) {
            fprintf(stderr, "SIGSEGV is not at SIG_DFL for the program\n");
            return 1;
        }
        memset(&act, 0, sizeof act);
        act.sa_handler = exit_7;
        sigaction(SIGSEGV, &act, NULL);
        if (sigaction(SIGSEGV, NULL, &old) != 0 || old.sa_handler != exit_7) {
            fprintf(stderr, "the program's SIGSEGV handler is not the one it set\n");
            return 1;
        }
    }
    if (!strcmp(mode, "reraise") && signal(SIGSEGV, reraise) != SIG_DFL) {
        fprintf(stderr, "signal() did not return SIG_DFL\n");
        return 1;
    }
    share();
    if (together.a + together.b != 2 * TURNS * PER_TURN)
        return 1;
    if (!strcmp(mode, "abort"))
        abort();
    if (!strcmp(mode, "segv") || !strcmp(mode, "handler") || !strcmp(mode, "reraise"))
        *(volatile int *)(argc > 99 ? argv[0] : NULL) = 1;
    if (!strcmp(mode, "term"))
        raise(SIGTERM);
    if (!strcmp(mode, "_exit"))
        _exit(3);
    if (!strcmp(mode, "_Exit"))
        _Exit(4);
    if (!strcmp(mode, "execv")) {
        char *args[] = {"sh", "-c", "exit 5", NULL};
        execv("/bin/sh", args);
        return 1;
    }
    if (!strcmp(mode, "execl")) {
        execl("/bin/sh", "sh", "-c", "exit 6", (char *)NULL);
        return 1;
    }
    if (!strcmp(mode, "execfail")) {
        char *args[] = {"missing", NULL};
        execv("/nonexistent/missing", args);
        share();
        return together.a + together.b == 4 * TURNS * PER_TURN ? 0 : 1;
    }
    if (!strcmp(mode, "vfork") || !strcmp(mode, "forkexec")) {
        pid_t child = mode[0] == 'v' ? vfork() : fork();
        if (child == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int status = 0;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 1;
        if (mode[0] == 'f')
            return 0;
        share();
        return together.a + together.b == 4 * TURNS * PER_TURN ? 0 : 1;
    }
    if (!strcmp(mode, "handled")) {
        signal(SIGTERM, count_term);
        raise(SIGTERM);
        return terms == 1 ? 0 : 1;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
