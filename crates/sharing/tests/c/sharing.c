/* Two threads taking turns (so their accesses interleave whatever the machine) incrementing
 * fields of one object. Modes:
 *   together  fields at offsets 0 and 8 of a 64-byte global struct (false sharing)
 *   apart     fields at offsets 0 and 64 of a 128-byte global struct
 *   heap      fields at 0 and 8 of a line inside a malloc'd block; the block is freed, a new
 *             one allocated (same size) and the threads run again on it
 *   lock      a pthread mutex and the counter it protects in one line
 *   fork      `together`, then a child that runs `together` again and exits
 * Prints the addresses the test looks for. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TURNS 600
#define PER_TURN 10

static struct {
    volatile long a;
    volatile long b;
    char pad[48];
} together __attribute__((aligned(64)));

static struct {
    volatile long a;
    char pad[56];
    volatile long b;
    char pad2[56];
} apart __attribute__((aligned(128)));

static struct {
    pthread_mutex_t m;
    volatile long counter;
} locked __attribute__((aligned(64))) = {PTHREAD_MUTEX_INITIALIZER, 0};

static volatile int turn __attribute__((aligned(64)));

struct job {
    int me;
    volatile long *field;
    int use_lock;
};

static void *worker(void *arg) {
    struct job *j = arg;
    for (int t = 0; t < TURNS; t++) {
        while (__atomic_load_n(&turn, __ATOMIC_ACQUIRE) != j->me)
            sched_yield();
        for (int i = 0; i < PER_TURN; i++) {
            if (j->use_lock) {
                pthread_mutex_lock(&locked.m);
                locked.counter++;
                pthread_mutex_unlock(&locked.m);
            } else {
                *j->field += 1;
            }
        }
        __atomic_store_n(&turn, 1 - j->me, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void run(volatile long *a, volatile long *b, int use_lock) {
    struct job ja = {0, a, use_lock}, jb = {1, b, use_lock};
    pthread_t ta, tb;
    turn = 0;
    pthread_create(&ta, NULL, worker, &ja);
    pthread_create(&tb, NULL, worker, &jb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "together";
    if (!strcmp(mode, "together")) {
        printf("struct %p\n", (void *)&together);
        run(&together.a, &together.b, 0);
        return together.a + together.b == 2 * TURNS * PER_TURN ? 0 : 1;
    }
    if (!strcmp(mode, "apart")) {
        printf("struct %p\n", (void *)&apart);
        run(&apart.a, &apart.b, 0);
        return apart.a + apart.b == 2 * TURNS * PER_TURN ? 0 : 1;
    }
    if (!strcmp(mode, "heap")) {
        for (int phase = 1; phase <= 2; phase++) {
            char *block = malloc(256);
            uintptr_t line = ((uintptr_t)block + 63) & ~(uintptr_t)63;
            volatile long *f = (volatile long *)line;
            f[0] = 0;
            f[1] = 0;
            printf("block%d %p 256\nstruct%d %p\n", phase, (void *)block, phase, (void *)line);
            run(&f[0], &f[1], 0);
            if (f[0] + f[1] != 2 * TURNS * PER_TURN)
                return 1;
            if (phase == 1)
                free(block);
        }
        return 0;
    }
    if (!strcmp(mode, "lock")) {
        printf("struct %p\n", (void *)&locked);
        run(NULL, NULL, 1);
        return locked.counter == 2 * TURNS * PER_TURN ? 0 : 1;
    }
    if (!strcmp(mode, "fork")) {
        printf("struct %p\nparent %d\n", (void *)&together, (int)getpid());
        fflush(stdout);
        run(&together.a, &together.b, 0);
        pid_t child = fork();
        if (child == 0) {
            run(&together.a, &together.b, 0);
            exit(together.a + together.b == 4 * TURNS * PER_TURN ? 0 : 1);
        }
        int status = 0;
        waitpid(child, &status, 0);
        printf("child %d\n", (int)child);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
